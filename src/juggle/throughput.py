"""Hardware throughput: one definition for ``juggle demo``, ``juggle profile`` and
``juggle simulate tdes``.

The time of a hardware call is *modeled*: the fabric cycles its register window was busy
during the call, at the board's fabric clock. Those cycles are the bus transactions the
driver issued, and they hold the core's own cycles (the status polls wait for the core), so
they are **core + bus**: :attr:`HardwareTime.core_cycles` (the core model's operations times
its latency, where the model counts them) and :attr:`HardwareTime.bus_cycles` (the rest, the
transactions the core does not hide). The throughput of a call is its bytes over that time
(:func:`throughput_mb_s`).

The Python driver that issues the transactions runs on this machine; its time is *measured*
and shown beside the modeled figure (:func:`hardware_figures`, ``driver_us``), never counted
in it: on a board the driver is code on the board's CPU, not Python here, so counting it
would make the hardware tier as slow as this machine's interpreter. ``juggle simulate tdes``
models the paper's board, where the driver is C on a 300 MHz PowerPC: it adds that driver's
modeled cycles to the same core + bus time of a block (:func:`modeled_us`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from juggle.errors import ConfigurationError

__all__ = [
    "FIGURE_LABELS",
    "HardwareTime",
    "count_calls",
    "hardware_figures",
    "modeled_us",
    "payload_bytes",
    "throughput_mb_s",
]


def modeled_us(cycles: float, fabric_hz: float) -> float:
    """``cycles`` of the fabric clock ``fabric_hz`` (Hz) in µs. Raises
    :class:`~juggle.errors.ConfigurationError` for a clock that is not > 0."""
    if not fabric_hz > 0:
        raise ConfigurationError(
            f'"fabric_hz" must be > 0 Hz, got {fabric_hz!r}', value=float(fabric_hz)
        )
    return cycles * 1e6 / fabric_hz


def throughput_mb_s(nbytes: float, us: float) -> float:
    """``nbytes`` bytes in ``us`` µs as MB/s (10^6 bytes a second); 0.0 when no time passed."""
    return nbytes / us if us > 0 else 0.0


def payload_bytes(args: tuple[Any, ...]) -> int:
    """The bytes a call carries: the lengths of its bytes and bytearray arguments."""
    return sum(len(a) for a in args if isinstance(a, bytes | bytearray))


@dataclass(frozen=True, slots=True)
class HardwareTime:
    """The modeled time of one hardware call: ``busy_cycles`` (core + bus, the cycles the
    window was busy), ``core_cycles`` (the core's part, None when its model does not count
    its operations), ``reads`` / ``writes`` (bus transactions) and ``operations`` (core
    operations, None as ``core_cycles``), all per call, at ``fabric_hz``."""

    busy_cycles: float
    core_cycles: float | None
    reads: float
    writes: float
    operations: float | None
    fabric_hz: float

    @property
    def bus_cycles(self) -> float:
        """The bus transactions' cycles the core does not hide (busy less core)."""
        return max(0.0, self.busy_cycles - (self.core_cycles or 0.0))

    @property
    def us(self) -> float:
        """Core + bus, µs: the hardware time of the call."""
        return modeled_us(self.busy_cycles, self.fabric_hz)

    @property
    def core_us(self) -> float | None:
        """The core's part, µs (None when not counted)."""
        return None if self.core_cycles is None else modeled_us(self.core_cycles, self.fabric_hz)

    @property
    def bus_us(self) -> float:
        """The bus's part, µs."""
        return modeled_us(self.bus_cycles, self.fabric_hz)

    def plus(self, other: HardwareTime, weight: float = 1.0) -> HardwareTime:
        """This time plus ``weight`` times ``other`` (sums of calls; same clock)."""

        def add(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else a + weight * b

        return HardwareTime(
            self.busy_cycles + weight * other.busy_cycles,
            add(self.core_cycles, other.core_cycles),
            self.reads + weight * other.reads,
            self.writes + weight * other.writes,
            add(self.operations, other.operations),
            self.fabric_hz,
        )

    def per(self, calls: int) -> HardwareTime:
        """This time (of ``calls`` calls) per call."""
        n = max(1, calls)
        return HardwareTime(
            self.busy_cycles / n,
            None if self.core_cycles is None else self.core_cycles / n,
            self.reads / n,
            self.writes / n,
            None if self.operations is None else self.operations / n,
            self.fabric_hz,
        )


def _core_operations(model: object) -> tuple[int, int] | None:
    """(operations so far, cycles each) of a core model that counts them, else None."""
    for counter, latency in (
        ("blocks", "latency"),
        ("operations", "latency"),
        ("samples", "cycles_per_sample"),
    ):
        ops, cycles = getattr(model, counter, None), getattr(model, latency, None)
        if isinstance(ops, int) and isinstance(cycles, int):
            return ops, cycles
    return None


def count_calls(
    window: object, fabric_hz: float, call: Callable[[], object], calls: int = 1
) -> tuple[HardwareTime | None, object]:
    """Make ``call()`` ``calls`` times and count what ``window`` (a simulated register
    window, ``Fabric.window(region)``) did meanwhile; returns (the modeled time per call, the
    last call's result). The time is None for a window that counts nothing (a real board's):
    its hardware time is not modeled. Nothing else may use the window meanwhile. Raises what
    ``call`` raises."""
    statistics = getattr(window, "statistics", None)
    if statistics is None:
        result: object = None
        for _ in range(calls):
            result = call()
        return None, result
    model = getattr(window, "model", None)
    before, ops_before = statistics(), _core_operations(model)
    result = None
    for _ in range(calls):
        result = call()
    after, ops_after = statistics(), _core_operations(model)
    n = max(1, calls)
    core = operations = None
    if ops_before is not None and ops_after is not None:
        operations = (ops_after[0] - ops_before[0]) / n
        core = operations * ops_after[1]
    time = HardwareTime(
        busy_cycles=(after.busy_cycles - before.busy_cycles) / n,
        core_cycles=core,
        reads=(after.reads - before.reads) / n,
        writes=(after.writes - before.writes) / n,
        operations=operations,
        fabric_hz=float(fabric_hz),
    )
    return time, result


#: What each key of :func:`hardware_figures` is (every figure labeled).
FIGURE_LABELS: dict[str, str] = {
    "calls": "measured",
    "bytes_per_call": "input",
    "modeled_us": "modeled",
    "core_us": "modeled",
    "bus_us": "modeled",
    "throughput_mb_s": "modeled",
    "driver_us": "measured",
    "fabric_hz": "input",
}


def hardware_figures(
    time: HardwareTime,
    *,
    bytes_per_call: float,
    driver_us: float | None,
    driver_is: str,
    calls: int | None = None,
) -> dict[str, Any]:
    """The figures of a hardware call, the same wherever hardware throughput is shown:
    ``modeled_us`` (core + bus, *modeled*), its ``core_us`` and ``bus_us``, ``throughput_mb_s``
    (``bytes_per_call`` over ``modeled_us``, *modeled*), and beside them ``driver_us``, the
    *measured* time of the Python driver on this machine (``driver_is`` says what that
    measurement holds; None: not measured); ``calls`` (how many were made) when given. Every
    figure has its label under ``labels``."""
    out: dict[str, Any] = {}
    if calls is not None:
        out["calls"] = calls
    core_us = time.core_us
    out.update(
        {
            "bytes_per_call": bytes_per_call,
            "modeled_us": round(time.us, 4),
            "core_us": None if core_us is None else round(core_us, 4),
            "bus_us": round(time.bus_us, 4),
            "throughput_mb_s": round(throughput_mb_s(bytes_per_call, time.us), 4),
            "driver_us": None if driver_us is None else round(driver_us, 4),
            "driver_is": driver_is,
            "fabric_hz": time.fabric_hz,
        }
    )
    out["labels"] = {key: FIGURE_LABELS[key] for key in out if key in FIGURE_LABELS}
    return out
