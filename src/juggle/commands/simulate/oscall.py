"""``juggle simulate oscall``: ReconOS Table 2 on a model of its eCos/PowerPC 405 platform
(:func:`~juggle.simulate.reconos.ecos.modeled_ecos_ppc`), beside the paper; nothing is
measured, so the document is the same every time."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from juggle.commands.output import console
from juggle.simulate.reconos.ecos import modeled_ecos_ppc

__all__ = ["register", "render_oscall", "simulate_document", "simulate_oscall"]


def register(simulate_app: typer.Typer) -> None:
    """Add the ``oscall`` command to ``simulate_app``."""
    simulate_app.command("oscall")(simulate_oscall)


def simulate_document() -> dict[str, Any]:
    """What ``juggle simulate oscall --json`` prints: the ``modeled_ecos_ppc`` table (no
    measurement; the same document every time)."""
    return {
        "scenario": "oscall",
        "paper": "Lübbers & Platzner, ReconOS, Table 2: synchronization benchmark, eCos/PPC",
        "modeled_ecos_ppc": modeled_ecos_ppc(),
        "labels": {"scenario": "input", "paper": "input", "modeled_ecos_ppc": "calibrated"},
        "how": {
            "modeled_ecos_ppc": "the delegate path of the paper's platform, step by step "
            "with stated costs (juggle.simulate.reconos.ecos); per-cell labels inside: every "
            "cell has a fitted cost in its path (calibrated); 8 were fitting targets "
            "(fitting_targets), the other 6 check the fitted costs",
        },
    }


def simulate_oscall(
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """ReconOS Table 2 on a model of its eCos/PowerPC 405 platform, beside the paper."""
    doc = simulate_document()
    if json_out:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        render_oscall(doc, console())


def render_oscall(doc: dict[str, Any], console: Console) -> None:
    """Print ``doc`` (from :func:`simulate_document`): model beside paper, per cell."""
    table_doc = doc["modeled_ecos_ppc"]
    table = Table(title=f"ReconOS Table 2, eCos/PPC, {table_doc['unit']} (model vs paper)")
    targets = set(table_doc.get("fitting_targets", ()))
    for column in ("call", "model", "paper", "deviation", "label", "target"):
        table.add_column(
            column,
            justify="left" if column in ("call", "label", "target") else "right",
            no_wrap=column == "call",
        )
    for cell, entry in table_doc["cells"].items():
        table.add_row(
            cell,
            f"{entry['model_cycles']:.0f}",
            str(entry["paper_cycles"]),
            f"{entry['deviation_pct']:+.1f} %",
            entry["labels"]["model_cycles"].upper(),
            "yes" if cell in targets else "no",
        )
    console.print(table)
    console.print(
        "[dim]target: a cost was fitted to this cell; every cell is computed from fitted "
        "costs (calibrated), the others check the fit[/dim]"
    )
    costs = Table(title="stated costs (bus cycles)")
    for column in ("cost", "value", "label", "source"):
        costs.add_column(column, overflow="fold")
    for name, cost in table_doc["costs"].items():
        costs.add_row(name, f"{cost['cycles']:g}", cost["label"], cost["source"])
    console.print(costs)
    console.print(
        f"largest deviation {table_doc['worst_deviation_pct']:.1f} % "
        f"(tolerance {table_doc['tolerance_pct']:.0f} %)"
    )
