"""The edge-router paper's findings, checked on the default runs of each experiment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from juggle.commands.simulate.router import register
from juggle.errors import ConfigurationError, ControllerError
from juggle.simulate.router.experiments import PAPER_TABLE4_US, run_edge_router


@pytest.fixture(scope="module")
def figures() -> dict[str, dict[str, Any]]:
    """The three figure experiments exactly as the CLI runs them by default (seed 1)."""
    return {name: run_edge_router(name) for name in ("fig3a", "fig3b", "fig4")}


def test_table4_every_cell_within_ten_percent_of_the_paper() -> None:
    doc = run_edge_router("table4")
    assert len(doc["cells_us"]) == 12 and doc["paper_us"] == list(PAPER_TABLE4_US)
    for model, paper in zip(doc["cells_us"], PAPER_TABLE4_US, strict=True):
        assert model == pytest.approx(paper, rel=0.10)
    rows = [doc["cells_us"][i : i + 4] for i in (0, 4, 8)]
    for best, row in zip((0, 1, 2), rows, strict=True):  # the diagonal wins, as in bold
        assert min(row) == row[best]
        assert row[3] == pytest.approx(max(row[:3]), rel=0.01)  # reconfiguring = worst


def test_without_bursts_distribution_beats_fifo(figures: dict[str, dict[str, Any]]) -> None:
    fig = figures["fig3a"]
    dist, fifo = fig["speedup"]["distribution"], fig["speedup"]["fifo"]
    assert fig["x"] == [5, 20, 200]
    assert all(d >= f for d, f in zip(dist, fifo, strict=True))
    assert fifo[0] < 1.0  # reconfiguring all the time at 5 ms: worse than static
    assert abs(dist[2] - fifo[2]) <= 0.05 * max(dist[2], fifo[2])
    assert dist[1] > 1.2 and fifo[1] > 1.2  # a significant speedup at 20 ms


def test_with_spikes_fifo_gains_on_distribution(figures: dict[str, dict[str, Any]]) -> None:
    fig = figures["fig4"]
    assert fig["x"] == list(range(1, 9))
    gain = [
        f - d for f, d in zip(fig["speedup"]["fifo"], fig["speedup"]["distribution"], strict=True)
    ]
    assert all(g > gain[0] for g in gain[1:])
    assert gain[-1] > 0.1 and abs(gain[0]) < 0.05


@pytest.mark.parametrize("name", ["fig3a", "fig3b", "fig4"])
def test_adaptive_never_loses_to_static_nor_to_the_better_rmu(
    figures: dict[str, dict[str, Any]], name: str
) -> None:
    speedup = figures[name]["speedup"]
    for i, adaptive in enumerate(speedup["adaptive"]):
        assert adaptive >= 1.0
        assert adaptive >= max(speedup["distribution"][i], speedup["fifo"][i]) - 0.02


@pytest.mark.parametrize("name", ["fig3a", "fig3b"])
def test_adaptive_is_near_the_oracle_at_200_ms(
    figures: dict[str, dict[str, Any]], name: str
) -> None:
    speedup = figures[name]["speedup"]
    assert speedup["adaptive"][2] >= 0.9 * speedup["oracle"][2]


def test_same_seed_same_document_other_seed_other_traffic() -> None:
    def run(seed: int) -> str:
        return json.dumps(run_edge_router("fig3b", seed=seed, duration_scale=0.05))

    assert run(3) == run(3)
    assert run(3) != run(4)
    t3, t4 = (run_edge_router("table4", seed=s)["cells_us"] for s in (3, 4))
    assert t3 != t4


def test_plot_writes_a_png(tmp_path: Path) -> None:
    target = tmp_path / "table4.png"
    run_edge_router("table4", plot=target)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    figure = tmp_path / "fig.png"
    run_edge_router("fig3a", policies=["distribution"], duration_scale=0.05, plot=figure)
    assert figure.stat().st_size > 1000
    with pytest.raises(ConfigurationError, match=".png"):
        run_edge_router("table4", plot=tmp_path / "x.jpg")


def test_unknown_experiment_and_policy_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="'fig9'"):
        run_edge_router("fig9")
    with pytest.raises(ControllerError, match="'nope'"):
        run_edge_router("fig4", policies=["nope"], duration_scale=0.05)


KINDS = {"measured", "modeled", "input", "calibrated"}


def assert_labeled(doc: dict[str, Any]) -> None:
    """Each key of ``doc`` has one kind in ``labels`` (no stale label), ``how`` explains keys."""
    labels = doc["labels"]
    assert set(labels) == set(doc) - {"modeled", "labels", "how", "files"}
    assert set(labels.values()) <= KINDS
    assert set(doc["how"]) <= set(labels) and all(doc["how"].values())
    assert doc["modeled"] is True


def test_table4_labels_the_paper_as_input_and_the_cells_as_calibrated() -> None:
    doc = run_edge_router("table4")
    assert_labeled(doc)
    kinds = {key: doc["labels"][key] for key in ("cells_us", "error_pct", "paper_us", "seed")}
    assert kinds == {
        "cells_us": "calibrated",  # the processor clock is fitted to Table 4
        "error_pct": "calibrated",
        "paper_us": "input",
        "seed": "input",
    }
    assert "never an input" not in doc["how"]["paper_us"]
    rows = doc["paper_comparison"]
    assert [r["ours"] for r in rows] == doc["cells_us"] and len(rows) == 12
    assert {f["parameter"] for r in rows for f in r["fitted"]} == {"processor_clock_mhz"}


def test_figure_labels_and_the_scale_it_ran_at() -> None:
    short = run_edge_router("fig3b", policies=["fifo"], duration_scale=0.02)
    assert_labeled(short)
    assert {short["labels"][k] for k in ("speedup", "static_ms")} == {"calibrated"}
    assert short["labels"]["reconfig_us"] == "input"  # the paper's 2.5 ms
    assert short["labels"]["x"] == short["labels"]["duration_scale"] == "input"
    assert short["duration_scale"] == 0.02 and "oracle_plan" not in short["labels"]
    longer = run_edge_router("fig3b", policies=["fifo", "oracle"], duration_scale=0.04)
    assert_labeled(longer)
    assert "oracle_plan" in longer["labels"]
    assert all(1.5 * s < n for s, n in zip(short["packets"], longer["packets"], strict=True))


def test_scale_option_shortens_and_bad_scales_are_refused() -> None:
    app = typer.Typer()
    register(app)
    app.callback()(lambda: None)
    runner = CliRunner()
    args = ["edge-router", "--experiment", "fig3a", "--policy", "fifo", "--json"]
    result = runner.invoke(app, [*args, "--scale", "0.02"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["duration_scale"] == 0.02 and doc["labels"]["duration_scale"] == "input"
    assert doc == run_edge_router("fig3a", policies=["fifo"], duration_scale=0.02)
    table = runner.invoke(app, [*args[:-1], "--scale", "0.02"])
    assert "traces at 2 % of their length" in " ".join(table.stdout.split())
    for bad in ("0", "-1", "nan", "inf"):
        refused = runner.invoke(app, [*args, "--scale", bad])
        assert refused.exit_code == 2, bad
        error = json.loads(refused.stdout)
        assert error["type"] == "ConfigurationError" and "--scale" in error["error"]
    with pytest.raises(ConfigurationError, match="got 0") as caught:
        run_edge_router("fig4", duration_scale=0)
    assert caught.value.value == 0
