"""The cluster's directory and controller: one detached Ray actor per cluster.

:class:`ClusterController` keeps the newest :class:`~juggle.cluster.directory.NodeReport` each
node agent pushed (the directory clients read) and, each period, runs the placement policy
(:class:`juggle.core.cluster.ClusterPlacement` by default) over the nodes' views and has each
board's agent run its placements (juggles through the agent's admin client of that board's
daemon). A board's own daemon keeps deciding nothing else: the controller tells it what to
hold.

A period (:meth:`ClusterController.step`): every known agent samples its daemon and starts a
new rate window (so a period's call rates are the calls since the previous period); an agent
that does not answer within ``agent_timeout_s`` counts as dead for the period; the policy
decides; the placements run, evictions first, each board's in the order given; the boards that
changed are sampled again, so the directory is current when :meth:`step` returns. With
``period_s`` set, a thread of the actor runs a period every ``period_s`` s; with ``None`` only
callers run periods (tests drive them that way, and count them).

The class is plain Python; :func:`start_controller` makes it the detached actor
``juggle_cluster_controller`` in namespace ``juggle``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from juggle.cluster.directory import (
    CONTROLLER_NAME,
    NAMESPACE,
    Directory,
    NodeReport,
    agent_name,
    node_view,
)
from juggle.core.cluster import ClusterPlacement, ClusterPolicy, Placement
from juggle.errors import ConfigurationError

__all__ = ["ClusterController", "StepReport", "start_controller"]

logger = logging.getLogger("juggle.cluster.controller")


@dataclass(frozen=True, slots=True)
class StepReport:
    """What one period did: its number, the placements decided (``(node, key,
    to_hardware)``), the failures (one message each), and the directory's generation after
    it."""

    period: int
    placements: tuple[tuple[str, str, bool], ...]
    errors: tuple[str, ...]
    generation: int
    dead: tuple[str, ...] = ()


class ClusterController:
    """The directory of the nodes and the placement loop; see the module's text.

    ``period_s``: seconds between periods run by the actor itself (None: only by callers);
    ``policy``: the placement policy (default ``ClusterPlacement()``); ``agent_timeout_s``:
    how long a period waits for an agent. Raises :class:`ConfigurationError` for a period or
    timeout that is not a positive number."""

    def __init__(
        self,
        period_s: float | None = 5.0,
        policy: ClusterPolicy | None = None,
        agent_timeout_s: float = 10.0,
    ) -> None:
        if period_s is not None and not (math.isfinite(period_s) and period_s > 0):
            raise ConfigurationError(
                f'"period_s" must be a positive number of seconds or None, got {period_s!r}',
                value=period_s,
            )
        if not (math.isfinite(agent_timeout_s) and agent_timeout_s > 0):
            raise ConfigurationError(
                f'"agent_timeout_s" must be a positive number of seconds, got {agent_timeout_s!r}',
                value=agent_timeout_s,
            )
        self.period_s = period_s
        self.policy: ClusterPolicy = policy if policy is not None else ClusterPlacement()
        self.agent_timeout_s = agent_timeout_s
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._step_lock = threading.Lock()
        self._nodes: dict[str, NodeReport] = {}
        self._generation = 0
        self._period = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if period_s is not None:
            self._thread = threading.Thread(
                target=self._loop, name="juggle-controller", daemon=True
            )
            self._thread.start()

    # -- the directory ----------------------------------------------------------------------

    def push(self, report: NodeReport) -> int:
        """An agent's newest report (older epochs than the one known are ignored); the
        directory's generation."""
        with self._changed:
            known = self._nodes.get(report.name)
            if known is not None and report.epoch < known.epoch:
                return self._generation
            if (
                known is not None
                and report.epoch == known.epoch
                and known.sampled_at > report.sampled_at
            ):
                return self._generation
            self._nodes[report.name] = report
            if not report.same_state(known):
                self._generation += 1
                self._changed.notify_all()
            return self._generation

    def directory(self) -> Directory:
        """Every node's newest report."""
        with self._lock:
            return Directory(
                self._generation,
                self._period,
                tuple(self._nodes[n] for n in sorted(self._nodes)),
            )

    def wait_generation(self, after: int, timeout: float = 10.0) -> Directory:
        """The directory once its generation is past ``after`` (or after ``timeout`` s)."""
        with self._changed:
            self._changed.wait_for(lambda: self._generation > after, timeout)
        return self.directory()

    def forget(self, node: str) -> bool:
        """Drop ``node`` from the directory (a board taken out of the cluster for good);
        whether it was known."""
        with self._changed:
            gone = self._nodes.pop(node, None) is not None
            if gone:
                self._generation += 1
                self._changed.notify_all()
            return gone

    def periods(self) -> int:
        """Periods run so far."""
        with self._lock:
            return self._period

    # -- the periods --------------------------------------------------------------------------

    def _agent(self, node: str) -> Any:
        import ray

        return ray.get_actor(agent_name(node), namespace=NAMESPACE)

    def _collect(self, names: Iterable[str], boundary: bool) -> list[str]:
        """Ask the agents of ``names`` for a fresh report; the names that did not answer."""
        import ray

        refs: dict[str, Any] = {}
        dead: list[str] = []
        for name in names:
            try:
                refs[name] = self._agent(name).report.remote(boundary)
            except Exception:
                dead.append(name)
        for name, ref in refs.items():
            try:
                self.push(ray.get(ref, timeout=self.agent_timeout_s))
            except Exception as exc:
                logger.warning("node %s: no report (%s)", name, exc)
                dead.append(name)
        with self._changed:
            for name in dead:
                known = self._nodes.get(name)
                if known is not None and known.alive:
                    self._nodes[name] = NodeReport(
                        name=name,
                        alive=False,
                        epoch=known.epoch,
                        address=known.address,
                        sampled_at=time.time(),
                        error="its agent did not answer",
                    )
                    self._generation += 1
                    self._changed.notify_all()
        return dead

    def step(self) -> StepReport:
        """Run one period now (see the module's text); what it did."""
        import ray

        with self._step_lock:
            with self._lock:
                names = sorted(self._nodes)
            dead = self._collect(names, boundary=True)
            with self._lock:
                views = [node_view(self._nodes[n]) for n in sorted(self._nodes)]
            errors: list[str] = []
            try:
                placements: list[Placement] = list(self.policy.decide(views, time.monotonic()))
            except Exception as exc:  # a policy's bug must not stop the loop
                placements = []
                errors.append(f"policy {self.policy!r}: {type(exc).__name__}: {exc}")
            per_node: dict[str, list[tuple[str, bool]]] = {}
            for p in placements:
                per_node.setdefault(p.node, []).append((p.service_key, p.to_hardware))
            refs = {}
            for node, items in per_node.items():
                try:
                    refs[node] = self._agent(node).place.remote(items)
                except Exception as exc:
                    errors.append(f"node {node}: {type(exc).__name__}: {exc}")
            for node, ref in refs.items():
                try:
                    errors += ray.get(ref, timeout=self.agent_timeout_s + 60)
                except Exception as exc:
                    errors.append(f"node {node}: {type(exc).__name__}: {exc}")
            if refs:
                self._collect(sorted(refs), boundary=False)
            with self._changed:
                self._period += 1
                self._generation += 1
                generation = self._generation
                period = self._period
                self._changed.notify_all()
        for message in errors:
            logger.warning("period %d: %s", period, message)
        return StepReport(
            period,
            tuple((p.node, p.service_key, p.to_hardware) for p in placements),
            tuple(errors),
            generation,
            tuple(dead),
        )

    def _loop(self) -> None:
        assert self.period_s is not None
        while not self._stop.wait(self.period_s):
            try:
                self.step()
            except Exception:
                logger.exception("a controller period failed")

    def stop(self) -> None:
        """Stop the actor's own periods (callers may still run :meth:`step`)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(30)


def start_controller(
    period_s: float | None = 5.0,
    policy: ClusterPolicy | None = None,
    *,
    agent_timeout_s: float = 10.0,
    detached: bool = True,
) -> Any:
    """Start the cluster's controller as the detached actor ``juggle_cluster_controller``
    (namespace ``juggle``); one that runs already is returned instead (its settings kept).
    Needs ``ray`` (the ``cluster`` extra) and a connected driver (``ray.init``)."""
    import ray

    actor: Any = ray.remote(ClusterController)
    actor = actor.options(
        name=CONTROLLER_NAME,
        namespace=NAMESPACE,
        get_if_exists=True,
        lifetime="detached" if detached else None,
        num_cpus=0,
        max_concurrency=16,
        max_restarts=-1,
    )
    handle: Any = actor.remote(period_s, policy, agent_timeout_s)
    ray.get(handle.periods.remote(), timeout=60)
    return handle
