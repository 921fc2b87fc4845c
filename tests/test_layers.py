"""The house's layering rules, read from the source (``docs/architecture.md`` draws them).

Each rule is a function of an import graph (module name → the juggle modules it imports, at
any level: ``if TYPE_CHECKING:`` blocks and imports inside functions count too), so each is
shown to fail on a graph that breaks it (``test_each_rule_catches_its_break``) and to hold on
the real tree.

1. No runtime module imports ``juggle.runtime.framework`` (the facade); only the package
   ``__init__`` and command modules may.
2. ``juggle.core`` imports nothing of juggle outside ``juggle.core`` and ``juggle.errors``.
3. ``juggle.daemon`` imports runtime names only from the ``juggle`` or ``juggle.runtime``
   packages, and only names they export (``__all__``): no runtime submodule, no private name.
4. No library package imports a command module (``juggle.commands``).
5. No import cycle passes through a runtime module.
6. No module under ``juggle.runtime`` imports the simulated fabric (``juggle.fabric.sim``):
   contexts are the drivers' own register work.
7. ``juggle.fabric`` looks down only: it imports nothing of the runtime, the daemon, the
   dashboard or the command modules (the runtime builds on the fabric, never the reverse).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

import juggle
import juggle.runtime

SRC = Path(juggle.__file__).parent

#: The library packages: code that must work without the command line.
LIBRARY = (
    "juggle.bench",
    "juggle.core",
    "juggle.daemon",
    "juggle.dashboard",
    "juggle.fabric",
    "juggle.hwthreads",
    "juggle.runtime",
    "juggle.services",
    "juggle.simulate",
)


@dataclass(frozen=True, slots=True)
class Edge:
    """``module`` imports ``target`` (a module), naming ``names`` from it (empty: the module)."""

    module: str
    target: str
    names: tuple[str, ...]
    line: int


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def edges_of(path: Path) -> Iterator[Edge]:
    """Every juggle import in ``path``, wherever it stands in the file."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:  # relative: resolve against the package
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, target] if target else base)
            if target == "juggle" or target.startswith("juggle."):
                yield Edge(name, target, tuple(a.name for a in node.names), node.lineno)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("juggle"):
                    yield Edge(name, alias.name, (), node.lineno)


def graph(root: Path = SRC) -> list[Edge]:
    return [
        e
        for path in sorted(root.rglob("*.py"))
        if "examples" not in path.relative_to(root).parts
        for e in edges_of(path)
    ]


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def resolved(edge: Edge, modules: set[str]) -> list[str]:
    """The modules ``edge`` loads: ``from pkg import sub`` loads ``pkg.sub`` when it is one."""
    out = [edge.target]
    out += [f"{edge.target}.{n}" for n in edge.names if f"{edge.target}.{n}" in modules]
    return out


# -- the rules: each returns the offending edges, as lines to read ------------------------------


def runtime_imports_framework(edges: list[Edge], modules: set[str]) -> list[str]:
    return [
        f"{e.module}:{e.line} imports {e.target}"
        for e in edges
        if within(e.module, "juggle.runtime")
        and e.module != "juggle.runtime"
        and "juggle.runtime.framework" in resolved(e, modules)
    ]


def core_reaches_out(edges: list[Edge], modules: set[str]) -> list[str]:
    return [
        f"{e.module}:{e.line} imports {e.target}"
        for e in edges
        if within(e.module, "juggle.core")
        and not within(e.target, "juggle.core")
        and e.target != "juggle.errors"
    ]


def daemon_uses_runtime_internals(
    edges: list[Edge], modules: set[str], public: Mapping[str, frozenset[str]]
) -> list[str]:
    """``public``: package → the names it exports (``juggle`` and ``juggle.runtime``)."""
    out = []
    for e in edges:
        if not within(e.module, "juggle.daemon"):
            continue
        if e.target in public:
            hidden = [
                n
                for n in e.names
                if n not in public[e.target]
                # a package's other submodules (juggle.errors, say) are not runtime names
                and not (
                    f"{e.target}.{n}" in modules and not within(f"{e.target}.{n}", "juggle.runtime")
                )
            ]
            if hidden:
                out.append(f"{e.module}:{e.line} imports {', '.join(hidden)} from {e.target}")
        elif within(e.target, "juggle.runtime"):
            out.append(f"{e.module}:{e.line} imports from {e.target} (not the package's API)")
    return out


def library_imports_commands(edges: list[Edge], modules: set[str]) -> list[str]:
    return [
        f"{e.module}:{e.line} imports {e.target}"
        for e in edges
        if any(within(e.module, lib) for lib in LIBRARY)
        and any(within(t, "juggle.commands") for t in resolved(e, modules))
    ]


def runtime_cycles(edges: list[Edge], modules: set[str]) -> list[str]:
    """The import graph's strongly connected components of more than one module that hold a
    runtime module (Tarjan): a cycle through a module outside (``juggle.build``) counts."""
    nodes = sorted(m for m in modules if m != "juggle.runtime")
    succ: dict[str, set[str]] = {m: set() for m in nodes}
    for e in edges:
        if e.module in succ:
            succ[e.module].update(t for t in resolved(e, modules) if t in succ and t != e.module)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[str] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(succ[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 and any(within(m, "juggle.runtime") for m in comp):
                found.append(" ↔ ".join(sorted(comp)))

    for v in nodes:
        if v not in index:
            visit(v)
    return found


def runtime_imports_simulator(edges: list[Edge], modules: set[str]) -> list[str]:
    return [
        f"{e.module}:{e.line} imports {e.target}"
        for e in edges
        if within(e.module, "juggle.runtime") and within(e.target, "juggle.fabric.sim")
    ]


#: what the fabric must never import: the floors above it
ABOVE_FABRIC = ("juggle.runtime", "juggle.daemon", "juggle.dashboard", "juggle.commands")


def fabric_looks_up(edges: list[Edge], modules: set[str]) -> list[str]:
    return [
        f"{e.module}:{e.line} imports {t}"
        for e in edges
        if within(e.module, "juggle.fabric")
        for t in resolved(e, modules)[:1]
        if any(within(t, up) for up in ABOVE_FABRIC)
    ]


# -- the real tree --------------------------------------------------------------------------


def real() -> tuple[list[Edge], set[str]]:
    edges = graph()
    modules = {
        module_name(p) for p in SRC.rglob("*.py") if "examples" not in p.relative_to(SRC).parts
    }
    return edges, modules


def public_api() -> dict[str, frozenset[str]]:
    return {
        "juggle": frozenset(juggle.__all__),
        "juggle.runtime": frozenset(getattr(juggle.runtime, "__all__", ())),
    }


def test_the_graph_sees_the_tree() -> None:
    edges, modules = real()
    assert len(modules) > 100
    assert any(e.module == "juggle" and e.target == "juggle.runtime.framework" for e in edges)
    # imports under TYPE_CHECKING and inside functions are edges too
    assert any(e.module == "juggle" and e.target == "juggle.daemon.client" for e in edges)


def test_no_runtime_module_imports_the_framework() -> None:
    assert runtime_imports_framework(*real()) == []


def test_core_imports_only_core_and_errors() -> None:
    assert core_reaches_out(*real()) == []


def test_the_daemon_uses_only_the_public_runtime() -> None:
    assert juggle.runtime.__all__, "juggle.runtime must say what it exports"
    assert daemon_uses_runtime_internals(*real(), public_api()) == []


def test_no_library_package_imports_a_command_module() -> None:
    assert library_imports_commands(*real()) == []


def test_the_runtime_has_no_import_cycle() -> None:
    assert runtime_cycles(*real()) == []


def test_the_runtime_does_not_import_the_simulator() -> None:
    assert runtime_imports_simulator(*real()) == []


def test_the_fabric_imports_nothing_above_it() -> None:
    assert fabric_looks_up(*real()) == []


# -- each rule fails when broken -------------------------------------------------------------

MODULES = {
    "juggle",
    "juggle.errors",
    "juggle.runtime",
    "juggle.runtime.framework",
    "juggle.runtime.services",
    "juggle.runtime.proxy",
    "juggle.runtime.tracing",
    "juggle.core",
    "juggle.core.allocator",
    "juggle.fabric.profiles",
    "juggle.fabric.sim.window",
    "juggle.fabric.linux.dfxmgr",
    "juggle.runtime.descriptors",
    "juggle.daemon.server",
    "juggle.commands",
    "juggle.commands.cli",
}
PUBLIC = {"juggle": frozenset({"Framework"}), "juggle.runtime": frozenset({"Framework"})}


def e(module: str, target: str, *names: str) -> Edge:
    return Edge(module, target, names, 1)


BREAKS = [
    pytest.param(
        runtime_imports_framework,
        [e("juggle.runtime.services", "juggle.runtime.framework", "Framework")],
        id="runtime-imports-framework",
    ),
    pytest.param(
        runtime_imports_framework,
        [e("juggle.runtime.services", "juggle.runtime", "framework")],
        id="runtime-imports-framework-as-submodule",
    ),
    pytest.param(
        core_reaches_out,
        [e("juggle.core.allocator", "juggle.fabric.profiles", "BoardProfile")],
        id="core-reaches-out",
    ),
    pytest.param(
        daemon_uses_runtime_internals,
        [e("juggle.daemon.server", "juggle.runtime.proxy", "binding_of")],
        id="daemon-imports-runtime-submodule",
    ),
    pytest.param(
        daemon_uses_runtime_internals,
        [e("juggle.daemon.server", "juggle.runtime", "_Private")],
        id="daemon-imports-unexported-name",
    ),
    pytest.param(
        library_imports_commands,
        [e("juggle.core.allocator", "juggle.commands.cli", "app")],
        id="library-imports-command",
    ),
    pytest.param(
        library_imports_commands,
        [e("juggle.runtime.services", "juggle.commands", "cli")],
        id="library-imports-command-as-submodule",
    ),
    pytest.param(
        runtime_cycles,
        [
            e("juggle.runtime.services", "juggle.runtime.proxy", "X"),
            e("juggle.runtime.proxy", "juggle.runtime.tracing", "Y"),
            e("juggle.runtime.tracing", "juggle.runtime.services", "Z"),
        ],
        id="runtime-cycle",
    ),
    pytest.param(
        runtime_cycles,
        [
            e("juggle.runtime.services", "juggle.commands.cli", "X"),
            e("juggle.commands.cli", "juggle.runtime.services", "Y"),
        ],
        id="runtime-cycle-through-a-module-outside",
    ),
    pytest.param(
        fabric_looks_up,
        [e("juggle.fabric.linux.dfxmgr", "juggle.runtime.descriptors", "parse_toml")],
        id="fabric-imports-the-runtime",
    ),
    pytest.param(
        runtime_imports_simulator,
        [e("juggle.runtime.services", "juggle.fabric.sim.window", "SimWindow")],
        id="runtime-imports-simulator",
    ),
]


@pytest.mark.parametrize(("rule", "edges"), BREAKS)
def test_each_rule_catches_its_break(rule: object, edges: list[Edge]) -> None:
    args: tuple[object, ...] = (edges, MODULES)
    if rule is daemon_uses_runtime_internals:
        args += (PUBLIC,)
    found = rule(*args)  # type: ignore[operator]
    assert len(found) == 1, found


@pytest.mark.parametrize(
    ("rule", "edges"),
    [
        (runtime_imports_framework, [e("juggle.runtime", "juggle.runtime.framework", "F")]),
        (runtime_imports_framework, [e("juggle.commands.cli", "juggle.runtime.framework", "F")]),
        (core_reaches_out, [e("juggle.core.allocator", "juggle.errors", "JuggleError")]),
        (daemon_uses_runtime_internals, [e("juggle.daemon.server", "juggle", "Framework")]),
        (daemon_uses_runtime_internals, [e("juggle.daemon.server", "juggle.runtime", "Framework")]),
        (daemon_uses_runtime_internals, [e("juggle.daemon.server", "juggle", "errors")]),
        (library_imports_commands, [e("juggle.commands.cli", "juggle.runtime", "Framework")]),
        (fabric_looks_up, [e("juggle.fabric.linux.dfxmgr", "juggle.errors", "DfxPackageError")]),
        (
            runtime_cycles,
            [
                e("juggle.runtime.services", "juggle.runtime.proxy", "X"),
                e("juggle.runtime.proxy", "juggle.runtime.tracing", "Y"),
            ],
        ),
    ],
)
def test_allowed_imports_pass(rule: object, edges: list[Edge]) -> None:
    args: tuple[object, ...] = (edges, MODULES)
    if rule is daemon_uses_runtime_internals:
        args += (PUBLIC,)
    assert rule(*args) == []  # type: ignore[operator]
