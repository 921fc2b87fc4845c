"""Figures of the edge-router experiments (matplotlib, Agg backend: no display needed).

Every figure is labelled MODELED: the numbers come from the simulated board, not a board.
:func:`figure_result` builds a figure (tests look at its lines); :func:`plot_result` checks
the path and writes it (:mod:`juggle.simulate.plot_files`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from juggle.simulate.plot_files import check_png, save_png

__all__ = ["figure_result", "plot_result"]

_STYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "D", "v", "P")


def plot_result(result: dict[str, Any], path: Path) -> Path:
    """Write ``result`` of :func:`~juggle.simulate.router.experiments.run_edge_router` as a PNG.

    Raises :class:`~juggle.errors.ConfigurationError` naming ``path`` when it does not end in
    .png, its folder does not exist, or it cannot be written.
    """
    check_png(path)
    return save_png(figure_result(result), path)


def figure_result(result: dict[str, Any]) -> Figure:
    """The figure :func:`plot_result` writes (the caller closes it)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    try:
        if result["experiment"] == "table4":
            _table4(ax, result)
        else:
            _speedup(ax, result)
        fig.tight_layout()
    except BaseException:
        plt.close(fig)
        raise
    return fig


def _table4(ax: Any, result: dict[str, Any]) -> None:
    columns = result["columns"]
    rows = result["rows"]
    width = 0.2
    for r in range(len(rows)):
        for c, column in enumerate(columns):
            x = r + (c - 1.5) * width
            model = result["cells_us"][r * len(columns) + c]
            paper = result["paper_us"][r * len(columns) + c]
            ax.bar(x, model, width * 0.9, color=f"C{c}", label=column if r == 0 else None)
            ax.plot([x - width * 0.45, x + width * 0.45], [paper, paper], "k-", lw=2)
    ax.plot([], [], "k-", lw=2, label="paper (reference)")
    ax.set_xticks(range(len(rows)), rows)
    ax.set_xlabel("distribution forward/encrypt/compress (%)")
    ax.set_ylabel("time for 100 packets (us)")
    ax.set_title("Edge router, Table 4: configurations A, B, C, reconfiguring (MODELED)")
    ax.legend(fontsize=8)


def _speedup(ax: Any, result: dict[str, Any]) -> None:
    xs = result["x"]
    positions = range(len(xs))
    policies = sorted(result["speedup"].items())
    spread = 0.04  # policies that tie would hide each other: each gets its own small offset
    for i, (policy, values) in enumerate(policies):
        shift = (i - (len(policies) - 1) / 2) * spread
        ax.plot(
            [p + shift for p in positions],
            values,
            marker=_MARKERS[i % len(_MARKERS)],
            ls=_STYLES[i % len(_STYLES)],
            lw=2.2 if policy == "adaptive" else 1.4,
            zorder=3 if policy == "adaptive" else 2,
            color=f"C{i}",
            label=policy,
        )
    ax.axhline(1.0, color="grey", lw=1, ls="--", label="static (Config_A)")
    ax.set_xticks(list(positions), [str(x) for x in xs])
    label = {"stability_ms": "network stability (ms)", "spikes_per_period": "spikes per period"}
    ax.set_xlabel(label.get(result["x_label"], result["x_label"]))
    ax.set_ylabel("speedup = T_static / T_policy")
    ax.set_title(f"Edge router, {result['experiment']} (MODELED, seed {result['seed']})")
    ax.legend(fontsize=8)
