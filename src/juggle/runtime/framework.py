"""The Framework: the one object an application creates, a facade over the runtime's parts.

A :class:`Framework` installs modules, hands consumers proxies, traces every call, and moves
services between tiers with :meth:`Framework.juggle`, the Juggle paper's one imperative
primitive (any failing step rolls back; the service keeps serving from where it was). Each
public method hands its work to the one part whose job it is, like a hotel's front desk:

* :class:`~juggle.runtime.installer.Installer`: modules in, started, stopped, updated, out;
* :class:`~juggle.runtime.table.ServiceTable`: services, proxies, snapshots and statistics;
* :class:`~juggle.runtime.juggler.Juggler`: juggles, tiers, the history, and the tenant arbiter;
* :class:`~juggle.runtime.supervisor.FaultSupervisor`: faulty cores contained, regions recovered;
* :class:`~juggle.runtime.control.ControlLoop`: the controller and its loop.

The parts reach each other only through the small seams they declare; none holds the Framework.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from juggle.core.controllers.base import Controller, StatsSnapshot
from juggle.core.tiers import Tier
from juggle.errors import ServiceUnavailableError
from juggle.fabric.fabric import Fabric
from juggle.limits import DEFAULT_LIMITS, Limits
from juggle.runtime.control import ControlLoop
from juggle.runtime.hardware import (
    DEFAULT_CALL_TIMEOUT_S,
    DEFAULT_VERIFY_SAMPLE,
    DEFAULT_VERIFY_WARMUP,
)
from juggle.runtime.installer import Installer
from juggle.runtime.interfaces import InterfaceCatalog
from juggle.runtime.juggler import Juggler
from juggle.runtime.lifecycle import Lifecycle
from juggle.runtime.modules import Module, ModuleSnapshot
from juggle.runtime.options import DEFAULT_HISTORY_CAPACITY, FrameworkOptions
from juggle.runtime.proxy import ServiceProxy
from juggle.runtime.registry import Registry
from juggle.runtime.services import ServiceHost
from juggle.runtime.signals import SignalChannel, TenantSnapshot
from juggle.runtime.snapshots import (
    JuggleReport,
    ProxyInfo,
    RegionSnapshot,
    ServiceSnapshot,
    ServiceStatistics,
)
from juggle.runtime.supervisor import FaultLog, FaultSupervisor
from juggle.runtime.table import ServiceTable

__all__ = ["Framework"]


class Framework:
    """The juggle runtime: modules, registry, proxies, fabric and controllers.

    ``fabric`` is a board profile name or path (default: the embedded ``xupv2p`` simulated
    board) or an already opened :class:`~juggle.fabric.fabric.Fabric`; ``backend`` and
    ``backend_options`` open it (``backend="linux"``, ``backend_options={"root": ...}``: see
    :func:`~juggle.fabric.fabric.open_fabric`). ``hardware="rtl"``
    runs every hardware call on the cores' Verilog in a cycle-accurate simulator instead of
    their Python register models: a module's own Verilog (its ``hdl/<design>/*.v``, or what
    its ``[services.hardware.rtl]`` names) or juggle's; a design with neither keeps its model,
    which install logs as a warning and :meth:`statistics` shows as ``engine == "model"``, and
    which ``strict=True`` refuses at install instead. ``pace`` makes the
    simulated fabric keep wall-clock time in step with its modeled clock. ``trace_sample``
    (power of two) times one call in N once a method has made 1024 calls. The keywords
    become one frozen :class:`~juggle.runtime.options.FrameworkOptions` (:attr:`options`);
    a bad one raises :class:`~juggle.errors.ConfigurationError` naming it.

    Faults are contained: a hardware call that raises, or whose driver polls a core for
    ``call_timeout_s`` without progress, is served again by the service's software tier, the
    region is quarantined (ERROR, until :meth:`recover`) and the service moves to software.
    Wrong results are caught by default: hardware calls are also run on the software tier and
    compared, all of them during a warm-up, then one in ``verify_sample`` (see
    :class:`~juggle.runtime.options.FrameworkOptions` and docs/verification.md).
    """

    def __init__(
        self,
        fabric: str | Path | Fabric = "xupv2p",
        *,
        backend: str = "sim",
        hardware: str = "model",
        pace: bool = False,
        trace_sample: int = 8,
        drain_timeout_s: float = 30.0,
        controller: Controller | None = None,
        queue_capacity: int = 8,
        verify_sample: int = DEFAULT_VERIFY_SAMPLE,
        verify_warmup: int = DEFAULT_VERIFY_WARMUP,
        call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
        limits: Limits = DEFAULT_LIMITS,
        history_capacity: int = DEFAULT_HISTORY_CAPACITY,
        trusted_keys: Sequence[Any] | None = None,
        backend_options: Mapping[str, Any] | None = None,
        strict: bool = False,
        tenant_hold_ms: float | None = None,
    ) -> None:
        options = FrameworkOptions(
            backend=backend,
            hardware=hardware,
            pace=pace,
            trace_sample=trace_sample,
            drain_timeout_s=drain_timeout_s,
            queue_capacity=queue_capacity,
            verify_sample=verify_sample,
            verify_warmup=verify_warmup,
            call_timeout_s=call_timeout_s,
            limits=limits,
            history_capacity=history_capacity,
            trusted_keys=trusted_keys,
            backend_options=backend_options or {},
            strict=strict,
            tenant_hold_ms=tenant_hold_ms,
        )
        self.fabric = options.open_fabric(fabric)
        self._life = Lifecycle(self)
        self._table = ServiceTable(self.fabric)
        self.registry: Registry = self._table.registry  # registrations, look-ups, listeners
        self.interfaces: InterfaceCatalog = self._table.interfaces
        log = FaultLog()
        self._juggler = Juggler(self.fabric, options, self._table, log, self._life)
        self._supervisor = FaultSupervisor(
            self.fabric, options, self._table, self._juggler, log, self._life
        )
        self._arbiter = self._juggler.arbiter  # the tenants' pass-throughs go to it
        self._host = ServiceHost(options, self._supervisor, self._arbiter)
        self._installer = Installer(
            self.fabric, options, self._table, self._juggler, self._host, self._life
        )
        self._control = ControlLoop(
            self.fabric, options, self._table, self._juggler.juggle, controller
        )
        #: the newest contained hardware faults and controller failures (bounded logs)
        self.faults: deque[str] = log.entries
        self.controller_errors: deque[str] = self._control.controller_errors

    # -- options -----------------------------------------------------------------------------

    @property
    def options(self) -> FrameworkOptions:
        """The options this framework runs with (frozen; see :attr:`verify_sample`)."""
        return self._host.options

    @property
    def verify_sample(self) -> int:
        """One hardware call in N is checked against software after a warm-up (0: none).
        Assignable on a running framework: the next calls follow the new rate. Raises
        :class:`~juggle.errors.ConfigurationError` for a value that is no int >= 0."""
        return self._host.options.verify_sample

    @verify_sample.setter
    def verify_sample(self, value: int) -> None:
        self._host.options = self._host.options.replace(verify_sample=value)

    @property
    def verify_warmup(self) -> int:
        """Calls checked in full on a core just programmed or recovered."""
        return self._host.options.verify_warmup

    @property
    def trace_sample(self) -> int:
        """One call in N is timed once a method has made 1024 calls."""
        return self._host.options.trace_sample

    # -- modules -----------------------------------------------------------------------------

    def install(self, path: str | Path) -> Module:
        """Install the module at ``path`` (folder, ``.zip``, ``juggle.toml`` or co-module XML).

        Everything is checked before the module exists: descriptor, interfaces and classes,
        bitstreams (present, parse, part, region, size) and resources against the fabric (a
        design's synthesized figures, from the module's ``resources.json``, where it has RTL;
        else its declared ones). On a fabric that runs RTL, the module's own Verilog of each
        design is registered in the fabric's RTL catalog until the module is uninstalled (its
        simulator is built, or found in the build cache, when a region is programmed with it).
        Raises :class:`~juggle.errors.ModuleError`, :class:`~juggle.errors.DescriptorError`
        (and its subclasses), a :class:`~juggle.errors.BitstreamError` /
        :class:`~juggle.errors.ResourceError`, and under ``strict``
        :class:`~juggle.errors.ConfigurationError` naming a design that has no RTL.
        """
        self._life.check_open()
        return self._installer.install(path)

    def module(self, module_id_or_name: int | str) -> Module:
        """An installed module by id or name (:class:`~juggle.errors.UnknownModuleError` if
        none)."""
        self._life.check_open()
        return self._installer.module(module_id_or_name)

    def modules(self) -> tuple[ModuleSnapshot, ...]:
        """Snapshots of the installed modules."""
        self._life.check_open()
        return self._installer.modules()

    # -- services ----------------------------------------------------------------------------

    def register_service(
        self,
        interface: str,
        implementation: object,
        properties: Mapping[str, Any] | None = None,
        *,
        ranking: int = 0,
    ) -> int:
        """Register a plain software ``implementation`` of ``interface``; returns its id."""
        self._life.check_open()
        return self._installer.register_service(interface, implementation, properties, ranking)

    def get_service(
        self, interface: str, consumer: str = "default", filter: str | None = None
    ) -> Any:
        """A proxy of the best service for ``interface`` (full or short name) for ``consumer``.

        ``filter`` is an LDAP filter on the service properties (``"(version>=1.0)"``).
        Raises :class:`~juggle.errors.ServiceUnavailableError` when nothing matches (saying
        so when an installed module would offer ``interface`` once started).
        """
        self._life.check_open()
        try:
            return self._table.get_service(interface, consumer, filter)
        except ServiceUnavailableError as exc:
            hint = self._installer.start_hint(interface)
            if hint is None:
                raise
            raise ServiceUnavailableError(
                f"{exc}; {hint}", interface=exc.interface, service_id=exc.service_id
            ) from None

    def unget_service(self, proxy: ServiceProxy) -> bool:
        """Give ``proxy`` back; its further calls raise
        :class:`~juggle.errors.ServiceUnavailableError`."""
        self._life.check_open()
        return self._table.unget_service(proxy)

    def proxy_info(self, proxy: ServiceProxy) -> ProxyInfo:
        """What ``proxy`` is: its service, interface and consumer, its methods (with whether
        each sets state), the identity of the state it records into (shared by every proxy
        that shares that state) and its tenant device (see :class:`ProxyInfo`).

        Raises :class:`~juggle.errors.UnknownServiceError` for an object that is no live proxy
        of this framework (a proxy given back, or of a stopped service, included).
        """
        self._life.check_open()
        return self._table.proxy_info(proxy, self._arbiter.device_of)

    def services(self) -> tuple[ServiceSnapshot, ...]:
        """Snapshots of every managed service, by id."""
        self._life.check_open()
        return self._table.services()

    def regions(self) -> tuple[RegionSnapshot, ...]:
        """Snapshots of the fabric's regions with the service and module each holds."""
        self._life.check_open()
        return self._table.regions()

    def statistics(self, service_id: int, consumer: str | None = None) -> ServiceStatistics:
        """Measured call statistics of ``service_id`` (per tier, consumer and method).

        With ``consumer``: the figures of that consumer's calls through the proxy it holds
        now, its rate measured per consumer and service (zero, and no ``per_consumer`` entry,
        when it holds none); the service's hardware figures (modeled time, fallbacks,
        verification) stay the service's. Raises :class:`~juggle.errors.UnknownServiceError`.
        """
        self._life.check_open()
        return self._table.statistics(service_id, consumer)

    # -- the juggle primitive ----------------------------------------------------------------

    def juggle(
        self, to_hardware: int | None = None, to_software: Iterable[int] = ()
    ) -> JuggleReport:
        """Put service ``to_hardware`` into the fabric and take ``to_software`` out of it.

        Either side may be empty. The decision core checks first (known ids, a hardware tier,
        a region that is free or freed by the leaving services, none quarantined), the fabric
        checks part/region/size/resources; then the leaving services switch to software and
        drain, their regions are released, the entering service's region is programmed, its
        driver loaded and its proxies switched. Any failing step is undone in reverse: every
        service keeps serving from where it was and the next juggle works. Raises
        :class:`~juggle.errors.UnknownServiceError`, :class:`~juggle.errors.TierUnavailableError`,
        :class:`~juggle.errors.SanityCheckError`, :class:`~juggle.errors.DrainTimeoutError`,
        or the fabric error of the step that failed.
        """
        self._life.check_open()
        return self._juggler.juggle(to_hardware, to_software)

    def set_tier(self, service_id: int, tier: str) -> JuggleReport:
        """Serve ``service_id`` from ``tier`` (``software``, ``native`` or ``hardware``); raises
        :class:`~juggle.errors.UnknownServiceError`, :class:`~juggle.errors.TierUnavailableError`
        (naming the tier) or what :meth:`juggle` raises when entering hardware."""
        self._life.check_open()
        return self._juggler.set_tier(service_id, tier)

    def history(self, limit: int | None = None) -> tuple[JuggleReport, ...]:
        """The newest juggles, oldest first: at most ``limit`` (None: all kept). The history
        is a ring of ``history_capacity`` reports (``Framework(history_capacity=...)``);
        :attr:`juggle_count` counts every juggle ever made."""
        self._life.check_open()
        return self._juggler.history(limit)

    @property
    def juggle_count(self) -> int:
        """Juggles made since the framework started (the history keeps only the newest)."""
        return self._juggler.juggle_count

    @property
    def reconfiguration_ms_total(self) -> float:
        """Modeled reconfiguration time of every juggle since the framework started."""
        return self._juggler.reconfiguration_ms_total

    # -- faults ------------------------------------------------------------------------------

    def recover(self, region: str) -> JuggleReport | None:
        """Clear ``region`` (empty it) and put back the service whose core failed there, if
        it still runs; returns that juggle's report (None: nothing to put back).

        Any region no service serves from may be recovered (quarantined, left in ERROR by a
        failed programming step, holding a design nobody serves from, or empty). Raises
        :class:`~juggle.errors.UnknownRegionError`, :class:`~juggle.errors.SanityCheckError`
        (a service serves from the region, or a tenant's device holds it), the fabric's error
        when the region cannot be emptied (:class:`~juggle.errors.RegionBusyError`,
        :class:`~juggle.errors.BridgeError`; nothing changed then) and what :meth:`juggle`
        raises.
        """
        self._life.check_open()
        return self._supervisor.recover(region)

    # -- tenants (issue 3 item 9: the Ker-ONE allocator arbitrates live calls) --------------

    def add_tenant(
        self,
        name: str,
        *,
        priority: int | None = None,
        realtime: bool = False,
        model: str = "native",
    ) -> TenantSnapshot:
        """Register tenant ``name``: the consumer whose proxies of arbitrated services get its
        own virtual devices (see :mod:`juggle.runtime.tenancy`).

        General-purpose priorities are 0..2 (default 0); ``realtime`` gives the top class,
        never preempted. ``model`` is ``"native"`` (calls block until the device is READY) or
        ``"aware"`` (calls raise :class:`~juggle.errors.WaitSignal`; READY arrives on
        :meth:`signals`). From the first tenant on, hardware-only services started are placed
        by the allocator on demand instead of at start. Nothing changes when this raises:
        :class:`~juggle.errors.InvalidConsumerError`, :class:`~juggle.errors.PriorityError`,
        :class:`~juggle.errors.ProgrammingModelError`,
        :class:`~juggle.errors.DuplicateTenantError`.
        """
        self._life.check_open()
        return self._arbiter.add_tenant(name, priority=priority, realtime=realtime, model=model)

    def set_tenant(
        self,
        name: str,
        *,
        priority: int | None = None,
        realtime: bool = False,
        model: str = "native",
    ) -> TenantSnapshot:
        """Give registered tenant ``name`` a new class, priority and programming model, taken
        as :meth:`add_tenant` takes them (a reloaded tenant policy): its waiting requests move
        in line, the regions it holds carry the new priority (a request that now outranks it
        preempts it at the next consistency point; a real-time tenant is never preempted), and
        its signals follow the new model. Nothing changes when this raises: the errors of
        :meth:`add_tenant`, and :class:`~juggle.errors.UnknownTenantError`.
        """
        self._life.check_open()
        return self._arbiter.set_tenant(name, priority=priority, realtime=realtime, model=model)

    def set_tenant_hold(self, hold_ms: float | None) -> None:
        """Change the hold a region gives the tenant that just got it (``tenant_hold_ms`` of
        the constructor; a reloaded tenant policy): holds granted or renewed from now on last
        ``hold_ms`` milliseconds (0: off; None: derived, twice the modeled reconfiguration
        time of the holder's bitstream); running ones end when they were due.

        Raises :class:`~juggle.errors.ConfigurationError` naming a value that is no finite
        number of ms >= 0, and :class:`~juggle.errors.FrameworkClosedError`; nothing changes
        then.
        """
        self._life.check_open()
        if hold_ms is not None and (
            isinstance(hold_ms, bool)
            or not isinstance(hold_ms, int | float)
            or not 0 <= hold_ms < float("inf")
        ):
            from juggle.errors import ConfigurationError

            raise ConfigurationError(
                f'"hold_ms" must be None or a finite number of ms >= 0, got {hold_ms!r:.80}',
                value=hold_ms if isinstance(hold_ms, int | float | str) else None,
            )
        self._arbiter.set_hysteresis(None if hold_ms is None else hold_ms * 1000.0)

    def tenants(self) -> tuple[TenantSnapshot, ...]:
        """Snapshots of the tenants (priority, model, each virtual device's state and region)."""
        self._life.check_open()
        return self._arbiter.tenants()

    def signals(self, tenant: str) -> SignalChannel:
        """``tenant``'s channel of WAIT / READY / PREEMPT signals.

        Raises :class:`~juggle.errors.UnknownTenantError`.
        """
        self._life.check_open()
        return self._arbiter.signals(tenant)

    # -- controllers -------------------------------------------------------------------------

    @property
    def controller(self) -> Controller | None:
        """The controller :meth:`control` runs (None: control is off)."""
        return self._control.controller

    @property
    def foreground(self) -> str | None:
        """The application in focus (None: unknown)."""
        return self._control.foreground

    def set_foreground(
        self, app: str | None, errors: list[str] | None = None
    ) -> list[JuggleReport]:
        """Tell the runtime which application has the focus; runs the controller once
        (its failed juggles are appended to ``errors``, as :meth:`control`)."""
        self._life.check_open()
        return self._control.set_foreground(app, errors)

    def set_controller(self, controller: Controller | None) -> None:
        """Use ``controller`` (a policy) for :meth:`control`; None turns control off."""
        self._life.check_open()
        self._control.set_controller(controller)

    def snapshot(self) -> StatsSnapshot:
        """What a controller reads: per-service statistics, regions, the foreground app.

        Live, a service's "queue" is the calls inside it right now (its callers waiting for
        it): ``queue_length`` is that count and ``queue_occupancy`` its share of
        ``queue_capacity``. ``gain_us`` is the measured mean duration in software minus that
        in hardware once both tiers have served calls (None before).
        """
        self._life.check_open()
        return self._control.snapshot()

    def control(self, errors: list[str] | None = None) -> list[JuggleReport]:
        """Run the controller once on a fresh snapshot and carry out its juggles; a juggle
        that fails is logged, kept in :attr:`controller_errors` and appended to ``errors``."""
        self._life.check_open()
        return self._control.control(errors)

    def start_control_loop(self, interval_s: float = 0.1) -> None:
        """Run :meth:`control` every ``interval_s`` seconds in a background thread."""
        self._life.check_open()
        self._control.start(interval_s)

    def stop_control_loop(self) -> None:
        """Stop the background control loop, if any."""
        self._control.stop()

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the control loop, the tenants' manager and the fault supervisor, stop and
        uninstall every module (the fabric is left empty) and release the fabric. Afterwards
        every method raises :class:`~juggle.errors.FrameworkClosedError`; closing again does
        nothing."""
        if not self._life.begin_close():
            return
        try:
            self._control.stop()
            self._arbiter.close()  # waiting tenant calls end
            self._installer.close()
            self._supervisor.close()
            self._juggler.forget_history()
            self.fabric.close()
        finally:
            self._life.closed = True

    def __enter__(self) -> Framework:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        services, modules = self._table.services(), self._installer.modules()
        in_hw = sum(1 for s in services if s.tier == Tier.HARDWARE)
        board, counts = self.fabric.profile.board.name, f"{len(modules)} modules, {len(services)}"
        return f"<Framework {board}: {counts} services, {in_hw} in hardware>"
