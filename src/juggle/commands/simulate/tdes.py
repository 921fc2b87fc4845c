"""``juggle simulate tdes``: the Juggle paper's Triple-DES figures, the command.

Without ``--json`` it prints a rich table (results CALIBRATED: the bus costs are fitted);
with ``--json`` one JSON document on stdout whose ``labels`` give each key its kind
(modeled, calibrated, input).
Fig 7's run also sets Juggle Table 2's resources (the paper's, input) beside the synthesis
reports of juggle's Verilog (ours, labeled as the report says).
``--energy`` runs Fig 8's workload instead of Fig 7's sweep: energy per implementation beside
the paper's. ``--plot FILE.png`` draws Fig 7, announced as ``wrote FILE.png`` on stderr (with
``--json``: under ``files`` in the document). Errors go to stderr with exit status 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from juggle.commands.output import announce, console, fail
from juggle.errors import ConfigurationError, JuggleError
from juggle.simulate.plot_files import check_png
from juggle.simulate.tdes.model import run_tdes, run_tdes_energy

__all__ = ["register", "render_tdes", "tdes"]


def register(simulate_app: typer.Typer) -> None:
    """Add the ``tdes`` command to ``simulate_app``."""
    simulate_app.command("tdes")(tdes)


def tdes(
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    hardware: Annotated[
        str,
        typer.Option(
            help="model: the hardware block cost from the register sequence; rtl: also counted "
            "on the TDES core's Verilog (old and new curves side by side)."
        ),
    ] = "model",
    energy: Annotated[
        bool,
        typer.Option(
            "--energy",
            help="Fig 8 instead: joules of 30 x 1,000 encryptions of 1 KiB in Java, C and "
            "through the FPGA, from the profile's power inputs and the throughput model.",
        ),
    ] = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write Fig 7 as a PNG figure to this file.")
    ] = None,
) -> None:
    """Triple-DES throughput per tier vs buffer size on the simulated xupv2p (Fig 7), or its
    energy (Fig 8) with ``--energy``."""
    try:
        if plot is not None:
            if energy:
                raise ConfigurationError('"--plot" draws Fig 7; leave out --energy', path=str(plot))
            check_png(plot)
        doc = run_tdes_energy(hardware=hardware) if energy else run_tdes(hardware=hardware)
        if plot is not None:
            from juggle.simulate.tdes.plot import plot_tdes

            plot_tdes(doc, plot)
    except JuggleError as exc:
        fail(exc, json_out)
    announce([] if plot is None else [plot], doc, json_out=json_out)
    if json_out:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        render_tdes(doc, console())


def render_tdes(doc: dict[str, Any], console: Console) -> None:
    """Print the TDES result (Fig 7's sweep, or Fig 8's energy) as a table."""
    if doc.get("scenario") == "tdes-energy":
        _render_energy(doc, console)
        return
    table = Table(
        title=f"TDES throughput on {doc['board']}, MB/s (CALIBRATED: bus costs fitted to the paper)"
    )
    table.add_column("buffer", justify="right")
    for tier in doc["throughput_mb_s"]:
        table.add_column(tier, justify="right")
    table.add_column("proxied/direct", justify="right")
    for i, size in enumerate(doc["sizes"]):
        values = [f"{doc['throughput_mb_s'][t][i]:.3f}" for t in doc["throughput_mb_s"]]
        table.add_row(_size(size), *values, f"{doc['proxied_vs_direct'][i]:.2f}")
    console.print(table)
    console.print(
        f"proxied hardware within {100 - doc['as_fast_threshold'] * 100:.0f} % of direct "
        f"from {doc['proxied_as_fast_from']} B up"
    )
    if "table2_resources" in doc:
        _render_table2(doc["table2_resources"], console)
    if doc.get("hardware") == "rtl":
        cycles = doc["block_bus_cycles"]
        rtl = Table(
            title=f"hardware paths, MB/s: register-sequence model ({cycles['model']} bus cycles "
            f"per block) vs the Verilog core ({cycles['rtl']} cycles counted) (MODELED)"
        )
        rtl.add_column("buffer", justify="right")
        for tier in doc["throughput_mb_s_rtl"]:
            rtl.add_column(f"{tier} model", justify="right")
            rtl.add_column(f"{tier} rtl", justify="right")
        for i, size in enumerate(doc["sizes"]):
            cells = []
            for tier, values in doc["throughput_mb_s_rtl"].items():
                cells += [f"{doc['throughput_mb_s'][tier][i]:.3f}", f"{values[i]:.3f}"]
            rtl.add_row(_size(size), *cells)
        console.print(rtl)


def _render_table2(resources: dict[str, dict[str, Any]], console: Console) -> None:
    """Juggle Table 2 beside our synthesis reports, each column with its label."""
    kinds = {entry["labels"]["ours"].upper() for entry in resources.values()}
    table = Table(
        title="Juggle Table 2, resources per core: ours (" + "/".join(sorted(kinds)) + ": "
        "synthesis of juggle's Verilog, slices a packing estimate) vs the paper's (INPUT)"
    )
    for col in ("core", "slices", "flip-flops", "LUTs", "MULT18"):
        table.add_column(col, justify="left" if col == "core" else "right", no_wrap=True)

    def pair(entry: dict[str, Any], key: str) -> str:
        paper = entry["paper"].get(key)
        return f"{entry['ours'][key]:,} / " + ("-" if paper is None else f"{paper:,}")

    for design, entry in resources.items():
        table.add_row(
            design,
            *(pair(entry, key) for key in ("slices", "flipflops", "luts", "mult18")),
        )
    console.print(table)
    reports = ", ".join(sorted({entry["report"] for entry in resources.values()}))
    console.print(
        f"[dim]each cell: ours / paper (-: the paper gives no figure); ours from {reports}[/dim]"
    )


def _render_energy(doc: dict[str, Any], console: Console) -> None:
    work = doc["workload"]
    table = Table(
        title=f"TDES energy on {doc['board']} (Fig 8): {work['runs']} runs x "
        f"{work['calls_per_run']:,} encryptions of {_size(work['buffer_bytes'])}"
    )
    for col in ("tier", "power W", "runtime s", "energy J", "paper J", "deviation", "figure"):
        table.add_column(col, justify="left" if col in ("tier", "figure") else "right")
    paper_runtime = doc["paper_runtime_s"]
    for tier, joules in doc["energy_j"].items():
        runtime = f"{doc['runtime_s'][tier]:,.2f}"
        if tier in paper_runtime:
            runtime += f" (paper {paper_runtime[tier]:g})"
        table.add_row(
            tier,
            f"{doc['power_w'][tier]:g}",
            runtime,
            f"{joules:,.1f}",
            f"{doc['paper_energy_j'][tier]:,.1f}",
            f"{doc['deviation_pct'][tier]:+.1f} %",
            doc["labels"]["energy_j"][tier].upper(),
        )
    console.print(table)
    for tier, how in doc["how"]["runtime_s"].items():
        console.print(f"[dim]{tier}: {how}[/dim]")
    saving, paper = doc["saving_pct"], doc["paper_saving_pct"]
    console.print(
        f"FPGA saves {saving['vs_java']:.1f} % against Java (paper > {paper['vs_java']:g} %) "
        f"and {saving['vs_c']:.1f} % against C (paper {paper['vs_c']:g} %); idle "
        f"{doc['power_w']['idle']:g} W (input)"
    )


def _size(n: int) -> str:
    return f"{n // 1024} KiB" if n >= 1024 else f"{n} B"
