"""What the cluster knows about its boards: node reports, the directory, and the views the
placement policy reads.

A node agent samples its board's daemon (services, regions, statistics) into a
:class:`NodeReport` and pushes it to the controller whenever it changed; the controller keeps
the newest report of every node in a :class:`Directory`, which clients read to choose where
each call goes and which the placement policy reads as :class:`~juggle.core.cluster.NodeView`
values (:func:`node_view`). Everything here is plain data (picklable, no Ray import): the
agent, the controller and the client import it alike.

Figures: call counts and call rates are *measured* (the daemon's statistics); the software
mean is *measured*; the hardware mean is *measured* on a real fabric and *modeled* on the
simulated one (the bus time the board model gives, ``ServiceStatistics.hardware_modeled_mean_us``),
which :attr:`ServiceReport.hardware_label` says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from juggle.core.cluster import NodeView, RegionView, ServiceView

__all__ = [
    "CONTROLLER_NAME",
    "NAMESPACE",
    "Directory",
    "NodeReport",
    "RegionReport",
    "ServiceReport",
    "agent_name",
    "board_resource",
    "node_view",
    "service_key",
    "status_document",
]

#: The Ray namespace every juggle actor lives in.
NAMESPACE = "juggle"
#: The name of the detached controller (directory) actor.
CONTROLLER_NAME = "juggle_cluster_controller"
#: Tiers that are no hardware (a call there is served by software or native code).
SOFTWARE_TIERS = ("software", "native")


def agent_name(board: str) -> str:
    """The Ray actor name of ``board``'s node agent."""
    return f"juggle_agent:{board}"


def board_resource(board: str) -> str:
    """The custom Ray resource a board's host offers (one unit): the agent asks for it."""
    return f"juggle_board:{board}"


def service_key(module: str | None, interface: str, service_id: int) -> str:
    """A service's name that is the same on every node: ``<module>/<interface>`` (a service
    of no module is named by its id too, which is only stable on its own node)."""
    if module:
        return f"{module}/{interface}"
    return f"#{service_id}/{interface}"


@dataclass(frozen=True, slots=True)
class ServiceReport:
    """One service of one node, as its agent last sampled it.

    ``calls`` counts every call since the daemon started (measured); ``calls_per_s`` is the
    rate since the controller's last period began (measured); ``software_mean_us`` is the
    mean of its software and native calls (measured; None before any); ``hardware_mean_us``
    the mean of one hardware call (``hardware_label`` says measured or modeled; None before
    any hardware call)."""

    key: str
    service_id: int
    interface: str
    interfaces: tuple[str, ...]
    module: str | None
    properties: Mapping[str, Any]
    tier: str
    tiers: tuple[str, ...]
    region: str | None
    calls: int
    hardware_calls: int
    calls_per_s: float
    software_mean_us: float | None
    hardware_mean_us: float | None
    hardware_label: str = "measured"

    @property
    def in_hardware(self) -> bool:
        """Whether a region of this node serves it now."""
        return self.tier == "hardware" and self.region is not None

    def benefit_us(self) -> float:
        """Software mean less hardware mean of one call (µs). Without a hardware figure yet,
        the software mean itself (the optimistic prior: hardware taken as free until
        measured or modeled); 0 without a software figure either."""
        sw = self.software_mean_us
        if sw is None:
            return 0.0
        hw = self.hardware_mean_us
        return sw - hw if hw is not None else sw


@dataclass(frozen=True, slots=True)
class RegionReport:
    """One region of a node: its state and the key of the service in it (None: empty)."""

    name: str
    state: str
    service: str | None


@dataclass(frozen=True, slots=True)
class NodeReport:
    """One board: whether its daemon is up (``alive``), which start of it this is
    (``epoch``, one more at every daemon start), where clients reach it (``address``:
    ``tls://HOST:PORT``, or ``unix:PATH`` without TLS), its regions and services, its call
    rate in all (``load_per_s``, measured), when it was sampled (``sampled_at``, wall clock
    of the agent's host) and the last error of its daemon (None: none)."""

    name: str
    alive: bool
    epoch: int
    address: str
    regions: tuple[RegionReport, ...] = ()
    services: tuple[ServiceReport, ...] = ()
    load_per_s: float = 0.0
    sampled_at: float = 0.0
    error: str | None = None
    daemon_pid: int | None = None

    def same_state(self, other: NodeReport | None) -> bool:
        """Whether ``other`` says the same as this report, the sampling time left aside."""
        if other is None:
            return False
        return (
            self.name,
            self.alive,
            self.epoch,
            self.address,
            self.regions,
            self.services,
            self.load_per_s,
            self.error,
        ) == (
            other.name,
            other.alive,
            other.epoch,
            other.address,
            other.regions,
            other.services,
            other.load_per_s,
            other.error,
        )


@dataclass(frozen=True, slots=True)
class Directory:
    """The controller's view of the cluster: every node's newest report. ``generation``
    grows whenever a report changed or a period ran; ``period`` counts the controller's
    periods."""

    generation: int = 0
    period: int = 0
    nodes: tuple[NodeReport, ...] = field(default_factory=tuple)

    def node(self, name: str) -> NodeReport | None:
        """The report of node ``name`` (None: unknown)."""
        for node in self.nodes:
            if node.name == name:
                return node
        return None

    def hardware_nodes(self, key: str) -> tuple[str, ...]:
        """The live nodes whose regions serve service ``key`` now, by name."""
        return tuple(
            n.name
            for n in self.nodes
            if n.alive and any(s.key == key and s.in_hardware for s in n.services)
        )


def node_view(report: NodeReport) -> NodeView:
    """The placement policy's view of one node report (a region in ERROR is left out:
    nothing can be placed there until it is recovered)."""
    services = tuple(
        ServiceView(
            key=s.key,
            calls_per_s=max(0.0, s.calls_per_s),
            hw_benefit_us=s.benefit_us(),
            has_hardware="hardware" in s.tiers,
            hardware_us=s.hardware_mean_us if s.hardware_mean_us else None,
        )
        for s in _unique(report.services)
    )
    regions = tuple(RegionView(r.name, r.service) for r in report.regions if r.state != "ERROR")
    return NodeView(report.name, regions, services, report.alive)


def _unique(services: Iterable[ServiceReport]) -> list[ServiceReport]:
    seen: set[str] = set()
    out: list[ServiceReport] = []
    for s in services:
        if s.key not in seen:
            seen.add(s.key)
            out.append(s)
    return out


def status_document(directory: Directory) -> dict[str, Any]:
    """``juggle cluster status --json``: every node (alive, epoch, address, load), its
    regions and the service each holds, and its services (tier, region, calls, rates and
    means), with ``labels`` saying what kind each figure is."""
    nodes = []
    for node in directory.nodes:
        nodes.append(
            {
                "name": node.name,
                "alive": node.alive,
                "epoch": node.epoch,
                "address": node.address,
                "load_per_s": node.load_per_s,
                "error": node.error,
                "regions": [
                    {"name": r.name, "state": r.state, "service": r.service} for r in node.regions
                ],
                "services": [
                    {
                        "key": s.key,
                        "service_id": s.service_id,
                        "tier": s.tier,
                        "region": s.region,
                        "calls": s.calls,
                        "hardware_calls": s.hardware_calls,
                        "calls_per_s": s.calls_per_s,
                        "software_mean_us": s.software_mean_us,
                        "hardware_mean_us": s.hardware_mean_us,
                        "hardware_mean_label": s.hardware_label,
                        # this service's hardware mean: measured on a board, modeled on a
                        # simulated one
                        "labels": {"hardware_mean_us": s.hardware_label},
                    }
                    for s in node.services
                ],
            }
        )
    return {
        "generation": directory.generation,
        "period": directory.period,
        "nodes": nodes,
        "labels": {
            "generation": "measured",  # directory updates counted so far
            "period": "measured",  # controller periods run so far
            "nodes": {
                "epoch": "measured",  # daemon starts of the board counted by its agent
                "load_per_s": "measured",
                "services": {
                    "service_id": "input",  # an id the board's daemon gave
                    "calls": "measured",
                    "hardware_calls": "measured",
                    "calls_per_s": "measured",
                    "software_mean_us": "measured",
                },
            },
        },
    }
