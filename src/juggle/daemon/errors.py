"""Errors of the juggle daemon and its clients (most live in :mod:`juggle.errors`).

The client re-raises an error the daemon sends back as the class of the same name in
:mod:`juggle.errors`, else in this module.
"""

from __future__ import annotations

from juggle.errors import (
    AccessDeniedError,
    ConfigurationError,
    DaemonError,
    DaemonShuttingDownError,
    DaemonUnavailableError,
    PolicyError,
    ProtocolError,
    QuotaExceededError,
    RemoteError,
)

__all__ = [
    "AccessDeniedError",
    "DaemonError",
    "DaemonIdentityError",
    "DaemonShuttingDownError",
    "DaemonUnavailableError",
    "DashboardError",
    "LimitExceededError",
    "PolicyError",
    "ProtocolError",
    "QuotaExceededError",
    "RegionQuotaExceededError",
    "RemoteError",
    "SpinLimitError",
    "UnsafePathError",
]


class RegionQuotaExceededError(QuotaExceededError):
    """A call would make a tenant hold (or wait for) more fabric regions at once than its
    ``max_regions`` quota; ``subject``: the tenant. Releasing a proxy of an arbitrated service
    (``unget_service``) frees its region."""


class DashboardError(DaemonError, ConfigurationError):
    """The daemon's dashboard cannot be served: a bad ``--dashboard`` address, a port it
    cannot bind, or an admin token file that is unsafe or unreadable; ``subject``: the value
    or path."""


class SpinLimitError(DaemonError, ConfigurationError):
    """A spin bound (``spin_us`` of the client, ``--spin-us`` of the daemon) that is not a
    number of microseconds in 0..1000; ``subject``: the value."""


class UnsafePathError(DaemonError, ConfigurationError):
    """A file or folder the daemon would trust is not safe to trust: owned by another uid,
    writable by its group or others, a symbolic link, not a regular file (a FIFO, a device),
    hard-linked elsewhere, or larger than its bound; ``subject``: the path. Nothing was
    read from it or written to it."""


class DaemonIdentityError(DaemonError, PermissionError):
    """The process listening on the socket is not the expected daemon: its uid
    (``SO_PEERCRED``) is not the one the client expects (root or the socket folder's owner by
    default, else ``daemon_uid`` / ``$JUGGLE_DAEMON_UID`` / ``--daemon-uid``); nothing was
    sent to it. ``subject``: the socket path."""


class LimitExceededError(QuotaExceededError):
    """A request would take a tenant, or the daemon as a whole, past one of the policy's
    ``[limits]`` (descriptors, connections, shared-memory segments, queued reply bytes, frame
    size): the request is refused (a connection over the limit gets this error and is
    closed) and nothing else changes. ``subject``: ``(limit name, value)``."""
