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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, Protocol

from juggle.daemon import audit
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

    def trusted_keys(self) -> dict[str, Any]:
        """The keys a module must be signed by: ``{"required", "keys": [{"fingerprint",
        "source"}]}``."""
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


# -- admin (each request, refused or done, leaves one audit line) ----------------------------


def _quoted(msg: dict[str, Any], key: str) -> str:
    """Field ``key`` of ``msg`` for an audit line: its repr, cut at 80 characters."""
    return f"{msg.get(key)!r:.80}"


def _what_juggle(msg: dict[str, Any]) -> str:
    return (
        f"juggle to_hardware={msg.get('to_hardware')!r:.20} "
        f"to_software={msg.get('to_software')!r:.60}"
    )


def _what_tier(msg: dict[str, Any]) -> str:
    return f"serve service {msg.get('service_id')!r:.20} from tier {_quoted(msg, 'tier')}"


def _module_done(reply: Reply) -> str:
    body = reply.body if isinstance(reply, FdReply) else reply
    snap = body.get("ok") or {}
    return f"module {snap.get('name')!r} (id {snap.get('module_id')})"


def _juggle_done(reply: Reply) -> str:
    body = reply.body if isinstance(reply, FdReply) else reply
    report = body.get("ok")
    if report is None:
        return "region emptied, nothing to put back"
    tiers = ", ".join(f"service {k} {v}" for k, v in (report.get("tiers") or {}).items())
    return (
        f"tiers now: {tiers or 'none'}, region {report.get('region')!r}, "
        f"{report.get('reconfiguration_ms', 0.0):.3f} ms reconfiguration (modeled)"
    )


def _reload_done(reply: Reply) -> str:
    body = reply.body if isinstance(reply, FdReply) else reply
    summary = body.get("ok") or {}
    return (
        f"tenants {summary.get('tenants')}, changed {summary.get('changed')}, "
        f"connections closed {summary.get('closed_connections')}"
    )


def _recover_done(reply: Reply) -> str:
    body = reply.body if isinstance(reply, FdReply) else reply
    report = body.get("ok")
    if report is None:
        return "region emptied, nothing to put back"
    return f"region emptied, service {report.get('to_hardware')} back in {report.get('region')!r}"


def admin_action(
    action: str,
    what: Callable[[dict[str, Any]], str],
    done: Callable[[Reply], str],
) -> Callable[
    [Callable[[Context, Connection, dict[str, Any]], Reply]],
    Callable[[Context, Connection, dict[str, Any]], Reply],
]:
    """Make an operation an audited admin action: it checks the admin right itself (so a
    refused request is audited too; :class:`AccessDeniedError` ``"<action> needs the admin
    group"``) and every request leaves exactly one audit line (:func:`juggle.daemon.audit.
    action`): who, what (``what(msg)``), when, and the result (``done(reply)``) or the
    refusal."""

    def wrap(
        fn: Callable[[Context, Connection, dict[str, Any]], Reply],
    ) -> Callable[[Context, Connection, dict[str, Any]], Reply]:
        def audited(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
            ident = conn.identity
            asked = what(msg)
            when = audit.utc_now()
            try:
                if not ident.admin:
                    raise AccessDeniedError(
                        f"{action} needs the admin group; {ident.name!r} is no admin",
                        operation=action,
                    )
                reply = fn(ctx, conn, msg)
            except Exception as exc:
                audit.action(ident, conn.conn_id, asked, when, refused=exc)
                raise
            audit.action(ident, conn.conn_id, asked, when, done=done(reply))
            return reply

        audited.__name__ = fn.__name__
        audited.__doc__ = fn.__doc__
        return audited

    return wrap


@admin_action("install", lambda msg: f"install {_quoted(msg, 'path')}", _module_done)
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
    return {"ok": to_wire(module.snapshot())}


@admin_action("uninstall", lambda msg: f"uninstall {_quoted(msg, 'name')}", _module_done)
def uninstall(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    """Uninstall module ``name`` and forget it; its snapshot as it was before."""
    module = ctx.framework().module(field(msg, "name", str))
    snapshot = to_wire(module.snapshot())
    module.uninstall()
    ctx.state.forget(module.name)
    return {"ok": snapshot}


@admin_action("juggle", _what_juggle, _juggle_done)
def juggle(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    to_hardware = field(msg, "to_hardware", int, optional=True)
    to_software = msg.get("to_software") or []
    if not isinstance(to_software, list) or not all(type(i) is int for i in to_software):
        raise ProtocolError('"to_software" must be a list of service ids')
    report = ctx.framework().juggle(to_hardware=to_hardware, to_software=to_software)
    return {"ok": to_wire(report)}


@admin_action("set_tier", _what_tier, _juggle_done)
def set_tier(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    report = ctx.framework().set_tier(_service_id(msg), field(msg, "tier", str))
    return {"ok": to_wire(report)}


@admin_action("reload_policy", lambda msg: "reload the policy", _reload_done)
def reload_policy(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    return {"ok": ctx.reload_policy()}


@admin_action("recover", lambda msg: f"recover {_quoted(msg, 'region')}", _recover_done)
def recover(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    """Admin: :meth:`~juggle.Framework.recover` ``region`` (audited as every admin action:
    who, what, when, result)."""
    report = ctx.framework().recover(field(msg, "region", str))
    return {"ok": None if report is None else to_wire(report)}


def trusted_keys(ctx: Context, conn: Connection, msg: dict[str, Any]) -> Reply:
    """The keys modules must be signed by (anyone may read them: public keys)."""
    return {"ok": ctx.trusted_keys()}


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
        "trusted_keys": Operation(trusted_keys),
        # the admin actions check the admin right themselves, so a refusal is audited too
        "install": Operation(install, pool="admin"),
        "uninstall": Operation(uninstall, pool="admin"),
        "juggle": Operation(juggle, pool="admin"),
        "set_tier": Operation(set_tier, pool="admin"),
        "reload_policy": Operation(reload_policy, pool="admin"),
        "recover": Operation(recover, pool="admin"),
    }
)
