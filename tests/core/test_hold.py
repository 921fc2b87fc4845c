"""The hysteresis hold (issue 25, item 2): a region handed to a client stays held for it between
its computations, so a lower priority cannot take it back and a higher-priority stream of short
calls keeps it instead of thrashing.

All in modeled microseconds on the sans-I/O allocator with the loopback shell: one region ``r``
(a second, ``r2``, where a test needs two), devices ``a`` and ``b`` (different designs, each
loads in ``T_RCFG`` = 10 us), tenants of priority 0..2 and a real-time one (3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from juggle.core.actions import Action, Solution, SolutionKind
from juggle.core.allocator import HYSTERESIS_FACTOR, Allocator
from juggle.core.loopback import LoopbackShell
from juggle.core.regionfsm import RegionPhase
from juggle.core.taskindex import DeviceSpec, RegionSpec, TaskDescriptor, TaskIndex
from juggle.core.tenants import DeviceState, SignalKind
from juggle.errors import AllocatorError, DeviceStateError

S = RegionPhase
T_RCFG = 10.0
HOLD = HYSTERESIS_FACTOR * T_RCFG  # the derived hysteresis hold: 20 us


def index(*regions: str, t_a: float = T_RCFG, t_b: float = T_RCFG) -> TaskIndex:
    """Devices ``a`` and ``b`` fitting every region (smallest first)."""
    specs = [RegionSpec(name, 100 * (i + 1)) for i, name in enumerate(regions)]
    tasks = [TaskDescriptor("a", r, f"a@{r}.bit", 1000, t_a) for r in regions]
    tasks += [TaskDescriptor("b", r, f"b@{r}.bit", 1000, t_b) for r in regions]
    return TaskIndex(specs, [DeviceSpec("a", 1.0, 1.0), DeviceSpec("b", 1.0, 1.0)], tasks)


def make(
    *regions: str, hysteresis_us: float | None = None, hold_us: float = 5.0
) -> tuple[Allocator, LoopbackShell]:
    """An allocator with tenants lo (0), mid and mid2 (1), hi (2) and rt (real-time, 3)."""
    alloc = Allocator(
        index(*(regions or ("r",))),
        priority_levels=4,
        hold_us=hold_us,
        hysteresis_us=hysteresis_us,
    )
    for name, prio in (("lo", 0), ("mid", 1), ("mid2", 1), ("hi", 2)):
        alloc.add_tenant(name, priority=prio)
    alloc.add_tenant("rt", realtime=True)
    return alloc, LoopbackShell(alloc)


def solutions(actions: Sequence[Action]) -> list[Solution]:
    return [a for a in actions if isinstance(a, Solution)]


def call(alloc: Allocator, shell: LoopbackShell, tenant: str, device: str, now: float) -> None:
    """One computation of ``tenant`` at ``now`` (requesting first if disconnected; pending
    stops and reconfigurations complete at once), started but not finished."""
    if alloc.device_state(tenant, device) is DeviceState.DISCONNECTED:
        shell.run(alloc.request(tenant, device, now))
        shell.settle(now)
    shell.execute(alloc.start(tenant, device, now))


def lo_runs_then_hi_preempts(alloc: Allocator, shell: LoopbackShell) -> None:
    """lo computes ``b`` in r from 0; hi asks for ``a`` at 1 (preempt, reconfig), lo stops at
    2, r is loaded for hi at 2 and hi computes from 2 to 3: r is held for hi from 3."""
    call(alloc, shell, "lo", "b", 0.0)
    sol = shell.run(alloc.request("hi", "a", 1.0))
    assert (sol.kind, sol.reconfig) == (SolutionKind.PREEMPT, True)
    shell.settle(2.0)
    shell.execute(alloc.start("hi", "a", 2.0))
    shell.execute(alloc.finish("hi", "a", 3.0))


def test_a_call_that_ends_within_the_hold_leaves_the_region_held_for_its_client() -> None:
    alloc, shell = make()
    lo_runs_then_hi_preempts(alloc, shell)
    assert alloc.region_state("r") is S.HOLD  # not Idle: lo's request waits
    assert alloc.device_state("lo", "b") is DeviceState.WAITING
    assert alloc.next_deadline() == 3.0 + HOLD
    reconfigs = alloc.statistics().reconfigurations
    for t in range(4, 40, 2):  # a stream of short calls, each gap shorter than the hold
        shell.execute(alloc.start("hi", "a", float(t)))
        shell.execute(alloc.finish("hi", "a", t + 0.5))
    stats = alloc.statistics()
    assert stats.reconfigurations == reconfigs and stats.preemptions == 1
    assert alloc.connected_region("hi", "a") == "r"
    assert [s.signal for s in shell.signals if s.tenant == "hi"] == [
        SignalKind.WAIT,
        SignalKind.READY,
    ]
    assert shell.violations == []
    entered = dict(stats.regions[0].entered)
    # lo and hi connected (2), then held after hi's first call and each of the 18 after it
    assert entered["Hold"] == 2 + 1 + 18


def test_the_hold_runs_out_exactly_one_hold_after_the_last_use() -> None:
    alloc, shell = make()
    lo_runs_then_hi_preempts(alloc, shell)
    due = 3.0 + HOLD
    assert alloc.advance(due - 0.001) == []
    assert alloc.region_state("r") is S.HOLD
    out = alloc.advance(due)
    shell.execute(out)
    (sol,) = solutions(out)
    assert (sol.tenant, sol.kind, sol.reconfig, sol.victim) == (
        "lo",
        SolutionKind.ASSIGN,
        True,
        ("hi", "a"),
    )
    assert alloc.statistics().hold_expiries == 1
    shell.settle(due)
    assert alloc.connected_region("lo", "b") == "r"


def test_a_request_of_higher_priority_takes_a_held_region_at_once() -> None:
    alloc, shell = make()
    lo_runs_then_hi_preempts(alloc, shell)
    sol = shell.run(alloc.request("rt", "a", 4.0))  # same design: no reconfiguration
    assert (sol.kind, sol.region, sol.reconfig, sol.victim) == (
        SolutionKind.ASSIGN,
        "r",
        False,
        ("hi", "a"),
    )
    assert alloc.connected_region("rt", "a") == "r"
    assert alloc.device_state("hi", "a") is DeviceState.DISCONNECTED
    assert dict(alloc.statistics().regions[0].entered)["Switch"] == 2  # preempt, then take
    assert shell.violations == []


@pytest.mark.parametrize("tenant", ["lo", "mid", "hi"])
def test_a_request_of_lower_or_equal_priority_waits_out_the_hold(tenant: str) -> None:
    alloc, shell = make()
    call(alloc, shell, "hi", "a", 0.0)
    shell.execute(alloc.finish("hi", "a", 1.0))
    if tenant == "hi":
        alloc.add_tenant("hi2", priority=2)
        tenant = "hi2"
    sol = shell.run(alloc.request(tenant, "b", 2.0))
    assert sol.kind is SolutionKind.UNAVAILABLE
    assert alloc.connected_region("hi", "a") == "r"


def test_an_equal_priority_waiter_stops_the_renewal() -> None:
    """mid holds r; mid2 (same priority) waits. mid's later calls do not renew the hold, so
    mid2 gets r when the hold granted before it asked runs out, not later."""
    alloc, shell = make()
    call(alloc, shell, "mid", "a", 0.0)
    shell.execute(alloc.finish("mid", "a", 1.0))  # held until 1 + HOLD
    shell.run(alloc.request("mid2", "b", 2.0))
    shell.execute(alloc.start("mid", "a", 10.0))
    shell.execute(alloc.finish("mid", "a", 11.0))  # not renewed: a peer waits
    assert alloc.next_deadline() == 1.0 + HOLD
    out = alloc.advance(1.0 + HOLD)
    assert [(s.tenant, s.region) for s in solutions(out)] == [("mid2", "r")]


def test_a_lower_waiter_does_not_stop_the_renewal() -> None:
    alloc, shell = make()
    call(alloc, shell, "mid", "a", 0.0)
    shell.execute(alloc.finish("mid", "a", 1.0))
    shell.run(alloc.request("lo", "b", 2.0))
    shell.execute(alloc.start("mid", "a", 10.0))
    shell.execute(alloc.finish("mid", "a", 11.0))
    assert alloc.next_deadline() == 11.0 + HOLD


def test_a_waiter_of_higher_priority_gets_the_region_when_the_call_ends() -> None:
    """rt asks while hi computes in r2 (r is busy too): it preempts the smaller busy region, r;
    hi's call in r2 ends into Hold; a second real-time request asks after it and, r2 being
    held for lower-priority hi, takes it at once."""
    alloc, shell = make("r", "r2")
    call(alloc, shell, "lo", "b", 0.0)  # r
    call(alloc, shell, "hi", "a", 0.0)  # r2
    shell.run(alloc.request("rt", "a", 1.0))
    assert alloc.region_state("r") is S.PREEMPT  # the smallest region of lower priority
    shell.execute(alloc.finish("hi", "a", 2.0))
    assert alloc.region_state("r2") is S.HOLD
    alloc.add_tenant("rt2", realtime=True)
    sol = shell.run(alloc.request("rt2", "a", 3.0))
    assert (sol.kind, sol.region, sol.victim) == (SolutionKind.ASSIGN, "r2", ("hi", "a"))


def test_a_call_ending_with_a_higher_waiter_queued_goes_idle_and_serves_it() -> None:
    alloc, shell = make()
    call(alloc, shell, "mid", "a", 0.0)
    shell.execute(alloc.set_priority("mid", "a", 1, 0.5, preemptible=False))  # pinned
    assert alloc.request("hi", "b", 1.0).kind is SolutionKind.UNAVAILABLE  # cannot preempt
    out = alloc.finish("mid", "a", 2.0)
    shell.execute(out)
    assert [(s.tenant, s.region, s.reconfig) for s in solutions(out)] == [("hi", "r", True)]


def test_a_real_time_holder_keeps_its_region_against_a_lower_waiter() -> None:
    alloc, shell = make()
    call(alloc, shell, "rt", "a", 0.0)
    assert alloc.request("hi", "b", 1.0).kind is SolutionKind.UNAVAILABLE
    out = alloc.finish("rt", "a", 2.0)
    assert solutions(out) == [] and alloc.region_state("r") is S.HOLD
    assert alloc.next_deadline() == 2.0 + HOLD


def test_a_waiter_raised_above_the_holder_takes_the_held_region() -> None:
    alloc, shell = make()
    call(alloc, shell, "mid", "a", 0.0)
    shell.execute(alloc.finish("mid", "a", 1.0))
    shell.run(alloc.request("lo", "b", 2.0))
    out = alloc.set_tenant("lo", 3.0, priority=2)
    shell.execute(out)
    assert [(s.tenant, s.kind, s.victim) for s in solutions(out)] == [
        ("lo", SolutionKind.ASSIGN, ("mid", "a"))
    ]


def test_a_freshly_granted_region_still_blocks_every_request_until_its_client_starts() -> None:
    alloc, shell = make(hold_us=50.0)
    shell.run(alloc.request("lo", "a", 0.0))
    shell.settle(0.0)
    assert alloc.region_state("r") is S.HOLD
    assert alloc.request("rt", "b", 1.0).kind is SolutionKind.UNAVAILABLE  # Ker-ONE's Hold


def test_without_hysteresis_a_finished_call_leaves_the_region_idle() -> None:
    alloc, shell = make(hysteresis_us=0.0)
    lo_runs_then_hi_preempts(alloc, shell)
    assert alloc.connected_region("lo", "b") is None
    assert alloc.region_state("r") is S.RECONFIG  # handed straight back to lo: the thrash
    assert alloc.hysteresis_for("r") == 0.0


def test_the_derived_hold_is_the_factor_times_the_bitstreams_reconfiguration_time() -> None:
    alloc = Allocator(index("r", t_a=10.0, t_b=33.0), hysteresis_us=None)
    assert alloc.hysteresis_for("r", "a") == 2 * 10.0
    assert alloc.hysteresis_for("r", "b") == 2 * 33.0
    assert alloc.hysteresis_for("r") == 0.0  # nothing loaded
    alloc.set_hysteresis(None, factor=3.0)
    assert alloc.hysteresis_for("r", "b") == 3 * 33.0 and alloc.hysteresis_factor == 3.0
    alloc.set_hysteresis(7.5)
    assert alloc.hysteresis_for("r", "b") == 7.5 and alloc.hysteresis_us == 7.5
    assert Allocator(index("r")).hysteresis_us == 0.0  # off unless asked for


def test_a_new_hysteresis_applies_to_holds_granted_or_renewed_after_it() -> None:
    alloc, shell = make()
    call(alloc, shell, "hi", "a", 0.0)
    shell.execute(alloc.finish("hi", "a", 1.0))
    assert alloc.next_deadline() == 1.0 + HOLD
    alloc.set_hysteresis(100.0)
    assert alloc.next_deadline() == 1.0 + HOLD  # the running hold ends when it was due
    shell.execute(alloc.start("hi", "a", 2.0))
    shell.execute(alloc.finish("hi", "a", 3.0))
    assert alloc.next_deadline() == 103.0


@pytest.mark.parametrize(
    ("kwargs", "value"),
    [
        ({"hysteresis_us": -1.0}, -1.0),
        ({"hysteresis_us": math.nan}, None),
        ({"hysteresis_factor": 0.0}, 0.0),
        ({"hysteresis_factor": -2.0}, -2.0),
        ({"hysteresis_factor": math.inf}, math.inf),
    ],
)
def test_bad_hysteresis_is_refused_naming_the_value(
    kwargs: dict[str, float], value: float | None
) -> None:
    name = next(iter(kwargs))
    with pytest.raises(AllocatorError, match=name) as raised:
        Allocator(index("r"), **kwargs)  # type: ignore[arg-type]
    if value is not None:
        assert raised.value.value == value
    alloc = Allocator(index("r"), hysteresis_us=4.0)
    with pytest.raises(AllocatorError, match=name):
        if name == "hysteresis_us":
            alloc.set_hysteresis(kwargs[name])
        else:
            alloc.set_hysteresis(None, factor=kwargs[name])
    assert (alloc.hysteresis_us, alloc.hysteresis_factor) == (4.0, HYSTERESIS_FACTOR)


# -- properties -----------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    calls=st.lists(
        st.tuples(st.floats(0.1, 50.0), st.floats(0.0, HOLD * 0.99)), min_size=1, max_size=30
    ),
    lows=st.lists(st.sampled_from(["mid", "mid2"]), max_size=2, unique=True),
)
def test_a_stream_with_gaps_shorter_than_the_hold_never_loses_the_region(
    calls: list[tuple[float, float]], lows: list[str]
) -> None:
    """hi preempts lo, then computes ``calls`` (duration, gap) back to back, every gap shorter
    than the hold, while lower tenants ask for the region in between: one preemption, one
    reconfiguration, hi keeps r throughout; the hold then runs out and r goes to the first
    waiter of the highest priority."""
    alloc, shell = make()
    lo_runs_then_hi_preempts(alloc, shell)  # lo's request waits now
    now = 3.0
    for i, (duration, gap) in enumerate(calls):
        now += gap
        if i < len(lows):
            shell.run(alloc.request(lows[i], "b", now))
        shell.execute(alloc.start("hi", "a", now))
        now += duration
        shell.execute(alloc.finish("hi", "a", now))
        assert alloc.connected_region("hi", "a") == "r"
    stats = alloc.statistics()
    assert (stats.preemptions, stats.reconfigurations) == (1, 2)  # lo's load, then hi's
    out = alloc.advance(now + HOLD)
    shell.execute(out)
    first = max(["lo", *lows], key=lambda t: alloc.tenant(t).priority)
    assert [s.tenant for s in solutions(out)] == [first]
    assert shell.violations == []


_TENANTS = ("lo", "mid", "mid2", "hi", "rt")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(_TENANTS), st.sampled_from(["a", "b"]), st.floats(0.0, HOLD)),
        max_size=60,
    ),
    hysteresis=st.sampled_from([None, 0.0, 7.0]),
)
def test_a_held_region_goes_to_a_lower_or_equal_priority_only_after_its_hold(
    ops: list[tuple[str, str, float]], hysteresis: float | None
) -> None:
    """Random tenants step their devices (request, start or finish) at random times: whenever
    a region held for a client that used it is given to another request, that request has a
    higher priority or the hold had run out; the shell never sees an illegal action."""
    alloc, shell = make("r", "r2", hysteresis_us=hysteresis)
    now = 0.0
    running: set[tuple[str, str]] = set()
    for tenant, device, dt in ops:
        now += dt
        held = {
            r.name: (r.client, r.client_priority, r.hold_until)
            for r in alloc.statistics().regions
            if r.state == "Hold"
        }
        kept = {name for name in held if alloc._slot(name).kept}  # the kept flag: no public view
        state = alloc.device_state(tenant, device)
        try:
            if (tenant, device) in running:
                out = alloc.finish(tenant, device, now)
                running.discard((tenant, device))
            elif state is DeviceState.CONNECTED:
                out = alloc.start(tenant, device, now)
                running.add((tenant, device))
            elif state is DeviceState.DISCONNECTED:
                sol = alloc.request(tenant, device, now)
                out = [sol, *sol.actions]
            else:
                out = alloc.advance(now)
        except DeviceStateError:  # its hold ran out and the region went to a waiter
            out = alloc.advance(now)
        for sol in solutions(out):
            region = sol.region
            if region in kept and sol.victim is not None:
                client, prio, until = held[region]
                assert client == "/".join(sol.victim)
                assert prio is not None and until is not None
                assert sol.priority > prio or now >= until, (sol, held[region], now)
        shell.execute([a for a in out if not isinstance(a, Solution)])
        shell.settle(now)
        running &= {
            (t, d)
            for t in _TENANTS
            for d in ("a", "b")
            if alloc.device_state(t, d) is DeviceState.CONNECTED
        }
    assert shell.violations == []
