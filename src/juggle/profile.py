"""Profiling a service: ThumbPod's refinement step for any service (``juggle profile``).

ThumbPod refines one function from Java to C to hardware and asks at each step two things:
does the new level compute the same thing, and what does one call cost, split into the
*interface* (every layer between the caller and the implementation) and the *core* (the
implementation's own work)? :func:`profile_service` asks both for every tier a service has:

* **Differential check.** The same inputs (a :class:`ProfileWorkload`: state-setting calls first,
  then the checked calls) run through the service's proxy at every tier; the results (return
  values and the bytes of in-place buffers) must be equal. A hardware call served by the
  software fallback does not count as agreeing: the hardware did not compute it.
* **Cost of one call** of the workload's timed call, best of several rounds (wall clock of
  this machine, ``measured``):

  - software and native: interface = the proxy (timed on a no-op stand-in of the same
    interface, proxied minus direct, so it does not drown in the core's time); core = the
    implementation called directly.
  - hardware (a simulated board): the total is the hardware time of
    :mod:`juggle.throughput`, the one definition ``juggle demo`` and ``juggle simulate tdes``
    use too: bus transactions (``modeled``: the simulated window's reads and writes at the
    board profile's cycles, less the core's cycles that they hide) + core (the core model's
    latency times the operations it ran, ``modeled``, fabric cycles). Beside it, measured and
    not counted (``not_counted``): proxy, runtime (the virtual device: owner check, core
    lock, fault guard; device call minus driver call) and driver (the Python driver's own
    code, replayed against a recording of its register reads, so the simulator's work is
    left out). ``throughput`` gives the timed call's bytes over the hardware time with the
    measured driver time beside it. On a backend without a modeled bus (a real board) the
    driver call's wall time is the rest of the interface, counted, and the core is not
    separated.

The gain of a tier is the slowest tier's total over its own. A target is a module path, or
the name of a module or an interface among the modules shipped in ``examples/modules``.

The workload of a service is, first found: the one passed in; the one its module declares in
``juggle.toml`` (``[services.profile]``: method, argument generators, buffer sizes;
:func:`declared_workload`); the built-in one of its interface (:func:`workload_for`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from juggle.core.tiers import Tier
from juggle.errors import ConfigurationError, JuggleError, ServiceUnavailableError
from juggle.fabric.fabric import Fabric
from juggle.runtime.descriptors import MAX_PROFILE_SIZE, ProfileSpec
from juggle.runtime.hardware import DEFAULT_CALL_TIMEOUT_S, GuardedWindow
from juggle.runtime.interfaces import short_name, state_setting
from juggle.runtime.proxy import ServiceProxy, binding_of, build_proxy, has_context
from juggle.shipped import example_modules
from juggle.throughput import count_calls, hardware_figures, payload_bytes

__all__ = [
    "LABELS",
    "Call",
    "ProfileWorkload",
    "declared_workload",
    "profile_service",
    "workload_for",
]

#: What each label means (every figure of a profile carries one).
LABELS: Mapping[str, str] = {
    "measured": "wall clock of this machine (best of the rounds)",
    "modeled": "derived by a stated model: the simulated fabric's bus and core cycles at the "
    "board profile's clock (a hardware total: core + bus, juggle.throughput), or a gain "
    "computed from a modeled total",
    "input": "copied from the workload or the board profile",
    "calibrated": "fitted to the figure it is compared with (none in a profile)",
}
_CONSUMER = "juggle-profile"
_MODEL_CALLS = 16  # proxied calls whose bus transactions are counted
_DRIVER_ALONE = (
    "the Python driver's own code on this machine, replayed against a recording of its "
    "register reads (the simulator left out); shown beside, not in the hardware time"
)
_DRIVER_WITH_SIMULATOR = (
    "the Python driver's call on this machine with the simulated core behind it (its "
    "accesses do not repeat, so it was not replayed alone); shown beside, not in the "
    "hardware time"
)


# -- workloads ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Call:
    """One call ``method(*args)``; a ``bytearray`` argument is copied for every execution."""

    method: str
    args: tuple[Any, ...] = ()

    def fresh_args(self) -> tuple[Any, ...]:
        """The arguments, with every bytearray copied (calls may work in place)."""
        return tuple(bytearray(a) if isinstance(a, bytearray) else a for a in self.args)

    def describe(self) -> str:
        """``encrypt(8 bytes, 8)``: the call with buffers shown by their length."""
        shown = [
            f"{len(a)} bytes" if isinstance(a, bytes | bytearray) else repr(a) for a in self.args
        ]
        return f"{self.method}({', '.join(shown)})"


@dataclass(frozen=True, slots=True)
class ProfileWorkload:
    """The inputs of a profile: ``setup`` (state-setting calls made first at every tier),
    ``checks`` (calls whose results every tier must reproduce, in order) and ``timed`` (the
    call whose cost is measured, made after ``setup``)."""

    setup: tuple[Call, ...]
    checks: tuple[Call, ...]
    timed: Call
    description: str = ""

    def summary(self) -> dict[str, Any]:
        """What the workload does, for a report."""
        return {
            "description": self.description,
            "setup": [c.describe() for c in self.setup],
            "checks": len(self.checks),
            "checked_methods": sorted({c.method for c in self.checks}),
            "timed": self.timed.describe(),
        }


#: algorithm property -> (key bytes, block bytes)
_CIPHERS: Mapping[str, tuple[int, int]] = {"aes": (16, 16), "des": (8, 8), "tdes": (24, 8)}


def _cipher_workload(
    properties: Mapping[str, Any], rng: random.Random, vectors: int, size: int | None
) -> ProfileWorkload:
    algorithm = properties.get("algorithm")
    if algorithm not in _CIPHERS:
        raise ConfigurationError(
            f'crypto.EncryptionService: property "algorithm" must be one of '
            f"{', '.join(_CIPHERS)} to choose a key and block size, got {algorithm!r}",
            value=algorithm,
        )
    key_size, block = _CIPHERS[str(algorithm)]
    size = block if size is None else size
    if size <= 0 or size % block:
        raise ConfigurationError(
            f'"size" must be a positive multiple of the {block}-byte {algorithm} block, got {size}',
            value=size,
        )
    key = rng.randbytes(key_size)
    checks = tuple(
        Call(method, (bytearray(rng.randbytes(size)), size))
        for method in ("encrypt", "decrypt")
        for _ in range(vectors)
    )
    return ProfileWorkload(
        (Call("load_key", (key,)),),
        checks,
        Call("encrypt", (bytearray(rng.randbytes(size)), size)),
        f"{algorithm}: one random key, {vectors} random {size}-byte buffers encrypted and "
        f"{vectors} decrypted",
    )


def _int_workload(method: str) -> Callable[..., ProfileWorkload]:
    def build(
        properties: Mapping[str, Any], rng: random.Random, vectors: int, size: int | None
    ) -> ProfileWorkload:
        low, high = -(1 << 31), (1 << 31) - 1
        edges = [(high, 1), (low, -1), (high, high), (low, low), (0, -1), (-7, 3)]
        pairs = edges + [(rng.randint(low, high), rng.randint(low, high)) for _ in range(vectors)]
        return ProfileWorkload(
            (),
            tuple(Call(method, pair) for pair in pairs),
            Call(method, (123_456, -789)),
            f"{method}: {len(edges)} edge pairs (32-bit wrap) and {vectors} random int32 pairs",
        )

    return build


def _decoder_workload(
    properties: Mapping[str, Any], rng: random.Random, vectors: int, size: int | None
) -> ProfileWorkload:
    size = 64 if size is None else size
    if size <= 0:
        raise ConfigurationError(f'"size" must be > 0 bytes, got {size}', value=size)
    return ProfileWorkload(
        (Call("reset"),),
        tuple(Call("decode", (rng.randbytes(size),)) for _ in range(vectors)),
        Call("decode", (rng.randbytes(size),)),
        f"one stream of {vectors} random {size}-byte pieces decoded after a reset",
    )


_BUILDERS: Mapping[str, Callable[..., ProfileWorkload]] = {
    "EncryptionService": _cipher_workload,
    "AddService": _int_workload("add"),
    "MulService": _int_workload("mul"),
    "DecoderService": _decoder_workload,
}


def workload_for(
    interface: str,
    properties: Mapping[str, Any] | None = None,
    *,
    seed: int = 1,
    vectors: int = 8,
    size: int | None = None,
) -> ProfileWorkload:
    """The built-in workload of ``interface`` (full or short name) for a service with
    ``properties``: ``vectors`` random checked calls from ``seed``; ``size`` is the bytes per
    call of buffer services (default: one cipher block, 64 bytes of ADPCM).

    Raises :class:`~juggle.errors.ConfigurationError` for an interface without a built-in
    workload (pass your own :class:`ProfileWorkload`) or a bad ``size`` / ``vectors``.
    """
    builder = _BUILDERS.get(short_name(interface))
    if builder is None:
        raise ConfigurationError(
            f"no built-in workload for interface {interface!r} (built in: "
            f"{', '.join(sorted(_BUILDERS))}): declare one in the module's juggle.toml, a "
            '[services.profile] table with method = "...", args = [...] (bytes, buffer, '
            "size, int32, uint32) and sizes = [...] (buffer bytes); from Python, "
            "profile_service(workload=ProfileWorkload(...)) works too",
            value=interface,
        )
    _check_vectors(vectors)
    return builder(properties or {}, random.Random(seed), vectors, size)


def _check_vectors(vectors: object) -> None:
    if isinstance(vectors, bool) or not isinstance(vectors, int) or vectors < 1:
        raise ConfigurationError(
            f'"vectors" must be an int >= 1, got {vectors!r}',
            value=vectors if isinstance(vectors, str | int | float) else repr(vectors),
        )


def _argument(kind: str, size: int, rng: random.Random) -> object:
    """One generated argument of a declared workload (see :class:`ProfileSpec`)."""
    if kind == "bytes":
        return rng.randbytes(size)
    if kind == "buffer":
        return bytearray(rng.randbytes(size))
    if kind == "size":
        return size
    if kind == "int32":
        return rng.randint(-(1 << 31), (1 << 31) - 1)
    return rng.randint(0, (1 << 32) - 1)  # uint32 (the descriptor allows no other kind)


def declared_workload(
    spec: ProfileSpec, *, seed: int = 1, vectors: int = 8, size: int | None = None
) -> ProfileWorkload:
    """The workload a module declares for a service (``[services.profile]`` of its
    ``juggle.toml``, :class:`~juggle.runtime.descriptors.ProfileSpec`): ``vectors`` random
    checked calls of ``spec.method`` per buffer size, arguments generated from ``seed``; the
    timed call at the first size. ``size`` replaces the declared sizes.

    Raises :class:`~juggle.errors.ConfigurationError` for a bad ``size`` or ``vectors``.
    """
    _check_vectors(vectors)
    if size is not None and not 1 <= size <= MAX_PROFILE_SIZE:
        raise ConfigurationError(
            f'"size" must be 1..{MAX_PROFILE_SIZE} bytes, got {size!r}', value=size
        )
    sizes = list(spec.sizes) if size is None else [size]
    rng = random.Random(seed)

    def call(n: int) -> Call:
        return Call(spec.method, tuple(_argument(kind, n, rng) for kind in spec.args))

    checks = tuple(call(n) for n in sizes for _ in range(vectors))
    return ProfileWorkload(
        (),
        checks,
        call(sizes[0]),
        f"{spec.method}({', '.join(spec.args)}): {vectors} random calls per buffer size "
        f"({', '.join(map(str, sizes))} bytes), declared in the module's [services.profile]",
    )


# -- targets -----------------------------------------------------------------------------------


def _shipped_modules() -> list[Path]:
    """The shipped example module folders (package data)."""
    folder = example_modules()
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("_"))


def _recorded_board(path: Path) -> str | None:
    """The board the descriptor of the module at ``path`` records (``[module] board``), or
    None (no such module there, or no board recorded)."""
    if not path.exists():
        return None
    from juggle.runtime.modules import ModuleSource

    descriptor, _ = ModuleSource.open(path).authenticate(None)
    return descriptor.module.board


def _resolve(target: str, fabric: str) -> tuple[list[Path], str | None]:
    """(module paths to install, interface to select or None for all their services)."""
    path = Path(target)
    if path.exists():
        return [path], None
    from juggle.runtime.validate import validate_module

    by_module: list[Path] = []
    by_interface: list[Path] = []
    interface: str | None = None
    names = []
    for folder in _shipped_modules():
        try:
            report = validate_module(folder, fabric=fabric)
        except JuggleError:
            continue
        names.append(report["name"])
        if report["name"] == target:
            by_module.append(folder)
        for service in report["services"]:
            for full in service["interfaces"]:
                if target in (full, short_name(full)):
                    by_interface.append(folder)
                    interface = full
    if by_module:
        return by_module, None
    if by_interface:
        return sorted(set(by_interface)), interface
    raise ServiceUnavailableError(
        f"{target!r} is not a module path, nor a module or interface of the shipped modules "
        f"({', '.join(names) or 'none found'})",
        interface=target,
    )


# -- timing ------------------------------------------------------------------------------------


def _best_us(
    fns: Mapping[str, Callable[[], object]], rounds: int, round_s: float
) -> dict[str, float]:
    """Best per-call time of each of ``fns`` in µs over ``rounds`` interleaved rounds of about
    ``round_s`` seconds each."""
    counts = {}
    for name, fn in fns.items():
        one = min(_once(fn) for _ in range(3))
        counts[name] = max(3, min(200_000, int(round_s / max(one, 1e-8))))
    best = dict.fromkeys(fns, float("inf"))
    clock = time.perf_counter_ns
    for _ in range(rounds):
        for name, fn in fns.items():
            n = counts[name]
            t0 = clock()
            for _ in range(n):
                fn()
            best[name] = min(best[name], (clock() - t0) / n)
    return {name: ns / 1000.0 for name, ns in best.items()}


def _once(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _stand_in(proxy: ServiceProxy) -> type:
    """A no-op class with the proxy's methods (state-setting ones marked, portable state
    where the implementation has it), so a proxy of it costs what the real proxy costs."""
    binding = binding_of(proxy)
    attrs: dict[str, Any] = {}
    for spec in binding.methods:

        def noop(self: object, *args: Any, **kwargs: Any) -> None:
            return None

        attrs[spec.name] = state_setting(noop) if spec.state_setting else noop
    if has_context(binding.impl):
        attrs["juggle_save_state"] = lambda self: None
        attrs["juggle_restore_state"] = lambda self, state: None
    return type("StandIn", (), attrs)


def _proxy_us(proxy: ServiceProxy, tier: str, call: Call, sample: int, timing: _Timing) -> float:
    """The proxy's own cost of ``call``: a stand-in proxied minus called directly."""
    cls = _stand_in(proxy)
    impl = cls()
    proxied = build_proxy(cls, proxy.interface, 0, _CONSUMER, impl, tier, sample_period=sample)
    times = timing.run(
        {
            "direct": partial(getattr(impl, call.method), *call.fresh_args()),
            "proxied": partial(getattr(proxied, call.method), *call.fresh_args()),
        }
    )
    return max(0.0, times["proxied"] - times["direct"])


@dataclass(frozen=True, slots=True)
class _Timing:
    rounds: int
    round_s: float

    def run(self, fns: Mapping[str, Callable[[], object]]) -> dict[str, float]:
        return _best_us(fns, self.rounds, self.round_s)


# -- a driver without the simulator ------------------------------------------------------------


class _ReplayMismatch(Exception):
    """The driver read a register the recording did not expect."""


class _Recorder:
    """An MMIO in front of ``target`` that records every read (offset, value)."""

    def __init__(self, target: Any) -> None:
        self._target = target
        self.reads: list[tuple[int, int]] = []

    @property
    def size(self) -> int:
        return int(self._target.size)

    def read32(self, offset: int) -> int:
        value = int(self._target.read32(offset))
        self.reads.append((offset, value))
        return value

    def write32(self, offset: int, value: int) -> None:
        self._target.write32(offset, value)


class _Replay:
    """An MMIO answering reads from a recording, then cycling over its part from ``loop``
    on (one timed call's reads); writes go nowhere. The driver runs without a core model."""

    def __init__(self, size: int, reads: list[tuple[int, int]]) -> None:
        self._size = size
        self._reads = reads
        self._next = 0
        self._loop: int | None = None

    def loop_from(self, index: int) -> None:
        self._loop = index

    @property
    def size(self) -> int:
        return self._size

    def read32(self, offset: int) -> int:
        i = self._next
        if i >= len(self._reads):
            if self._loop is None or self._loop >= len(self._reads):
                raise _ReplayMismatch(f"read at {offset:#x} beyond the recording")
            i = self._loop
        expected, value = self._reads[i]
        if expected != offset:
            raise _ReplayMismatch(f"read at {offset:#x}, recorded {expected:#x}")
        self._next = i + 1
        return value

    def write32(self, offset: int, value: int) -> None:
        return None


def _replayed(
    driver_cls: type,
    window: Any,
    region: str,
    workload: ProfileWorkload,
    invoke: Callable[[Any], object],
) -> object | None:
    """A ``driver_cls`` on a replay of its own register reads: made on ``window`` with the
    workload's setup and one ``invoke(driver)``, then answering every further ``invoke`` from
    that recording (behind the runtime's guard, as the real driver). None when the driver's
    accesses do not repeat."""
    try:
        recorder = _Recorder(window)
        recorded = driver_cls(recorder)
        for call in workload.setup:
            getattr(recorded, call.method)(*call.fresh_args())
        mark = len(recorder.reads)
        invoke(recorded)
        replay = _Replay(recorder.size, recorder.reads)
        driver: object = driver_cls(GuardedWindow(replay, region, DEFAULT_CALL_TIMEOUT_S))
        for call in workload.setup:
            getattr(driver, call.method)(*call.fresh_args())
        replay.loop_from(mark)
        for _ in range(2):  # the recording must carry two calls in a row
            invoke(driver)
    except (_ReplayMismatch, JuggleError, TypeError):
        return None
    return driver


@contextmanager
def _driving(core: Any, driver: object) -> Iterator[None]:
    """``core`` runs its calls on ``driver`` meanwhile (the profile's own framework only)."""
    original = core.driver
    core.driver = driver
    try:
        yield
    finally:
        core.driver = original


# -- one service -------------------------------------------------------------------------------


def _invoke(target: object, call: Call) -> object:
    return getattr(target, call.method)(*call.fresh_args())


def _outcome(result: object, args: tuple[Any, ...]) -> object:
    """What a call produced: its return value and the bytes of its writable buffers."""
    return (result, tuple(bytes(a) for a in args if isinstance(a, bytearray)))


def _run_checks(proxy: ServiceProxy, workload: ProfileWorkload) -> list[object]:
    for call in workload.setup:
        getattr(proxy, call.method)(*call.fresh_args())
    out: list[object] = []
    for call in workload.checks:
        args = call.fresh_args()
        try:
            out.append(_outcome(getattr(proxy, call.method)(*args), args))
        except JuggleError as exc:  # the same refusal at every tier agrees too
            out.append(("raised", type(exc).__name__))
    return out


def _compare(
    results: Mapping[str, list[object]],
    workload: ProfileWorkload,
    unserved: Mapping[str, int],
    refused: Mapping[str, str],
) -> tuple[bool, list[dict[str, Any]]]:
    """(agree, the first disagreements) over the tiers' results, the calls a fallback
    served and the tiers that refused to serve."""
    problems: list[dict[str, Any]] = [
        {"tier": tier, "why": f"could not serve from this tier: {why}"}
        for tier, why in refused.items()
    ]
    for tier, fallbacks in unserved.items():
        if fallbacks:
            problems.append(
                {"tier": tier, "why": f"{fallbacks} call(s) served by the software fallback"}
            )
    if not results:
        return False, problems[:10]
    tiers = list(results)
    reference = tiers[0]
    for i, call in enumerate(workload.checks):
        differ = [t for t in tiers[1:] if results[t][i] != results[reference][i]]
        if differ:
            problems.append(
                {
                    "check": i,
                    "call": call.describe(),
                    "tiers": [reference, *differ],
                    "why": "results differ",
                }
            )
    return not problems, problems[:10]


@dataclass(slots=True)
class _TierCost:
    implementation: str
    interface: dict[str, float | int | None]
    core: dict[str, float | int | None]
    labels: dict[str, str]
    extra: dict[str, Any] = field(default_factory=dict)
    total_label: str = "measured"
    #: the interface parts summed into the total (None: every ``*_us`` part); the others are
    #: shown beside it (the hardware tier's measured proxy, runtime and driver)
    counted: tuple[str, ...] | None = None

    @property
    def interface_us(self) -> float:
        return sum(
            float(v)
            for k, v in self.interface.items()
            if k.endswith("_us") and v and (self.counted is None or k in self.counted)
        )

    @property
    def core_us(self) -> float:
        value = self.core.get("us")
        return float(value) if value is not None else 0.0

    def report(self, gain: float, gain_label: str) -> dict[str, Any]:
        total = self.interface_us + self.core_us
        labels = {
            **self.labels,
            "interface_us": self.total_label,
            "core_us": self.labels.get("core.us", "measured"),
            "total_us": self.total_label,
            "gain": gain_label,
        }
        return {
            "implementation": self.implementation,
            "interface": self.interface,
            "core": self.core,
            "interface_us": round(self.interface_us, 4),
            "core_us": round(self.core_us, 4),
            "total_us": round(total, 4),
            "gain": round(gain, 3),
            **self.extra,
            "labels": labels,
        }


def _soft_cost(
    proxy: ServiceProxy, tier: str, workload: ProfileWorkload, sample: int, timing: _Timing
) -> _TierCost:
    impl = binding_of(proxy).impl
    call = workload.timed
    proxy_us = _proxy_us(proxy, tier, call, sample, timing)
    times = timing.run(
        {
            "core": partial(getattr(impl, call.method), *call.fresh_args()),
            "wall": partial(getattr(proxy, call.method), *call.fresh_args()),
        }
    )
    return _TierCost(
        type(impl).__name__,
        {"proxy_us": round(proxy_us, 4)},
        {"us": round(times["core"], 4)},
        {"interface.proxy_us": "measured", "core.us": "measured", "wall_us": "measured"},
        {"wall_us": round(times["wall"], 4)},
    )


def _hardware_cost(
    fw: Any, proxy: ServiceProxy, region: str, workload: ProfileWorkload, timing: _Timing
) -> _TierCost:
    device = binding_of(proxy).impl
    call = workload.timed
    proxy_us = _proxy_us(proxy, "hardware", call, fw.trace_sample, timing)
    core = getattr(device, "core", None)
    driver = getattr(core, "driver", None)
    name = type(device if driver is None else driver).__name__
    device_call = partial(getattr(device, call.method), *call.fresh_args())
    fns: dict[str, Callable[[], object]] = {
        "wall": partial(getattr(proxy, call.method), *call.fresh_args()),
        "device": device_call,
    }
    times: dict[str, float] = {}
    if driver is not None:
        window = fw.fabric.window(region)
        cls = type(driver)
        fns["driver"] = partial(getattr(driver, call.method), *call.fresh_args())
        alone = _replayed(cls, window, region, workload, lambda d: _invoke(d, call))
        if alone is not None:
            fns["driver_host"] = partial(getattr(alone, call.method), *call.fresh_args())

        def via_device(d: object) -> object:
            with _driving(core, d):
                return _invoke(device, call)

        behind = _replayed(cls, window, region, workload, via_device)
        if behind is not None:
            with _driving(core, behind):
                times["device_host"] = timing.run({"device": device_call})["device"]
    times.update(timing.run(fns))
    hz = fw.fabric.profile.board.fabric_hz
    modeled, _ = count_calls(
        fw.fabric.window(region),
        hz,
        partial(_invoke, proxy, call),
        _MODEL_CALLS,
    )
    driver_sim = times.get("driver", times["device"])
    host_driver = times.get("driver_host")
    runtime = (
        times["device_host"] - host_driver
        if "device_host" in times and host_driver is not None
        else times["device"] - driver_sim
    )
    interface: dict[str, float | int | None] = {
        "proxy_us": round(proxy_us, 4),
        "runtime_us": round(max(0.0, runtime), 4),
    }
    labels = {
        "interface.proxy_us": "measured",
        "interface.runtime_us": "measured",
        "wall_us": "measured",
        "simulator_us": "measured",
    }
    extra: dict[str, Any] = {"wall_us": round(times["wall"], 4)}
    if modeled is None:  # a board: the driver call's wall time holds the bus and the core
        interface["driver_us"] = round(driver_sim, 4)
        labels["interface.driver_us"] = "measured"
        extra["simulator_us"] = None
        return _TierCost(name, interface, {"us": None}, labels, extra)
    interface["driver_us"] = None if host_driver is None else round(host_driver, 4)
    extra["simulator_us"] = (
        None if host_driver is None else round(max(0.0, driver_sim - host_driver), 4)
    )
    interface.update(
        {
            "bus_reads": modeled.reads,
            "bus_writes": modeled.writes,
            "bus_cycles": round(modeled.bus_cycles, 3),
            "bus_us": round(modeled.bus_us, 4),
        }
    )
    labels.update(
        {
            "interface.driver_us": "measured",
            "interface.bus_reads": "modeled",
            "interface.bus_writes": "modeled",
            "interface.bus_cycles": "modeled",
            "interface.bus_us": "modeled",
            "core.cycles": "modeled",
            "core.us": "modeled",
            "core.operations": "modeled",
            "fabric_hz": "input",
            "throughput": "modeled",  # its own labels say which figures are measured
        }
    )
    extra["fabric_hz"] = float(hz)
    extra["not_counted"] = ["proxy_us", "runtime_us", "driver_us"]
    extra["throughput"] = hardware_figures(
        modeled,
        bytes_per_call=payload_bytes(call.args),
        driver_us=driver_sim if host_driver is None else host_driver,
        driver_is=_DRIVER_ALONE if host_driver is not None else _DRIVER_WITH_SIMULATOR,
    )
    core_part: dict[str, float | int | None] = {
        "operations": modeled.operations,
        "cycles": None if modeled.core_cycles is None else round(modeled.core_cycles, 3),
        "us": None if modeled.core_us is None else round(modeled.core_us, 4),
    }
    return _TierCost(
        name,
        interface,
        core_part,
        labels,
        extra,
        total_label="modeled",
        counted=("bus_us",),
    )


def _declared_spec(fw: Any, snap: Any) -> ProfileSpec | None:
    """The ``[services.profile]`` the module of service ``snap`` declares for it, or None."""
    if snap.module is None:
        return None
    for spec in fw.module(snap.module).descriptor.services:
        if snap.interface in spec.interfaces:
            return spec.profile  # type: ignore[no-any-return]
    return None


def _profile_one(
    fw: Any,
    snap: Any,
    flt: str | None,
    workload: ProfileWorkload | None,
    options: Mapping[str, Any],
) -> dict[str, Any] | None:
    sid = snap.service_id
    query = f"(service.id={sid})" if flt is None else f"(&(service.id={sid}){flt})"
    try:
        proxy = fw.get_service(snap.interface, consumer=_CONSUMER, filter=query)
    except ServiceUnavailableError:
        return None  # the filter leaves this service out
    declared = _declared_spec(fw, snap)
    if workload is not None:
        wl = workload
    elif declared is not None:
        wl = declared_workload(
            declared, seed=options["seed"], vectors=options["vectors"], size=options["size"]
        )
    else:
        wl = workload_for(
            snap.interface,
            snap.properties,
            seed=options["seed"],
            vectors=options["vectors"],
            size=options["size"],
        )
    timing: _Timing = options["timing"]
    results: dict[str, list[object]] = {}
    unserved: dict[str, int] = {}
    refused: dict[str, str] = {}
    costs: dict[str, _TierCost] = {}
    try:
        for tier in snap.tiers:
            try:
                fw.set_tier(sid, tier)
            except JuggleError as exc:  # the tier cannot serve: nothing to compare there
                refused[tier] = " ".join(str(exc).split())
                continue
            fallbacks = fw.statistics(sid).fallbacks
            results[tier] = _run_checks(proxy, wl)
            unserved[tier] = fw.statistics(sid).fallbacks - fallbacks
            now = next(s for s in fw.services() if s.service_id == sid)
            if unserved[tier] or now.tier != tier:
                continue  # a fault moved the service away: nothing left to time there
            if tier == Tier.HARDWARE:
                costs[tier] = _hardware_cost(fw, proxy, now.region, wl, timing)
            else:
                costs[tier] = _soft_cost(proxy, tier, wl, fw.trace_sample, timing)
    finally:
        soft = [t for t in snap.tiers if t != Tier.HARDWARE]
        if soft and Tier.HARDWARE in results:
            fw.set_tier(sid, snap.tier if snap.tier in soft else soft[0])  # frees the region
        fw.unget_service(proxy)
    agree, problems = _compare(results, wl, unserved, refused)
    totals = {t: c.interface_us + c.core_us for t, c in costs.items()}
    slowest = max(totals, key=lambda t: totals[t]) if totals else None
    tiers: dict[str, Any] = {}
    for tier in snap.tiers:
        cost = costs.get(tier)
        if cost is None or slowest is None:
            why = refused.get(tier, "a fault moved the service off this tier")
            tiers[tier] = {"error": f"not timed: {why}"}
            continue
        measured = cost.total_label == costs[slowest].total_label == "measured"
        gain = totals[slowest] / totals[tier] if totals[tier] > 0 else float("inf")
        tiers[tier] = cost.report(gain, "measured" if measured else "modeled")
    return {
        "service_id": sid,
        "interface": snap.interface,
        "module": snap.module,
        "properties": dict(snap.properties),
        "tiers": tiers,
        "slowest_tier": slowest,
        "agree": agree,
        "disagreements": problems,
        "workload": {**wl.summary(), "seed": options["seed"], "label": "input"},
    }


def profile_service(
    path_or_interface: str | Path,
    *,
    fabric: str | Path | Fabric | None = None,
    filter: str | None = None,
    workload: ProfileWorkload | None = None,
    seed: int = 1,
    vectors: int = 8,
    size: int | None = None,
    rounds: int = 5,
    round_ms: float = 5.0,
) -> dict[str, Any]:
    """Profile every service of a module (a path, or a shipped module's name) or every
    shipped service of an interface (full or short name) at all its tiers, in a fresh
    :class:`~juggle.runtime.framework.Framework` on board ``fabric`` (a profile name or path,
    or an opened :class:`~juggle.fabric.fabric.Fabric`, which the profile closes; None: the
    board a module path's descriptor records, ``[module] board``, else ``xupv2p``).

    ``filter`` (LDAP, on service properties) narrows the services; ``workload`` replaces the
    built-in ones (:func:`workload_for`: ``seed``, ``vectors``, ``size``); each timing keeps
    the best of ``rounds`` rounds of about ``round_ms`` ms. Returns ``{"target", "modules",
    "fabric", "backend", "agree", "services": [...], "labels"}``; each service has
    ``tiers[tier]`` with ``interface`` / ``core`` parts, ``interface_us``, ``core_us``,
    ``total_us``, ``gain`` and a label per figure (module docstring).

    Raises :class:`~juggle.errors.ServiceUnavailableError` for an unknown target or when no
    service matches, :class:`~juggle.errors.FilterSyntaxError` for a ``filter`` that does not
    parse (its position counted in ``filter`` as given),
    :class:`~juggle.errors.ConfigurationError` for bad options, and what installing the
    module raises.
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ConfigurationError(f'"rounds" must be an int >= 1, got {rounds!r}', value=rounds)
    if not round_ms > 0:
        raise ConfigurationError(f'"round_ms" must be > 0, got {round_ms!r}', value=round_ms)
    from juggle.runtime.framework import Framework
    from juggle.runtime.ldapfilter import parse_filter

    if filter is not None:
        parse_filter(filter)  # a syntax error points into the filter as given, not as composed
    target = str(path_or_interface)
    if fabric is None:
        fabric = _recorded_board(Path(target)) or "xupv2p"
    board_name = fabric.profile.name if isinstance(fabric, Fabric) else str(fabric)
    paths, interface = _resolve(target, board_name)
    options = {
        "seed": seed,
        "vectors": vectors,
        "size": size,
        "timing": _Timing(rounds, round_ms / 1000.0),
    }
    # verify_sample=0: the profile compares the tiers itself and times the bare call path (its
    # stand-in drivers would otherwise fail the runtime's checks and quarantine the region)
    with Framework(fabric, verify_sample=0) as fw:
        modules = []
        for path in paths:
            module = fw.install(path)
            module.start()
            modules.append(module.name)
        services = []
        for snap in fw.services():
            if interface is not None and interface not in snap.interfaces:
                continue
            profiled = _profile_one(fw, snap, filter, workload, options)
            if profiled is not None:
                services.append(profiled)
        board, backend = fw.fabric.profile.board.name, fw.fabric.backend
    if not services:
        raise ServiceUnavailableError(
            f"no service of {target!r} matches {filter!r}"
            if filter
            else f"{target!r} has no service",
            interface=target,
        )
    return {
        "target": target,
        "modules": modules,
        "fabric": board,
        "backend": backend,
        "agree": all(s["agree"] for s in services),
        "services": services,
        "labels": dict(LABELS),
    }
