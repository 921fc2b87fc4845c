"""The eCos/PowerPC 405 model of ReconOS Table 2 (issue 12, item 4): 14 cells, labels, costs."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from juggle.commands.simulate.oscall import register, simulate_document
from juggle.errors import HwThreadArgumentError
from juggle.hwthreads import HwTiming
from juggle.simulate.reconos.ecos import (
    CALIBRATION,
    CELLS,
    COSTS,
    PAPER_ECOS_PPC,
    EcosPpcCosts,
    calibrated_costs,
    cell_costs,
    cell_cycles,
    cell_labels,
    cell_steps,
    modeled_ecos_ppc,
)

LABELS = {"measured", "modeled", "input", "calibrated"}

# Table 2 of the paper, column eCos/PPC, typed in here again as an independent check
TABLE2_ECOS = {
    "mutex_lock_sw": 83,
    "mutex_unlock_sw": 171,
    "mutex_lock_hw": 959,
    "mutex_unlock_hw": 679,
    "mutex_turnaround_sw_sw": 453,
    "mutex_turnaround_sw_hw": 629,
    "mutex_turnaround_hw_sw": 1449,
    "mutex_turnaround_hw_hw": 1460,
    "semaphore_post_sw": 73,
    "semaphore_post_hw": 695,
    "semaphore_turnaround_sw_sw": 305,
    "semaphore_turnaround_sw_hw": 528,
    "semaphore_turnaround_hw_sw": 908,
    "semaphore_turnaround_hw_hw": 1114,
}
HW_CELLS = [cell for cell in CELLS if "hw" in cell]
SW_CELLS = [cell for cell in CELLS if "hw" not in cell]


def test_the_fourteen_cells_are_within_25_percent_of_the_paper() -> None:
    table = modeled_ecos_ppc()
    assert PAPER_ECOS_PPC == TABLE2_ECOS
    assert list(table["cells"]) == list(TABLE2_ECOS)
    for cell, entry in table["cells"].items():
        paper = TABLE2_ECOS[cell]
        assert entry["paper_cycles"] == paper
        deviation = (entry["model_cycles"] - paper) / paper * 100
        assert abs(deviation) <= 25.0, (cell, entry["model_cycles"], paper)
        assert entry["deviation_pct"] == pytest.approx(deviation, abs=0.1)
    assert table["all_within_tolerance"] and table["worst_deviation_pct"] <= 25.0
    # hardware threads pay for the delegate path, as the paper says (section 5)
    for obj, call in (("mutex", "lock"), ("mutex", "unlock"), ("semaphore", "post")):
        sw = table["cells"][f"{obj}_{call}_sw"]["model_cycles"]
        assert table["cells"][f"{obj}_{call}_hw"]["model_cycles"] > 4 * sw


def _walk_labels(doc: dict[str, Any], where: str) -> None:
    """Every key of ``doc`` but ``labels``/``how`` has one of the four labels."""
    labels = doc["labels"]
    for key in doc:
        if key in ("labels", "how"):
            continue
        assert labels.get(key) in LABELS, f"{where}.{key} is not labeled"


def test_every_key_is_labeled() -> None:
    doc = json.loads(json.dumps(simulate_document()))
    _walk_labels(doc, "doc")
    table = doc["modeled_ecos_ppc"]
    _walk_labels(table, "modeled_ecos_ppc")
    for cell, entry in table["cells"].items():
        _walk_labels(entry, cell)
        assert entry["labels"]["paper_cycles"] == "input"
        assert entry["labels"]["model_cycles"] in ("calibrated", "modeled")
    # a cell is calibrated when a fitted cost is in its path: every cell, fitting target or
    # not (the six turnarounds with a hardware side were not fitted to, and are no less
    # computed from fitted costs); fitting_targets keeps which cells the costs were fitted to
    targets = {cell for _, cells in CALIBRATION for cell in cells}
    assert set(table["fitting_targets"]) == targets and len(targets) == 8
    assert set(table["calibrated_cells"]) == set(CELLS)
    assert set(cell_labels().values()) == {"calibrated"}
    for cell in CELLS:
        used = cell_costs(cell)
        assert "calibrated" in used.values(), cell
        assert used.keys() == {step.cost for step in cell_steps(calibrated_costs())[cell]}
    assert set(cell_costs("mutex_turnaround_sw_hw")) >= {"handoff", "delegate_dispatch"}
    # every stated cost has a label and a source; calibrated ones name their figure
    assert set(table["costs"]) == {f.name for f in fields(EcosPpcCosts)} == set(COSTS)
    for name, cost in table["costs"].items():
        assert cost["label"] in ("input", "calibrated"), name
        assert cost["source"], name
        if cost["label"] == "calibrated":
            assert "fit" in cost["source"] and "Table 2" in cost["source"], name
    assert {name for name, _ in CALIBRATION} == {
        n for n, c in table["costs"].items() if c["label"] == "calibrated"
    }


def test_each_cell_is_the_sum_of_its_steps() -> None:
    costs = calibrated_costs()
    table = modeled_ecos_ppc(costs)
    for entry in table["cells"].values():
        assert sum(s["cycles"] for s in entry["steps"]) == pytest.approx(
            entry["model_cycles"], abs=0.1 * len(entry["steps"])
        )
        assert {s["cost"] for s in entry["steps"]} <= set(COSTS)
    # the hardware thread's request goes through interrupt, ISR, DSR, semaphore post,
    # scheduler and DCR, in that order
    request = [s.cost for s in cell_steps(costs)["semaphore_post_hw"]]
    assert request == [
        "osif_handshake",
        "interrupt_line",
        "interrupt_entry",
        "intc_write",
        "sem_post",
        "intc_write",
        "handoff",
        "dcr_transfer",
        "osif_handshake",
    ]


@pytest.mark.parametrize(
    ("cost", "delta"),
    [("dcr_transfer", 10.0), ("interrupt_entry", 50.0), ("intc_write", 5.0), ("handoff", 20.0)],
)
def test_a_stated_cost_moves_the_cells(cost: str, delta: float) -> None:
    base = calibrated_costs()
    changed: dict[str, Any] = {cost: getattr(base, cost) + delta}
    before = cell_cycles(base)
    after = cell_cycles(replace(base, **changed))
    steps = cell_steps(base)
    for cell in CELLS:
        uses = sum(s.times for s in steps[cell] if s.cost == cost)
        assert after[cell] - before[cell] == pytest.approx(uses * delta), cell
    moved = [cell for cell in CELLS if after[cell] != before[cell]]
    assert moved, cost
    if cost != "handoff":  # the software cells know nothing of the delegate path
        assert set(moved) <= set(HW_CELLS)
    table = modeled_ecos_ppc(replace(base, **changed))
    assert any(
        table["cells"][c]["model_cycles"] != modeled_ecos_ppc()["cells"][c]["model_cycles"]
        for c in moved
    )


def test_the_fabric_figures_come_from_hwtiming() -> None:
    slow = calibrated_costs(HwTiming(osif_word_cycles=30))
    default = calibrated_costs()
    assert slow.dcr_transfer == 30.0 and default.dcr_transfer == HwTiming().osif_word_cycles
    slow_cells, default_cells = cell_cycles(slow), cell_cycles(default)
    # the fits absorb what they can; the predictions with a hardware waiter move
    for cell in ("mutex_turnaround_sw_hw", "semaphore_turnaround_sw_hw"):
        assert slow_cells[cell] > default_cells[cell]
    for cell in SW_CELLS:
        assert slow_cells[cell] == pytest.approx(default_cells[cell])


def test_the_calibration_is_a_least_squares_fit_of_its_targets() -> None:
    costs = calibrated_costs()
    assert (costs.mutex_lock, costs.mutex_unlock, costs.sem_post) == pytest.approx((83, 171, 73))

    def error(handoff: float) -> float:
        cells = cell_cycles(replace(costs, handoff=handoff))
        targets = ("mutex_turnaround_sw_sw", "semaphore_turnaround_sw_sw")
        return sum((cells[c] / TABLE2_ECOS[c] - 1) ** 2 for c in targets)

    assert error(costs.handoff) < error(costs.handoff + 1)
    assert error(costs.handoff) < error(costs.handoff - 1)
    assert cell_cycles(costs)["mutex_lock_hw"] == pytest.approx(959)
    # another paper moves the calibrated costs with it
    doubled = calibrated_costs(paper={c: 2 * v for c, v in TABLE2_ECOS.items()})
    assert doubled.mutex_unlock == pytest.approx(342)
    assert doubled.handoff > costs.handoff


def test_bad_costs_and_papers_are_refused() -> None:
    costs = calibrated_costs()
    with pytest.raises(HwThreadArgumentError, match="dcr_transfer"):
        replace(costs, dcr_transfer=-1.0)
    with pytest.raises(HwThreadArgumentError, match="dispatch_split"):
        replace(costs, dispatch_split=1.5)
    with pytest.raises(HwThreadArgumentError, match="semaphore_post_hw"):
        calibrated_costs(paper={c: v for c, v in TABLE2_ECOS.items() if c != "semaphore_post_hw"})


def test_simulate_oscall_command_json_and_table() -> None:
    app, sim = typer.Typer(), typer.Typer()
    app.add_typer(sim, name="simulate")
    register(sim)
    runner = CliRunner()
    out = runner.invoke(app, ["simulate", "oscall", "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["scenario"] == "oscall"
    cells = doc["modeled_ecos_ppc"]["cells"]
    assert len(cells) == 14
    assert all(abs(entry["deviation_pct"]) <= 25.0 for entry in cells.values())
    again = runner.invoke(app, ["simulate", "oscall", "--json"])
    assert again.stdout == out.stdout  # a model: the same document every time
    table = runner.invoke(app, ["simulate", "oscall"])
    assert table.exit_code == 0, table.output
    assert "mutex_turnaround_hw_hw" in table.stdout and "MODELED" not in table.stdout
    assert "CALIBRATED" in table.stdout and "the others check the fit" in table.stdout
    assert "CALIBRATED" in table.stdout and "interrupt_entry" in table.stdout
