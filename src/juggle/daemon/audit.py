"""The daemon's audit lines: one log line per admin action, preemption and quarantine.

Every line starts with ``audit:`` and goes to the ``juggle.daemon.audit`` logger at WARNING (it
shows at the daemon's default log level and at ``--log-level WARNING``), so
``grep 'audit:' daemon.log`` lists who did what to the fabric, and when:

- an admin action (install, uninstall, juggle, set_tier, reload_policy, recover), done or
  refused, exactly one line per request (:func:`action`)::

    audit: 'ops' (uid 0, pid 4242, connection 3) asked to install '/srv/tdes' at
    2026-11-27T14:39:34Z: done: module 'tdes' (id 1)

- a preemption: the arbiter took a region from a tenant's device for a tenant of higher
  priority (:func:`preemption`, from the tenant's PREEMPT signal);
- a quarantine: a core failed a call and its region is out of use until ``recover``
  (:func:`quarantine`, from the runtime's fault report; :class:`QuarantineWatch`).

The time in the line is UTC (the log line's own time prefix is local).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from juggle.daemon.policy import Identity

__all__ = [
    "AUDIT_LOGGER",
    "FAULT_MESSAGE",
    "QuarantineWatch",
    "action",
    "preemption",
    "quarantine",
    "utc_now",
]

#: The logger audit lines go to.
AUDIT_LOGGER = "juggle.daemon.audit"
#: The runtime's report of a contained hardware fault (``juggle`` logger, by the fault
#: supervisor): ``service <label>: hardware fault in <region>: <reason>``.
FAULT_MESSAGE = "service %s: hardware fault in %s: %s"

log = logging.getLogger(AUDIT_LOGGER)


def utc_now() -> str:
    """The time now, UTC, to the second: ``2026-11-27T14:39:34Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def who(identity: Identity, conn_id: int) -> str:
    """The peer of an audit line: tenant name, uid, pid (or the TLS certificate's CN) and the
    connection."""
    if identity.cert_cn is not None:
        return f"{identity.name!r} (TLS CN {identity.cert_cn!r}, connection {conn_id})"
    return f"{identity.name!r} (uid {identity.uid}, pid {identity.pid}, connection {conn_id})"


def action(
    identity: Identity,
    conn_id: int,
    what: str,
    when: str,
    *,
    done: str | None = None,
    refused: BaseException | None = None,
) -> None:
    """Log the audit line of one admin request: ``who`` asked to ``what`` at ``when``, and
    ``done: <result>`` or ``refused: <error type>: <error>``."""
    if refused is not None:
        result = f"refused: {type(refused).__name__}: {refused}"
    else:
        result = f"done: {done}"
    log.warning("audit: %s asked to %s at %s: %s", who(identity, conn_id), what, when, result)


def preemption(tenant: str, device: str, service_id: int | None) -> None:
    """Log the audit line of a preemption: ``tenant``'s ``device`` lost its region to a
    request of higher priority."""
    log.warning(
        "audit: the arbiter preempted tenant %r (device %s, service %s) at %s: its region "
        "went to a request of higher priority",
        tenant,
        device,
        service_id,
        utc_now(),
    )


def quarantine(service: str, region: str, reason: str) -> None:
    """Log the audit line of a quarantine: ``region``'s core failed a call of ``service``."""
    log.warning(
        "audit: the runtime quarantined region %r at %s: a call of service %s failed there "
        "(%s); out of use until recovered",
        region,
        utc_now(),
        service,
        reason,
    )


class QuarantineWatch(logging.Handler):
    """Turns the runtime's report of a contained hardware fault (:data:`FAULT_MESSAGE` on the
    ``juggle`` logger) into a quarantine audit line; every other record passes unseen.
    :meth:`attach` adds it to the ``juggle`` logger, :meth:`detach` removes it."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self._logger = logging.getLogger("juggle")

    def emit(self, record: logging.LogRecord) -> None:
        """Audit ``record`` if it is a fault report of the runtime's own logger."""
        if record.name != "juggle" or record.msg != FAULT_MESSAGE:
            return
        args: Any = record.args
        if isinstance(args, tuple) and len(args) == 3:
            service, region, reason = args
            quarantine(str(service), str(region), str(reason))

    def attach(self) -> None:
        """Watch the ``juggle`` logger from now on (its level lowered to WARNING if it was
        above, so the fault reports reach this handler)."""
        logger = self._logger
        if logger.getEffectiveLevel() > logging.WARNING:
            logger.setLevel(logging.WARNING)
        logger.addHandler(self)

    def detach(self) -> None:
        """Stop watching."""
        self._logger.removeHandler(self)
