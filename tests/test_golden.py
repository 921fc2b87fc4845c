"""Stored golden outputs of the paper scenarios: ``juggle simulate ofdm|edge-router|tdes|thumbpod|
oscall --json`` at fixed seeds and small sizes, every figure labeled *modeled*, *input* or
*calibrated* compared exactly with ``tests/golden/<case>.json``.

Which figures are kept follows THE RULE of ``tests/test_json_labels.py`` (the nearest enclosing
``labels`` entry for the key names the kind of a numeric leaf): *measured* figures vary from run
to run and are left out; everything else is derived from the seed and the stated inputs, so the
same code gives the same numbers, to the last bit. A golden file holds the command line and a
flat ``{"path.to[0].figure": value}`` map of the kept figures.

A deliberate change of a model shows up here as a failure naming the figures that moved:
``make golden`` rewrites the files (``JUGGLE_GOLDEN_UPDATE=1``) and prints the diff to commit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from juggle.commands.cli import _register_scenarios, app
from labels_support import figure_labels

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("JUGGLE_GOLDEN_UPDATE") == "1"
KEPT = {"modeled", "input", "calibrated"}
DROPPED = {"measured"}

CASES: dict[str, list[str]] = {
    "ofdm": ["ofdm", "--seed", "1", "--duration", "1", "--modeled-only", "--quiet"],
    "cluster": [
        "cluster",
        "--nodes",
        "8",
        "--services",
        "50",
        "--duration",
        "0.5",
        "--seed",
        "1",
        "--quiet",
    ],
    "edge-router-table4": ["edge-router", "--experiment", "table4", "--seed", "1", "--quiet"],
    "edge-router-fig3a": [
        "edge-router",
        "--experiment",
        "fig3a",
        "--seed",
        "1",
        "--scale",
        "0.05",
        "--quiet",
    ],
    "edge-router-fig3b": [
        "edge-router",
        "--experiment",
        "fig3b",
        "--seed",
        "1",
        "--scale",
        "0.05",
        "--quiet",
    ],
    "edge-router-fig4": [
        "edge-router",
        "--experiment",
        "fig4",
        "--seed",
        "1",
        "--scale",
        "0.05",
        "--quiet",
    ],
    "tdes": ["tdes"],
    "tdes-energy": ["tdes", "--energy"],
    "thumbpod": ["thumbpod"],
    "oscall": ["oscall"],
}
"""Golden case -> arguments of ``juggle simulate`` (``--json`` is added); fixed seeds, small
sizes (each runs in well under a second)."""


def figures(doc: Any) -> dict[str, float | int]:
    """The numeric leaves of ``doc`` labeled modeled, input or calibrated, by path.

    Raises AssertionError for a leaf with no kind (the label walk of test_json_labels.py fails
    on those too): a golden file must not silently lose or keep an unlabeled figure."""
    out: dict[str, float | int] = {}
    unknown: list[str] = []
    for path, value, label in figure_labels(doc):
        if label in KEPT:
            out[path] = value
        elif label not in DROPPED:
            unknown.append(f"{path} (label {label!r})")
    assert not unknown, f"figures without a kind: {unknown}"
    return out


def run_case(case: str) -> dict[str, Any]:
    """The golden document of ``case``: its command line and its kept figures."""
    _register_scenarios()
    argv = ["simulate", *CASES[case], "--json"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    return {"argv": argv, "figures": figures(json.loads(result.stdout))}


def differences(stored: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What differs between two golden documents, one line per figure (empty: identical)."""
    out: list[str] = []
    if stored["argv"] != now["argv"]:
        out.append(f"command line {stored['argv']} -> {now['argv']}")
    old, new = stored["figures"], now["figures"]
    for path in sorted(old.keys() | new.keys()):
        if path not in new:
            out.append(f"{path}: {old[path]!r} -> (gone)")
        elif path not in old:
            out.append(f"{path}: (new) -> {new[path]!r}")
        elif type(old[path]) is not type(new[path]) or old[path] != new[path]:
            out.append(f"{path}: {old[path]!r} -> {new[path]!r}")
    return out


def write_golden(case: str, doc: dict[str, Any]) -> None:
    GOLDEN.mkdir(exist_ok=True)
    (GOLDEN / f"{case}.json").write_text(json.dumps(doc, indent=1) + "\n")


@pytest.mark.parametrize("case", sorted(CASES))
def test_modeled_figures_match_the_golden_output(case: str) -> None:
    now = run_case(case)
    assert len(now["figures"]) >= 10, f"{case}: too few figures to be worth a golden file"
    path = GOLDEN / f"{case}.json"
    if UPDATE:
        write_golden(case, now)
    assert path.exists(), f"no golden output {path}: run `make golden`"
    stored = json.loads(path.read_text())
    diff = differences(stored, now)
    assert not diff, (
        f"{case}: {len(diff)} figures differ from {path.name} (if the change is meant, run "
        "`make golden` and commit the diff):\n  " + "\n  ".join(diff[:40])
    )


def test_every_golden_file_has_a_case() -> None:
    stored = {p.stem for p in GOLDEN.glob("*.json")}
    assert stored == set(CASES), f"stale or missing golden files: {stored ^ set(CASES)}"


def test_measured_figures_are_left_out_and_the_comparison_is_exact() -> None:
    doc = {
        "a": 1.0,
        "b": {"x": 2, "y": 3.5},
        "c": [4, 5],
        "labels": {"a": "modeled", "b": {"x": "input", "y": "measured"}, "c": "calibrated"},
    }
    assert figures(doc) == {"a": 1.0, "b.x": 2, "c[0]": 4, "c[1]": 5}
    with pytest.raises(AssertionError, match="e"):
        figures({**doc, "e": 7})
    stored = {"argv": ["x"], "figures": {"a": 1.0, "b": 2}}
    assert differences(stored, {"argv": ["x"], "figures": {"a": 1.0, "b": 2}}) == []
    assert differences(stored, {"argv": ["x"], "figures": {"a": 1.0 + 1e-15, "b": 2}}) == [
        f"a: 1.0 -> {1.0 + 1e-15!r}"
    ]
    assert differences(stored, {"argv": ["x"], "figures": {"a": 1.0, "b": 2.0}}) == ["b: 2 -> 2.0"]
    assert differences(stored, {"argv": ["x"], "figures": {"a": 1.0}}) == ["b: 2 -> (gone)"]


def test_a_changed_model_fails_the_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    """Break a modeled figure on purpose: the golden comparison names what moved."""
    import juggle.simulate.tdes.model as tdes
    import juggle.simulate.thumbpod as thumbpod

    costs = dict(thumbpod.INSTRUCTION_COSTS)
    costs["store"] = (costs["store"][0] + 1, costs["store"][1])  # one more cycle per store
    monkeypatch.setattr(thumbpod, "INSTRUCTION_COSTS", costs)
    stored = json.loads((GOLDEN / "thumbpod.json").read_text())
    moved = differences(stored, run_case("thumbpod"))
    assert moved and all(" -> " in line for line in moved)

    monkeypatch.setattr(tdes, "AS_FAST", 0.5)  # the size from which proxied is "as fast"
    stored = json.loads((GOLDEN / "tdes.json").read_text())
    moved = differences(stored, run_case("tdes"))
    assert any(line.startswith("as_fast") or ".as_fast" in line for line in moved), moved
