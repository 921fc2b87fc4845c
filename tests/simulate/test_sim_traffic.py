"""Edge-router traffic: seeded, reproducible, with the stability, fluctuation and spikes asked
for."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juggle.errors import ConfigurationError
from juggle.simulate.router.traffic import FlowMix, TrafficSpec, canonical_mixes, generate_trace


def spec(**changes: object) -> TrafficSpec:
    base: dict[str, object] = {
        "duration_s": 0.1,
        "stability_s": 0.02,
        "line_rate_pps": 2e5,
        "mixes": canonical_mixes(),
    }
    base.update(changes)
    return TrafficSpec(**base)  # type: ignore[arg-type]


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    a, b, c = (generate_trace(spec(), s) for s in (7, 7, 8))
    assert np.array_equal(a.flows, b.flows) and a.segments == b.segments
    assert not np.array_equal(a.flows, c.flows)


def test_periods_change_mix_and_shares_stay_near_the_mix() -> None:
    trace = generate_trace(spec(duration_s=0.2, fluctuation=0.05), 3)
    stable = [s for s in trace.segments if not s.spike]
    assert len(stable) == 10
    assert all(a.mix != b.mix for a, b in itertools.pairwise(stable))
    for seg in stable:
        flows = trace.flows[seg.first : seg.first + seg.count]
        dominant = np.bincount(flows, minlength=3) / seg.count
        assert dominant[seg.mix.dominant] == pytest.approx(0.6, abs=0.06)


def test_spikes_cut_into_every_period() -> None:
    trace = generate_trace(spec(spikes_per_period=2, spike_s=2e-3), 1)
    spikes = [s for s in trace.segments if s.spike]
    assert len(spikes) == 2 * 5
    assert all(s.end_s - s.start_s == pytest.approx(2e-3) for s in spikes)
    assert all(s.count == pytest.approx(400, abs=2) for s in spikes)


def test_pace_sets_packets_per_interval_and_arrival_times() -> None:
    trace = generate_trace(spec(), 2, pace=lambda shares: 1e5 + 4e5 * shares[0])
    forward_heavy = [s for s in trace.segments if s.mix.dominant == 0]
    other = [s for s in trace.segments if s.mix.dominant != 0]
    rate = {id(s): s.count / (s.end_s - s.start_s) for s in trace.segments}
    assert min(rate[id(s)] for s in forward_heavy) > max(rate[id(s)] for s in other)
    assert np.all(np.diff(trace.arrival_us) >= 0)
    assert trace.duration_us == pytest.approx(0.1e6, rel=0.01)


@settings(max_examples=25, deadline=None)
@given(
    fluctuation=st.floats(0.0, 0.2),
    seed=st.integers(0, 2**32 - 1),
    spikes=st.integers(0, 3),
)
def test_any_valid_spec_gives_a_consistent_trace(
    fluctuation: float, seed: int, spikes: int
) -> None:
    trace = generate_trace(spec(fluctuation=fluctuation, spikes_per_period=spikes), seed)
    assert trace.packets == sum(s.count for s in trace.segments)
    firsts = [s.first for s in trace.segments]
    assert firsts == sorted(firsts) and firsts[0] == 0
    assert set(np.unique(trace.flows)) <= {0, 1, 2}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"duration_s": 0}, "duration_s"),
        ({"mixes": (FlowMix.percent(1, 1),)}, "mixes"),
        ({"fluctuation": 0.7}, "fluctuation"),
        ({"spikes_per_period": 20, "spike_s": 2e-3}, "spikes"),
    ],
)
def test_bad_specs_are_refused_by_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigurationError, match=field):
        generate_trace(spec(**changes), 1)


def test_flow_mix_checks_its_shares() -> None:
    assert FlowMix.percent(60, 20, 20).label() == "60/20/20"
    with pytest.raises(ConfigurationError, match="sum to 1"):
        FlowMix((0.5, 0.2))
