"""Fault supervision: a faulty core is contained off the failing call's thread, and recovered.

A hardware call that hangs, raises or returns a wrong result is served again by software on
the caller's own thread (:mod:`juggle.runtime.hardware`); the core is quarantined there and
reported to the :class:`FaultSupervisor` (the service's fault sink). Like a lifeguard who
takes the swimmer out and then closes the lane, the supervisor's thread moves the service to
its software tier (or keeps a hardware-only one waiting), marks the region ERROR and tells the
arbiter, all under the juggle lock. :meth:`FaultSupervisor.recover` opens the lane again.
Every contained fault is noted in the :class:`FaultLog`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Iterable
from typing import Any, Protocol

from juggle.errors import FabricError, JuggleError, SanityCheckError
from juggle.fabric.fabric import Fabric
from juggle.runtime.hardware import HardwareCore
from juggle.runtime.lifecycle import Lifecycle
from juggle.runtime.options import BOUNDED_LOG, FrameworkOptions
from juggle.runtime.services import ManagedService
from juggle.runtime.snapshots import JuggleReport
from juggle.runtime.table import ServiceTable

__all__ = ["FaultLog", "FaultSupervisor", "Juggling", "RegionBook"]

log = logging.getLogger("juggle")


class FaultLog:
    """The newest contained hardware faults (``entries``, at most ``capacity``), each
    ``"<region>: service <id>: <reason>"``."""

    __slots__ = ("entries",)

    def __init__(self, capacity: int = BOUNDED_LOG) -> None:
        self.entries: deque[str] = deque(maxlen=capacity)

    def note(self, region: str, service_id: int, reason: str) -> None:
        """Log a contained fault of ``service_id`` in ``region``."""
        self.entries.append(f"{region}: service {service_id}: {reason}")

    def __repr__(self) -> str:
        return f"<FaultLog {len(self.entries)} faults>"


class RegionBook(Protocol):
    """The tenant arbiter as supervision sees it: who holds a region, and what befell it."""

    def fault(self, region: str) -> None:
        """``region``'s core failed: it is out of use until recovered."""
        ...

    def holder(self, region: str) -> str | None:
        """Who holds ``region`` apart from juggle-placed services (None: nobody)."""
        ...

    def blank(self, region: str) -> None:
        """``region`` was emptied by the runtime: free again."""
        ...


class Juggling(Protocol):
    """Juggle execution as supervision sees it: its lock, its arbiter, the juggle itself."""

    @property
    def lock(self) -> contextlib.AbstractContextManager[Any]:
        """The juggle lock: held while services move."""
        ...

    @property
    def arbiter(self) -> RegionBook:
        """The arbiter of the fabric's regions."""
        ...

    def juggle(
        self, to_hardware: int | None = None, to_software: Iterable[int] = ()
    ) -> JuggleReport:
        """Put ``to_hardware`` into the fabric and take ``to_software`` out (undone on failure)."""
        ...


class FaultSupervisor:
    """Contains reported hardware faults on a thread of its own, and recovers regions."""

    def __init__(
        self,
        fabric: Fabric,
        options: FrameworkOptions,
        table: ServiceTable,
        juggling: Juggling,
        faults: FaultLog,
        lifecycle: Lifecycle,
    ) -> None:
        self._fabric = fabric
        self._options = options
        self._table = table
        self._juggling = juggling
        self.faults = faults
        self._life = lifecycle
        self._lock = threading.Lock()
        self._queue: deque[tuple[ManagedService, HardwareCore, str]] = deque()
        self._thread: threading.Thread | None = None

    @property
    def busy(self) -> bool:
        """Whether a reported fault is still being contained."""
        with self._lock:
            return self._thread is not None

    # -- the fault sink ----------------------------------------------------------------------

    def hardware_fault(self, service: ManagedService, core: HardwareCore, reason: str) -> None:
        """A call found ``core`` faulty (it is quarantined already): from the supervisor's
        thread, move ``service`` to its software tier and mark the region ERROR (never from
        the failing call's own thread, which is serving its consumer from software)."""
        log.warning("service %s: hardware fault in %s: %s", service.label, core.region, reason)
        with self._lock:
            self._queue.append((service, core, reason))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._supervise, name="juggle-faults", daemon=True
                )
                self._thread.start()

    def _supervise(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._thread = None
                    return
                m, core, reason = self._queue.popleft()
            try:
                self._contain(m, core, reason)
            except Exception:  # never let a fault kill the supervisor
                log.exception("containing the fault of service %s failed", m.label)

    def _contain(self, m: ManagedService, core: HardwareCore, reason: str) -> None:
        with self._juggling.lock:
            if m.core is not core or self._life.closing:
                return  # the service already left that core
            region = core.region
            self.faults.note(region, m.service_id, reason)
            if m.has_software:
                switched = m.switch(m.home_tier, twins=True)
                self._table.bank_modeled_time(m)
                m.core, m.region, m.quarantined = None, None, region
                with contextlib.suppress(JuggleError):
                    m.drain(switched, self._options.drain_timeout_s)
            else:
                m.quarantined = region
            with contextlib.suppress(FabricError):
                self._fabric.quarantine(region, f"service {m.service_id}: {reason}")
            self._juggling.arbiter.fault(region)

    def close(self) -> None:
        """Drop the faults not yet contained (closing: their services are gone) and wait for
        the supervisor's thread to end."""
        with self._lock:
            self._queue.clear()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self._options.drain_timeout_s)

    # -- recovery ----------------------------------------------------------------------------

    def recover(self, region: str) -> JuggleReport | None:
        """Clear ``region`` (empty it) and put back the service whose core failed there, if
        it still runs; returns that juggle's report (None: nothing to put back).

        Raises :class:`~juggle.errors.UnknownRegionError`, :class:`SanityCheckError` (a
        service serves from the region, or a tenant's device holds it), the fabric's error
        when the region cannot be emptied (nothing changed then) and what a juggle raises.
        """
        with self._juggling.lock:
            self._fabric.region(region)  # raises UnknownRegionError, naming the regions
            for m in self._table.all():
                if m.region == region and m.quarantined != region:
                    raise SanityCheckError(
                        f"region {region!r} serves service {m.label}: "
                        f"take it out first (juggle(to_software=[{m.service_id}]))",
                        service_id=m.service_id,
                        region=region,
                    )
            arbiter = self._juggling.arbiter
            holder = arbiter.holder(region)
            if holder is not None:
                raise SanityCheckError(
                    f"region {region!r} is held by {holder}: it is not the runtime's to recover",
                    region=region,
                )
            self._fabric.unload(region)
            waiting = [m for m in self._table.all() if m.quarantined == region]
            for m in waiting:
                if m.core is not None and m.region == region:  # hardware-only: still bound
                    m.core, m.region = None, None
                    m.devices.clear()
                m.quarantined = None
            arbiter.blank(region)
            if not waiting:
                return None
            return self._juggling.juggle(to_hardware=waiting[0].service_id)

    def __repr__(self) -> str:
        with self._lock:
            queued = len(self._queue)
        return f"<FaultSupervisor {queued} queued, {len(self.faults.entries)} faults logged>"
