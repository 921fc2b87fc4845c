"""``juggle simulate edge-router``: the edge-router paper's experiments, the command.

Without ``--json`` it prints rich tables (every result MODELED); with ``--json`` one JSON
document on stdout whose ``labels`` give each key its kind (modeled, input, ...). Errors go
to stderr with exit status 2. ``--plot FILE.png`` writes a figure, announced as
``wrote FILE.png`` on stderr (with ``--json``: under ``files`` in the document). A transient
progress bar on stderr follows the runs unless ``--json`` or ``--quiet``; ``--scale``
shortens the figures' traces for a quick look.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from juggle.commands.output import announce, console, fail
from juggle.commands.progressbar import progress_bar
from juggle.errors import ConfigurationError, JuggleError
from juggle.simulate.router.experiments import EXPERIMENTS, run_edge_router

__all__ = ["edge_router", "register", "render_edge_router"]


def register(simulate_app: typer.Typer) -> None:
    """Add the ``edge-router`` command to ``simulate_app``."""
    simulate_app.command("edge-router")(edge_router)


def edge_router(
    experiment: Annotated[
        str, typer.Option("--experiment", help=f"One of: {', '.join(EXPERIMENTS)}.")
    ] = "table4",
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the traffic.")] = 1,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write a PNG figure to this file.")
    ] = None,
    policy: Annotated[
        list[str] | None,
        typer.Option("--policy", help="Controller to compare (repeatable; figures only)."),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar on stderr.")] = False,
    scale: Annotated[
        float,
        typer.Option(
            "--scale",
            help="Run this fraction of each trace's length (figures only; 1: the paper's "
            "experiment, less: a quick look). Reported as duration_scale.",
        ),
    ] = 1.0,
) -> None:
    """The edge-router paper (SBCCI 2007) on the simulated virtex4-router board."""
    try:
        if not 0 < scale < math.inf:
            raise ConfigurationError(
                f'"--scale" must be a finite number > 0, got {scale!r}', value=scale
            )
        with progress_bar(f"edge-router {experiment}", silent=json_out or quiet) as progress:
            doc = run_edge_router(
                experiment,
                seed=seed,
                policies=policy or None,
                duration_scale=scale,
                plot=plot,
                progress=progress,
            )
    except JuggleError as exc:
        fail(exc, json_out)
    announce([] if plot is None else [plot], doc, json_out=json_out)
    if json_out and plot is not None:
        doc["labels"]["files"] = "input"
    if json_out:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        render_edge_router(doc, console())


def render_edge_router(doc: dict[str, Any], console: Console) -> None:
    """Print an edge-router result as a table."""
    if doc["experiment"] == "table4":
        table = Table(title="Table 4: µs for 100 packets of 512 B (MODELED; paper for reference)")
        table.add_column("distribution")
        for column in doc["columns"]:
            table.add_column(f"{column} model", justify="right")
            table.add_column("paper", justify="right", style="dim")
        width = len(doc["columns"])
        for r, row in enumerate(doc["rows"]):
            cells = []
            for c in range(width):
                cells += [
                    f"{doc['cells_us'][r * width + c]:.0f}",
                    str(doc["paper_us"][r * width + c]),
                ]
            table.add_row(row, *cells)
        console.print(table)
        worst = max(abs(e) for e in doc["error_pct"])
        console.print(f"largest deviation from the paper: {worst:.1f} %")
        return
    scale = doc.get("duration_scale", 1.0)
    shortened = "" if scale == 1.0 else f", traces at {100 * scale:g} % of their length"
    table = Table(title=f"{doc['experiment']}: speedup over static Config_A (MODELED{shortened})")
    table.add_column(doc["x_label"])
    for name in doc["speedup"]:
        table.add_column(name, justify="right")
    table.add_column("static ms", justify="right", style="dim")
    for i, x in enumerate(doc["x"]):
        values = [f"{doc['speedup'][name][i]:.3f}" for name in doc["speedup"]]
        table.add_row(str(x), *values, f"{doc['static_ms'][i]:.1f}")
    console.print(table)
    if "oracle_plan" in doc:
        console.print(
            "oracle: the fastest plan it knows for each trace (own plan at a block size, or a "
            f"replayed policy): {', '.join(doc['oracle_plan'])}",
            style="dim",
        )
