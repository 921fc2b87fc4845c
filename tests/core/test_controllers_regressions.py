"""Regression examples for the ``foreground`` controller: it juggles the focused application's
MOST-called hardware-capable service into the fabric (ties: the lowest service id).

The snapshots are built so that picking the least-called service, the first or last one
listed, the one with the most calls overall (or the highest rate or share) or the highest id
on a tie would each give a different answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from juggle.core.controllers import (
    ForegroundController,
    JuggleAction,
    RegionStats,
    ServiceStats,
    StatsSnapshot,
    load_controller,
)
from juggle.core.controllers import foreground as foreground_module


def service(
    sid: int,
    consumers: Mapping[str, int],
    *,
    hw: bool = False,
    capable: bool = True,
    calls: int | None = None,
    rate: float = 0.0,
    share: float = 0.0,
) -> ServiceStats:
    """A service; ``calls`` defaults to the sum over its consumers."""
    return ServiceStats(
        service_id=sid,
        interface=f"svc{sid}",
        tier="hardware" if hw else "software",
        region="prr0" if hw else None,
        calls=sum(consumers.values()) if calls is None else calls,
        rate_per_s=rate,
        share=share,
        hardware_capable=capable,
        per_consumer=dict(consumers),
    )


def snapshot(*services: ServiceStats, foreground: str | None, state: str = "Busy") -> StatsSnapshot:
    held = next((s.service_id for s in services if s.tier == "hardware"), None)
    return StatsSnapshot(1.0, services, (RegionStats("prr0", state, held, 2500.0),), foreground)


def decide(snap: StatsSnapshot) -> Sequence[JuggleAction]:
    return ForegroundController().decide(snap)


def juggled_in(snap: StatsSnapshot) -> int | None:
    """The service the controller puts into hardware (None: it does nothing)."""
    actions = decide(snap)
    assert len(actions) <= 1, actions
    return actions[0].to_hardware if actions else None


def test_the_most_called_service_of_the_focused_app_goes_to_hardware() -> None:
    # music's calls: 7 -> 5, 2 -> 40, 9 -> 12, 4 -> 1; the top one sits in the middle
    snap = snapshot(
        service(7, {"music": 5}),
        service(2, {"music": 40}),
        service(9, {"music": 12}),
        service(4, {"music": 1}),
        service(1, {"mail": 3}, hw=True),
        foreground="music",
    )
    (action,) = decide(snap)
    assert action.to_hardware == 2  # the least-called (4), first (7) or last (4) would differ
    assert action.to_software == (1,)
    assert "music" in action.reason
    target = foreground_module.focused_service(snap)
    assert target is not None and target.service_id == 2


def test_ascending_and_descending_order_disagree_and_the_descending_one_wins() -> None:
    """Listed in ascending order of calls, then in descending order: the answer is the same
    service both times, the most-called one."""
    counts = {11: 3, 12: 30, 13: 300}
    ascending = [service(sid, {"game": n}) for sid, n in sorted(counts.items())]
    for services in (ascending, ascending[::-1]):
        assert juggled_in(snapshot(*services, foreground="game")) == 13


def test_calls_are_counted_for_the_focused_app_not_overall() -> None:
    """Service 5 is the busiest overall (calls, rate, share) but mostly for mail; with music
    in focus, service 6 wins; with mail in focus, service 5 does."""
    busy_for_mail = service(5, {"mail": 1000, "music": 2}, rate=900.0, share=0.9)
    music_top = service(6, {"music": 20, "mail": 1}, rate=10.0, share=0.05)
    music_mid = service(8, {"music": 9}, rate=50.0, share=0.05)
    assert juggled_in(snapshot(busy_for_mail, music_top, music_mid, foreground="music")) == 6
    assert juggled_in(snapshot(busy_for_mail, music_top, music_mid, foreground="mail")) == 5
    assert juggled_in(snapshot(busy_for_mail, music_top, music_mid, foreground="video")) is None


def test_a_tie_at_the_top_goes_to_the_lowest_id_in_any_listing_order() -> None:
    top_a = service(8, {"app": 50})
    top_b = service(3, {"app": 50})
    low_a = service(1, {"app": 2})  # a tie at the bottom, with lower ids, must not matter
    low_b = service(2, {"app": 2})
    for services in (
        (top_a, top_b, low_a, low_b),
        (top_b, top_a, low_b, low_a),
        (low_a, low_b, top_a, top_b),
    ):
        assert juggled_in(snapshot(*services, foreground="app")) == 3


def test_the_most_called_service_without_hardware_is_skipped_for_the_next_one() -> None:
    snap = snapshot(
        service(1, {"app": 100}, capable=False),
        service(2, {"app": 60}),
        service(3, {"app": 4}),
        foreground="app",
    )
    assert juggled_in(snap) == 2


def test_nothing_happens_when_the_most_called_service_is_already_in_hardware() -> None:
    """A least-called pick would juggle service 3 in and throw the top service out."""
    snap = snapshot(
        service(1, {"app": 100}, hw=True),
        service(2, {"app": 60}),
        service(3, {"app": 4}),
        foreground="app",
    )
    assert decide(snap) == []


def test_a_less_called_service_in_hardware_is_evicted_for_the_top_one() -> None:
    snap = snapshot(
        service(1, {"app": 4}, hw=True),
        service(2, {"app": 60}),
        service(3, {"app": 100}),
        foreground="app",
    )
    (action,) = decide(snap)
    assert (action.to_hardware, action.to_software) == (3, (1,))


def test_services_the_focused_app_never_called_are_ignored() -> None:
    """Services the app did not call (count 0 or absent) are no candidates, even if nothing
    else is left; a pick by ascending count would take one of them."""
    snap = snapshot(
        service(1, {"app": 0, "other": 500}),
        service(2, {"other": 400}),
        service(3, {"app": 7}),
        foreground="app",
    )
    assert juggled_in(snap) == 3
    only_unused = snapshot(service(1, {"app": 0}), service(2, {"x": 5}), foreground="app")
    assert decide(only_unused) == []


def test_the_controller_waits_while_a_region_is_reconfiguring() -> None:
    snap = snapshot(
        service(1, {"app": 4}, hw=True),
        service(2, {"app": 60}),
        foreground="app",
        state="Reconfig",
    )
    assert decide(snap) == []
    assert juggled_in(snapshot(*snap.services, foreground="app")) == 2


@pytest.mark.parametrize("listing", ["ascending", "descending"])
def test_the_registered_foreground_controller_picks_the_most_called(listing: str) -> None:
    controller = load_controller("foreground")
    services = [service(sid, {"app": sid * 10}) for sid in (1, 2, 3, 4)]
    if listing == "descending":
        services.reverse()
    (action,) = controller.decide(snapshot(*services, foreground="app"))
    assert action.to_hardware == 4
