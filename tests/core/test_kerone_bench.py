"""The allocator benchmark runs and reports its keys (not a timed test)."""

from __future__ import annotations

from juggle.bench.alloc import run


def test_bench_reports_positive_figures() -> None:
    figures = run(quick=True)
    for key in ("alloc_p50_us", "alloc_p99_us", "alloc_p99_us_64r_1000q"):
        assert figures[key] > 0
    assert figures["alloc_p50_us"] <= figures["alloc_p99_us"]
