"""``juggle simulate ofdm``: Ker-ONE's OFDM experiment (paper 6.1) in virtual time.

A real-time tenant (2 tasks, native programming model) and a general-purpose tenant (3 tasks,
aware model) periodically push 18,800-bit frames through a QAM mapper and then an FFT on the
zedboard's three regions. The tasks pick QAM16 or QAM64 and FFT512 or FFT1024 per period, as
an adaptive receiver would, so all four accelerators contend for the regions and every solution
path of Fig 15 occurs. A device may only stop at a consistency point, between its data frames
(for the FFTs: between transforms, so the wait is at most Table 5's δ_pre); its context is
saved and restored by its own routine; the preempted rest becomes a request of its own.

Every key of the JSON document is labeled (``labels``, with ``how`` for the derived ones):

* input (copied from the paper or the profile): hardware frame times (Table 6's T_HW), δ_pre
  (Table 5), Table 4's atomic overheads, Table 6's software times, the run's configuration;
* modeled (virtual time, reproducible from the seed): T_RCFG per region, derived from bitstream
  sizes by the profile's stated rule (share of the device x full bitstream) through the PCAP,
  with Table 5's value and the deviation beside (``t_rcfg_derivation``); the path overheads of
  Eq. 6 (Table 4 summed along Fig 15); latencies, counts, WCET (Eq. 5-8), deadline misses;
* measured (this machine's wall clock, keys ending in ``_measured``): how long our decision
  core took per call, and the NumPy software implementations per frame.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Generator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import simpy

from juggle.core.allocator import Allocator
from juggle.core.taskindex import TaskIndex
from juggle.core.tenants import DeviceState, ProgrammingModel
from juggle.errors import ConfigurationError
from juggle.fabric.profiles import load_profile
from juggle.progress import Progress
from juggle.simulate.fidelity import comparison
from juggle.simulate.ofdm.costs import (
    KERNEL_US,
    PATH_US,
    T_SW_US,
    TABLE5_T_RCFG_US,
    apply_bitstream_rule,
    derive_t_rcfg,
    wcet,
)
from juggle.simulate.ofdm.dsp import measure_software
from juggle.simulate.ofdm.shell import Allocation, OfdmFabric, Timeline

__all__ = ["PAPER_PATH_US", "OfdmConfig", "OfdmResult", "run_ofdm"]

RT = "rtos"
GP = "gpos"
_SLICES = 50  # progress reports per run
_QAMS = ("qam16", "qam64")
_FFTS = ("fft512", "fft1024")


@dataclass(frozen=True, slots=True)
class OfdmConfig:
    """Parameters of one run (times in µs of virtual time, ``duration_s`` in virtual s).

    Real-time tasks have an implicit deadline of one period. ``gp_fallback``: when the aware
    general-purpose tenant is preempted and its rest cannot be placed at once, it finishes the
    frames in software (Table 6's ARM time) instead of waiting.
    """

    seed: int = 1
    duration_s: float = 10.0
    rt_tasks: int = 2
    gp_tasks: int = 3
    rt_period_us: float = 5_000.0
    gp_period_us: float = 1_000.0
    max_frames: int = 6
    rt_max_frames: int = 3
    rt_fixed_devices: bool = True
    hold_us: float = 100.0
    gp_fallback: bool = False
    profile: str = "zedboard"

    def check(self) -> None:
        """Raises :class:`~juggle.errors.ConfigurationError` naming the first bad field."""
        positive = {
            "duration_s": self.duration_s,
            "rt_period_us": self.rt_period_us,
            "gp_period_us": self.gp_period_us,
            "max_frames": self.max_frames,
            "rt_max_frames": self.rt_max_frames,
        }
        for name, value in positive.items():
            if not value > 0:
                raise ConfigurationError(f'"{name}" must be > 0; got {value}', value=value)
        for name, count in (("rt_tasks", self.rt_tasks), ("gp_tasks", self.gp_tasks)):
            if count < 0:
                raise ConfigurationError(f'"{name}" must be >= 0; got {count}', value=count)
        if not self.hold_us > max(PATH_US.values()):
            raise ConfigurationError(
                f'"hold_us" must exceed the longest path overhead ({max(PATH_US.values())} us) '
                f"so a READY region is still held when its task resumes; got {self.hold_us}",
                value=self.hold_us,
            )


@dataclass(frozen=True, slots=True)
class OfdmResult:
    """The outcome of :func:`run_ofdm`: ``modeled`` (reproducible) and ``measured`` parts,
    and the ``timeline`` of who held each region when (modeled; not in the JSON document)."""

    config: OfdmConfig
    modeled: dict[str, Any]
    measured: dict[str, Any]
    timeline: Timeline | None = field(default=None, compare=False, repr=False)

    def to_json(self, *, include_measured: bool = True) -> dict[str, Any]:
        """One JSON-able document. Measured figures sit under keys ending in ``_measured``
        (inside ``paths`` too) and under ``measured``; ``include_measured=False`` drops them,
        leaving exactly what the seed reproduces."""
        doc: dict[str, Any] = {"scenario": "ofdm", "config": asdict(self.config)}
        doc.update(self.modeled)
        labels = {key: _LABELS[key] for key in doc}
        derivation = self.modeled["t_rcfg_derivation"].values()
        rcfg_labels = {d["labels"]["t_rcfg_us"] for d in derivation}
        if rcfg_labels != {"modeled"}:  # no rule in the profile: its sizes are inputs
            labels["t_rcfg_us"] = "input"
        if include_measured:
            doc["paths"] = {
                name: {**entry, **self.measured["paths"][name]}
                for name, entry in self.modeled["paths"].items()
            }
            doc["measured"] = {k: v for k, v in self.measured.items() if k != "paths"}
            labels["measured"] = "measured"
            for key in self.measured["paths"]["path1"]:
                labels[f"paths.*.{key}"] = "measured"
        rows = _paper_comparison(self.modeled)
        if rows:
            doc["paper_comparison"] = rows
            labels["paper_comparison"] = "input"  # each row labels its own figures
        doc["labels"] = labels
        doc["how"] = {key: text for key, text in _HOW.items() if key in doc}
        return doc


PAPER_PATH_US: dict[str, float] = {"path1": 3.03, "path2": 6.76, "path3": 5.10, "path4": 9.96}
"""Eq. 6's constants of the four solution paths, µs (input: the paper's own sums of Table 4)."""


def _paper_comparison(modeled: dict[str, Any]) -> list[dict[str, Any]]:
    """Table 5's T_RCFG (where the profile's bitstream rule derives ours: modeled; sizes the
    profile states are not compared) and Eq. 6's path constants beside ours."""
    rows = []
    for region, entry in modeled["t_rcfg_derivation"].items():
        if entry["paper_us"] is None or entry["labels"]["t_rcfg_us"] != "modeled":
            continue
        rows.append(
            comparison(
                f"Table 5 T_RCFG {region}",
                f"t_rcfg_derivation.{region}.t_rcfg_us",
                float(entry["paper_us"]),
                float(entry["t_rcfg_us"]),
                "modeled",
                unit="us",
                uses={
                    "share_pct": "input",
                    "full_bitstream_bytes": "input",
                    "port_bytes_per_s": "input",
                },
                note="the share's +-0.5 % rounding gives "
                f"{entry['share_interval_us'][0]}..{entry['share_interval_us'][1]} us",
            )
        )
    for path, paper in PAPER_PATH_US.items():
        rows.append(
            comparison(
                f"Eq. 6 T_{path.capitalize()} constant",
                f"path_overhead_us.{path}",
                paper,
                float(modeled["path_overhead_us"][path]),
                "modeled",
                unit="us",
                uses={"kernel_overhead_us": "input"},
                note="Table 4's steps (input) summed along Fig 15's path: the paper's own sum",
            )
        )
    return rows


_LABELS: dict[str, str] = {
    "scenario": "input",
    "config": "input",
    "profile": "input",
    "virtual_s": "modeled",
    "paths": "modeled",
    "rt_paths": "modeled",
    "unavailable": "modeled",
    "requests": "modeled",
    "preemptions": "modeled",
    "reconfigurations": "modeled",
    "hold_expiries": "modeled",
    "t_rcfg_us": "modeled",
    "t_rcfg_derivation": "modeled",
    "delta_pre_us": "input",
    "hardware_frame_us": "input",
    "kernel_overhead_us": "input",
    "path_overhead_us": "modeled",
    "wcet_us": "modeled",
    "wcet_detail": "modeled",
    "rt_jobs": "modeled",
    "rt_deadline_misses": "modeled",
    "rt_response_max_us": "modeled",
    "gp_jobs": "modeled",
    "frames": "modeled",
    "gp_software_fallbacks": "modeled",
    "signals": "modeled",
    "context_mismatches": "modeled",
    "violations": "modeled",
    "software_frame_us_paper": "input",
}
"""The label of every key :meth:`OfdmResult.to_json` can write (measured ones are added
there)."""

_HOW: dict[str, str] = {
    "t_rcfg_us": "bitstream bytes / PCAP throughput; the bytes follow the profile's "
    "[scenario.bitstream_rule]: round(share / 100 x full_bitstream_bytes) (details and "
    "Table 5's values in t_rcfg_derivation)",
    "t_rcfg_derivation": "per region: share (input, paper 6.3), full bitstream bytes (input, "
    "UG470), the rule's size, port throughput (input), T_RCFG, Table 5's T_RCFG (input) and the "
    "deviation; share_interval_us is T_RCFG at share +- the paper's rounding",
    "delta_pre_us": "copied from Table 5 through the profile's preempt_us (not derived)",
    "hardware_frame_us": "copied from Table 6's T_HW through the profile's frame_us (not derived)",
    "kernel_overhead_us": "Table 4's atomic overheads, copied",
    "path_overhead_us": "Table 4's steps summed along Fig 15's paths; the paper's Eq. 6 is the "
    "same sum, so the two agree by construction",
    "wcet_us": "Eq. 5-8 from δ_pre (input), the derived T_RCFG and the path overheads",
    "paths": "virtual time from solution to READY (Eq. 6 as it happened)",
    "software_frame_us_paper": "Table 6's T_SW, copied",
}


def run_ofdm(
    seed: int = 1,
    duration_s: float | None = None,
    *,
    config: OfdmConfig | None = None,
    software_repeats: int = 9,
    progress: Progress | None = None,
) -> OfdmResult:
    """Run the OFDM experiment; ``seed`` and ``duration_s`` override ``config``'s.

    Same seed (and config) → the same ``modeled`` part, bit for bit, with or without
    ``progress``. ``software_repeats`` sets how often each NumPy implementation is timed (0
    skips the measurement). ``progress`` is called with the virtual milliseconds simulated
    so far and in all, then once more when the software measurement is done.

    Raises :class:`~juggle.errors.ConfigurationError` for a bad config and
    :class:`~juggle.errors.ProfileError` for an unknown profile.
    """
    base = config or OfdmConfig()
    cfg = OfdmConfig(
        **{
            **asdict(base),
            "seed": seed,
            "duration_s": base.duration_s if duration_s is None else duration_s,
        }
    )
    cfg.check()
    wall0 = time.perf_counter()
    sim = _Experiment(cfg)
    sim.run(progress)
    wall = time.perf_counter() - wall0
    timeline = sim.fabric.close_timeline()
    total_ms = round(sim.end_us / 1e3)
    if software_repeats > 0 and progress is not None:
        progress("timing the software (NumPy)", total_ms, total_ms + 1)
    software = measure_software(software_repeats, cfg.seed) if software_repeats > 0 else {}
    if progress is not None:
        progress("done", total_ms + 1, total_ms + 1)
    return OfdmResult(cfg, sim.modeled(), sim.measured(wall, software), timeline)


class _Experiment:
    def __init__(self, cfg: OfdmConfig) -> None:
        self.cfg = cfg
        profile = apply_bitstream_rule(load_profile(cfg.profile))
        paper = TABLE5_T_RCFG_US if profile.name == "zedboard" else None
        self.rcfg = derive_t_rcfg(profile, paper)
        self.index = TaskIndex.from_profile(profile)
        self.env = simpy.Environment()
        self.alloc = Allocator(self.index, hold_us=cfg.hold_us)
        self.alloc.add_tenant(RT, realtime=True, model=ProgrammingModel.NATIVE)
        self.alloc.add_tenant(GP, model=ProgrammingModel.AWARE)
        self.fabric = OfdmFabric(self.env, self.alloc)
        self.locks = {
            (t, d.name): simpy.Resource(self.env, capacity=1)
            for t in (RT, GP)
            for d in self.index.devices
        }
        self.end_us = cfg.duration_s * 1e6
        self.rt_jobs = 0
        self.rt_misses = 0
        self.rt_response: list[float] = []
        self.gp_jobs = 0
        self.frames: dict[str, int] = {d.name: 0 for d in self.index.devices}
        self.software_frames = 0
        self.hardware_starts = 0
        self._job_ids = 0

    def run(self, progress: Progress | None = None) -> None:
        master = random.Random(self.cfg.seed)
        for k in range(self.cfg.rt_tasks):
            phase = master.uniform(0, self.cfg.rt_period_us)
            rng = random.Random(master.getrandbits(64))
            fixed = (_QAMS[k % 2], _FFTS[k % 2]) if self.cfg.rt_fixed_devices else None
            self.env.process(self._task(RT, self.cfg.rt_period_us, phase, rng, fixed))
        for _ in range(self.cfg.gp_tasks):
            phase = master.uniform(0, self.cfg.gp_period_us)
            rng = random.Random(master.getrandbits(64))
            self.env.process(self._task(GP, self.cfg.gp_period_us, phase, rng, None))
        if progress is None:
            self.env.run(until=self.end_us)
            return
        # In slices: each pause is one more event at its time, ahead of the others there, so
        # the other events run in the same order; the last slice starts past half the end,
        # so now + (end - now) is exactly end (Sterbenz) and the run ends where it would.
        total_ms = round(self.end_us / 1e3)
        for k in range(1, _SLICES + 1):
            until = self.end_us if k == _SLICES else self.end_us * k / _SLICES
            if until > self.env.now:
                self.env.run(until=until)
            progress(f"virtual ms {round(until / 1e3)}", round(until / 1e3), total_ms + 1)

    # -- tasks ---------------------------------------------------------------------------

    def _task(
        self,
        tenant: str,
        period: float,
        phase: float,
        rng: random.Random,
        fixed: tuple[str, str] | None,
    ) -> Generator[simpy.Event, Any, None]:
        """One periodic task: each period a burst of frames through a QAM, then an FFT."""
        most = self.cfg.rt_max_frames if tenant == RT else self.cfg.max_frames
        release = phase
        while release < self.end_us:
            if release > self.env.now:
                yield self.env.timeout(release - self.env.now)
            frames = rng.randint(1, most)
            stages = fixed or (rng.choice(_QAMS), rng.choice(_FFTS))
            for device in stages:
                yield from self._job(tenant, device, frames)
            if tenant == RT:
                self.rt_jobs += 1
                self.rt_response.append(self.env.now - release)
                if self.env.now > release + period:
                    self.rt_misses += 1
            else:
                self.gp_jobs += 1
            release += period
            if tenant == GP and release < self.env.now:  # an overrun skips missed releases
                release += period * ((self.env.now - release) // period + 1)

    def _job(self, tenant: str, device: str, frames: int) -> Generator[simpy.Event, Any, None]:
        with self.locks[(tenant, device)].request() as lock:
            yield lock
            spec = self.index.device(device)
            total = frames * spec.frame_us
            chunk = spec.preempt_us if 0 < spec.preempt_us < total else total
            chunks = max(1, -(-round(total * 1000) // round(chunk * 1000)))
            self._job_ids += 1
            job_id = self._job_ids
            key = (tenant, device)
            while True:
                region = yield from self._acquire(key)
                done = self.fabric.progress(region, job_id)
                self.hardware_starts += 1
                self.fabric.call(self.alloc.start, tenant, device, self.env.now)
                self.fabric.run_started(region, tenant, device, job_id)
                stop_at = yield from self._run(region, total, chunk, chunks, done)
                self.fabric.run_ended(region, "done" if stop_at is None else "stopped")
                self.fabric.record_progress(region, job_id, chunks if stop_at is None else stop_at)
                self.fabric.consistency_point(region)
                if stop_at is None:
                    self.fabric.call(self.alloc.finish, tenant, device, self.env.now)
                    self.frames[device] += frames
                    return
                self.fabric.call(self.alloc.stopped, region, self.env.now)
                done = stop_at
                if self._fallback(key):
                    rest = (chunks - done) / chunks * frames
                    yield self.env.timeout(rest * T_SW_US[device])
                    self.software_frames += 1
                    self.frames[device] += frames
                    return

    def _run(
        self, region: str, total: float, chunk: float, chunks: int, done: int
    ) -> Generator[simpy.Event, Any, int | None]:
        """Run the job from chunk ``done`` on; a stop order (an interrupt from the shell)
        makes it run on to its next consistency point. Returns the chunk it stopped at, or
        None if it ran to the end."""
        start = self.env.now
        remaining = total - done * chunk
        if self.fabric.stop_flag[region]:  # ordered while starting: stop right here
            return done
        task = self.env.active_process
        assert task is not None
        self.fabric.running[region] = task
        try:
            yield self.env.timeout(remaining)
            return None
        except simpy.Interrupt:
            elapsed = self.env.now - start
            reached = int(elapsed // chunk) + 1
            if done + reached >= chunks:
                yield self.env.timeout(remaining - elapsed)
                return None
            yield self.env.timeout(reached * chunk - elapsed)
            return done + reached
        finally:
            self.fabric.running.pop(region, None)

    def _acquire(self, key: tuple[str, str]) -> Generator[simpy.Event, Any, str]:
        """Make sure ``key``'s device is connected (requesting it if needed); its region."""
        state = self.alloc.device_state(*key)
        if state is DeviceState.DISCONNECTED:
            self.fabric.request(*key)
            state = self.alloc.device_state(*key)
        if state is not DeviceState.CONNECTED or self.fabric.awaiting(key):
            yield self.fabric.ready_event(key)
            self.fabric.consume_ready(key)
        region = self.alloc.connected_region(*key)
        assert region is not None, key
        return region

    def _fallback(self, key: tuple[str, str]) -> bool:
        """Aware tenant, preempted, rest not placed at once: withdraw and go to software."""
        preempted = self.fabric.take_preempted(key)
        if not (self.cfg.gp_fallback and preempted and key[0] == GP):
            return False
        if self.alloc.device_state(*key) is not DeviceState.WAITING:
            return False
        self.fabric.call(self.alloc.release, key[0], key[1], self.env.now)
        return True

    # -- results ---------------------------------------------------------------------------

    def modeled(self) -> dict[str, Any]:
        stats = self.alloc.statistics()
        done = self.fabric.done
        return {
            "profile": self.cfg.profile,
            "virtual_s": self.env.now / 1e6,
            "paths": {
                f"path{p}": _path_stats([a for a in done if a.path == p], p) for p in (1, 2, 3, 4)
            },
            "rt_paths": {
                f"path{p}": _path_stats([a for a in done if a.path == p and a.tenant == RT], p)
                for p in (1, 2, 3, 4)
            },
            "unavailable": stats.paths[0],
            "requests": stats.requests,
            "preemptions": stats.preemptions,
            "reconfigurations": stats.reconfigurations,
            "hold_expiries": stats.hold_expiries,
            "t_rcfg_us": {r.name: _rcfg_of(self.index, r.name) for r in self.index.regions},
            "t_rcfg_derivation": {name: d.to_json() for name, d in self.rcfg.items()},
            "delta_pre_us": {d.name: d.preempt_us for d in self.index.devices},
            "hardware_frame_us": {d.name: d.frame_us for d in self.index.devices},
            "kernel_overhead_us": dict(KERNEL_US),
            "path_overhead_us": {f"path{p}": PATH_US[p] for p in (1, 2, 3, 4)},
            "wcet_us": {d.name: wcet(self.index, d.name).wcet_us for d in self.index.devices},
            "wcet_detail": {d.name: _wcet_detail(self.index, d.name) for d in self.index.devices},
            "rt_jobs": self.rt_jobs,
            "rt_deadline_misses": self.rt_misses,
            "rt_response_max_us": round(max(self.rt_response, default=0.0), 3),
            "gp_jobs": self.gp_jobs,
            "frames": dict(self.frames),
            "gp_software_fallbacks": self.software_frames,
            "signals": dict(sorted(self.fabric.counters.signals.items())),
            "context_mismatches": self.fabric.counters.context_mismatches,
            "violations": len(self.fabric.counters.violations),
            "software_frame_us_paper": dict(T_SW_US),
        }

    def measured(self, wall_s: float, software: dict[str, float]) -> dict[str, Any]:
        done = self.fabric.done
        paths = {}
        for p in (1, 2, 3, 4):
            ns = [a.decision_ns_measured for a in done if a.path == p]
            paths[f"path{p}"] = {
                "decision_us_measured": _mean_us(ns),
                "decision_p99_us_measured": _p99_us(ns),
            }
        unavailable = self.fabric.counters.unavailable_ns_measured
        return {
            "paths": paths,
            "unavailable_decision_us_measured": _mean_us(unavailable),
            "software_frame_us_measured": {k: round(v, 3) for k, v in software.items()},
            "wall_s_measured": round(wall_s, 3),
        }


def _rcfg_of(index: TaskIndex, region: str) -> float:
    times = {
        t.t_rcfg_us for d in index.devices for t in index.compatible(d.name) if t.region == region
    }
    return round(max(times, default=0.0), 3)


def _wcet_detail(index: TaskIndex, device: str) -> dict[str, Any]:
    w = wcet(index, device)
    return {
        "t_preempt_wcet_us": w.t_preempt_wcet_us,
        "t_rcfg_wcet_us": w.t_rcfg_wcet_us,
        "path_us": list(w.path_us),
    }


def _path_stats(allocations: Sequence[Allocation], path: int) -> dict[str, Any]:
    if not allocations:
        return {"count": 0, "min_us": 0.0, "mean_us": 0.0, "max_us": 0.0}
    latency = [a.latency_us for a in allocations]
    queued = [a.queued_us for a in allocations]
    entry: dict[str, Any] = {
        "count": len(allocations),
        "min_us": round(min(latency), 3),
        "mean_us": round(statistics.fmean(latency), 3),
        "max_us": round(max(latency), 3),
        "overhead_us": PATH_US[path],
        "queued_mean_us": round(statistics.fmean(queued), 3),
        "queued_max_us": round(max(queued), 3),
        "queued_count": sum(1 for q in queued if q > 0),
    }
    if path in (3, 4):
        waits = [a.preempt_us for a in allocations]
        entry["preempt_mean_us"] = round(statistics.fmean(waits), 3)
        entry["preempt_max_us"] = round(max(waits), 3)
    if path in (2, 4):
        entry["rcfg_mean_us"] = round(statistics.fmean(a.rcfg_us for a in allocations), 3)
    return entry


def _mean_us(ns: Sequence[int]) -> float:
    return round(statistics.fmean(ns) / 1000.0, 3) if ns else 0.0


def _p99_us(ns: Sequence[int]) -> float:
    if not ns:
        return 0.0
    ordered = sorted(ns)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] / 1000.0, 3)
