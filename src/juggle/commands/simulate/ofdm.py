"""``juggle simulate ofdm``: the command that runs :func:`juggle.simulate.ofdm.experiment.run_ofdm`.

Without ``--json`` it prints rich tables (per path: modeled latency next to the measured
decision cost, WCET per device, T_RCFG derived from bitstream sizes beside Table 5, the
real-time tenant's deadlines); with ``--json`` one JSON document on stdout whose ``labels`` say
for every key whether it is input, modeled or measured. ``--modeled-only`` leaves out every
measured figure, so two runs with the same seed print identical documents.

``--plot FILE.png`` draws the allocation timeline per region (:mod:`juggle.simulate.ofdm.plot`)
for a window of the run (``--plot-start-ms``, ``--plot-span-ms``) and says ``wrote FILE.png``
on stderr (with ``--json``: under ``files`` in the document, labeled input). A transient
progress bar on stderr follows the virtual time unless ``--json`` or ``--quiet``.
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
from juggle.commands.progressbar import progress_bar
from juggle.errors import JuggleError
from juggle.simulate.ofdm.experiment import OfdmConfig, run_ofdm
from juggle.simulate.ofdm.shell import Timeline
from juggle.simulate.plot_files import check_png

__all__ = ["register", "render", "render_rcfg"]


def register(simulate_app: typer.Typer) -> None:
    """Add the ``ofdm`` command to ``simulate_app``."""
    simulate_app.command("ofdm")(ofdm)


def ofdm(
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the workload.")] = 1,
    duration: Annotated[
        float | None,
        typer.Option("--duration", help="Virtual seconds to simulate (default 10)."),
    ] = None,
    modeled_only: Annotated[
        bool,
        typer.Option("--modeled-only", help="Leave out measured figures (exactly reproducible)."),
    ] = False,
    gp_fallback: Annotated[
        bool,
        typer.Option(help="A preempted general-purpose task finishes its frames in software."),
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Write the allocation timeline per region to this PNG."),
    ] = None,
    plot_start_ms: Annotated[
        float, typer.Option("--plot-start-ms", help="Virtual ms where the figure starts.")
    ] = 0.0,
    plot_span_ms: Annotated[
        float, typer.Option("--plot-span-ms", help="Virtual ms the figure shows.")
    ] = 10.0,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar on stderr.")] = False,
) -> None:
    """Ker-ONE's OFDM experiment: two tenants share three regions of the zedboard."""
    try:
        config = OfdmConfig(gp_fallback=gp_fallback)
        if plot is not None:
            from juggle.simulate.ofdm.plot import window_us

            check_png(plot)
            length = config.duration_s if duration is None else duration
            window_us(Timeline((), end_us=length * 1e6), plot_start_ms, plot_span_ms)
        with progress_bar("ofdm", silent=json_out or quiet) as progress:
            result = run_ofdm(
                seed,
                duration,
                config=config,
                software_repeats=0 if modeled_only else 9,
                progress=progress,
            )
        if plot is not None:
            from juggle.simulate.ofdm.plot import plot_ofdm

            plot_ofdm(result, plot, start_ms=plot_start_ms, span_ms=plot_span_ms)
    except JuggleError as exc:
        fail(exc, json_out)
    doc = result.to_json(include_measured=not modeled_only)
    if plot is not None:
        announce([plot], doc, json_out=json_out)
        if json_out:
            doc["labels"]["files"] = "input"
    if json_out:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        render(doc, console())


def render(doc: dict[str, Any], console: Console) -> None:
    """Print ``doc`` (from ``OfdmResult.to_json``) as tables."""
    measured = "decision_us_measured" in doc["paths"]["path1"]
    paths = Table(title="Allocations by solution path (latency: modeled, virtual µs)")
    for column in ("path", "count", "min", "mean", "max", "queued mean"):
        paths.add_column(column, justify="right")
    if measured:
        paths.add_column("decision µs (measured)", justify="right")
    names = {1: "1 Assign", 2: "2 Assign+Rcfg", 3: "3 Preempt", 4: "4 Preempt+Rcfg"}
    for p, label in names.items():
        e = doc["paths"][f"path{p}"]
        row = [label, str(e["count"]), f"{e['min_us']:.2f}", f"{e['mean_us']:.2f}"]
        row += [f"{e['max_us']:.2f}", f"{e.get('queued_mean_us', 0.0):.1f}"]
        if measured:
            row.append(f"{e['decision_us_measured']:.2f}")
        paths.add_row(*row)
    console.print(paths)
    wcet = Table(
        title="Worst-case allocation latency, Eq. 5-8 (modeled µs; frame and δ_pre: INPUT, "
        "copied from Tables 6 and 5)"
    )
    for column in ("device", "frame", "δ_pre", "T_preempt WCET", "T_RCFG WCET", "L_alloc WCET"):
        wcet.add_column(column, justify="right")
    for device, value in doc["wcet_us"].items():
        detail = doc["wcet_detail"][device]
        wcet.add_row(
            device,
            f"{doc['hardware_frame_us'][device]:.1f}",
            f"{doc['delta_pre_us'][device]:.1f}",
            f"{detail['t_preempt_wcet_us']:.1f}",
            f"{detail['t_rcfg_wcet_us']:.0f}",
            f"{value:.2f}",
        )
    console.print(wcet)
    render_rcfg(doc, console)
    console.print(
        f"real-time jobs {doc['rt_jobs']}, deadline misses {doc['rt_deadline_misses']}, "
        f"worst response {doc['rt_response_max_us']:.0f} µs; general-purpose jobs "
        f"{doc['gp_jobs']}; preemptions {doc['preemptions']}; context mismatches "
        f"{doc['context_mismatches']}"
    )
    if measured:
        sw = doc["measured"]["software_frame_us_measured"]
        line = ", ".join(f"{d} {t:.0f} µs" for d, t in sw.items())
        console.print(f"software per frame (NumPy, measured on this machine): {line}")
        console.print(f"simulation wall time (measured): {doc['measured']['wall_s_measured']} s")


def render_rcfg(doc: dict[str, Any], console: Console) -> None:
    """Print how T_RCFG was derived per region, beside Table 5 with the deviation."""
    label = doc["labels"]["t_rcfg_us"].upper()
    rcfg = Table(
        title=f"T_RCFG per region ({label}): share x full bitstream -> bytes -> PCAP; "
        "Table 5 beside"
    )
    for column in ("region", "share", "bytes", "T_RCFG µs", "Table 5 µs", "deviation", "share ±"):
        rcfg.add_column(column, justify="right")
    for region, entry in doc["t_rcfg_derivation"].items():
        share = entry["share_pct"]
        paper = entry["paper_us"]
        interval = entry["share_interval_us"]
        rcfg.add_row(
            region,
            "-" if share is None else f"{share:g} %",
            f"{entry['bitstream_bytes']:,}",
            f"{entry['t_rcfg_us']:.0f}",
            "-" if paper is None else f"{paper:.0f}",
            "-" if entry["deviation_pct"] is None else f"{entry['deviation_pct']:+.1f} %",
            "-" if interval is None else f"{interval[0]:.0f}-{interval[1]:.0f}",
        )
    console.print(rcfg)
    console.print(
        f"T_RCFG per region ({label}): "
        + ", ".join(f"{r} {t:.0f} µs" for r, t in doc["t_rcfg_us"].items())
    )
