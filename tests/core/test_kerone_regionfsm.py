"""The region state machine (Ker-ONE Fig 7 + Error): every pair of states, legal or not."""

from __future__ import annotations

import itertools

import pytest

from juggle.core.regionfsm import TRANSITIONS, RegionMachine, RegionPhase, is_legal
from juggle.errors import AllocatorError, IllegalTransitionError

S = RegionPhase

EXPECTED = {
    (S.IDLE, S.HOLD),
    (S.IDLE, S.SWITCH),
    (S.IDLE, S.RECONFIG),
    (S.IDLE, S.BUSY),
    (S.HOLD, S.BUSY),
    (S.HOLD, S.IDLE),
    (S.HOLD, S.SWITCH),  # a higher priority takes a held region
    (S.BUSY, S.IDLE),
    (S.BUSY, S.HOLD),  # a call ends inside its tenant's hold
    (S.BUSY, S.PREEMPT),
    (S.PREEMPT, S.SWITCH),
    (S.SWITCH, S.HOLD),
    (S.SWITCH, S.RECONFIG),
    (S.RECONFIG, S.HOLD),
    (S.RECONFIG, S.ERROR),
    (S.BUSY, S.ERROR),
    (S.IDLE, S.ERROR),
    (S.HOLD, S.ERROR),
    (S.ERROR, S.IDLE),
}


def test_the_table_is_exactly_fig7_plus_error() -> None:
    assert set(TRANSITIONS) == EXPECTED
    assert all(TRANSITIONS[pair] for pair in EXPECTED)  # every transition names its event
    assert [s.value for s in S] == [
        "Idle",
        "Busy",
        "Preempt",
        "Switch",
        "Reconfig",
        "Hold",
        "Error",
    ]


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(S, S)))
def test_every_pair(src: RegionPhase, dst: RegionPhase) -> None:
    machine = RegionMachine("prr", src)
    if (src, dst) in EXPECTED:
        assert is_legal(src, dst)
        machine.to(dst)
        assert machine.state is dst
        assert machine.entered[dst.ordinal] == 1
    else:
        assert not is_legal(src, dst)
        with pytest.raises(IllegalTransitionError) as info:
            machine.to(dst)
        assert isinstance(info.value, AllocatorError)
        assert info.value.region == "prr"
        assert src.value in str(info.value) and dst.value in str(info.value)
        assert machine.state is src  # nothing changed
        assert sum(machine.entered) == 0


def test_every_state_is_reachable_from_idle_and_returns_to_idle() -> None:
    reach = {S.IDLE}
    frontier = [S.IDLE]
    while frontier:
        state = frontier.pop()
        for nxt in state.successors:
            if nxt not in reach:
                reach.add(nxt)
                frontier.append(nxt)
    assert reach == set(S)
    # a full preemption with reconfiguration, back to Idle
    machine = RegionMachine("prr3")
    for state in (S.HOLD, S.BUSY, S.PREEMPT, S.SWITCH, S.RECONFIG, S.HOLD, S.IDLE):
        machine.to(state)
    assert machine.state is S.IDLE
    assert "prr3" in repr(machine) and "Idle" in repr(machine)
