"""Operator commands against a running daemon: what ``juggle --connect PATH <command>`` runs.

Each command connects, does one thing and returns a JSON-able document (snapshots as maps of
their fields), so the command line only has to print it. Every figure in it says how it was
obtained (:data:`LABELS`): each map carries a ``labels`` entry for its numeric fields, by the
rule every ``--json`` document follows (``tests/test_json_labels.py``).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from juggle.daemon.client import Client, connect
from juggle.daemon.protocol import to_wire
from juggle.errors import ConfigurationError

__all__ = ["COMMANDS", "LABELS", "labeled", "run_remote"]

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

_ID = "input"
"""Ids (service, module, connection, process) and the uid and gid: given to the runtime or
the daemon as keys, not quantities; labeled *input* as ``juggle profile`` labels its ids."""

_REPORT: dict[str, Any] = {
    "to_hardware": _ID,
    "to_software": _ID,
    "reconfiguration_ms": "calibrated",
    "bridge_ms": "input",
    "overhead_us": "measured",
}
"""A juggle's report: the reconfiguration time comes from the board's configuration port
model, whose rate is fitted to the paper's times (xupv2p: Table 3); the bridge time is the
profile's (input); the runtime's own work is timed on this machine (as ``juggle demo``, the
shell and the dashboard label them)."""

_MODULE: dict[str, Any] = {"module_id": _ID, "services": _ID}

LABELS: dict[str, dict[str, Any]] = {
    "whoami": {
        "uid": _ID,
        "gid": _ID,
        "pid": _ID,
        "daemon_pid": _ID,
        "max_frame": "input",  # the daemon's limit, as configured
        "protocol": "input",  # the daemon's protocol version
    },
    "services": {"service_id": _ID, "properties": "input"},  # the module's descriptor
    "regions": {"service_id": _ID, "resources": "input"},  # the board profile's region
    "tenants": {
        "priority": "input",  # the policy's
        "unread_signals": "measured",
        "devices": {
            "service_id": _ID,
            "calls": "measured",
            "waits": "measured",
            "preemptions": "measured",
            "context_bytes": "measured",  # the saved context's length, counted
        },
    },
    "modules": _MODULE,
    "install": _MODULE,
    "stats": {
        "service_id": _ID,
        "total": "measured",  # counted, and timed by this machine's wall clock
        "rate_per_s": "measured",
        "per_tier": "measured",
        "per_consumer": "measured",
        "per_method": "measured",
        "inflight": "measured",
        "hardware_modeled_mean_us": "modeled",  # bus time at the simulated fabric's clock
        "fallbacks": "measured",
        "verified": "measured",
        "mismatches": "measured",
    },
    "juggle": _REPORT,
    "tier": _REPORT,
    "recover": _REPORT,
    "reload-policy": {"closed_connections": _ID},
}
"""The kind of each figure of each command's document: for every map the command returns
(each item of a list), its numeric fields by name; a kind labels the field's whole subtree, a
map is followed key by key (items of a list take their list's entry). Strings (names,
states, tiers) and booleans are no figures."""


def labeled(command: str, document: Any) -> Any:
    """``document`` (what ``command`` of :data:`COMMANDS` returned) with a ``labels`` entry
    from :data:`LABELS` in its map, or in each map of its list; None (``recover`` with nothing
    to put back) and anything else unchanged. Returns a new document for a map or a list;
    ``document`` is unchanged. Raises :class:`~juggle.errors.ConfigurationError` for an
    unknown command."""
    if command not in LABELS:
        raise ConfigurationError(f"no labels for daemon command {command!r}", value=command)
    labels = LABELS[command]
    if isinstance(document, dict):
        return {**document, "labels": copy.deepcopy(labels)}
    if isinstance(document, list):
        return [
            {**item, "labels": copy.deepcopy(labels)} if isinstance(item, dict) else item
            for item in document
        ]
    return document


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
    socket); its JSON-able result, every figure labeled (:func:`labeled`). Raises
    :class:`~juggle.errors.ConfigurationError` for an unknown command or a missing argument,
    and what the daemon raises."""
    if command not in COMMANDS:
        raise ConfigurationError(
            f"unknown daemon command {command!r} (one of: {', '.join(COMMANDS)})", value=command
        )
    with connect(path, timeout=timeout) as client:
        if command == "recover":
            report = client.recover(_need(region, "a region", command))
            return None if report is None else labeled(command, to_wire(report))
        result = _run(client, command, service_id, tier, to_hardware, to_software, module)
    return labeled(command, result)


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
