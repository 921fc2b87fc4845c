"""One decision core: juggles as allocator commands, devices that come and go, faults.

The live runtime places juggle-placed services (co-modules, hardware-only services) for its own
tenant through :meth:`Allocator.juggle` and tenants' requests through :meth:`Allocator.request`,
so tenant priorities apply to both. These examples walk the commands step by step.
"""

from __future__ import annotations

import pytest

from juggle.core.actions import (
    Connect,
    Disconnect,
    Reconfigure,
    SaveContext,
    Signal,
    Solution,
    StopAtConsistencyPoint,
)
from juggle.core.allocator import Allocator
from juggle.core.placement import ServiceView
from juggle.core.regionfsm import RegionPhase
from juggle.core.taskindex import DeviceSpec, RegionSpec, TaskDescriptor, TaskIndex
from juggle.core.tenants import DeviceState, SignalKind
from juggle.errors import (
    AllocatorError,
    DeviceStateError,
    IllegalTransitionError,
    SanityCheckError,
    TaskIndexError,
    UnknownDeviceError,
)

SYS = "<juggle>"


def seat(device: str, region: str) -> TaskDescriptor:
    return TaskDescriptor(device, region, f"{device}@{region}.bit", 1000, 10.0)


@pytest.fixture
def alloc() -> Allocator:
    """Regions r1 (small) and r2; device ``tdes`` fits both, ``adder`` only r1. The framework's
    own tenant (priority 0..2) and tenants lo (1) and hi (2) on four levels."""
    index = TaskIndex([RegionSpec("r1", 100), RegionSpec("r2", 200)], [], [])
    a = Allocator(index, priority_levels=4, hold_us=50.0)
    a.add_device(DeviceSpec("tdes", 1.0, 1.0), [seat("tdes", "r1"), seat("tdes", "r2")], owner=7)
    a.add_device(DeviceSpec("adder", 1.0, 1.0), [seat("adder", "r1")], owner=8)
    a.add_tenant(SYS, priority=2)
    a.add_tenant("lo", priority=1)
    a.add_tenant("hi", priority=2)
    return a


def view(device: str, sid: int, tier: str = "software") -> ServiceView:
    return ServiceView(sid, device, tier, None, ("r1", "r2"), device=device)


def place(a: Allocator, device: str, sid: int, now: float, **kw: object) -> str:
    """Juggle ``device`` in for the framework's tenant and report success; its region."""
    ticket = a.juggle(view(device, sid), [], now, tenant=SYS, **kw)  # type: ignore[arg-type]
    assert ticket.region is not None
    a.juggled(ticket, now, ok=True)
    return ticket.region


def kinds(actions: list[object]) -> list[str]:
    return [type(x).__name__ for x in actions if not isinstance(x, Solution)]


# -- devices come and go ---------------------------------------------------------------------


def test_an_added_device_gets_a_virtual_device_for_every_tenant_including_later_ones(
    alloc: Allocator,
) -> None:
    alloc.add_device(DeviceSpec("aes", 1.0, 1.0), [seat("aes", "r2")])
    alloc.add_tenant("late")
    for tenant in (SYS, "lo", "hi", "late"):
        assert alloc.device_state(tenant, "aes") is DeviceState.DISCONNECTED
    assert alloc.request("late", "aes", 1.0).region == "r2"


def test_a_bad_device_is_refused_and_changes_nothing(alloc: Allocator) -> None:
    before = alloc.index.devices
    with pytest.raises(TaskIndexError, match="tdes"):
        alloc.add_device(DeviceSpec("tdes", 1.0, 1.0), [seat("tdes", "r1")])
    with pytest.raises(TaskIndexError, match="slices"):
        alloc.add_device(DeviceSpec("big", 1.0, 1.0, slices=500), [seat("big", "r2")])
    assert alloc.index.devices == before
    with pytest.raises(UnknownDeviceError):
        alloc.device_state("lo", "big")


def test_removing_a_device_withdraws_requests_and_evicts_idle_clients(alloc: Allocator) -> None:
    assert alloc.request("lo", "adder", 1.0).region == "r1"  # connected, Reconfig
    alloc.reconfigured("r1", 2.0)
    alloc.add_tenant("peer", priority=1)
    alloc.request("peer", "adder", 3.0)  # r1 is held, equal priority: peer waits
    assert alloc.device_state("peer", "adder") is DeviceState.WAITING
    alloc.start("lo", "adder", 4.0)
    with pytest.raises(DeviceStateError, match="Busy"):
        alloc.remove_device("adder", 5.0)  # a call runs: nothing changes
    assert alloc.device_state("peer", "adder") is DeviceState.WAITING
    alloc.finish("lo", "adder", 6.0)  # peer gets r1 (same design: no reconfig)
    out = alloc.remove_device("adder", 7.0)
    assert kinds(out) == ["SaveContext", "Disconnect"]
    assert alloc.waiting_count == 0
    assert alloc.statistics().regions[0].design is None  # its design no longer counts
    with pytest.raises(UnknownDeviceError):
        alloc.request("lo", "adder", 8.0)
    assert alloc.request("lo", "tdes", 9.0).region == "r1"  # the region serves others


# -- juggles ---------------------------------------------------------------------------------


def test_a_juggle_places_the_device_running_and_a_leave_frees_the_region_for_waiters(
    alloc: Allocator,
) -> None:
    ticket = alloc.juggle(view("adder", 8), [], 1.0, tenant=SYS, priority=0)
    assert ticket.region == "r1" and not ticket.plan.reclaimed
    assert alloc.region_state("r1") is RegionPhase.RECONFIG  # nobody else may take it now
    out = alloc.juggled(ticket, 2.0, ok=True)
    assert kinds(out) == ["RestoreContext", "Connect", "Signal"]
    assert alloc.region_state("r1") is RegionPhase.BUSY
    with pytest.raises(AllocatorError, match="finished already"):
        alloc.juggled(ticket, 2.0, ok=True)
    solution = alloc.request("lo", "adder", 3.0)  # lo (1) > the juggle's priority 0: preempt
    assert solution.kind.value == "preempt"
    assert alloc.region_state("r1") is RegionPhase.PREEMPT
    stop = [a for a in solution.actions if isinstance(a, StopAtConsistencyPoint)]
    assert [(s.tenant, s.device, s.region) for s in stop] == [(SYS, "adder", "r1")]


def test_a_juggle_never_takes_a_held_region_and_names_its_holder(alloc: Allocator) -> None:
    alloc.request("lo", "adder", 1.0)
    alloc.reconfigured("r1", 2.0)  # lo holds r1
    before = alloc.statistics()
    with pytest.raises(SanityCheckError, match="held by tenant 'lo'"):
        alloc.juggle(view("adder", 8), [], 3.0, tenant=SYS)
    after = alloc.statistics()
    assert (after.regions, after.tenants) == (before.regions, before.tenants)


def test_an_idle_client_is_moved_off_the_region_a_juggle_takes(alloc: Allocator) -> None:
    alloc.request("lo", "adder", 1.0)
    alloc.reconfigured("r1", 2.0)
    alloc.start("lo", "adder", 3.0)
    alloc.finish("lo", "adder", 4.0)  # connected, region Idle
    ticket = alloc.juggle(view("adder", 8), [], 5.0, tenant=SYS)
    assert [type(a) for a in ticket.actions] == [SaveContext, Disconnect]
    assert alloc.device_state("lo", "adder") is DeviceState.DISCONNECTED


def test_a_reclaimed_region_goes_back_to_the_leaver_when_the_juggle_is_undone(
    alloc: Allocator,
) -> None:
    place(alloc, "adder", 8, 1.0)  # r1
    place(alloc, "tdes", 7, 2.0)  # r2
    leaving = ServiceView(8, "adder", "hardware", "r1", ("r1",), device="adder")
    ticket = alloc.juggle(None, [leaving], 3.0, tenant=SYS)
    assert ticket.region is None
    alloc.juggled(ticket, 4.0, ok=True)
    assert alloc.region_state("r1") is RegionPhase.IDLE
    # the adder comes back into r1 by evicting... nothing: r1 is free again
    assert place(alloc, "adder", 8, 5.0) == "r1"
    # swap adder out of r1 and a second tdes-like device in, then undo
    alloc.add_device(DeviceSpec("mul", 1.0, 1.0), [seat("mul", "r1")], owner=9)
    mul = ServiceView(9, "mul", "software", None, ("r1",), device="mul")
    ticket = alloc.juggle(mul, [leaving], 6.0, tenant=SYS)
    assert ticket.region == "r1" and ticket.plan.reclaimed
    alloc.juggled(ticket, 7.0, ok=False)
    assert alloc.region_state("r1") is RegionPhase.BUSY
    assert alloc.connected_region(SYS, "adder") == "r1"
    assert alloc.device_state(SYS, "mul") is DeviceState.DISCONNECTED
    assert alloc.statistics().regions[0].design == "adder"


def test_an_undone_entry_empties_the_region_and_a_faulted_one_stays_in_error(
    alloc: Allocator,
) -> None:
    ticket = alloc.juggle(view("adder", 8), [], 1.0, tenant=SYS)
    alloc.juggled(ticket, 2.0, ok=False)
    assert alloc.region_state("r1") is RegionPhase.IDLE
    assert alloc.device_state(SYS, "adder") is DeviceState.DISCONNECTED
    ticket = alloc.juggle(view("adder", 8), [], 3.0, tenant=SYS)
    alloc.juggled(ticket, 4.0, ok=False, faulted=["r1"])
    assert alloc.region_state("r1") is RegionPhase.ERROR
    with pytest.raises(SanityCheckError, match="quarantined"):
        alloc.juggle(view("adder", 8), [], 5.0, tenant=SYS)


def test_a_preempted_placement_waits_and_comes_back_when_the_region_is_free(
    alloc: Allocator,
) -> None:
    place(alloc, "adder", 8, 1.0, priority=1)  # a tenant of priority 1 uses it
    alloc.request("hi", "adder", 2.0)  # 2 > 1: preempt at the consistency point
    out = alloc.stopped("r1", 3.0)
    assert alloc.device_state(SYS, "adder") is DeviceState.WAITING
    assert alloc.connected_region("hi", "adder") == "r1"  # same design: no reconfig
    assert [s.signal for s in out if isinstance(s, Signal) and s.tenant == SYS] == [SignalKind.WAIT]
    alloc.start("hi", "adder", 4.0)
    out = alloc.finish("hi", "adder", 5.0)  # r1 free: the waiting placement returns
    assert alloc.device_state(SYS, "adder") is DeviceState.CONNECTED
    ready = [a for a in out if isinstance(a, Signal) and a.tenant == SYS]
    assert [s.signal for s in ready] == [SignalKind.READY]
    assert any(isinstance(a, Connect) and a.tenant == SYS for a in out)


def test_an_unpreemptible_placement_keeps_its_region(alloc: Allocator) -> None:
    place(alloc, "adder", 8, 1.0, priority=0, preemptible=False)
    solution = alloc.request("hi", "adder", 2.0)
    assert solution.kind.value == "unavailable"
    assert alloc.region_state("r1") is RegionPhase.BUSY


def test_raising_and_lowering_a_placements_priority(alloc: Allocator) -> None:
    place(alloc, "adder", 8, 1.0, priority=2)
    assert alloc.request("hi", "adder", 2.0).kind.value == "unavailable"  # equal: wait
    out = alloc.set_priority(SYS, "adder", 0, 3.0)  # its tenant consumer left
    assert any(isinstance(a, StopAtConsistencyPoint) for a in out)
    assert alloc.region_state("r1") is RegionPhase.PREEMPT


def test_a_fault_quarantines_the_region_until_repaired(alloc: Allocator) -> None:
    place(alloc, "adder", 8, 1.0)
    out = alloc.fault("r1", 2.0)
    assert [type(a) for a in out] == [Disconnect]
    assert alloc.region_state("r1") is RegionPhase.ERROR
    assert alloc.request("lo", "adder", 3.0).kind.value == "unavailable"
    with pytest.raises(IllegalTransitionError):
        alloc.fault("r1", 4.0)
    out = alloc.repair("r1", 5.0)  # the waiting request gets it
    assert any(isinstance(a, Reconfigure) and a.region == "r1" for a in out)
