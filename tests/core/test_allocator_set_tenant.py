"""A reloaded tenant policy: ``Allocator.set_tenant`` changes a tenant's class and priority
where it stands (waiting requests move in line, held regions carry the new priority)."""

from __future__ import annotations

import pytest

from juggle.core.actions import StopAtConsistencyPoint
from juggle.core.allocator import Allocator
from juggle.core.regionfsm import RegionPhase
from juggle.core.taskindex import DeviceSpec, RegionSpec, TaskDescriptor, TaskIndex
from juggle.core.tenants import DeviceState, ProgrammingModel
from juggle.errors import PriorityError, TimeOrderError, UnknownTenantError


@pytest.fixture
def alloc() -> Allocator:
    """One region r1 and one device ``dev``; tenants a (1), b (0), c (0) on four levels (3 is
    real-time)."""
    index = TaskIndex([RegionSpec("r1", 100)], [], [])
    a = Allocator(index, priority_levels=4, hold_us=50.0)
    a.add_device(DeviceSpec("dev", 1.0, 1.0), [TaskDescriptor("dev", "r1", "d.bit", 1000, 10.0)])
    a.add_tenant("a", priority=1)
    a.add_tenant("b", priority=0)
    a.add_tenant("c", priority=0)
    return a


def busy(alloc: Allocator, tenant: str, now: float) -> None:
    """``tenant`` gets r1 (idle) and runs on it."""
    assert alloc.request(tenant, "dev", now).kind.value != "unavailable"
    if alloc.region_state("r1") is RegionPhase.RECONFIG:
        alloc.reconfigured("r1", now)
    alloc.start(tenant, "dev", now)
    assert alloc.region_state("r1") is RegionPhase.BUSY


def stops(actions: list[object]) -> bool:
    return any(isinstance(a, StopAtConsistencyPoint) for a in actions)


def test_a_waiter_raised_above_the_runner_preempts_it(alloc: Allocator) -> None:
    busy(alloc, "a", 1.0)
    assert alloc.request("b", "dev", 2.0).kind.value == "unavailable"  # 0 < 1: waits
    out = alloc.set_tenant("b", 3.0, priority=2)
    assert stops(out) and alloc.region_state("r1") is RegionPhase.PREEMPT
    assert alloc.tenant("b").priority == 2


def test_a_runner_lowered_below_a_waiter_is_preempted(alloc: Allocator) -> None:
    alloc.set_tenant("b", 0.5, priority=1)
    busy(alloc, "a", 1.0)
    assert alloc.request("b", "dev", 2.0).kind.value == "unavailable"  # equal: waits
    assert stops(alloc.set_tenant("a", 3.0, priority=0))


def test_a_runner_made_real_time_is_never_preempted(alloc: Allocator) -> None:
    busy(alloc, "b", 1.0)
    assert not stops(alloc.set_tenant("b", 2.0, realtime=True))
    assert alloc.request("a", "dev", 3.0).kind.value == "unavailable"
    assert not stops(alloc.set_tenant("a", 4.0, priority=2))  # still below real-time
    assert alloc.region_state("r1") is RegionPhase.BUSY
    assert alloc.tenant("b").priority == 3 and alloc.tenant("b").realtime


def test_waiting_requests_take_their_new_place_in_line(alloc: Allocator) -> None:
    busy(alloc, "a", 1.0)
    alloc.set_tenant("a", 1.5, realtime=True)  # nobody preempts it
    alloc.request("b", "dev", 2.0)
    alloc.request("c", "dev", 3.0)  # both wait at 0, b first
    alloc.set_tenant("c", 4.0, priority=2)
    alloc.finish("a", "dev", 5.0)
    alloc.release("a", "dev", 5.0)
    assert alloc.device_state("c", "dev") is not DeviceState.WAITING  # c was served first
    assert alloc.device_state("b", "dev") is DeviceState.WAITING


def test_the_model_changes_and_bad_changes_change_nothing(alloc: Allocator) -> None:
    alloc.set_tenant("a", 1.0, priority=1, model=ProgrammingModel.AWARE)
    assert alloc.tenant("a").model is ProgrammingModel.AWARE
    with pytest.raises(UnknownTenantError, match="'zed'"):
        alloc.set_tenant("zed", 2.0)
    with pytest.raises(PriorityError, match="0..2"):
        alloc.set_tenant("a", 2.0, priority=3)
    with pytest.raises(PriorityError, match="must be 3"):
        alloc.set_tenant("a", 2.0, realtime=True, priority=1)
    with pytest.raises(TimeOrderError):
        alloc.set_tenant("a", 0.5, priority=0)
    t = alloc.tenant("a")
    assert (t.priority, t.realtime, t.model) == (1, False, ProgrammingModel.AWARE)
