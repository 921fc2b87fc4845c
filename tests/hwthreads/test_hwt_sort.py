"""The sort application (ReconOS Fig. 4c), its kernels, its CLI command."""

from __future__ import annotations

import json

import numpy as np
import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from typer.testing import CliRunner

from juggle.errors import HwThreadArgumentError
from juggle.hwthreads.cli_sort import register
from juggle.hwthreads.sort import (
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
        assert set(run["labels"]) >= {"sort_ms", "merge_ms"}
        assert run["merge_ms"] > 0
    assert "measured" in runs["SW"]["labels"]["sort_ms"]
    assert "modeled" in runs["HW"]["labels"]["sort_ms"]


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


def test_cli_table_and_bad_option() -> None:
    runner = CliRunner()
    result = runner.invoke(cli(), ["sort", "--size", "2048"])
    assert result.exit_code == 0, result.output
    assert "SW+HW" in result.output and "verified" in result.output
    bad = runner.invoke(cli(), ["sort", "--size", "1001", "--chunks", "2"])
    assert bad.exit_code == 2
