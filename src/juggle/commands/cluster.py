"""``juggle cluster ...``: the cluster's certificates (and, below, its runtime).

``ca DIR`` makes the cluster CA; ``issue --ca DIR NAME --kind tenant|node [--host H]... --out
DIR`` signs a tenant's or a node's certificate (:mod:`juggle.cluster.pki`); ``status`` prints
the controller's directory; ``dashboard`` serves the cluster page over it
(:mod:`juggle.dashboard.cluster`). Every command takes ``--json`` and then prints exactly one
JSON document, errors included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from juggle.commands.output import JsonOpt, emit_json, fail
from juggle.errors import JuggleError

__all__ = ["cluster_app", "cluster_ca", "cluster_issue"]

cluster_app = typer.Typer(
    help="The cluster: its CA and certificates (mutual TLS between clients and daemons), its "
    "status and its web page.",
    no_args_is_help=True,
)


def _paths_doc(cert: Path, key: Path, ca: Path) -> dict[str, str]:
    return {"cert": str(cert), "key": str(key), "ca": str(ca)}


@cluster_app.command("ca")
def cluster_ca(
    directory: Annotated[Path, typer.Argument(help="Folder of the new CA (made mode 0700).")],
    name: Annotated[str, typer.Option(help="The CA's subject CN.")] = "juggle cluster CA",
    days: Annotated[int, typer.Option(help="Days the CA certificate is valid.")] = 3650,
    json_out: JsonOpt = False,
) -> None:
    """Make the cluster CA in DIRECTORY: ca.crt and ca.key (mode 0600); never overwrites."""
    from juggle.cluster.pki import create_ca

    try:
        paths = create_ca(directory, name=name, days=days)
    except JuggleError as exc:
        fail(exc, json_out)
    doc = _paths_doc(paths.cert, paths.key, paths.ca)
    if json_out:
        emit_json(doc)
    else:
        typer.echo(f"CA {name!r}: {paths.cert} (key {paths.key}, mode 0600)")


@cluster_app.command("issue")
def cluster_issue(
    name: Annotated[str, typer.Argument(help="The certificate's CN: a tenant or node name.")],
    ca: Annotated[Path, typer.Option("--ca", help="Folder of the cluster CA.")],
    kind: Annotated[str, typer.Option("--kind", help="tenant (a client) or node (a daemon).")],
    out: Annotated[Path, typer.Option("--out", help="Folder to write NAME.crt, NAME.key to.")],
    host: Annotated[
        list[str] | None,
        typer.Option(
            "--host",
            help="node: a host name or address the daemon is reached at (repeatable; "
            "localhost and 127.0.0.1 are always in).",
        ),
    ] = None,
    days: Annotated[int, typer.Option(help="Days the certificate is valid.")] = 365,
    json_out: JsonOpt = False,
) -> None:
    """Sign a tenant's or node's certificate with the cluster CA: NAME.crt, NAME.key (mode
    0600) and a copy of ca.crt in --out."""
    from juggle.cluster.pki import issue
    from juggle.daemon.tls import CertificateError

    try:
        if host and kind != "node":
            raise CertificateError(f"--host is for node certificates, not {kind}", value=kind)
        paths = issue(ca, name, kind, out, days=days, hosts=tuple(host or ()))  # type: ignore[arg-type]
    except JuggleError as exc:
        fail(exc, json_out)
    doc = {"name": name, "kind": kind, **_paths_doc(paths.cert, paths.key, paths.ca)}
    if json_out:
        emit_json(doc)
    else:
        typer.echo(f"{kind} {name}: {paths.cert} (key {paths.key}, mode 0600; CA {paths.ca})")


# -- R: `juggle cluster status` goes below this line (issue 24) --------------------------------

from typing import Any  # noqa: E402


def _status_directory(address: str) -> Any:
    """The controller's directory of the Ray cluster at ``address``. Raises
    :class:`ConfigurationError` naming the extra when ray is missing, the address when no
    Ray cluster or no juggle controller answers there."""
    from juggle.cluster.directory import CONTROLLER_NAME, NAMESPACE, Directory
    from juggle.errors import ConfigurationError

    try:
        import ray
    except ImportError:
        raise ConfigurationError(
            "juggle cluster status needs ray: pip install 'juggle[cluster]'", value="ray"
        ) from None
    started = not ray.is_initialized()
    try:
        if started:
            from juggle.cluster.client import init_ray

            init_ray(address)
        try:
            controller = ray.get_actor(CONTROLLER_NAME, namespace=NAMESPACE)
        except ValueError:
            raise ConfigurationError(
                f"no juggle cluster controller ({CONTROLLER_NAME!r}) runs in the Ray cluster "
                f"at {address!r}: start one with juggle.cluster.start_controller()",
                value=address,
            ) from None
        directory: Any = ray.get(controller.directory.remote(), timeout=30)
        assert isinstance(directory, Directory)
        return directory
    finally:
        if started and ray.is_initialized():
            ray.shutdown()


@cluster_app.command("status")
def cluster_status(
    address: Annotated[
        str, typer.Option("--address", help="The Ray cluster's address (default: auto).")
    ] = "auto",
    json_out: JsonOpt = False,
) -> None:
    """The cluster's boards: alive or not, load, each region and the service it holds, and
    each board's services (tier, calls/s); from the controller's directory."""
    from rich.table import Table

    from juggle.cluster.directory import status_document
    from juggle.commands.output import console

    try:
        doc = status_document(_status_directory(address))
    except JuggleError as exc:
        fail(exc, json_out)
    if json_out:
        emit_json(doc)
        return
    out = console()
    out.print(f"juggle cluster: period {doc['period']}, {len(doc['nodes'])} node(s)")
    table = Table("node", "alive", "epoch", "address", "load (calls/s, measured)", "regions")
    for node in doc["nodes"]:
        regions = ", ".join(
            f"{r['name']}: {r['service'] or '-'}" + ("" if r["state"] != "ERROR" else " (ERROR)")
            for r in node["regions"]
        )
        table.add_row(
            node["name"],
            "yes" if node["alive"] else f"no ({node['error'] or 'down'})",
            str(node["epoch"]),
            node["address"],
            f"{node['load_per_s']:.1f}",
            regions or "-",
        )
    out.print(table)
    services = Table("node", "service", "tier", "region", "calls", "calls/s")
    for node in doc["nodes"]:
        for s in node["services"]:
            services.add_row(
                node["name"],
                s["key"],
                s["tier"],
                s["region"] or "-",
                str(s["calls"]),
                f"{s['calls_per_s']:.1f}",
            )
    out.print(services)


__all__ += ["cluster_status"]


# -- X: `juggle cluster dashboard` (issue 24 item 5) -------------------------------------------


@cluster_app.command("dashboard")
def cluster_dashboard(
    address: Annotated[
        str, typer.Option("--address", help="The Ray cluster's address (default: auto).")
    ] = "auto",
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port (0: any free one).")] = 8322,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for the controller per read.")
    ] = 5.0,
    json_out: JsonOpt = False,
) -> None:
    """Serve the cluster page (nodes, regions and what each holds, load) read-only on
    HOST:PORT, fed by the cluster controller's directory; reads it once before listening,
    so an unreachable cluster is an error, not an empty page."""
    import sys

    from juggle.dashboard.cluster import ControllerSource, serve_cluster

    source: ControllerSource | None = None

    def ready(url: str) -> None:
        if json_out:
            emit_json({"url": url, "api": url.removesuffix("/cluster") + "/api/cluster"})
            sys.stdout.flush()
        else:
            typer.echo(f"cluster dashboard: {url}", err=True)

    try:
        source = ControllerSource(address, timeout_s=timeout)
        source()  # the cluster answers, or the command fails now
        serve_cluster(source, host, port, on_ready=ready)
    except JuggleError as exc:
        fail(exc, json_out)
    finally:
        if source is not None:
            source.close()


__all__ += ["cluster_dashboard"]
