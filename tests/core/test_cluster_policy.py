"""The cluster placement policies (``juggle.core.cluster``) on synthetic node views: what each
places, its hysteresis, its refusals, and (hypothesis) that every decision is valid."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juggle.core.cluster import (
    ClusterPlacement,
    ClusterPolicy,
    NodeView,
    PerBoardPlacement,
    Placement,
    RegionView,
    ServiceView,
    StaticPlacement,
    apply_placements,
)
from juggle.errors import ControllerError


def node(
    name: str,
    held: Sequence[str | None] = (None, None),
    rates: dict[str, float] | None = None,
    *,
    benefit: float = 100.0,
    hw_us: float | None = None,
    alive: bool = True,
) -> NodeView:
    """A node with one region per entry of ``held`` and services called at ``rates``."""
    regions = tuple(RegionView(f"rp{i}", key) for i, key in enumerate(held))
    services = tuple(
        ServiceView(key, rate, benefit, True, hw_us) for key, rate in (rates or {}).items()
    )
    return NodeView(name, regions, services, alive)


def after(nodes: Sequence[NodeView], placements: Sequence[Placement]) -> dict[str, set[str]]:
    """What each node holds once ``placements`` are applied (raises if they are invalid)."""
    return {n: {k for k in held if k} for n, held in apply_placements(nodes, placements).items()}


def settle(policy: ClusterPolicy, nodes: list[NodeView]) -> list[NodeView]:
    """``nodes`` with ``policy``'s first decision applied (same services and rates)."""
    state = apply_placements(nodes, policy.decide(nodes, 0.0))
    return [
        NodeView(
            n.name,
            tuple(RegionView(r.name, k) for r, k in zip(n.regions, state[n.name], strict=True)),
            n.services,
            n.alive,
        )
        for n in nodes
    ]


ZIPF = {"a": 60.0, "b": 30.0, "c": 20.0, "d": 15.0, "e": 12.0, "f": 10.0}


# -- per-board ---------------------------------------------------------------------------------


def test_per_board_fills_each_board_with_its_own_hottest() -> None:
    nodes = [node("n0", rates={"a": 5.0, "b": 50.0, "c": 40.0}), node("n1", rates={"a": 90.0})]
    assert after(nodes, PerBoardPlacement().decide(nodes, 0.0)) == {
        "n0": {"b", "c"},
        "n1": {"a"},
    }


def test_per_board_duplicates_what_every_board_finds_hot() -> None:
    """Every board sees the same popularity: all of them load the same two services."""
    nodes = [node(f"n{i}", rates=ZIPF) for i in range(3)]
    assert set(map(frozenset, after(nodes, PerBoardPlacement().decide(nodes, 0.0)).values())) == {
        frozenset({"a", "b"})
    }


def test_per_board_weighs_benefit_and_skips_services_without_hardware() -> None:
    services = (
        ServiceView("slow", 100.0, 1.0),  # 100 us/s
        ServiceView("heavy", 10.0, 50.0),  # 500 us/s
        ServiceView("nohw", 1000.0, 1000.0, has_hardware=False),
        ServiceView("worse", 1000.0, -5.0),  # hardware slower than software
    )
    nodes = [NodeView("n0", (RegionView("rp0"),), services)]
    assert PerBoardPlacement().decide(nodes, 0.0) == [
        Placement("n0", "heavy", True, "per-board: 500 us/s saved here")
    ]


def test_per_board_hysteresis_keeps_an_incumbent_within_the_margin() -> None:
    held = node("n0", ("a",), {"a": 10.0, "b": 14.0})  # b is 1.4x a: within 1 + 0.5
    assert PerBoardPlacement(margin=0.5).decide([held], 0.0) == []
    moved = PerBoardPlacement(margin=0.3).decide([held], 0.0)
    assert [(p.service_key, p.to_hardware) for p in moved] == [("a", False), ("b", True)]


def test_per_board_evicts_the_least_valuable_incumbent() -> None:
    held = node("n0", ("a", "b"), {"a": 10.0, "b": 20.0, "c": 100.0})
    moved = PerBoardPlacement().decide([held], 0.0)
    assert [(p.service_key, p.to_hardware) for p in moved] == [("a", False), ("c", True)]


# -- cluster -----------------------------------------------------------------------------------


def test_cluster_places_distinct_services_across_boards() -> None:
    """The same popularity on every board: the cluster policy spreads the six services over
    the six regions instead of loading the top two three times."""
    nodes = [node(f"n{i}", rates=ZIPF) for i in range(3)]
    placed = after(nodes, ClusterPlacement().decide(nodes, 0.0))
    assert set().union(*placed.values()) == set(ZIPF)
    assert all(len(keys) == 2 for keys in placed.values())


def test_cluster_gives_a_loaded_service_as_many_regions_as_its_load_needs() -> None:
    """``a``: 3 nodes x 1,000 calls/s x 500 us = 1.5 region-seconds per second; at 70 %
    utilization a region serves 1,400 calls/s, so it needs three regions (one per node); at
    100 %, 2,000 calls/s: two."""
    rates = {"a": 1000.0, "b": 1.0}
    nodes = [node(f"n{i}", rates=rates, hw_us=500.0) for i in range(3)]
    placed = after(nodes, ClusterPlacement(utilization=0.7).decide(nodes, 0.0))
    assert all("a" in keys for keys in placed.values())
    one = after(nodes, ClusterPlacement(utilization=1.0).decide(nodes, 0.0))
    assert sum("a" in keys for keys in one.values()) == 2
    few = [node(f"n{i}", rates={"a": 100.0, "b": 1.0}, hw_us=500.0) for i in range(3)]
    assert sum("a" in k for k in after(few, ClusterPlacement().decide(few, 0.0)).values()) == 1


def test_cluster_loads_a_newcomer_where_it_is_called_most() -> None:
    nodes = [
        node("n0", (None,), {"x": 1.0}),
        node("n1", (None,), {"x": 5.0}),
        node("n2", (None,), {"x": 2.0}),
    ]
    assert ClusterPlacement().decide(nodes, 0.0) == [
        Placement("n1", "x", True, "cluster: 800 us/s saved")
    ]


def test_cluster_discounts_the_hop_for_remote_callers() -> None:
    """Benefit 100 us, callers spread over four nodes (3/4 of calls remote from any one
    board): worth 100 - 3/4 x remote_us per call; at remote_us 200 it is worth nothing."""
    nodes = [node(f"n{i}", (None,), {"x": 10.0}) for i in range(4)]
    assert ClusterPlacement(remote_us=100.0).decide(nodes, 0.0) != []
    assert ClusterPlacement(remote_us=200.0).decide(nodes, 0.0) == []


def test_cluster_gives_dead_nodes_nothing_and_ignores_their_calls() -> None:
    nodes = [
        node("dead", (None, None), {"hot": 1000.0}, alive=False),
        node("n1", (None,), {"a": 10.0, "b": 5.0}),
    ]
    placements = ClusterPlacement().decide(nodes, 0.0)
    assert [(p.node, p.service_key) for p in placements] == [("n1", "a")]


def test_cluster_hysteresis_and_no_thrash() -> None:
    """Once placed, the same rates give no placement; a newcomer within the margin of the
    incumbent does not displace it; one beyond does."""
    policy = ClusterPlacement(margin=0.5)
    nodes = settle(policy, [node(f"n{i}", rates=ZIPF) for i in range(2)])
    assert policy.decide(nodes, 1.0) == []
    held = node("n0", ("a",), {"a": 10.0, "b": 14.0})
    assert policy.decide([held], 0.0) == []
    moved = ClusterPlacement(margin=0.3).decide([held], 0.0)
    assert [(p.service_key, p.to_hardware) for p in moved] == [("a", False), ("b", True)]


def test_cluster_respects_nodes_without_the_hardware() -> None:
    services = (ServiceView("x", 100.0, 100.0, has_hardware=False),)
    nodes = [
        NodeView("n0", (RegionView("rp0"),), services),
        NodeView("n1", (RegionView("rp0"),), (ServiceView("x", 1.0, 100.0),)),
    ]
    assert [p.node for p in ClusterPlacement().decide(nodes, 0.0)] == ["n1"]


# -- static ------------------------------------------------------------------------------------


def test_static_places_once_from_the_first_calls_and_never_moves() -> None:
    policy = StaticPlacement()
    empty = [node("n0", rates={}), node("n1", rates={})]
    assert policy.decide(empty, 0.0) == []  # no calls yet: nothing to go by
    first = [node(f"n{i}", rates=ZIPF) for i in range(2)]
    nodes = settle(policy, first)
    assert set().union(*after(nodes, []).values()) == {"a", "b", "c", "d"}
    shifted = [NodeView(n.name, n.regions, (ServiceView("new", 1e6, 1e3),)) for n in nodes]
    assert policy.decide(shifted, 1.0) == []
    restarted = [NodeView("n0", (RegionView("rp0"), RegionView("rp1")), ()), shifted[1]]
    again = after(restarted, policy.decide(restarted, 2.0))
    assert again["n0"] == after(nodes, [])["n0"]  # its assignment, loaded again


def test_static_with_an_assignment_fills_free_regions_only() -> None:
    policy = StaticPlacement({"n0": ["x", "y", "z"]})
    nodes = [node("n0", ("w", None)), node("n1")]
    assert policy.decide(nodes, 0.0) == [Placement("n0", "x", True, "static: assigned")]


# -- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "value"),
    [
        ([node("n0"), node("n0")], "n0"),
        ([NodeView("n0", (RegionView("rp0"), RegionView("rp0")), ())], "rp0"),
        ([NodeView("n0", (), (ServiceView("a", 1.0, 1.0), ServiceView("a", 2.0, 1.0)))], "a"),
        ([node("n0", rates={"a": -1.0})], -1.0),
        ([node("n0", rates={"a": float("inf")})], float("inf")),
        ([node("n0", rates={"a": 1.0}, hw_us=0.0)], 0.0),
        ([node("n0", rates={"a": 1.0}, benefit=float("nan"))], None),
    ],
)
@pytest.mark.parametrize("make", [PerBoardPlacement, ClusterPlacement, StaticPlacement])
def test_malformed_views_are_refused(
    nodes: list[NodeView], value: object, make: type[ClusterPolicy]
) -> None:
    policy = make()
    with pytest.raises(ControllerError) as err:
        policy.decide(nodes, 0.0)
    assert err.value.controller == policy.name
    if value is not None:
        assert err.value.value == value
    else:
        assert err.value.value != err.value.value  # NaN, named as it came


@pytest.mark.parametrize(
    "build",
    [
        lambda: PerBoardPlacement(margin=-0.1),
        lambda: ClusterPlacement(margin=float("nan")),
        lambda: ClusterPlacement(utilization=0.0),
        lambda: ClusterPlacement(utilization=1.5),
        lambda: ClusterPlacement(remote_us=-1.0),
    ],
)
def test_bad_parameters_are_refused(build: Callable[[], object]) -> None:
    with pytest.raises(ControllerError):
        build()


@pytest.mark.parametrize(
    ("placement", "value"),
    [
        (Placement("nx", "a", True), "nx"),
        (Placement("dead", "a", True), "dead"),
        (Placement("n0", "zz", False), "zz"),
        (Placement("n0", "a", True), "a"),
        (Placement("n0", "b", True), "n0"),
    ],
)
def test_apply_refuses_invalid_placements(placement: Placement, value: str) -> None:
    nodes = [node("n0", ("a",)), node("dead", (None,), alive=False)]
    with pytest.raises(ControllerError) as err:
        apply_placements(nodes, [placement])
    assert err.value.value == value


# -- every decision is valid (hypothesis) ------------------------------------------------------

KEYS = [f"s{i}" for i in range(8)]


@st.composite
def clusters(draw: st.DrawFn) -> list[NodeView]:
    out = []
    for n in range(draw(st.integers(1, 5))):
        count = draw(st.integers(0, 3))
        drawn = draw(st.lists(st.sampled_from([None, *KEYS]), min_size=count, max_size=count))
        held = [k if k not in drawn[:i] else None for i, k in enumerate(drawn)]
        keys = draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=6))
        services = tuple(
            ServiceView(
                key,
                draw(st.floats(0, 1e4)),
                draw(st.floats(-100, 1e4)),
                draw(st.booleans()),
                draw(st.none() | st.floats(1, 1e4)),
            )
            for key in keys
        )
        regions = tuple(RegionView(f"rp{i}", k) for i, k in enumerate(held))
        out.append(NodeView(f"n{n}", regions, services, draw(st.booleans())))
    return out


@settings(max_examples=300, deadline=None)
@given(nodes=clusters(), margin=st.floats(0, 2), remote=st.floats(0, 500))
def test_every_decision_is_valid_deterministic_and_settles(
    nodes: list[NodeView], margin: float, remote: float
) -> None:
    """For every policy: the placements apply (never more services than regions, never one
    held twice, only live nodes), the same views give the same placements, and the adaptive
    policies, once their placements are applied, ask for nothing more (no thrash)."""
    makers: dict[str, Callable[[], ClusterPolicy]] = {
        "static": StaticPlacement,
        "per-board": lambda: PerBoardPlacement(margin=margin),
        "cluster": lambda: ClusterPlacement(margin=margin, remote_us=remote),
    }
    for name, make in makers.items():
        placements = make().decide(nodes, 0.0)
        state = apply_placements(nodes, placements)  # raises unless valid
        dead = {n.name for n in nodes if not n.alive}
        assert not any(p.node in dead for p in placements), name
        for n in nodes:
            keys = [k for k in state[n.name] if k]
            assert len(set(keys)) == len(keys), name
            fresh = [p.service_key for p in placements if p.node == n.name and p.to_hardware]
            assert len(set(fresh)) == len(fresh)
        assert make().decide(nodes, 0.0) == placements, name
        if name != "static":
            policy = make()
            assert policy.decide(settle(policy, nodes), 1.0) == [], name
