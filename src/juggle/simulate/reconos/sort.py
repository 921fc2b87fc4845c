"""The ReconOS sort application (paper sec. 5, Fig. 4c): bubble-sort threads and a merge thread.

A list of unsigned 32-bit integers lies in shared memory, cut into chunks. Sort threads take a
chunk address from their job mailbox, burst-read the chunk, sort it with a bubble-sort network,
burst-write it back and report the address on the done mailbox. The merge thread hands out the
chunks and, once all are sorted, merges them. The sort thread is one description run three
ways: in software (SW), in a hardware slot (HW), and one of each side by side (SW+HW).

What is measured and what is modeled (the report's ``labels`` say the same):

* software sort time: **measured** wall-clock time of the sort thread's work and OS calls;
* hardware sort time: **modeled** fabric cycles at the fabric clock (bus bursts, the network's
  cycles, OSIF transfers) plus the **measured** CPU side of its OS calls (delegate path);
* merge time: **measured**;
* SW+HW: the two threads' costs are put on one timeline (list scheduling). The merge thread
  gives the next chunk to the worker that is free earliest on the timeline, so the split is
  the one the modeled system would make even though the fabric is simulated on this CPU. Each
  worker's timeline advances by its measured (software) or modeled+measured (hardware) cost
  per chunk; the run's sort time is the latest worker's timeline: measured software time
  overlapped with modeled hardware time. On this host one chunk is in flight at a time, so
  neither worker's measured time includes the other's use of the CPU.

Each run's ``labels`` give every figure one kind (``how`` says how it was obtained). A sort
time with a modeled part (HW, SW+HW) is labeled **modeled**, never measured, and is split
into ``sort_measured_ms`` + ``sort_modeled_ms`` (the latest worker's measured time and its
modeled cycles at the fabric clock); ``total_ms`` takes ``sort_ms``'s kind. ``wall_ms`` is
**measured**: how long this host took to run and simulate the run, not the board's time.

The sort kernel is odd-even transposition, the parallel form of bubble sort: rounds alternate
between comparing pairs (0,1),(2,3)… and (1,2),(3,4)…, stopping after two rounds without an
exchange. Software runs it vectorised with numpy; the hardware model runs the same rounds on
``units`` compare-exchange units fed by banked block RAM (see :class:`SortHardware`).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from juggle.errors import HwThreadArgumentError, OsCallTimeoutError, WouldBlock
from juggle.hwthreads._calls import (
    BurstRead,
    BurstWrite,
    Busy,
    GetInitData,
    MboxGet,
    MboxPut,
    OsCall,
    ThreadExit,
)
from juggle.hwthreads._memory import WORD_BYTES, SharedMemory
from juggle.hwthreads._objects import Mailbox
from juggle.hwthreads._runtime import ThreadRuntime
from juggle.hwthreads._slots import FixedSlots, SlotProvider
from juggle.hwthreads._thread import (
    HardwareThread,
    ThreadDescription,
    ThreadState,
    ThreadStatistics,
    ThreadTier,
)
from juggle.hwthreads._timing import HwTiming

SORT_DESIGN = "bubble_sort"
"""Design name of the sort thread: the slots that can host it list this name."""

STOP = 0xFFFF_FFFF
"""Job word telling a sort thread to exit."""

CHUNK_WORDS = 2048
"""The paper's chunk length: 2^18 words in 128 chunks."""

RUN_NAMES = ("SW", "HW", "SW+HW")

_STEP_TIMEOUT_S = 120.0  # bound on any single wait of the merge thread (no run may hang)
_POLL_S = 20e-6  # how often the merge thread looks whether a worker waits for work again


@dataclass(frozen=True, slots=True)
class NetworkCounts:
    """What one odd-even transposition sort did: rounds, comparisons, exchanges."""

    size: int
    rounds: int
    comparisons: int
    exchanges: int


def odd_even_transposition_sort(values: npt.NDArray[np.uint32]) -> NetworkCounts:
    """Sort ``values`` in place with the bubble-sort network; return what it did.

    Every round compares all pairs of one parity at once; the sort stops after two
    consecutive rounds without an exchange (then both parities are in order).
    """
    n = int(values.size)
    rounds = comparisons = exchanges = quiet = phase = 0
    while quiet < 2 and n > 1:
        left = values[phase : n - 1 : 2]
        right = values[phase + 1 : n : 2]
        swaps = int(np.count_nonzero(left > right))
        if swaps:
            low = np.minimum(left, right)
            np.maximum(left, right, out=right)
            left[...] = low
        rounds += 1
        comparisons += int(left.size)
        exchanges += swaps
        quiet = 0 if swaps else quiet + 1
        phase ^= 1
    return NetworkCounts(n, rounds, comparisons, exchanges)


@dataclass(frozen=True, slots=True)
class SortHardware:
    """Modeled hardware sorter: ``units`` compare-exchange units over banked block RAM.

    A round of the network handles its pairs ``units`` at a time, one batch per cycle, plus
    ``round_overhead_cycles`` of pipeline fill. With ``units=1`` this is a sequential
    bubble sorter (about 21 ms per 2048-word chunk at 100 MHz).
    """

    units: int = 8
    round_overhead_cycles: int = 3

    def __post_init__(self) -> None:
        """Raises: HwThreadArgumentError: ``units`` < 1 or a negative overhead."""
        if self.units < 1 or self.round_overhead_cycles < 0:
            raise HwThreadArgumentError(f"bad sorter parameters {self!r}")

    def cycles(self, counts: NetworkCounts) -> int:
        """Modeled cycles of the rounds ``counts`` reports (modeled)."""
        even_rounds = (counts.rounds + 1) // 2
        odd_rounds = counts.rounds // 2
        per_even = math.ceil((counts.size // 2) / self.units) + self.round_overhead_cycles
        per_odd = math.ceil(((counts.size - 1) // 2) / self.units) + self.round_overhead_cycles
        return even_rounds * per_even + odd_rounds * per_odd


@dataclass(frozen=True, slots=True)
class SortInit:
    """Init data of a sort thread: chunk length and the hardware sorter's model."""

    chunk_words: int
    hardware: SortHardware


def sort_thread_body(context: object) -> Generator[OsCall, Any, None]:
    """The sort thread, written once (handles: 0 jobs mailbox, 1 done mailbox, 2 memory)."""
    init: SortInit = yield GetInitData()
    while (job := (yield MboxGet(0))) != STOP:
        chunk = yield BurstRead(2, job, init.chunk_words)
        counts = odd_even_transposition_sort(chunk)
        yield Busy(init.hardware.cycles(counts))
        yield BurstWrite(2, job, chunk)
        yield MboxPut(1, job)
    yield ThreadExit(0)


SORT_THREAD = ThreadDescription(SORT_DESIGN, sort_thread_body)
"""The sort thread's description, runnable in hardware or software."""


def merge_two(left: npt.NDArray[np.uint32], right: npt.NDArray[np.uint32]) -> npt.NDArray[Any]:
    """Merge two sorted arrays (stable: equal keys of ``left`` first), vectorised."""
    merged = np.empty(left.size + right.size, dtype=left.dtype)
    merged[np.arange(left.size) + np.searchsorted(right, left, side="left")] = left
    merged[np.arange(right.size) + np.searchsorted(left, right, side="right")] = right
    return merged


def merge_runs(runs: list[npt.NDArray[np.uint32]]) -> npt.NDArray[np.uint32]:
    """Merge sorted runs pairwise, level by level, into one sorted array."""
    if not runs:
        return np.empty(0, dtype=np.uint32)
    while len(runs) > 1:
        paired = [merge_two(runs[i], runs[i + 1]) for i in range(0, len(runs) - 1, 2)]
        runs = paired + ([runs[-1]] if len(runs) % 2 else [])
    return runs[0]


@dataclass
class _Worker:
    """The merge thread's view of one sort thread on the combined timeline."""

    thread: HardwareThread
    jobs: Mailbox[int]
    clock_ns: float = 0.0
    chunks: int = 0
    measured_ns: int = 0
    modeled_cycles: int = 0

    def advance(self, before: ThreadStatistics) -> None:
        """Move the timeline by what the thread did since ``before``: its measured time and
        its modeled cycles, kept apart (``clock_ns`` is their sum)."""
        after = self.thread.statistics()
        self.clock_ns += after.timeline_ns - before.timeline_ns
        self.measured_ns += after.measured_ns - before.measured_ns
        self.modeled_cycles += after.modeled_cycles - before.modeled_cycles
        self.chunks += 1


def _distribute(
    workers: list[_Worker],
    done: Mailbox[int],
    addresses: list[int],
    sorted_chunk: Callable[[int], None] | None = None,
) -> None:
    """Hand out every chunk to the worker earliest on the timeline and wait for it;
    ``sorted_chunk(chunks sorted so far)`` after each, outside any measured time.

    One chunk is in flight at a time on this host, so no worker's measured time includes
    another's use of the CPU (Python runs one thread at a time); the workers overlap on the
    timeline, where each chunk starts when its worker became free. A chunk's cost is the
    worker's timeline advance from taking the job until it waits for the next one.
    """
    for worker in workers:
        _await_parked(worker)
    for address in addresses:
        worker = min(workers, key=lambda w: w.clock_ns)
        before = worker.thread.statistics()
        worker.jobs.put(address, timeout=_STEP_TIMEOUT_S)
        finished = done.get(timeout=_STEP_TIMEOUT_S)
        if finished != address:
            raise HwThreadArgumentError(f"sort thread reported {finished:#x}, not {address:#x}")
        _await_parked(worker)
        worker.advance(before)
        if sorted_chunk is not None:
            sorted_chunk(sum(w.chunks for w in workers))


def _await_parked(worker: _Worker) -> None:
    """Wait until ``worker`` waits on its job mailbox again, its last call fully accounted.

    Raises:
        OsCallTimeoutError: it did not get there within the step timeout.
    """
    deadline = time.monotonic() + _STEP_TIMEOUT_S
    while worker.jobs.statistics().waiting_getters == 0:
        if worker.thread.state in (ThreadState.STOPPED, ThreadState.FAILED):
            return
        if time.monotonic() > deadline:
            raise OsCallTimeoutError(
                f"{worker.thread.name} did not ask for work", thread=worker.thread.name
            )
        time.sleep(_POLL_S)


def _validate(size: int, chunks: int) -> int:
    if chunks < 1:
        raise HwThreadArgumentError(f'"chunks" must be >= 1, got {chunks!r}', value=chunks)
    if size < 2 * chunks or size % chunks:
        raise HwThreadArgumentError(
            f'"size" must be a multiple of "chunks" with >= 2 words per chunk, '
            f"got size={size!r}, chunks={chunks!r}",
            value=size,
        )
    return size // chunks


def _run_once(
    tiers: tuple[ThreadTier, ...],
    data: npt.NDArray[np.uint32],
    chunk_words: int,
    slots: SlotProvider,
    timing: HwTiming,
    hardware: SortHardware,
    sorted_chunk: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    wall_start = time.perf_counter_ns()
    size = int(data.size)
    memory = SharedMemory(2 * size * WORD_BYTES, name="sort")
    memory.write_burst(0, data)
    done: Mailbox[int] = Mailbox(len(tiers) + 1, name="done")
    runtime = ThreadRuntime(slots, timing)
    init = SortInit(chunk_words, hardware)
    workers: list[_Worker] = []
    for index, tier in enumerate(tiers):
        jobs: Mailbox[int] = Mailbox(1, name=f"jobs{index}")
        create = runtime.create_hw if tier is ThreadTier.HARDWARE else runtime.create_sw
        workers.append(_Worker(create(SORT_THREAD, [jobs, done, memory], init), jobs))
    addresses = [i * chunk_words * WORD_BYTES for i in range(size // chunk_words)]
    try:
        _distribute(workers, done, addresses, sorted_chunk)
    except BaseException:
        for worker in workers:  # stop what still runs, without waiting on a stalled thread
            with contextlib.suppress(WouldBlock):
                worker.jobs.tryput(STOP)
        raise
    for worker in workers:
        worker.jobs.put(STOP, timeout=_STEP_TIMEOUT_S)
    for worker in workers:
        worker.thread.join(timeout=_STEP_TIMEOUT_S)
    latest = max(workers, key=lambda w: w.clock_ns)

    merge_start = time.perf_counter_ns()
    words = memory.words
    runs = [words[a // WORD_BYTES : a // WORD_BYTES + chunk_words] for a in addresses]
    merged = merge_runs(runs)
    memory.write_burst(size * WORD_BYTES, merged)
    merge_ns = time.perf_counter_ns() - merge_start

    output = memory.words[size:]
    verified = bool(np.all(output[1:] >= output[:-1]) and np.array_equal(output, np.sort(data)))
    return _report(tiers, workers, latest, timing, merge_ns, verified, wall_start)


def _report(
    tiers: tuple[ThreadTier, ...],
    workers: list[_Worker],
    latest: _Worker,
    timing: HwTiming,
    merge_ns: int,
    verified: bool,
    wall_start: int,
) -> dict[str, Any]:
    """One run's figures; ``latest`` is the worker whose timeline ends last (the sort time)."""
    stats = {tier: w.thread.statistics() for tier, w in zip(tiers, workers, strict=True)}
    hw = stats.get(ThreadTier.HARDWARE)
    sw = stats.get(ThreadTier.SOFTWARE)
    chunks = {tier: w.chunks for tier, w in zip(tiers, workers, strict=True)}
    sort_measured_ms = latest.measured_ns / 1e6
    sort_modeled_ms = timing.seconds(latest.modeled_cycles) * 1e3
    sort_ms = sort_measured_ms + sort_modeled_ms
    merge_ms = merge_ns / 1e6
    return {
        "sort_ms": sort_ms,
        "sort_measured_ms": sort_measured_ms,
        "sort_modeled_ms": sort_modeled_ms,
        "merge_ms": merge_ms,
        "total_ms": sort_ms + merge_ms,
        "verified": verified,
        "chunks_sw": chunks.get(ThreadTier.SOFTWARE, 0),
        "chunks_hw": chunks.get(ThreadTier.HARDWARE, 0),
        "sw_sort_measured_ms": 0.0 if sw is None else sw.measured_ns / 1e6,
        "hw_sort_modeled_ms": 0.0 if hw is None else timing.seconds(hw.modeled_cycles) * 1e3,
        "hw_oscall_measured_ms": 0.0 if hw is None else hw.measured_ns / 1e6,
        "hw_modeled_cycles": 0 if hw is None else hw.modeled_cycles,
        "wall_ms": (time.perf_counter_ns() - wall_start) / 1e6,
        "labels": _labels(tiers),
        "how": _how(tiers),
    }


def _labels(tiers: tuple[ThreadTier, ...]) -> dict[str, str]:
    """Each figure's kind. A sum with a modeled part is modeled, never measured: the split
    ``sort_measured_ms`` / ``sort_modeled_ms`` shows how much of it was measured."""
    software_only = tiers == (ThreadTier.SOFTWARE,)
    timeline = "measured" if software_only else "modeled"
    return {
        "sort_ms": timeline,
        "sort_measured_ms": "measured",
        "sort_modeled_ms": "modeled",
        "merge_ms": "measured",
        "total_ms": timeline,
        "chunks_sw": "input" if len(tiers) == 1 else "modeled",
        "chunks_hw": "input" if len(tiers) == 1 else "modeled",
        "sw_sort_measured_ms": "measured",
        "hw_sort_modeled_ms": "modeled",
        "hw_oscall_measured_ms": "measured",
        "hw_modeled_cycles": "modeled",
        "wall_ms": "measured",
    }


def _how(tiers: tuple[ThreadTier, ...]) -> dict[str, str]:
    """How each figure of a run was obtained (the text behind :func:`_labels`)."""
    if tiers == (ThreadTier.SOFTWARE,):
        sort = "the software sort thread's wall-clock time (work + OS calls), chunk by chunk"
        chunks = "all chunks go to the one software worker"
    elif tiers == (ThreadTier.HARDWARE,):
        sort = (
            "modeled: the hardware sort thread's fabric cycles at the fabric clock (network, "
            "bursts, OSIF; sort_modeled_ms) plus the CPU side of its OS calls (delegate path), "
            "measured on this host and used as the model's input (sort_measured_ms)"
        )
        chunks = "all chunks go to the one hardware worker"
    else:
        sort = (
            "modeled: the latest worker's end on one timeline, where each chunk costs the "
            "software worker its measured time and the hardware worker its modeled fabric "
            "time plus measured delegate time; chunks go to the earliest-free worker, so "
            "measured and modeled time overlap as they would on the board. sort_measured_ms "
            "and sort_modeled_ms split the latest worker's time"
        )
        chunks = (
            "the split the combined timeline made: the earliest-free worker takes the next "
            "chunk, so it follows the measured software and modeled hardware costs"
        )
    return {
        "sort_ms": sort,
        "sort_measured_ms": "the measured part of sort_ms (the latest worker's wall-clock "
        "time on this host)",
        "sort_modeled_ms": "the modeled part of sort_ms (the latest worker's fabric cycles at "
        "the fabric clock; 0 in software)",
        "merge_ms": "the software merge's wall-clock time, once every chunk is sorted",
        "total_ms": "sort_ms + merge_ms (the merge starts when all chunks are sorted); "
        "modeled when sort_ms is",
        "chunks_sw": chunks,
        "chunks_hw": chunks,
        "sw_sort_measured_ms": "the software thread's measured time, whole run",
        "hw_sort_modeled_ms": "the hardware thread's modeled cycles at the fabric clock, whole run",
        "hw_oscall_measured_ms": "the hardware thread's measured CPU time (delegate OS "
        "calls), whole run",
        "hw_modeled_cycles": "the hardware thread's modeled fabric cycles, whole run",
        "wall_ms": "how long this host took to run (and simulate) the run: not the board's time",
    }


def _offset(
    progress: Callable[[str, int, int], None], name: str, first: int, total: int
) -> Callable[[int], None]:
    """``progress`` as one run sees it: chunks of this run, counted after the runs before."""

    def tick(done: int) -> None:
        progress(name, first + done, total)

    return tick


def run_sort(
    size: int = 2**18,
    chunks: int | None = None,
    seed: int = 0,
    *,
    slots: SlotProvider | None = None,
    timing: HwTiming | None = None,
    hardware: SortHardware | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Run the sort application as SW, HW and SW+HW on the same seeded input.

    ``progress(run name, chunks sorted, chunks in all three runs)`` is called after every
    chunk, between the measured stretches, so it costs the runs no measured time.

    ``chunks`` None keeps the paper's chunk length, :data:`CHUNK_WORDS` (2^18 words in 128
    chunks), so a smaller ``size`` means fewer chunks; a list shorter than that is one chunk.
    ``slots`` must offer a slot hosting :data:`SORT_DESIGN` (default: one such slot).
    Returns ``runs`` → ``SW``/``HW``/``SW+HW`` → ``sort_ms``, ``merge_ms``, ``verified``, …,
    with ``labels`` per run saying which figures are measured and which modeled.

    Raises:
        HwThreadArgumentError: ``size`` is not a multiple of ``chunks`` with >= 2 words each.
        NoFreeSlotError: the slot provider has no slot for the hardware sort thread.
        ThreadFailedError: a sort thread failed.
        OsCallTimeoutError: a run stalled (a bounded wait of the merge thread expired).
    """
    if chunks is None:
        chunks = max(1, size // CHUNK_WORDS)
    chunk_words = _validate(size, chunks)
    slots = slots if slots is not None else FixedSlots.uniform(1, [SORT_DESIGN])
    timing = timing if timing is not None else HwTiming()
    hardware = hardware if hardware is not None else SortHardware()
    data = np.random.default_rng(seed).integers(0, 2**32, size, dtype=np.uint32)
    plans = {
        "SW": (ThreadTier.SOFTWARE,),
        "HW": (ThreadTier.HARDWARE,),
        "SW+HW": (ThreadTier.SOFTWARE, ThreadTier.HARDWARE),
    }
    runs: dict[str, dict[str, Any]] = {}
    total = len(plans) * chunks
    for k, (name, tiers) in enumerate(plans.items()):
        tick = None if progress is None else _offset(progress, name, k * chunks, total)
        runs[name] = _run_once(tiers, data, chunk_words, slots, timing, hardware, tick)
    return {
        "size": size,
        "chunks": chunks,
        "chunk_words": chunk_words,
        "seed": seed,
        "fabric_clock_hz": timing.clock_hz,
        "sort_units": hardware.units,
        "runs": runs,
        "labels": {
            "size": "input",
            "chunks": "input",
            "chunk_words": "input",
            "seed": "input",
            "fabric_clock_hz": "input",
            "sort_units": "input",
        },
        "how": {
            "chunks": f"--chunks, or one chunk per {CHUNK_WORDS} words (the paper's length)",
            "chunk_words": "size / chunks",
            "seed": "seed of the random input list",
            "fabric_clock_hz": "the clock the hardware sort thread's modeled cycles run at",
            "sort_units": "compare-exchange units of the modeled hardware sorter",
            "runs": "each run has its own labels (kind per figure) and how",
        },
    }


__all__ = [
    "CHUNK_WORDS",
    "RUN_NAMES",
    "SORT_DESIGN",
    "SORT_THREAD",
    "STOP",
    "NetworkCounts",
    "SortHardware",
    "SortInit",
    "merge_runs",
    "merge_two",
    "odd_even_transposition_sort",
    "run_sort",
    "sort_thread_body",
]
