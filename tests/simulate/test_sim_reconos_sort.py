"""The sort application (ReconOS Fig. 4c), its kernels, its CLI command."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from typer.testing import CliRunner

from juggle.commands.simulate.sort import register
from juggle.errors import HwThreadArgumentError
from juggle.simulate.reconos.sort import (
    NetworkCounts,
    SortHardware,
    merge_runs,
    merge_two,
    odd_even_transposition_sort,
    run_sort,
)

words = arrays(np.uint32, st.integers(0, 120), elements=st.integers(0, 2**32 - 1))


@settings(max_examples=60, deadline=None)
@given(values=words)
def test_network_sorts_and_counts_honestly(values: np.ndarray) -> None:
    data = values.copy()
    counts = odd_even_transposition_sort(data)
    assert data.tolist() == sorted(values.tolist())
    n = values.size
    assert counts.rounds <= n + 2  # n rounds sort any input, two more find it quiet
    inversions = sum(
        1 for i in range(n) for j in range(i + 1, n) if int(values[i]) > int(values[j])
    )
    assert counts.exchanges == inversions  # every exchange removes exactly one inversion
    pairs = [len(range(p, n - 1, 2)) for p in (0, 1)]
    assert counts.comparisons == sum(pairs[r % 2] for r in range(counts.rounds))


def test_sorted_input_stops_after_two_quiet_rounds() -> None:
    counts = odd_even_transposition_sort(np.arange(100, dtype=np.uint32))
    assert counts == NetworkCounts(100, 2, 50 + 49, 0)


def test_hardware_model_cycles() -> None:
    counts = NetworkCounts(2048, 3, 0, 0)
    assert SortHardware(units=8, round_overhead_cycles=3).cycles(counts) == 2 * 131 + 131
    assert SortHardware(units=1, round_overhead_cycles=0).cycles(counts) == 1024 * 2 + 1023
    with pytest.raises(HwThreadArgumentError):
        SortHardware(units=0)


@settings(max_examples=40, deadline=None)
@given(runs=st.lists(arrays(np.uint32, st.integers(0, 40)), max_size=9))
def test_merge_runs(runs: list[np.ndarray]) -> None:
    sorted_runs = [np.sort(run) for run in runs]
    merged = merge_runs(sorted_runs)
    expected = sorted(v for run in runs for v in run.tolist())
    assert merged.tolist() == expected


def test_merge_two_is_stable_on_ties() -> None:
    left = np.array([1, 2, 2], dtype=np.uint32)
    right = np.array([2, 3], dtype=np.uint32)
    assert merge_two(left, right).tolist() == [1, 2, 2, 2, 3]


def test_run_sort_acceptance_small() -> None:
    result = run_sort(size=8 * 2048, seed=3)
    runs = result["runs"]
    assert result["chunks"] == 8
    assert all(runs[name]["verified"] for name in ("SW", "HW", "SW+HW"))
    assert runs["HW"]["sort_ms"] < runs["SW"]["sort_ms"]
    assert runs["SW+HW"]["total_ms"] < runs["SW"]["total_ms"]
    assert runs["SW"]["chunks_sw"] == 8 and runs["HW"]["chunks_hw"] == 8
    assert runs["SW+HW"]["chunks_sw"] + runs["SW+HW"]["chunks_hw"] == 8
    assert runs["SW+HW"]["chunks_hw"] > 0
    assert runs["HW"]["hw_sort_modeled_ms"] > 0
    for run in runs.values():
        assert run["merge_ms"] > 0
    assert_labels_honest(result)


KINDS = {"measured", "modeled", "input", "calibrated"}


def assert_labels_honest(result: dict[str, Any]) -> None:
    """Every figure of the sort report has one kind, and no modeled time is called measured."""
    top = result["labels"]
    assert set(top) == set(result) - {"runs", "labels", "how", "files"}
    assert set(top.values()) == {"input"}
    for name, run in result["runs"].items():
        labels, how = run["labels"], run["how"]
        figures = {k for k, v in run.items() if isinstance(v, int | float) and k != "verified"}
        assert set(labels) == figures, name  # every figure labeled, no stale label
        assert set(labels.values()) <= KINDS, name  # a kind, never free text
        assert set(how) <= set(labels) and all(how[k] for k in how), name
        # the sort time is split exactly into what was measured and what was modeled
        assert run["sort_ms"] == pytest.approx(run["sort_measured_ms"] + run["sort_modeled_ms"])
        assert run["total_ms"] == pytest.approx(run["sort_ms"] + run["merge_ms"])
        assert run["sort_measured_ms"] > 0
        if run["sort_modeled_ms"] > 0:  # a sum with a modeled part is not measured
            assert labels["sort_ms"] == labels["total_ms"] == "modeled", name
        if run["chunks_hw"] > 0:
            assert labels["sort_ms"] == "modeled", name  # it ran on the modeled fabric
        assert labels["merge_ms"] == labels["wall_ms"] == "measured"
    sw, hw = result["runs"]["SW"], result["runs"]["HW"]
    assert sw["labels"]["sort_ms"] == "measured" and sw["sort_modeled_ms"] == 0
    assert sw["sort_ms"] == pytest.approx(sw["sw_sort_measured_ms"], rel=0.2)
    # the HW run's split: its modeled part is the fabric's cycles, within the whole run's
    assert 0.5 * hw["hw_sort_modeled_ms"] < hw["sort_modeled_ms"] <= hw["hw_sort_modeled_ms"]
    assert hw["sort_measured_ms"] <= hw["hw_oscall_measured_ms"]
    assert hw["labels"]["hw_sort_modeled_ms"] == "modeled"
    assert result["runs"]["SW+HW"]["labels"]["chunks_hw"] == "modeled"  # the timeline's split


def test_run_sort_rejects_bad_sizes() -> None:
    with pytest.raises(HwThreadArgumentError):
        run_sort(size=1000, chunks=3)
    with pytest.raises(HwThreadArgumentError):
        run_sort(size=8, chunks=0)


def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """A stand-in for ``juggle simulate``."""

    register(app)
    return app


def test_cli_json() -> None:
    result = CliRunner().invoke(cli(), ["sort", "--json", "--size", "4096", "--chunks", "2"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["size"] == 4096
    assert set(document["runs"]) == {"SW", "HW", "SW+HW"}
    for run in document["runs"].values():
        assert run["verified"] is True
        assert run["sort_ms"] > 0 and run["merge_ms"] >= 0
    assert_labels_honest(document)
    assert document["how"]["chunk_words"] == "size / chunks"


def test_cli_table_and_bad_option() -> None:
    runner = CliRunner()
    result = runner.invoke(cli(), ["sort", "--size", "2048"])
    assert result.exit_code == 0, result.output
    assert "SW+HW" in result.output and "verified" in result.output
    rows = {
        cells[1].strip(): [c.strip() for c in cells[2:-1]]
        for line in result.output.splitlines()
        if len(cells := line.split("│")) > 2
    }
    assert rows["SW"][1] == "0.0" and float(rows["HW"][1]) > 0  # the modeled part of the sort
    assert "HW sort: modeled" in " ".join(result.output.split())
    bad = runner.invoke(cli(), ["sort", "--size", "1001", "--chunks", "2"])
    assert bad.exit_code == 2
