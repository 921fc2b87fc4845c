"""The daemon's operations: one function per request, and the table that names them.

Each operation is ``fn(ctx, conn, msg)``: ``ctx`` the daemon (:class:`Context`: its framework,
sessions, state directory and policy reload), ``conn`` the
:class:`~juggle.daemon.sessions.Connection` that asked, ``msg`` the parsed request (its
fields unchecked but for ``v``, ``id`` and ``op``). It returns the reply's map without
``v``/``id`` (``{"ok": ...}``, plus ``out`` for buffers), or an :class:`FdReply` when a
descriptor goes with it, and raises a :class:`~juggle.errors.JuggleError` that becomes the
reply's ``err``. :data:`OPERATIONS` says where each runs (``inline`` on the connection's reader
thread: quick ones only; ``calls`` or ``admin``: their pools), whether it needs admin rights
and whether it counts against the tenant's ``calls_per_s``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, Protocol

from juggle.daemon.protocol import PROTOCOL_VERSION, InOut, ShmRef, to_wire
from juggle.daemon.sessions import Connection, Handle, Sessions
from juggle.daemon.state import ModuleEntry, StateDir
from juggle.errors import (
    AccessDeniedError,
    JuggleError,
    ProtocolError,
    ServiceArgumentError,
    UnknownServiceError,
)
from juggle.runtime import Framework, TenantSignal

__all__ = ["OPERATIONS", "Context", "FdReply", "Operation"]

log = logging.getLogger("juggle.daemon")

_BUFFER_REFS = (InOut, ShmRef)
_NO_KW: dict[str, Any] = {}  # never changed


class Context(Protocol):
    """What operations use of the daemon."""

    sessions: Sessions
    state: StateDir

    def framework(self) -> Framework:
        """The daemon's framework. Raises :class:`DaemonError` when it is not open."""
        ...

    def reload_policy(self) -> dict[str, Any]:
        """Read the policy again and apply it; a summary."""
        ...


@dataclass(frozen=True, slots=True)
class FdReply:
    """A reply that carries a file descriptor."""

    body: dict[str, Any]
    fd: int


Reply = dict[str, Any] | FdReply


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation: its function, whether it needs admin rights, where it runs
    (``inline`` on the reader thread, or the ``calls`` / ``admin`` pool) and whether it
    counts against the tenant's ``calls_per_s``."""

    fn: Callable[[Context, Connection, dict[str, Any]], Reply]
    admin: bool = False
    pool: Literal["calls", "admin", "inline"] = "calls"
    quota: bool = False


# -- request fields --------------------------------------------------------------------------


def field(
    msg: dict[str, Any], key: str, kind: type | tuple[type, ...], *, optional: bool = False
) -> Any:
    """Field ``key`` of ``msg``, of type ``kind`` (an int field takes no bool). Raises
    :class:`ProtocolError` naming the field when it is missing or of another type."""
    value = msg.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) and kind is int:
        value = object()  # an int field takes no bool
    if not isinstance(value, kind):
        raise ProtocolError(
            f'request field "{key}" is missing or of the wrong type ({value!r:.40})'
        )
    return value


def _service_id(msg: dict[str, Any]) -> int:
    return int(field(msg, "service_id", int))


def _handle(conn: Connection, msg: dict[str, Any]) -> Handle:
    handle_id = field(msg, "h", int)
    handle = conn.handles.get(handle_id)
    if handle is None:
        raise UnknownServiceError(
            f"no service handle {handle_id} on this connection", value=handle_id
        )
    return handle


# -- protocol (inline) -----------------------------------------------------------------------


def ping(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    return {"ok": "pong"}


def whoami(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    ident = conn.identity
    return {
        "ok": {"name": ident.name, "tenant": ident.tenant, "admin": ident.admin, "uid": ident.uid}
    }


def subscribe(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    """Push the signals of the connection's own tenant to it from now on."""
    if conn.unlisten is None:
        channel = ctx.framework().signals(conn.identity.name)

        def forward(sig: TenantSignal) -> None:
            conn.push({"v": PROTOCOL_VERSION, "id": 0, "push": "signal", "sig": to_wire(sig)})
            channel.drain()  # delivered: the daemon has read it

        conn.unlisten = channel.listen(forward)
    return {"ok": True}


def unsubscribe(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    if conn.unlisten is not None:
        conn.unlisten()
        conn.unlisten = None
    return {"ok": True}


def segment(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    """A new shared-memory segment of ``size`` bytes; its descriptor goes with the reply."""
    seg, fd = ctx.sessions.new_segment(conn, field(msg, "size", int))
    return FdReply({"ok": {"seg": seg.segment_id, "size": seg.size}, "fd": 1}, fd)


def segment_free(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    return {"ok": ctx.sessions.free_segment(conn, field(msg, "seg", int))}


# -- services and calls ----------------------------------------------------------------------


def get_service(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    """A remote proxy of ``interface`` (within the tenant's policy filter and ``filter``)."""
    interface = field(msg, "interface", str)
    wanted = field(msg, "filter", str, optional=True)
    handle = ctx.sessions.acquire(conn, interface, wanted)
    proxy = handle.proxy
    return {
        "ok": {
            "h": handle.handle_id,
            "service_id": handle.service_id,
            "interface": proxy.interface,
            "consumer": proxy.consumer,
            "methods": [[name, setting] for name, setting in handle.methods.items()],
        }
    }


def release(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    return {"ok": ctx.sessions.drop(conn, _handle(conn, msg))}


def _arg(conn: Connection, value: Any, views: list[memoryview]) -> Any:
    if isinstance(value, InOut):
        return bytearray(value.data)
    if isinstance(value, ShmRef):
        view = conn.view(value)
        views.append(view)
        return view
    return value


def call(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    """Method ``m`` of handle ``h`` with ``args`` / ``kw``; buffers changed in place travel
    back in ``out``. The usual small call (plain values, no keywords, no region claim) is
    called with its arguments as they came."""
    handle_id = msg.get("h")
    handle = conn.handles.get(handle_id) if type(handle_id) is int else None
    if handle is None:
        handle = _handle(conn, msg)  # raises the error that fits
    name = msg.get("m")
    if type(name) is not str or name not in handle.methods:
        name = field(msg, "m", str)
        raise ServiceArgumentError(
            f"service {handle.service_id} has no method {name!r:.60}",
            method=name[:60],
        )
    raw_args = msg.get("args") or []
    raw_kw = msg.get("kw") or {}
    if type(raw_args) is not list or type(raw_kw) is not dict:
        raise ProtocolError('"args" must be a list and "kw" a map')
    buffers = False
    for a in raw_args:
        if isinstance(a, _BUFFER_REFS):
            buffers = True
            break
    ident = conn.identity
    if not buffers and not raw_kw and (handle.device is None or ident.max_regions is None):
        return {"ok": handle.invoke(name, raw_args, _NO_KW)}
    views: list[memoryview] = []
    sessions = ctx.sessions
    claim = sessions.claim_region(ident, handle)
    try:
        # plain values are called with as they came
        args = [_arg(conn, a, views) for a in raw_args] if buffers else raw_args
        kwargs = {str(k): _arg(conn, v, views) for k, v in raw_kw.items()}
        result = handle.invoke(name, args, kwargs)
        out = []
        if buffers:
            out = [[i, bytes(a)] for i, a in enumerate(args) if isinstance(raw_args[i], InOut)]
        if kwargs:
            out += [[k, bytes(v)] for k, v in kwargs.items() if isinstance(raw_kw[k], InOut)]
    finally:
        if claim is not None:
            sessions.unclaim_region(ident.name, claim)
        for view in views:
            with contextlib.suppress(BufferError):
                view.release()
    reply: dict[str, Any] = {"ok": result}
    if out:
        reply["out"] = out
    return reply


# -- snapshots -------------------------------------------------------------------------------


def services(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    """The services; a tenant sees those its policy allows, with itself as the only
    consumer."""
    ident = conn.identity
    snaps = ctx.framework().services()
    if ident.admin:
        return {"ok": [to_wire(s) for s in snaps]}
    allowed = ctx.sessions.allowed_ids(ident)
    out = []
    for s in snaps:
        if allowed is not None and s.service_id not in allowed:
            continue
        wire = to_wire(s)
        wire["consumers"] = [c for c in s.consumers if c == ident.name]
        out.append(wire)
    return {"ok": out}


def regions(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    return {"ok": [to_wire(r) for r in ctx.framework().regions()]}


def modules(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    return {"ok": [to_wire(m) for m in ctx.framework().modules()]}


def tenants(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    """The tenants; a tenant sees itself only."""
    ident = conn.identity
    snaps = ctx.framework().tenants()
    if not ident.admin:
        snaps = tuple(t for t in snaps if t.name == ident.name)
    return {"ok": [to_wire(t) for t in snaps]}


def statistics(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    """An admin gets the service's statistics; a tenant the same reduced to its own
    consumer's calls (:meth:`Framework.statistics <juggle.Framework.statistics>` with
    ``consumer``), of a service its policy allows."""
    fw = ctx.framework()
    service_id = _service_id(msg)
    ident = conn.identity
    if ident.admin:
        return {"ok": to_wire(fw.statistics(service_id))}
    allowed = ctx.sessions.allowed_ids(ident)
    if allowed is not None and service_id not in allowed:  # as if it did not exist
        raise UnknownServiceError(f"no service with id {service_id!r}", service_id=service_id)
    return {"ok": to_wire(fw.statistics(service_id, consumer=ident.name))}


# -- admin -----------------------------------------------------------------------------------


def install(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    """Copy the module at ``path`` into the state directory, install it and (unless
    ``start`` is false) start it; recorded only once it is."""
    path = field(msg, "path", str)
    start = msg.get("start", True) is not False
    state = ctx.state
    entry = state.copy_in(path)
    try:
        module = ctx.framework().install(state.target(entry))
    except BaseException:
        state.discard(entry)
        raise
    try:
        if start:
            module.start()
    except BaseException:
        with contextlib.suppress(JuggleError):
            module.uninstall()
        state.discard(entry)
        raise
    state.record(ModuleEntry(entry.path, module.name, start))
    log.info("%s installed module %s (%s)", conn.identity.name, module.name, path)
    return {"ok": to_wire(module.snapshot())}


def uninstall(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    module = ctx.framework().module(field(msg, "name", str))
    module.uninstall()
    ctx.state.forget(module.name)
    log.info("%s uninstalled module %s", conn.identity.name, module.name)
    return {"ok": True}


def juggle(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    to_hardware = field(msg, "to_hardware", int, optional=True)
    to_software = msg.get("to_software") or []
    if not isinstance(to_software, list) or not all(type(i) is int for i in to_software):
        raise ProtocolError('"to_software" must be a list of service ids')
    report = ctx.framework().juggle(to_hardware=to_hardware, to_software=to_software)
    return {"ok": to_wire(report)}


def set_tier(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    report = ctx.framework().set_tier(_service_id(msg), field(msg, "tier", str))
    return {"ok": to_wire(report)}


def reload_policy(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    return {"ok": ctx.reload_policy()}


def recover(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    """Admin: :meth:`~juggle.Framework.recover` ``region``. Every request, refused or not,
    leaves an audit line in the log: who (tenant, uid, pid), what, when (the log line's
    time, and the UTC time in it) and the result."""
    ident = conn.identity
    region = msg.get("region")
    who = f"{ident.name!r} (uid {ident.uid}, pid {ident.pid}, connection {conn.conn_id})"
    what = f"recover {region!r:.80}"
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        if not ident.admin:
            raise AccessDeniedError(
                f"recover needs the admin group; {ident.name!r} is no admin", operation="recover"
            )
        region = field(msg, "region", str)
        report = ctx.framework().recover(region)
    except Exception as exc:
        log.warning(
            "audit: %s asked to %s at %s: refused: %s: %s", who, what, when, type(exc).__name__, exc
        )
        raise
    done = (
        "region emptied, nothing to put back"
        if report is None
        else f"region emptied, service {report.to_hardware} back in {report.region!r}"
    )
    log.warning("audit: %s asked to %s at %s: done: %s", who, what, when, done)
    return {"ok": None if report is None else to_wire(report)}


#: Every operation by name.
OPERATIONS: Mapping[str, Operation] = MappingProxyType(
    {
        "ping": Operation(ping, pool="inline"),
        "whoami": Operation(whoami, pool="inline"),
        "subscribe": Operation(subscribe, pool="inline"),
        "unsubscribe": Operation(unsubscribe, pool="inline"),
        "segment": Operation(segment, pool="inline"),
        "segment_free": Operation(segment_free, pool="inline"),
        "get_service": Operation(get_service),
        "release": Operation(release),
        "call": Operation(call, quota=True),
        "services": Operation(services),
        "regions": Operation(regions),
        "statistics": Operation(statistics),
        "tenants": Operation(tenants),
        "modules": Operation(modules),
        "install": Operation(install, admin=True, pool="admin"),
        "uninstall": Operation(uninstall, admin=True, pool="admin"),
        "juggle": Operation(juggle, admin=True, pool="admin"),
        "set_tier": Operation(set_tier, admin=True, pool="admin"),
        "reload_policy": Operation(reload_policy, admin=True, pool="admin"),
        "recover": Operation(recover, pool="admin"),  # checks admin itself: audited
    }
)
