"""``juggle simulate thumbpod``: ThumbPod's Fig 3 (:func:`~juggle.simulate.thumbpod.run_thumbpod`)
as a table, model beside paper, or with ``--json`` as one JSON document whose ``labels`` give
every figure its kind."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from juggle.commands.output import console
from juggle.simulate.thumbpod import run_thumbpod

__all__ = ["register", "render_thumbpod", "thumbpod"]


def register(simulate_app: typer.Typer) -> None:
    """Add the ``thumbpod`` command to ``simulate_app``."""
    simulate_app.command("thumbpod")(thumbpod)


def thumbpod(
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """ThumbPod Fig 3 (DAC 2003): Rijndael's interface and core cycles per refinement level
    on a modeled LEON2-Sparc, beside the paper's figures."""
    doc = run_thumbpod()
    if json_out:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        render_thumbpod(doc, console())


def _cell(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}{unit}" if unit else f"{value:,.0f}"


def render_thumbpod(doc: dict[str, Any], console: Console) -> None:
    """Print a ThumbPod result as a table, model beside paper, with each figure's label."""
    table = Table(title="ThumbPod Fig 3: LEON2 cycles per rijndael() call")
    for column in ("level", "figure", "model", "paper", "deviation", "model label"):
        table.add_column(column, justify="right" if column in ("model", "paper") else "left")
    for name, level in doc["levels"].items():
        for key in ("interface_cycles", "core_cycles", "total_cycles", "gain"):
            unit = "x" if key == "gain" else ""
            dev = level["deviation_pct"][key]
            table.add_row(
                name,
                key.removesuffix("_cycles"),
                _cell(level[key], unit),
                _cell(level["paper"][key], unit),
                "" if dev is None else f"{dev:+.1f} %",
                level["labels"][key],
            )
        table.add_section()
    console.print(table)
    for key in ("kvm_factor", "kni_cycles", "coprocessor_cycles"):
        p = doc["parameters"][key]
        console.print(f"{key} = {p['value']:g} ({p['label']}: {p['how']})")
    what_if = doc["what_if"]["hardware_juggle_driver"]
    tx = what_if["transactions"]
    console.print(
        f"what-if, juggle's AesDriver protocol ({tx['reads']} reads + {tx['writes']} writes): "
        f"{what_if['total_cycles']:,.0f} cycles, gain {what_if['gain']:.0f}x (calibrated)"
    )
