"""``simulate ofdm --plot``: the allocation timeline per region (matplotlib, Agg backend).

One row per region; x is virtual (MODELED) time in ms. In each row a pale bar shows which
tenant's device held (was connected to) the region, a solid bar on it when a job computed
there (hatched when it stopped at a consistency point because it was preempted), a grey
cross-hatched bar a reconfiguration (T_RCFG), and a red line with a triangle each preemption,
from the stop order to the consistency point where the job stopped. Ten seconds of the
experiment hold thousands of jobs, so the figure shows a window (``start_ms``, ``span_ms``).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from juggle.errors import ConfigurationError
from juggle.simulate.ofdm.experiment import OfdmResult
from juggle.simulate.ofdm.shell import Interval, Timeline
from juggle.simulate.plot_files import check_png, save_png

__all__ = ["DEFAULT_SPAN_MS", "figure_ofdm", "plot_ofdm", "window_us"]

DEFAULT_SPAN_MS = 10.0
"""Virtual milliseconds the figure shows unless told otherwise (two real-time periods)."""

_ROW = 1.0
_HELD_H = 0.8
_RUN_H = 0.45
_PREEMPT = "#d62728"
_PALETTE = tuple(f"C{k}" for k in (0, 1, 2, 4, 5, 6, 8, 9, 3))  # no grey: that is T_RCFG


def window_us(timeline: Timeline, start_ms: float, span_ms: float) -> tuple[float, float]:
    """The window ``[start, end)`` in virtual µs, cut at the run's end.

    Raises :class:`~juggle.errors.ConfigurationError` naming the value for a negative start,
    a span that is not > 0, or a start at or past the run's end.
    """
    if not start_ms >= 0:
        raise ConfigurationError(
            f'"--plot-start-ms" must be >= 0, got {start_ms!r}', value=start_ms
        )
    if not span_ms > 0:
        raise ConfigurationError(f'"--plot-span-ms" must be > 0, got {span_ms!r}', value=span_ms)
    start = start_ms * 1e3
    if start >= timeline.end_us:
        raise ConfigurationError(
            f'"--plot-start-ms" {start_ms!r} is not before the run\'s end '
            f"({timeline.end_us / 1e3:g} ms)",
            value=start_ms,
        )
    return start, min(timeline.end_us, start + span_ms * 1e3)


def _visible(interval: Interval, start: float, end: float) -> tuple[float, float] | None:
    """``(x, width)`` in ms of the part of ``interval`` inside the window, if any."""
    lo, hi = max(interval.start_us, start), min(interval.end_us, end)
    if hi <= lo:
        return None
    return lo / 1e3, (hi - lo) / 1e3


def figure_ofdm(
    timeline: Timeline,
    *,
    start_ms: float = 0.0,
    span_ms: float = DEFAULT_SPAN_MS,
    title: str = "Ker-ONE OFDM",
) -> Figure:
    """The allocation timeline of ``timeline`` in the window as a figure (the caller closes
    it). Each bar group is a collection whose gid is ``region:kind:tenant/device`` (kind
    ``held``, ``run``, ``stopped`` or ``rcfg``), each preemption line ``region:preempt``.

    Raises :class:`~juggle.errors.ConfigurationError` for a bad window (:func:`window_us`).
    """
    start, end = window_us(timeline, start_ms, span_ms)
    owners = sorted({(i.tenant, i.device) for i in timeline.intervals if i.kind != "rcfg"})
    colors = {owner: _PALETTE[k % len(_PALETTE)] for k, owner in enumerate(owners)}
    regions = timeline.regions
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.9 * len(regions)))
    try:
        shown: set[tuple[str, str]] = set()
        for row, region in enumerate(regions):
            y = (len(regions) - 1 - row) * _ROW
            groups: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
            for interval in timeline.intervals:
                if interval.region != region:
                    continue
                part = _visible(interval, start, end)
                if part is None:
                    continue
                kind = interval.kind
                if kind == "run" and interval.end == "stopped":
                    kind = "stopped"
                groups.setdefault((kind, interval.tenant, interval.device), []).append(part)
            for (kind, tenant, device), bars in sorted(groups.items()):
                gid = f"{region}:{kind}:{tenant}/{device}"
                if kind == "rcfg":
                    collection = ax.broken_barh(
                        bars,
                        (y - _HELD_H / 2, _HELD_H),
                        facecolors="0.75",
                        edgecolors="0.3",
                        hatch="xxx",
                        linewidth=0.6,
                        zorder=2,
                    )
                elif kind == "held":
                    shown.add((tenant, device))
                    collection = ax.broken_barh(
                        bars,
                        (y - _HELD_H / 2, _HELD_H),
                        facecolors=colors[(tenant, device)],
                        alpha=0.25,
                        linewidth=0,
                        zorder=1,
                    )
                else:
                    shown.add((tenant, device))
                    collection = ax.broken_barh(
                        bars,
                        (y - _RUN_H / 2, _RUN_H),
                        facecolors=colors[(tenant, device)],
                        edgecolors="black",
                        linewidth=0.5,
                        hatch="////" if kind == "stopped" else None,
                        zorder=3,
                    )
                collection.set_gid(gid)
            top = y + _HELD_H / 2
            for stop in timeline.preemptions:
                if stop.region != region or not start <= stop.ordered_us < end:
                    continue
                stopped = stop.ordered_us if stop.stopped_us is None else stop.stopped_us
                xs = [stop.ordered_us / 1e3, min(stopped, end) / 1e3]
                (line,) = ax.plot(
                    xs, [top, top], color=_PREEMPT, lw=2.0, marker="v", ms=6, zorder=4
                )
                line.set_gid(f"{region}:preempt")
        ax.set_yticks([(len(regions) - 1 - r) * _ROW for r in range(len(regions))], regions)
        ax.set_ylim(-_ROW * 0.6, (len(regions) - 1) * _ROW + _ROW * 0.75)
        ax.set_xlim(start / 1e3, end / 1e3)
        ax.set_xlabel("virtual time (ms, MODELED)")
        ax.set_ylabel("region")
        ax.set_title(
            f"{title}: who held each region, {start / 1e3:g}-{end / 1e3:g} ms of "
            f"{timeline.end_us / 1e3:g} ms (MODELED)"
        )
        ax.grid(axis="x", color="0.9", zorder=0)
        handles: list[Patch | Line2D] = [
            Patch(facecolor=colors[owner], edgecolor="black", label=f"{owner[0]} {owner[1]}")
            for owner in owners
            if owner in shown
        ]
        handles += [
            Patch(facecolor="0.6", alpha=0.35, label="pale: connected (held)"),
            Patch(facecolor="white", edgecolor="black", label="solid: job computing"),
            Patch(facecolor="white", edgecolor="black", hatch="////", label="stopped (preempted)"),
            Patch(facecolor="0.75", edgecolor="0.3", hatch="xxx", label="reconfiguration"),
            Line2D([], [], color=_PREEMPT, lw=2, marker="v", label="stop order → stop"),
        ]
        ax.legend(
            handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False
        )
        fig.tight_layout()
    except BaseException:
        plt.close(fig)
        raise
    return fig


def plot_ofdm(
    result: OfdmResult,
    path: Path,
    *,
    start_ms: float = 0.0,
    span_ms: float = DEFAULT_SPAN_MS,
) -> Path:
    """Write the allocation timeline of ``result`` (from
    :func:`~juggle.simulate.ofdm.experiment.run_ofdm`) as a PNG.

    Raises :class:`~juggle.errors.ConfigurationError` naming the path or value for a bad
    path (:func:`~juggle.simulate.plot_files.check_png`), a bad window, or a result without
    a timeline.
    """
    check_png(path)
    if result.timeline is None:
        raise ConfigurationError("this OFDM result has no timeline to draw")
    title = f"Ker-ONE OFDM, seed {result.config.seed}"
    figure = figure_ofdm(result.timeline, start_ms=start_ms, span_ms=span_ms, title=title)
    return save_png(figure, path)
