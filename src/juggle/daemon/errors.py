"""Errors of the juggle daemon and its clients (they live in :mod:`juggle.errors`).

The client re-raises an error the daemon sends back as the class of the same name in
:mod:`juggle.errors`.
"""

from __future__ import annotations

from juggle.errors import (
    AccessDeniedError,
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
    "PolicyError",
    "ProtocolError",
    "QuotaExceededError",
    "RemoteError",
]
