"""Seeded traffic for the edge router: flow mixes, stability periods, fluctuation, spikes.

Think of a radio playlist: the station plays one genre (a *flow mix*) for a while (the
*stability period*), every song differs a little from the last (the *fluctuation*), and now and
then a short jingle of another genre cuts in (a *spike*) before the genre returns. A
:class:`TrafficSpec` describes such a playlist; :func:`generate_trace` turns it, with a seed,
into a :class:`Trace`: one packet per line-rate slot, each tagged with its flow, plus the
schedule of periods and spikes an oracle controller may read. The same spec and seed give the
same trace, bit for bit (numpy ``Generator``, PCG64).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from juggle.errors import ConfigurationError

__all__ = [
    "FlowMix",
    "Pace",
    "Segment",
    "Trace",
    "TrafficSpec",
    "canonical_mixes",
    "generate_trace",
]


@dataclass(frozen=True, slots=True)
class FlowMix:
    """Shares of the flows (one per flow, summing to 1), e.g. forward/encrypt/compress 60/20/20.

    Raises :class:`~juggle.errors.ConfigurationError` for a negative share or a sum off 1.
    """

    shares: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.shares or any(s < 0 for s in self.shares):
            raise ConfigurationError(f'"shares" must be non-negative, got {self.shares!r}')
        if abs(sum(self.shares) - 1.0) > 1e-6:
            raise ConfigurationError(f'"shares" must sum to 1, got {self.shares!r}')

    @classmethod
    def percent(cls, *parts: float) -> FlowMix:
        """A mix from percentages: ``FlowMix.percent(60, 20, 20)``."""
        total = float(sum(parts))
        return cls(tuple(p / total for p in parts))

    @property
    def dominant(self) -> int:
        """Index of the flow with the largest share (the first one on a tie)."""
        return max(range(len(self.shares)), key=lambda i: self.shares[i])

    def label(self) -> str:
        """``"60/20/20"``: shares in whole percent."""
        return "/".join(f"{round(s * 100)}" for s in self.shares)


def canonical_mixes(flows: int = 3, dominant_share: float = 0.6) -> tuple[FlowMix, ...]:
    """One mix per flow in which that flow has ``dominant_share`` and the rest split evenly."""
    rest = (1.0 - dominant_share) / (flows - 1)
    return tuple(
        FlowMix(tuple(dominant_share if i == d else rest for i in range(flows)))
        for d in range(flows)
    )


Pace = Callable[[Sequence[float]], float]
"""Packets per second the source sends at for a given mix (its shares)."""


@dataclass(frozen=True, slots=True)
class TrafficSpec:
    """The playlist: how long, how stable, how noisy, how spiky, at what line rate.

    ``stability_s`` is the length of a stability period; consecutive periods use different
    mixes drawn from ``mixes``. Within a period the shares move by up to ``±fluctuation`` every
    ``fluctuation_interval_s``. ``spikes_per_period`` spikes of ``spike_s`` each replace the
    period's mix by another one of ``mixes`` for a while. Packets arrive back to back at
    ``line_rate_pps`` packets per second, or at the rate a *pace* function gives for the mix
    of the moment (see :func:`generate_trace`).
    """

    duration_s: float
    stability_s: float
    line_rate_pps: float
    mixes: tuple[FlowMix, ...]
    fluctuation: float = 0.05
    fluctuation_interval_s: float = 0.5e-3
    spikes_per_period: int = 0
    spike_s: float = 2e-3

    def validate(self) -> None:
        """Raise :class:`~juggle.errors.ConfigurationError` naming the first bad field."""
        positive = {
            "duration_s": self.duration_s,
            "stability_s": self.stability_s,
            "line_rate_pps": self.line_rate_pps,
            "fluctuation_interval_s": self.fluctuation_interval_s,
            "spike_s": self.spike_s,
        }
        for name, value in positive.items():
            if not value > 0:
                raise ConfigurationError(f'"{name}" must be > 0, got {value!r}', value=value)
        if len(self.mixes) < 2:
            raise ConfigurationError(f'"mixes" needs at least two mixes, got {len(self.mixes)}')
        if len({len(m.shares) for m in self.mixes}) != 1:
            raise ConfigurationError('"mixes" must all have the same number of flows')
        if not 0 <= self.fluctuation < 0.5:
            raise ConfigurationError(f'"fluctuation" must be in [0, 0.5), got {self.fluctuation}')
        if self.spikes_per_period < 0:
            raise ConfigurationError(
                f'"spikes_per_period" must be >= 0, got {self.spikes_per_period}'
            )
        if self.spikes_per_period * self.spike_s >= self.stability_s:
            raise ConfigurationError(
                f"{self.spikes_per_period} spikes of {self.spike_s * 1e3:g} ms do not fit in a "
                f"{self.stability_s * 1e3:g} ms stability period",
                value=self.spikes_per_period,
            )


@dataclass(frozen=True, slots=True)
class Segment:
    """A stretch of the schedule with one nominal mix: a stable stretch or a spike.

    ``first`` and ``count`` locate its packets in the trace; ``start_s`` and ``end_s`` its
    arrival window.
    """

    start_s: float
    end_s: float
    mix: FlowMix
    spike: bool
    first: int
    count: int


@dataclass(frozen=True, slots=True)
class Trace:
    """The packets of one generated trace, in arrival order.

    ``flows[i]`` is packet i's flow; it arrives at ``arrival_us[i]`` microseconds.
    ``segments`` is the nominal schedule (what an oracle may know beforehand).
    """

    spec: TrafficSpec
    seed: int
    flows: npt.NDArray[np.int8]
    arrival_us: npt.NDArray[np.float64]
    segments: tuple[Segment, ...]

    @property
    def packets(self) -> int:
        """Number of packets."""
        return int(self.flows.shape[0])

    def counts(self) -> tuple[int, ...]:
        """Packets per flow."""
        k = len(self.spec.mixes[0].shares)
        return tuple(int(c) for c in np.bincount(self.flows, minlength=k))

    @property
    def duration_us(self) -> float:
        """Arrival time of the last packet."""
        return float(self.arrival_us[-1]) if self.packets else 0.0


def generate_trace(spec: TrafficSpec, seed: int, pace: Pace | None = None) -> Trace:
    """Draw the packets of ``spec`` with ``seed``; equal inputs give equal traces.

    The schedule (periods, spikes, fluctuation intervals) is laid out in time; each interval
    holds ``line_rate_pps * length`` packets, or with ``pace`` ``pace(shares) * length``: a
    source that sends as fast as, say, the best configuration of a router can take that mix.

    Raises :class:`~juggle.errors.ConfigurationError` for an invalid spec or a pace that is
    not positive.
    """
    spec.validate()
    rng = np.random.default_rng(seed)
    stretches = _schedule(spec, rng)
    starts, lengths, owner, shares = _intervals(spec, rng, stretches)
    rates = np.full(len(lengths), spec.line_rate_pps)
    if pace is not None:
        rates = np.array([float(pace(tuple(float(x) for x in row))) for row in shares])
        bad = rates[~(rates > 0)]
        if bad.size:
            raise ConfigurationError(f"pace returned {bad[0]!r} packets/s; must be > 0")
    expected = np.concatenate(([0.0], np.cumsum(rates * lengths)))
    bounds = np.rint(expected).astype(np.int64)
    counts = np.diff(bounds)
    n = int(bounds[-1])
    per_packet = np.repeat(np.arange(len(counts)), counts)
    offset = np.arange(n) - bounds[:-1][per_packet]
    arrival_us = (starts[per_packet] + offset * lengths[per_packet] / counts[per_packet]) * 1e6
    cumulative = np.cumsum(shares, axis=1)[per_packet]
    draws = rng.random(n)
    flows = (draws[:, None] >= cumulative[:, :-1]).sum(axis=1).astype(np.int8)
    segments = []
    for i, (a, b, mix, spike) in enumerate(stretches):
        mine = np.flatnonzero(owner == i)
        first = int(bounds[mine[0]])
        count = int(bounds[mine[-1] + 1]) - first
        if count > 0:
            segments.append(Segment(a, b, spec.mixes[mix], spike, first, count))
    return Trace(spec, seed, flows, arrival_us.astype(np.float64), tuple(segments))


Stretch = tuple[float, float, int, bool]


def _schedule(spec: TrafficSpec, rng: np.random.Generator) -> list[Stretch]:
    """Stability periods with their spikes cut in: (start, end, mix index, is spike)."""
    periods = math.ceil(spec.duration_s / spec.stability_s - 1e-9)
    out: list[Stretch] = []
    previous = -1
    for p in range(periods):
        start = p * spec.stability_s
        end = min(spec.duration_s, start + spec.stability_s)
        choice = _other(rng, len(spec.mixes), previous)
        previous = choice
        stretches: list[Stretch] = [(start, end, choice, False)]
        for s_start in _spike_starts(spec, rng, start, end):
            spike_mix = _other(rng, len(spec.mixes), choice)
            stretches = _cut(stretches, s_start, s_start + spec.spike_s, spike_mix)
        out.extend(s for s in stretches if s[1] - s[0] > 1e-12)
    return out


def _other(rng: np.random.Generator, k: int, not_this: int) -> int:
    choices = [i for i in range(k) if i != not_this]
    return choices[int(rng.integers(len(choices)))]


def _spike_starts(
    spec: TrafficSpec, rng: np.random.Generator, start: float, end: float
) -> list[float]:
    """Starts of non-overlapping spikes, spread over the period (one per equal slot)."""
    k = spec.spikes_per_period
    if k == 0 or end - start <= spec.spike_s:
        return []
    slot = (end - start) / k
    room = max(0.0, slot - spec.spike_s)
    return [start + i * slot + float(rng.random()) * room for i in range(k)]


def _cut(stretches: list[Stretch], a: float, b: float, mix: int) -> list[Stretch]:
    out: list[Stretch] = []
    for s, e, m, spike in stretches:
        if b <= s or a >= e:
            out.append((s, e, m, spike))
            continue
        if s < a:
            out.append((s, a, m, spike))
        out.append((max(s, a), min(e, b), mix, True))
        if b < e:
            out.append((b, e, m, spike))
    return out


def _intervals(
    spec: TrafficSpec, rng: np.random.Generator, stretches: Sequence[Stretch]
) -> tuple[
    npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.float64]
]:
    """Cut stretches into fluctuation intervals: starts, lengths (s), owner stretch, shares."""
    starts: list[float] = []
    lengths: list[float] = []
    owner: list[int] = []
    rows: list[npt.NDArray[np.float64]] = []
    step = spec.fluctuation_interval_s
    for i, (a, b, mix, _) in enumerate(stretches):
        base = np.asarray(spec.mixes[mix].shares, dtype=np.float64)
        t = a
        while t < b - 1e-12:
            end = min(b, t + step)
            starts.append(t)
            lengths.append(end - t)
            owner.append(i)
            rows.append(_jitter(base, spec.fluctuation, rng))
            t = end
    return (
        np.asarray(starts),
        np.asarray(lengths),
        np.asarray(owner, dtype=np.int64),
        np.vstack(rows),
    )


def _jitter(
    base: npt.NDArray[np.float64], fluctuation: float, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    if fluctuation == 0:
        return base
    noise = rng.uniform(-fluctuation, fluctuation, size=(base.shape[0],))
    noise -= noise.mean()
    peak = float(np.abs(noise).max())
    if peak > fluctuation:
        noise *= fluctuation / peak
    moved = np.clip(base + noise, 0.0, None)
    result: npt.NDArray[np.float64] = moved / moved.sum()
    return result
