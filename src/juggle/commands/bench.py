"""``juggle bench``: the benchmark suite (:func:`~juggle.bench.run_bench`) as a table of
figures against their targets, or with ``--json`` as one JSON document. A group whose optional
extra is missing is skipped and named (under ``skipped`` with ``--json``, below the table
without), with the ``pip install`` that adds it."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from juggle.bench import TARGETS, run_bench
from juggle.commands.output import JsonOpt, console, emit_json
from juggle.commands.progressbar import progress_bar

__all__ = ["bench", "render_bench"]


def bench(
    json_out: JsonOpt = False,
    quick: Annotated[bool, typer.Option(help="Fewer iterations (a smoke run).")] = False,
    only: Annotated[
        list[str] | None, typer.Option(help="Run only these groups (repeatable).")
    ] = None,
    quiet: Annotated[bool, typer.Option(help="No progress bar on stderr.")] = False,
) -> None:
    """The benchmark suite: ratios and latencies measured in one run (see benchmarks/)."""
    with progress_bar("bench", silent=json_out or quiet) as step:
        result = run_bench(quick=quick, only=only or None, progress=step)
    if json_out:
        emit_json(result)
    else:
        render_bench(result, console())


def _number(value: float) -> str:
    """A figure for the table: counts (ints) without decimals, measures with three."""
    return f"{value:,}" if isinstance(value, int) else f"{value:,.3f}"


def render_bench(result: dict[str, Any], console: Console) -> None:
    """The suite's result as a rich table (counts as integers)."""
    table = Table(title=f"juggle bench ({result['machine']})")
    for col in ("figure", "value", "target", "met"):
        table.add_column(col)
    for key, value in result.items():
        if isinstance(value, float | int) and not isinstance(value, bool):
            target = TARGETS.get(key)
            met = result["targets_met"].get(key)
            table.add_row(
                key,
                _number(value),
                f"{target[0]} {target[1]:g}" if target else "",
                "" if met is None else ("[green]yes[/green]" if met else "[red]no[/red]"),
            )
    for key, value in result.get("oscall", {}).items():
        table.add_row(f"oscall.{key}", _number(value), "", "")
    console.print(table)
    for group, why in result.get("skipped", {}).items():
        console.print(
            f"skipped {group}: needs the {why['extra']} extra ({why['install']}): {why['reason']}",
            markup=False,
        )
