"""The juggle cluster: boards in a Ray cluster, each running a daemon (see docs/cluster.md).

- :func:`connect` -> :class:`ClusterClient`: proxies whose calls go straight to the chosen
  board's daemon over mutual TLS (:mod:`juggle.cluster.client`);
- :class:`NodeAgent` / :func:`start_agent`: one Ray actor per board that runs and supervises
  the board's daemon and pushes its snapshots (:mod:`juggle.cluster.agent`);
- :class:`ClusterController` / :func:`start_controller`: the directory of the nodes and the
  placement loop, one detached actor (:mod:`juggle.cluster.controller`);
- :func:`create_ca` / :func:`issue`: the cluster's certificates (:mod:`juggle.cluster.pki`).

Ray (the ``cluster`` extra: ``pip install 'juggle[cluster]'``) is imported only when an actor
is started or a client connects: the PKI and the data types work without it.
"""

from juggle.cluster.agent import AgentConfig, NodeAgent, start_agent
from juggle.cluster.client import IDEMPOTENT, ClusterClient, ClusterProxy, connect
from juggle.cluster.controller import ClusterController, StepReport, start_controller
from juggle.cluster.directory import (
    CONTROLLER_NAME,
    NAMESPACE,
    Directory,
    NodeReport,
    RegionReport,
    ServiceReport,
    agent_name,
    board_resource,
    node_view,
    service_key,
)
from juggle.cluster.pki import CertPaths, create_ca, issue

__all__ = [
    "CONTROLLER_NAME",
    "IDEMPOTENT",
    "NAMESPACE",
    "AgentConfig",
    "CertPaths",
    "ClusterClient",
    "ClusterController",
    "ClusterProxy",
    "Directory",
    "NodeAgent",
    "NodeReport",
    "RegionReport",
    "ServiceReport",
    "StepReport",
    "agent_name",
    "board_resource",
    "connect",
    "create_ca",
    "issue",
    "node_view",
    "service_key",
    "start_agent",
    "start_controller",
]
