"""Built-in controllers on synthetic snapshots: each decides from the snapshot alone."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from juggle.core.controllers import (
    AdaptiveController,
    CostAwareController,
    DistributionController,
    FifoController,
    ForegroundController,
    JuggleAction,
    ManualController,
    OracleController,
    OraclePhase,
    RegionStats,
    ServiceStats,
    StaticController,
    StatsSnapshot,
    load_controller,
    plan_phases,
)
from juggle.errors import ControllerError


def svc(
    sid: int,
    *,
    calls: int = 0,
    share: float = 0.0,
    rate: float = 0.0,
    hw: bool = False,
    capable: bool = True,
    occupancy: float | None = None,
    length: int | None = None,
    gain: float | None = None,
    consumers: dict[str, int] | None = None,
) -> ServiceStats:
    return ServiceStats(
        service_id=sid,
        interface=f"svc{sid}",
        tier="hardware" if hw else "software",
        region="prr0" if hw else None,
        calls=calls,
        rate_per_s=rate,
        share=share,
        queue_occupancy=occupancy,
        queue_length=length,
        hardware_capable=capable,
        gain_us=gain,
        per_consumer=consumers or {},
    )


def snap(
    t: float,
    *services: ServiceStats,
    state: str = "Busy",
    foreground: str | None = None,
    reconfig_us: float | None = 2500.0,
) -> StatsSnapshot:
    held = next((s.service_id for s in services if s.tier == "hardware"), None)
    region = RegionStats("prr0", state, held, reconfig_us)
    return StatsSnapshot(t, tuple(services), (region,), foreground)


def only(actions: Sequence[JuggleAction]) -> JuggleAction:
    assert len(actions) == 1, actions
    return actions[0]


# -- static, manual ------------------------------------------------------------------------------


def test_static_holds_its_service_and_otherwise_stays_still() -> None:
    s = snap(0.0, svc(0, hw=False), svc(1, hw=True))
    assert StaticController().decide(s) == []
    action = only(StaticController(hold="svc0").decide(s))
    assert action.to_hardware == 0 and action.to_software == (1,)
    assert StaticController(hold=1).decide(s) == []


def test_manual_hands_over_each_request_once_in_order() -> None:
    manual = ManualController()
    manual.request(2, [1])
    manual.request(None, [2])
    s = snap(0.0, svc(1), svc(2))
    assert [(a.to_hardware, a.to_software) for a in manual.decide(s)] == [(2, (1,)), (None, (2,))]
    assert manual.decide(s) == [] and manual.pending == 0


@pytest.mark.parametrize(("hw", "sw"), [(None, []), (3, [3])])
def test_manual_refuses_juggles_that_do_nothing(hw: int | None, sw: list[int]) -> None:
    with pytest.raises(ControllerError):
        ManualController().request(hw, sw)


# -- distribution ----------------------------------------------------------------------------------


def test_distribution_juggles_in_the_service_whose_share_reaches_the_threshold() -> None:
    policy = DistributionController(threshold=0.5, window_s=1.0)
    policy.decide(snap(0.0, svc(0, calls=0, hw=True), svc(1, calls=0)))
    action = only(policy.decide(snap(0.5, svc(0, calls=40, hw=True), svc(1, calls=60))))
    assert action.to_hardware == 1 and action.to_software == (0,)
    assert "60%" in action.reason


def test_distribution_below_threshold_or_already_there_does_nothing() -> None:
    policy = DistributionController(threshold=0.7, window_s=1.0)
    policy.decide(snap(0.0, svc(0), svc(1)))
    assert policy.decide(snap(0.5, svc(0, calls=40, hw=True), svc(1, calls=60))) == []
    policy = DistributionController(threshold=0.5, window_s=1.0)
    policy.decide(snap(0.0, svc(0), svc(1)))
    assert policy.decide(snap(0.5, svc(0, calls=10), svc(1, calls=90, hw=True))) == []


def test_distribution_holds_fire_while_a_region_reconfigures() -> None:
    policy = DistributionController(window_s=1.0)
    policy.decide(snap(0.0, svc(0), svc(1)))
    assert policy.decide(snap(0.5, svc(0, calls=1), svc(1, calls=99), state="Reconfig")) == []


def test_distribution_ignores_services_without_hardware() -> None:
    policy = DistributionController(window_s=1.0)
    policy.decide(snap(0.0, svc(0), svc(1)))
    assert policy.decide(snap(0.5, svc(0, calls=5), svc(1, calls=95, capable=False))) == []


@pytest.mark.parametrize("threshold", [0.0, 1.5, -0.1])
def test_distribution_refuses_bad_threshold(threshold: float) -> None:
    with pytest.raises(ControllerError, match="threshold"):
        DistributionController(threshold=threshold)


# -- fifo ------------------------------------------------------------------------------------------


def router_fifo() -> FifoController:
    return FifoController(threshold=0.9, watch=("svc1", "svc2"), fallback="svc0", fallback_s=1e-3)


def test_fifo_juggles_in_the_service_whose_queue_is_full() -> None:
    policy = router_fifo()
    s = snap(
        0.0,
        svc(0, hw=True, occupancy=0.3),
        svc(1, occupancy=0.95),
        svc(2, occupancy=0.2),
    )
    action = only(policy.decide(s))
    assert action.to_hardware == 1 and action.to_software == (0,)


def test_fifo_brings_the_fallback_back_when_its_queue_keeps_growing() -> None:
    policy = router_fifo()
    rate = 1000.0
    policy.decide(snap(0.0, svc(0, rate=rate, length=10), svc(1, hw=True, occupancy=0.0)))
    growing = snap(0.002, svc(0, rate=rate, length=900), svc(1, hw=True, occupancy=0.0))
    assert only(policy.decide(growing)).to_hardware == 0


def test_fifo_leaves_a_draining_or_steady_fallback_alone() -> None:
    policy = router_fifo()
    policy.decide(snap(0.0, svc(0, rate=1e6, length=900), svc(1, hw=True, occupancy=0.0)))
    assert policy.decide(snap(0.002, svc(0, rate=1e6, length=400), svc(1, hw=True))) == []


def test_fifo_without_queues_does_nothing() -> None:
    assert FifoController().decide(snap(0.0, svc(0, share=1.0), svc(1))) == []


def test_fifo_refuses_low_above_threshold() -> None:
    with pytest.raises(ControllerError, match='"low"'):
        FifoController(threshold=0.5, low=0.6)


# -- foreground ------------------------------------------------------------------------------------


def test_foreground_gives_the_fabric_to_the_focused_apps_top_service() -> None:
    s = snap(
        0.0,
        svc(1, hw=True, consumers={"mail": 50}),
        svc(2, consumers={"music": 30, "mail": 1}),
        svc(3, consumers={"music": 40}, capable=False),
        foreground="music",
    )
    action = only(ForegroundController().decide(s))
    assert action.to_hardware == 2 and action.to_software == (1,)


def test_foreground_does_nothing_when_already_there_or_nothing_to_accelerate() -> None:
    fg = ForegroundController()
    assert fg.decide(snap(0.0, svc(1, hw=True, consumers={"mail": 5}), foreground="mail")) == []
    assert fg.decide(snap(0.0, svc(1, consumers={"mail": 5}), foreground="music")) == []
    assert (
        fg.decide(snap(0.0, svc(1, consumers={"mail": 5}, capable=False), foreground="mail")) == []
    )
    assert fg.decide(snap(0.0, svc(1, consumers={"mail": 5}), foreground=None)) == []


# -- cost-aware ------------------------------------------------------------------------------------


def test_cost_aware_accelerates_only_when_savings_beat_reconfiguration() -> None:
    # 1,000 calls/s saving 10 us each over 1 s = 10,000 us > 2,500 us of reconfiguration.
    worth = snap(0.0, svc(0, rate=1000, gain=10.0), svc(1, rate=10, gain=1.0, hw=True))
    assert only(CostAwareController(horizon_s=1.0).decide(worth)).to_hardware == 0
    # Over 0.1 s it saves 1,000 us: not worth 2,500 us.
    assert CostAwareController(horizon_s=0.1).decide(worth) == []


def test_cost_aware_counts_what_the_evicted_service_loses_and_unknown_gains() -> None:
    both_busy = snap(0.0, svc(0, rate=1000, gain=10.0), svc(1, rate=1000, gain=9.0, hw=True))
    assert CostAwareController(horizon_s=1.0).decide(both_busy) == []
    unknown = snap(0.0, svc(0, rate=1000, gain=None), svc(1))
    assert CostAwareController(horizon_s=1.0).decide(unknown) == []


def test_cost_aware_horizon_grows_with_how_long_the_mix_has_lasted() -> None:
    policy = CostAwareController(min_horizon_s=1e-3, max_horizon_s=1.0)
    first = snap(0.0, svc(0, calls=0, share=1.0, rate=1000, gain=10.0), svc(1, hw=True))
    assert policy.decide(first) == []
    later = snap(0.5, svc(0, calls=500, rate=1000, gain=10.0), svc(1, calls=0, hw=True))
    assert policy.horizon(later) == pytest.approx(0.5)
    assert only(policy.decide(later)).to_hardware == 0


# -- oracle ----------------------------------------------------------------------------------------


def cost(shares: object, held: int | None) -> float:
    assert isinstance(shares, dict)
    best = max(shares, key=lambda k: shares[k])
    return 1.0 if held == best else 2.0


def test_oracle_plans_for_long_phases_and_skips_short_spikes() -> None:
    phases = [
        OraclePhase(0, 1000, {0: 1.0, 1: 0.0}),
        OraclePhase(1000, 5000, {0: 0.0, 1: 1.0}),
        OraclePhase(6000, 100, {0: 1.0, 1: 0.0}),  # a spike: shorter than a reconfiguration
        OraclePhase(6100, 5000, {0: 0.0, 1: 1.0}),
    ]
    plan = plan_phases(phases, [0, 1], 0, cost, reconfig_us=400.0)
    assert plan == [(1000, 1)]


def test_oracle_juggles_when_the_calls_reach_the_plan() -> None:
    phases = [OraclePhase(0, 1000, {0: 1.0, 1: 0.0}), OraclePhase(1000, 5000, {0: 0.0, 1: 1.0})]
    oracle = OracleController(phases, cost, 400.0, start=0)
    assert oracle.decide(snap(0.0, svc(0, calls=900, hw=True), svc(1))) == []
    action = only(oracle.decide(snap(1.0, svc(0, calls=1000, hw=True), svc(1, calls=10))))
    assert action.to_hardware == 1 and action.to_software == (0,)


def test_oracle_without_the_future_is_refused() -> None:
    with pytest.raises(ControllerError, match="schedule"):
        load_controller("oracle")


# -- adaptive --------------------------------------------------------------------------------------


def feed(policy: AdaptiveController, dominants: list[int], per_tick: int = 100) -> list[str]:
    """Drive ``policy`` with ticks of 0.2 ms, ``per_tick`` calls each, mostly to a dominant."""
    calls = [0, 0]
    modes = []
    for i, d in enumerate(dominants):
        calls[d] += per_tick * 8 // 10
        calls[1 - d] += per_tick * 2 // 10
        rate = per_tick / 2e-4
        s = snap(
            i * 2e-4,
            svc(0, calls=calls[0], rate=rate * 0.5, hw=True, occupancy=0.0),
            svc(1, calls=calls[1], rate=rate * 0.5, occupancy=0.0),
        )
        policy.decide(s)
        modes.append(policy.mode)
    return modes


def test_adaptive_is_calm_on_stable_traffic_and_follows_the_distribution() -> None:
    policy = AdaptiveController(window_s=0.2e-3)
    modes = feed(policy, [0] * 50 + [1] * 200 + [0] * 200)
    assert set(modes) == {"calm"} and not policy.spikes


def test_adaptive_learns_spikes_and_switches_to_the_fifo_manager() -> None:
    policy = AdaptiveController(window_s=0.2e-3)
    # 2.5 ms reconfiguration at 500 k calls/s = 1,250 calls; spikes of 5 ticks = 500 calls.
    pattern = ([0] * 40 + [1] * 5) * 6
    modes = feed(policy, pattern)
    assert policy.spikes and modes[-1] == "spiky"
    t = len(pattern) * 2e-4
    full = snap(t, svc(0, calls=10**6, rate=5e5, hw=True, occupancy=0.0), svc(1, occupancy=1.0))
    policy.fifo = FifoController(threshold=0.9)
    assert only(policy.decide(full)).to_hardware == 1


@pytest.mark.parametrize(
    ("name", "options"),
    [("adaptive", {"fifo": {"bogus": 1}}), ("adaptive", {"memory_s": 0}), ("fifo", {"rise": 0})],
)
def test_bad_options_are_refused_by_name(name: str, options: dict[str, object]) -> None:
    with pytest.raises(ControllerError):
        load_controller(name, **options)
