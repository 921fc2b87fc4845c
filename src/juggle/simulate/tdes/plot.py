"""Fig 7 of the Juggle paper: TDES throughput per tier against the buffer size (matplotlib,
Agg backend: no display needed).

The figure is labelled MODELED: the numbers come from the simulated board, not a board.
:func:`figure_tdes` builds it (tests look at its lines); :func:`plot_tdes` checks the path and
writes it (:mod:`juggle.simulate.plot_files`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import ScalarFormatter

from juggle.simulate.plot_files import check_png, save_png

__all__ = ["figure_tdes", "plot_tdes"]

_MARKERS = ("o", "s", "^", "D", "v", "P")


def plot_tdes(doc: dict[str, Any], path: Path) -> Path:
    """Write Fig 7 (TDES throughput per tier against the buffer size, from
    :func:`~juggle.simulate.tdes.model.run_tdes`) as a PNG; with ``hardware="rtl"`` the hardware
    curves counted on the Verilog are drawn beside the model's, dotted.

    Raises :class:`~juggle.errors.ConfigurationError` naming ``path`` when it does not end in
    .png, its folder does not exist, or it cannot be written.
    """
    check_png(path)
    return save_png(figure_tdes(doc), path)


def figure_tdes(doc: dict[str, Any]) -> Figure:
    """The figure :func:`plot_tdes` writes (the caller closes it)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    try:
        sizes = doc["sizes"]
        for i, (tier, values) in enumerate(doc["throughput_mb_s"].items()):
            ax.plot(sizes, values, marker=_MARKERS[i % len(_MARKERS)], color=f"C{i}", label=tier)
            rtl = doc.get("throughput_mb_s_rtl", {}).get(tier)
            if rtl is not None:
                ax.plot(sizes, rtl, ls=":", lw=2.5, color=f"C{i}", label=f"{tier} (RTL)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(ScalarFormatter())
        ax.set_xlabel("buffer size (bytes)")
        ax.set_ylabel("throughput (MB/s)")
        ax.set_title(f"TDES throughput per tier on {doc['board']}, Juggle Fig 7 (MODELED)")
        ax.legend(fontsize=8)
        fig.tight_layout()
    except BaseException:
        plt.close(fig)
        raise
    return fig
