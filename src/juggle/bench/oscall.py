"""OS-call latency benchmark (ReconOS paper, Table 2), on this machine.

Synthetic threads time single OS calls (mutex lock and unlock, semaphore post) and the
*turnaround*: the time from one thread releasing a mutex (posting a semaphore) until the next
thread waiting on it has it and runs on, for every pairing of software and hardware threads.

What is measured and what is modeled:

* ``*_us`` figures are **measured** wall-clock medians (perf_counter) through the real call
  paths: a software thread's calls run on its own Python thread; a hardware thread's kernel
  calls cross its OSIF to its delegate thread and back, real thread hand-offs on this CPU;
* ``*_hw_cycles_modeled`` figures are the **modeled** fabric-side cycles the hardware thread(s)
  add on top (OSIF handshakes and DCR word transfers, :class:`~juggle.hwthreads.HwTiming`),
  which cannot be measured here. For a turnaround they count the releaser's request if it is
  hardware plus the waiter's result transfer if it is hardware.
* ``ecos_ppc_*`` figures are the paper's platform, not this machine: the eCos/PowerPC 405
  delegate-path model of :mod:`juggle.simulate.reconos.ecos`, per cell of Table 2 the model's
  bus cycles (``calibrated``: every cell is computed from costs fitted to Table 2 cells), the
  paper's (``input``) and the deviation. ``juggle simulate oscall`` prints the same table
  (:mod:`juggle.commands.simulate.oscall`), nested as ``modeled_ecos_ppc``, with every step of
  every path.

:data:`LABELS` maps every key :func:`run` returns to ``measured``, ``modeled``, ``calibrated``
or ``input``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from juggle.errors import OsCallTimeoutError
from juggle.hwthreads import (
    FixedSlots,
    GetInitData,
    HwTiming,
    Mutex,
    MutexLock,
    MutexUnlock,
    OsCall,
    Semaphore,
    SemPost,
    SemWait,
    ThreadDescription,
    ThreadRuntime,
    ThreadTier,
)
from juggle.simulate.reconos.ecos import CELLS, cell_labels, modeled_ecos_ppc

PAIRS = ("sw_sw", "sw_hw", "hw_sw", "hw_hw")
"""Turnaround pairings, releaser first: ``sw_hw`` = a software thread releases, hardware waits."""

_WAIT_S = 10.0  # bound on every wait of the benchmark: it never hangs


def _labels() -> dict[str, str]:
    labels = {
        "mutex_lock_sw_us": "measured",
        "mutex_unlock_sw_us": "measured",
        "mutex_lock_hw_us": "measured",
        "mutex_unlock_hw_us": "measured",
        "mutex_lock_hw_hw_cycles_modeled": "modeled",
        "mutex_unlock_hw_hw_cycles_modeled": "modeled",
        "semaphore_post_sw_us": "measured",
        "semaphore_post_hw_us": "measured",
        "semaphore_post_hw_hw_cycles_modeled": "modeled",
    }
    for obj in ("mutex", "semaphore"):
        for pair in PAIRS:
            labels[f"{obj}_turnaround_{pair}_us"] = "measured"
            if "hw" in pair:
                labels[f"{obj}_turnaround_{pair}_hw_cycles_modeled"] = "modeled"
    for cell, label in cell_labels().items():
        labels[f"ecos_ppc_{cell}_cycles"] = label
        labels[f"ecos_ppc_{cell}_paper_cycles"] = "input"
        labels[f"ecos_ppc_{cell}_deviation_pct"] = label
    return labels


LABELS: dict[str, str] = _labels()
"""Every key of :func:`run`'s result → ``measured`` (this machine), ``modeled``,
``calibrated`` (an eCos/PPC cell, computed from costs fitted to Table 2 cells) or ``input``
(the paper's)."""


@dataclass
class _Probe:
    """Init data of the benchmark threads: iteration count, host-side hooks, timestamps."""

    iterations: int
    ready: Callable[[], None] = lambda: None
    first: list[int] = field(default_factory=list)
    second: list[int] = field(default_factory=list)


Body = Generator[OsCall, Any, None]


def _raw_mutex(context: object) -> Body:
    """Times lock and unlock of an uncontended mutex (handle 0)."""
    probe: _Probe = yield GetInitData()
    for _ in range(probe.iterations):
        start = time.perf_counter_ns()
        yield MutexLock(0)
        locked = time.perf_counter_ns()
        yield MutexUnlock(0)
        probe.first.append(locked - start)
        probe.second.append(time.perf_counter_ns() - locked)


def _raw_post(context: object) -> Body:
    """Times posts of a semaphore nobody waits on (handle 0)."""
    probe: _Probe = yield GetInitData()
    for _ in range(probe.iterations):
        start = time.perf_counter_ns()
        yield SemPost(0)
        probe.first.append(time.perf_counter_ns() - start)


def _mutex_releaser(context: object) -> Body:
    """Holds the mutex (0), lets the waiter queue on it (go: 1), stamps, unlocks (back: 2)."""
    probe: _Probe = yield GetInitData()
    for _ in range(probe.iterations):
        yield MutexLock(0)
        yield SemPost(1)
        probe.ready()
        probe.first.append(time.perf_counter_ns())
        yield MutexUnlock(0)
        yield SemWait(2)


def _mutex_waiter(context: object) -> Body:
    """Queues on the mutex (0) when told (go: 1), stamps when it has it, reports (back: 2)."""
    probe: _Probe = yield GetInitData()
    for _ in range(probe.iterations):
        yield SemWait(1)
        yield MutexLock(0)
        probe.second.append(time.perf_counter_ns())
        yield MutexUnlock(0)
        yield SemPost(2)


def _sem_releaser(context: object) -> Body:
    """Waits until the waiter blocks on the semaphore (0), stamps, posts; then back (1)."""
    probe: _Probe = yield GetInitData()
    for _ in range(probe.iterations):
        probe.ready()
        probe.first.append(time.perf_counter_ns())
        yield SemPost(0)
        yield SemWait(1)


def _sem_waiter(context: object) -> Body:
    """Waits on the semaphore (0), stamps when through, reports (back: 1)."""
    probe: _Probe = yield GetInitData()
    for _ in range(probe.iterations):
        yield SemWait(0)
        probe.second.append(time.perf_counter_ns())
        yield SemPost(1)


_DESIGNS = {
    name: ThreadDescription(f"bench_{name}", body)
    for name, body in {
        "raw_mutex": _raw_mutex,
        "raw_post": _raw_post,
        "mutex_releaser": _mutex_releaser,
        "mutex_waiter": _mutex_waiter,
        "semaphore_releaser": _sem_releaser,
        "semaphore_waiter": _sem_waiter,
    }.items()
}


def _runtime(timing: HwTiming) -> ThreadRuntime:
    designs = [d.name for d in _DESIGNS.values()]
    return ThreadRuntime(FixedSlots.uniform(2, designs), timing)


def _tier(code: str) -> ThreadTier:
    return ThreadTier.HARDWARE if code == "hw" else ThreadTier.SOFTWARE


def _until_waiting(count: Callable[[], int]) -> Callable[[], None]:
    """A host-side hook returning once ``count()`` reports a waiter (bounded)."""

    def ready() -> None:
        deadline = time.monotonic() + _WAIT_S
        while count() == 0:
            if time.monotonic() > deadline:
                raise OsCallTimeoutError("benchmark waiter never blocked", value=_WAIT_S)
            time.sleep(0)

    return ready


def _median_us(samples: list[int]) -> float:
    return statistics.median(samples) / 1e3


def _raw(runtime: ThreadRuntime, tier: ThreadTier, iterations: int) -> tuple[float, float, float]:
    mutex_probe = _Probe(iterations)
    thread = runtime.create(_DESIGNS["raw_mutex"], [Mutex()], mutex_probe)
    thread.start(tier)
    thread.join(_WAIT_S)
    post_probe = _Probe(iterations)
    thread = runtime.create(_DESIGNS["raw_post"], [Semaphore()], post_probe)
    thread.start(tier)
    thread.join(_WAIT_S)
    return (
        _median_us(mutex_probe.first),
        _median_us(mutex_probe.second),
        _median_us(post_probe.first),
    )


def _turnaround(runtime: ThreadRuntime, kind: str, pair: str, iterations: int) -> float:
    """Median µs from the releaser's stamp to the waiter's stamp, over ``iterations``."""
    releaser_tier, waiter_tier = (_tier(code) for code in pair.split("_"))
    probe = _Probe(iterations)
    if kind == "mutex":
        mutex = Mutex("bench")
        probe.ready = _until_waiting(lambda: mutex.statistics().waiting)
        resources: list[object] = [mutex, Semaphore(name="go"), Semaphore(name="back")]
    else:
        sem = Semaphore(name="bench")
        probe.ready = _until_waiting(lambda: sem.statistics().waiting)
        resources = [sem, Semaphore(name="back")]
    waiter = runtime.create(_DESIGNS[f"{kind}_waiter"], resources, probe)
    releaser = runtime.create(_DESIGNS[f"{kind}_releaser"], resources, probe)
    waiter.start(waiter_tier)
    releaser.start(releaser_tier)
    releaser.join(_WAIT_S * 3)
    waiter.join(_WAIT_S)
    gaps = [after - before for before, after in zip(probe.first, probe.second, strict=True)]
    return _median_us(gaps)


def run(quick: bool = False) -> dict[str, float]:
    """Run the OS-call benchmark; returns a flat dict of floats keyed as in :data:`LABELS`.

    ``quick`` uses fewer iterations (for tests and smoke runs).

    Raises:
        OsCallTimeoutError: a benchmark thread stalled (every wait is bounded).
        ThreadFailedError: a benchmark thread failed.
    """
    raw_iterations, turn_iterations = (200, 40) if quick else (3000, 400)
    timing = HwTiming()
    runtime = _runtime(timing)
    results: dict[str, float] = {}
    for tier in (ThreadTier.SOFTWARE, ThreadTier.HARDWARE):
        lock, unlock, post = _raw(runtime, tier, raw_iterations)
        results[f"mutex_lock_{tier.value}_us"] = lock
        results[f"mutex_unlock_{tier.value}_us"] = unlock
        results[f"semaphore_post_{tier.value}_us"] = post
    results["mutex_lock_hw_hw_cycles_modeled"] = float(_call_cycles(timing, MutexLock(0)))
    results["mutex_unlock_hw_hw_cycles_modeled"] = float(_call_cycles(timing, MutexUnlock(0)))
    results["semaphore_post_hw_hw_cycles_modeled"] = float(_call_cycles(timing, SemPost(0)))
    for kind, release, acquire in (
        ("mutex", MutexUnlock(0), MutexLock(0)),
        ("semaphore", SemPost(0), SemWait(0)),
    ):
        for pair in PAIRS:
            results[f"{kind}_turnaround_{pair}_us"] = _turnaround(
                runtime, kind, pair, turn_iterations
            )
            if "hw" in pair:
                cycles = _turnaround_cycles(timing, pair, release, acquire)
                results[f"{kind}_turnaround_{pair}_hw_cycles_modeled"] = float(cycles)
    results.update(ecos_ppc_figures())
    return results


def ecos_ppc_figures() -> dict[str, float]:
    """The ``modeled_ecos_ppc`` table flattened to floats: per cell of Table 2 the model's bus
    cycles, the paper's and the deviation in percent (keys ``ecos_ppc_<cell>_*``)."""
    table = modeled_ecos_ppc()
    figures: dict[str, float] = {}
    for cell in CELLS:
        entry = table["cells"][cell]
        figures[f"ecos_ppc_{cell}_cycles"] = float(entry["model_cycles"])
        figures[f"ecos_ppc_{cell}_paper_cycles"] = float(entry["paper_cycles"])
        figures[f"ecos_ppc_{cell}_deviation_pct"] = float(entry["deviation_pct"])
    return figures


def _call_cycles(timing: HwTiming, call: MutexLock | MutexUnlock | SemPost) -> int:
    """Modeled fabric cycles of one kernel call: request out, result back."""
    return timing.osif_request_cycles(call.request_words) + timing.osif_response_cycles(
        call.response_words
    )


def _turnaround_cycles(
    timing: HwTiming, pair: str, release: MutexUnlock | SemPost, acquire: MutexLock | SemWait
) -> int:
    """Modeled fabric cycles on a turnaround's critical path (hardware sides only)."""
    releaser, waiter = pair.split("_")
    cycles = 0
    if releaser == "hw":
        cycles += timing.osif_request_cycles(release.request_words)
    if waiter == "hw":
        cycles += timing.osif_response_cycles(acquire.response_words)
    return cycles
