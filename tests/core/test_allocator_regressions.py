"""Regression examples for the allocator: retried requests keep their place in line, and a
real-time task stays unpreemptible even when its request lowered its priority.

Each test walks explicit steps through the public API (request, start, finish, stopped,
reconfigured, repair) and asserts the exact wait list and who is served next.

The only path that puts an *existing* request back on the wait list with its old FIFO number
is a failed reconfiguration (``reconfigured(..., ok=False)``): the request is searched again
and, finding nothing, must slot back in by ``seq`` rather than join the end of its queue. (A
preempted task's remaining work is a new request with a fresh number, and an expired hold
does not re-enqueue its client at all.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise

from juggle.core.actions import Action, Solution, SolutionKind, StopAtConsistencyPoint
from juggle.core.allocator import Allocator
from juggle.core.loopback import LoopbackShell
from juggle.core.regionfsm import RegionPhase
from juggle.core.taskindex import DeviceSpec, RegionSpec, TaskDescriptor, TaskIndex
from juggle.core.tenants import DeviceState
from juggle.fabric.profiles import load_profile

S = RegionPhase
ZED = TaskIndex.from_profile(load_profile("zedboard"))
DEV = "dev"


def one_device_index(*regions: str) -> TaskIndex:
    """One device ``dev`` that fits every region, the regions listed smallest first."""
    specs = [RegionSpec(name, 100 * (i + 1)) for i, name in enumerate(regions)]
    tasks = [TaskDescriptor(DEV, name, f"{DEV}@{name}.bit", 1000, 10.0) for name in regions]
    return TaskIndex(specs, [DeviceSpec(DEV, 10.0, 5.0)], tasks)


def solutions(actions: Sequence[Action]) -> list[Solution]:
    return [a for a in actions if isinstance(a, Solution)]


def served(actions: Sequence[Action]) -> tuple[str, str | None]:
    """(tenant, region) of the one solution announced in ``actions``."""
    (sol,) = solutions(actions)
    assert sol.kind is SolutionKind.ASSIGN, sol
    return sol.tenant, sol.region


def waiting(alloc: Allocator) -> list[tuple[str, int, float]]:
    """The wait list as (tenant, priority, since), in service order; checks on the way that
    FIFO numbers rise within each priority."""
    entries = alloc.waiting()
    for before, after in pairwise(entries):
        if before.priority == after.priority:
            assert before.seq < after.seq, entries
    return [(w.tenant, w.priority, w.since) for w in entries]


def occupy_with_realtime(alloc: Allocator, shell: LoopbackShell, region: str) -> None:
    """Tenant ``rt`` takes ``region`` (the smallest idle one) and starts computing."""
    sol = shell.run(alloc.request("rt", DEV, 0.0))
    assert (sol.kind, sol.region) == (SolutionKind.ASSIGN, region)
    shell.settle(0.0)
    shell.execute(alloc.start("rt", DEV, 0.0))
    assert alloc.region_state(region) is S.BUSY


# -- 1. a retried request keeps its place in line ----------------------------------------------


def test_a_failed_reconfiguration_is_retried_ahead_of_later_requests() -> None:
    alloc = Allocator(one_device_index("r1", "r2"), hold_us=1000.0)
    for name in ("rt", "a", "b", "c"):
        alloc.add_tenant(name, realtime=name == "rt")
    shell = LoopbackShell(alloc)
    occupy_with_realtime(alloc, shell, "r1")  # asks 1st

    sol = shell.run(alloc.request("a", DEV, 1.0))  # asks 2nd: r2 is idle, a blank region
    assert (sol.kind, sol.region, sol.reconfig) == (SolutionKind.ASSIGN, "r2", True)
    assert shell.run(alloc.request("b", DEV, 2.0)).kind is SolutionKind.UNAVAILABLE  # asks 3rd
    assert shell.run(alloc.request("c", DEV, 3.0)).kind is SolutionKind.UNAVAILABLE  # asks 4th
    assert waiting(alloc) == [("b", 0, 2.0), ("c", 0, 3.0)]

    # loading a's design into r2 fails: a is searched again, finds nothing and waits, but
    # with its original number and time, i.e. ahead of b and c who asked after it
    shell.complete_reconfig("r2", 4.0, ok=False)
    assert alloc.region_state("r2") is S.ERROR
    (retry,) = shell.solutions[-1:]
    assert (retry.tenant, retry.kind) == ("a", SolutionKind.UNAVAILABLE)
    assert alloc.device_state("a", DEV) is DeviceState.WAITING
    assert waiting(alloc) == [("a", 0, 1.0), ("b", 0, 2.0), ("c", 0, 3.0)]

    # the next region to free goes to a, not to b who merely sits first in the deque
    out = alloc.finish("rt", DEV, 5.0)
    shell.execute(out)
    assert served(out) == ("a", "r1")
    assert alloc.connected_region("a", DEV) == "r1"
    assert waiting(alloc) == [("b", 0, 2.0), ("c", 0, 3.0)]

    out = alloc.repair("r2", 6.0)
    shell.execute(out)
    assert served(out) == ("b", "r2")
    assert waiting(alloc) == [("c", 0, 3.0)]
    assert shell.violations == []


def test_two_failed_reconfigurations_slot_back_in_request_order() -> None:
    """x asked before y, y before p. y's load fails after x's: y must go between x and p
    (neither at the end of the line nor at its front)."""
    alloc = Allocator(one_device_index("r1", "r2", "r3"), hold_us=1000.0)
    for name in ("rt", "x", "y", "p"):
        alloc.add_tenant(name, realtime=name == "rt")
    shell = LoopbackShell(alloc)
    occupy_with_realtime(alloc, shell, "r1")

    assert shell.run(alloc.request("x", DEV, 1.0)).region == "r2"  # asks 2nd, reconfig
    assert shell.run(alloc.request("y", DEV, 2.0)).region == "r3"  # asks 3rd, reconfig
    assert shell.run(alloc.request("p", DEV, 3.0)).kind is SolutionKind.UNAVAILABLE  # asks 4th

    shell.complete_reconfig("r2", 4.0, ok=False)
    assert waiting(alloc) == [("x", 0, 1.0), ("p", 0, 3.0)]
    shell.complete_reconfig("r3", 5.0, ok=False)
    assert waiting(alloc) == [("x", 0, 1.0), ("y", 0, 2.0), ("p", 0, 3.0)]

    # each region that frees goes to the head of the wait list
    steps: list[Callable[[], list[Action]]] = [
        lambda: alloc.finish("rt", DEV, 6.0),
        lambda: alloc.repair("r2", 7.0),
        lambda: alloc.repair("r3", 8.0),
    ]
    order: list[tuple[str, str | None]] = []
    for step in steps:
        head = alloc.waiting()[0].tenant
        out = step()
        shell.execute(out)
        order.append(served(out))
        assert order[-1][0] == head, "the wait list's head is not the one served"
    assert order == [("x", "r1"), ("y", "r2"), ("p", "r3")]
    assert alloc.waiting() == ()
    assert alloc.statistics().reconfig_failures == 2
    assert shell.violations == []


def test_a_retried_request_keeps_its_priority_and_does_not_jump_a_higher_one() -> None:
    """The retried request goes back to its own priority level, ahead of later requests of
    that level but still behind a waiting request of higher priority."""
    alloc = Allocator(one_device_index("r1", "r2"), priority_levels=3, hold_us=1000.0)
    alloc.add_tenant("rt", realtime=True)
    alloc.add_tenant("a")
    alloc.add_tenant("m", priority=1)
    alloc.add_tenant("b")
    shell = LoopbackShell(alloc)
    occupy_with_realtime(alloc, shell, "r1")

    assert shell.run(alloc.request("a", DEV, 1.0)).region == "r2"  # asks 2nd, reconfig
    assert shell.run(alloc.request("m", DEV, 2.0)).kind is SolutionKind.UNAVAILABLE  # asks 3rd
    assert shell.run(alloc.request("b", DEV, 3.0)).kind is SolutionKind.UNAVAILABLE  # asks 4th
    shell.complete_reconfig("r2", 4.0, ok=False)
    assert waiting(alloc) == [("m", 1, 2.0), ("a", 0, 1.0), ("b", 0, 3.0)]

    out = alloc.finish("rt", DEV, 5.0)
    shell.execute(out)
    assert served(out) == ("m", "r1")
    out = alloc.repair("r2", 6.0)
    shell.execute(out)
    assert served(out) == ("a", "r2")
    assert waiting(alloc) == [("b", 0, 3.0)]


# -- 2. a real-time task is never preempted, even at a lowered request priority ---------------


def three_levels() -> tuple[Allocator, LoopbackShell]:
    """rt (real-time, 2), low (general purpose at 1, will request at 0), mid (1)."""
    alloc = Allocator(ZED, priority_levels=3, hold_us=1000.0)
    alloc.add_tenant("rt", realtime=True)
    alloc.add_tenant("low", priority=1)
    alloc.add_tenant("mid", priority=1)
    return alloc, LoopbackShell(alloc)


def run_lowered(alloc: Allocator, shell: LoopbackShell, tenant: str) -> None:
    """``tenant`` requests fft1024 (prr3 only) at priority 0 and starts computing."""
    sol = shell.run(alloc.request(tenant, "fft1024", 0.0, priority=0))
    assert (sol.kind, sol.region, sol.priority) == (SolutionKind.ASSIGN, "prr3", 0)
    shell.settle(0.0)
    shell.execute(alloc.start(tenant, "fft1024", 0.0))
    prr3 = alloc.statistics().regions[2]
    assert (prr3.state, prr3.client, prr3.client_priority) == ("Busy", f"{tenant}/fft1024", 0)


def test_a_real_time_task_at_a_lowered_priority_is_not_preempted_by_a_request() -> None:
    alloc, shell = three_levels()
    run_lowered(alloc, shell, "rt")  # runs at 0, below mid's 1, but it is real-time

    sol = shell.run(alloc.request("mid", "fft1024", 1.0))
    assert sol.kind is SolutionKind.UNAVAILABLE
    assert not any(isinstance(a, StopAtConsistencyPoint) for a in sol.actions)
    assert alloc.region_state("prr3") is S.BUSY
    assert alloc.connected_region("rt", "fft1024") == "prr3"
    assert waiting(alloc) == [("mid", 1, 1.0)]
    assert alloc.statistics().preemptions == 0
    assert shell.pending_stop == {}

    out = alloc.finish("rt", "fft1024", 2.0)  # mid waits for rt to finish on its own
    shell.execute(out)
    assert served(out) == ("mid", "prr3")


def test_a_general_purpose_task_at_the_same_lowered_priority_is_preempted() -> None:
    """The control for the test above: only the real-time class protects the task."""
    alloc, shell = three_levels()
    run_lowered(alloc, shell, "low")

    sol = shell.run(alloc.request("mid", "fft1024", 1.0))
    assert (sol.kind, sol.region, sol.victim) == (
        SolutionKind.PREEMPT,
        "prr3",
        ("low", "fft1024"),
    )
    assert shell.pending_stop == {"prr3": StopAtConsistencyPoint("prr3", "low", "fft1024")}
    shell.complete_stop("prr3", 2.0)
    assert alloc.connected_region("mid", "fft1024") == "prr3"
    assert alloc.device_state("low", "fft1024") is DeviceState.WAITING


def test_a_real_time_task_at_a_lowered_priority_is_not_preempted_when_it_starts() -> None:
    """mid is already waiting when rt (connected at priority 0) starts: starting must not
    hand the region to mid."""
    alloc, shell = three_levels()
    shell.run(alloc.request("rt", "fft1024", 0.0, priority=0))
    shell.settle(0.0)
    assert alloc.region_state("prr3") is S.HOLD
    assert shell.run(alloc.request("mid", "fft1024", 1.0)).kind is SolutionKind.UNAVAILABLE

    out = alloc.start("rt", "fft1024", 2.0)
    assert out == []
    assert alloc.region_state("prr3") is S.BUSY
    assert alloc.device_state("mid", "fft1024") is DeviceState.WAITING
    assert waiting(alloc) == [("mid", 1, 1.0)]


def test_a_general_purpose_task_at_the_same_lowered_priority_is_preempted_when_it_starts() -> None:
    alloc, shell = three_levels()
    shell.run(alloc.request("low", "fft1024", 0.0, priority=0))
    shell.settle(0.0)
    assert shell.run(alloc.request("mid", "fft1024", 1.0)).kind is SolutionKind.UNAVAILABLE

    out = alloc.start("low", "fft1024", 2.0)
    (sol,) = solutions(out)
    assert (sol.kind, sol.tenant, sol.victim) == (
        SolutionKind.PREEMPT,
        "mid",
        ("low", "fft1024"),
    )
    assert alloc.region_state("prr3") is S.PREEMPT
    assert alloc.waiting() == ()


def four_levels(holder: str) -> tuple[Allocator, LoopbackShell]:
    """bottom (0) runs fft1024 in prr3; ``holder`` preempts it at priority 1 and runs."""
    alloc = Allocator(ZED, priority_levels=4, hold_us=1000.0)
    alloc.add_tenant("bottom")
    alloc.add_tenant("rt", realtime=True)
    alloc.add_tenant("gp", priority=2)
    alloc.add_tenant("high", priority=2)
    shell = LoopbackShell(alloc)
    shell.run(alloc.request("bottom", "fft1024", 0.0))
    shell.settle(0.0)
    shell.execute(alloc.start("bottom", "fft1024", 0.0))
    sol = shell.run(alloc.request(holder, "fft1024", 1.0, priority=1))
    assert (sol.kind, sol.victim) == (SolutionKind.PREEMPT, ("bottom", "fft1024"))
    shell.complete_stop("prr3", 2.0)  # holder is connected through the switch
    assert alloc.connected_region(holder, "fft1024") == "prr3"
    shell.execute(alloc.start(holder, "fft1024", 3.0))
    assert alloc.statistics().regions[2].client_priority == 1
    return alloc, shell


def test_a_real_time_task_that_preempted_at_a_lowered_priority_stays_unpreemptible() -> None:
    alloc, shell = four_levels("rt")
    sol = shell.run(alloc.request("high", "fft1024", 4.0))
    assert sol.kind is SolutionKind.UNAVAILABLE
    assert alloc.region_state("prr3") is S.BUSY
    assert [w[:2] for w in waiting(alloc)] == [("high", 2), ("bottom", 0)]


def test_a_general_purpose_task_that_preempted_at_priority_1_is_preempted_by_2() -> None:
    alloc, shell = four_levels("gp")
    sol = shell.run(alloc.request("high", "fft1024", 4.0))
    assert (sol.kind, sol.victim) == (SolutionKind.PREEMPT, ("gp", "fft1024"))
    assert alloc.region_state("prr3") is S.PREEMPT
