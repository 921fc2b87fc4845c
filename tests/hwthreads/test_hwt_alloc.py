"""Slots from the Ker-ONE allocator: the adapter and the built-in fixed provider."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest
from hwt_support import TIMEOUT, Worker, wait_until

from juggle.core.allocator import Allocator
from juggle.core.regionfsm import RegionPhase
from juggle.core.taskindex import DeviceSpec, RegionSpec, TaskDescriptor, TaskIndex
from juggle.errors import HwThreadArgumentError, NoFreeSlotError
from juggle.hwthreads import (
    AllocatorSlots,
    FixedSlots,
    HardwareThread,
    OsCall,
    Semaphore,
    SemPost,
    SemWait,
    SlotProvider,
    ThreadDescription,
    ThreadExit,
    ThreadRuntime,
    ThreadSlot,
    ThreadState,
    ThreadTier,
    YieldPoint,
)


def worker_body(context: Any) -> Generator[OsCall, Any, Any]:
    """Announces itself (1), waits for a go (0), offers a yield point, exits."""
    if context is None:
        yield SemPost(1)
        yield SemWait(0)
        yield YieldPoint("resumed after the consistency point")
    yield ThreadExit(context or "finished")


WORKER = ThreadDescription("worker", worker_body)


def make_allocator() -> Allocator:
    index = TaskIndex(
        [RegionSpec("prr0", 1000)],
        [DeviceSpec("worker", 10.0, 5.0), DeviceSpec("other", 10.0, 5.0)],
        [
            TaskDescriptor("worker", "prr0", "worker.bit", 4096, 40.0),
            TaskDescriptor("other", "prr0", "other.bit", 4096, 40.0),
        ],
    )
    allocator = Allocator(index, priority_levels=3)
    allocator.add_tenant("low", priority=0)
    allocator.add_tenant("high", priority=1)
    return allocator


def test_fixed_slots_first_fit_and_checks() -> None:
    slots = FixedSlots([ThreadSlot("a", frozenset({"x"})), ThreadSlot("b", frozenset({"x", "y"}))])
    assert isinstance(slots, SlotProvider)
    assert slots.acquire(0, "y") == ThreadSlot("b", frozenset({"x", "y"}))
    assert slots.acquire(0, "y") is None
    first = slots.acquire(None, "x")
    assert first is not None and first.name == "a"
    slots.release(first)
    with pytest.raises(HwThreadArgumentError):
        slots.release(first)
    with pytest.raises(HwThreadArgumentError):
        FixedSlots([ThreadSlot("a", frozenset()), ThreadSlot("a", frozenset())])
    assert slots.statistics().refusals == 1


def test_thread_runs_in_the_region_the_allocator_assigns() -> None:
    allocator = make_allocator()
    shell = AllocatorSlots(allocator)
    runtime = ThreadRuntime(shell.for_tenant("low"))
    go, up = Semaphore(), Semaphore()
    thread = runtime.create_auto(WORKER, [go, up])
    up.wait(timeout=TIMEOUT)
    assert thread.state is ThreadState.RUNNING_HW
    assert thread.slot is not None and thread.slot.name == "prr0"
    assert allocator.region_state("prr0") is RegionPhase.BUSY
    # one region per design and tenant: a second instance runs in software
    go2, up2 = Semaphore(), Semaphore()
    second = runtime.create_auto(WORKER, [go2, up2])
    assert second.state is ThreadState.RUNNING_SW
    with pytest.raises(NoFreeSlotError):
        runtime.create_hw(WORKER, [Semaphore(), Semaphore()])
    go.post()
    go2.post()
    assert thread.join(TIMEOUT) == second.join(TIMEOUT) == "finished"
    assert allocator.region_state("prr0") is RegionPhase.IDLE
    stats = shell.statistics()
    assert stats.assigned == 1
    assert stats.reconfigurations == 1
    assert stats.reconfig_us_modeled == pytest.approx(40.0)


def test_a_higher_priority_tenant_preempts_at_the_yield_point() -> None:
    allocator = make_allocator()
    running: dict[str, HardwareThread] = {}
    orders: list[tuple[str, Worker]] = []

    def on_preempt(region: str) -> None:  # stop the victim at its next yield point
        victim = running[region]
        orders.append((region, Worker(lambda: victim.suspend(TIMEOUT))))

    shell = AllocatorSlots(allocator, on_preempt=on_preempt)
    low = ThreadRuntime(shell.for_tenant("low"))
    high = ThreadRuntime(shell.for_tenant("high"))
    go, up = Semaphore(), Semaphore()
    victim = low.create_hw(WORKER, [go, up])
    running["prr0"] = victim
    up.wait(timeout=TIMEOUT)

    first_try = high.create_auto(WORKER, [Semaphore(1), Semaphore()])
    assert first_try.state is not ThreadState.RUNNING_HW  # preemption only started
    assert allocator.region_state("prr0") is RegionPhase.PREEMPT
    assert first_try.join(TIMEOUT) == "finished"

    assert [region for region, _ in orders] == ["prr0"]
    wait_until(lambda: victim.state is ThreadState.SUSPENDING)
    go.post()  # the victim runs on to its yield point
    assert orders[0][1].result() is ThreadState.SUSPENDED
    assert allocator.connected_region("high", "worker") == "prr0"

    winner = high.create_hw(WORKER, [Semaphore(1), Semaphore()])
    assert winner.slot is not None and winner.slot.name == "prr0"
    assert winner.join(TIMEOUT) == "finished"
    assert victim.resume() is ThreadTier.HARDWARE  # the region is free again
    assert victim.join(TIMEOUT) == "resumed after the consistency point"
    stats = shell.statistics()
    assert (stats.preemptions_started, stats.handovers) == (1, 1)
