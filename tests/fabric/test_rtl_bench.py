"""``juggle bench --only rtl``: the RTL co-simulation figures exist, are positive, agree with
each other and carry their labels (issue 22: ``rtl_cycles_per_s`` and ``rtl_access_us`` had no
test). A broken cycle counter must fail the same checks."""

from __future__ import annotations

from typing import Any

import pytest
from rtl_support import engine

import juggle.bench.rtl as rtl_bench
from juggle.bench import run_bench

FIGURES = ("rtl_cycles_per_s", "rtl_access_us", "rtl_blocks_per_s")


def rtl_figure_problems(doc: dict[str, Any]) -> list[str]:
    """What is wrong with the rtl group's figures in a ``juggle bench --json`` document.

    Each figure must be a positive number labeled *measured* (wall clock, this machine); a
    register access must take less than 50 ms; and the core clock cycles per 8-byte block
    (``rtl_cycles_per_s / rtl_blocks_per_s``) must lie between 16 and 10,000: the TDES core
    runs 48 DES rounds per block, plus the bus cycles of the driver's accesses."""
    problems = []
    for key in FIGURES:
        value = doc.get(key)
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            problems.append(f"{key} = {value!r}: not a positive number")
        if doc.get("labels", {}).get(key) != "measured":
            problems.append(f"{key} labeled {doc.get('labels', {}).get(key)!r}, not 'measured'")
    if problems:
        return problems
    if doc["rtl_access_us"] >= 50_000:
        problems.append(f"rtl_access_us = {doc['rtl_access_us']}: one access took >= 50 ms")
    per_block = doc["rtl_cycles_per_s"] / doc["rtl_blocks_per_s"]
    if not 16 <= per_block <= 10_000:
        problems.append(f"{per_block:.1f} core cycles per block: not between 16 and 10,000")
    return problems


def test_rtl_group_figures_exist_are_positive_and_labeled() -> None:
    engine()  # skips, naming what is missing, without Verilator
    doc = run_bench(quick=True, only=["rtl"])
    assert set(doc["group_seconds"]) == {"rtl"}
    assert rtl_figure_problems(doc) == []
    assert "rtl_cycles_per_s" not in doc["targets_met"]  # no target: a speed of this machine


def test_a_broken_cycle_counter_fails_the_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    engine()
    monkeypatch.setattr(rtl_bench.ModelClock, "now_cycles", lambda self, hz: 0)
    doc = run_bench(quick=True, only=["rtl"])
    assert doc["rtl_cycles_per_s"] == 0
    assert rtl_figure_problems(doc) == ["rtl_cycles_per_s = 0.0: not a positive number"]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"rtl_access_us": -1.0}, "rtl_access_us = -1.0: not a positive number"),
        ({"rtl_access_us": 60_000.0}, "rtl_access_us = 60000.0: one access took >= 50 ms"),
        ({"rtl_cycles_per_s": 2.0}, "0.0 core cycles per block: not between 16 and 10,000"),
        ({"labels": {}}, "rtl_cycles_per_s labeled None, not 'measured'"),
    ],
)
def test_the_checks_name_each_broken_figure(change: dict[str, Any], problem: str) -> None:
    good = {
        "rtl_cycles_per_s": 120_000.0,
        "rtl_access_us": 13.0,
        "rtl_blocks_per_s": 1_500.0,
        "labels": dict.fromkeys(FIGURES, "measured"),
    }
    assert rtl_figure_problems(good) == []
    assert problem in rtl_figure_problems({**good, **change})
