"""The daemon's sessions: who each connection is and what it holds.

A :class:`Connection` is a transport :class:`~juggle.daemon.transport.Link` plus its identity
(from ``SO_PEERCRED`` and the policy, at accept), its remote proxies (:class:`Handle`) and its
shared-memory segments. :class:`Sessions` gives connections their proxies and takes them back
(the ``max_services`` quota), claims regions for calls (``max_regions``), makes and frees
segments (counted by :class:`~juggle.daemon.quotas.Accounts`), and keeps whose service state is
where.

State isolation. Several connections (or threads) of one tenant, or tenants of a shared
service, use one service state (the state record :meth:`Framework.proxy_info
<juggle.Framework.proxy_info>` names: a loaded key). Each remote proxy keeps its own
state-setting calls; calls on one state record are serialised (:class:`StateGuard`) and, when
the state last set belongs to another remote proxy, this one's calls are replayed first. State
belongs to the tenant that set it (or to its ``share_state`` group): a remote proxy that set no
state uses its tenant's state, the one on the implementation or the one kept for the tenant
(replayed), and never state another tenant set, connected or gone
(:class:`ServiceStateError`). What a tenant set is kept for it alone after it disconnects
(Ker-ONE: a virtual device keeps its context while its VM is away) until its service is
uninstalled or the daemon stops: it reconnects and calls without ``load_key`` on its own key.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import mmap
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from juggle.daemon.policy import Identity, TenantLimits
from juggle.daemon.protocol import ShmRef
from juggle.daemon.quotas import Accounts
from juggle.daemon.tls import TlsSession
from juggle.daemon.transport import Link
from juggle.errors import (
    JuggleError,
    LimitExceededError,
    ProtocolError,
    QuotaExceededError,
    RegionQuotaExceededError,
    ServiceArgumentError,
    ServiceStateError,
)
from juggle.runtime import Framework, ServiceProxy, parse_filter

__all__ = [
    "MAX_CONNECTION_SHM",
    "MAX_SEGMENT_BYTES",
    "Connection",
    "Handle",
    "Segment",
    "Sessions",
    "StateGuard",
]

log = logging.getLogger("juggle.daemon")

#: Shared-memory budget of one connection: bytes of one segment, of all its segments (how
#: many segments: the policy's ``[limits]``, see :class:`~juggle.daemon.policy.Limits`).
MAX_SEGMENT_BYTES = 64 << 20
MAX_CONNECTION_SHM = 512 << 20
_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL

#: Whose state a service state is: ``("tenant", name)`` (an admin's ``admin:<user>`` too),
#: or ``("share", group)`` for the tenants of one ``share_state`` group.
StateKey = tuple[str, str]
#: The state-setting calls one remote proxy made: method -> (args, kwargs).
StateCalls = dict[str, tuple[tuple[Any, ...], dict[str, Any]]]


def state_key(ident: Identity) -> StateKey:
    """The key of the state ``ident`` may use: its share group's, else its own."""
    share = ident.share_state
    return ("share", share) if share else ("tenant", ident.name)


class StateGuard:
    """Serialises the calls on one service state and knows whose state it holds.

    ``state`` is the framework's opaque identity of that state, a state of service
    ``service_id`` (kept alive: guards are found by its ``id``; a guard lives while its
    service is registered and its state is the one a consumer's proxy uses). ``owner`` is
    the state-setting calls (a remote proxy's :attr:`Handle.own`, or a state kept for a
    tenant) whose state the implementation holds now, ``holder`` the key of the tenant (or
    share group) they belong to; both None while it holds no state a connected client set
    (what is there was left by a client gone). ``touched``: whether a client ever set it (a
    state nobody set is used as it is: a service without state).
    """

    __slots__ = ("holder", "lock", "owner", "service_id", "state", "touched", "users")

    def __init__(self, state: object, service_id: int) -> None:
        self.state = state
        self.service_id = service_id
        self.lock = threading.Lock()
        self.owner: StateCalls | None = None
        self.holder: StateKey | None = None
        self.users = 0
        self.touched = False


@dataclass(eq=False, slots=True)
class Handle:
    """A remote proxy: the daemon's proxy for the connection's consumer, and the state this
    remote proxy set. ``kept`` is the daemon's states kept per (service, state key)."""

    handle_id: int
    proxy: ServiceProxy
    service_id: int
    methods: dict[str, bool]
    guard: StateGuard | None
    kept: dict[tuple[int, StateKey], StateCalls]
    device: str | None = None  # the tenant's device (arbitrated service), if any
    key: StateKey = ("", "")  # whose state this remote proxy may use (state_key)
    own: StateCalls = field(default_factory=dict)
    bound: dict[str, Callable[..., Any]] = field(default_factory=dict)  # proxy methods

    def method(self, name: str) -> Callable[..., Any]:
        """The proxy's method ``name`` (looked up once)."""
        found = self.bound.get(name)
        if found is None:
            found = self.bound[name] = getattr(self.proxy, name)
        return found

    def invoke(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Call ``name`` on the proxy with the state this client may use.

        A state-setting call becomes this remote proxy's own state and its tenant's kept
        state. Any other call runs on the remote proxy's own state (replayed first when the
        implementation holds another), else on its tenant's (or share group's) state: the one
        on the implementation now, or the one kept for it, replayed. A client whose tenant has
        set no state may use no state another left (:class:`ServiceStateError`); only a state
        nobody ever set is used as it is (a service without state).
        """
        method = self.method(name)
        guard = self.guard
        if guard is None:
            return method(*args, **kwargs)
        with guard.lock:
            own = self.own
            if self.methods[name]:  # state-setting: it becomes this remote proxy's state
                result = method(*args, **kwargs)
                own[name] = (
                    tuple(bytes(a) if isinstance(a, bytearray | memoryview) else a for a in args),
                    dict(kwargs),
                )
                guard.owner, guard.holder, guard.touched = own, self.key, True
                self.kept[(self.service_id, self.key)] = own
                return result
            if guard.owner is not own:
                if own:
                    self._replay(guard, own)
                elif guard.holder != self.key:
                    kept = self.kept.get((self.service_id, self.key))
                    if kept is not None:
                        self._replay(guard, kept)
                    elif guard.holder is not None or guard.touched:
                        setters = ", ".join(n for n, s in self.methods.items() if s)
                        kind, whose = self.key
                        who = "tenant" if kind == "tenant" else "share_state group"
                        raise ServiceStateError(
                            f"service {self.service_id}: its state was set by another "
                            f"client, not by {who} {whose!r}; call {setters} first",
                            service_id=self.service_id,
                        )
            return method(*args, **kwargs)

    def _replay(self, guard: StateGuard, calls: StateCalls) -> None:
        """Make ``calls`` (a state of this handle's tenant) the implementation's state."""
        for setter, (a, k) in list(calls.items()):
            self.method(setter)(*a, **k)
        guard.owner, guard.holder = calls, self.key


@dataclass(eq=False, slots=True)
class Segment:
    """A shared-memory segment of a connection: a sealed memfd, mapped."""

    segment_id: int
    size: int
    mm: mmap.mmap


class Connection(Link):
    """One client connection: its transport link, identity, remote proxies and segments
    (``tls``: the TLS session of a TCP connection, which holds no segments)."""

    def __init__(
        self,
        conn_id: int,
        identity: Identity,
        sock: socket.socket,
        loop: asyncio.AbstractEventLoop,
        *,
        limits: TenantLimits,
        spin_us: float = 0.0,
        spin_gate: threading.Lock | None = None,
        max_segments: int = 64,
        max_queued: int = 64 << 20,
        account: Callable[[int], str | None] | None = None,
        tls: TlsSession | None = None,
    ) -> None:
        super().__init__(
            conn_id,
            sock,
            loop,
            spin_us=spin_us,
            spin_gate=spin_gate,
            max_frame=limits.frame_bytes,
            max_queued=max_queued,
            account=account,
            tls=tls,
        )
        self.identity = identity
        self.limits = limits
        self.max_segments = max_segments
        self.handles: dict[int, Handle] = {}
        self.segments: dict[int, Segment] = {}
        self.shm_bytes = 0
        self._ids = iter(range(1, 1 << 62))
        self.unlisten: Callable[[], None] | None = None

    def next_id(self) -> int:
        with self.lock:
            return next(self._ids)

    def view(self, ref: ShmRef) -> memoryview:
        """The memory ``ref`` names. Raises :class:`ProtocolError`."""
        seg = self.segments.get(ref.segment)
        if seg is None:
            raise ProtocolError(f"no shared-memory segment {ref.segment}", value=ref.segment)
        if ref.offset + ref.length > seg.size:
            raise ProtocolError(
                f"range {ref.offset}+{ref.length} outside segment {ref.segment} of {seg.size}",
                value=ref.segment,
            )
        return memoryview(seg.mm)[ref.offset : ref.offset + ref.length]


class Sessions:
    """What the daemon's connections hold through the framework ``framework()``: their
    remote proxies, the service states they set (and those kept for tenants gone), their
    region claims and their shared-memory segments (counted in ``accounts``)."""

    def __init__(self, framework: Callable[[], Framework], accounts: Accounts) -> None:
        self._framework = framework
        self._accounts = accounts
        self._lock = threading.Lock()
        #: id(state) -> its guard (a guard keeps its state alive, so ids are not reused);
        #: (service id, consumer) -> the guard of the state that consumer's proxy uses: a
        #: guard is dropped when a new state replaces it for its consumers (a per-consumer
        #: service's new proxy starts with a new one) or its service goes
        self._guards: dict[int, StateGuard] = {}
        self._guard_of: dict[tuple[int, str], StateGuard] = {}
        #: (service id, state key) -> the state a tenant (or share group) set last on that
        #: service: kept while it is away, for it alone (see Handle.invoke)
        self._kept: dict[tuple[int, StateKey], StateCalls] = {}
        self._held: dict[str, int] = {}
        self._region_lock = threading.Lock()
        self._region_claims: dict[str, dict[str, int]] = {}
        self._segment_ids = iter(range(1, 1 << 62))

    # -- what an identity may see ----------------------------------------------------------

    @staticmethod
    def allowed_filter(ident: Identity, extra: str | None) -> str | None:
        """The filter of ``ident``'s policy and ``extra`` together (None: no filter)."""
        parts = [str(parse_filter(f)) for f in (ident.services, extra) if f]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else f"(&{''.join(parts)})"

    def allowed_ids(self, ident: Identity) -> set[int] | None:
        """Ids of the services ``ident`` may use (None: all)."""
        if ident.services is None or ident.admin:
            return None
        fw = self._framework()
        return {ref.service_id for ref in fw.registry.get_references(None, ident.services)}

    # -- remote proxies --------------------------------------------------------------------

    def acquire(self, conn: Connection, interface: str, wanted: str | None) -> Handle:
        """A remote proxy of ``interface`` (and the ``wanted`` filter) for ``conn``. Raises
        :class:`QuotaExceededError` past the tenant's ``max_services``, and what
        :meth:`Framework.get_service <juggle.Framework.get_service>` raises."""
        fw = self._framework()
        ident = conn.identity
        combined = self.allowed_filter(ident, wanted)
        with self._lock:
            held = self._held.get(ident.name, 0)
            if ident.max_services is not None and held >= ident.max_services:
                raise QuotaExceededError(
                    f"tenant {ident.name!r} holds {held} services, its quota is "
                    f"{ident.max_services}",
                    tenant=ident.name,
                )
            self._held[ident.name] = held + 1
        try:
            proxy = fw.get_service(interface, consumer=ident.name, filter=combined)
            info = fw.proxy_info(proxy)
        except BaseException:
            with self._lock:
                self._held[ident.name] -= 1
            raise
        methods = dict(info.methods)
        with self._lock:
            guard = None
            if any(methods.values()):
                guard = self._guard(info.service_id, info.consumer, info.state)
                guard.users += 1
            handle = Handle(
                conn.next_id(),
                proxy,
                info.service_id,
                methods,
                guard,
                self._kept,
                info.device,
                state_key(ident),
            )
            conn.handles[handle.handle_id] = handle
            self._forget_gone(fw)
        if conn.closed:  # the client left while we got it
            self.drop(conn, handle)
        return handle

    def _guard(self, service_id: int, consumer: str, state: object) -> StateGuard:
        """The guard of ``state``, the state ``consumer``'s proxy of ``service_id`` uses
        (``self._lock`` held). The guard of the state it used before, if another and no
        longer used, goes: nothing can reach that state any more."""
        guard = self._guards.get(id(state))
        if guard is None:
            guard = self._guards[id(state)] = StateGuard(state, service_id)
        before = self._guard_of.get((service_id, consumer))
        if (
            before is not None
            and before is not guard
            and before.users <= 0
            and self._guards.get(id(before.state)) is before
        ):
            del self._guards[id(before.state)]
        self._guard_of[(service_id, consumer)] = guard
        return guard

    def drop(self, conn: Connection, handle: Handle) -> bool:
        """Give ``handle`` back (its proxy to the framework); whether it was still held."""
        ident = conn.identity
        with self._lock:
            if conn.handles.pop(handle.handle_id, None) is None:
                return False
            self._held[ident.name] = self._held.get(ident.name, 1) - 1
            guard = handle.guard
            if guard is not None:
                # the state this remote proxy set stays kept for its tenant (self._kept), not
                # for whoever comes next: with no client left the guard has no owner, and a
                # remote proxy that set no state uses none another tenant left (Handle.invoke)
                guard.users -= 1
                if guard.users <= 0:
                    guard.owner = guard.holder = None
            fw = self._framework()
            self._forget_gone(fw)
        try:
            return fw.unget_service(handle.proxy)
        except JuggleError as exc:  # the framework is closed, the service gone
            log.debug("release of service %d: %s", handle.service_id, exc)
            return False

    def _forget_gone(self, fw: Framework) -> None:
        """Drop the guards and kept states of services no longer registered (``self._lock``
        held)."""
        gone = {g.service_id for g in self._guards.values()} | {k[0] for k in self._kept}
        gone = {service_id for service_id in gone if not self._registered(fw, service_id)}
        if not gone:
            return
        for key in [k for k, g in self._guards.items() if g.service_id in gone]:
            del self._guards[key]
        for of in [k for k in self._guard_of if k[0] in gone]:
            del self._guard_of[of]
        for kept in [k for k in self._kept if k[0] in gone]:
            del self._kept[kept]

    @staticmethod
    def _registered(fw: Framework, service_id: int) -> bool:
        try:
            fw.registry.reference(service_id)
        except JuggleError:
            return False
        return True

    def release_all(self, conn: Connection) -> None:
        """Give back everything ``conn`` holds: its remote proxies and its segments."""
        for handle in list(conn.handles.values()):
            self.drop(conn, handle)
        segments = list(conn.segments.values())
        conn.segments.clear()
        conn.shm_bytes = 0
        for seg in segments:
            with contextlib.suppress(BufferError):
                seg.mm.close()
        if segments:
            self._accounts.give(conn.identity.name, segments=len(segments))

    # -- regions ---------------------------------------------------------------------------

    def claim_region(self, ident: Identity, handle: Handle) -> str | None:
        """Before a call of ``handle``: the device it claims a region for (None: no claim to
        make). Raises :class:`RegionQuotaExceededError` when the tenant's devices holding,
        waiting for or calling for a region are as many as its ``max_regions`` and this
        device is not one of them."""
        device, quota = handle.device, ident.max_regions
        if device is None or quota is None:
            return None
        with self._region_lock:
            claims = self._region_claims.setdefault(ident.name, {})
            if device not in claims:
                held = self._devices_placed(ident.name) | set(claims)
                if device not in held and len(held) >= quota:
                    raise RegionQuotaExceededError(
                        f"tenant {ident.name!r} holds or waits for {len(held)} region(s) (for "
                        f"{', '.join(sorted(held))}); its max_regions quota is {quota}: give "
                        "one of those services back (unget_service) to free its region",
                        tenant=ident.name,
                    )
            claims[device] = claims.get(device, 0) + 1
        return device

    def unclaim_region(self, tenant: str, device: str) -> None:
        """A call that claimed ``device``'s region for ``tenant`` ended."""
        with self._region_lock:
            claims = self._region_claims.get(tenant, {})
            left = claims.get(device, 1) - 1
            if left > 0:
                claims[device] = left
            else:
                claims.pop(device, None)

    def _devices_placed(self, tenant: str) -> set[str]:
        """Devices of ``tenant`` connected to a region, being placed, or waiting for one."""
        for snap in self._framework().tenants():
            if snap.name == tenant:
                return {d.device for d in snap.devices if d.state != "disconnected"}
        return set()

    # -- shared memory ---------------------------------------------------------------------

    def new_segment(self, conn: Connection, size: int) -> tuple[Segment, int]:
        """A sealed shared-memory segment of ``size`` bytes for ``conn``, and its descriptor
        (to send). Raises :class:`ProtocolError` on a TLS (TCP) connection, which carries no
        descriptors (its calls copy), :class:`ServiceArgumentError` for a size outside
        1..:data:`MAX_SEGMENT_BYTES`, :class:`LimitExceededError` past the connection's,
        tenant's or daemon's segment limits, :class:`QuotaExceededError` past
        :data:`MAX_CONNECTION_SHM` bytes."""
        if conn.tls is not None:
            raise ProtocolError(
                "no shared-memory segments over TLS: a remote client's buffers travel in the "
                "frames",
                operation="segment",
            )
        if not 0 < size <= MAX_SEGMENT_BYTES:
            raise ServiceArgumentError(
                f"segment size {size} outside 1..{MAX_SEGMENT_BYTES}", value=size
            )
        if len(conn.segments) >= conn.max_segments:
            raise LimitExceededError(
                f"connection {conn.conn_id} holds {len(conn.segments)} shared-memory segments; "
                f"its limit connection_max_segments is {conn.max_segments}",
                limit="connection_max_segments",
                value=conn.max_segments,
            )
        if conn.shm_bytes + size > MAX_CONNECTION_SHM:
            raise QuotaExceededError(
                f"connection holds {len(conn.segments)} segments of {conn.shm_bytes} bytes; "
                f"a segment of {size} more would pass {MAX_CONNECTION_SHM}",
                tenant=conn.identity.name,
            )
        # counted before the descriptor exists: the daemon never opens one past the limits
        self._accounts.take(conn.identity, conn.limits, connection=False)
        fd = -1
        try:
            fd = os.memfd_create("juggle-shm", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)  # nobody can shrink it under a call
            mm = mmap.mmap(fd, size)  # keeps a descriptor of its own (a dup)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            self._accounts.give(conn.identity.name, segments=1)
            raise
        seg = Segment(next(self._segment_ids), size, mm)
        conn.segments[seg.segment_id] = seg
        conn.shm_bytes += size
        return seg, fd

    def free_segment(self, conn: Connection, segment_id: int) -> bool:
        """Unmap ``conn``'s segment ``segment_id``; whether it had one."""
        seg = conn.segments.pop(segment_id, None)
        if seg is None:
            return False
        conn.shm_bytes -= seg.size
        with contextlib.suppress(BufferError):  # a call still holds a view: the GC frees it
            seg.mm.close()
        self._accounts.give(conn.identity.name, segments=1)
        return True
