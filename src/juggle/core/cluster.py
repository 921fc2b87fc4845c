"""Which board's regions hold which services, across a cluster: the placement policies.

Sans-I/O like the per-board controllers: a policy reads frozen views of the nodes (each board's
regions, the service each holds, and the calls its callers made to each service) and answers
with :class:`Placement` values; it reads no clock, imports no Ray, touches no board. The
cluster controller of :mod:`juggle.cluster` runs it over the nodes' snapshots every period and
turns each placement into a juggle on the named board; ``juggle simulate cluster`` runs the
same objects in virtual time.

A placement list is read in order: a ``to_hardware=False`` entry frees the region of that node
that holds the service, a ``to_hardware=True`` entry loads the service into the node's first
free region (region order of its view). Every list a policy returns is *valid*
(:func:`apply_placements` accepts it): it names live nodes only, evicts only what a node holds,
never loads a service a node already holds and never more services than a node has regions.

Three policies:

* :class:`StaticPlacement`: fill empty regions once (from a given assignment, or from the
  cluster-wide best services the first time calls are seen), then never move anything;
* :class:`PerBoardPlacement`: each board on its own, as its own controller would: its regions
  hold the services its own callers gain most from (calls/s x benefit per call);
* :class:`ClusterPlacement`: one view of all boards: the services with the most total benefit
  (calls/s from every node x benefit per call) get regions anywhere, as many regions as their
  load needs, on the nodes that call them most; a service in hardware on one board serves
  callers from every node.

Both adaptive policies have hysteresis: a service in hardware keeps its region unless a
newcomer is worth more than ``1 + margin`` times as much, so noise in the call rates does not
make regions thrash.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from juggle.errors import ControllerError

__all__ = [
    "ClusterPlacement",
    "ClusterPolicy",
    "NodeView",
    "PerBoardPlacement",
    "Placement",
    "RegionView",
    "ServiceView",
    "StaticPlacement",
    "apply_placements",
    "check_nodes",
]


@dataclass(frozen=True, slots=True)
class RegionView:
    """One region of a board: its name and the service it holds or is being loaded with
    (None: empty)."""

    name: str
    service: str | None = None


@dataclass(frozen=True, slots=True)
class ServiceView:
    """One service as one node sees it.

    ``key`` names the service the same way on every node (module/interface id);
    ``calls_per_s`` is the rate at which this node's callers called it over the last window,
    wherever the calls were served; ``hw_benefit_us`` is the software mean less the hardware
    mean of one call (µs); ``has_hardware``: this node can load its hardware; ``hardware_us``
    is the time one call occupies a region (µs; None: unknown, a region is then taken to
    serve any load).
    """

    key: str
    calls_per_s: float
    hw_benefit_us: float
    has_hardware: bool = True
    hardware_us: float | None = None


@dataclass(frozen=True, slots=True)
class NodeView:
    """One board of the cluster: its regions, its callers' services and whether it is up
    (a dead node's regions and calls are ignored; it is given nothing)."""

    name: str
    regions: tuple[RegionView, ...]
    services: tuple[ServiceView, ...]
    alive: bool = True


@dataclass(frozen=True, slots=True)
class Placement:
    """Load ``service_key`` into a region of ``node`` (``to_hardware``) or free the region
    that holds it there; ``reason`` says why, for logs."""

    node: str
    service_key: str
    to_hardware: bool
    reason: str = ""


@runtime_checkable
class ClusterPolicy(Protocol):
    """A cluster placement policy: reads the nodes' views, returns placements (often none)."""

    name: str

    def decide(self, nodes: Sequence[NodeView], now: float) -> list[Placement]:
        """Placements for this instant ``now`` (s, real or virtual); must not read a clock or
        touch a board."""
        ...


def _error(policy: str, message: str, value: str | float | None) -> ControllerError:
    return ControllerError(f"{policy}: {message}", controller=policy, value=value)


def check_nodes(nodes: Sequence[NodeView], policy: str) -> None:
    """Raise :class:`~juggle.errors.ControllerError` (``controller`` the policy, ``value`` the
    offending name or number) for a malformed view: a node named twice, a region named twice
    on one node, a service listed twice by one node, or a call rate, benefit or hardware time
    that is not a finite number (a rate or hardware time <= 0 where it must be > 0)."""
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            raise _error(policy, f"node {node.name!r} is listed twice", node.name)
        seen.add(node.name)
        regions = [r.name for r in node.regions]
        if len(set(regions)) != len(regions):
            dup = next(r for r in regions if regions.count(r) > 1)
            raise _error(policy, f"node {node.name!r} lists region {dup!r} twice", dup)
        keys: set[str] = set()
        for svc in node.services:
            if svc.key in keys:
                raise _error(policy, f"node {node.name!r} lists service {svc.key!r} twice", svc.key)
            keys.add(svc.key)
            if not (math.isfinite(svc.calls_per_s) and svc.calls_per_s >= 0):
                raise _error(
                    policy,
                    f"service {svc.key!r} on {node.name!r}: calls_per_s must be a finite number "
                    f">= 0, got {svc.calls_per_s!r}",
                    svc.calls_per_s,
                )
            if not math.isfinite(svc.hw_benefit_us):
                raise _error(
                    policy,
                    f"service {svc.key!r} on {node.name!r}: hw_benefit_us must be finite, got "
                    f"{svc.hw_benefit_us!r}",
                    svc.hw_benefit_us,
                )
            hw = svc.hardware_us
            if hw is not None and not (math.isfinite(hw) and hw > 0):
                raise _error(
                    policy,
                    f"service {svc.key!r} on {node.name!r}: hardware_us must be a finite number "
                    f"> 0 or None, got {hw!r}",
                    hw,
                )


def apply_placements(
    nodes: Sequence[NodeView], placements: Sequence[Placement]
) -> dict[str, tuple[str | None, ...]]:
    """What each node's regions hold after ``placements`` (node name -> one entry per region,
    in the view's order), without changing anything.

    An eviction frees the first region of the node holding the service; an entry takes the
    node's first free region. Raises :class:`~juggle.errors.ControllerError` (``value`` the
    node or service) for a placement on an unknown or dead node, an eviction of a service the
    node does not hold, an entry of one it already holds, or an entry with no free region:
    the list is then not valid.
    """
    by_name = {node.name: node for node in nodes}
    held = {node.name: [r.service for r in node.regions] for node in nodes}
    for p in placements:
        node = by_name.get(p.node)
        if node is None:
            raise _error("placement", f"no node {p.node!r}", p.node)
        if not node.alive:
            raise _error("placement", f"node {p.node!r} is dead: nothing may be placed", p.node)
        slots = held[p.node]
        if p.to_hardware:
            if p.service_key in slots:
                raise _error(
                    "placement", f"{p.node!r} already holds {p.service_key!r}", p.service_key
                )
            if None not in slots:
                raise _error(
                    "placement", f"{p.node!r} has no free region for {p.service_key!r}", p.node
                )
            slots[slots.index(None)] = p.service_key
        else:
            if p.service_key not in slots:
                raise _error(
                    "placement", f"{p.node!r} does not hold {p.service_key!r}", p.service_key
                )
            slots[slots.index(p.service_key)] = None
    return {name: tuple(slots) for name, slots in held.items()}


def _check_margin(policy: str, margin: float) -> float:
    if not (math.isfinite(margin) and margin >= 0):
        raise _error(policy, f'"margin" must be a finite number >= 0, got {margin!r}', margin)
    return float(margin)


def _value(svc: ServiceView) -> float:
    """µs saved per second if ``svc``'s calls were all served by hardware (0 without one)."""
    if not svc.has_hardware or svc.hw_benefit_us <= 0:
        return 0.0
    return svc.calls_per_s * svc.hw_benefit_us


class PerBoardPlacement:
    """Each board on its own: its regions hold the services with the largest
    ``calls_per_s x hw_benefit_us`` of its own callers, as the board's own controller would.

    A held service is worth ``1 + margin`` times its value when compared with newcomers
    (hysteresis). Raises :class:`~juggle.errors.ControllerError` for a negative margin.
    """

    name: str = "per-board"

    def __init__(self, margin: float = 0.2) -> None:
        self.margin = _check_margin(self.name, margin)

    def decide(self, nodes: Sequence[NodeView], now: float) -> list[Placement]:
        """For every live node, the evictions and loads that give it its best services.

        Raises :class:`~juggle.errors.ControllerError` for a malformed view
        (:func:`check_nodes`)."""
        check_nodes(nodes, self.name)
        out: list[Placement] = []
        for node in nodes:
            if node.alive and node.regions:
                out += self._node(node)
        return out

    def _node(self, node: NodeView) -> list[Placement]:
        values = {s.key: _value(s) for s in node.services}
        held = [r.service for r in node.regions if r.service is not None]
        held_set = set(held)
        boost = 1.0 + self.margin
        ranked = sorted(
            (
                (-(v * boost if key in held_set else v), key)
                for key, v in values.items()
                if v > 0 or key in held_set
            ),
        )
        wanted = [key for score, key in ranked[: len(node.regions)] if score < 0]
        wanted_set = set(wanted)
        free = len(node.regions) - len(held)
        # least valuable first; held services nobody called are worth 0
        evictable = sorted(
            (k for k in dict.fromkeys(held) if k not in wanted_set),
            key=lambda k: (values.get(k, 0.0), k),
        )
        leave: list[Placement] = []
        enter: list[Placement] = []
        for key in wanted:
            if key in held_set:
                continue
            if free > 0:
                free -= 1
            else:
                gone = evictable.pop(0)
                leave.append(Placement(node.name, gone, False, f"per-board: room for {key}"))
            enter.append(
                Placement(node.name, key, True, f"per-board: {values[key]:.0f} us/s saved here")
            )
        return leave + enter

    def __repr__(self) -> str:
        return f"<PerBoardPlacement margin={self.margin:g}>"


@dataclass(slots=True)
class _Demand:
    """One service summed over the live nodes: its call rate (total and per calling node),
    its benefit and hardware time (rate-weighted means over the nodes that report them) and
    the nodes that cannot load its hardware."""

    total: float = 0.0
    benefit_sum: float = 0.0
    benefit_rate: float = 0.0
    benefit_max: float = 0.0
    hw_sum: float = 0.0
    hw_rate: float = 0.0
    by_node: dict[str, float] = field(default_factory=dict)
    barred: set[str] = field(default_factory=set)

    def benefit(self) -> float:
        return self.benefit_sum / self.benefit_rate if self.benefit_rate > 0 else self.benefit_max

    def hardware_us(self) -> float | None:
        return self.hw_sum / self.hw_rate if self.hw_rate > 0 else None


class ClusterPlacement:
    """One view of every board: the services worth most across the cluster get regions
    anywhere, as many as their load needs.

    A service's worth is its total call rate (from every live node) x its benefit per call,
    less ``remote_us`` for the share of its calls that come from other nodes than the one that
    calls it most (the price of a hop between boards). Its load needs
    ``ceil(rate / capacity)`` regions, a region's capacity being ``utilization`` x 1e6 /
    ``hardware_us`` calls/s (one region when ``hardware_us`` is unknown); each extra region is
    worth what it serves. The policy keeps the ``regions`` most valuable of these units, a
    unit already in hardware counting ``1 + margin`` times (hysteresis), keeps incumbents on
    the nodes that call them most, and loads newcomers on the live node that calls them most
    and has room (a free region, else the region of the least valuable service it drops).
    At most one region per service per node.

    Raises :class:`~juggle.errors.ControllerError` for a negative margin or ``remote_us``, or
    a utilization outside (0, 1].
    """

    name: str = "cluster"

    def __init__(
        self, margin: float = 0.2, utilization: float = 0.7, remote_us: float = 0.0
    ) -> None:
        self.margin = _check_margin(self.name, margin)
        if not (math.isfinite(utilization) and 0 < utilization <= 1):
            raise _error(
                self.name, f'"utilization" must be in (0, 1], got {utilization!r}', utilization
            )
        if not (math.isfinite(remote_us) and remote_us >= 0):
            raise _error(
                self.name, f'"remote_us" must be a finite number >= 0, got {remote_us!r}', remote_us
            )
        self.utilization = float(utilization)
        self.remote_us = float(remote_us)

    def targets(self, nodes: Sequence[NodeView]) -> dict[str, list[str]]:
        """Where the policy wants each service: node name -> keys, for the live nodes (the
        assignment the placements of :meth:`decide` reach). Raises like :meth:`decide`."""
        check_nodes(nodes, self.name)
        return _Plan(self, nodes).targets()

    def decide(self, nodes: Sequence[NodeView], now: float) -> list[Placement]:
        """The evictions and loads that reach :meth:`targets` from the nodes' current regions.

        Raises :class:`~juggle.errors.ControllerError` for a malformed view
        (:func:`check_nodes`)."""
        check_nodes(nodes, self.name)
        return _Plan(self, nodes).placements()

    def __repr__(self) -> str:
        return (
            f"<ClusterPlacement margin={self.margin:g} utilization={self.utilization:g} "
            f"remote_us={self.remote_us:g}>"
        )


class _Plan:
    """One decision of :class:`ClusterPlacement` (kept apart: the policy itself is stateless)."""

    def __init__(self, policy: ClusterPlacement, nodes: Sequence[NodeView]) -> None:
        self.policy = policy
        self.live = [n for n in nodes if n.alive and n.regions]
        self.demand = self._demand()

    def _demand(self) -> dict[str, _Demand]:
        out: dict[str, _Demand] = {}
        for node in self.live:
            for svc in node.services:
                d = out.get(svc.key)
                if d is None:
                    d = out[svc.key] = _Demand()
                rate = svc.calls_per_s
                d.total += rate
                if rate > 0:
                    d.by_node[node.name] = d.by_node.get(node.name, 0.0) + rate
                if not svc.has_hardware:
                    d.barred.add(node.name)
                    continue
                d.benefit_sum += rate * svc.hw_benefit_us
                d.benefit_rate += rate
                d.benefit_max = max(d.benefit_max, svc.hw_benefit_us)
                if svc.hardware_us is not None:
                    d.hw_sum += rate * svc.hardware_us
                    d.hw_rate += rate
        return out

    def _units(self) -> list[tuple[float, str, int]]:
        """``(value, key, index)`` of every region's worth of every service's load."""
        limit = sum(len(n.regions) for n in self.live)
        units: list[tuple[float, str, int]] = []
        for key, d in self.demand.items():
            assert d.by_node is not None
            if d.total <= 0:
                continue
            top = max(d.by_node.values(), default=0.0)
            remote_share = 1.0 - top / d.total
            worth = d.benefit() - self.policy.remote_us * remote_share
            if worth <= 0:
                continue
            hw = d.hardware_us()
            cap = math.inf if hw is None else self.policy.utilization * 1e6 / hw
            count = 1 if math.isinf(cap) else math.ceil(d.total / cap)
            count = min(count, limit, len(self.live))
            left = d.total
            for k in range(count):
                served = min(cap, left)
                left -= served
                units.append((served * worth, key, k))
        return units

    def _held(self) -> dict[str, list[str]]:
        """Service -> the live nodes holding it (node order)."""
        out: dict[str, list[str]] = {}
        for node in self.live:
            for key in dict.fromkeys(r.service for r in node.regions if r.service is not None):
                out.setdefault(key, []).append(node.name)
        return out

    def _calls_from(self, key: str, node: str) -> float:
        d = self.demand.get(key)
        return 0.0 if d is None else d.by_node.get(node, 0.0)

    def _worth(self, key: str) -> float:
        """µs/s a service saves if all its calls are served by hardware (0: unknown)."""
        d = self.demand.get(key)
        return 0.0 if d is None else max(0.0, d.total * d.benefit())

    def _choose(self, held: Mapping[str, list[str]]) -> tuple[dict[str, int], dict[str, float]]:
        """Service -> how many regions it gets, and the value of the units it got."""
        boost = 1.0 + self.policy.margin
        scored = []
        for value, key, k in self._units():
            incumbent = k < len(held.get(key, ()))
            scored.append((-(value * boost if incumbent else value), key, k))
        scored.sort()
        limit = sum(len(n.regions) for n in self.live)
        chosen: dict[str, int] = {}
        worth: dict[str, float] = {}
        for score, key, _ in scored[:limit]:
            chosen[key] = chosen.get(key, 0) + 1
            worth[key] = worth.get(key, 0.0) - score
        return chosen, worth

    def targets(self) -> dict[str, list[str]]:
        result = {n.name: [r.service for r in n.regions] for n in self.live}
        for p in self.placements():
            slots = result[p.node]
            if p.to_hardware:
                slots[slots.index(None)] = p.service_key
            else:
                slots[slots.index(p.service_key)] = None
        return {name: [s for s in slots if s is not None] for name, slots in result.items()}

    def placements(self) -> list[Placement]:
        if not self.live:
            return []
        held = self._held()
        chosen, worth = self._choose(held)
        free = {n.name: sum(1 for r in n.regions if r.service is None) for n in self.live}
        placed = {
            n.name: {r.service for r in n.regions if r.service is not None} for n in self.live
        }
        # incumbents stay on the nodes that call them most; the rest may be dropped for room,
        # least valuable first
        droppable: dict[str, list[tuple[float, str]]] = {n.name: [] for n in self.live}
        wanted: dict[str, int] = {}
        for key, holders in held.items():
            keep = chosen.get(key, 0)
            ranked = sorted(holders, key=lambda n: (-self._calls_from(key, n), n))
            for name in ranked[keep:]:
                droppable[name].append((self._worth(key) if keep == 0 else 0.0, key))
        for key, n in chosen.items():
            extra = n - len(held.get(key, ()))
            if extra > 0:
                wanted[key] = extra
        for entries in droppable.values():
            entries.sort()
        # newcomers, most valuable first, on the node that calls them most and has room
        names = [n.name for n in self.live]
        leave: dict[str, list[Placement]] = {name: [] for name in names}
        enter: dict[str, list[Placement]] = {name: [] for name in names}
        for key in sorted(wanted, key=lambda k: (-worth[k], k)):
            d = self.demand[key]
            rates = d.by_node
            callers = sorted(rates, key=lambda n: (-rates[n], n))
            for _ in range(wanted[key]):
                target = self._room(key, callers, names, free, droppable, placed, d.barred)
                if target is None:
                    break
                if free[target] > 0:
                    free[target] -= 1
                else:
                    _, gone = droppable[target].pop(0)
                    placed[target].discard(gone)
                    leave[target].append(Placement(target, gone, False, f"cluster: room for {key}"))
                placed[target].add(key)
                enter[target].append(
                    Placement(target, key, True, f"cluster: {worth[key]:.0f} us/s saved")
                )
        out: list[Placement] = []
        for name in names:
            out += leave[name] + enter[name]
        return out

    @staticmethod
    def _room(
        key: str,
        callers: list[str],
        names: list[str],
        free: Mapping[str, int],
        droppable: Mapping[str, list[tuple[float, str]]],
        placed: Mapping[str, set[str]],
        barred: set[str],
    ) -> str | None:
        """The node a new region of ``key`` goes to: the caller that calls it most with room,
        else the first node with a free region, else the first with a region to drop."""

        def fits(name: str) -> bool:
            return key not in placed[name] and name not in barred

        for name in callers:
            if fits(name) and (free[name] > 0 or droppable[name]):
                return name
        for name in names:
            if fits(name) and free[name] > 0:
                return name
        for name in names:
            if fits(name) and droppable[name]:
                return name
        return None


class StaticPlacement:
    """Place once, never move: fill empty regions, never evict.

    With ``assignment`` (node name -> service keys) those services are loaded where regions
    are free; without it, the first time any calls are seen the policy takes what
    :class:`ClusterPlacement` would place then (services worth most cluster-wide) as its
    assignment, like an operator deploying from a first measurement. Either way a region that
    becomes empty again (a node restarted) is filled again with its node's assigned services.
    """

    name: str = "static"

    def __init__(self, assignment: Mapping[str, Sequence[str]] | None = None) -> None:
        self.assignment: dict[str, tuple[str, ...]] | None = (
            None if assignment is None else {n: tuple(k) for n, k in assignment.items()}
        )

    def decide(self, nodes: Sequence[NodeView], now: float) -> list[Placement]:
        """Loads of assigned services missing from free regions of live nodes.

        Raises :class:`~juggle.errors.ControllerError` for a malformed view
        (:func:`check_nodes`)."""
        check_nodes(nodes, self.name)
        if self.assignment is None:
            if not any(s.calls_per_s > 0 for n in nodes if n.alive for s in n.services):
                return []
            self.assignment = {k: tuple(v) for k, v in ClusterPlacement().targets(nodes).items()}
        out: list[Placement] = []
        for node in nodes:
            if not node.alive:
                continue
            slots = [r.service for r in node.regions]
            for key in self.assignment.get(node.name, ()):
                if key in slots or None not in slots:
                    continue
                slots[slots.index(None)] = key
                out.append(Placement(node.name, key, True, "static: assigned"))
        return out

    def __repr__(self) -> str:
        fixed = "first calls" if self.assignment is None else f"{len(self.assignment)} nodes"
        return f"<StaticPlacement assignment={fixed}>"
