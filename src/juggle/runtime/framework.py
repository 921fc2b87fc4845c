"""The Framework: modules, registry, proxies, the fabric and the juggle primitive in one place.

A :class:`Framework` is what an application creates (``juggle.Framework(fabric="xupv2p")``).
It installs modules, lets their extender register services behind proxies, hands consumers
proxies (``get_service``), traces every call, and moves services between tiers with
:meth:`Framework.juggle` — the single imperative primitive of the Juggle paper: sanity checks
first, then bridge closed → bitstream written → bridge opened → driver loaded → proxy switched;
any failure rolls back and the service keeps serving from where it was.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from juggle.build import read_report
from juggle.core.controllers.base import (
    Controller,
    JuggleAction,
    RegionStats,
    ServiceStats,
    StatsSnapshot,
)
from juggle.core.placement import JugglePlan
from juggle.errors import (
    ConfigurationError,
    ControllerError,
    DescriptorError,
    DuplicateModuleError,
    FabricError,
    FrameworkClosedError,
    JuggleError,
    ModuleError,
    ModuleStateError,
    SanityCheckError,
    ServiceUnavailableError,
    TierUnavailableError,
    UnknownInterfaceError,
    UnknownModuleError,
    UnknownServiceError,
)
from juggle.fabric.fabric import Fabric, open_fabric
from juggle.fabric.resources import Resources
from juggle.limits import DEFAULT_LIMITS, Limits
from juggle.runtime.descriptors import Descriptor, ServiceSpec
from juggle.runtime.hardware import (
    DEFAULT_CALL_TIMEOUT_S,
    DEFAULT_VERIFY_SAMPLE,
    DEFAULT_VERIFY_WARMUP,
    HardwareCore,
)
from juggle.runtime.integrity import (
    load_public_keys,
)
from juggle.runtime.interfaces import InterfaceCatalog, interface_methods, short_name
from juggle.runtime.juggler import Juggler, JuggleStep
from juggle.runtime.modules import (
    CodeNamespace,
    Module,
    ModuleSource,
    ModuleState,
    check_constructor,
)
from juggle.runtime.proxy import TIERS, ServiceProxy, binding_of
from juggle.runtime.registry import Registry
from juggle.runtime.services import Hardware, ManagedService, ProxyFactory
from juggle.runtime.tenancy import SignalChannel, TenantArbiter, TenantSnapshot
from juggle.runtime.tracing import Accumulator, CallStats, merge, ns_per_tick

log = logging.getLogger("juggle")

SOFT_TIERS: tuple[str, ...] = ("software", "native")

#: what executes hardware calls on a simulated board: the cores' Python register models, or
#: their Verilog in a cycle-accurate simulator (the ``rtl`` backend)
HARDWARE_KINDS = ("model", "rtl")

#: juggle reports kept by default (``Framework(history_capacity=...)``)
DEFAULT_HISTORY_CAPACITY = 1_000
#: entries kept of each diagnostic log (controller errors, contained faults)
BOUNDED_LOG = 100


def _positive_int(name: str, value: object, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f'"{name}" must be an int >= {minimum}, got {value!r:.80}', value)


def _positive_number(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigurationError(f'"{name}" must be a number > 0, got {value!r:.80}', value)


# -- snapshots -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServiceSnapshot:
    """Frozen view of one managed service."""

    service_id: int
    interface: str
    interfaces: tuple[str, ...]
    properties: Mapping[str, Any]
    tier: str
    region: str | None
    tiers: tuple[str, ...]
    module: str | None
    consumers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RegionSnapshot:
    """Frozen view of one fabric region as the runtime sees it."""

    name: str
    state: str
    module: str | None
    service_id: int | None
    design: str | None
    resources: Resources


@dataclass(frozen=True, slots=True)
class ServiceStatistics:
    """Measured call statistics of a service: overall, per tier, per consumer, per method."""

    service_id: int
    interface: str
    tier: str
    total: CallStats
    rate_per_s: float
    per_tier: Mapping[str, CallStats]
    per_consumer: Mapping[str, CallStats]
    per_method: Mapping[str, CallStats]
    inflight: int
    hardware_modeled_mean_us: float | None = None
    """On a simulated fabric: the modeled bus time per hardware call (None elsewhere)."""
    fallbacks: int = 0
    """Hardware calls that failed (hung, raised, or mismatched) and were served by software."""
    verified: int = 0
    """Hardware calls also run on the software tier and compared (``verify_sample``)."""
    mismatches: int = 0
    """Verified calls whose hardware result differed (the consumer got the software one)."""


@dataclass(frozen=True, slots=True)
class JuggleReport:
    """What one juggle did. ``*_ms`` figures are modeled (fabric clock); ``overhead_us`` is
    measured: the wall clock of this machine spent in the runtime's own work, that is the
    juggle's time less the waits for running calls to drain and less the configuration port's
    transfer of the bitstream (on the simulated fabric, the work of modeling it)."""

    to_hardware: int | None
    to_software: tuple[int, ...]
    region: str | None
    steps: tuple[str, ...]
    reconfiguration_ms: float
    bridge_ms: float
    overhead_us: float
    tiers: Mapping[int, str] = field(default_factory=dict)


# -- the framework ---------------------------------------------------------------------------


class Framework:
    """The juggle runtime: modules, registry, proxies, fabric and controllers.

    ``fabric`` is a board profile name or path (default: the embedded ``xupv2p`` simulated
    board) or an already opened :class:`~juggle.fabric.fabric.Fabric`; ``backend`` and
    ``backend_options`` open it (``backend="linux"``, ``backend_options={"root": ...}``: see
    :func:`~juggle.fabric.fabric.open_fabric`). ``hardware="rtl"``
    runs every hardware call on the cores' Verilog in a cycle-accurate simulator instead of
    their Python register models (a design without RTL keeps its model). ``pace`` makes the
    simulated fabric keep wall-clock time in step with its modeled clock. ``trace_sample``
    (power of two) times one call in N once a method has made 1024 calls.

    Faults are contained: a hardware call that raises, or whose driver polls a core for
    ``call_timeout_s`` without progress, is served again by the service's software tier, the
    region is quarantined (ERROR, until :meth:`recover`) and the service moves to software.
    Wrong results are caught by default: hardware calls are also run on the software tier and
    compared (a mismatch is a fault). The first ``verify_warmup`` calls on a region just
    programmed or recovered are all checked, then one in 2, 4, 8 … down to one call in
    ``verify_sample`` (default 16; property ``juggle.verify`` overrides it per service;
    1 checks every call, 0 none, warm-up included). After a mismatch the service's next region
    warms up longer (twice, then four times … as long). A core turning to garbage outside a
    warm-up hands out at most ``verify_sample - 1`` wrong results (docs/verification.md).
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
    ) -> None:
        _positive_int("verify_sample", verify_sample, minimum=0)
        _positive_int("verify_warmup", verify_warmup, minimum=0)
        _positive_number("call_timeout_s", call_timeout_s)
        _positive_number("drain_timeout_s", drain_timeout_s)
        _positive_int("history_capacity", history_capacity)
        _positive_int("queue_capacity", queue_capacity)
        _positive_int("trace_sample", trace_sample)
        if trace_sample & (trace_sample - 1):
            raise ConfigurationError(
                f'"trace_sample" must be a power of two >= 1, got {trace_sample!r}', trace_sample
            )
        if not isinstance(limits, Limits):
            raise ConfigurationError(
                f'"limits" must be a juggle.limits.Limits, got {type(limits).__name__}', limits
            )
        if not isinstance(fabric, str | Path | Fabric):
            raise ConfigurationError(
                f'"fabric" must be a profile name, a path or a Fabric, got {fabric!r:.80}', fabric
            )
        self.verify_sample = verify_sample
        self.verify_warmup = verify_warmup
        self.call_timeout_s = call_timeout_s
        self.limits = limits
        self.trusted_keys: list[Any] | None = None
        if trusted_keys is not None:
            self.trusted_keys = load_public_keys(trusted_keys)
        self.queue_capacity = queue_capacity
        if hardware not in HARDWARE_KINDS:
            raise ConfigurationError(
                f'"hardware" must be one of {", ".join(HARDWARE_KINDS)}, got {hardware!r:.80}',
                hardware,
            )
        if hardware == "rtl":
            if backend != "sim":
                raise ConfigurationError(
                    f'hardware="rtl" runs on the simulated board, not backend {backend!r}',
                    backend,
                )
            backend = "rtl"
        self.fabric = (
            fabric
            if isinstance(fabric, Fabric)
            else open_fabric(fabric, backend=backend, pace=pace, **dict(backend_options or {}))
        )
        self.registry = Registry()
        self.interfaces = InterfaceCatalog()
        self.trace_sample = trace_sample
        self.drain_timeout_s = drain_timeout_s
        self._modules: dict[int, Module] = {}
        self._managed: dict[int, ManagedService] = {}
        self._module_ids = iter(range(1, 1 << 62))
        self._lock = threading.RLock()
        self._juggle_lock = threading.RLock()
        self._foreground: str | None = None
        self.controller: Controller | None = controller
        self._history: deque[JuggleReport] = deque(maxlen=history_capacity)
        self._juggle_count = 0
        self._reconfiguration_ms = 0.0
        #: the newest controller failures (bounded), and how many there were in all
        self.controller_errors: deque[str] = deque(maxlen=BOUNDED_LOG)
        self._loop: threading.Thread | None = None
        self._loop_stop = threading.Event()
        self._closed = False
        self._closing = False
        self._tenancy = TenantArbiter(self)  # the one allocator: juggles and tenants
        self._juggler = Juggler(self)
        #: the newest contained hardware faults (bounded)
        self.faults: deque[str] = deque(maxlen=BOUNDED_LOG)
        self._fault_lock = threading.Lock()
        self._fault_queue: deque[tuple[ManagedService, HardwareCore, str]] = deque()
        self._supervisor: threading.Thread | None = None

    # -- modules -----------------------------------------------------------------------------

    def install(self, path: str | Path) -> Module:
        """Install the module at ``path`` (folder, ``.zip``, ``juggle.toml`` or co-module XML).

        Everything is checked before the module exists: descriptor, interfaces and classes,
        bitstreams (present, parse, part, region, size) and resources against the fabric.
        Raises :class:`ModuleError`, :class:`DescriptorError` (and its subclasses) or a
        :class:`~juggle.errors.BitstreamError` / :class:`~juggle.errors.ResourceError`.
        """
        self._check_open()
        source, descriptor = self._open_module(path)
        self._refuse_duplicate(source, descriptor)
        namespace, resolved = self._load_code(source, descriptor)
        with self._lock:
            try:
                self._refuse_duplicate(source, descriptor)  # installed meanwhile
            except ModuleError:
                namespace.unload()
                raise
            module = Module(self, next(self._module_ids), source, descriptor, namespace, resolved)
            self._modules[module.module_id] = module
        return module

    def _open_module(self, path: str | Path) -> tuple[ModuleSource, Descriptor]:
        """Open, authenticate and parse the module at ``path`` and verify its pinned files,
        before any of its code runs (:meth:`ModuleSource.authenticate`, with
        ``trusted_keys``)."""
        source = ModuleSource.open(path, self.limits)
        descriptor, _ = source.authenticate(self.trusted_keys)
        return source, descriptor

    def _refuse_duplicate(self, source: ModuleSource, descriptor: Descriptor) -> None:
        info = descriptor.module
        for module in self._modules.values():
            if module.source.location == source.location or (
                module.name == info.name and module.version == info.version
            ):
                raise DuplicateModuleError(
                    f"module {info.name!r} {info.version} from {str(source.location)!r} is "
                    f"installed already (id {module.module_id}, from "
                    f"{str(module.source.location)!r}); uninstall or update it",
                    module.module_id,
                )

    def _load_code(
        self, source: ModuleSource, descriptor: Descriptor, replacing: str | None = None
    ) -> tuple[CodeNamespace, list[dict[str, Any]]]:
        """Import the module's code in its own namespace and resolve every service in it;
        on any error the namespace is unloaded again."""
        namespace = CodeNamespace(source, descriptor.module.name)
        namespace.replacing = replacing
        try:
            return namespace, [self._resolve(s, source, namespace) for s in descriptor.services]
        except BaseException:
            self.fabric.models.release(namespace.package)
            namespace.unload()
            raise

    def _resolve(
        self, spec: ServiceSpec, source: ModuleSource, namespace: CodeNamespace
    ) -> dict[str, Any]:
        interfaces: list[type] = []
        for name in spec.interfaces:
            try:
                found = namespace.resolve(name, "interface")
            except DescriptorError:
                found = None
            if not isinstance(found, type):
                try:
                    found = self.interfaces.resolve(name)
                except UnknownInterfaceError:
                    raise UnknownInterfaceError(
                        f"{source.display(source.descriptor)}: unknown service interface "
                        f"{name!r} (not in the module, not a known interface)",
                        subject=name,
                    ) from None
            interfaces.append(found)
        classes: dict[str, type] = {}
        for tier in SOFT_TIERS:
            impl = getattr(spec, tier)
            if impl is not None:
                cls = namespace.resolve(impl.class_, f"{tier} class")
                classes[tier] = self._check_class(cls, impl.class_, interfaces[0], args=0)
        hardware = None
        if spec.hardware is not None:
            hardware = self._resolve_hardware(spec, source, namespace, interfaces[0])
        return {"spec": spec, "interface": interfaces[0], "classes": classes, "hardware": hardware}

    @staticmethod
    def _check_class(cls: object, name: str, interface: type, *, args: int = -1) -> type:
        """``cls`` is a class with ``interface``'s methods whose constructor takes ``args``
        positional arguments (-1: not checked; an implementation takes 0, a driver its MMIO
        window)."""
        if not isinstance(cls, type):
            raise DescriptorError(f"{name!r} is not a class", subject=name)
        if args >= 0:
            check_constructor(cls, name, args)
        missing = [m.name for m in interface_methods(interface) if not hasattr(cls, m.name)]
        if missing:
            raise DescriptorError(
                f"class {name!r} lacks method(s) {', '.join(missing)} of {interface.__name__}",
                subject=name,
            )
        return cls

    def _resolve_hardware(
        self, spec: ServiceSpec, source: ModuleSource, ns: CodeNamespace, interface: type
    ) -> Hardware:
        hw = spec.hardware
        assert hw is not None
        driver = self._check_class(ns.resolve(hw.driver, "driver"), hw.driver, interface, args=1)
        model = ns.resolve(hw.model, "model") if hw.model else None
        loaded = source.load_bitstreams(hw.bitstreams, self.fabric.region_names())
        bitstreams = {target: (bs, data) for target, (_, bs, data) in loaded.items()}
        pinned = {
            target: source.pinned_file(relpath, source.pins[relpath])
            for target, (relpath, _, _) in loaded.items()
            if relpath in source.pins
        }
        if model is not None:
            for bitstream, _ in bitstreams.values():  # released if the install fails
                self.fabric.models.claim(
                    bitstream.design, model, ns.package, replacing=ns.replacing
                )
        resources = None
        if hw.resources is not None:
            regions = self.fabric.profile.regions  # a board's regions share one family
            family = regions[0].resources.family if regions else "xc2vp"
            resources = hw.resources.for_family(family)
        else:
            for bitstream, _ in bitstreams.values():
                declared = self._model_resources(bitstream.design)
                if declared is not None:
                    resources = declared
        synthesized = read_report(source)  # juggle module build's figures, if any
        for region, (bitstream, _) in bitstreams.items():
            synth = synthesized.get(bitstream.design)
            if synth is not None:
                if resources is not None and resources != synth:
                    log.warning(
                        "module %s: design %s declares %s, synthesis reports %s; the "
                        "synthesized figures are checked",
                        source.display(source.descriptor),
                        bitstream.design,
                        resources,
                        synth,
                    )
                self.fabric.check(bitstream, region, synth)
                resources = resources if resources is not None else synth
            self.fabric.check(bitstream, region, resources)
        return Hardware(driver, bitstreams, resources, pinned)

    def _model_resources(self, design: str) -> Resources | None:
        try:
            model = self.fabric.models.resolve(design)
        except FabricError:
            return None
        declared = getattr(model, "resources", None)
        if isinstance(declared, Mapping):
            return Resources.of({str(k): int(v) for k, v in declared.items()})
        return None

    def module(self, module_id_or_name: int | str) -> Module:
        """An installed module by id or name (:class:`UnknownModuleError` if none)."""
        self._check_open()
        with self._lock:
            for module in self._modules.values():
                if module_id_or_name in (module.module_id, module.name):
                    return module
        raise UnknownModuleError(f"no installed module {module_id_or_name!r}", module_id_or_name)

    def modules(self) -> tuple[Any, ...]:
        """Snapshots of the installed modules."""
        self._check_open()
        with self._lock:
            return tuple(m.snapshot() for m in self._modules.values())

    def _start_module(self, module: Module) -> None:
        self._check_open()
        module.state = ModuleState.STARTING
        try:
            for resolved in module.resolved:
                spec: ServiceSpec = resolved["spec"]
                managed = ManagedService(
                    self,
                    tuple(spec.interfaces),
                    resolved["interface"],
                    spec,
                    resolved["classes"],
                    resolved["hardware"],
                    module,
                    spec.properties,
                    per_consumer=spec.per_consumer,
                )
                self._register(managed, ranking=spec.ranking, module_id=module.module_id)
                module.service_ids.append(managed.service_id)
                arbitrated = self._tenancy.add_service(managed)
                if managed.home_tier == "hardware" and not arbitrated:
                    self.juggle(to_hardware=managed.service_id)
        except BaseException:
            self._unregister_module_services(module)
            module.state = ModuleState.INSTALLED
            raise
        module.state = ModuleState.ACTIVE

    def _register(self, managed: ManagedService, *, ranking: int, module_id: int | None) -> None:
        props = dict(managed.properties)
        props["juggle.tiers"] = list(managed.tiers())
        managed.registration = self.registry.register(
            list(managed.interfaces),
            ProxyFactory(managed),
            props,
            ranking=ranking,
            module_id=module_id,
        )
        with self._lock:
            self._managed[managed.service_id] = managed

    def _unregister_module_services(self, module: Module) -> None:
        """Take the module's services out of the fabric and the registry. Under the juggle
        lock: a juggle running now finishes first (a service it is placing is then taken out
        like any other), and none starts meanwhile."""
        with self._juggle_lock:
            for service_id in list(module.service_ids):
                managed = self._managed.get(service_id)
                if managed is None:
                    continue
                if managed.region is not None:  # placed (or quarantined in place): take out
                    self._take_out(managed)
                if managed.registration is not None and managed.registration.registered:
                    managed.registration.unregister()
                self._tenancy.forget(service_id)  # its device leaves the allocator
                with self._lock:
                    self._managed.pop(service_id, None)
            module.service_ids.clear()

    def _take_out(self, m: ManagedService) -> None:
        """Under the juggle lock: ``m``, which is stopping, leaves its region. A juggle out
        first (state carried, calls drained); if that fails (or the framework is closing), by
        force: its proxies go to software, its core is cut off (calls on it fall back to
        software), and the region is emptied (or discarded: ERROR, to be programmed afresh)
        and blank for the allocator."""
        if m.tier == "hardware" and m.quarantined is None and not self._closing:
            try:
                self.juggle(to_hardware=None, to_software=[m.service_id])
                return
            except JuggleError as exc:
                log.warning("service %s: stopping; juggle out failed: %s", m.label, exc)
        region, core = m.region, m.core
        if region is None:
            return
        if m.has_software and m.tier == "hardware":
            with contextlib.suppress(JuggleError):
                m.switch(m.home_tier, twins=True)
        if core is not None:
            core.quarantine(f"service {m.service_id} stopped")
        m.core, m.region = None, None
        m.quarantined = None
        self._juggler.settle([region])
        quarantined = self.fabric.region(region).snapshot().quarantined  # out until recovered
        if not quarantined and self._tenancy.holder(region) is None:
            self._tenancy.blank(region)

    def _stop_module(self, module: Module) -> None:
        if self._juggler.running_here():  # its services would leave in the middle of it
            raise ModuleStateError(
                f"cannot stop module {module.name!r} (id {module.module_id}) from inside a "
                "juggle (a driver or a hook that a juggle runs): stop it from another thread, "
                "which waits for the juggle to end",
                subject=module,
            )
        module.state = ModuleState.STOPPING
        try:
            self._unregister_module_services(module)
        finally:
            module.state = ModuleState.INSTALLED

    def _update_module(self, module: Module, path: str | Path | None) -> None:
        self._check_open()
        source, descriptor = self._open_module(path if path is not None else module.source.location)
        if descriptor.module.name != module.name:
            raise ModuleError(
                f"update of {module.name!r} found module {descriptor.module.name!r}",
                subject=str(source.location),
            )
        namespace, resolved = self._load_code(source, descriptor, module.namespace.package)
        old_namespace = module.namespace
        if module.state is ModuleState.ACTIVE:
            self._swap_code(module, resolved)
        module.source, module.descriptor = source, descriptor
        module.namespace, module.resolved = namespace, resolved
        self.fabric.models.release(old_namespace.package)  # what the new code no longer claims
        old_namespace.unload()

    def _swap_code(self, module: Module, resolved: list[dict[str, Any]]) -> None:
        """Point the running services of ``module`` at new classes, losslessly."""
        by_interface = {tuple(r["spec"].interfaces): r for r in resolved}
        for service_id in list(module.service_ids):
            managed = self._managed[service_id]
            new = by_interface.get(managed.interfaces)
            if new is None:
                continue
            with self._juggle_lock, managed.lock:
                managed.classes = new["classes"]
                managed.spec = new["spec"]
                managed.hardware = new["hardware"]
                if managed.tier == "hardware":
                    continue  # the loaded design keeps serving; new driver on next juggle
                tier = managed.tier if managed.tier in managed.classes else managed.home_tier
                switched = managed.switch(tier)
                managed.drain(switched, self.drain_timeout_s)

    def _uninstall_module(self, module: Module) -> None:
        if module.state is ModuleState.ACTIVE:
            self._stop_module(module)
        self.fabric.models.release(module.namespace.package)
        module.namespace.unload()
        module.state = ModuleState.UNINSTALLED
        with self._lock:
            self._modules.pop(module.module_id, None)

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
        self._check_open()
        iface = self.interfaces.resolve(interface)
        self._check_class(type(implementation), type(implementation).__name__, iface)
        managed = ManagedService(
            self,
            (interface,),
            iface,
            None,
            {},
            None,
            None,
            properties or {},
            per_consumer=False,
            instance=implementation,
        )
        self._register(managed, ranking=ranking, module_id=None)
        return managed.service_id

    def _interface_names(self, interface: str) -> list[str]:
        if "." in interface:
            return [interface]
        with self._lock:
            names = {
                full
                for m in self._managed.values()
                for full in m.interfaces
                if short_name(full) == interface
            }
        return sorted(names) or [interface]

    def get_service(
        self, interface: str, consumer: str = "default", filter: str | None = None
    ) -> Any:
        """A proxy of the best service for ``interface`` (full or short name) for ``consumer``.

        ``filter`` is an LDAP filter on the service properties (``"(version>=1.0)"``).
        Raises :class:`ServiceUnavailableError` when nothing matches.
        """
        self._check_open()
        if not isinstance(interface, str) or not interface:
            raise ServiceUnavailableError(
                f'"interface" must be a non-empty string, got {interface!r:.80}', interface
            )
        refs = [
            ref
            for name in self._interface_names(interface)
            for ref in self.registry.get_references(name, filter)
        ]
        if not refs:
            where = f" matching {filter!r}" if filter else ""
            raise ServiceUnavailableError(
                f"no service for interface {interface!r}{where}", subject=interface
            )
        best = min(refs, key=lambda r: r.sort_key)
        return self.registry.get_service(best, consumer)

    def unget_service(self, proxy: ServiceProxy) -> bool:
        """Give ``proxy`` back; its further calls raise :class:`ServiceUnavailableError`."""
        self._check_open()
        if not isinstance(proxy, ServiceProxy):
            raise UnknownServiceError(
                f'"proxy" must be a proxy from get_service, got {type(proxy).__name__} '
                f"{proxy!r:.80}",
                subject=proxy,
            )
        return self.registry.unget_service(proxy.service_id, proxy.consumer)

    def _managed_of(self, service_id: object) -> ManagedService:
        with self._lock:
            managed = (
                self._managed.get(service_id)
                if isinstance(service_id, int) and not isinstance(service_id, bool)
                else None
            )
        if managed is None:
            hint = ""
            if isinstance(service_id, ServiceProxy):
                hint = f" (a proxy was passed: use its service_id, {service_id.service_id})"
            raise UnknownServiceError(
                f"no service with id {service_id!r:.80}{hint}", subject=service_id
            )
        return managed

    def services(self) -> tuple[ServiceSnapshot, ...]:
        """Snapshots of every managed service, by id."""
        self._check_open()
        with self._lock:
            managed = sorted(self._managed.values(), key=lambda m: m.service_id)
        return tuple(self._service_snapshot(m) for m in managed)

    def _service_snapshot(self, m: ManagedService) -> ServiceSnapshot:
        assert m.registration is not None
        return ServiceSnapshot(
            service_id=m.service_id,
            interface=m.interface_name,
            interfaces=m.interfaces,
            properties=dict(m.properties),
            tier=m.tier,
            region=m.region,
            tiers=m.tiers(),
            module=m.module.name if m.module else None,
            consumers=tuple(sorted(m.proxies)),
        )

    def regions(self) -> tuple[RegionSnapshot, ...]:
        """Snapshots of the fabric's regions with the service and module each holds."""
        self._check_open()
        holders = {m.region: m for m in list(self._managed.values()) if m.region}
        out = []
        for region in self.fabric.regions():
            holder = holders.get(region.name)
            out.append(
                RegionSnapshot(
                    name=region.name,
                    state=region.state,
                    module=holder.module.name if holder and holder.module else None,
                    service_id=holder.service_id if holder else None,
                    design=region.design,
                    resources=region.resources,
                )
            )
        return tuple(out)

    def statistics(self, service_id: int) -> ServiceStatistics:
        """Measured call statistics of ``service_id`` (per tier, consumer and method)."""
        self._check_open()
        m = self._managed_of(service_id)
        with m.lock:
            traces = m.traces()
            counters = dict(m.counters)
            inflight = sum(binding_of(p).inflight() for p in m.proxies.values())
        ratio = ns_per_tick()
        per_tier: dict[str, list[Accumulator]] = {}
        per_consumer: dict[str, list[Accumulator]] = {}
        per_method: dict[str, list[Accumulator]] = {}
        for consumer, tiers in traces.items():
            for tier, methods in tiers.items():
                for name, acc in methods.items():
                    if tier != "gone":
                        per_tier.setdefault(tier, []).append(acc)
                    per_consumer.setdefault(consumer, []).append(acc)
                    per_method.setdefault(name, []).append(acc)
        total = merge(a for accs in per_consumer.values() for a in accs)
        hardware_calls = merge(per_tier.get("hardware", [])).calls
        modeled_mean = None
        if hardware_calls and self.fabric.backend in ("sim", "rtl"):
            modeled_mean = (m.hw_modeled_ns + self._busy_since_entry(m)) / 1000.0 / hardware_calls
        return ServiceStatistics(
            service_id=service_id,
            interface=m.interface_name,
            tier=m.tier,
            total=total.snapshot(ratio),
            rate_per_s=self._rate(m, total.calls),
            per_tier={t: merge(a).snapshot(ratio) for t, a in sorted(per_tier.items())},
            per_consumer={c: merge(a).snapshot(ratio) for c, a in sorted(per_consumer.items())},
            per_method={n: merge(a).snapshot(ratio) for n, a in sorted(per_method.items())},
            inflight=inflight,
            hardware_modeled_mean_us=modeled_mean,
            fallbacks=counters["fallbacks"],
            verified=counters["verified"],
            mismatches=counters["mismatches"],
        )

    def _enter_region(self, m: ManagedService, region: str) -> None:
        """``m`` now lives in ``region``; its modeled time there counts from here."""
        m.region = region
        m.hw_busy_base = self._window_busy_ns(region) or 0

    def _busy_since_entry(self, m: ManagedService) -> int:
        """Modeled bus time ``m`` has used in its current region (0: none or not simulated)."""
        if m.region is None:
            return 0
        busy = self._window_busy_ns(m.region)
        return 0 if busy is None else busy - m.hw_busy_base

    def _window_busy_ns(self, region: str) -> int | None:
        """Modeled bus time of ``region``'s window so far (None: not a simulated window)."""
        try:
            window = self.fabric.window(region)
        except FabricError:
            return None
        busy = getattr(window, "busy_ns", None)  # a simulated window counts it
        return busy if isinstance(busy, int) else None

    @staticmethod
    def _rate(m: ManagedService, calls: int, window_s: float = 1.0) -> float:
        """Calls per second over at least the last ``window_s`` (since start if younger)."""
        now = time.monotonic()
        base_t, base_calls = m.started, 0
        for t, c in m.rate_samples:
            if now - t >= window_s:
                base_t, base_calls = t, c  # the newest reading at least a window old
        m.rate_samples.append((now, calls))
        span = now - base_t
        return (calls - base_calls) / span if span > 0 else 0.0

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
        :class:`UnknownServiceError`, :class:`TierUnavailableError`,
        :class:`SanityCheckError`, :class:`DrainTimeoutError`, or the fabric error of the step
        that failed.
        """
        self._check_open()
        if type(to_software) not in (list, tuple) and (
            isinstance(to_software, str | bytes) or not isinstance(to_software, Iterable)
        ):
            raise UnknownServiceError(
                f'"to_software" must be service ids (a list), got {to_software!r:.80}',
                to_software,
            )
        leaving_ids = list(to_software)
        with self._juggle_lock:
            t0 = time.perf_counter()
            entering = self._managed_of(to_hardware) if to_hardware is not None else None
            leaving = [self._managed_of(i) for i in leaving_ids]
            ticket = self._juggler.plan(entering, leaving)
            plan = ticket.plan
            try:
                done = self._juggler.run(plan, entering if plan.region else None, leaving)
            except BaseException:
                self._tenancy.end_juggle(ticket, ok=False)
                raise
            self._tenancy.end_juggle(ticket, ok=True)
            overhead = time.perf_counter() - t0 - done.waited_s - done.port_s
            report = JuggleReport(
                to_hardware=to_hardware,
                to_software=tuple(leaving_ids),
                region=plan.region,
                steps=tuple(done.steps),
                reconfiguration_ms=done.reconfiguration_ms,
                bridge_ms=done.bridge_ms,
                overhead_us=overhead * 1e6,
                tiers={m.service_id: m.tier for m in [*leaving, *([entering] if entering else [])]},
            )
            self._remember(report)
            return report

    def _remember(self, report: JuggleReport) -> None:
        with self._lock:
            self._history.append(report)
            self._juggle_count += 1
            self._reconfiguration_ms += report.reconfiguration_ms

    def history(self, limit: int | None = None) -> tuple[JuggleReport, ...]:
        """The newest juggles, oldest first: at most ``limit`` (None: all kept). The history
        is a ring of ``history_capacity`` reports (``Framework(history_capacity=...)``);
        :attr:`juggle_count` counts every juggle ever made."""
        self._check_open()
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            raise ConfigurationError(f'"limit" must be an int >= 0 or None, got {limit!r}', limit)
        with self._lock:
            reports = tuple(self._history)
        if limit is None:
            return reports
        return reports[len(reports) - limit :] if limit else ()

    @property
    def juggle_count(self) -> int:
        """Juggles made since the framework started (the history keeps only the newest)."""
        return self._juggle_count

    @property
    def reconfiguration_ms_total(self) -> float:
        """Modeled reconfiguration time of every juggle since the framework started."""
        return self._reconfiguration_ms

    def _services_now(self) -> list[ManagedService]:
        with self._lock:
            return list(self._managed.values())

    # -- faults ------------------------------------------------------------------------------

    def _hardware_fault(self, m: ManagedService, core: HardwareCore, reason: str) -> None:
        """A call found ``core`` faulty (it is quarantined already): from a background thread,
        move ``m`` to its software tier and mark the region ERROR (never from the failing
        call's own thread, which is serving its consumer from software meanwhile)."""
        log.warning("service %s: hardware fault in %s: %s", m.label, core.region, reason)
        with self._fault_lock:
            self._fault_queue.append((m, core, reason))
            if self._supervisor is None or not self._supervisor.is_alive():
                self._supervisor = threading.Thread(
                    target=self._supervise, name="juggle-faults", daemon=True
                )
                self._supervisor.start()

    def _supervise(self) -> None:
        while True:
            with self._fault_lock:
                if not self._fault_queue:
                    self._supervisor = None
                    return
                m, core, reason = self._fault_queue.popleft()
            try:
                self._contain(m, core, reason)
            except Exception:  # never let a fault kill the supervisor
                log.exception("containing the fault of service %s failed", m.label)

    def _stop_supervisor(self) -> None:
        """Drop the faults not yet contained (closing: their services are gone) and wait for
        the supervisor thread to end."""
        with self._fault_lock:
            self._fault_queue.clear()
            thread = self._supervisor
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self.drain_timeout_s)

    def _contain(self, m: ManagedService, core: HardwareCore, reason: str) -> None:
        with self._juggle_lock:
            if m.core is not core or self._closing:
                return  # the service already left that core
            region = core.region
            self.faults.append(f"{region}: service {m.service_id}: {reason}")
            if m.has_software:
                switched = m.switch(m.home_tier, twins=True)
                m.hw_modeled_ns += self._busy_since_entry(m)
                m.core, m.region, m.quarantined = None, None, region
                with contextlib.suppress(JuggleError):
                    m.drain(switched, self.drain_timeout_s)
            else:
                m.quarantined = region
            with contextlib.suppress(FabricError):
                self.fabric.quarantine(region, f"service {m.service_id}: {reason}")
            self._tenancy.fault(region)

    def recover(self, region: str) -> JuggleReport | None:
        """Clear ``region`` (empty it) and put back the service whose core failed there, if
        it still runs; returns that juggle's report (None: nothing to put back).

        Any region no service serves from may be recovered: a quarantined one (ERROR), one a
        failed programming step left in ERROR, one holding a design nobody serves from, an
        empty one (nothing changes on the fabric). Raises
        :class:`~juggle.errors.UnknownRegionError`, :class:`SanityCheckError` (a service
        serves from the region, or a tenant's device holds it), the fabric's error when the
        region cannot be emptied (:class:`~juggle.errors.RegionBusyError`,
        :class:`~juggle.errors.BridgeError`; nothing changed then) and what :meth:`juggle`
        raises.
        """
        self._check_open()
        with self._juggle_lock:
            self.fabric.region(region)  # raises UnknownRegionError, naming the regions
            for m in self._services_now():
                if m.region == region and m.quarantined != region:
                    raise SanityCheckError(
                        f"region {region!r} serves service {m.label}: "
                        f"take it out first (juggle(to_software=[{m.service_id}]))",
                        subject=region,
                    )
            holder = self._tenancy.holder(region)
            if holder is not None:
                raise SanityCheckError(
                    f"region {region!r} is held by {holder}: it is not the runtime's to recover",
                    subject=region,
                )
            self.fabric.unload(region)
            waiting = [m for m in self._services_now() if m.quarantined == region]
            for m in waiting:
                if m.core is not None and m.region == region:  # hardware-only: still bound
                    m.core, m.region = None, None
                    m.devices.clear()
                m.quarantined = None
            self._tenancy.blank(region)
            if not waiting:
                return None
            return self.juggle(to_hardware=waiting[0].service_id)

    def _preempt_to_software(self, service_id: int) -> bool:
        """A tenant of higher priority needs the region of juggle-placed ``service_id``: its
        proxies move to software (running calls finish in hardware) and the region is
        emptied, as a juggle out would (undone on failure). False: not drained yet."""
        with self._juggle_lock:
            m = self._managed.get(service_id)
            if m is None or m.region is None or self._closed:
                return True  # it left the region meanwhile (stopped, faulted)
            t0 = time.perf_counter()
            try:
                done = self._juggler.run(JugglePlan(None, (service_id,), None, False), None, [m])
            except JuggleError as exc:
                log.warning("service %s: preemption deferred: %s", m.label, exc)
                return False
            self._note_move(None, (service_id,), None, done, t0, "preempted by a tenant", m)
            return True

    def _return_to_hardware(self, service_id: int, region: str) -> bool:
        """The allocator gave preempted ``service_id`` ``region`` again: program it and switch
        the proxies back (undone on failure). False when that failed."""
        with self._juggle_lock:
            m = self._managed.get(service_id)
            if m is None or self._closed or m.tier == "hardware":
                return False
            t0 = time.perf_counter()
            try:
                done = self._juggler.run(JugglePlan(service_id, (), region, False), m, [])
            except JuggleError as exc:
                log.warning("service %s: could not return to %s: %s", m.label, region, exc)
                return False
            self._note_move(service_id, (), region, done, t0, "back after a preemption", m)
            return True

    def _note_move(
        self,
        entering: int | None,
        leaving: tuple[int, ...],
        region: str | None,
        done: JuggleStep,
        t0: float,
        why: str,
        m: ManagedService,
    ) -> None:
        self._remember(
            JuggleReport(
                to_hardware=entering,
                to_software=leaving,
                region=region,
                steps=(why, *done.steps),
                reconfiguration_ms=done.reconfiguration_ms,
                bridge_ms=done.bridge_ms,
                overhead_us=(time.perf_counter() - t0 - done.waited_s - done.port_s) * 1e6,
                tiers={m.service_id: m.tier},
            )
        )

    def set_tier(self, service_id: int, tier: str) -> JuggleReport:
        """Serve ``service_id`` from ``tier`` (``software``, ``native`` or ``hardware``).

        Raises :class:`UnknownServiceError`, :class:`TierUnavailableError` naming the tier,
        or what :meth:`juggle` raises when entering hardware.
        """
        self._check_open()
        m = self._managed_of(service_id)
        if tier not in TIERS or tier not in m.tiers():
            raise TierUnavailableError(
                f"service {service_id} ({m.interface_name}) has no {tier!r} tier "
                f"(it has: {', '.join(m.tiers())})",
                subject=tier,
            )
        if tier == "hardware":
            return self.juggle(to_hardware=service_id)
        with self._juggle_lock:
            if m.tier == "hardware":
                previous_home = m.home_tier
                m.home_tier = tier
                try:
                    return self.juggle(to_hardware=None, to_software=[service_id])
                except BaseException:
                    m.home_tier = previous_home
                    raise
            t0 = time.perf_counter()
            switched = m.switch(tier)
            try:
                m.drain(switched, self.drain_timeout_s)
            except BaseException:
                m.drain(m.switch(switched.previous), self.drain_timeout_s)
                raise
            m.home_tier = tier
            return JuggleReport(
                None,
                (),
                None,
                (f"proxies of service {service_id} switched to {tier}",),
                0.0,
                0.0,
                (time.perf_counter() - t0) * 1e6,
                {service_id: tier},
            )

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
        self._check_open()
        return self._tenancy.add_tenant(name, priority=priority, realtime=realtime, model=model)

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
        self._check_open()
        return self._tenancy.set_tenant(name, priority=priority, realtime=realtime, model=model)

    def tenants(self) -> tuple[TenantSnapshot, ...]:
        """Snapshots of the tenants (priority, model, each virtual device's state and region)."""
        self._check_open()
        return self._tenancy.tenants()

    def signals(self, tenant: str) -> SignalChannel:
        """``tenant``'s channel of WAIT / READY / PREEMPT signals.

        Raises :class:`~juggle.errors.UnknownTenantError`.
        """
        self._check_open()
        return self._tenancy.signals(tenant)

    # -- controllers -------------------------------------------------------------------------

    def set_foreground(
        self, app: str | None, errors: list[str] | None = None
    ) -> list[JuggleReport]:
        """Tell the runtime which application has the focus; runs the controller once
        (its failed juggles are appended to ``errors``, as :meth:`control`)."""
        self._check_open()
        if app is not None and not isinstance(app, str):
            raise ConfigurationError(f'"app" must be a string or None, got {app!r}', app)
        self._foreground = app
        return self.control(errors) if self.controller is not None else []

    @property
    def foreground(self) -> str | None:
        """The application in focus (None: unknown)."""
        return self._foreground

    def set_controller(self, controller: Controller | None) -> None:
        """Use ``controller`` (a policy) for :meth:`control`; None turns control off."""
        self._check_open()
        if controller is not None and not isinstance(controller, Controller):
            raise ControllerError(
                f"{controller!r} is not a controller (needs name and decide(snapshot))",
                subject=controller,
            )
        self.controller = controller

    def snapshot(self) -> StatsSnapshot:
        """What a controller reads: per-service statistics, regions, the foreground app.

        Live, a service's "queue" is the calls inside it right now (its callers waiting for
        it): ``queue_length`` is that count and ``queue_occupancy`` its share of
        ``queue_capacity``. ``gain_us`` is the measured mean duration in software minus that
        in hardware once both tiers have served calls (None before).
        """
        self._check_open()
        services = []
        stats = {s.service_id: self.statistics(s.service_id) for s in self.services()}
        total_rate = sum(s.rate_per_s for s in stats.values()) or 1.0
        for snap in self.services():
            st = stats[snap.service_id]
            services.append(
                ServiceStats(
                    service_id=snap.service_id,
                    interface=snap.interface,
                    tier=snap.tier,
                    region=snap.region,
                    calls=st.total.calls,
                    rate_per_s=st.rate_per_s,
                    share=st.rate_per_s / total_rate,
                    mean_us=st.total.mean_us,
                    p50_us=st.total.p50_us,
                    p99_us=st.total.p99_us,
                    queue_occupancy=min(1.0, st.inflight / self.queue_capacity),
                    queue_length=st.inflight,
                    hardware_capable="hardware" in snap.tiers,
                    per_consumer={c: s.calls for c, s in st.per_consumer.items()},
                    gain_us=_gain_us(st, self._managed_of(snap.service_id).home_tier),
                )
            )
        regions = tuple(
            RegionStats(r.name, r.state, r.service_id, reconfig_us=self._reconfig_us(r.name))
            for r in self.regions()
        )
        return StatsSnapshot(time.monotonic(), tuple(services), regions, self._foreground)

    def _reconfig_us(self, region: str) -> float | None:
        """Modeled time to reprogram ``region`` with its typical bitstream (None: unknown)."""
        profile = self.fabric.profile
        size = profile.region(region).bitstream_bytes
        if size is None:
            return None
        return float(profile.config_port.transfer_ps(size)) / 1e6

    def control(self, errors: list[str] | None = None) -> list[JuggleReport]:
        """Run the controller once on a fresh snapshot and carry out its juggles; a juggle
        that fails is logged, kept in :attr:`controller_errors` and appended to ``errors``."""
        self._check_open()
        if self.controller is None:
            return []
        actions: Sequence[JuggleAction] = self.controller.decide(self.snapshot())
        reports = []
        for action in actions:
            try:
                reports.append(self.juggle(action.to_hardware, action.to_software))
            except JuggleError as exc:
                message = f"{action}: {exc}"
                self.controller_errors.append(message)
                if errors is not None:
                    errors.append(message)
                log.warning("controller %s: %s failed: %s", self.controller.name, action, exc)
        return reports

    def start_control_loop(self, interval_s: float = 0.1) -> None:
        """Run :meth:`control` every ``interval_s`` seconds in a background thread."""
        self._check_open()
        _positive_number("interval_s", interval_s)
        self.stop_control_loop()
        self._loop_stop.clear()

        def loop() -> None:
            while not self._loop_stop.wait(interval_s):
                self.control()

        self._loop = threading.Thread(target=loop, name="juggle-controller", daemon=True)
        self._loop.start()

    def stop_control_loop(self) -> None:
        """Stop the background control loop, if any."""
        if self._loop is not None:
            self._loop_stop.set()
            self._loop.join()
            self._loop = None

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the control loop, the tenants' manager and the fault supervisor, stop and
        uninstall every module (the fabric is left empty) and release the fabric. Afterwards
        every method raises :class:`~juggle.errors.FrameworkClosedError`; closing again does
        nothing."""
        with self._lock:
            if self._closed or self._closing:
                return
            self._closing = True
        try:
            self.stop_control_loop()
            self._tenancy.close()  # waiting tenant calls end
            for module in list(self._modules.values()):
                with contextlib.suppress(JuggleError):
                    if module.state is ModuleState.ACTIVE:
                        self._stop_module(module)
                    self._uninstall_module(module)
            self._stop_supervisor()
            self._history.clear()
            self.fabric.close()
        finally:
            self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise FrameworkClosedError("the framework is closed", self)

    def __enter__(self) -> Framework:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        in_hw = sum(1 for m in self._managed.values() if m.tier == "hardware")
        return (
            f"<Framework {self.fabric.profile.board.name}: {len(self._modules)} modules, "
            f"{len(self._managed)} services, {in_hw} in hardware>"
        )


def _gain_us(stats: ServiceStatistics, home_tier: str) -> float | None:
    """Time a call saves in hardware over ``home_tier``, where it runs otherwise (None: unknown).

    Software durations are measured; the hardware duration is modeled on a simulated fabric
    (the wall time of a simulated core says nothing about the core) and measured on a board.
    """
    hardware = stats.per_tier.get("hardware")
    soft = stats.per_tier.get(home_tier)
    if hardware is None or not hardware.timed or soft is None or not soft.timed:
        return None
    hw_us = stats.hardware_modeled_mean_us
    if hw_us is None:
        hw_us = hardware.mean_us
    return soft.mean_us - hw_us
