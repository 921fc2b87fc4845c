"""The tenant policy: who may connect to the daemon, as which tenant, with what rights.

Identity comes from the kernel (``SO_PEERCRED``: the peer's pid, uid and gid, and
``SO_PEERGROUPS``: its supplementary groups), never from what a client says. The policy file
is TOML, validated with pydantic::

    version = 1
    admin_group = "juggle-admin"     # name or gid: its members may run admin operations
    admin_uids = [0]                 # uids (or user names) that are admins too
    admin_cns = ["ops"]              # client certificate CNs (TLS) that are admins too
    socket_group = "juggle"          # the socket is chown'ed to it, mode 0660
    socket_mode = "0660"             # "0600", "0660" or "0666" (identity is checked anyway)
    trusted_keys = ["/etc/juggle/author.pem.pub"]  # modules must be signed by one of these
    tenant_hold_ms = 20.0            # a region's hold after a preemption or juggle (0: off;
                                     # absent: twice the modeled reconfiguration time)

    [[tenants]]
    name = "alice"                   # the tenant (consumer) name; [A-Za-z0-9_.-], 1..64
    uids = [1000, "bob"]             # uids or user names mapped to it
    groups = ["video"]               # or groups (names or gids); uids are matched first
    cert_cn = "alice"                # or (TLS) the client certificate's subject CN
    priority = 1                     # 0..2, or realtime = true
    model = "aware"                  # "native" (calls block) or "aware" (WaitSignal)
    services = "(algorithm=tdes)"    # LDAP filter on service properties (default: all)
    calls_per_s = 500                # quota: calls per second (default: unlimited)
    max_services = 8                 # quota: proxies held at once (default: unlimited)
    max_regions = 1                  # quota: fabric regions held at once (default: unlimited)
    admin = false                    # this tenant may run admin operations
    max_connections = 16             # limits of this tenant (default: [limits] tenant_max_*)
    share_state = "mail"             # tenants of one group use one another's service state

    [limits]                         # bounds of the daemon (see :class:`LimitsTable`)
    max_descriptors = 896            # all tenants together (default: from RLIMIT_NOFILE)
    tenant_max_connections = 56      # each tenant, unless its entry says otherwise

A peer matched by no tenant is refused, unless it is an admin (then it connects as
``admin:<user>``, or ``admin:<cn>`` over TLS, a consumer that is no tenant). Over TLS
(:mod:`juggle.daemon.tls`) identity is the subject CN of the client certificate the handshake
verified against the cluster CA, mapped by ``cert_cn`` and ``admin_cns``. Without a policy
file only the daemon's own uid may connect, as admin, under its user name (and no TLS peer).

Service state (a loaded key) belongs to the tenant that set it: another tenant's calls never use
it, connected or not. ``share_state`` names a group: the tenants that name the same group use
one another's state, as one tenant's connections do (see docs/daemon.md, "Whose state").
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import socket
import struct
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from juggle.errors import FilterSyntaxError, PolicyError
from juggle.runtime import parse_filter

__all__ = [
    "Limits",
    "LimitsTable",
    "TenantLimits",
    "default_limits",
    "MAX_POLICY_BYTES",
    "AccessPolicy",
    "Identity",
    "PeerCredentials",
    "PolicyFile",
    "TenantRule",
    "peer_credentials",
]

#: A policy file larger than this is refused before it is parsed.
MAX_POLICY_BYTES = 1 << 20
#: ``SO_PEERGROUPS`` (Linux >= 4.13); Python's socket module may not name it.
SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
#: A certificate's subject CN the policy may name (``cert_cn``, ``admin_cns``).
_CN = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
_SOCKET_MODES = {"0600": 0o600, "0660": 0o660, "0666": 0o666}


# -- the file --------------------------------------------------------------------------------


def _uid_of(value: int | str) -> int:
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"uid {value} is negative")
        return value
    try:
        return pwd.getpwnam(value).pw_uid
    except KeyError:
        raise ValueError(f"no user {value!r}") from None


def _gid_of(value: int | str) -> int:
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"gid {value} is negative")
        return value
    try:
        return grp.getgrnam(value).gr_gid
    except KeyError:
        raise ValueError(f"no group {value!r}") from None


class TenantRule(BaseModel):
    """One ``[[tenants]]`` entry: which peers it maps, and the tenant they become."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    uids: tuple[int | str, ...] = ()
    groups: tuple[int | str, ...] = ()
    priority: int | None = Field(default=None, ge=0, le=2)
    realtime: bool = False
    model: Literal["native", "aware"] = "native"
    services: str | None = None
    calls_per_s: float | None = Field(default=None, gt=0)
    max_services: int | None = Field(default=None, ge=1)
    max_regions: int | None = Field(default=None, ge=1)
    max_descriptors: int | None = Field(default=None, ge=1)
    max_connections: int | None = Field(default=None, ge=1)
    max_segments: int | None = Field(default=None, ge=0)
    max_queued_bytes: int | None = Field(default=None, ge=1 << 16)
    max_frame_bytes: int | None = Field(default=None, ge=1 << 10, le=1 << 31)
    admin: bool = False
    share_state: str | None = None
    cert_cn: str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"tenant name {value!r} must match [A-Za-z0-9_.-]{{1,64}}")
        return value

    @field_validator("cert_cn")
    @classmethod
    def _cert_cn(cls, value: str | None) -> str | None:
        if value is not None and not _CN.match(value):
            raise ValueError(f"cert_cn {value!r} must match [A-Za-z0-9_.@-]{{1,64}}")
        return value

    @field_validator("share_state")
    @classmethod
    def _share_state(cls, value: str | None) -> str | None:
        if value is not None and not _NAME.match(value):
            raise ValueError(f"share_state group {value!r} must match [A-Za-z0-9_.-]{{1,64}}")
        return value

    @field_validator("uids")
    @classmethod
    def _uids(cls, value: tuple[int | str, ...]) -> tuple[int, ...]:
        return tuple(_uid_of(v) for v in value)

    @field_validator("groups")
    @classmethod
    def _groups(cls, value: tuple[int | str, ...]) -> tuple[int, ...]:
        return tuple(_gid_of(v) for v in value)

    @field_validator("services")
    @classmethod
    def _services(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return str(parse_filter(value))
        except FilterSyntaxError as exc:
            raise ValueError(str(exc)) from None

    @model_validator(mode="after")
    def _check(self) -> TenantRule:
        if not self.uids and not self.groups and self.cert_cn is None:
            raise ValueError(f"tenant {self.name!r} maps no uids, no groups and no cert_cn")
        if self.realtime and self.priority is not None:
            raise ValueError(f"tenant {self.name!r}: realtime takes no priority")
        return self


class LimitsTable(BaseModel):
    """The ``[limits]`` table: bounds on what the daemon holds for all tenants together
    (``max_*``), for each tenant (``tenant_max_*``, unless its ``[[tenants]]`` entry sets its
    own ``max_*``) and for each connection (``connection_max_*``). A field left out takes its
    default from the daemon's ``RLIMIT_NOFILE`` at start (:func:`default_limits`).

    Descriptors are connections plus shared-memory segments (each segment keeps one in the
    daemon); queued bytes are replies a client has not read yet; frame bytes bound one request's
    payload (and so, through msgpack's limits, what decoding it may allocate).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_descriptors: int | None = Field(default=None, ge=1)
    max_connections: int | None = Field(default=None, ge=1)
    max_segments: int | None = Field(default=None, ge=0)
    max_queued_bytes: int | None = Field(default=None, ge=1 << 16)
    max_frame_bytes: int | None = Field(default=None, ge=1 << 10, le=1 << 31)
    tenant_max_descriptors: int | None = Field(default=None, ge=1)
    tenant_max_connections: int | None = Field(default=None, ge=1)
    tenant_max_segments: int | None = Field(default=None, ge=0)
    tenant_max_queued_bytes: int | None = Field(default=None, ge=1 << 16)
    tenant_max_frame_bytes: int | None = Field(default=None, ge=1 << 10, le=1 << 31)
    connection_max_segments: int | None = Field(default=None, ge=0)
    connection_max_queued_bytes: int | None = Field(default=None, ge=1 << 16)


@dataclass(frozen=True, slots=True)
class TenantLimits:
    """What one tenant (all its connections together) may hold at once."""

    descriptors: int
    connections: int
    segments: int
    queued_bytes: int
    frame_bytes: int


@dataclass(frozen=True, slots=True)
class Limits:
    """The daemon's bounds in force: for all tenants together, each tenant's default, and
    each connection's."""

    descriptors: int
    connections: int
    segments: int
    queued_bytes: int
    frame_bytes: int
    tenant: TenantLimits
    connection_segments: int
    connection_queued_bytes: int

    def for_identity(self, ident: Identity) -> TenantLimits:
        """The limits of ``ident``'s tenant: its own where its policy entry sets them, else
        the default; never above the daemon's (a frame never above the daemon's maximum)."""
        base = self.tenant
        return TenantLimits(
            descriptors=ident.max_descriptors or base.descriptors,
            connections=ident.max_connections or base.connections,
            segments=base.segments if ident.max_segments is None else ident.max_segments,
            queued_bytes=ident.max_queued_bytes or base.queued_bytes,
            frame_bytes=min(ident.max_frame_bytes or base.frame_bytes, self.frame_bytes),
        )


#: Descriptors kept out of the limits for the framework, the listener, logs, the poller,
#: the dashboard and module files: at least this many, or an eighth of ``RLIMIT_NOFILE``.
DESCRIPTOR_HEADROOM = 64
#: Default bounds that do not depend on ``RLIMIT_NOFILE``.
DEFAULT_QUEUED_BYTES = 256 << 20
DEFAULT_TENANT_QUEUED_BYTES = 128 << 20
DEFAULT_CONNECTION_QUEUED_BYTES = 64 << 20
DEFAULT_CONNECTION_SEGMENTS = 64
#: Ceilings of the derived defaults (each connection is a thread of the daemon).
_MAX_DEFAULT_DESCRIPTORS = 1 << 16
_MAX_DEFAULT_CONNECTIONS = 1 << 12


def default_limits(nofile: int, frame_bytes: int) -> Limits:
    """The default limits of a daemon whose ``RLIMIT_NOFILE`` (soft) is ``nofile`` and whose
    largest frame is ``frame_bytes``: descriptors are ``nofile`` less a headroom (an eighth, at
    least 64); connections half of them; each tenant a quarter of the descriptors and
    segments and an eighth of the connections, so no tenant alone can exhaust them."""
    headroom = max(DESCRIPTOR_HEADROOM, nofile // 8)
    descriptors = max(16, min(nofile - headroom, _MAX_DEFAULT_DESCRIPTORS))
    connections = max(4, min(descriptors // 2, _MAX_DEFAULT_CONNECTIONS))
    return Limits(
        descriptors=descriptors,
        connections=connections,
        segments=descriptors,
        queued_bytes=DEFAULT_QUEUED_BYTES,
        frame_bytes=frame_bytes,
        tenant=TenantLimits(
            descriptors=max(4, descriptors // 4),
            connections=max(2, connections // 8),
            segments=max(2, descriptors // 4),
            queued_bytes=DEFAULT_TENANT_QUEUED_BYTES,
            frame_bytes=frame_bytes,
        ),
        connection_segments=DEFAULT_CONNECTION_SEGMENTS,
        connection_queued_bytes=DEFAULT_CONNECTION_QUEUED_BYTES,
    )


class PolicyFile(BaseModel):
    """The whole policy file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1] = 1
    admin_group: int | str | None = None
    admin_uids: tuple[int | str, ...] = ()
    admin_cns: tuple[str, ...] = ()
    socket_group: int | str | None = None
    socket_mode: Literal["0600", "0660", "0666"] | None = None
    tenants: tuple[TenantRule, ...] = ()
    limits: LimitsTable = LimitsTable()
    trusted_keys: tuple[str, ...] = ()
    tenant_hold_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    @field_validator("trusted_keys")
    @classmethod
    def _trusted_keys(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for key in value:
            if not os.path.isabs(key):
                raise ValueError(
                    f"trusted key {key!r} must be an absolute path (the policy is also read "
                    "from the state directory, where a relative one would point elsewhere)"
                )
        return value

    @field_validator("admin_group", "socket_group")
    @classmethod
    def _group(cls, value: int | str | None) -> int | None:
        return None if value is None else _gid_of(value)

    @field_validator("admin_cns")
    @classmethod
    def _admin_cns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for cn in value:
            if not _CN.match(cn):
                raise ValueError(f"admin CN {cn!r} must match [A-Za-z0-9_.@-]{{1,64}}")
        return value

    @field_validator("admin_uids")
    @classmethod
    def _admins(cls, value: tuple[int | str, ...]) -> tuple[int, ...]:
        return tuple(_uid_of(v) for v in value)

    @model_validator(mode="after")
    def _unique(self) -> PolicyFile:
        names = [t.name for t in self.tenants]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"tenant name(s) given twice: {', '.join(duplicates)}")
        cns = [t.cert_cn for t in self.tenants if t.cert_cn is not None]
        twice = sorted({c for c in cns if cns.count(c) > 1})
        if twice:
            raise ValueError(f"cert_cn(s) mapped to two tenants: {', '.join(twice)}")
        return self


# -- identities ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PeerCredentials:
    """What the kernel says about the peer of a Unix socket."""

    pid: int
    uid: int
    gid: int
    groups: tuple[int, ...] = ()

    @property
    def all_groups(self) -> frozenset[int]:
        """Primary and supplementary groups."""
        return frozenset((self.gid, *self.groups))


def peer_credentials(sock: Any) -> PeerCredentials:
    """Pid, uid, gid (``SO_PEERCRED``) and supplementary groups (``SO_PEERGROUPS``, empty
    where the kernel lacks it) of the peer of Unix socket ``sock``. Raises :class:`OSError`."""
    getsockopt = sock.getsockopt
    raw = getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    groups: tuple[int, ...] = ()
    try:
        raw_groups = getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, 4 * 1024)
        groups = struct.unpack(f"{len(raw_groups) // 4}I", raw_groups[: len(raw_groups) // 4 * 4])
    except OSError:
        pass
    return PeerCredentials(pid, uid, gid, tuple(groups))


def user_name(uid: int) -> str:
    """The login name of ``uid`` (``uid<N>`` when it has none)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid{uid}"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a connection is: its consumer name, whether that is a framework tenant, admin
    rights, and the tenant's allowed services and quotas."""

    name: str
    tenant: bool
    admin: bool
    uid: int
    gid: int
    pid: int
    services: str | None = None
    calls_per_s: float | None = None
    max_services: int | None = None
    max_regions: int | None = None
    max_descriptors: int | None = None  # the tenant's own limits (None: the policy's default)
    max_connections: int | None = None
    max_segments: int | None = None
    max_queued_bytes: int | None = None
    max_frame_bytes: int | None = None
    share_state: str | None = None  # the state-sharing group of the tenant (None: its own)
    cert_cn: str | None = None  # the client certificate's CN of a TLS connection (uid -1)


class AccessPolicy:
    """A validated policy (or the default one: the daemon's own uid only, as admin)."""

    def __init__(self, policy: PolicyFile | None, daemon_uid: int, source: Path | None = None):
        self.file = policy
        self.daemon_uid = daemon_uid
        self.source = source

    @classmethod
    def load(cls, path: str | Path, daemon_uid: int | None = None) -> AccessPolicy:
        """The policy in TOML file ``path``. Raises :class:`PolicyError`, naming the path,
        also for a file the daemon must not trust: a symbolic link (not followed), not a
        regular file (a FIFO is refused at once, never waited on), owned by a uid other than
        root and the daemon's, writable by its group or others, or over
        :data:`MAX_POLICY_BYTES` (counted while reading, whatever ``st_size`` says)."""
        from juggle.daemon.safefs import read_regular_file

        path = Path(path)
        try:
            raw = read_regular_file(path, MAX_POLICY_BYTES, {0, os.geteuid()}, error=PolicyError)
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PolicyError(f"cannot read policy {str(path)!r}: {exc}", path=str(path)) from None
        return cls.parse(text, daemon_uid, source=path)

    @classmethod
    def parse(
        cls, text: str, daemon_uid: int | None = None, *, source: Path | None = None
    ) -> AccessPolicy:
        """The policy in TOML ``text``. Raises :class:`PolicyError`."""
        where = str(source) if source is not None else "<policy>"
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise PolicyError(f"policy {where!r} is not TOML: {exc}", path=where) from None
        try:
            policy = PolicyFile.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '<file>'}: {e['msg']}"
                for e in exc.errors()
            )
            raise PolicyError(f"policy {where!r} is invalid: {problems}", path=where) from None
        return cls(policy, os.getuid() if daemon_uid is None else daemon_uid, source)

    @property
    def socket_mode(self) -> int:
        """Permissions of the socket file."""
        if self.file is None:
            return 0o600
        if self.file.socket_mode is not None:
            return _SOCKET_MODES[self.file.socket_mode]
        return 0o660 if self.file.socket_group is not None else 0o600

    @property
    def socket_group(self) -> int | None:
        """Group the socket file is given to (None: leave it)."""
        return None if self.file is None else self._gid(self.file.socket_group)

    @staticmethod
    def _gid(value: int | str | None) -> int | None:
        return None if value is None else _gid_of(value)

    def limits(self, nofile: int, frame_bytes: int) -> Limits:
        """The limits in force for a daemon whose ``RLIMIT_NOFILE`` is ``nofile`` and whose
        largest frame is ``frame_bytes``: the ``[limits]`` table over :func:`default_limits`
        (a frame never above ``frame_bytes``)."""
        base = default_limits(nofile, frame_bytes)
        table = self.file.limits if self.file is not None else LimitsTable()
        tenant = base.tenant

        def pick(value: int | None, default: int) -> int:
            return default if value is None else value

        return Limits(
            descriptors=pick(table.max_descriptors, base.descriptors),
            connections=pick(table.max_connections, base.connections),
            segments=pick(table.max_segments, base.segments),
            queued_bytes=pick(table.max_queued_bytes, base.queued_bytes),
            frame_bytes=min(pick(table.max_frame_bytes, frame_bytes), frame_bytes),
            tenant=TenantLimits(
                descriptors=pick(table.tenant_max_descriptors, tenant.descriptors),
                connections=pick(table.tenant_max_connections, tenant.connections),
                segments=pick(table.tenant_max_segments, tenant.segments),
                queued_bytes=pick(table.tenant_max_queued_bytes, tenant.queued_bytes),
                frame_bytes=pick(table.tenant_max_frame_bytes, tenant.frame_bytes),
            ),
            connection_segments=pick(table.connection_max_segments, base.connection_segments),
            connection_queued_bytes=pick(
                table.connection_max_queued_bytes, base.connection_queued_bytes
            ),
        )

    @property
    def trusted_keys(self) -> tuple[str, ...]:
        """The key files of ``trusted_keys`` (absolute paths; empty: none)."""
        return () if self.file is None else self.file.trusted_keys

    @property
    def tenant_hold_ms(self) -> float | None:
        """The policy's ``tenant_hold_ms`` (None: absent, the hold is derived)."""
        return None if self.file is None else self.file.tenant_hold_ms

    @property
    def tenants(self) -> Sequence[TenantRule]:
        """The tenant rules, in file order."""
        return () if self.file is None else self.file.tenants

    def identify(self, peer: PeerCredentials) -> Identity | None:
        """The identity of ``peer``; None when the policy refuses it."""
        uid, gid, pid = peer.uid, peer.gid, peer.pid
        if self.file is None:
            if peer.uid != self.daemon_uid:
                return None
            return Identity(user_name(uid), False, True, uid, gid, pid)
        policy = self.file
        groups = peer.all_groups
        rule = next((t for t in policy.tenants if peer.uid in t.uids), None)
        if rule is None:
            rule = next((t for t in policy.tenants if any(g in groups for g in t.groups)), None)
        admin = peer.uid in policy.admin_uids or (
            policy.admin_group is not None and policy.admin_group in groups
        )
        if rule is None:
            if not admin:
                return None
            return Identity(f"admin:{user_name(uid)}", False, True, uid, gid, pid)
        return self._tenant(rule, admin, uid, gid, pid)

    def identify_cert(self, cn: str | None) -> Identity | None:
        """The identity of a TLS peer whose verified client certificate has subject CN
        ``cn``: the tenant whose ``cert_cn`` it is (an admin too when ``admin_cns`` names
        it), else ``admin:<cn>`` when ``admin_cns`` names it; None when the policy refuses it
        (no CN, no policy file, or a CN it maps to nothing). Uid, gid and pid are -1."""
        if cn is None or self.file is None:
            return None
        policy = self.file
        admin = cn in policy.admin_cns
        rule = next((t for t in policy.tenants if t.cert_cn == cn), None)
        if rule is None:
            if not admin:
                return None
            return Identity(f"admin:{cn}", False, True, -1, -1, -1, cert_cn=cn)
        return self._tenant(rule, admin, -1, -1, -1, cn)

    @staticmethod
    def _tenant(
        rule: TenantRule, admin: bool, uid: int, gid: int, pid: int, cn: str | None = None
    ) -> Identity:
        return Identity(
            rule.name,
            True,
            admin or rule.admin,
            uid,
            gid,
            pid,
            services=rule.services,
            calls_per_s=rule.calls_per_s,
            max_services=rule.max_services,
            max_regions=rule.max_regions,
            max_descriptors=rule.max_descriptors,
            max_connections=rule.max_connections,
            max_segments=rule.max_segments,
            max_queued_bytes=rule.max_queued_bytes,
            max_frame_bytes=rule.max_frame_bytes,
            share_state=rule.share_state,
            cert_cn=cn,
        )
