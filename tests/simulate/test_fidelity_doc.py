"""``docs/fidelity.md`` is generated, not typed: the committed file must equal what
``juggle.simulate.fidelity`` writes now from the ``paper_comparison`` rows of ``juggle simulate
... --json`` at the golden outputs' seeds and sizes (``make fidelity`` rewrites it)."""

from __future__ import annotations

import ast
import difflib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from juggle.commands.cli import _register_scenarios, app
from juggle.errors import ConfigurationError
from juggle.simulate import fidelity

ROOT = Path(__file__).parents[2]
DOC = ROOT / "docs" / "fidelity.md"


def run_in_process(argv: Sequence[str]) -> dict[str, Any]:
    """``juggle simulate <argv> --json`` in this process (the generator's runner, faster than
    the subprocess ``make fidelity`` uses; the CLI is the same)."""
    _register_scenarios()
    result = CliRunner().invoke(app, ["simulate", *argv, "--json"])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def doc_diff(committed: str, now: str) -> list[str]:
    """The unified diff from the committed doc to the generated one (empty: equal)."""
    return list(
        difflib.unified_diff(
            committed.splitlines(), now.splitlines(), "committed", "generated", lineterm=""
        )
    )


@pytest.fixture(scope="module")
def docs() -> dict[str, dict[str, Any]]:
    return {case.name: run_in_process(case.argv) for case in fidelity.CASES}


def test_the_committed_doc_is_what_the_generator_writes(docs: dict[str, dict[str, Any]]) -> None:
    now = fidelity.render(docs)
    diff = doc_diff(DOC.read_text(), now)
    assert not diff, "docs/fidelity.md is stale: run `make fidelity` and commit\n" + "\n".join(
        diff[:60]
    )


def test_an_edited_number_in_the_doc_fails_the_comparison(
    docs: dict[str, dict[str, Any]],
) -> None:
    """Break the doc on purpose: one figure typed differently is a difference naming it."""
    committed = DOC.read_text()
    assert "| 13.374 | 13.418 | ms |" in committed
    edited = committed.replace("| 13.374 | 13.418 | ms |", "| 13.374 | 13.419 | ms |")
    diff = doc_diff(edited, fidelity.render(docs))
    changed = [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert len(changed) == 2 and all("Table 3 tdes reconfiguration" in c for c in changed)


def test_a_changed_model_changes_its_rows(
    docs: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Break a modeled figure on purpose (one more cycle per store in ThumbPod's C core): the
    generated doc moves in that figure's rows and the committed one no longer matches."""
    import juggle.simulate.thumbpod as thumbpod

    costs = dict(thumbpod.INSTRUCTION_COSTS)
    costs["store"] = (costs["store"][0] + 1, costs["store"][1])
    monkeypatch.setattr(thumbpod, "INSTRUCTION_COSTS", costs)
    moved = {**docs, "thumbpod": run_in_process(("thumbpod",))}
    diff = doc_diff(DOC.read_text(), fidelity.render(moved))
    removed = [line for line in diff if line.startswith("-") and not line.startswith("---")]
    assert any(line.startswith("-| Fig 3 c core_cycles | 44063 |") for line in removed), diff


#: golden cases of tests/test_golden.py that reproduce no seed paper (issue 24's cluster
#: placement is juggle's own experiment: it has no paper figure to stand beside)
NOT_A_SEED_SCENARIO = ("cluster",)


def test_every_golden_case_is_in_the_table_at_its_golden_arguments() -> None:
    """The table runs each scenario as tests/test_golden.py does (its CASES, read from the
    source), so its figures are the golden ones; ``sort`` has no golden output."""
    tree = ast.parse((ROOT / "tests" / "test_golden.py").read_text())
    golden = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and node.target.id == "CASES"
        and node.value is not None
    )
    for name in NOT_A_SEED_SCENARIO:  # golden, but reproducing no paper: not in the table
        golden.pop(name)
    ours = {case.name: list(case.argv) for case in fidelity.CASES}
    assert set(golden) <= set(ours), set(golden) - set(ours)
    assert {name: ours[name] for name in golden} == golden
    assert set(ours) - set(golden) == {"sort"}


def _row(**changes: Any) -> dict[str, Any]:
    row = fidelity.comparison("Fig 1 x", "x", 2.0, 3.0, "modeled", unit="s")
    row.update(changes)
    return row


def test_render_groups_by_seed_and_lists_runs_without_rows() -> None:
    cases = (
        fidelity.Case("a", "Seed A", ("a",)),
        fidelity.Case("b", "Seed B", ("b", "--seed", "1")),
    )
    fit = fidelity.Fit("clock", ("Fig 1 x 2 s",))
    calibrated = fidelity.comparison(
        "Fig 1 y|z", "y", 4.0, 3.0, "calibrated", unit="s", fitted=[fit]
    )
    text = fidelity.render({"a": {"paper_comparison": [_row(), calibrated]}, "b": {}}, cases)
    assert "2 figures: 1 modeled, 1 calibrated, 0 input." in text
    assert "## Seed A" in text and "## Seed B" not in text
    assert "| Fig 1 x | 2.0 | 3.0 | s | +50.00% | *modeled* |  |  |" in text
    assert (
        "| Fig 1 y\\|z | 4.0 | 3.0 | s | -25.00% | *calibrated* | `clock` ← Fig 1 x 2 s |" in text
    )
    not_yet = text.split("## Not yet compared", 1)[1]
    assert "- Seed B: `juggle simulate b --seed 1 --json`" in not_yet


def test_render_refuses_a_missing_document_or_a_short_row() -> None:
    cases = (fidelity.Case("a", "Seed A", ("a",)),)
    with pytest.raises(ConfigurationError, match="'a'") as missing:
        fidelity.render({}, cases)
    assert missing.value.value == "a"
    short = _row()
    del short["ours"]
    with pytest.raises(ConfigurationError, match="lacks 'ours'"):
        fidelity.render({"a": {"paper_comparison": [short]}}, cases)


def test_an_echoed_figure_with_fitted_parameters_is_refused() -> None:
    """A figure that is the paper's value copied (input) lists no fit; ``uses`` is kept."""
    fit = fidelity.Fit("kni_cycles", ("Fig 3 C interface 367 cycles",))
    with pytest.raises(ConfigurationError, match="echoed") as refused:
        fidelity.comparison(
            "Fig 3 x", "x", 367.0, 367.0, "input", unit="c", fitted=[fit], echoed=True
        )
    assert refused.value.value == "Fig 3 x"
    row = fidelity.comparison(
        "Fig 3 y",
        "y",
        2.0,
        2.0,
        "calibrated",
        unit="c",
        fitted=[fit],
        uses={"kni_cycles": "calibrated"},
    )
    assert row["uses"] == [{"parameter": "kni_cycles", "label": "calibrated"}]


def test_a_run_without_rows_says_why_when_it_can() -> None:
    cases = (
        fidelity.Case("a", "Seed A", ("a",), why_not="the paper's values are in a chart"),
        fidelity.Case("b", "Seed B", ("b",)),
    )
    text = fidelity.render({"a": {}, "b": {}}, cases)
    why = text.split("## Not compared, and why", 1)[1].split("## Not yet compared", 1)
    assert "- Seed A: `juggle simulate a --json`: the paper's values are in a chart" in why[0]
    assert "- Seed B: `juggle simulate b --json`" in why[1] and "Seed A" not in why[1]
