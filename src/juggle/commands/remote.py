"""Operator commands against a running daemon: what ``juggle --connect PATH <command>`` runs.

Each command connects, does one thing and returns a JSON-able document (snapshots as maps of
their fields), so the command line only has to print it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from juggle.daemon.client import Client, connect
from juggle.daemon.protocol import to_wire
from juggle.errors import ConfigurationError

__all__ = ["COMMANDS", "run_remote"]

#: The commands and what they take.
COMMANDS: dict[str, str] = {
    "whoami": "the identity the daemon gives this connection",
    "services": "service snapshots",
    "regions": "region snapshots",
    "tenants": "tenant snapshots (a tenant sees itself)",
    "modules": "module snapshots",
    "stats": "statistics of service_id",
    "juggle": "juggle to_hardware / to_software (admin)",
    "tier": "serve service_id from tier (admin)",
    "install": "install the module at path (admin)",
    "reload-policy": "read the tenant policy again (admin)",
    "recover": "clear quarantined region and put its service back (admin; audited)",
}


def run_remote(
    path: str | Path | None,
    command: str,
    *,
    service_id: int | None = None,
    tier: str | None = None,
    to_hardware: int | None = None,
    to_software: Sequence[int] = (),
    module: str | Path | None = None,
    region: str | None = None,
    timeout: float = 5.0,
) -> Any:
    """Run ``command`` (one of :data:`COMMANDS`) on the daemon at ``path`` (None: the default
    socket); its JSON-able result. Raises :class:`~juggle.errors.ConfigurationError` for an
    unknown command or a missing argument, and what the daemon raises."""
    if command not in COMMANDS:
        raise ConfigurationError(
            f"unknown daemon command {command!r} (one of: {', '.join(COMMANDS)})", value=command
        )
    with connect(path, timeout=timeout) as client:
        if command == "recover":
            report = client.recover(_need(region, "a region", command))
            return None if report is None else to_wire(report)
        return _run(client, command, service_id, tier, to_hardware, to_software, module)


def _need(value: Any, name: str, command: str) -> Any:
    if value is None:
        raise ConfigurationError(f"{command!r} needs {name}", value=command)
    return value


def _run(
    client: Client,
    command: str,
    service_id: int | None,
    tier: str | None,
    to_hardware: int | None,
    to_software: Sequence[int],
    module: str | Path | None,
) -> Any:
    if command == "whoami":
        return client.identity
    if command == "services":
        return [to_wire(s) for s in client.services()]
    if command == "regions":
        return [to_wire(r) for r in client.regions()]
    if command == "tenants":
        return [to_wire(t) for t in client.tenants()]
    if command == "modules":
        return [to_wire(m) for m in client.modules()]
    if command == "stats":
        return to_wire(client.statistics(_need(service_id, "a service id", command)))
    if command == "juggle":
        if to_hardware is None and not to_software:
            raise ConfigurationError("'juggle' needs to_hardware or to_software", value=command)
        return to_wire(client.juggle(to_hardware=to_hardware, to_software=to_software))
    if command == "tier":
        sid = _need(service_id, "a service id", command)
        return to_wire(client.set_tier(sid, _need(tier, "a tier", command)))
    if command == "install":
        return to_wire(client.install(_need(module, "a module path", command)))
    return client.reload_policy()
