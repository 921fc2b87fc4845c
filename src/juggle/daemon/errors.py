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
    "DaemonShuttingDownError",
    "DaemonUnavailableError",
    "DashboardError",
    "PolicyError",
    "ProtocolError",
    "QuotaExceededError",
    "RegionQuotaExceededError",
    "RemoteError",
    "SpinLimitError",
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
