"""Every figure of every ``--json`` document of ``juggle simulate`` and ``juggle bench`` says
how it was obtained.

THE RULE (the convention most documents already used): a numeric leaf (int or float, not a
bool) is labeled by the nearest enclosing object that has a ``labels`` dict with an entry for
the next key on the path down to the leaf. That entry is either one of the four kinds
(``measured``, ``modeled``, ``input``, ``calibrated``), which labels the whole subtree, or a
dict, which is followed key by key the same way. ``labels`` and ``how`` are not figures; list
items take their list's label. A label that is free text, or none at all, fails.

The ``simulate`` subcommands are found by walking the typer app (a new scenario is covered
without editing this file); each runs with the smallest arguments its options offer, and a
command with ``--experiment`` runs every experiment it has (listed in :data:`EXPERIMENTS_OF`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from juggle.commands.cli import _register_scenarios, app
from juggle.simulate.router.experiments import EXPERIMENTS
from labels_support import paper_rows, paper_values_not_input, provenance_violations, unlabeled

SMALL: dict[str, list[str]] = {
    "--duration": ["--duration", "0.02"],
    "--size": ["--size", "4096"],
    "--scale": ["--scale", "0.02"],
}
"""Options that make a scenario small, used wherever a command has them."""

EXPERIMENTS_OF: dict[str, tuple[str, ...]] = {"edge-router": EXPERIMENTS}
"""The experiments of each command with ``--experiment``: each is a document of its own."""

VARIANTS: dict[str, list[str]] = {"--energy": ["--energy"]}
"""Flags that switch a command to another document: each is run as a variant too."""


def simulate_runs() -> list[tuple[str, list[str]]]:
    """``(id, argv)`` for every ``simulate`` subcommand and variant, with small arguments."""
    _register_scenarios()
    tree: Any = typer.main.get_command(app)
    group: Any = tree.commands["simulate"]
    runs: list[tuple[str, list[str]]] = []
    for name, command in sorted(group.commands.items()):
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        assert "--json" in options, name
        argv = ["simulate", name, "--json"]
        for opt, extra in SMALL.items():
            if opt in options:
                argv += extra
        if "--experiment" in options:
            assert name in EXPERIMENTS_OF, f"list the experiments of {name} in EXPERIMENTS_OF"
            runs += [(f"{name} {e}", [*argv, "--experiment", e]) for e in EXPERIMENTS_OF[name]]
            continue
        runs.append((name, argv))
        for opt, extra in VARIANTS.items():
            if opt in options:
                runs.append((f"{name} {opt}", argv + extra))
    return runs


RUNS = simulate_runs()


def run_json(argv: list[str]) -> dict[str, Any]:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert isinstance(doc, dict)
    return doc


def test_the_rule_finds_what_it_should() -> None:
    doc: dict[str, Any] = {
        "a": 1.0,
        "b": {"x": 2, "y": {"z": 3}},
        "c": [4, 5],
        "d": {"v": 6, "labels": {"v": "input"}},
        "e": 7,
        "f": True,
        "labels": {"a": "modeled", "b": {"x": "input", "y": "measured"}, "c": "input"},
    }
    assert unlabeled(doc) == ["e (label None)"]
    doc["labels"]["e"] = "measured: wall clock"  # free text is no kind
    assert unlabeled(doc) == ["e (label 'measured: wall clock')"]
    doc["labels"]["e"] = "calibrated"
    assert unlabeled(doc) == []


def test_the_provenance_rule_fails_a_label_better_than_its_figure() -> None:
    """Planted wrong labels on the real ThumbPod document: each breaks the rule."""
    doc = run_json(["simulate", "thumbpod", "--json"])
    assert provenance_violations(doc) == []
    rows = {row["figure"]: row for row in paper_rows(doc)}
    fitted = rows["Fig 3 c total_cycles"]  # kni_cycles, fitted to Fig 3's C interface, is in it
    fitted["label"] = fitted["labels"]["ours"] = fitted["labels"]["error_pct"] = "modeled"
    doc["levels"]["c"]["labels"]["total_cycles"] = "modeled"
    assert provenance_violations(doc) == [
        f"Fig 3 c total_cycles: labeled 'modeled', produced as 'calibrated' (fitted: "
        f"{fitted['fitted']})"
    ]
    fitted["label"] = fitted["labels"]["ours"] = fitted["labels"]["error_pct"] = "calibrated"
    assert len(provenance_violations(doc)) == 1  # the figure in its level still says modeled
    doc["levels"]["c"]["labels"]["total_cycles"] = "calibrated"
    echoed = rows["Fig 3 hardware core_cycles"]  # the paper's 11 cycles, hard-coded
    echoed["label"] = "modeled"
    assert [v.split(":")[0] for v in provenance_violations(doc)] == [
        "Fig 3 hardware core_cycles",
        "Fig 3 hardware core_cycles",
        "Fig 3 hardware core_cycles",
    ]
    echoed["label"] = "input"
    rows["Fig 3 c core_cycles"]["fitted"] = [{"parameter": "x"}]  # no fitted_to: no provenance
    assert provenance_violations(doc) == [
        "Fig 3 c core_cycles: 'fitted' must list parameters with what they were fitted_to"
    ]


COMPARED: dict[str, set[str]] = {
    "tdes": {"Table 3 mul reconfiguration"},
    "tdes --energy": {"Fig 8 fpga energy", "Fig 8 java power"},
    "thumbpod": {"Fig 3 c core_cycles", "Fig 3 hardware core_cycles"},
    "edge-router table4": {"Table 4 60/20/20 A", "Table 4 20/20/60 reconfiguring"},
}
"""Runs whose documents set figures beside a paper's, and some rows each must hold."""


def test_a_paper_value_labeled_anything_but_input_is_found() -> None:
    doc = {
        "paper_us": [1.0, 2.0],
        "cells_us": [1.1, 2.1],
        "paper_comparison": [{"paper": 1.0, "ours": 1.1, "labels": {"paper": "input"}}],
        "labels": {"paper_us": "modeled", "cells_us": "calibrated"},
    }
    assert paper_values_not_input(doc) == [
        "paper_us[0]: a paper value labeled 'modeled'",
        "paper_us[1]: a paper value labeled 'modeled'",
    ]
    doc["labels"]["paper_us"] = "input"
    doc["paper_comparison"][0]["labels"] = {"paper": "calibrated"}
    assert paper_values_not_input(doc) == [
        "paper_comparison[0].paper: a paper value labeled 'calibrated'"
    ]


def test_every_simulate_subcommand_is_walked() -> None:
    names = {run_id.split()[0] for run_id, _ in RUNS}
    assert {"tdes", "thumbpod", "oscall"} <= names and len(names) >= 6
    assert ("tdes --energy", ["simulate", "tdes", "--json", "--energy"]) in RUNS
    router = [argv for run_id, argv in RUNS if run_id.startswith("edge-router ")]
    assert [argv[-1] for argv in router] == ["table4", "fig3a", "fig3b", "fig4"]
    assert all(argv[3:5] == ["--scale", "0.02"] for argv in router)


@pytest.mark.parametrize("argv", [argv for _, argv in RUNS], ids=[i for i, _ in RUNS])
def test_simulate_json_labels_every_figure(argv: list[str]) -> None:
    doc = run_json(argv)
    assert unlabeled(doc) == []
    assert provenance_violations(doc) == []
    assert paper_values_not_input(doc) == []
    run_id = next(i for i, a in RUNS if a == argv)
    figures = {row["figure"] for row in paper_rows(doc)}
    assert COMPARED.get(run_id, set()) <= figures, run_id


def test_bench_json_labels_every_figure() -> None:
    """Every bench group (a quick run of all of them, rtl and daemon included)."""
    doc = run_json(["bench", "--json", "--quick"])
    groups = ["proxy", "alloc", "sim", "oscall", "sharing", "rtl", "daemon", "verify", "linux"]
    assert set(doc["group_seconds"]) == set(groups)
    assert unlabeled(doc) == []
    assert paper_values_not_input(doc) == []
    assert doc["labels"]["sim_events_per_s"] == "measured"
    assert doc["labels"]["context_switch_modeled_us"] == "modeled"
