"""Hardware threads: one description, delegates with per-instance tables, lifecycle."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
import pytest
from hwt_support import TIMEOUT, Worker, wait_until

import juggle.hwthreads as hwt
from juggle.errors import (
    HandleError,
    NoFreeSlotError,
    OsCallTimeoutError,
    ThreadFailedError,
    ThreadStateError,
)
from juggle.hwthreads import (
    WOULD_BLOCK,
    BurstRead,
    BurstWrite,
    Busy,
    CheckSignal,
    Condition,
    CondWait,
    FixedSlots,
    GetInitData,
    HwTiming,
    Mailbox,
    MboxGet,
    MboxPut,
    MboxTryget,
    MemRead,
    MemWrite,
    Mutex,
    MutexLock,
    MutexTrylock,
    MutexUnlock,
    OsCall,
    Semaphore,
    SemPost,
    SemWait,
    SharedMemory,
    ThreadDescription,
    ThreadExit,
    ThreadRuntime,
    ThreadSlot,
    ThreadState,
    ThreadTier,
    YieldPoint,
)

Body = Generator[OsCall, Any, Any]


def accumulate(context: Any) -> Body:
    """Sums messages from mailbox 0 into a running total, echoes it to mailbox 1.

    The saved context is (count so far, total so far, total not yet sent).
    """
    limit = yield GetInitData()
    count, total, unsent = context if context is not None else (0, 0, None)
    if unsent is not None:
        yield MboxPut(1, unsent)
    while count < limit:
        value = yield MboxGet(0)
        count, total = count + 1, total + value * (count + 1)  # order-sensitive
        yield Busy(10)
        yield YieldPoint((count, total, total))
        yield MboxPut(1, total)
    yield ThreadExit(total)


ACCUMULATE = ThreadDescription("accumulate", accumulate)


def make_runtime(slots: int = 2, *designs: str) -> ThreadRuntime:
    return ThreadRuntime(FixedSlots.uniform(slots, designs or ("accumulate",)))


def feed(inbox: Mailbox[int], outbox: Mailbox[int], values: list[int]) -> list[int]:
    echoes = []
    for value in values:
        inbox.put(value, timeout=TIMEOUT)
        echoes.append(outbox.get(timeout=TIMEOUT))
    return echoes


def expected(values: list[int]) -> list[int]:
    out, total = [], 0
    for i, value in enumerate(values):
        total += value * (i + 1)
        out.append(total)
    return out


@pytest.mark.parametrize("tier", [ThreadTier.HARDWARE, ThreadTier.SOFTWARE])
def test_same_description_runs_in_either_tier(tier: ThreadTier) -> None:
    runtime = make_runtime()
    inbox, outbox = Mailbox[int](2), Mailbox[int](2)
    thread = runtime.create(ACCUMULATE, [inbox, outbox], 5)
    assert thread.state is ThreadState.INIT
    assert thread.start(tier) is tier
    values = [3, 1, 4, 1, 5]
    assert feed(inbox, outbox, values) == expected(values)
    assert thread.join(TIMEOUT) == expected(values)[-1]
    stats = thread.statistics()
    assert stats.state is ThreadState.STOPPED
    assert stats.kernel_calls == 1 + 2 * 5 + 1
    if tier is ThreadTier.HARDWARE:
        assert stats.modeled_cycles > 5 * 10
    else:
        assert stats.modeled_cycles == 0
    assert runtime.slots is not None
    assert runtime.slots.statistics().busy == ()  # type: ignore[attr-defined]


def test_two_instances_work_on_their_own_objects() -> None:
    runtime = make_runtime()
    boxes = [(Mailbox[int](1), Mailbox[int](1)) for _ in range(2)]
    first = runtime.create_hw(ACCUMULATE, list(boxes[0]), 3)
    second = runtime.create_hw(ACCUMULATE, list(boxes[1]), 2)
    assert {first.slot.name, second.slot.name} == {"slot0", "slot1"}  # type: ignore[union-attr]
    assert first.delegate is not second.delegate
    assert feed(*boxes[1], [10, 20]) == expected([10, 20])
    assert feed(*boxes[0], [1, 2, 3]) == expected([1, 2, 3])
    assert first.join(TIMEOUT) == expected([1, 2, 3])[-1]
    assert second.join(TIMEOUT) == expected([10, 20])[-1]
    for inbox, _outbox in boxes:
        assert inbox.statistics().puts == inbox.statistics().gets


def run_with_suspension(
    where: ThreadTier, occupy_first_slot: bool
) -> tuple[list[int], Any, list[str]]:
    """Feed 6 values; suspend after the 3rd is taken; resume ``where``."""
    slots = FixedSlots.uniform(2, ["accumulate"])
    runtime = ThreadRuntime(slots)
    inbox, outbox = Mailbox[int](1), Mailbox[int](1)
    thread = runtime.create_hw(ACCUMULATE, [inbox, outbox], 6)
    places = [thread.slot.name]  # type: ignore[union-attr]
    values = [5, 7, 11, 13, 17, 19]
    echoes = feed(inbox, outbox, values[:2])
    suspender = Worker(lambda: thread.suspend(TIMEOUT))
    wait_until(lambda: thread.state is ThreadState.SUSPENDING)
    inbox.put(values[2], timeout=TIMEOUT)  # the thread takes it and reaches its yield point
    assert suspender.result() is ThreadState.SUSPENDED
    assert thread.slot is None
    assert slots.statistics().busy == ()
    assert thread.statistics().context_bytes > 0
    blocker = slots.acquire(None, "accumulate") if occupy_first_slot else None
    thread.resume(where)
    places.append(thread.slot.name if thread.slot else "software")
    echoes.append(outbox.get(timeout=TIMEOUT))  # the echo owed from before the suspension
    echoes += feed(inbox, outbox, values[3:])
    result = thread.join(TIMEOUT)
    if blocker is not None:
        slots.release(blocker)
    assert thread.statistics().suspensions == 1
    return echoes, result, places


@pytest.mark.parametrize(
    ("where", "occupy", "place"),
    [(ThreadTier.HARDWARE, True, "slot1"), (ThreadTier.SOFTWARE, False, "software")],
)
def test_suspend_resume_continues_from_the_saved_point(
    where: ThreadTier, occupy: bool, place: str
) -> None:
    values = [5, 7, 11, 13, 17, 19]
    echoes, result, places = run_with_suspension(where, occupy)
    assert places == ["slot0", place]
    assert echoes == expected(values)  # same as an uninterrupted run
    assert result == expected(values)[-1]


def test_create_auto_falls_back_to_software_and_create_hw_refuses() -> None:
    runtime = make_runtime(1)
    boxes = [Mailbox[int](1) for _ in range(4)]
    first = runtime.create_auto(ACCUMULATE, boxes[:2], 1)
    second = runtime.create_auto(ACCUMULATE, boxes[2:], 1)
    assert first.state is ThreadState.RUNNING_HW
    assert second.state is ThreadState.RUNNING_SW
    with pytest.raises(NoFreeSlotError):
        runtime.create_hw(ACCUMULATE, boxes[2:], 1)
    assert len(runtime.threads()) == 2  # the refused thread was not kept
    feed(boxes[0], boxes[1], [1])
    feed(boxes[2], boxes[3], [1])
    assert first.join(TIMEOUT) == second.join(TIMEOUT) == 1


def test_no_provider_means_software_only() -> None:
    runtime = ThreadRuntime()
    with pytest.raises(NoFreeSlotError):
        runtime.create_hw(ACCUMULATE, [], 0)
    thread = runtime.create_auto(ACCUMULATE, [], 0)
    assert thread.join(TIMEOUT) == 0


def test_illegal_transitions_are_refused() -> None:
    runtime = make_runtime()
    thread = runtime.create(ACCUMULATE, [Mailbox[int](1), Mailbox[int](1)], 0)
    with pytest.raises(ThreadStateError):
        thread.suspend(0.1)
    with pytest.raises(ThreadStateError):
        thread.resume()
    thread.start(ThreadTier.SOFTWARE)
    thread.join(TIMEOUT)
    with pytest.raises(ThreadStateError):
        thread.start()
    with pytest.raises(ThreadStateError):
        thread.resume()
    for final in (ThreadState.STOPPED, ThreadState.FAILED):
        assert hwt.TRANSITIONS[final] == frozenset()
    assert ThreadState.SUSPENDED in hwt.TRANSITIONS[ThreadState.SUSPENDING]


def test_signal_is_seen_and_cleared_by_the_thread() -> None:
    def poll(context: Any) -> Body:
        checks = 0
        while not (yield CheckSignal()):
            checks += 1
            yield SemWait(0)
        yield ThreadExit(checks)

    sem = Semaphore()
    runtime = make_runtime(1, "poll")
    thread = runtime.create_hw(ThreadDescription("poll", poll), [sem])
    sem.post()
    wait_until(lambda: sem.statistics().waiting == 1)
    thread.signal()
    sem.post()
    assert thread.join(TIMEOUT) == 2


def test_failure_is_reported_and_the_slot_given_back() -> None:
    def broken(context: Any) -> Body:
        yield GetInitData()
        raise RuntimeError("boom")

    runtime = make_runtime(1, "broken")
    thread = runtime.create_hw(ThreadDescription("broken", broken))
    with pytest.raises(ThreadFailedError) as info:
        thread.join(TIMEOUT)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert thread.state is ThreadState.FAILED
    assert runtime.slots.statistics().busy == ()  # type: ignore[union-attr]


@pytest.mark.parametrize("tier", [ThreadTier.HARDWARE, ThreadTier.SOFTWARE])
def test_bad_handles_are_thrown_into_the_body(tier: ThreadTier) -> None:
    def probe(context: Any) -> Body:
        try:
            yield SemPost(5)
        except HandleError:
            pass
        try:
            yield SemPost(0)  # handle 0 is a mailbox, not a semaphore
        except HandleError as exc:
            yield ThreadExit(str(exc))

    runtime = make_runtime(1, "probe")
    thread = runtime.create(ThreadDescription("probe", probe), [Mailbox[int](1)])
    thread.start(tier)
    assert "Mailbox" in thread.join(TIMEOUT)


@pytest.mark.parametrize("tier", [ThreadTier.HARDWARE, ThreadTier.SOFTWARE])
def test_try_calls_from_a_thread_never_block(tier: ThreadTier) -> None:
    def tries(context: Any) -> Body:
        got = yield MutexTrylock(0)
        message = yield MboxTryget(1)
        yield ThreadExit((got, message))

    mutex = Mutex()
    mutex.lock()
    runtime = make_runtime(1, "tries")
    thread = runtime.create(ThreadDescription("tries", tries), [mutex, Mailbox[int](1)])
    thread.start(tier)
    assert thread.join(TIMEOUT) == (False, WOULD_BLOCK)
    mutex.unlock()


def test_hardware_condition_wait_with_a_software_signaller() -> None:
    def waiter(context: Any) -> Body:
        yield MutexLock(0)
        yield SemPost(2)
        yield CondWait(1)
        owned = yield MutexTrylock(0)  # already held by us again: trylock fails
        yield MutexUnlock(0)
        yield ThreadExit(owned)

    mutex = Mutex()
    cond = Condition(mutex)
    started = Semaphore()
    runtime = make_runtime(1, "waiter")
    thread = runtime.create_hw(ThreadDescription("waiter", waiter), [mutex, cond, started])
    started.wait(timeout=TIMEOUT)
    wait_until(lambda: cond.statistics().waiting == 1)
    mutex.lock(timeout=TIMEOUT)  # the waiter released it
    cond.signal()
    mutex.unlock()
    assert thread.join(TIMEOUT) is False


def test_a_mutex_held_across_a_move_to_software_stays_owned() -> None:
    def holder(context: Any) -> Body:
        if context is None:
            yield MutexLock(0)
            yield SemPost(1)
            yield SemWait(2)
            yield YieldPoint("locked in hardware")
        yield MutexUnlock(0)  # from software after the move: still the owner
        yield ThreadExit(context)

    mutex, ready, go = Mutex(), Semaphore(), Semaphore()
    runtime = make_runtime(1, "holder")
    thread = runtime.create_hw(ThreadDescription("holder", holder), [mutex, ready, go])
    ready.wait(timeout=TIMEOUT)
    suspender = Worker(lambda: thread.suspend(TIMEOUT))
    wait_until(lambda: thread.state is ThreadState.SUSPENDING)
    go.post()
    assert suspender.result() is ThreadState.SUSPENDED
    assert mutex.locked
    thread.resume(ThreadTier.SOFTWARE)
    assert thread.join(TIMEOUT) == "locked in hardware"
    assert not mutex.locked


def test_memory_calls_cost_modeled_bus_cycles_in_hardware() -> None:
    def copier(context: Any) -> Body:
        data = yield BurstRead(0, 0, 64)
        yield BurstWrite(0, 256, data + 1)
        word = yield MemRead(0, 0)
        yield MemWrite(0, 512, word)

    timing = HwTiming()
    memory = SharedMemory(1024)
    memory.write_burst(0, np.arange(64, dtype=np.uint32) + 100)
    runtime = ThreadRuntime(FixedSlots([ThreadSlot("s", frozenset({"copier"}))]), timing)
    thread = runtime.create_hw(ThreadDescription("copier", copier), [memory])
    thread.join(TIMEOUT)
    assert memory.read_burst(256, 64).tolist() == list(range(101, 165))
    assert memory.read(512) == 100
    stats = thread.statistics()
    bus = 2 * timing.burst_cycles(256) + timing.bus_read_cycles + timing.bus_write_cycles
    assert stats.modeled_cycles == bus
    assert stats.memory_calls == 4
    assert stats.timeline_ns == pytest.approx(stats.measured_ns + bus * 10)


def test_repr_shows_live_state() -> None:
    runtime = make_runtime(1)
    inbox = Mailbox[int](1)
    thread = runtime.create_hw(ACCUMULATE, [inbox, Mailbox[int](1)], 1)
    assert "RUNNING_HW in slot0" in repr(thread)
    inbox.put(1)
    thread.join(TIMEOUT)
    assert "STOPPED" in repr(thread)
    assert "threads" in repr(runtime)


def test_exports_are_unique_and_resolve() -> None:
    names = hwt.__all__
    assert len(set(names)) == len(names)
    for name in names:
        assert hasattr(hwt, name), name


def test_suspend_waits_for_a_yield_point_and_may_see_the_thread_end() -> None:
    runtime = make_runtime()
    inbox, outbox = Mailbox[int](1), Mailbox[int](1)
    thread = runtime.create_hw(ACCUMULATE, [inbox, outbox], 2)
    with pytest.raises(OsCallTimeoutError):
        thread.suspend(0.05)  # blocked in mbox_get: no yield point reached
    assert thread.state is ThreadState.SUSPENDING  # the request stays pending
    with pytest.raises(ThreadStateError):
        thread.resume()  # refused at once, not after the thread ends
    inbox.put(1, timeout=TIMEOUT)
    assert thread.suspend(TIMEOUT) is ThreadState.SUSPENDED
    thread.resume(ThreadTier.HARDWARE)
    assert outbox.get(timeout=TIMEOUT) == 1

    def no_yield(context: Any) -> Body:
        yield SemWait(0)

    gate = Semaphore()
    runtime = make_runtime(1, "no_yield")
    plain = runtime.create_hw(ThreadDescription("no_yield", no_yield), [gate])
    ender = Worker(lambda: plain.suspend(TIMEOUT))
    wait_until(lambda: plain.state is ThreadState.SUSPENDING)
    gate.post()
    assert ender.result() is ThreadState.STOPPED
    inbox.put(2, timeout=TIMEOUT)
    assert outbox.get(timeout=TIMEOUT) == 1 + 2 * 2
    assert thread.join(TIMEOUT) == 5
