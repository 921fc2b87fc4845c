"""``simulate sort --plot``: the ReconOS sort result (paper Fig 4c) as stacked bars.

One bar per configuration (SW, HW, SW+HW): the sort stage below, the merge stage on top,
each segment labeled with its milliseconds and the total above the bar. The tick labels say
which figures are measured and which modeled (as the table's caption does) and how the chunks
were split.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from juggle.simulate.plot_files import check_png, save_png

__all__ = ["KIND", "figure_sort", "plot_sort"]

KIND = {
    "SW": "sort measured",
    "HW": "sort modeled (fabric)\n+ measured OS calls",
    "SW+HW": "sort on one timeline:\nmeasured SW + modeled HW",
}
"""What the sort segment of each bar is, in the words of the sort's ``labels``."""

_RUNS = ("SW", "HW", "SW+HW")


def figure_sort(result: dict[str, Any]) -> Figure:
    """The figure of ``result`` (from :func:`~juggle.simulate.reconos.sort.run_sort`); the caller
    closes it. Its bars carry gids ``RUN:sort`` and ``RUN:merge``."""
    runs = result["runs"]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    try:
        names = [name for name in _RUNS if name in runs]
        top = max(runs[n]["sort_ms"] + runs[n]["merge_ms"] for n in names)
        for x, name in enumerate(names):
            run = runs[name]
            sort_ms, merge_ms = run["sort_ms"], run["merge_ms"]
            (low,) = ax.bar(
                x, sort_ms, 0.6, color="C0", edgecolor="black", label="sort" if x == 0 else None
            )
            (high,) = ax.bar(
                x,
                merge_ms,
                0.6,
                bottom=sort_ms,
                color="C1",
                edgecolor="black",
                label="merge (measured)" if x == 0 else None,
            )
            low.set_gid(f"{name}:sort")
            high.set_gid(f"{name}:merge")
            ax.text(x, sort_ms / 2, f"{sort_ms:.1f}", ha="center", va="center", fontsize=8)
            ax.text(x + 0.32, sort_ms + merge_ms / 2, f"{merge_ms:.1f}", va="center", fontsize=8)
            total = f"{sort_ms + merge_ms:.1f} ms"
            if not run["verified"]:
                total += "\nNOT VERIFIED"
            ax.text(x, sort_ms + merge_ms + top * 0.02, total, ha="center", va="bottom")
        ticks = [
            f"{n}\n{KIND[n]}\nchunks SW/HW {runs[n]['chunks_sw']}/{runs[n]['chunks_hw']}"
            for n in names
        ]
        ax.set_xticks(range(len(names)), ticks, fontsize=8)
        ax.set_ylim(0, top * 1.18)
        ax.set_ylabel("time (ms)")
        ax.set_title(
            f"ReconOS sort (Fig 4c): {result['size']:,} words in {result['chunks']} chunks, "
            f"seed {result['seed']}",
            fontsize=10,
        )
        ax.legend(fontsize=8, loc="upper right")
        fig.tight_layout()
    except BaseException:
        plt.close(fig)
        raise
    return fig


def plot_sort(result: dict[str, Any], path: Path) -> Path:
    """Write :func:`figure_sort` of ``result`` as a PNG.

    Raises :class:`~juggle.errors.ConfigurationError` naming ``path`` when it is not a
    writable .png path (:func:`~juggle.simulate.plot_files.check_png`).
    """
    check_png(path)
    return save_png(figure_sort(result), path)
