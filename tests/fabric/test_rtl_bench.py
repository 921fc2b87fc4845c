"""``juggle bench --only rtl``: the RTL co-simulation figures exist, are positive, agree with
each other and carry their labels (issue 22: ``rtl_cycles_per_s`` and ``rtl_access_us`` had no
test). A broken cycle counter must fail the same checks."""

from __future__ import annotations

from typing import Any

import pytest
from rtl_support import engine

import juggle.bench.rtl as rtl_bench
from juggle.bench import TARGETS, run_bench
from juggle.fabric.sim import ModelClock

FIGURES = ("rtl_cycles_per_s", "rtl_access_us", "rtl_blocks_per_s")
#: present where the gcd reference module's Verilog is found (it ships with juggle)
AXI_FIGURE = "rtl_axi_access_us"


def rtl_figure_problems(doc: dict[str, Any]) -> list[str]:
    """What is wrong with the rtl group's figures in a ``juggle bench --json`` document.

    Each figure must be a positive number labeled *measured* (wall clock, this machine); a
    register access must take less than 50 ms; and the core clock cycles per 8-byte block
    (``rtl_cycles_per_s / rtl_blocks_per_s``) must lie between 16 and 10,000: the TDES core
    runs 48 DES rounds per block, plus the bus cycles of the driver's accesses."""
    problems = []
    for key in (*FIGURES, AXI_FIGURE) if AXI_FIGURE in doc else FIGURES:
        value = doc.get(key)
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            problems.append(f"{key} = {value!r}: not a positive number")
        if doc.get("labels", {}).get(key) != "measured":
            problems.append(f"{key} labeled {doc.get('labels', {}).get(key)!r}, not 'measured'")
    if problems:
        return problems
    for key in ("rtl_access_us", AXI_FIGURE):
        if doc.get(key, 0) >= 50_000:
            problems.append(f"{key} = {doc[key]}: one access took >= 50 ms")
    per_block = doc["rtl_cycles_per_s"] / doc["rtl_blocks_per_s"]
    if not 16 <= per_block <= 10_000:
        problems.append(f"{per_block:.1f} core cycles per block: not between 16 and 10,000")
    return problems


def test_rtl_group_figures_exist_are_positive_and_labeled() -> None:
    engine()  # skips, naming what is missing, without Verilator
    doc = run_bench(quick=True, only=["rtl"])
    assert set(doc["group_seconds"]) == {"rtl"}
    assert rtl_figure_problems(doc) == []
    assert (AXI_FIGURE in doc) == rtl_bench.GCD_TOP.is_dir()
    # issue 23's speed targets are bench targets (checked in `juggle bench`, not timed here)
    assert TARGETS["rtl_access_us"] == ("<=", 5.0)
    assert TARGETS["rtl_cycles_per_s"] == (">=", 2_000_000.0)
    assert set(doc["targets_met"]) >= {"rtl_access_us", "rtl_cycles_per_s"}


def test_a_broken_cycle_counter_fails_the_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    engine()
    monkeypatch.setattr(ModelClock, "now_cycles", lambda self, hz: 0)
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
        ({AXI_FIGURE: 0.0}, "rtl_axi_access_us = 0.0: not a positive number"),
        ({AXI_FIGURE: 70_000.0}, "rtl_axi_access_us = 70000.0: one access took >= 50 ms"),
    ],
)
def test_the_checks_name_each_broken_figure(change: dict[str, Any], problem: str) -> None:
    good = {
        "rtl_cycles_per_s": 120_000.0,
        "rtl_access_us": 13.0,
        "rtl_blocks_per_s": 1_500.0,
        "labels": dict.fromkeys((*FIGURES, AXI_FIGURE), "measured"),
    }
    assert rtl_figure_problems(good) == []
    assert problem in rtl_figure_problems({**good, **change})
