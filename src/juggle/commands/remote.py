"""Operator commands against a running daemon: what ``juggle --connect PATH <command>`` runs.

Each command connects, does one thing and returns a JSON-able document (snapshots as maps of
their fields), so the command line only has to print it: as that document with ``--json``,
else as tables (:func:`render`). Every figure in it says how it was obtained (:data:`LABELS`):
each map carries a ``labels`` entry for its numeric fields, by the rule every ``--json``
document follows (``tests/test_json_labels.py``); a table names the kind in its column
headers.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from juggle.daemon.client import Client, connect
from juggle.daemon.protocol import to_wire
from juggle.errors import ConfigurationError

__all__ = ["COMMANDS", "LABELS", "labeled", "render", "run_remote"]

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
    "uninstall": "uninstall the module named name (admin)",
    "reload-policy": "read the tenant policy again (admin)",
    "recover": "clear quarantined region and put its service back (admin)",
    "trust": "the public keys modules must be signed by",
}
"""Admin commands are audited: the daemon logs one ``audit:`` line per request, done or
refused."""

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
        "calls": "measured",  # the tenant's, since it was registered (disconnects kept)
        "waits": "measured",
        "preemptions": "measured",
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
    "uninstall": _MODULE,
    "trust": {},  # fingerprints and file names: no figure
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
    name: str | None = None,
    timeout: float = 5.0,
) -> Any:
    """Run ``command`` (one of :data:`COMMANDS`) on the daemon at ``path`` (None: the default
    socket); its JSON-able result, every figure labeled (:func:`labeled`). ``module`` is the
    path ``install`` installs, ``name`` the module ``uninstall`` removes. Raises
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
        if command == "uninstall":
            return labeled(
                command, to_wire(client.uninstall(_need(name, "a module name", command)))
            )
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
    if command == "trust":
        return client.trusted_keys()
    return client.reload_policy()


# -- tables ----------------------------------------------------------------------------------


def _text(value: Any) -> str:
    """A cell: ``-`` for None and empty lists, lists joined with commas, the rest as text."""
    if value is None or value == [] or value == {}:
        return "-"
    if isinstance(value, list):
        return ", ".join(_text(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _table(title: str | None, headers: list[str], rows: list[list[Any]]) -> Table:
    """A table of ``rows``; a header ending in a kind in parentheses is right-aligned."""
    table = Table(title=title)
    for header in headers:
        table.add_column(header, justify="right" if header.endswith(")") else "left")
    for row in rows:
        table.add_row(*(escape(_text(cell)) for cell in row))
    return table


def _pairs(title: str | None, pairs: list[tuple[str, Any]]) -> Table:
    """A two-column table of ``(field, value)`` pairs."""
    table = Table(title=title, show_header=False)
    table.add_column("field")
    table.add_column("value")
    for key, value in pairs:
        table.add_row(escape(key), escape(_text(value)))
    return table


def _report(doc: dict[str, Any], title: str) -> list[Table | str]:
    tiers = ", ".join(f"{k}: {v}" for k, v in (doc.get("tiers") or {}).items())
    return [
        _pairs(
            title,
            [
                ("to hardware", doc.get("to_hardware")),
                ("to software", doc.get("to_software")),
                ("region", doc.get("region")),
                ("steps", doc.get("steps")),
                ("reconfiguration ms (calibrated)", doc.get("reconfiguration_ms")),
                ("bridge ms (input)", doc.get("bridge_ms")),
                ("runtime overhead µs (measured)", doc.get("overhead_us")),
                ("tiers now", tiers or None),
            ],
        )
    ]


def _modules(docs: list[dict[str, Any]], title: str) -> list[Table | str]:
    if not docs:
        return ["no modules installed"]
    return [
        _table(
            title,
            ["id", "module", "version", "state", "services", "location"],
            [
                [m["module_id"], m["name"], m["version"], m["state"], m["services"], m["location"]]
                for m in docs
            ],
        )
    ]


def _stats(doc: dict[str, Any]) -> list[Table | str]:
    total = doc.get("total") or {}
    head = _pairs(
        f"service {doc.get('service_id')} ({doc.get('interface')})",
        [
            ("tier", doc.get("tier")),
            ("engine", doc.get("engine")),
            ("calls (measured)", total.get("calls")),
            ("errors (measured)", total.get("errors")),
            ("rate per s (measured)", doc.get("rate_per_s")),
            ("in flight (measured)", doc.get("inflight")),
            ("hardware mean µs (modeled)", doc.get("hardware_modeled_mean_us")),
            ("fallbacks (measured)", doc.get("fallbacks")),
            ("verified (measured)", doc.get("verified")),
            ("mismatches (measured)", doc.get("mismatches")),
        ],
    )
    out: list[Table | str] = [head]
    for part, title in (
        ("per_tier", "tier"),
        ("per_method", "method"),
        ("per_consumer", "consumer"),
    ):
        entries = doc.get(part) or {}
        if entries:
            out.append(
                _table(
                    None,
                    [
                        title,
                        "calls (measured)",
                        "errors (measured)",
                        "mean µs (measured)",
                        "p50 µs (measured)",
                        "p99 µs (measured)",
                    ],
                    [
                        [k, v["calls"], v["errors"], v["mean_us"], v["p50_us"], v["p99_us"]]
                        for k, v in entries.items()
                    ],
                )
            )
    return out


def _tenants(docs: list[dict[str, Any]]) -> list[Table | str]:
    if not docs:
        return ["no tenants (the daemon's policy names none, or this connection is none)"]
    rows = []
    for t in docs:
        standing = "realtime" if t.get("realtime") else t.get("priority")
        devices = [
            f"{d['device']}: {d['state']}" + (f" in {d['region']}" if d.get("region") else "")
            for d in t.get("devices") or []
        ]
        rows.append(
            [
                t["name"],
                standing,
                t.get("model"),
                t.get("calls", sum(d["calls"] for d in t.get("devices") or [])),
                t.get("waits", sum(d["waits"] for d in t.get("devices") or [])),
                t.get("preemptions", sum(d["preemptions"] for d in t.get("devices") or [])),
                t.get("unread_signals"),
                devices,
            ]
        )
    return [
        _table(
            "tenants",
            [
                "tenant",
                "priority (input)",
                "model",
                "calls (measured)",
                "waits (measured)",
                "preemptions (measured)",
                "unread signals (measured)",
                "devices",
            ],
            rows,
        )
    ]


def render(command: str, document: Any) -> list[Table | str]:
    """What ``juggle --connect S COMMAND`` prints without ``--json``: tables (and lines) of
    ``document``, the result of :func:`run_remote` for ``command``. Numeric columns name
    their kind (measured, modeled, calibrated, input) in their header."""
    doc = document
    if command == "whoami":
        keys = (
            "name",
            "tenant",
            "admin",
            "uid",
            "gid",
            "pid",
            "cert_cn",
            "address",
            "daemon_pid",
            "protocol",
            "max_frame",
        )
        return [_pairs("this connection", [(k, doc[k]) for k in keys if k in doc])]
    if command == "services":
        if not doc:
            return ["no services"]
        return [
            _table(
                "services",
                ["id", "interface", "module", "tier", "tiers", "region", "consumers"],
                [
                    [
                        s["service_id"],
                        s["interface"],
                        s["module"],
                        s["tier"],
                        s["tiers"],
                        s["region"],
                        s["consumers"],
                    ]
                    for s in doc
                ],
            )
        ]
    if command == "regions":
        return [
            _table(
                "regions",
                ["region", "state", "service", "module", "design"],
                [[r["name"], r["state"], r["service_id"], r["module"], r["design"]] for r in doc],
            )
        ]
    if command == "tenants":
        return _tenants(doc)
    if command == "modules":
        return _modules(doc, "modules")
    if command in ("install", "uninstall"):
        return _modules([doc], "installed" if command == "install" else "uninstalled")
    if command == "stats":
        return _stats(doc)
    if command in ("juggle", "tier"):
        return _report(doc, command)
    if command == "recover":
        if doc is None:
            return ["region emptied: no service to put back"]
        return _report(doc, "recovered")
    if command == "reload-policy":
        return [
            _pairs(
                "policy reloaded",
                [
                    ("tenants", doc.get("tenants")),
                    ("changed", doc.get("changed")),
                    ("connections closed", doc.get("closed_connections")),
                    ("tenant hold", doc.get("tenant_hold")),
                    ("restart needed for", doc.get("restart_needed")),
                ],
            )
        ]
    if command == "trust":
        trusted: list[dict[str, Any]] = doc.get("keys") or []
        line = (
            "modules must be signed by one of these keys"
            if doc.get("required")
            else "no trusted keys: the daemon installs unsigned modules"
        )
        out: list[Table | str] = [line]
        if trusted:
            out.append(
                _table(
                    "trusted keys",
                    ["fingerprint", "source"],
                    [[k["fingerprint"], k["source"]] for k in trusted],
                )
            )
        return out
    raise ConfigurationError(f"no table for daemon command {command!r}", value=command)
