"""The full controller sweep behind ``make sweep`` (not collected by ``make test``, whose suite
runs representative points: ``test_sim_controllers_quality.py`` and
``test_sim_controllers_heldout.py``).

1. Training seeds (:data:`~controller_seeds.TRAINING_SEEDS`, what adaptive was tuned on): at
   every point of Figs 3a, 3b and 4, adaptive is >= 1.0 and within 2 % of the better of
   distribution and fifo, and the oracle is at least every policy.
2. Held-out seeds 100-149 (:data:`~controller_seeds.HELD_OUT_SEEDS`, never tuned on): every
   point of the same figures; prints the held-out table (seed x point, adaptive,
   max(distribution, fifo), margin) and what holds, and checks the bound adaptive is stated to
   meet there (:data:`~controller_seeds.HELD_OUT_BOUND`).

Run as ``python tests/simulate/sweep_controllers.py [--jobs N]`` (default 2 processes, about
10 minutes on 2 cores). Exits 1 when a training point misses its line or a held-out point
misses the stated bound.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from controller_seeds import (
    HELD_OUT_BOUND,
    HELD_OUT_FIGURES,
    HELD_OUT_POLICIES,
    HELD_OUT_SEEDS,
    TRAINING_SEEDS,
    rows_of,
    table,
)
from test_sim_controllers_quality import adaptive_shortfall, oracle_shortfall

from juggle.simulate.router.experiments import DEFAULT_POLICIES, run_edge_router

Job = tuple[str, int, tuple[str, ...]]


def run(job: Job) -> tuple[str, int, dict[str, Any]]:
    """One figure on one seed under the job's policies (a worker process runs it)."""
    figure, seed, policies = job
    return figure, seed, run_edge_router(figure, seed=seed, policies=list(policies))


def training_failures(figure: str, seed: int, doc: dict[str, Any]) -> list[str]:
    """The training points of ``doc`` where adaptive or the oracle misses its line."""
    failures = []
    for i, x in enumerate(doc["x"]):
        at = {name: values[i] for name, values in doc["speedup"].items()}
        if adaptive_shortfall(at) > 0 or oracle_shortfall(at) > 0:
            failures.append(f"training seed {seed}, {figure}, x={x}: {at}")
    return failures


def main(argv: list[str] | None = None) -> int:
    """Run both sweeps, print the held-out table; 0 when everything holds, else 1."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    jobs = max(1, parser.parse_args(argv).jobs)
    work: list[Job] = [
        (figure, seed, DEFAULT_POLICIES) for seed in TRAINING_SEEDS for figure in HELD_OUT_FIGURES
    ]
    work += [
        (figure, seed, HELD_OUT_POLICIES) for seed in HELD_OUT_SEEDS for figure in HELD_OUT_FIGURES
    ]
    started = time.monotonic()
    training: list[str] = []
    rows = []
    with ProcessPoolExecutor(jobs) as pool:
        for figure, seed, doc in pool.map(run, work):
            if seed in TRAINING_SEEDS:
                training += training_failures(figure, seed, doc)
            else:
                rows += rows_of(seed, figure, doc)
    print(table(rows))
    held_out = [
        f"held-out seed {r.seed}, {r.figure}, x={r.x}: adaptive {r.adaptive}, "
        f"max(distribution, fifo) {r.better}, below 1.0 or max - {HELD_OUT_BOUND}"
        for r in rows
        if not r.meets_bound()
    ]
    print(
        f"training seeds {', '.join(map(str, TRAINING_SEEDS))}: adaptive within 2 % and the "
        f"oracle >= every policy at every point: {'no' if training else 'yes'}"
    )
    print(f"{len(work)} figure runs on {jobs} processes in {time.monotonic() - started:.0f} s")
    for failure in training + held_out:
        print("FAIL", failure)
    return 1 if training or held_out else 0


if __name__ == "__main__":
    sys.exit(main())
