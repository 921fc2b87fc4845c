"""Controller plugins: validated at registration, found through entry points, used by name."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from juggle.commands.simulate.router import register
from juggle.core.controllers import (
    ControllerRegistry,
    JuggleAction,
    StatsSnapshot,
    available_controllers,
    default_registry,
    hookimpl,
    load_controller,
)
from juggle.errors import ControllerError, PluginError


class Keep:
    name = "keep"

    def __init__(self, patience: int = 1) -> None:
        self.patience = patience

    def decide(self, snapshot: StatsSnapshot) -> Sequence[JuggleAction]:
        return []


class GoodPlugin:
    @hookimpl
    def juggle_controllers(self) -> Sequence[type]:
        return [Keep]


class NoDecide:
    name = "no-decide"


class TwoArgs:
    name = "two-args"

    def decide(self, snapshot: StatsSnapshot, extra: int) -> Sequence[JuggleAction]:
        return []


class NeedsOption:
    name = "needs-option"

    def __init__(self, level: int) -> None:
        self.level = level

    def decide(self, snapshot: StatsSnapshot) -> Sequence[JuggleAction]:
        return []


class BadName:
    name = "Bad Name"

    def decide(self, snapshot: StatsSnapshot) -> Sequence[JuggleAction]:
        return []


def providing(*classes: type) -> object:
    class Provider:
        @hookimpl
        def juggle_controllers(self) -> Sequence[type]:
            return list(classes)

    return Provider()


class WrongHookArgs:
    @hookimpl
    def juggle_controllers(self, extra: int) -> Sequence[type]:
        return [Keep]


class TypoHook:
    @hookimpl
    def juggle_controler(self) -> Sequence[type]:
        return [Keep]


class NoHook:
    def juggle_controllers(self) -> Sequence[type]:  # not marked: not a hook implementation
        return [Keep]


def test_a_good_plugin_registers_and_builds_with_options() -> None:
    registry = ControllerRegistry()
    assert registry.register(GoodPlugin(), name="good") == ["keep"]
    controller = registry.create("keep", patience=3)
    assert isinstance(controller, Keep) and controller.patience == 3
    assert registry.plugin_of("keep") == "good"
    with pytest.raises(ControllerError, match="'impatience'"):
        registry.create("keep", impatience=1)


@pytest.mark.parametrize(
    ("plugin", "message"),
    [
        (providing(NoDecide), "has no decide"),
        (providing(TwoArgs), "exactly one argument"),
        (providing(NeedsOption), "'level' needs a default"),
        (providing(BadName), "needs a name"),
        (providing("not a class"), "not a class"),  # type: ignore[arg-type]
        (WrongHookArgs(), "refused"),
        (TypoHook(), "refused"),
        (NoHook(), "implements no juggle_controllers hook"),
    ],
)
def test_a_bad_plugin_is_refused_at_registration_naming_it(plugin: object, message: str) -> None:
    registry = default_registry(entry_points=False)
    before = registry.names()
    with pytest.raises(PluginError, match=message) as caught:
        registry.register(plugin, name="suspect")
    assert "suspect" in str(caught.value) and caught.value.plugin == "suspect"
    assert registry.names() == before
    registry.register(GoodPlugin(), name="good-after")  # the registry still works
    assert "keep" in registry.names()


def test_a_plugin_cannot_take_a_builtin_name_or_register_twice() -> None:
    class Fifo(Keep):
        name = "fifo"

    registry = default_registry(entry_points=False)
    with pytest.raises(PluginError, match="'fifo' is already provided by 'juggle.builtin'"):
        registry.register(providing(Fifo), name="impostor")
    plugin = GoodPlugin()
    registry.register(plugin, name="good")
    with pytest.raises(PluginError, match="already registered"):
        registry.register(plugin, name="good")


def test_builtins_are_all_there() -> None:
    names = default_registry(entry_points=False).names()
    expected = {"static", "manual", "foreground", "distribution", "fifo", "adaptive"}
    assert expected | {"oracle", "cost-aware"} <= set(names)
    with pytest.raises(ControllerError, match="unknown controller 'nope'"):
        load_controller("nope")


# -- a plugin installed as a separate package ----------------------------------------------------

PLUGIN_SOURCE = """
from juggle.core.controllers import JuggleAction, hookimpl

DECISIONS = []


class AlwaysDes:
    \"\"\"Keeps the router's DES units in the reconfigurable part (Config_B), whatever comes.\"\"\"

    name = "{name}"

    def decide(self, snapshot):
        DECISIONS.append(snapshot.time_s)
        held = tuple(s.service_id for s in snapshot.in_hardware())
        busy = any(r.state == "Reconfig" for r in snapshot.regions)
        if busy or 1 in held:
            return []
        return [JuggleAction(1, held, "always des")]


@hookimpl
def juggle_controllers():
    return [AlwaysDes]
"""


def install_package(root: Path, package: str, source: str, entry: str) -> None:
    """A package and its dist-info, as pip would leave them in site-packages."""
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text(textwrap.dedent(source))
    info = root / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[juggle.controllers]\n{entry}\n")


def test_plugin_package_is_found_by_entry_point_and_used_by_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = "jgx_always_des"
    install_package(
        tmp_path, package, PLUGIN_SOURCE.format(name="always-des"), f"always = {package}"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, package, raising=False)
    assert "always-des" in available_controllers()
    app = typer.Typer()
    register(app)
    app.callback()(lambda: None)
    args = ["edge-router", "--experiment", "fig3a", "--policy", "always-des", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert list(doc["speedup"]) == ["always-des"]
    assert all(n >= 1 for n in doc["reconfigurations"]["always-des"])
    assert all(s != 1.0 for s in doc["speedup"]["always-des"])
    assert len(sys.modules[package].DECISIONS) > 100


def test_an_entry_point_naming_a_class_directly_is_wrapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = "jgx_direct_class"
    install_package(
        tmp_path, package, PLUGIN_SOURCE.format(name="direct"), f"direct = {package}:AlwaysDes"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, package, raising=False)
    controller = load_controller("direct")
    assert controller.name == "direct"


def test_a_bad_installed_plugin_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = "jgx_broken_policy"
    source = "class Broken:\n    name = 'broken'\n"
    install_package(tmp_path, package, source, f"broken = {package}:Broken")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, package, raising=False)
    with pytest.raises(PluginError, match=rf"broken \({package}:Broken\).*no decide"):
        available_controllers()
    app = typer.Typer()
    register(app)
    app.callback()(lambda: None)
    result = CliRunner().invoke(app, ["edge-router", "--experiment", "fig3a", "--json"])
    assert result.exit_code == 2
    assert "broken" in result.output and "no decide" in result.output


def test_an_entry_point_that_does_not_import_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = "jgx_missing_module"
    info = tmp_path / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[juggle.controllers]\nghost = {package}.nowhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match="'ghost .*cannot be loaded"):
        default_registry()
