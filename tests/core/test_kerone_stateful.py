"""A stateful hypothesis test of the allocator (issue 3, Acceptance).

Random requests, starts, completions, preemption stops, reconfiguration successes and
failures, repairs, releases and the passing of time (hold expiries) drive an allocator over
the zedboard's regions, through a LoopbackShell. After every step it checks: no region is held
by two tenants; a preemption only ever hits a lower priority (so equal priorities never preempt
each other) and never a real-time task; no request is lost; a preempted device's context comes
back bit-exact; the wait list is ordered by priority then FIFO and served in that order.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from juggle.core.actions import Solution, SolutionKind
from juggle.core.allocator import Allocator
from juggle.core.allocstats import AllocatorStats
from juggle.core.loopback import LoopbackShell
from juggle.core.regionfsm import RegionPhase
from juggle.core.taskindex import TaskIndex
from juggle.core.tenants import DeviceState
from juggle.errors import AllocatorError, DeviceStateError
from juggle.fabric.profiles import load_profile

ZED = TaskIndex.from_profile(load_profile("zedboard"))
TENANTS = {
    "rt": (True, 2),
    "rt2": (True, 2),
    "mid": (False, 1),
    "gp1": (False, 0),
    "gp2": (False, 0),
}
DEVICES = [d.name for d in ZED.devices]
KEYS = [(t, d) for t in TENANTS for d in DEVICES]
# requests lean towards the higher priorities so that preemption happens often
REQUESTS = KEYS + [k for k in KEYS if k[0] in ("rt", "rt2", "mid")]
SEATS = {d: {t.region for t in ZED.compatible(d)} for d in DEVICES}
Key = tuple[str, str]


class AllocatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.alloc = Allocator(ZED, priority_levels=3, hold_us=40.0)
        for name, (realtime, prio) in TENANTS.items():
            self.alloc.add_tenant(name, realtime=realtime, priority=None if realtime else prio)
        self.shell = LoopbackShell(self.alloc)
        self.now = 0.0
        assert self.alloc.advance(self.now) == []
        self.outstanding: set[Key] = set()  # requested (or preempted) work not yet connected
        self.running: set[Key] = set()
        self.ctx_at_stop: dict[Key, bytes] = {}
        self.counter = 0
        self.preempt_checks = 0

    # -- helpers -----------------------------------------------------------------------------

    def state(self, key: Key) -> DeviceState:
        return self.alloc.device_state(*key)

    def connected_not_running(self) -> list[Key]:
        return [
            k
            for k in KEYS
            if self.state(k) is DeviceState.CONNECTED
            and k not in self.running
            and self.alloc.region_state(self.alloc.connected_region(*k) or "")
            in (RegionPhase.HOLD, RegionPhase.IDLE)
        ]

    def step(
        self,
        call: object,
        *args: object,
        direct: Solution | None = None,
        before: AllocatorStats | None = None,
        **kw: object,
    ) -> None:
        """Run an allocator event with the checks that need the state before it."""
        before = before or self.alloc.statistics()
        first = len(self.shell.solutions)
        if direct is not None:
            self.shell.run(direct)
        else:
            self.shell.execute(call(*args, **kw))  # type: ignore[operator]
        self.check_new_solutions(before, self.shell.solutions[first:], direct)

    def check_new_solutions(
        self, before: AllocatorStats, new: list[Solution], direct: Solution | None
    ) -> None:
        regions = {r.name: r for r in before.regions}
        realtime = {t.name: t.realtime for t in before.tenants}
        waiting_before = {(w.tenant, w.device): w for w in before.waiting}
        waiting_after = {(w.tenant, w.device): w for w in self.alloc.waiting()}
        for sol in new:
            if sol.kind is SolutionKind.PREEMPT:
                victim = sol.victim
                assert victim is not None
                snap = regions[sol.region or ""]
                assert snap.client == f"{victim[0]}/{victim[1]}"
                assert snap.state in ("Busy", "Hold", "Idle"), snap  # Hold/Idle: just started
                assert victim in self.running, "preempted a task that was not running"
                assert snap.client_priority is not None
                assert snap.client_priority < sol.priority, "equal or higher priority preempted"
                assert not realtime[victim[0]], "a real-time task was preempted"
                self.preempt_checks += 1
            key = (sol.tenant, sol.device)
            if sol is direct or sol.kind is SolutionKind.UNAVAILABLE or key not in waiting_before:
                continue
            # a waiter was served: nobody better placed in line who fits is left waiting
            served = waiting_before[key]
            for other, w in waiting_after.items():
                if other in waiting_before and sol.region in SEATS[other[1]]:
                    assert (-w.priority, w.seq) > (-served.priority, served.seq), (other, key)

    # -- rules -------------------------------------------------------------------------------

    @rule(key=st.sampled_from(REQUESTS), lowered=st.booleans())
    def request(self, key: Key, lowered: bool) -> None:
        if self.state(key) is not DeviceState.DISCONNECTED:
            with_error = self.alloc.statistics()
            try:
                self.alloc.request(*key, self.now)
            except DeviceStateError:
                assert self.alloc.statistics() == with_error
                return
            raise AssertionError("a second request for a busy device was accepted")
        prio = self.alloc.tenant(key[0]).priority
        priority = max(0, prio - 1) if lowered else None
        before = self.alloc.statistics()
        solution = self.alloc.request(*key, self.now, priority=priority)
        self.outstanding.add(key)
        self.step(None, direct=solution, before=before)

    @rule(key=st.sampled_from(KEYS))
    def bad_request(self, key: Key) -> None:
        before = self.alloc.statistics()
        calls: list[Callable[[], object]] = [
            lambda: self.alloc.request("nobody", key[1], self.now),
            lambda: self.alloc.request(key[0], "fft4096", self.now),
            lambda: self.alloc.request(key[0], key[1], self.now, priority=3),
            lambda: self.alloc.request(key[0], key[1], self.now - 1.0),
        ]
        for call in calls:
            try:
                call()
            except AllocatorError:
                pass
            else:
                raise AssertionError("a bad request was accepted")
            assert self.alloc.statistics() == before

    @precondition(lambda self: bool(self.connected_not_running()))
    @rule(data=st.data())
    def start(self, data: st.DataObject) -> None:
        self.do_start(data.draw(st.sampled_from(self.connected_not_running())))

    def do_start(self, key: Key) -> None:
        region = self.alloc.connected_region(*key)
        assert region is not None
        if key in self.ctx_at_stop:  # resumed after a preemption: bit-exact context
            assert self.shell.live[region] == self.ctx_at_stop.pop(key)
        self.running.add(key)
        self.step(self.alloc.start, *key, self.now)

    @precondition(lambda self: bool(self.running))
    @rule(data=st.data(), payload=st.binary(min_size=1, max_size=16))
    def compute(self, data: st.DataObject, payload: bytes) -> None:
        self.do_compute(data.draw(st.sampled_from(sorted(self.running))), payload)

    def do_compute(self, key: Key, payload: bytes) -> None:
        """A running device changes its internal state."""
        region = self.alloc.connected_region(*key)
        assert region is not None
        self.counter += 1
        self.shell.live[region] = payload[:12] + self.counter.to_bytes(4, "little")

    @precondition(lambda self: bool(self.running))
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        self.do_finish(data.draw(st.sampled_from(sorted(self.running))))

    def do_finish(self, key: Key) -> None:
        region = self.alloc.connected_region(*key)
        assert region is not None
        self.shell.pending_stop.pop(region, None)  # finishing is the consistency point
        self.step(self.alloc.finish, *key, self.now)
        self.running.discard(key)

    @precondition(lambda self: bool(self.shell.pending_stop))
    @rule(data=st.data())
    def stop_at_consistency_point(self, data: st.DataObject) -> None:
        self.do_stop(data.draw(st.sampled_from(sorted(self.shell.pending_stop))))

    def do_stop(self, region: str) -> None:
        victim = self.shell.connected[region]
        assert victim in self.running
        self.ctx_at_stop[victim] = self.shell.live[region]
        del self.shell.pending_stop[region]
        self.step(self.alloc.stopped, region, self.now)
        self.running.discard(victim)
        self.outstanding.add(victim)  # the rest of its work is a request of its own

    @precondition(lambda self: bool(self.shell.pending_reconfig))
    @rule(data=st.data(), ok=st.sampled_from([True, True, True, False]))
    def reconfigured(self, data: st.DataObject, ok: bool) -> None:
        self.do_reconfigured(data.draw(st.sampled_from(sorted(self.shell.pending_reconfig))), ok)

    def do_reconfigured(self, region: str, ok: bool) -> None:
        del self.shell.pending_reconfig[region]
        self.step(self.alloc.reconfigured, region, self.now, ok=ok)

    @precondition(lambda self: bool(self.shell.pending_reconfig))
    @rule()
    def all_reconfigured(self) -> None:
        for region in sorted(self.shell.pending_reconfig):
            self.do_reconfigured(region, True)

    @precondition(lambda self: bool(self.connected_not_running()))
    @rule()
    def start_all(self) -> None:
        for key in self.connected_not_running():
            if key in self.connected_not_running():  # an earlier start may preempt it away
                self.do_start(key)

    @rule()
    def repair(self) -> None:
        for region in (r.name for r in ZED.regions):
            if self.alloc.region_state(region) is RegionPhase.ERROR:
                self.step(self.alloc.repair, region, self.now)
                return

    @rule(key=st.sampled_from(KEYS))
    def release(self, key: Key) -> None:
        if key in self.running or self.state(key) is DeviceState.PENDING:
            before = self.alloc.statistics()
            try:
                self.alloc.release(*key, self.now)
            except DeviceStateError:
                assert self.alloc.statistics() == before
                return
            raise AssertionError("released a running or pending device")
        self.step(self.alloc.release, *key, self.now)
        self.outstanding.discard(key)
        self.ctx_at_stop.pop(key, None)

    @rule(
        tenant=st.sampled_from(["mid", "gp1", "gp2"]),
        priority=st.integers(0, 1),
        realtime=st.booleans(),
    )
    def set_tenant(self, tenant: str, priority: int, realtime: bool) -> None:
        """A reloaded policy changes a tenant's class or priority where it stands: whatever
        it preempts now runs below the preempting request and is no real-time task."""
        first = len(self.shell.solutions)
        out = self.alloc.set_tenant(
            tenant, self.now, realtime=realtime, priority=None if realtime else priority
        )
        regions = {r.name: r for r in self.alloc.statistics().regions}  # new priorities
        self.shell.execute(out)
        for sol in self.shell.solutions[first:]:
            if sol.kind is SolutionKind.PREEMPT:
                victim = sol.victim
                assert victim is not None and victim in self.running
                assert not self.alloc.tenant(victim[0]).realtime
                held = regions[sol.region or ""]
                assert held.client == f"{victim[0]}/{victim[1]}"
                assert held.client_priority is not None and held.client_priority < sol.priority
                self.preempt_checks += 1

    @rule(dt=st.sampled_from([0.0, 1.0, 10.0, 39.0, 40.0, 100.0]))
    def tick(self, dt: float) -> None:
        self.now += dt
        self.step(self.alloc.advance, self.now)

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def one_client_per_region(self) -> None:
        stats = self.alloc.statistics()
        owners: dict[str, str] = {}
        for tenant in stats.tenants:
            for dev in tenant.devices:
                if dev.state == "connected":
                    assert dev.region is not None
                    assert dev.region not in owners, (dev.region, owners)
                    owners[dev.region] = f"{tenant.name}/{dev.device}"
        for region in stats.regions:
            assert region.client == owners.get(region.name)
            if region.client is not None:
                assert region.state not in ("Reconfig", "Error"), region
        held = {r: f"{t}/{d}" for r, (t, d) in self.shell.connected.items()}
        assert held == owners
        assert self.shell.violations == []

    @invariant()
    def running_tasks_hold_busy_regions(self) -> None:
        for key in self.running:
            region = self.alloc.connected_region(*key)
            assert region is not None
            assert self.alloc.region_state(region) in (RegionPhase.BUSY, RegionPhase.PREEMPT)

    @invariant()
    def no_request_is_lost(self) -> None:
        for key in list(self.outstanding):
            state = self.state(key)
            if state is DeviceState.CONNECTED:
                self.outstanding.discard(key)
            else:
                assert state in (DeviceState.WAITING, DeviceState.PENDING), (key, state)
        waiting = {(w.tenant, w.device) for w in self.alloc.waiting()}
        assert waiting == {k for k in KEYS if self.state(k) is DeviceState.WAITING}
        assert waiting <= self.outstanding

    @invariant()
    def each_request_waits_in_the_queue_of_its_priority(self) -> None:
        """White-box: the per-device, per-priority queues the allocator serves from agree
        with each request's priority and with the per-priority counts."""
        counts = [0] * len(self.alloc._waiting_at)
        for queues in self.alloc._queues:
            for prio, q in enumerate(queues):
                for vd in q:
                    assert vd.priority == prio, (vd, prio)
                    counts[prio] += 1
        assert counts == list(self.alloc._waiting_at)

    @invariant()
    def wait_list_is_priority_then_fifo(self) -> None:
        order = [(-w.priority, w.seq) for w in self.alloc.waiting()]
        assert order == sorted(order)
        assert len({seq for _, seq in order}) == len(order)


AllocatorMachine.TestCase.settings = settings(
    max_examples=120,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestAllocatorMachine = AllocatorMachine.TestCase


def test_the_machine_reaches_every_interesting_state() -> None:
    """A fixed walk through the machine's rules, so a regression cannot hide in sampling."""
    machine = AllocatorMachine()
    machine.bad_request(("gp1", "fft1024"))
    _invariants(machine)
    machine.request(("gp1", "fft1024"), False)
    _invariants(machine)
    machine.do_reconfigured("prr3", True)
    _invariants(machine)
    machine.do_start(("gp1", "fft1024"))
    _invariants(machine)
    machine.do_compute(("gp1", "fft1024"), b"abc")
    _invariants(machine)
    machine.request(("rt", "fft1024"), False)
    _invariants(machine)
    machine.do_stop("prr3")  # same design: Preempt without Reconfig
    _invariants(machine)
    machine.tick(0.0)
    _invariants(machine)
    assert machine.preempt_checks == 1
    assert ("gp1", "fft1024") in machine.ctx_at_stop
    assert machine.alloc.device_state("gp1", "fft1024") is DeviceState.WAITING
    machine.do_start(("rt", "fft1024"))
    _invariants(machine)
    machine.do_finish(("rt", "fft1024"))  # prr3 frees: gp1 resumes there
    _invariants(machine)
    assert machine.alloc.connected_region("gp1", "fft1024") == "prr3"
    machine.do_start(("gp1", "fft1024"))  # checks the context came back bit-exact
    _invariants(machine)
    assert ("gp1", "fft1024") not in machine.ctx_at_stop


def _invariants(machine: AllocatorMachine) -> None:
    machine.one_client_per_region()
    machine.each_request_waits_in_the_queue_of_its_priority()
    machine.running_tasks_hold_busy_regions()
    machine.no_request_is_lost()
    machine.wait_list_is_priority_then_fifo()
