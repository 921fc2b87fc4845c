"""The Ker-ONE allocator: policy, preemption, holds, failures, signals and errors."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from juggle.core.actions import (
    Connect,
    Reconfigure,
    Signal,
    Solution,
    SolutionKind,
    StopAtConsistencyPoint,
)
from juggle.core.allocator import Allocator
from juggle.core.loopback import LoopbackShell
from juggle.core.regionfsm import RegionPhase
from juggle.core.taskindex import DeviceSpec, RegionSpec, TaskDescriptor, TaskIndex
from juggle.core.tenants import DeviceState, ProgrammingModel, Register, SignalKind
from juggle.errors import (
    DeviceStateError,
    DuplicateTenantError,
    IllegalTransitionError,
    InterfaceError,
    NoCompatibleRegionError,
    PriorityError,
    TimeOrderError,
    UnknownDeviceError,
    UnknownRegionError,
    UnknownTenantError,
)
from juggle.fabric.profiles import load_profile

S = RegionPhase
ZED = TaskIndex.from_profile(load_profile("zedboard"))


def make(levels: int = 2, hold_us: float = 100.0) -> tuple[Allocator, LoopbackShell]:
    alloc = Allocator(ZED, priority_levels=levels, hold_us=hold_us)
    alloc.add_tenant("rt", realtime=True)
    alloc.add_tenant("gp", model=ProgrammingModel.AWARE)
    alloc.add_tenant("gp2", model=ProgrammingModel.AWARE)
    return alloc, LoopbackShell(alloc)


def place(
    alloc: Allocator, shell: LoopbackShell, tenant: str, device: str, now: float, *, run: bool
) -> Solution:
    """Request, complete whatever is pending, optionally start computing."""
    solution = shell.run(alloc.request(tenant, device, now))
    shell.settle(now)
    if run:
        shell.execute(alloc.start(tenant, device, now))
    return solution


def kinds(actions: Sequence[object]) -> list[str]:
    return [type(a).__name__ for a in actions]


def test_assign_picks_the_smallest_idle_region_and_reconfigures() -> None:
    alloc, _ = make()
    sol = alloc.request("gp", "fft512", 0.0)
    assert (sol.kind, sol.region, sol.reconfig, sol.path) == (SolutionKind.ASSIGN, "prr2", True, 2)
    assert kinds(sol.actions) == ["Reconfigure", "Signal"]
    reconf, wait = sol.actions
    # prr2: 323,645 B (8 % of the XC7Z020 bitstream, the profile's rule) at 400 MB/s
    assert isinstance(reconf, Reconfigure) and reconf.t_rcfg_us == 809.12
    assert isinstance(wait, Signal) and wait.signal is SignalKind.WAIT
    assert wait.model is ProgrammingModel.AWARE
    assert alloc.region_state("prr2") is S.RECONFIG
    assert alloc.device_state("gp", "fft512") is DeviceState.PENDING
    done = alloc.reconfigured("prr2", 809.12)
    assert kinds(done) == ["RestoreContext", "Connect", "Signal"]
    ready = done[-1]
    assert isinstance(ready, Signal) and ready.signal is SignalKind.READY
    assert alloc.region_state("prr2") is S.HOLD
    assert alloc.connected_region("gp", "fft512") == "prr2"


def test_direct_assign_without_reconfig_is_path1() -> None:
    alloc, shell = make()
    place(alloc, shell, "gp", "qam16", 0.0, run=False)
    shell.execute(alloc.release("gp", "qam16", 1.0))
    sol = alloc.request("gp2", "qam16", 2.0)
    assert (sol.path, sol.region, sol.ready) == (1, "prr1", True)
    assert kinds(sol.actions) == ["RestoreContext", "Connect", "Signal"]
    assert alloc.region_state("prr1") is S.HOLD


def test_an_idle_region_with_another_client_is_switched() -> None:
    alloc, shell = make()
    place(alloc, shell, "gp", "qam16", 0.0, run=True)
    shell.execute(alloc.finish("gp", "qam16", 5.0))  # stays connected, Idle
    sol = shell.run(alloc.request("gp2", "qam16", 6.0))
    assert sol.path == 1 and sol.victim == ("gp", "qam16")
    assert kinds(sol.actions) == [
        "SaveContext",
        "Disconnect",
        "RestoreContext",
        "Connect",
        "Signal",
    ]
    assert alloc.device_state("gp", "qam16") is DeviceState.DISCONNECTED
    entered = dict(alloc.statistics().regions[0].entered)
    assert entered["Switch"] == 1


def test_idle_before_preemption() -> None:
    alloc, shell = make()
    place(alloc, shell, "gp", "qam16", 0.0, run=True)  # prr1 busy with gp
    sol = alloc.request("rt", "qam64", 1.0)
    assert sol.kind is SolutionKind.ASSIGN and sol.region == "prr2"


def test_preempts_the_smallest_lower_priority_region() -> None:
    alloc, shell = make()
    place(alloc, shell, "gp", "qam16", 0.0, run=True)  # prr1
    place(alloc, shell, "gp2", "qam16", 1.0, run=True)  # prr2
    sol = shell.run(alloc.request("rt", "qam16", 2.0))
    assert (sol.kind, sol.region, sol.reconfig, sol.path) == (
        SolutionKind.PREEMPT,
        "prr1",
        False,
        3,
    )
    assert sol.victim == ("gp", "qam16")
    stop, preempt, wait = sol.actions
    assert stop == StopAtConsistencyPoint("prr1", "gp", "qam16")
    assert isinstance(preempt, Signal) and preempt.signal is SignalKind.PREEMPT
    assert preempt.tenant == "gp"
    assert isinstance(wait, Signal) and (wait.tenant, wait.signal) == ("rt", SignalKind.WAIT)
    assert alloc.region_state("prr1") is S.PREEMPT
    out = alloc.stopped("prr1", 30.0)
    assert kinds(out)[:5] == ["SaveContext", "Disconnect", "RestoreContext", "Connect", "Signal"]
    # the rest of gp's work is a request of its own: no region for it, so it waits
    requeued = [a for a in out if isinstance(a, Solution)]
    assert len(requeued) == 1 and requeued[0].kind is SolutionKind.UNAVAILABLE
    assert alloc.device_state("gp", "qam16") is DeviceState.WAITING
    assert alloc.connected_region("rt", "qam16") == "prr1"
    assert alloc.statistics().preemptions == 1


def test_preempt_with_reconfig_is_path4() -> None:
    alloc, shell = make()
    place(alloc, shell, "gp", "qam16", 0.0, run=True)
    place(alloc, shell, "gp2", "qam16", 1.0, run=True)
    sol = shell.run(alloc.request("rt", "qam64", 2.0))
    assert (sol.path, sol.region) == (4, "prr1")
    out = alloc.stopped("prr1", 40.0)
    assert kinds(out)[:3] == ["SaveContext", "Disconnect", "Reconfigure"]
    assert alloc.region_state("prr1") is S.RECONFIG
    shell.execute(out)
    shell.complete_reconfig("prr1", 271.0)
    assert alloc.connected_region("rt", "qam64") == "prr1"


def test_equal_priorities_never_preempt_each_other() -> None:
    alloc, shell = make()
    alloc.add_tenant("gp3")
    place(alloc, shell, "gp", "qam16", 0.0, run=True)
    place(alloc, shell, "gp2", "qam16", 1.0, run=True)
    sol = alloc.request("gp3", "qam16", 2.0)
    assert sol.kind is SolutionKind.UNAVAILABLE
    assert kinds(sol.actions) == ["Signal"]
    assert alloc.region_state("prr1") is S.BUSY and alloc.region_state("prr2") is S.BUSY


def test_a_running_real_time_task_is_never_preempted() -> None:
    alloc = Allocator(ZED, priority_levels=3)
    alloc.add_tenant("rt", realtime=True)
    alloc.add_tenant("rt2", realtime=True)
    alloc.add_tenant("mid", priority=1)
    shell = LoopbackShell(alloc)
    place(alloc, shell, "rt", "fft1024", 0.0, run=True)  # prr3 only
    assert alloc.request("rt2", "fft1024", 1.0).kind is SolutionKind.UNAVAILABLE
    assert alloc.request("mid", "fft1024", 2.0).kind is SolutionKind.UNAVAILABLE
    assert alloc.region_state("prr3") is S.BUSY


def test_a_higher_general_purpose_priority_preempts_a_lower_one() -> None:
    alloc = Allocator(ZED, priority_levels=3)
    alloc.add_tenant("low")
    alloc.add_tenant("mid", priority=1)
    shell = LoopbackShell(alloc)
    place(alloc, shell, "low", "fft1024", 0.0, run=True)
    assert alloc.request("mid", "fft1024", 1.0).kind is SolutionKind.PREEMPT
    # a request may lower its priority, never raise it
    with pytest.raises(PriorityError):
        alloc.request("low", "qam16", 2.0, priority=1)


def test_wait_list_is_served_by_priority_then_fifo() -> None:
    alloc = Allocator(ZED, priority_levels=3)
    for name, prio in [("a", 0), ("b", 1), ("c", 0), ("d", 1)]:
        alloc.add_tenant(name, priority=prio)
    alloc.add_tenant("rt", realtime=True)
    shell = LoopbackShell(alloc)
    place(alloc, shell, "rt", "fft1024", 0.0, run=True)
    for t, name in enumerate(["a", "b", "c", "d"], start=1):
        assert alloc.request(name, "fft1024", float(t)).kind is SolutionKind.UNAVAILABLE
    order = [(w.tenant, w.priority) for w in alloc.waiting()]
    assert order == [("b", 1), ("d", 1), ("a", 0), ("c", 0)]
    served = []
    now = 10.0
    for _ in range(4):
        holder = shell.connected["prr3"]
        out = alloc.finish(*holder, now)
        shell.execute(out)
        (sol,) = [a for a in out if isinstance(a, Solution)]
        served.append(sol.tenant)
        shell.settle(now)
        shell.execute(alloc.start(sol.tenant, "fft1024", now))
        now += 10.0
    assert served == ["b", "d", "a", "c"]
    assert alloc.waiting() == ()


def test_a_freed_region_goes_to_the_first_waiter_it_can_hold() -> None:
    alloc, shell = make()
    place(alloc, shell, "rt", "fft1024", 0.0, run=True)  # prr3
    place(alloc, shell, "rt", "fft512", 0.0, run=True)  # prr2
    assert alloc.request("gp", "fft1024", 1.0).kind is SolutionKind.UNAVAILABLE
    assert alloc.request("gp2", "fft512", 2.0).kind is SolutionKind.UNAVAILABLE
    out = alloc.finish("rt", "fft512", 3.0)  # prr2 cannot hold fft1024: gp2 gets it
    (sol,) = [a for a in out if isinstance(a, Solution)]
    assert (sol.tenant, sol.region) == ("gp2", "prr2")
    assert [w.tenant for w in alloc.waiting()] == ["gp"]


def test_hold_reserves_then_expires() -> None:
    alloc, shell = make(hold_us=50.0)
    place(alloc, shell, "gp", "fft1024", 0.0, run=False)  # reconfig done at 0: held to 50
    assert alloc.region_state("prr3") is S.HOLD
    assert alloc.next_deadline() == 50.0
    # a real-time request cannot take a held region
    assert alloc.request("rt", "fft1024", 10.0).kind is SolutionKind.UNAVAILABLE
    assert alloc.advance(49.0) == []
    out = alloc.advance(50.0)
    (sol,) = [a for a in out if isinstance(a, Solution)]
    assert (sol.tenant, sol.kind, sol.victim) == ("rt", SolutionKind.ASSIGN, ("gp", "fft1024"))
    assert kinds(out)[1:3] == ["SaveContext", "Disconnect"]
    assert alloc.statistics().hold_expiries == 1
    assert alloc.next_deadline() == 100.0  # rt holds it from 50 for 50


def test_start_after_an_expired_hold_lost_to_a_waiter() -> None:
    alloc, shell = make(hold_us=20.0)
    place(alloc, shell, "gp", "fft1024", 0.0, run=False)
    shell.run(alloc.request("gp2", "fft1024", 5.0))
    with pytest.raises(DeviceStateError, match="expired"):
        alloc.start("gp", "fft1024", 30.0)
    # what the expiry caused comes with the next call
    out = alloc.advance(30.0)
    assert any(isinstance(a, Solution) and a.tenant == "gp2" for a in out)
    assert alloc.device_state("gp", "fft1024") is DeviceState.DISCONNECTED


def test_start_within_hold_runs() -> None:
    alloc, shell = make(hold_us=20.0)
    place(alloc, shell, "gp", "fft1024", 0.0, run=True)
    assert alloc.region_state("prr3") is S.BUSY
    assert alloc.advance(100.0) == []  # a running region does not expire
    assert alloc.region_state("prr3") is S.BUSY


def test_reconfig_failure_sends_the_request_elsewhere_and_repair_reopens() -> None:
    alloc, shell = make()
    place(alloc, shell, "rt", "fft512", 0.0, run=True)  # prr2
    sol = shell.run(alloc.request("gp", "fft512", 1.0))
    assert sol.region == "prr3"
    shell.execute(alloc.request("gp2", "fft1024", 2.0).actions)  # waits behind
    out = alloc.reconfigured("prr3", 3.0, ok=False)
    del shell.pending_reconfig["prr3"]
    assert alloc.region_state("prr3") is S.ERROR
    (retry,) = [a for a in out if isinstance(a, Solution)]
    assert retry.kind is SolutionKind.UNAVAILABLE
    # it kept its place in line, ahead of the later request
    assert [w.tenant for w in alloc.waiting()] == ["gp", "gp2"]
    out = alloc.repair("prr3", 4.0)
    (sol,) = [a for a in out if isinstance(a, Solution)]
    assert (sol.tenant, sol.region, sol.reconfig) == ("gp", "prr3", True)
    assert alloc.statistics().reconfig_failures == 1


def test_finish_at_a_pending_preemption_is_the_consistency_point() -> None:
    alloc, shell = make()
    place(alloc, shell, "gp", "fft1024", 0.0, run=True)
    shell.run(alloc.request("rt", "fft1024", 1.0))
    out = alloc.finish("gp", "fft1024", 20.0)
    assert not any(isinstance(a, Solution) for a in out)  # nothing left to re-request
    assert alloc.device_state("gp", "fft1024") is DeviceState.DISCONNECTED
    assert alloc.connected_region("rt", "fft1024") == "prr3"


def test_context_survives_preemption_bit_exact_in_another_region() -> None:
    alloc, shell = make()
    place(alloc, shell, "gp", "qam16", 0.0, run=True)  # prr1
    state = bytes(range(16))
    shell.live["prr1"] = state  # the running device's internal state
    place(alloc, shell, "gp2", "qam16", 1.0, run=True)  # prr2
    shell.run(alloc.request("rt", "qam16", 2.0))  # preempts prr1
    shell.complete_stop("prr1", 10.0)
    assert alloc.interface("gp", "qam16").load() == state
    shell.execute(alloc.finish("gp2", "qam16", 20.0))  # prr2 frees: gp resumes there
    assert alloc.connected_region("gp", "qam16") == "prr2"
    assert shell.live["prr2"] == state
    assert shell.violations == []


def test_release_withdraws_or_disconnects() -> None:
    alloc, shell = make()
    place(alloc, shell, "rt", "fft1024", 0.0, run=True)
    shell.run(alloc.request("gp", "fft1024", 1.0))
    assert alloc.release("gp", "fft1024", 2.0) == []
    assert alloc.waiting() == () and alloc.statistics().withdrawn == 1
    with pytest.raises(DeviceStateError):
        alloc.release("rt", "fft1024", 3.0)  # running
    shell.execute(alloc.finish("rt", "fft1024", 4.0))
    out = alloc.release("rt", "fft1024", 5.0)
    assert kinds(out) == ["SaveContext", "Disconnect"]
    assert alloc.release("rt", "fft1024", 6.0) == []  # already disconnected


def test_signals_carry_the_programming_model() -> None:
    alloc, shell = make()
    shell.run(alloc.request("rt", "qam16", 0.0))
    shell.run(alloc.request("gp", "fft1024", 0.0))
    shell.settle(1.0)
    models = {(s.tenant, s.signal): s.model for s in shell.signals}
    assert models[("rt", SignalKind.WAIT)] is ProgrammingModel.NATIVE
    assert models[("rt", SignalKind.READY)] is ProgrammingModel.NATIVE
    assert models[("gp", SignalKind.READY)] is ProgrammingModel.AWARE


def test_interfaces_are_per_tenant_and_persist() -> None:
    alloc, shell = make()
    mine, theirs = alloc.interface("gp", "qam16"), alloc.interface("gp2", "qam16")
    assert mine is not theirs
    mine.write(Register.RESULT, 2**64 - 1)
    mine.write(Register.CMD, 7)
    assert theirs.read(Register.RESULT) == 0 and theirs.read(Register.CMD) == 0
    place(alloc, shell, "gp", "qam16", 0.0, run=False)
    shell.execute(alloc.release("gp", "qam16", 1.0))
    assert mine.read(Register.RESULT) == 2**64 - 1  # kept while disconnected
    with pytest.raises(InterfaceError, match="8 bits"):
        mine.write(Register.START, 256)
    with pytest.raises(InterfaceError, match="exceeds"):
        mine.save(bytes(17))  # the zedboard's qam16 context is 16 bytes
    assert mine.read(Register.START) == 0


# -- bad requests: specific errors, nothing changes -----------------------------------------


def _no_seat_index() -> TaskIndex:
    regions = [RegionSpec("r", 100)]
    devices = [DeviceSpec("fits", 10.0, 5.0), DeviceSpec("huge", 10.0, 5.0, slices=1000)]
    return TaskIndex(regions, devices, [TaskDescriptor("fits", "r", "fits@r", 10, 5.0)])


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda a: a.request("nobody", "qam16", 5.0), UnknownTenantError),
        (lambda a: a.request("gp", "fft4096", 5.0), UnknownDeviceError),
        (lambda a: a.request("gp", "qam16", 5.0, priority=1), PriorityError),
        (lambda a: a.request("gp", "qam16", 5.0, priority=-1), PriorityError),
        (lambda a: a.request("rt", "qam16", 5.0, priority=2), PriorityError),
        (lambda a: a.request("gp2", "qam16", 1.0), TimeOrderError),
        (lambda a: a.request("gp", "fft1024", 5.0), DeviceStateError),  # already connected
        (lambda a: a.request("gp2", "fft1024", 5.0), DeviceStateError),  # already waiting
        (lambda a: a.start("gp2", "fft1024", 5.0), DeviceStateError),
        (lambda a: a.finish("gp", "qam16", 5.0), DeviceStateError),
        (lambda a: a.stopped("prr3", 5.0), IllegalTransitionError),
        (lambda a: a.reconfigured("prr1", 5.0), IllegalTransitionError),
        (lambda a: a.repair("prr1", 5.0), IllegalTransitionError),
        (lambda a: a.stopped("prr9", 5.0), UnknownRegionError),
    ],
)
def test_bad_calls_raise_and_change_nothing(call: object, error: type[Exception]) -> None:
    alloc, shell = make()
    place(alloc, shell, "gp", "fft1024", 2.0, run=True)
    shell.run(alloc.request("gp2", "fft1024", 3.0))
    before = alloc.statistics()
    with pytest.raises(error):
        call(alloc)  # type: ignore[operator]
    assert alloc.statistics() == before


def test_a_device_no_region_can_hold() -> None:
    alloc = Allocator(_no_seat_index())
    alloc.add_tenant("t")
    before = alloc.statistics()
    with pytest.raises(NoCompatibleRegionError, match="'huge'"):
        alloc.request("t", "huge", 0.0)
    assert alloc.statistics() == before
    assert alloc.request("t", "fits", 0.0).path == 2


def test_from_profile() -> None:
    alloc = Allocator.from_profile(load_profile("zedboard"), hold_us=10.0)
    assert [r.name for r in alloc.index.regions] == ["prr1", "prr2", "prr3"]
    assert alloc.hold_us == 10.0 and alloc.priority_levels == 2


def test_tenant_registration_errors() -> None:
    alloc, _ = make()
    with pytest.raises(DuplicateTenantError):
        alloc.add_tenant("gp")
    with pytest.raises(PriorityError):
        alloc.add_tenant("x", realtime=True, priority=0)
    with pytest.raises(PriorityError):
        alloc.add_tenant("y", priority=1)  # the real-time class is reserved
    with pytest.raises(PriorityError):
        Allocator(ZED, priority_levels=1)
    assert [t.name for t in alloc.statistics().tenants] == ["rt", "gp", "gp2"]
    assert alloc.tenant("rt").priority == alloc.realtime_priority == 1
    with pytest.raises(UnknownTenantError):
        alloc.tenant("x")


def test_snapshots_and_repr() -> None:
    alloc, shell = make()
    place(alloc, shell, "gp", "fft1024", 0.0, run=True)
    shell.run(alloc.request("gp2", "fft1024", 1.0))
    stats = alloc.statistics()
    prr3 = stats.regions[2]
    assert (prr3.state, prr3.design, prr3.client) == ("Busy", "fft1024", "gp/fft1024")
    assert stats.paths == (1, 0, 1, 0, 0) and stats.unavailable == 1
    assert [(w.tenant, w.device) for w in stats.waiting] == [("gp2", "fft1024")]
    with pytest.raises(AttributeError):
        stats.requests = 0  # type: ignore[misc]
    text = repr(alloc)
    assert "prr3:Busy(gp/fft1024)" in text and "1 waiting" in text
    assert "LoopbackShell" in repr(shell)
    assert alloc.waiting_count == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        Connect("t", "d", "r").region = "x"  # type: ignore[misc]
