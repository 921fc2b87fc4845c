"""One row of a paper comparison: the paper's value, ours, the error, the label, and which of
our parameters were fitted to which of the paper's numbers.

Every ``juggle simulate`` document that sets a figure beside the paper's carries a
``paper_comparison`` list of these rows. The label follows from how the figure is produced:
an echoed value is *input*; a figure computed from a parameter fitted to a paper number is
*calibrated* (the row's ``fitted`` names the parameters and what they were fitted to); only a
figure with no fitted parameter in it is *modeled*, a prediction. ``of`` is the figure's path
in the document, so a reader (and the label walk of the tests) finds the same figure's label
there.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from juggle.errors import ConfigurationError

__all__ = ["CASES", "Case", "Fit", "comparison", "generate", "paper_rows", "render", "run_cli"]

_KINDS = ("modeled", "calibrated", "input")


@dataclass(frozen=True, slots=True)
class Fit:
    """A parameter of ours and the paper numbers it was fitted to."""

    parameter: str
    fitted_to: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """``{"parameter": ..., "fitted_to": [...]}``."""
        return {"parameter": self.parameter, "fitted_to": list(self.fitted_to)}


def comparison(
    figure: str,
    of: str,
    paper: float,
    ours: float,
    label: str,
    *,
    unit: str,
    fitted: Sequence[Fit] = (),
    echoed: bool = False,
    uses: Mapping[str, str] | None = None,
    note: str = "",
) -> dict[str, Any]:
    """One ``paper_comparison`` row: ``figure`` names the paper's figure, ``of`` the path of
    ours in the document; ``error_pct`` is ``100 x (ours - paper) / paper`` (rounded to 0.01),
    labeled like ``ours``; the paper's value is *input*.

    ``uses`` (optional) maps every parameter the figure is computed from to that parameter's
    own label; the row keeps it (``uses``) so a reader, and the label walk of the tests, can
    check that each *calibrated* parameter in it is one of ``fitted``.

    Raises :class:`~juggle.errors.ConfigurationError` for a label that is not modeled,
    calibrated or input, a paper value of zero (no error against it), or an echoed figure
    that also lists fitted parameters (a copy is not a fit: it is *input*).
    """
    if label not in _KINDS:
        raise ConfigurationError(f"label must be one of {list(_KINDS)}, got {label!r}", value=label)
    if paper == 0:
        raise ConfigurationError(f"paper value of {figure!r} is 0: no error against it", value=0)
    if echoed and fitted:
        raise ConfigurationError(
            f"{figure!r} is echoed (input) and lists fitted parameters "
            f"{[fit.parameter for fit in fitted]}: a copied value has none",
            value=figure,
        )
    row: dict[str, Any] = {
        "figure": figure,
        "of": of,
        "unit": unit,
        "paper": paper,
        "ours": ours,
        "error_pct": round(100.0 * (ours - paper) / paper, 2),
        "label": label,
        "echoed": echoed,
        "fitted": [fit.to_json() for fit in fitted],
        "labels": {"paper": "input", "ours": label, "error_pct": label},
    }
    if uses is not None:
        row["uses"] = [{"parameter": name, "label": kind} for name, kind in uses.items()]
    if note:
        row["note"] = note
    return row


@dataclass(frozen=True, slots=True)
class Case:
    """One ``juggle simulate`` run of the fidelity table: the seed paper it reproduces and the
    arguments (fixed seeds and sizes, those of the golden outputs, so the table is stable)."""

    name: str
    seed: str
    argv: tuple[str, ...]
    why_not: str = ""
    """Why the run sets no figure beside the paper's (empty: it does)."""


CASES: tuple[Case, ...] = (
    Case("tdes", "Juggle", ("tdes",)),
    Case("tdes-energy", "Juggle", ("tdes", "--energy")),
    Case("oscall", "ReconOS", ("oscall",)),
    Case(
        "sort",
        "ReconOS",
        ("sort", "--size", "4096", "--seed", "0", "--quiet"),
        why_not="Fig 4c's sort and merge times are bars of a chart whose values the paper's "
        "text does not give, and our software times are measured on this host, not on the "
        "paper's PowerPC or MicroBlaze",
    ),
    Case("thumbpod", "ThumbPod", ("thumbpod",)),
    Case(
        "edge-router-table4",
        "edge router",
        ("edge-router", "--experiment", "table4", "--seed", "1", "--quiet"),
    ),
    *(
        Case(
            f"edge-router-{fig}",
            "edge router",
            ("edge-router", "--experiment", fig, "--seed", "1", "--scale", "0.05", "--quiet"),
        )
        for fig in ("fig3a", "fig3b", "fig4")
    ),
    Case(
        "ofdm", "Ker-ONE", ("ofdm", "--seed", "1", "--duration", "1", "--modeled-only", "--quiet")
    ),
)
"""Every scenario of the five seed papers, in the table's order; ``juggle simulate <argv>
--json`` gives each one's document."""

Runner = Callable[[Sequence[str]], dict[str, Any]]
"""Runs ``juggle simulate <argv> --json`` and returns the parsed document."""


def paper_rows(doc: Any) -> list[dict[str, Any]]:
    """Every row of every ``paper_comparison`` list anywhere in ``doc``, in document order."""
    rows: list[dict[str, Any]] = []
    if isinstance(doc, dict):
        for key, child in doc.items():
            if key == "paper_comparison" and isinstance(child, list):
                rows += [row for row in child if isinstance(row, dict)]
            else:
                rows += paper_rows(child)
    elif isinstance(doc, list):
        for child in doc:
            rows += paper_rows(child)
    return rows


def _cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _number(value: Any) -> str:
    return json.dumps(value)


def _fitted(fits: Sequence[dict[str, Any]]) -> str:
    return "; ".join(
        f"`{fit['parameter']}` ← " + ", ".join(str(to) for to in fit["fitted_to"]) for fit in fits
    )


def render(docs: Mapping[str, dict[str, Any]], cases: Sequence[Case] = CASES) -> str:
    """``docs/fidelity.md`` from each case's document (``docs[case.name]``): one table per seed
    paper of every ``paper_comparison`` row (paper value, ours, error, label, the parameters
    fitted to which paper numbers), then the runs that set no figure beside the paper's: with
    their reason (``Case.why_not``) under "Not compared, and why", the others under "Not yet
    compared".

    Raises :class:`~juggle.errors.ConfigurationError` for a case with no document, or a row
    without one of the fields :func:`comparison` writes."""
    lines = [
        "# Fidelity: every reproduced number of the seed papers",
        "",
        "<!-- generated by `make fidelity` (python -m juggle.simulate.fidelity) from the",
        "     paper_comparison rows of `juggle simulate ... --json`; do not edit by hand:",
        "     tests/simulate/test_fidelity_doc.py fails when this file differs from the output -->",
        "",
        "Each row is one figure of a seed paper beside ours, from the `paper_comparison` rows of",
        "`juggle simulate <scenario> --json` at the fixed seeds and sizes of the golden outputs",
        "(`tests/golden/`). The error is 100 x (ours - paper) / paper. The label says how our",
        "figure is produced: *input* is the paper's value copied; *calibrated* is computed from a",
        "parameter of ours fitted to paper numbers (the last column names each such parameter and",
        "the numbers it was fitted to); *modeled* has no fitted parameter in it: a prediction, and",
        "its error is the model's.",
        "",
    ]
    tables: list[str] = []
    missing: list[Case] = []
    counts = dict.fromkeys(_KINDS, 0)
    seeds: dict[str, list[str]] = {}
    for case in cases:
        if case.name not in docs:
            raise ConfigurationError(
                f"no document for fidelity case {case.name!r}", value=case.name
            )
        rows = paper_rows(docs[case.name])
        if not rows:
            missing.append(case)
            continue
        command = " ".join(["juggle simulate", *case.argv, "--json"])
        table = seeds.setdefault(case.seed, [])
        table += [
            "",
            f"`{command}`",
            "",
            "| figure | paper | ours | unit | error | label "
            "| fitted: our parameter ← paper numbers | note |",
            "|---|---:|---:|---|---:|---|---|---|",
        ]
        for row in rows:
            try:
                cells = [
                    _cell(str(row["figure"])),
                    _number(row["paper"]),
                    _number(row["ours"]),
                    _cell(str(row["unit"])),
                    f"{row['error_pct']:+.2f}%",
                    f"*{row['label']}*",
                    _cell(_fitted(row["fitted"])),
                    _cell(str(row.get("note", ""))),
                ]
            except KeyError as exc:
                raise ConfigurationError(
                    f"a paper_comparison row of {case.name!r} lacks {exc.args[0]!r}: {row}",
                    value=case.name,
                ) from exc
            counts[str(row["label"])] = counts.get(str(row["label"]), 0) + 1
            table.append("| " + " | ".join(cells) + " |")
    total = sum(counts.values())
    lines.append(
        f"{total} figures: " + ", ".join(f"{counts[kind]} {kind}" for kind in _KINDS) + "."
    )
    for seed, table in seeds.items():
        tables += ["", f"## {seed}", *table]
    lines += tables
    explained = [case for case in missing if case.why_not]
    if explained:
        lines += [
            "",
            "## Not compared, and why",
            "",
            "These runs reproduce a seed paper's experiment but set none of its figures beside",
            "the paper's:",
            "",
        ]
        lines += [
            f"- {case.seed}: `{' '.join(['juggle simulate', *case.argv, '--json'])}`: "
            f"{case.why_not}"
            for case in explained
        ]
    unexplained = [case for case in missing if not case.why_not]
    if unexplained:
        lines += [
            "",
            "## Not yet compared",
            "",
            "These runs reproduce a seed paper's experiment but carry no `paper_comparison` rows",
            "yet, so none of their figures is in the tables above:",
            "",
        ]
        lines += [
            f"- {case.seed}: `{' '.join(['juggle simulate', *case.argv, '--json'])}`"
            for case in unexplained
        ]
    return "\n".join(lines) + "\n"


def run_cli(argv: Sequence[str]) -> dict[str, Any]:
    """:data:`Runner` that runs ``juggle simulate <argv> --json`` as its own process, with the
    interpreter running this one.

    Raises :class:`~juggle.errors.ConfigurationError` when the run fails or prints no JSON."""
    command = [
        sys.executable,
        "-c",
        "from juggle.commands.cli import main; main()",
        "simulate",
        *argv,
        "--json",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ConfigurationError(
            f"juggle simulate {' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}",
            value=" ".join(argv),
        )
    try:
        doc: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(
            f"juggle simulate {' '.join(argv)} printed no JSON document: {exc}",
            value=" ".join(argv),
        ) from exc
    return doc


def generate(run: Runner = run_cli, cases: Sequence[Case] = CASES) -> str:
    """``docs/fidelity.md`` as it reads now: each case run by ``run``, then :func:`render`."""
    return render({case.name: run(case.argv) for case in cases}, cases)


def main(args: Sequence[str] | None = None) -> int:
    """``python -m juggle.simulate.fidelity [PATH]``: write the fidelity table to ``PATH``
    (default ``docs/fidelity.md``); returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("path", nargs="?", default="docs/fidelity.md", type=Path)
    target: Path = parser.parse_args(args).path
    target.write_text(generate())
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
