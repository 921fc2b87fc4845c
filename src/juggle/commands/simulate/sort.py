"""``juggle simulate sort``: the ReconOS sort application (SW, HW, SW+HW) from the command line.

:func:`register` adds the ``sort`` command to the ``simulate`` Typer app; with ``--json`` it
prints one JSON document (``runs`` → ``SW``/``HW``/``SW+HW`` → ``sort_ms``, ``merge_ms``,
``verified``, …; ``labels`` give each figure its kind, ``how`` how it was obtained), otherwise
a table whose caption says which figures are measured or modeled.
``--plot FILE.png`` draws the result as stacked bars (:mod:`juggle.simulate.reconos.plot`),
announced as ``wrote FILE.png`` on stderr (with ``--json``: under ``files``). A transient
progress bar on stderr counts the sorted chunks unless ``--json`` or ``--quiet``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from juggle.commands.output import announce, console, fail
from juggle.commands.progressbar import progress_bar
from juggle.errors import ConfigurationError, HwThreadArgumentError
from juggle.simulate.plot_files import check_png
from juggle.simulate.reconos.sort import RUN_NAMES, run_sort


def _table(result: dict[str, Any]) -> Table:
    table = Table(
        title=(
            f"ReconOS sort: {result['size']} words in {result['chunks']} chunks "
            f"(seed {result['seed']})"
        ),
        caption=(
            "SW sort: measured. HW sort: modeled (fabric cycles "
            f"@ {result['fabric_clock_hz'] / 1e6:g} MHz + the measured CPU side of its OS "
            "calls). SW+HW: modeled (measured SW overlapped with modeled HW on one "
            "timeline). Modeled ms: the modeled part of the sort time, the rest is measured. "
            "Merge: measured. SW/HW: chunks sorted in software / hardware."
        ),
    )
    headers = ("run", "sort ms", "modeled ms", "merge ms", "total ms", "SW/HW", "verified")
    for header in headers:
        table.add_column(header, justify="left" if header == "run" else "right")
    for name in RUN_NAMES:
        run = result["runs"][name]
        table.add_row(
            name,
            f"{run['sort_ms']:.1f}",
            f"{run['sort_modeled_ms']:.1f}",
            f"{run['merge_ms']:.1f}",
            f"{run['total_ms']:.1f}",
            f"{run['chunks_sw']}/{run['chunks_hw']}",
            "yes" if run["verified"] else "NO",
        )
    return table


def register(simulate_app: typer.Typer) -> None:
    """Add the ``sort`` command to ``simulate_app``."""

    @simulate_app.command("sort")
    def sort_command(
        json_output: Annotated[
            bool, typer.Option("--json", help="Print one JSON document instead of a table.")
        ] = False,
        size: Annotated[int, typer.Option("--size", help="Number of 32-bit words.")] = 2**18,
        chunks: Annotated[
            int | None,
            typer.Option(
                "--chunks", help=escape("Number of chunks [default: one per 2048 words].")
            ),
        ] = None,
        seed: Annotated[int, typer.Option("--seed", help="Seed of the random input.")] = 0,
        plot: Annotated[
            Path | None,
            typer.Option("--plot", help="Write the result as a PNG bar chart to this file."),
        ] = None,
        quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar on stderr.")] = False,
    ) -> None:
        """Sort with bubble-sort threads in SW, HW and SW+HW, then merge (ReconOS Fig. 4c)."""
        try:
            if plot is not None:
                check_png(plot)
            with progress_bar("sort", silent=json_output or quiet) as progress:
                result = run_sort(size, chunks, seed, progress=progress)
            if plot is not None:
                from juggle.simulate.reconos.plot import plot_sort

                plot_sort(result, plot)
        except HwThreadArgumentError as exc:
            raise typer.BadParameter(str(exc)) from exc
        except ConfigurationError as exc:
            fail(exc, json_output)
        announce([] if plot is None else [plot], result, json_out=json_output)
        if json_output and plot is not None:
            result["labels"]["files"] = "input"
        if json_output:
            typer.echo(json.dumps(result, indent=2))
        else:
            console().print(_table(result))
        if not all(result["runs"][name]["verified"] for name in RUN_NAMES):
            raise typer.Exit(code=1)
