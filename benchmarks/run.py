"""Run the benchmark suite as a script (same as ``juggle bench --json``)."""

from __future__ import annotations

import json
import sys

from juggle.bench import run_bench


def main(argv: list[str]) -> int:
    """``--quick`` for a smoke run; prints one JSON document."""
    result = run_bench(quick="--quick" in argv)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
