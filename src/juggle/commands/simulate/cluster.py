"""``juggle simulate cluster``: placement policies across a cluster of boards, the command.

Runs static, per-board and cluster placement over one seeded call trace with a shifting hot
set (:mod:`juggle.simulate.cluster`) and compares them by the fraction of calls served by
hardware, mean and p99 latency and region loads. Without ``--json`` it prints a rich table
(results CALIBRATED: the software cost per call is the TDES model's, fitted to the Juggle
paper); with ``--json`` one JSON document whose ``labels`` give each key its kind. Errors go
to stderr with exit status 2.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from juggle.commands.output import console, emit_json, fail
from juggle.commands.progressbar import progress_bar
from juggle.errors import JuggleError
from juggle.simulate.cluster import ClusterConfig, run_cluster

__all__ = ["cluster", "register", "render_cluster"]

_DEFAULT = ClusterConfig()


def register(simulate_app: typer.Typer) -> None:
    """Add the ``cluster`` command to ``simulate_app``."""
    simulate_app.command("cluster")(cluster)


def cluster(
    nodes: Annotated[int, typer.Option("--nodes", help="Boards in the cluster.")] = _DEFAULT.nodes,
    services: Annotated[
        int, typer.Option("--services", help="Services the callers use.")
    ] = _DEFAULT.services,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the costs and the trace.")] = 1,
    duration: Annotated[
        float, typer.Option("--duration", help="Virtual seconds of calls.")
    ] = _DEFAULT.duration_s,
    board: Annotated[
        str, typer.Option("--board", help="Board profile every node is a copy of.")
    ] = _DEFAULT.board,
    calls_per_s: Annotated[
        float, typer.Option("--calls-per-s", help="Calls per second at each node.")
    ] = _DEFAULT.calls_per_s,
    locality: Annotated[
        float,
        typer.Option("--locality", help="Share of a node's calls drawn from its own ranking."),
    ] = _DEFAULT.locality,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar on stderr.")] = False,
) -> None:
    """Static, per-board and cluster placement on N simulated boards (virtual time)."""
    cfg = ClusterConfig(
        nodes=nodes,
        services=services,
        seed=seed,
        duration_s=duration,
        board=board,
        calls_per_s=calls_per_s,
        locality=locality,
    )
    try:
        with progress_bar("cluster", silent=json_out or quiet) as progress:
            doc = run_cluster(cfg, progress)
    except JuggleError as exc:
        fail(exc, json_out)
    if json_out:
        emit_json(doc)
    else:
        render_cluster(doc, console())
    sys.stdout.flush()


def render_cluster(doc: dict[str, Any], console: Console) -> None:
    """Print a cluster run as a table, one row per policy."""
    inputs = doc["inputs"]
    table = Table(
        title=f"{inputs['nodes']} x {inputs['board']} ({inputs['regions_per_node']} regions "
        f"each), {inputs['services']} services, seed {inputs['seed']}, "
        f"{inputs['duration_s']:g} s (CALIBRATED: the software cost is fitted; see --json how)"
    )
    table.add_column("policy")
    for column in ("hardware", "remote", "mean µs", "p99 µs", "loads", "calls"):
        table.add_column(column, justify="right")
    for name, r in doc["policies"].items():
        table.add_row(
            name,
            f"{100 * r['hardware_fraction']:.1f} %",
            f"{100 * r['remote_fraction']:.1f} %",
            f"{r['mean_us']:.0f}",
            f"{r['p99_us']:.0f}",
            str(r["reconfigurations"]),
            str(r["calls"]),
        )
    console.print(table)
    console.print(
        f"all in software: mean {doc['software_only_mean_us']:.0f} µs; a region load "
        f"{doc['reconfig_us'] / 1e3:.2f} ms (modeled); cluster beats per-board on hardware: "
        f"{'yes' if doc['cluster_beats_per_board'] else 'no'}; wall {doc['wall_s']:.1f} s "
        "(measured)",
        style="dim",
    )
