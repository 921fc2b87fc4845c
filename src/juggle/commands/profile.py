"""``juggle profile MODULE_OR_SERVICE``: every tier of a service on the same inputs, the
results compared and the cost of one call split into interface and core
(:func:`~juggle.profile.profile_service`), as tables or one JSON document."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from juggle.commands.output import console, fail
from juggle.errors import JuggleError
from juggle.profile import profile_service

__all__ = ["profile", "register", "render_profile"]


def register(app: typer.Typer) -> None:
    """Add the ``profile`` command to the ``juggle`` app."""
    app.command("profile")(profile)


def profile(
    target: Annotated[
        str, typer.Argument(help="Module path, or a shipped module's or interface's name.")
    ],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    filter: Annotated[
        str | None, typer.Option("--filter", help='LDAP filter, e.g. "(algorithm=aes)".')
    ] = None,
    fabric: Annotated[
        str | None,
        typer.Option(
            help=escape(
                "Board profile (default: the board a module's descriptor records, [module] "
                "board, else xupv2p)."
            )
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the random inputs.")] = 1,
    vectors: Annotated[int, typer.Option(help="Random checked calls per method.")] = 8,
    size: Annotated[
        int | None,
        typer.Option(
            help="Bytes per call for buffer services (default: a block, or the sizes the "
            "module's workload declares)."
        ),
    ] = None,
    rounds: Annotated[int, typer.Option(help="Timing rounds (the best is kept).")] = 5,
    round_ms: Annotated[float, typer.Option(help="Length of one timing round, ms.")] = 5.0,
) -> None:
    """Run the same inputs at every tier of a service: do the results agree, and what does
    one call cost, split into interface and core (ThumbPod's refinement step)."""
    try:
        doc = profile_service(
            target,
            fabric=fabric,
            filter=filter,
            seed=seed,
            vectors=vectors,
            size=size,
            rounds=rounds,
            round_ms=round_ms,
        )
    except JuggleError as exc:
        fail(exc, json_out)
    if json_out:
        sys.stdout.write(json.dumps(with_nested_labels(doc), indent=2) + "\n")
    else:
        render_profile(doc, console())
    if not doc["agree"]:
        raise typer.Exit(1)


def with_nested_labels(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``doc`` (from :func:`~juggle.profile.profile_service`) with the labels every ``--json``
    document uses: each tier's dotted label keys (``"interface.proxy_us"``) also as nested
    entries (``{"interface": {"proxy_us": ...}}``) beside the keys they label, and each
    service's ``service_id`` and ``workload`` (the run's own arguments and ids) labeled
    *input*. Returns a new document; ``doc`` is unchanged."""
    out: dict[str, Any] = json.loads(json.dumps(doc))
    for service in out.get("services", []):
        for cost in service.get("tiers", {}).values():
            labels = cost.get("labels", {})
            for key, kind in list(labels.items()):
                if "." in key:
                    group, _, leaf = key.partition(".")
                    nested = labels.setdefault(group, {})
                    if isinstance(nested, dict):
                        nested[leaf] = kind
        service.setdefault("labels", {}).update(service_id="input", workload="input")
    return out


def _us(value: object) -> str:
    return "-" if value is None else f"{float(value):,.2f}"  # type: ignore[arg-type]


def render_profile(doc: Mapping[str, Any], console: Console) -> None:
    """Print a profile: per service a table of tiers (interface parts, core, total, gain)."""
    for service in doc["services"]:
        module = service["module"] or "no module"
        name = f"{service['interface']} ({module}, id {service['service_id']})"
        table = Table(title=f"{name}: one {service['workload']['timed']}, µs")
        for column in (
            "tier",
            "proxy",
            "runtime",
            "driver",
            "bus",
            "core",
            "total",
            "gain",
            "total is",
        ):
            table.add_column(column, justify="left" if column in ("tier", "total is") else "right")
        for tier, cost in service["tiers"].items():
            if "error" in cost:
                table.add_row(tier, *["-"] * 7, cost["error"][:40])
                continue
            parts = cost["interface"]
            beside = set(cost.get("not_counted", ()))

            def part(key: str, parts: Mapping[str, Any] = parts, beside: set[str] = beside) -> str:
                text = _us(parts.get(key))
                return f"({text})" if key in beside and text != "-" else text

            table.add_row(
                tier,
                part("proxy_us"),
                part("runtime_us"),
                part("driver_us"),
                _us(parts.get("bus_us")),
                _us(cost["core"].get("us")),
                _us(cost["total_us"]),
                f"{cost['gain']:.1f}x",
                cost["labels"]["total_us"],
            )
        console.print(table)
        verdict = "[green]agree[/green]" if service["agree"] else "[red]DISAGREE[/red]"
        console.print(
            f"{verdict}: {service['workload']['checks']} checked calls at "
            f"{', '.join(service['tiers'])}; gain over the slowest tier ({service['slowest_tier']})"
        )
        for problem in service["disagreements"]:
            console.print(f"  {problem}")
        for tier, cost in service["tiers"].items():
            flow = cost.get("throughput")
            if flow and flow["bytes_per_call"]:
                console.print(
                    f"{tier}: {flow['throughput_mb_s']:,.3f} MB/s modeled ({flow['bytes_per_call']}"
                    f" bytes in {flow['modeled_us']:,.2f} µs of core + bus); the Python driver "
                    f"{_us(flow['driver_us'])} µs measured beside, not counted"
                )
    console.print(
        "proxy, runtime, driver: measured on this machine; bus and core: modeled on the "
        f"simulated {doc['fabric']} fabric clock. A simulated hardware tier's total is its "
        "modeled core + bus time (the definition juggle demo uses); figures in parentheses are "
        "measured beside it, not counted"
    )
