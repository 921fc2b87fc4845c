"""A cluster of boards in virtual time: where calls are served under each placement policy.

The model (SimPy, virtual seconds), every board a copy of one board profile (default
``kv260``: two regions, PCAP):

* **Calls** come from the seeded trace of :mod:`.trace` (Poisson arrivals per node, Zipf
  popularity whose hot set rotates). A call is routed the way the cluster proxy routes it, the
  same under every policy: to a region that holds its service (one of the calling node's own,
  or the better of two remote holders picked at random: power of two choices), if the call
  finishes there sooner than in software; otherwise it runs in software on the calling node
  (spilled). A region serves one call at a time, first come first served: a call waits for the
  calls routed there before it. Software calls do not queue (the node has CPU to spare: an
  assumption). A remote call adds the hop time to its latency, not to the region's occupancy.
* **Costs** of :mod:`.trace`: software and hardware µs per call from the TDES model on the
  board profile, the hop from ``rtt_us`` and ``link_bytes_per_s``.
* **Reconfiguration**: loading a region takes the profile's config-port time of the region's
  typical bitstream (``bitstream_bytes``) plus two bridge switches; a board loads one region at
  a time (one config port); a region drains the calls already routed to it before it loads; it
  takes no new calls of the service it drops from the moment the policy drops it.
* **Control**: every ``period_s`` the policy under test (:mod:`juggle.core.cluster`, the very
  objects the cluster controller runs) reads one :class:`~juggle.core.cluster.NodeView` per
  node (its regions with the service each holds or is loading, and the calls its callers made
  to each service over the last period, with the modeled benefit and hardware time of a call)
  and its placements are executed.

Reported per policy: the fraction of calls served by hardware (local or remote), the share
served remotely, mean, p99 and largest latency (µs, waiting included), and the number of
region loads.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Generator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import simpy

from juggle.core.cluster import (
    ClusterPlacement,
    ClusterPolicy,
    NodeView,
    PerBoardPlacement,
    Placement,
    RegionView,
    ServiceView,
    StaticPlacement,
)
from juggle.errors import ConfigurationError, InputLimitError
from juggle.fabric.profiles import BoardProfile, load_profile
from juggle.progress import Progress
from juggle.simulate.cluster.trace import (
    BUFFER_SIZES,
    CallTrace,
    ServiceCosts,
    call_costs_us,
    make_costs,
    make_trace,
)

__all__ = ["MAX_CALLS", "POLICIES", "ClusterConfig", "PolicyResult", "run_cluster", "simulate"]

POLICIES = ("static", "per-board", "cluster")
"""The policies compared, in the order they are reported."""

MAX_CALLS = 20_000_000
"""Bound on the expected calls of one run (nodes x calls_per_s x duration_s)."""


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """The inputs of one run (every field is an input; see the module docstrings).

    ``hot_shift`` 0 means ``max(1, services // 10)``: each rotation moves the hot set to
    services that were a tenth of the ranking further down.
    """

    nodes: int = 16
    services: int = 200
    seed: int = 1
    duration_s: float = 2.0
    board: str = "kv260"
    calls_per_s: float = 500.0
    zipf_s: float = 1.0
    locality: float = 0.5
    hot_shift_s: float = 0.5
    hot_shift: int = 0
    period_s: float = 0.05
    window_periods: int = 4
    margin: float = 0.5
    utilization: float = 0.7
    rtt_us: float = 150.0
    link_bytes_per_s: float = 125e6

    def check(self) -> None:
        """Raise :class:`~juggle.errors.ConfigurationError` naming a bad field (``value``), or
        :class:`~juggle.errors.InputLimitError` when the run would exceed :data:`MAX_CALLS`."""
        ints = {
            "nodes": (1, 4096),
            "services": (1, 100_000),
            "hot_shift": (0, 10**9),
            "window_periods": (1, 1000),
        }
        for name, (low, high) in ints.items():
            value = getattr(self, name)
            if not low <= value <= high:
                raise ConfigurationError(
                    f'"{name}" must be in [{low}, {high}], got {value!r}', value=value
                )
        positive = ("duration_s", "calls_per_s", "hot_shift_s", "period_s", "link_bytes_per_s")
        for name in positive:
            value = getattr(self, name)
            if not (value > 0 and (math.isfinite(value) or name == "hot_shift_s")):
                raise ConfigurationError(
                    f'"{name}" must be a number > 0, got {value!r}', value=value
                )
        for name in ("zipf_s", "margin", "rtt_us"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigurationError(
                    f'"{name}" must be a finite number >= 0, got {value!r}', value=value
                )
        for name, inclusive_zero in (("locality", True), ("utilization", False)):
            value = getattr(self, name)
            low_ok = value >= 0 if inclusive_zero else value > 0
            if not (low_ok and value <= 1):
                raise ConfigurationError(f'"{name}" must be in [0, 1], got {value!r}', value=value)
        expected = self.nodes * self.calls_per_s * self.duration_s
        if expected > MAX_CALLS:
            raise InputLimitError(
                f"{self.nodes} nodes x {self.calls_per_s:g} calls/s x {self.duration_s:g} s = "
                f"{expected:,.0f} calls, more than {MAX_CALLS:,}: shorten --duration",
                value=expected,
            )

    @property
    def shift(self) -> int:
        """Places the rankings rotate by at each hot-set change."""
        return self.hot_shift or max(1, self.services // 10)


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """One policy's run: calls, the fractions served by hardware and remotely, mean, p99 and
    largest latency in µs, region loads, and the placements the policy asked for."""

    calls: int
    hardware_fraction: float
    remote_fraction: float
    mean_us: float
    p99_us: float
    max_us: float
    reconfigurations: int
    placements: int


def reconfig_us(board: BoardProfile) -> float:
    """µs to load a region: the config port's time for its typical bitstream (else its
    largest) plus two bridge switches (close, open); the slowest region of the board."""
    worst = 0.0
    for region in board.regions:
        size = region.bitstream_bytes or region.max_bitstream_bytes
        worst = max(worst, board.config_port.transfer_ps(size) / 1e6)
    return worst + 2 * board.bridge.switch_us


class _Board:
    """Every board's regions in flat lists (region ``r`` is region ``r % k`` of node
    ``r // k``) and the SimPy processes that run one policy over the trace."""

    def __init__(
        self,
        env: simpy.Environment,
        cfg: ClusterConfig,
        board: BoardProfile,
        costs: ServiceCosts,
        trace: CallTrace,
        policy: ClusterPolicy,
    ) -> None:
        self.env, self.cfg, self.costs, self.trace, self.policy = env, cfg, costs, trace, policy
        self.k = len(board.regions)
        self.region_names = [r.name for r in board.regions]
        count = cfg.nodes * self.k
        self.serving = [-1] * count  # the service a region serves calls of now
        self.target = [-1] * count  # the service it holds or is loading (what views show)
        self.free_at = [0.0] * count
        self.generation = [0] * count
        self.holders: dict[int, list[int]] = {}
        self.ports = [simpy.Resource(env, capacity=1) for _ in range(cfg.nodes)]
        self.load_s = reconfig_us(board) / 1e6
        self.node_names = [f"node{n:04d}" for n in range(cfg.nodes)]
        self.node_index = {name: n for n, name in enumerate(self.node_names)}
        self.keys = [f"svc{s:05d}" for s in range(cfg.services)]
        self.key_index = {key: s for s, key in enumerate(self.keys)}
        self.counts: list[dict[int, int]] = [{} for _ in range(cfg.nodes)]
        self.history: deque[list[dict[int, int]]] = deque(maxlen=cfg.window_periods)
        self.latency_us = np.zeros(len(trace))
        self.hardware = 0
        self.remote = 0
        self.reconfigurations = 0
        self.placements = 0

    def source(self) -> Generator[simpy.Event, Any, None]:
        """Serve the trace's calls in time order; between two other events nothing a call
        reads can change, so every call before the next event is served in one go."""
        env, tr, costs = self.env, self.trace, self.costs
        times, node, service, pick1, pick2 = tr.times, tr.node, tr.service, tr.pick1, tr.pick2
        sw_us, hw_us, hop_us = costs.software_us, costs.hardware_us, costs.hop_us
        serving, free_at, holders = self.serving, self.free_at, self.holders
        latency = self.latency_us
        k = self.k
        i, total = 0, len(times)
        hardware = remote = 0
        while i < total:
            if times[i] > env.now:
                yield env.timeout(times[i] - env.now)
            # calls due now go first (so every pass serves at least one), then those before
            # the next event
            limit = max(env.peek(), math.nextafter(env.now, math.inf))
            counts = self.counts  # the controller starts a new period's counts between events
            while i < total and times[i] < limit:
                t, n, s = times[i], node[i], service[i]
                window = counts[n]
                window[s] = window.get(s, 0) + 1
                best = sw_us[s]
                chosen = -1
                held = holders.get(s)
                if held:
                    hw = hw_us[s]
                    base = n * k
                    for r in range(base, base + k):
                        if serving[r] == s:
                            wait = free_at[r] - t
                            lat = (wait * 1e6 if wait > 0 else 0.0) + hw
                            if lat < best:
                                best, chosen = lat, r
                    m = len(held)
                    hop = hw + hop_us[s]
                    for r in (held[int(pick1[i] * m)], held[int(pick2[i] * m)]):
                        if r // k != n:
                            wait = free_at[r] - t
                            lat = (wait * 1e6 if wait > 0 else 0.0) + hop
                            if lat < best:
                                best, chosen = lat, r
                    if chosen >= 0:
                        start = free_at[chosen] if free_at[chosen] > t else t
                        free_at[chosen] = start + hw / 1e6
                        hardware += 1
                        if chosen // k != n:
                            remote += 1
                latency[i] = best
                i += 1
        self.hardware, self.remote = hardware, remote

    def controller(self) -> Generator[simpy.Event, Any, None]:
        """Every period: the nodes' views to the policy, its placements executed."""
        period = self.cfg.period_s
        while True:
            yield self.env.timeout(period)
            self.history.append(self.counts)
            self.counts = [{} for _ in range(self.cfg.nodes)]
            views = self.views(period * len(self.history))
            placements = self.policy.decide(views, self.env.now)
            self.placements += len(placements)
            for p in placements:
                self.execute(p)

    def views(self, window_s: float) -> list[NodeView]:
        """One view per node: its regions' targets and its callers' calls over the last
        ``window_periods`` periods (``window_s``)."""
        costs, keys, k = self.costs, self.keys, self.k
        out = []
        for n, name in enumerate(self.node_names):
            calls: dict[int, int] = {}
            for period in self.history:
                for s, c in period[n].items():
                    calls[s] = calls.get(s, 0) + c
            regions = tuple(
                RegionView(self.region_names[j], None if t < 0 else keys[t])
                for j, t in enumerate(self.target[n * k : n * k + k])
            )
            services = tuple(
                ServiceView(
                    keys[s],
                    c / window_s,
                    costs.software_us[s] - costs.hardware_us[s],
                    True,
                    costs.hardware_us[s],
                )
                for s, c in sorted(calls.items())
            )
            out.append(NodeView(name, regions, services, True))
        return out

    def execute(self, p: Placement) -> None:
        """Carry out one placement on its node (the region chosen as
        :func:`~juggle.core.cluster.apply_placements` chooses it)."""
        n, s = self.node_index[p.node], self.key_index[p.service_key]
        regions = range(n * self.k, n * self.k + self.k)
        if not p.to_hardware:
            r = next(r for r in regions if self.target[r] == s)
            self.target[r] = -1
            self.generation[r] += 1
            if self.serving[r] == s:
                self.serving[r] = -1
                self.holders[s].remove(r)
            return
        r = next(r for r in regions if self.target[r] < 0)
        self.target[r] = s
        self.generation[r] += 1
        self.env.process(self.load(n, r, s, self.generation[r]))

    def load(self, n: int, r: int, s: int, generation: int) -> Generator[simpy.Event, Any, None]:
        """Load ``s`` into region ``r``: wait for the board's config port and for the region
        to drain, then the load itself; dropped if the region was given another job."""
        with self.ports[n].request() as turn:
            yield turn
            if self.generation[r] != generation:
                return
            if self.free_at[r] > self.env.now:
                yield self.env.timeout(self.free_at[r] - self.env.now)
            self.reconfigurations += 1
            yield self.env.timeout(self.load_s)
        if self.generation[r] == generation:
            self.serving[r] = s
            self.holders.setdefault(s, []).append(r)

    def result(self) -> PolicyResult:
        calls = len(self.trace)
        lat = self.latency_us
        return PolicyResult(
            calls=calls,
            hardware_fraction=round(self.hardware / calls, 6) if calls else 0.0,
            remote_fraction=round(self.remote / calls, 6) if calls else 0.0,
            mean_us=round(float(lat.mean()), 3) if calls else 0.0,
            p99_us=round(float(np.percentile(lat, 99)), 3) if calls else 0.0,
            max_us=round(float(lat.max()), 3) if calls else 0.0,
            reconfigurations=self.reconfigurations,
            placements=self.placements,
        )


def make_policy(name: str, cfg: ClusterConfig) -> ClusterPolicy:
    """The policy ``name`` (one of :data:`POLICIES`) with the run's parameters."""
    if name == "static":
        return StaticPlacement()
    if name == "per-board":
        return PerBoardPlacement(margin=cfg.margin)
    if name == "cluster":
        return ClusterPlacement(
            margin=cfg.margin, utilization=cfg.utilization, remote_us=cfg.rtt_us
        )
    raise ConfigurationError(
        f"unknown policy {name!r} (policies: {', '.join(POLICIES)})", value=name
    )


def simulate(
    cfg: ClusterConfig,
    board: BoardProfile,
    costs: ServiceCosts,
    trace: CallTrace,
    policy: ClusterPolicy,
) -> PolicyResult:
    """Run ``policy`` over ``trace`` for ``cfg.duration_s`` virtual seconds."""
    env = simpy.Environment()
    model = _Board(env, cfg, board, costs, trace, policy)
    env.process(model.source())
    env.process(model.controller())
    env.run(until=cfg.duration_s)
    return model.result()


def run_cluster(cfg: ClusterConfig, progress: Progress | None = None) -> dict[str, Any]:
    """Every policy of :data:`POLICIES` over one seeded trace: the JSON document of
    ``juggle simulate cluster``.

    Raises :class:`~juggle.errors.ConfigurationError` for a bad input (a bad field, an unknown
    board: :class:`~juggle.errors.ProfileError`) and :class:`~juggle.errors.InputLimitError`
    for a run too large (:meth:`ClusterConfig.check`).
    """
    cfg.check()
    started = time.perf_counter()
    board = load_profile(cfg.board)
    rng = np.random.default_rng(cfg.seed)
    costs = make_costs(
        board, cfg.services, rng, rtt_us=cfg.rtt_us, link_bytes_per_s=cfg.link_bytes_per_s
    )
    trace = make_trace(
        rng,
        nodes=cfg.nodes,
        services=cfg.services,
        duration_s=cfg.duration_s,
        calls_per_s=cfg.calls_per_s,
        zipf_s=cfg.zipf_s,
        locality=cfg.locality,
        hot_shift_s=cfg.hot_shift_s,
        hot_shift=cfg.shift,
    )
    results: dict[str, dict[str, Any]] = {}
    for done, name in enumerate(POLICIES):
        if progress is not None:
            progress(name, done, len(POLICIES))
        results[name] = asdict(simulate(cfg, board, costs, trace, make_policy(name, cfg)))
    software_only = (
        round(float(np.mean([costs.software_us[s] for s in trace.service])), 3) if trace else 0.0
    )
    return _document(cfg, board, results, software_only, time.perf_counter() - started)


def _document(
    cfg: ClusterConfig,
    board: BoardProfile,
    results: dict[str, dict[str, Any]],
    software_only_us: float,
    wall_s: float,
) -> dict[str, Any]:
    """The run as JSON: inputs, the cost model, each policy's figures, labels and how."""
    per_size = {
        str(size): {
            "software_us": round(sw, 3),
            "hardware_us": round(hw, 3),
            "hop_us": round(hop, 3),
        }
        for size in BUFFER_SIZES
        for sw, hw, hop in [
            call_costs_us(board, size, rtt_us=cfg.rtt_us, link_bytes_per_s=cfg.link_bytes_per_s)
        ]
    }
    inputs = asdict(cfg)
    inputs["hot_shift"] = cfg.shift
    if math.isinf(cfg.hot_shift_s):
        inputs["hot_shift_s"] = None  # the hot set never moves (JSON has no infinity)
    inputs["regions_per_node"] = len(board.regions)
    inputs["buffer_sizes"] = list(BUFFER_SIZES)
    beats = results["cluster"]["hardware_fraction"] > results["per-board"]["hardware_fraction"]
    result_labels = {key: "calibrated" for key in results["cluster"]}
    result_labels["calls"] = "modeled"
    result_labels["placements"] = "calibrated"
    return {
        "scenario": "cluster",
        "modeled": True,
        "inputs": inputs,
        "reconfig_us": round(reconfig_us(board), 3),
        "costs_per_call": per_size,
        "software_only_mean_us": software_only_us,
        "policies": results,
        "cluster_beats_per_board": beats,
        "wall_s": round(wall_s, 3),
        "labels": {
            "inputs": "input",
            "reconfig_us": "modeled",
            "costs_per_call": {
                size: {"software_us": "calibrated", "hardware_us": "modeled", "hop_us": "modeled"}
                for size in per_size
            },
            "software_only_mean_us": "calibrated",
            "policies": {name: dict(result_labels) for name in results},
            "wall_s": "measured",
        },
        "how": {
            "inputs": "input: the command's options and the model's assumptions (see "
            "juggle.simulate.cluster); buffer_sizes: each service draws one (seeded)",
            "reconfig_us": f"modeled: {board.name}'s config port ({board.config_port.kind}) "
            "time for a region's typical bitstream_bytes, plus two bridge switches (profile "
            "inputs)",
            "costs_per_call": "software_us: calibrated: the TDES model's software tier (IBM J9 "
            "JCE), whose block cost is fitted to the Juggle paper (section 6.2, Fig 8), at "
            f"{board.name}'s CPU clock; hardware_us: modeled: the TDES model's hardware-proxied "
            f"tier (proxy, JNI, driver, register sequence) at {board.name}'s bus costs and "
            "clocks (inputs); hop_us: modeled: rtt_us + the buffer there and back at "
            "link_bytes_per_s (inputs)",
            "software_only_mean_us": "calibrated: the mean latency were every call of the "
            "trace run in software (the baseline)",
            "policies": "virtual-time runs of each policy over the same seeded trace: "
            "hardware_fraction and remote_fraction of all calls, latency mean, p99 and max in µs "
            "(queueing at regions included), region loads (reconfigurations) and placements "
            "asked for; calibrated because the software cost in every comparison is (nothing "
            "was fitted to any cluster figure); calls: modeled (the seeded trace's draw)",
            "wall_s": "measured: wall time of the whole run on this machine",
        },
    }
