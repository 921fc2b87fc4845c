"""Which seeds the adaptive controller was tuned on, which it never saw, and what it meets on
the unseen ones (issue 22, item 4).

* :data:`TRAINING_SEEDS`: the seeds its constants (``memory_s``, ``unstable``, ``horizon``,
  the spike and real-change rules) were tuned on, Figs 3a, 3b and 4 of the edge-router paper;
* :data:`SEEN_SEEDS`: seeds whose results were looked at after tuning (seed 12 in
  ``docs/edge-router.md``, seeds 15, 17, 21, 30 and 42 in issue 22): not tuned on, but no
  longer unseen, so not held out either;
* :data:`HELD_OUT_SEEDS`: 100-149, never used for tuning. A point ``i`` of a figure runs the
  trace seed ``seed + 7919 * i`` (:func:`~juggle.simulate.router.experiments.figure_point`),
  so no held-out trace is a training trace (:func:`trace_seeds`).

The line issue 12 asked for, "adaptive >= 1.0 and >= max(distribution, fifo) - 2 %" at every
point, holds on the training seeds but not on every held-out one: on seeds 100-149 (50 seeds x
14 points) adaptive is >= 1.0 everywhere and within 2 % of the better manager at 693 of the 700
points, on 43 of the 50 seeds; the worst point is seed 122, Fig 4 with 4 spikes, 3.18 % under
fifo. The bound it does meet, :data:`HELD_OUT_BOUND`, is what the tests and ``make sweep``
check. Percentages are of the static system's speed: a margin of -0.02 is a speedup 0.02 below
the better manager's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from juggle.simulate.router.experiments import FIGURES

TRAINING_SEEDS: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8, 11, 23)
"""Seeds the adaptive controller's constants were tuned on."""
SEEN_SEEDS: tuple[int, ...] = (12, 15, 17, 21, 30, 42)
"""Seeds whose results were read after tuning: neither training nor held out."""
HELD_OUT_SEEDS: tuple[int, ...] = tuple(range(100, 150))
"""Seeds never used for tuning: the held-out set."""
HELD_OUT_FIGURES: tuple[str, ...] = ("fig3a", "fig3b", "fig4")
"""The controller experiments of the paper: every point of each is checked."""
HELD_OUT_POLICIES: tuple[str, ...] = ("distribution", "fifo", "adaptive")

LINE = 0.02
"""The line as written: adaptive >= max(distribution, fifo) - 0.02 (and >= 1.0)."""
HELD_OUT_BOUND = 0.032
"""The bound adaptive meets on every held-out point: >= max(distribution, fifo) - 0.032
(worst: -0.0318, seed 122, Fig 4, 4 spikes) and >= 1.0 (lowest: 1.0006, seed 143, Fig 3b, 5 ms).
"""
HELD_OUT_WORST: tuple[tuple[int, str, int], ...] = (
    (122, "fig4", 3),
    (118, "fig4", 7),
    (125, "fig4", 6),
    (142, "fig3b", 0),
    (133, "fig4", 6),
    (137, "fig4", 0),
    (149, "fig4", 0),
    (143, "fig3b", 0),
)
"""The seven held-out points below the line, worst first, then the one closest to 1.0, as
(seed, figure, point index). They decide the bound, so the suite runs them."""


def trace_seeds(seeds: Iterable[int]) -> set[int]:
    """The trace seeds ``seeds`` give at every point of every checked figure."""
    most = max(len(FIGURES[name].x) for name in HELD_OUT_FIGURES)
    return {seed + 7919 * i for seed in seeds for i in range(most)}


@dataclass(frozen=True, slots=True)
class HeldOutRow:
    """One seed at one point: adaptive's speedup, the better manager's, and the margin."""

    seed: int
    figure: str
    x: int
    adaptive: float
    better: float

    @property
    def margin(self) -> float:
        """adaptive - max(distribution, fifo), in speedup (-0.02 is 2 % of static's speed)."""
        return round(self.adaptive - self.better, 4)

    def meets_line(self) -> bool:
        """adaptive >= 1.0 and >= max(distribution, fifo) - :data:`LINE`."""
        return self.adaptive >= 1.0 and self.margin >= -LINE

    def meets_bound(self) -> bool:
        """adaptive >= 1.0 and >= max(distribution, fifo) - :data:`HELD_OUT_BOUND`."""
        return self.adaptive >= 1.0 and self.margin >= -HELD_OUT_BOUND


def row(seed: int, figure: str, x: int, speedup: Mapping[str, float]) -> HeldOutRow:
    """The row of one point from its speedups (which must include the three policies)."""
    better = max(speedup["distribution"], speedup["fifo"])
    return HeldOutRow(seed, figure, x, speedup["adaptive"], better)


def rows_of(seed: int, figure: str, doc: Mapping[str, object]) -> list[HeldOutRow]:
    """The rows of one figure document of ``run_edge_router`` (one per point)."""
    xs = doc["x"]
    speedup = doc["speedup"]
    assert isinstance(xs, list) and isinstance(speedup, dict)
    return [
        row(seed, figure, x, {name: values[i] for name, values in speedup.items()})
        for i, x in enumerate(xs)
    ]


def table(rows: Sequence[HeldOutRow]) -> str:
    """The held-out table: one line per seed and point, then what holds."""
    lines = [
        f"{'seed':>4}  {'figure':<6} {'x':>4}  {'adaptive':>8}  {'max(d,f)':>8}  {'margin':>7}  "
        "verdict"
    ]
    for r in sorted(rows, key=lambda r: (r.seed, HELD_OUT_FIGURES.index(r.figure), r.x)):
        verdict = "ok" if r.meets_line() else "BOUND" if r.meets_bound() else "FAIL"
        lines.append(
            f"{r.seed:>4}  {r.figure:<6} {r.x:>4}  {r.adaptive:>8.4f}  {r.better:>8.4f}  "
            f"{r.margin:>+7.4f}  {verdict}"
        )
    lines.append(summary(rows))
    return "\n".join(lines)


def summary(rows: Sequence[HeldOutRow]) -> str:
    """What the rows meet: the line's count by points and by seeds, and the worst points."""
    seeds = sorted({r.seed for r in rows})
    missed = {r.seed for r in rows if not r.meets_line()}
    worst = min(rows, key=lambda r: r.margin)
    lowest = min(rows, key=lambda r: r.adaptive)
    met = sum(r.meets_line() for r in rows)
    return "\n".join(
        [
            f"held out: {len(seeds)} seeds x {len(rows) // max(len(seeds), 1)} points",
            f"line (>= 1.0 and >= max - {LINE}): {met} of {len(rows)} points, "
            f"{len(seeds) - len(missed)} of {len(seeds)} seeds at every point",
            f"worst margin {worst.margin:+.4f} (seed {worst.seed}, {worst.figure}, x={worst.x}); "
            f"lowest adaptive {lowest.adaptive:.4f} (seed {lowest.seed}, {lowest.figure}, "
            f"x={lowest.x})",
            f"stated bound (>= 1.0 and >= max - {HELD_OUT_BOUND}): "
            + ("holds at every point" if all(r.meets_bound() for r in rows) else "BROKEN"),
        ]
    )
