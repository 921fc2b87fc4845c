"""OS objects used by plain Python (software) threads: semantics under concurrency."""

from __future__ import annotations

import dataclasses
import functools
import threading
import time

import numpy as np
import pytest
from hwt_support import TIMEOUT, Worker, wait_until
from hypothesis import given, settings
from hypothesis import strategies as st

from juggle.errors import (
    HardwareThreadError,
    HwThreadArgumentError,
    MutexOwnerError,
    OsCallTimeoutError,
    WouldBlock,
)
from juggle.hwthreads import Condition, Mailbox, Mutex, Semaphore, SharedMemory

FAST = 0.5  # a non-blocking call must return well within this


def held_elsewhere(mutex: Mutex) -> threading.Event:
    """Lock ``mutex`` from another thread until the returned event is set."""
    release = threading.Event()
    locked = threading.Event()

    def hold() -> None:
        mutex.lock(timeout=TIMEOUT)
        locked.set()
        release.wait(TIMEOUT)
        mutex.unlock()

    threading.Thread(target=hold, daemon=True).start()
    assert locked.wait(TIMEOUT)
    return release


# -- mutex -------------------------------------------------------------------------------------


def test_trylock_never_blocks_and_raises_wouldblock() -> None:
    mutex = Mutex("m")
    release = held_elsewhere(mutex)
    start = time.monotonic()
    with pytest.raises(WouldBlock):
        mutex.trylock()
    assert time.monotonic() - start < FAST
    release.set()
    wait_until(lambda: not mutex.locked)
    mutex.trylock()
    assert mutex.owned_by_caller()
    mutex.unlock()


def test_mutex_owner_checks() -> None:
    mutex = Mutex("m")
    with pytest.raises(MutexOwnerError):
        mutex.unlock()
    mutex.lock()
    with pytest.raises(MutexOwnerError):
        mutex.lock(timeout=0.1)
    assert Worker(lambda: _raises(mutex.unlock, MutexOwnerError)).result()
    mutex.unlock()


def waiting_is(mutex: Mutex, count: int) -> bool:
    return mutex.statistics().waiting == count


def putters_waiting(box: Mailbox[int], count: int) -> bool:
    return box.statistics().waiting_putters == count


def _raises(fn: object, kind: type[BaseException]) -> bool:
    try:
        fn()  # type: ignore[operator]
    except kind:
        return True
    return False


def test_mutex_hands_over_in_arrival_order() -> None:
    mutex = Mutex("fifo")
    mutex.lock()
    order: list[int] = []

    def contender(i: int) -> None:
        assert mutex.lock(timeout=TIMEOUT)
        order.append(i)
        mutex.unlock()

    workers = []
    for i in range(4):
        workers.append(Worker(functools.partial(contender, i)))
        wait_until(functools.partial(waiting_is, mutex, i + 1))
    mutex.unlock()
    for worker in workers:
        worker.result()
    assert order == [0, 1, 2, 3]
    assert mutex.statistics().contended_locks == 4


def test_mutex_release_wakes_waiters_without_the_lock() -> None:
    mutex = Mutex()
    mutex.lock()
    waiters = [Worker(lambda: mutex.lock(timeout=TIMEOUT)) for _ in range(2)]
    wait_until(lambda: mutex.statistics().waiting == 2)
    assert mutex.release() == 2
    assert [w.result() for w in waiters] == [False, False]
    assert mutex.owned_by_caller()
    mutex.unlock()


def test_mutex_lock_timeout_leaves_no_waiter() -> None:
    mutex = Mutex()
    release = held_elsewhere(mutex)
    with pytest.raises(OsCallTimeoutError):
        mutex.lock(timeout=0.05)
    assert mutex.statistics().waiting == 0
    release.set()


@settings(max_examples=15, deadline=None)
@given(threads=st.integers(2, 4), rounds=st.integers(1, 30))
def test_mutex_excludes(threads: int, rounds: int) -> None:
    mutex = Mutex()
    box = {"n": 0, "inside": 0, "overlap": 0}

    def body() -> None:
        for _ in range(rounds):
            mutex.lock(timeout=TIMEOUT)
            box["inside"] += 1
            if box["inside"] != 1:
                box["overlap"] += 1
            value = box["n"]
            time.sleep(0)  # invite a switch inside the critical section
            box["n"] = value + 1
            box["inside"] -= 1
            mutex.unlock()

    for worker in [Worker(body) for _ in range(threads)]:
        worker.result()
    assert box["n"] == threads * rounds
    assert box["overlap"] == 0


# -- semaphore ---------------------------------------------------------------------------------


def test_trywait_never_blocks() -> None:
    sem = Semaphore(1)
    sem.trywait()
    start = time.monotonic()
    with pytest.raises(WouldBlock):
        sem.trywait()
    assert time.monotonic() - start < FAST
    with pytest.raises(HwThreadArgumentError):
        Semaphore(-1)


@settings(max_examples=20, deadline=None)
@given(waiters=st.integers(1, 5), extra=st.integers(0, 3), initial=st.integers(0, 2))
def test_semaphore_loses_no_wakeup(waiters: int, extra: int, initial: int) -> None:
    sem = Semaphore(initial)
    posts = waiters + extra
    consumers = [Worker(lambda: sem.wait(timeout=TIMEOUT)) for _ in range(waiters)]
    posters = [Worker(sem.post) for _ in range(posts)]
    for worker in consumers + posters:
        worker.result()
    snapshot = sem.statistics()
    assert snapshot.value == initial + extra
    assert snapshot.waiting == 0
    assert snapshot.posts == posts


def test_semaphore_post_goes_to_the_waiter() -> None:
    sem = Semaphore()
    worker = Worker(lambda: sem.wait(timeout=TIMEOUT))
    wait_until(lambda: sem.statistics().waiting == 1)
    sem.post()
    worker.result()
    assert sem.value == 0  # handed over, not banked


# -- condition variable ------------------------------------------------------------------------


def test_condition_wait_releases_and_retakes_its_mutex() -> None:
    mutex = Mutex("cv")
    cond = Condition(mutex)
    seen: dict[str, bool] = {}

    def waiter() -> None:
        mutex.lock(timeout=TIMEOUT)
        assert cond.wait(timeout=TIMEOUT)
        seen["owns_after_wait"] = mutex.owned_by_caller()
        mutex.unlock()

    worker = Worker(waiter)
    wait_until(lambda: cond.statistics().waiting == 1)
    mutex.trylock()  # possible only because the waiter released it
    assert cond.signal()
    wait_until(lambda: mutex.statistics().waiting == 1)  # woken, queued to retake the mutex
    assert not worker.done
    mutex.unlock()
    worker.result()
    assert seen["owns_after_wait"]
    assert not mutex.locked


def test_condition_requires_the_mutex_and_times_out_holding_it() -> None:
    mutex = Mutex()
    cond = Condition(mutex)
    with pytest.raises(MutexOwnerError):
        cond.wait(timeout=0.1)
    mutex.lock()
    with pytest.raises(OsCallTimeoutError):
        cond.wait(timeout=0.02)
    assert mutex.owned_by_caller()
    assert cond.statistics().waiting == 0
    mutex.unlock()
    assert cond.signal() is False


@settings(max_examples=15, deadline=None)
@given(consumers=st.integers(1, 4), items=st.integers(1, 12))
def test_condition_loses_no_wakeup(consumers: int, items: int) -> None:
    mutex = Mutex()
    cond = Condition(mutex)
    queue: list[int] = []
    taken: list[int] = []
    total = consumers * items

    def consume() -> None:
        for _ in range(items):
            mutex.lock(timeout=TIMEOUT)
            while not queue:
                cond.wait(timeout=TIMEOUT)
            taken.append(queue.pop(0))
            mutex.unlock()

    workers = [Worker(consume) for _ in range(consumers)]
    for value in range(total):
        mutex.lock(timeout=TIMEOUT)
        queue.append(value)
        if value % 3 == 0:
            cond.broadcast()
        else:
            cond.signal()
        mutex.unlock()
    for worker in workers:
        worker.result()
    assert sorted(taken) == list(range(total))


# -- mailbox -----------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(capacity=st.integers(1, 4), messages=st.lists(st.integers(), max_size=40))
def test_mailbox_is_fifo(capacity: int, messages: list[int]) -> None:
    box: Mailbox[int] = Mailbox(capacity)

    def produce() -> None:
        for message in messages:
            box.put(message, timeout=TIMEOUT)

    producer = Worker(produce)
    received = [box.get(timeout=TIMEOUT) for _ in messages]
    producer.result()
    assert received == messages
    assert len(box) == 0


def test_mailbox_tryget_tryput_never_block() -> None:
    box: Mailbox[str] = Mailbox(1, name="b")
    start = time.monotonic()
    with pytest.raises(WouldBlock):
        box.tryget()
    box.tryput("a")
    with pytest.raises(WouldBlock):
        box.tryput("b")
    assert time.monotonic() - start < FAST
    assert box.tryget() == "a"
    with pytest.raises(HwThreadArgumentError):
        Mailbox(0)


def test_mailbox_waiting_putters_keep_their_order() -> None:
    box: Mailbox[int] = Mailbox(1)
    box.put(0)
    putters = []
    for i in range(1, 4):
        putters.append(Worker(functools.partial(box.put, i, timeout=TIMEOUT)))
        wait_until(functools.partial(putters_waiting, box, i))
    assert [box.get(timeout=TIMEOUT) for _ in range(4)] == [0, 1, 2, 3]
    for worker in putters:
        worker.result()


def test_mailbox_put_with_a_waiting_getter_hands_over() -> None:
    box: Mailbox[int] = Mailbox(2, name="mb")
    getter = Worker(lambda: box.get(timeout=TIMEOUT))
    wait_until(lambda: box.statistics().waiting_getters == 1)
    assert repr(box) == "<Mailbox 'mb' 0/2 with 1 waiting getters, 0 waiting putters>"
    box.put(7)
    assert getter.result() == 7
    box.put(1)
    assert repr(box) == "<Mailbox 'mb' 1/2 with 0 waiting getters, 0 waiting putters>"


def test_get_timeout_withdraws() -> None:
    box: Mailbox[int] = Mailbox(1)
    with pytest.raises(OsCallTimeoutError):
        box.get(timeout=0.02)
    box.put(5)
    assert box.statistics().waiting_getters == 0
    assert box.get(timeout=TIMEOUT) == 5


def test_snapshots_are_frozen() -> None:
    for snapshot in (
        Mutex().statistics(),
        Semaphore().statistics(),
        Condition(Mutex()).statistics(),
        Mailbox[int](1).statistics(),
        SharedMemory(8).statistics(),
    ):
        field = dataclasses.fields(snapshot)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(snapshot, field, None)


def test_errors_belong_to_the_tree() -> None:
    assert issubclass(WouldBlock, HardwareThreadError)
    assert issubclass(OsCallTimeoutError, TimeoutError)


# -- shared memory -----------------------------------------------------------------------------


def test_shared_memory_words_and_bursts() -> None:
    memory = SharedMemory(64, name="m")
    memory.write(4, 0xDEADBEEF)
    assert memory.read(4) == 0xDEADBEEF
    memory.write_burst(8, np.arange(4, dtype=np.uint32))
    assert memory.read_burst(8, 4).tolist() == [0, 1, 2, 3]
    assert memory.words[3] == 1
    snapshot = memory.statistics()
    assert (snapshot.reads, snapshot.writes, snapshot.burst_reads, snapshot.burst_writes) == (
        1,
        1,
        1,
        1,
    )
    assert snapshot.bytes_read == 20


@pytest.mark.parametrize(
    "access",
    [
        lambda m: m.read(2),
        lambda m: m.read(64),
        lambda m: m.write(0, 2**32),
        lambda m: m.read_burst(60, 2),
        lambda m: m.write_burst(0, [-1]),
        lambda m: SharedMemory(6),
    ],
)
def test_shared_memory_rejects_bad_accesses(access: object) -> None:
    memory = SharedMemory(64)
    with pytest.raises(HwThreadArgumentError):
        access(memory)  # type: ignore[operator]
