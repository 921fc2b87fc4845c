"""``juggle module test``: a module's register model and its RTL, side by side, through its driver.

For every hardware service of a module folder, :func:`check_module` opens the board twice, a
simulated fabric whose window is the design's register model and an ``rtl`` fabric whose
window is the design's Verilog (the module's own ``hdl/``, else juggle's reference core of that
name), programs the service's bitstream into its region on both, builds the module's driver on
each window, and calls every interface method on both drivers with the same stimuli, in the
same order:

1. the module's own *vectors*, from power-on: ``vectors.json`` beside the descriptor (see
   :func:`load_vectors`), each call with the result it must return;
2. *known answers*: edge values of each parameter's type (0, 1, -1, 0xFFFFFFFF, empty and
   odd-sized bytes, ...) for every data method, then each state-setting method's edge values,
   each followed by every data method's again;
3. *random* stimuli drawn from the methods' type annotations (``int``, ``bytes``, ``bool``,
   ``str``, ``float``, ``bytearray``, ``X | Y`` (the members of those kinds), ``list[X]``,
   ``tuple[...]``; ints signed and unsigned 32-bit; bytes at most :data:`MAX_BYTES` long;
   seeded), ``samples`` per method, in random order.

State-setting methods (``set_mask``) are called like the others, so the state they set is
exercised too. Each call's answer is the returned value, any ``bytearray`` argument as the
call left it, or the type of the exception raised; the cycles it took are what the fabric's
clock advanced during the call (*modeled* on the model's fabric, *measured* on the RTL's: the
cycles the Verilog ran, at the board's bus cost per access). The module's software tier (else
its native tier) runs the same calls and gives the expected answer; a vector's ``expect``
overrides it. A call is a mismatch when model and RTL answer differently, take different
cycles, or either differs from the expected answer; it is reported with its stimulus.

Nothing here installs the module: its code is imported in a namespace of its own (as install
does) and unloaded afterwards.
"""

from __future__ import annotations

import copy
import inspect
import json
import random
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from juggle.errors import (
    BackendError,
    ConfigurationError,
    DescriptorError,
    JuggleError,
    ModuleError,
    UnknownInterfaceError,
    scalar,
)

if TYPE_CHECKING:
    from juggle.runtime.rtlsources import DesignRtl

__all__ = [
    "DEFAULT_SAMPLES",
    "MAX_BYTES",
    "MAX_SAMPLES",
    "VECTORS_FILE",
    "Answer",
    "CheckReport",
    "DesignCheck",
    "Mismatch",
    "Vector",
    "check_module",
    "decode_value",
    "encode_value",
    "load_vectors",
]

#: the module's known answers, beside its descriptor (optional)
VECTORS_FILE = "vectors.json"
#: random stimuli per method by default
DEFAULT_SAMPLES = 32
#: the most random stimuli per method a check takes
MAX_SAMPLES = 100_000
#: the longest random ``bytes`` argument
MAX_BYTES = 64
#: the longest random ``str`` / ``list`` argument
_MAX_ITEMS = 8
#: mismatches after which a design's check stops (each is reported)
DEFAULT_MAX_MISMATCHES = 10
#: the most vectors a vectors file may hold, and its largest size in bytes
_MAX_VECTORS = 10_000
_MAX_VECTORS_BYTES = 4 << 20

# -- values as JSON ------------------------------------------------------------------------------


def encode_value(value: Any) -> Any:
    """``value`` as JSON: bytes-like as ``{"hex": "..."}``, tuples and lists as lists, dicts
    with their keys as strings, ``None``/bool/int/float/str as they are, anything else as
    ``{"repr": "..."}``."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return {"hex": bytes(value).hex()}
    if isinstance(value, list | tuple):
        return [encode_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode_value(v) for k, v in value.items()}
    return {"repr": repr(value)[:200]}


def decode_value(value: Any, where: str = "value") -> Any:
    """The Python value of the JSON ``value`` (:func:`encode_value`'s form): ``{"hex": ...}``
    becomes ``bytes``, lists stay lists. Raises :class:`~juggle.errors.ConfigurationError`
    naming ``where`` for any other object."""
    if isinstance(value, dict):
        if set(value) == {"hex"} and isinstance(value["hex"], str):
            try:
                return bytes.fromhex(value["hex"])
            except ValueError:
                pass
        raise ConfigurationError(
            f'{where}: an object must be {{"hex": "<even number of hex digits>"}}, got '
            f"{json.dumps(value)[:80]}",
            value=json.dumps(value)[:80],
        )
    if isinstance(value, list):
        return [decode_value(v, where) for v in value]
    return value


# -- the module's vectors ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Vector:
    """One known answer: ``method(*args, **kwargs)`` of ``interface`` (``None``: every hardware
    service of the module) returns ``expect``, when ``has_expect`` (else the call is checked as
    every call is)."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    expect: Any = None
    has_expect: bool = False
    interface: str | None = None


def load_vectors(path: str | Path) -> tuple[Vector, ...]:
    """The vectors of the file at ``path``: a JSON object ``{"vectors": [...]}`` whose items are
    ``{"method": "name", "args": [...], "kwargs": {...}, "expect": ..., "interface": "pkg.Cls"}``
    (only ``method`` required; bytes written ``{"hex": "..."}``). A vector without ``expect``
    (a state-setting call) is checked as every call is: model and RTL agree with software.

    Raises :class:`~juggle.errors.ConfigurationError` naming the file and the vector for a file
    that is too large, not JSON or not of this form.
    """
    where = str(path)
    try:
        size = Path(path).stat().st_size
        if size > _MAX_VECTORS_BYTES:
            raise ConfigurationError(
                f"{where}: {size:,} bytes, at most {_MAX_VECTORS_BYTES:,}", path=where, value=size
            )
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigurationError(f"{where}: cannot read vectors: {exc}", path=where) from exc
    items = document.get("vectors") if isinstance(document, dict) else None
    if not isinstance(items, list) or len(items) > _MAX_VECTORS:
        raise ConfigurationError(
            f'{where}: must be a JSON object with "vectors": a list of at most {_MAX_VECTORS} '
            "calls",
            path=where,
        )
    out: list[Vector] = []
    for index, item in enumerate(items):
        at = f"{where}: vector {index}"
        if not isinstance(item, dict) or not isinstance(item.get("method"), str):
            raise ConfigurationError(f'{at}: must be an object with a "method" name', path=where)
        unknown = sorted(set(item) - {"method", "args", "kwargs", "expect", "interface"})
        args, kwargs = item.get("args", []), item.get("kwargs", {})
        interface = item.get("interface")
        if (
            unknown
            or not isinstance(args, list)
            or not isinstance(kwargs, dict)
            or not (interface is None or isinstance(interface, str))
        ):
            raise ConfigurationError(
                f'{at}: "args" must be a list, "kwargs" an object, "interface" a name'
                + (f"; unknown key(s) {', '.join(unknown)}" if unknown else ""),
                path=where,
            )
        out.append(
            Vector(
                method=item["method"],
                args=tuple(decode_value(a, at) for a in args),
                kwargs={k: decode_value(v, at) for k, v in kwargs.items()},
                expect=decode_value(item.get("expect"), at),
                has_expect="expect" in item,
                interface=interface,
            )
        )
    return tuple(out)


# -- stimuli -------------------------------------------------------------------------------------

#: A generator of one parameter's values: (edge values, a random draw).
_Gen = tuple[tuple[Any, ...], Callable[[random.Random], Any]]

_INT_EDGES = (0, 1, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, -1, -0x8000_0000)
_BYTES_EDGES = (b"", b"\x00", b"\xff\xff\xff\xff", bytes(range(1, 6)), bytes(range(64)))


def _random_int(rng: random.Random) -> int:
    """An edge value, a small count, a signed or an unsigned 32-bit value."""
    pick = rng.random()
    if pick < 0.15:
        return rng.choice(_INT_EDGES)
    if pick < 0.3:
        return rng.randrange(17)
    if pick < 0.55:
        return rng.randrange(-(1 << 31), 1 << 31)
    return rng.getrandbits(32)


#: sizes a random bytes argument takes often: empty, partial words, cipher blocks
_FAVOURED_SIZES = (0, 1, 3, 4, 5, 8, 16, 24, 32)


def _random_bytes(rng: random.Random) -> bytes:
    size = rng.choice(_FAVOURED_SIZES) if rng.random() < 0.4 else rng.randint(0, MAX_BYTES)
    return rng.randbytes(size)


def _random_str(rng: random.Random) -> str:
    return "".join(
        rng.choice("abcdefghijklmnopqrstuvwxyz0123456789 ") for _ in range(rng.randint(0, 16))
    )


_SIMPLE: dict[Any, _Gen] = {
    bool: ((False, True), lambda rng: rng.random() < 0.5),
    int: (_INT_EDGES, _random_int),
    bytes: (_BYTES_EDGES, _random_bytes),
    bytearray: (
        tuple(bytearray(b) for b in _BYTES_EDGES),
        lambda rng: bytearray(_random_bytes(rng)),
    ),
    str: (("", "a", "juggle"), _random_str),
    float: ((0.0, 1.0, -1.5), lambda rng: rng.uniform(-1e6, 1e6)),
    type(None): ((None,), lambda rng: None),
}


def _generator(annotation: Any, depth: int = 0) -> _Gen | None:
    """Edge values and a random draw for ``annotation``, or ``None`` when juggle cannot make
    values of it."""
    if annotation in _SIMPLE:
        return _SIMPLE[annotation]
    if depth > 3:
        return None
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):  # the members juggle can make values of
        gens = [m for m in (_generator(a, depth + 1) for a in args) if m is not None]
        if not gens:
            return None
        edges = tuple(e for g in gens for e in g[0])
        return edges, lambda rng: rng.choice(gens)[1](rng)
    if origin is list and len(args) == 1:
        inner = _generator(args[0], depth + 1)
        if inner is None:
            return None
        item = inner

        def draw_list(rng: random.Random) -> list[Any]:
            return [item[1](rng) for _ in range(rng.randint(0, _MAX_ITEMS))]

        return ([], list(item[0][:2])), draw_list
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        inner = _generator(args[0], depth + 1)
        if inner is None:
            return None
        element = inner

        def draw_tuple(rng: random.Random) -> tuple[Any, ...]:
            return tuple(element[1](rng) for _ in range(rng.randint(0, _MAX_ITEMS)))

        return ((), tuple(element[0][:2])), draw_tuple
    if origin is tuple and args and Ellipsis not in args:
        parts = [_generator(a, depth + 1) for a in args]
        if any(p is None for p in parts):
            return None
        fields = [p for p in parts if p is not None]
        width = max(len(f[0]) for f in fields)
        edges_t = tuple(tuple(f[0][i % len(f[0])] for f in fields) for i in range(width))
        return edges_t, lambda rng: tuple(f[1](rng) for f in fields)
    return None


@dataclass(frozen=True, slots=True)
class _Method:
    """One interface method as stimuli are made for it."""

    name: str
    state_setting: bool
    #: the parameters stimuli give (the required ones, and the optional ones juggle can make
    #: values of; the others keep their defaults), and a generator for each
    params: tuple[str, ...]
    gens: tuple[_Gen, ...]
    #: why no stimuli are made for the method (None: they are)
    skipped: str | None

    def edge_cases(self) -> list[tuple[Any, ...]]:
        """The known-answer argument tuples: the i-th edge value of every parameter (cycling
        through the shorter lists)."""
        if self.skipped is not None:
            return []
        if not self.gens:
            return [()]
        width = max(len(g[0]) for g in self.gens)
        return [tuple(g[0][i % len(g[0])] for g in self.gens) for i in range(width)]

    def draw(self, rng: random.Random) -> tuple[Any, ...]:
        """One random argument tuple."""
        return tuple(g[1](rng) for g in self.gens)


def _methods(interface: type) -> list[_Method]:
    from juggle.runtime.interfaces import interface_methods

    out: list[_Method] = []
    for spec in interface_methods(interface):
        function = getattr(interface, spec.name)
        try:
            hints = typing.get_type_hints(function)
            signature = inspect.signature(function)
        except Exception as exc:  # an annotation naming something that does not resolve
            out.append(_Method(spec.name, spec.state_setting, (), (), f"annotations: {exc}"))
            continue
        params: list[str] = []
        gens: list[_Gen] = []
        why = None
        for index, param in enumerate(signature.parameters.values()):
            if index == 0 and param.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
                continue  # self
            if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                continue
            gen = _generator(hints.get(param.name, inspect.Parameter.empty))
            required = param.default is inspect.Parameter.empty
            if gen is None:
                if required:
                    shown = hints.get(param.name, "no annotation")
                    why = f"no values of parameter {param.name!r} ({shown}) can be made"
                    break
                continue  # leave it at its default
            if param.kind is inspect.Parameter.KEYWORD_ONLY:
                if required:
                    why = f"keyword-only parameter {param.name!r}"
                    break
                continue
            params.append(param.name)
            gens.append(gen)
        if why is not None:
            out.append(_Method(spec.name, spec.state_setting, (), (), why))
        else:
            out.append(_Method(spec.name, spec.state_setting, tuple(params), tuple(gens), None))
    return out


@dataclass(frozen=True, slots=True)
class _Stimulus:
    kind: str  # "known-answer" | "vector" | "random"
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    expect: Any = None
    has_expect: bool = False


def _stimuli(
    methods: Sequence[_Method], vectors: Sequence[Vector], samples: int, seed: int
) -> Iterator[_Stimulus]:
    """The calls of one design's check, in order (see the module docstring)."""
    data = [m for m in methods if not m.state_setting and m.skipped is None]
    state = [m for m in methods if m.state_setting and m.skipped is None]

    def data_calls() -> Iterator[_Stimulus]:
        for method in data:
            for args in method.edge_cases():
                yield _Stimulus("known-answer", method.name, args)

    for vector in vectors:  # first: they start from power-on, as their author expects
        yield _Stimulus(
            "vector", vector.method, vector.args, vector.kwargs, vector.expect, vector.has_expect
        )
    yield from data_calls()
    for method in state:
        for args in method.edge_cases():
            yield _Stimulus("known-answer", method.name, args)
            yield from data_calls()
    rng = random.Random(seed)
    testable = [m for m in methods if m.skipped is None]
    order = [m for m in testable for _ in range(samples)]
    rng.shuffle(order)
    for method in order:
        yield _Stimulus("random", method.name, method.draw(rng))


# -- one call, three ways ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    """What one tier answered: ``result`` (the JSON form of the return value, with the
    ``bytearray`` arguments as the call left them), or ``error`` (``"Type: message"``), and the
    fabric cycles the call took (``None`` for software)."""

    result: Any = None
    error: str | None = None
    cycles: int | None = None

    def same(self, other: Answer) -> bool:
        """Whether two answers agree: equal results, or errors of one type."""
        if (self.error is None) != (other.error is None):
            return False
        if self.error is not None and other.error is not None:
            return self.error.split(":", 1)[0] == other.error.split(":", 1)[0]
        return bool(self.result == other.result)

    def to_json(self) -> dict[str, Any]:
        """The answer as a JSON-able dict."""
        out: dict[str, Any] = {"error": self.error} if self.error else {"result": self.result}
        if self.cycles is not None:
            out["cycles"] = self.cycles
        return out


def _answer(
    call: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    cycles: Callable[[], int] | None,
) -> Answer:
    """``call(*args, **kwargs)`` on copies of the arguments, as an :class:`Answer`."""
    args = copy.deepcopy(args)
    kwargs = copy.deepcopy(kwargs)
    before = cycles() if cycles is not None else 0
    try:
        value = call(*args, **kwargs)
    except Exception as exc:  # module code: anything may come out, and is the answer
        took = cycles() - before if cycles is not None else None
        message = " ".join(str(exc).split())[:200]
        return Answer(error=f"{type(exc).__name__}: {message}", cycles=took)
    took = cycles() - before if cycles is not None else None
    buffers = [a for a in (*args, *kwargs.values()) if isinstance(a, bytearray)]
    result = encode_value(value)
    if buffers:
        result = {"return": result, "buffers": [encode_value(b) for b in buffers]}
    return Answer(result=result, cycles=took)


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One call on which the tiers disagree: its stimulus and every answer.

    ``differences`` names what differs: ``"result"`` (model and RTL), ``"cycles"`` (model and
    RTL), ``"model-expected"`` / ``"rtl-expected"`` (against the software tier's answer or the
    vector's ``expect``), ``"software-expected"`` (the software tier against a vector).
    """

    index: int
    stimulus: str
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    expected: Answer | None
    expected_from: str
    model: Answer
    rtl: Answer
    differences: tuple[str, ...]

    def describe(self) -> str:
        """One line: the call, both answers and their cycles."""
        call = ", ".join(
            [json.dumps(encode_value(a)) for a in self.args]
            + [f"{k}={json.dumps(encode_value(v))}" for k, v in self.kwargs.items()]
        )

        def shown(answer: Answer) -> str:
            what = answer.error if answer.error else json.dumps(answer.result)
            return f"{what[:120]} in {answer.cycles} cycles"

        expected = ""
        if self.expected is not None:
            want = self.expected.error or json.dumps(self.expected.result)
            expected = f"; expected ({self.expected_from}) {want[:120]}"
        return (
            f"#{self.index} {self.stimulus} {self.method}({call[:200]}): model "
            f"{shown(self.model)}, RTL {shown(self.rtl)}{expected} "
            f"[{', '.join(self.differences)}]"
        )

    def to_json(self) -> dict[str, Any]:
        """The mismatch as a JSON-able dict, its figures labeled."""
        return {
            "labels": {
                "index": "input",
                "args": "input",
                "kwargs": "input",
                "expected": "input" if self.expected_from == "vector" else "measured",
                "model": "modeled",
                "rtl": "measured",
            },
            "index": self.index,
            "stimulus": self.stimulus,
            "method": self.method,
            "args": encode_value(self.args),
            "kwargs": encode_value(self.kwargs),
            "expected": None if self.expected is None else self.expected.to_json(),
            "expected_from": self.expected_from,
            "model": self.model.to_json(),
            "rtl": self.rtl.to_json(),
            "differences": list(self.differences),
        }


@dataclass(frozen=True, slots=True)
class DesignCheck:
    """One design's check: how many calls of each kind ran, the cycles they took in total on
    each side, the mismatches (with their stimuli), the methods no stimuli could be made for
    (method, reason), whether the check stopped early (too many mismatches), and how many
    calls every tier refused with an error (``refused``: a check whose calls are all refused
    exercised nothing; give the module vectors)."""

    interface: str
    design: str
    region: str
    rtl: DesignRtl
    calls: dict[str, int]
    model_cycles: int
    rtl_cycles: int
    mismatches: tuple[Mismatch, ...]
    skipped: tuple[tuple[str, str], ...] = ()
    stopped: bool = False
    refused: int = 0

    @property
    def passed(self) -> bool:
        """Whether every call agreed."""
        return not self.mismatches

    def to_json(self) -> dict[str, Any]:
        """The check as a JSON-able dict, its figures labeled."""
        return {
            "labels": {
                "calls": "measured",
                "refused": "measured",
                "cycles": {"model": "modeled", "rtl": "measured"},
            },
            "interface": self.interface,
            "design": self.design,
            "region": self.region,
            "rtl": {
                "top": self.rtl.top,
                "bus": self.rtl.bus,
                "origin": self.rtl.origin,
                "sources": list(self.rtl.files),
            },
            "passed": self.passed,
            "stopped": self.stopped,
            "calls": dict(self.calls),
            "refused": self.refused,
            "cycles": {"model": self.model_cycles, "rtl": self.rtl_cycles},
            "skipped": [{"method": m, "reason": r} for m, r in self.skipped],
            "mismatches": [m.to_json() for m in self.mismatches],
        }


@dataclass(frozen=True, slots=True)
class CheckReport:
    """What :func:`check_module` found, design by design."""

    path: str
    module: str
    fabric: str
    samples: int
    seed: int
    designs: tuple[DesignCheck, ...]

    @property
    def passed(self) -> bool:
        """Whether every design's every call agreed."""
        return all(d.passed for d in self.designs)

    def to_json(self) -> dict[str, Any]:
        """The report as one JSON-able dict (what ``juggle module test --json`` prints)."""
        return {
            "labels": {"samples": "input", "seed": "input"},
            "how": (
                "each call ran on the register model (cycles: modeled, the simulated fabric's "
                "clock) and on the RTL (cycles: measured, the clock cycles the Verilog ran at "
                "the board's bus cost per access), through the module's driver; expected "
                "answers are the software tier's (measured) or a vector's (input)"
            ),
            "path": self.path,
            "module": self.module,
            "fabric": self.fabric,
            "samples": self.samples,
            "seed": self.seed,
            "passed": self.passed,
            "designs": [d.to_json() for d in self.designs],
        }


# -- the check -----------------------------------------------------------------------------------


def _count(name: str, value: object, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise ConfigurationError(
            f'"{name}" must be an int in 0..{maximum:,}, got {value!r}', value=scalar(value)
        )
    return value


def check_module(
    path: str | Path,
    *,
    fabric: str | Path = "xupv2p",
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
    max_mismatches: int = DEFAULT_MAX_MISMATCHES,
    cache_dir: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> CheckReport:
    """Check every hardware design of the module folder ``path`` on board ``fabric``: its
    register model against its RTL through the module's driver (the module docstring says
    how), ``samples`` random calls per method drawn with ``seed``. A design's check stops after
    ``max_mismatches`` mismatches. RTL simulators are built (or found) in ``cache_dir``
    (default ``$XDG_CACHE_HOME/juggle/rtl``); ``progress`` hears of each build step.

    Returns the :class:`CheckReport`; a disagreement is in it, not raised. Raises
    :class:`~juggle.errors.ConfigurationError` for bad ``samples``/``seed``/``max_mismatches``
    or a bad vectors file, :class:`~juggle.errors.ModuleError` /
    :class:`~juggle.errors.DescriptorError` for the module (no hardware service, a ``.zip``),
    :class:`~juggle.errors.BackendError` naming a design that has no RTL or no register model,
    or whose RTL does not build (the tool's output in the message), and what install raises for
    the module's code and bitstreams.
    """
    from juggle.fabric.profiles import load_profile
    from juggle.runtime.modules import CodeNamespace, ModuleSource

    samples = _count("samples", samples, MAX_SAMPLES)
    max_mismatches = _count("max_mismatches", max_mismatches, MAX_SAMPLES)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigurationError(f'"seed" must be an int, got {seed!r}', value=scalar(seed))
    source = ModuleSource.open(path)
    if source.zip_prefix is not None:
        raise ModuleError(
            f"{str(source.location)!r}: test a module folder (the simulator builds its hdl/ files)",
            path=str(source.location),
        )
    descriptor = source.load_descriptor()
    name = descriptor.module.name
    board = load_profile(fabric)
    services = [s for s in descriptor.services if s.hardware is not None]
    if not services:
        raise ModuleError(
            f"module {name!r} has no hardware service: there is no core to test",
            module=name,
            path=str(source.location),
        )
    vectors_path = source.root / VECTORS_FILE
    vectors = load_vectors(vectors_path) if vectors_path.is_file() else ()
    namespace = CodeNamespace(source, name)
    try:
        checks = [
            _check_service(
                spec,
                source,
                namespace,
                board,
                vectors,
                samples=samples,
                seed=seed,
                max_mismatches=max_mismatches,
                cache_dir=cache_dir,
                progress=progress,
            )
            for spec in services
        ]
    finally:
        namespace.unload()
    return CheckReport(
        path=str(source.location),
        module=name,
        fabric=board.name,
        samples=samples,
        seed=seed,
        designs=tuple(checks),
    )


def _interface(spec: Any, namespace: Any) -> type:
    from juggle.runtime.interfaces import InterfaceCatalog

    name = spec.interfaces[0]
    try:
        found = namespace.resolve(name, "interface")
    except DescriptorError:
        found = None
    if isinstance(found, type):
        return found
    try:
        return InterfaceCatalog().resolve(name)
    except UnknownInterfaceError:
        raise UnknownInterfaceError(
            f"unknown service interface {name!r} (not in the module, not a known interface)",
            interface=name,
        ) from None


def _check_service(
    spec: Any,
    source: Any,
    namespace: Any,
    board: Any,
    vectors: Sequence[Vector],
    *,
    samples: int,
    seed: int,
    max_mismatches: int,
    cache_dir: str | Path | None,
    progress: Callable[[str], None] | None,
) -> DesignCheck:
    from juggle.fabric import open_fabric
    from juggle.fabric.rtl import RtlCatalog
    from juggle.fabric.sim.catalog import ModelCatalog
    from juggle.runtime.modules import check_class, code_error
    from juggle.runtime.rtlsources import module_rtl

    hw = spec.hardware
    interface = _interface(spec, namespace)
    interface_name = spec.interfaces[0]
    driver_cls = check_class(namespace.resolve(hw.driver, "driver"), hw.driver, interface, args=1)
    soft = spec.software or spec.native
    soft_cls = None
    if soft is not None:
        soft_cls = check_class(
            namespace.resolve(soft.class_, "software class"), soft.class_, interface, args=0
        )
    loaded = source.load_bitstreams(hw.bitstreams, board.region_names())
    region, (_, bitstream, data) = next(iter(loaded.items()))
    design = bitstream.design
    rtl = module_rtl(source, hw.rtl, design)
    if rtl is None:
        raise BackendError(
            f"design {design!r} has no RTL: the module has no hdl/{design}/*.v and no "
            "[services.hardware.rtl], and juggle has no reference core of that name; "
            "`juggle module test` compares the RTL with the register model",
            design=design,
        )
    models = ModelCatalog.builtin()
    if hw.model:
        models.register(design, namespace.resolve(hw.model, "model"))
    elif design not in models:
        raise BackendError(
            f"design {design!r} has no register model ([services.hardware] model): "
            "`juggle module test` compares the RTL with it",
            design=design,
        )
    catalog = RtlCatalog()
    catalog.add(design, rtl.paths(source), rtl.top, bus=rtl.bus)
    own = [v for v in vectors if v.interface in (None, interface_name)]
    methods = _methods(interface)
    names = {m.name for m in methods}
    for vector in own:
        if vector.method not in names:
            raise ConfigurationError(
                f"{VECTORS_FILE}: {interface_name} has no method {vector.method!r} "
                f"(methods: {', '.join(sorted(names))})",
                path=str(source.root / VECTORS_FILE),
                value=vector.method,
            )
    hz = board.board.fabric_hz
    with (
        open_fabric(board, backend="sim", models=models) as model_fabric,
        open_fabric(
            board,
            backend="rtl",
            models=models,
            rtl=catalog,
            cache_dir=cache_dir,
            progress=progress,
        ) as rtl_fabric,
    ):
        model_fabric.program(region, bitstream, data)
        rtl_fabric.program(region, bitstream, data)
        try:
            model_driver = driver_cls(model_fabric.window(region))
            rtl_driver = driver_cls(rtl_fabric.window(region))
            software = soft_cls() if soft_cls is not None else None
        except JuggleError:
            raise
        except Exception as exc:
            raise code_error(namespace.module_name, "constructing its tiers", exc) from exc
        counts = {"known_answer": 0, "vector": 0, "random": 0}
        totals = [0, 0]
        refused = 0
        mismatches: list[Mismatch] = []
        stopped = False
        for index, stimulus in enumerate(_stimuli(methods, own, samples, seed)):
            if len(mismatches) >= max_mismatches:
                stopped = True
                break
            counts[stimulus.kind.replace("-", "_")] += 1
            args, kwargs = stimulus.args, stimulus.kwargs
            expected: Answer | None = None
            expected_from = "software"
            if software is not None:
                expected = _answer(getattr(software, stimulus.method), args, kwargs, None)
            differences = []
            if stimulus.has_expect:
                wanted = Answer(result=encode_value(stimulus.expect))
                if expected is not None and not expected.same(wanted):
                    differences.append("software-expected")
                expected, expected_from = wanted, "vector"
            model = _answer(
                getattr(model_driver, stimulus.method),
                args,
                kwargs,
                lambda: model_fabric.clock.now_cycles(hz),
            )
            got = _answer(
                getattr(rtl_driver, stimulus.method),
                args,
                kwargs,
                lambda: rtl_fabric.clock.now_cycles(hz),
            )
            totals[0] += model.cycles or 0
            totals[1] += got.cycles or 0
            if model.error and got.error and (expected is None or expected.error):
                refused += 1
            if not model.same(got):
                differences.append("result")
            if model.cycles != got.cycles:
                differences.append("cycles")
            if expected is not None:
                if not model.same(expected):
                    differences.append("model-expected")
                if not got.same(expected):
                    differences.append("rtl-expected")
            if differences:
                mismatches.append(
                    Mismatch(
                        index=index,
                        stimulus=stimulus.kind,
                        method=stimulus.method,
                        args=args,
                        kwargs=kwargs,
                        expected=expected,
                        expected_from=expected_from if expected is not None else "none",
                        model=model,
                        rtl=got,
                        differences=tuple(differences),
                    )
                )
    return DesignCheck(
        interface=interface_name,
        design=design,
        region=region,
        rtl=rtl,
        calls=counts,
        model_cycles=totals[0],
        rtl_cycles=totals[1],
        mismatches=tuple(mismatches),
        skipped=tuple((m.name, m.skipped) for m in methods if m.skipped is not None),
        stopped=stopped,
        refused=refused,
    )
