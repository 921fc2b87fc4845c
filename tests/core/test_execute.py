"""The one executor of allocator actions: dispatch, order, count, and unknown values."""

from __future__ import annotations

import typing
from collections.abc import Iterator
from typing import Any

import pytest
import simpy

from juggle.core.actions import (
    Action,
    Connect,
    Disconnect,
    Reconfigure,
    RestoreContext,
    SaveContext,
    Signal,
    Solution,
    StopAtConsistencyPoint,
)
from juggle.core.allocator import Allocator
from juggle.core.execute import Operations, execute
from juggle.core.loopback import LoopbackShell
from juggle.core.taskindex import DeviceSpec, RegionSpec, TaskDescriptor, TaskIndex
from juggle.core.tenants import DeviceInterface, ProgrammingModel, SignalKind
from juggle.errors import AllocatorError, UnknownActionError
from juggle.fabric.profiles import load_profile
from juggle.hwthreads import AllocatorSlots
from juggle.simulate.ofdm.shell import OfdmFabric

ZED = TaskIndex.from_profile(load_profile("zedboard"))


class Recorder:
    """A fake table of operations that only records which operation got which action."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Action]] = []

    def reconfigure(self, action: Reconfigure) -> None:
        self.calls.append(("reconfigure", action))

    def connect(self, action: Connect) -> None:
        self.calls.append(("connect", action))

    def disconnect(self, action: Disconnect) -> None:
        self.calls.append(("disconnect", action))

    def save_context(self, action: SaveContext) -> None:
        self.calls.append(("save_context", action))

    def restore_context(self, action: RestoreContext) -> None:
        self.calls.append(("restore_context", action))

    def stop_at_consistency_point(self, action: StopAtConsistencyPoint) -> None:
        self.calls.append(("stop_at_consistency_point", action))

    def signal(self, action: Signal) -> None:
        self.calls.append(("signal", action))

    def solution(self, action: Solution) -> None:
        self.calls.append(("solution", action))


class Bogus:
    """Not an action, though it looks like one."""

    region = "prr1"

    def __repr__(self) -> str:
        return "<Bogus action>"


def zed_allocator() -> Allocator:
    alloc = Allocator(ZED, priority_levels=2)
    alloc.add_tenant("gp", model=ProgrammingModel.AWARE)
    return alloc


def one_of_each() -> list[tuple[str, Action]]:
    """One action of every type, paired with the operation that must carry it out."""
    interface = DeviceInterface("gp", "fft512", 64)
    solution = zed_allocator().request("gp", "fft512", 0.0)
    return [
        ("reconfigure", Reconfigure("prr2", "fft512", "fft512.bit", 4096, 810.0)),
        ("connect", Connect("gp", "fft512", "prr2")),
        ("disconnect", Disconnect("gp", "fft512", "prr2")),
        ("save_context", SaveContext("gp", "fft512", "prr2", interface)),
        ("restore_context", RestoreContext("gp", "fft512", "prr2", interface)),
        ("stop_at_consistency_point", StopAtConsistencyPoint("prr2", "gp", "fft512")),
        ("signal", Signal("gp", "fft512", SignalKind.READY, ProgrammingModel.AWARE)),
        ("solution", solution),
    ]


def test_the_samples_cover_every_action_type() -> None:
    assert {type(a) for _, a in one_of_each()} == set(typing.get_args(Action))


def test_operations_has_exactly_one_operation_per_action_type() -> None:
    operations = {name for name in vars(Operations) if not name.startswith("_")}
    assert operations == {name for name, _ in one_of_each()}
    for name in operations:
        assert callable(getattr(Recorder(), name)), name


@pytest.mark.parametrize(("operation", "action"), one_of_each(), ids=[n for n, _ in one_of_each()])
def test_every_action_reaches_its_operation(operation: str, action: Action) -> None:
    ops = Recorder()
    assert execute(ops, [action]) == 1
    assert ops.calls == [(operation, action)]
    assert ops.calls[0][1] is action


def test_a_solution_is_dispatched_to_solution_and_its_actions_are_not_run() -> None:
    solution = zed_allocator().request("gp", "fft512", 0.0)
    assert solution.actions  # it carries actions, which execute must not run by itself
    ops = Recorder()
    assert execute(ops, [solution]) == 1
    assert ops.calls == [("solution", solution)]


def test_order_is_preserved_and_the_count_returned() -> None:
    pairs = one_of_each()
    actions = [a for _, a in reversed(pairs)] + [a for _, a in pairs]
    ops = Recorder()
    assert execute(ops, actions) == 2 * len(pairs)
    assert [a for _, a in ops.calls] == actions
    assert execute(ops, []) == 0


def test_actions_are_read_lazily_one_at_a_time() -> None:
    ops = Recorder()
    pairs = one_of_each()

    def feed() -> Iterator[Action]:
        for i, (_, action) in enumerate(pairs):
            assert len(ops.calls) == i  # the previous action ran before this one is read
            yield action

    assert execute(ops, feed()) == len(pairs)


@pytest.mark.parametrize("value", ["stop", 42, None, Bogus(), SignalKind.READY])
def test_a_value_that_is_no_action_raises_naming_it(value: object) -> None:
    ops = Recorder()
    with pytest.raises(UnknownActionError) as info:
        execute(ops, [value])  # type: ignore[list-item]
    message = str(info.value)
    assert repr(value) in message
    assert type(value).__qualname__ in message
    assert info.value.value is not None and info.value.value.endswith(type(value).__qualname__)
    assert isinstance(info.value, AllocatorError)
    assert ops.calls == []


def test_actions_before_an_unknown_one_ran_and_none_after() -> None:
    first, last = one_of_each()[1][1], one_of_each()[2][1]
    ops = Recorder()
    with pytest.raises(UnknownActionError, match="Bogus"):
        execute(ops, [first, Bogus(), last])  # type: ignore[list-item]
    assert ops.calls == [("connect", first)]


# -- the shells --------------------------------------------------------------------------------


def test_loopback_shell_rejects_an_unknown_action() -> None:
    shell = LoopbackShell(zed_allocator())
    with pytest.raises(UnknownActionError, match="<Bogus action>"):
        shell.execute([Bogus()])  # type: ignore[list-item]
    with pytest.raises(UnknownActionError, match="'stop'"):
        shell.execute(["stop"])  # type: ignore[list-item]
    assert shell.pending_stop == {}  # it used to be taken for a stop
    assert sum(shell.calls.values()) == 0


def test_loopback_shell_counts_each_action_by_type() -> None:
    alloc = zed_allocator()
    shell = LoopbackShell(alloc)
    shell.run(alloc.request("gp", "fft512", 0.0))
    shell.settle(1000.0)
    assert shell.calls == {
        "Reconfigure": 1,
        "Signal": 2,
        "RestoreContext": 1,
        "Connect": 1,
    }
    assert shell.connected == {"prr2": ("gp", "fft512")}
    assert shell.violations == []


def test_ofdm_fabric_rejects_an_unknown_action() -> None:
    fabric = OfdmFabric(simpy.Environment(), zed_allocator())
    with pytest.raises(UnknownActionError, match="<Bogus action>"):
        fabric.call(lambda: [Bogus()])
    with pytest.raises(UnknownActionError, match="'stop'"):
        fabric.call(lambda: ["stop"])
    assert fabric.stop_flag == dict.fromkeys(fabric.stop_flag, False)


def small_allocator() -> Allocator:
    index = TaskIndex(
        [RegionSpec("prr0", 1000)],
        [DeviceSpec("worker", 10.0, 5.0)],
        [TaskDescriptor("worker", "prr0", "worker.bit", 4096, 40.0)],
    )
    allocator = Allocator(index, priority_levels=2)
    allocator.add_tenant("low", priority=0)
    return allocator


class RecordingSlots(AllocatorSlots):
    """AllocatorSlots that also records the order in which its operations ran."""

    def __init__(self, allocator: Allocator) -> None:
        super().__init__(allocator)
        self.seen: list[str] = []

    def reconfigure(self, action: Reconfigure) -> None:
        self.seen.append("Reconfigure")
        super().reconfigure(action)

    def connect(self, action: Connect) -> None:
        self.seen.append("Connect")

    def restore_context(self, action: RestoreContext) -> None:
        self.seen.append("RestoreContext")

    def signal(self, action: Signal) -> None:
        self.seen.append(f"Signal {action.signal.value}")


def test_allocator_slots_run_a_reconfiguration_s_actions_after_the_pending_ones() -> None:
    shell = RecordingSlots(small_allocator())
    slot = shell.for_tenant("low").acquire(None, "worker")
    assert slot is not None and slot.name == "prr0"
    # the request's Reconfigure and WAIT first, then what the completed reconfiguration brings
    assert shell.seen == ["Reconfigure", "Signal wait", "RestoreContext", "Connect", "Signal ready"]
    stats = shell.statistics()
    assert (stats.actions, stats.reconfigurations, stats.assigned) == (5, 1, 1)
    assert stats.reconfig_us_modeled == pytest.approx(40.0)


def test_allocator_slots_reject_an_unknown_action(monkeypatch: pytest.MonkeyPatch) -> None:
    allocator = small_allocator()
    shell = AllocatorSlots(allocator)
    real = allocator.reconfigured

    def reconfigured(*args: Any, **kwargs: Any) -> list[object]:
        return [*real(*args, **kwargs), "stop"]

    monkeypatch.setattr(allocator, "reconfigured", reconfigured)
    with pytest.raises(UnknownActionError, match="'stop'"):
        shell.for_tenant("low").acquire(None, "worker")
    assert shell.statistics().reconfigurations == 1
    assert shell.for_tenant("low").acquire(None, "worker") is not None  # the lock was freed
