"""The scale check of ``juggle simulate cluster`` (issue 24): ``python -m
juggle.simulate.cluster.scale [--nodes 256] [--services 2000] [--seeds 1-5] [--budget-s 60]``.

Runs the command itself (``juggle simulate cluster ... --json``, a process per seed, so the
wall time includes start-up), measures each run's wall time, and checks that every run ends
within the budget and that cluster placement serves a larger fraction of calls from hardware
than per-board placement. Prints one line per seed; exit status 0 when every check holds,
1 when one fails, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence

__all__ = ["main", "parse_seeds"]


def parse_seeds(text: str) -> list[int]:
    """``"1-5"`` or ``"1,3,7"`` as a list of seeds; raises ValueError otherwise."""
    if "-" in text:
        low, high = (int(part) for part in text.split("-", 1))
        if high < low:
            raise ValueError(f"empty seed range {text!r}")
        return list(range(low, high + 1))
    return [int(part) for part in text.split(",")]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check; the exit status (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m juggle.simulate.cluster.scale")
    parser.add_argument("--nodes", type=int, default=256)
    parser.add_argument("--services", type=int, default=2000)
    parser.add_argument("--seeds", default="1-5")
    parser.add_argument("--budget-s", type=float, default=60.0)
    args = parser.parse_args(argv)
    try:
        seeds = parse_seeds(args.seeds)
    except ValueError as exc:
        parser.error(f"--seeds: {exc}")
    failed = 0
    for seed in seeds:
        command = [
            sys.executable,
            "-c",
            "from juggle.commands.cli import main; main()",
            "simulate",
            "cluster",
            "--nodes",
            str(args.nodes),
            "--services",
            str(args.services),
            "--seed",
            str(seed),
            "--json",
        ]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            print(f"seed {seed}: FAILED (exit {done.returncode}): {done.stderr.strip()}")
            failed += 1
            continue
        policies = json.loads(done.stdout)["policies"]
        cluster = policies["cluster"]["hardware_fraction"]
        board = policies["per-board"]["hardware_fraction"]
        ok = wall < args.budget_s and cluster > board
        failed += not ok
        print(
            f"seed {seed}: wall {wall:.1f} s (measured, budget {args.budget_s:g} s); hardware-"
            f"served: cluster {100 * cluster:.1f} % vs per-board {100 * board:.1f} % "
            f"(calibrated); {'ok' if ok else 'FAILED'}",
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
