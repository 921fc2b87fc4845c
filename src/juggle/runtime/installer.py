"""The installer: modules in (checked whole before they exist), started, stopped, updated, out.

An :class:`Installer` is the framework's receiving desk. ``install`` opens a module, checks
its signature and pins, imports its code in a namespace of its own and resolves every service
(interfaces, classes, drivers, bitstreams against the fabric) before the module exists; any
error leaves nothing behind. It is each :class:`~juggle.runtime.modules.Module`'s host
(:class:`~juggle.runtime.modules.ModuleHost`): starting a module builds its managed services
into the service table (a hardware-only one is juggled into the fabric, unless tenants share
it); stopping takes them out of the fabric first; updating swaps their classes under running
consumers. A module is found by its path; a bare name that is no path (``"tdes"``) is the
shipped example module of that name (:func:`find_module`), as ``juggle profile`` finds it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from juggle.core.tiers import Tier
from juggle.errors import (
    ConfigurationError,
    DescriptorError,
    DuplicateModuleError,
    FabricError,
    JuggleError,
    ModuleError,
    ModuleStateError,
    UnknownInterfaceError,
    UnknownModuleError,
)
from juggle.fabric.bitstream import Bitstream
from juggle.fabric.fabric import Fabric
from juggle.fabric.resources import Resources
from juggle.runtime.descriptors import Descriptor, ServiceSpec
from juggle.runtime.juggler import Juggler
from juggle.runtime.lifecycle import Lifecycle
from juggle.runtime.modules import (
    CodeNamespace,
    Module,
    ModuleSnapshot,
    ModuleSource,
    ModuleState,
    check_class,
)
from juggle.runtime.options import FrameworkOptions
from juggle.runtime.resolved import Hardware, ResolvedService
from juggle.runtime.rtlsources import DesignRtl, module_rtl
from juggle.runtime.services import ManagedService, ServiceHost
from juggle.runtime.synthesis import pick_figures, read_report
from juggle.runtime.table import ServiceTable

__all__ = ["Installer", "find_module"]

log = logging.getLogger("juggle")

#: the tiers a module's descriptor names classes for
SOFT_TIERS = (Tier.SOFTWARE, Tier.NATIVE)


def find_module(path: str | Path) -> str | Path:
    """Where the module ``path`` names is: ``path`` itself when it exists (a path that exists
    always wins), else the shipped example module of that name when ``path`` is a bare name
    (no folder part, e.g. ``"tdes"``, :func:`juggle.shipped.example_module`), else ``path``
    unchanged (opening it then says it does not exist).

    Raises :class:`~juggle.errors.ModuleError` naming ``path`` and the shipped examples when
    ``path`` is a bare name that is neither a path nor a shipped example.
    """
    candidate = Path(path)
    if candidate.exists() or candidate.name != str(path) or candidate.name in ("", ".", ".."):
        return path
    from juggle.shipped import example_modules

    try:
        folder = example_modules()
    except UnknownModuleError:  # an installation without its examples
        return path
    if (folder / candidate.name).is_dir():
        return folder / candidate.name
    known = ", ".join(sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name[0] != "_"))
    raise ModuleError(
        f"no module at {str(path)!r}: path does not exist, and no shipped example module has "
        f"that name (examples: {known})",
        path=str(path),
    )


class Installer:
    """Installs modules for one framework and carries out their lifecycles.

    ``host`` is what every managed service it builds reaches outside itself (options, fault
    sink, arbiter); ``juggler`` places and removes services in the fabric.
    """

    def __init__(
        self,
        fabric: Fabric,
        options: FrameworkOptions,
        table: ServiceTable,
        juggler: Juggler,
        host: ServiceHost,
        lifecycle: Lifecycle,
    ) -> None:
        self._fabric = fabric
        self._options = options
        self._table = table
        self._juggler = juggler
        self._host = host
        self._life = lifecycle
        self._modules: dict[int, Module] = {}
        self._module_ids = iter(range(1, 1 << 62))
        self._lock = threading.RLock()  # guards _modules

    def check_open(self) -> None:
        """Raise :class:`~juggle.errors.FrameworkClosedError` once the framework is closed."""
        self._life.check_open()

    # -- installing --------------------------------------------------------------------------

    def install(self, path: str | Path) -> Module:
        """Install the module at ``path`` (see :meth:`juggle.runtime.framework.Framework.install`,
        which says what it raises)."""
        source, descriptor = self._open_module(path)
        self._refuse_duplicate(source, descriptor)
        namespace, resolved = self._load_code(source, descriptor)
        with self._lock:
            try:
                self._refuse_duplicate(source, descriptor)  # installed meanwhile
            except ModuleError:
                self._release(namespace.package)
                namespace.unload()
                raise
            module = Module(self, next(self._module_ids), source, descriptor, namespace, resolved)
            self._modules[module.module_id] = module
        return module

    def _open_module(self, path: str | Path) -> tuple[ModuleSource, Descriptor]:
        """Open, authenticate and parse the module at ``path`` and verify its pinned files,
        before any of its code runs (:meth:`ModuleSource.authenticate`, with the options'
        ``trusted_keys``); a bare name that is no path is a shipped example
        (:func:`find_module`)."""
        source = ModuleSource.open(find_module(path), self._options.limits)
        keys = self._options.trusted_keys
        descriptor, _ = source.authenticate(list(keys) if keys is not None else None)
        return source, descriptor

    def _refuse_duplicate(self, source: ModuleSource, descriptor: Descriptor) -> None:
        info = descriptor.module
        for module in self._installed():
            if module.source.location == source.location or (
                module.name == info.name and module.version == info.version
            ):
                raise DuplicateModuleError(
                    f"module {info.name!r} {info.version} from {str(source.location)!r} is "
                    f"installed already (id {module.module_id}, from "
                    f"{str(module.source.location)!r}); uninstall or update it",
                    module=info.name,
                    path=str(source.location),
                )

    def _load_code(
        self, source: ModuleSource, descriptor: Descriptor, replacing: str | None = None
    ) -> tuple[CodeNamespace, tuple[ResolvedService, ...]]:
        """Import the module's code in its own namespace and resolve every service in it;
        on any error the namespace is unloaded again."""
        namespace = CodeNamespace(source, descriptor.module.name)
        namespace.replacing = replacing
        try:
            return namespace, tuple(
                self._resolve(s, source, namespace) for s in descriptor.services
            )
        except BaseException:
            self._release(namespace.package)
            namespace.unload()
            raise

    def _resolve(
        self, spec: ServiceSpec, source: ModuleSource, namespace: CodeNamespace
    ) -> ResolvedService:
        interfaces: list[type] = []
        for name in spec.interfaces:
            try:
                found = namespace.resolve(name, "interface")
            except DescriptorError:
                found = None
            if not isinstance(found, type):
                try:
                    found = self._table.interfaces.resolve(name)
                except UnknownInterfaceError:
                    raise UnknownInterfaceError(
                        f"{source.display(source.descriptor)}: unknown service interface "
                        f"{name!r} (not in the module, not a known interface)",
                        path=source.display(source.descriptor),
                        interface=name,
                    ) from None
            interfaces.append(found)
        classes: dict[str, type] = {}
        for tier in SOFT_TIERS:
            impl = getattr(spec, tier)
            if impl is not None:
                cls = namespace.resolve(impl.class_, f"{tier} class")
                classes[tier] = check_class(cls, impl.class_, interfaces[0], args=0)
        hardware = None
        if spec.hardware is not None:
            hardware = self._resolve_hardware(spec, source, namespace, interfaces[0])
        return ResolvedService(spec, interfaces[0], MappingProxyType(classes), hardware)

    def _resolve_hardware(
        self, spec: ServiceSpec, source: ModuleSource, ns: CodeNamespace, interface: type
    ) -> Hardware:
        hw = spec.hardware
        assert hw is not None
        driver = check_class(ns.resolve(hw.driver, "driver"), hw.driver, interface, args=1)
        model = ns.resolve(hw.model, "model") if hw.model else None
        loaded = source.load_bitstreams(hw.bitstreams, self._fabric.region_names())
        bitstreams = {target: (bs, data) for target, (_, bs, data) in loaded.items()}
        pinned = {
            target: source.pinned_file(relpath, source.pins[relpath])
            for target, (relpath, _, _) in loaded.items()
            if relpath in source.pins
        }
        if model is not None:
            for bitstream, _ in bitstreams.values():  # released if the install fails
                self._fabric.models.claim(
                    bitstream.design, model, ns.package, replacing=ns.replacing
                )
        designs = list(dict.fromkeys(bs.design for bs, _ in bitstreams.values()))
        rtl = {design: module_rtl(source, hw.rtl, design) for design in designs}
        engines = {design: self._place_rtl(source, ns, design, rtl[design]) for design in designs}
        rtl_pins = tuple(
            source.pinned_file(relpath, source.pins[relpath])
            for found in rtl.values()
            if found is not None and found.origin == "module" and self._fabric.simulates_rtl
            for relpath in found.files
            if relpath in source.pins
        )
        by_region, origins = self._resources(spec, source, bitstreams, rtl)
        first = next(iter(by_region), None)
        return Hardware(
            driver,
            bitstreams,
            by_region[first] if first is not None else None,
            pinned,
            resources_origin=origins.get(first) if first is not None else None,
            region_resources=by_region,
            engines=MappingProxyType(engines),
            rtl_pins=rtl_pins,
        )

    def _place_rtl(
        self, source: ModuleSource, ns: CodeNamespace, design: str, rtl: DesignRtl | None
    ) -> str:
        """Register the module's own RTL of ``design`` in a fabric that runs RTL (released
        with the module's code, as its model claims); returns what will run ``design``
        (:meth:`Fabric.engine_of <juggle.fabric.fabric.Fabric.engine_of>`). A design left on
        its register model there is logged, or refused under ``strict`` with
        :class:`~juggle.errors.ConfigurationError` naming the design and the module."""
        if not self._fabric.simulates_rtl:
            return self._fabric.engine_of(design)
        if rtl is not None and rtl.origin == "module":
            if self._fabric.rtl_of(design) is not None and self._fabric.rtl_owner(design) is None:
                log.info(
                    "module %s: its Verilog of design %s replaces juggle's while it is installed",
                    ns.module_name,
                    design,
                )
            self._fabric.add_rtl(
                design,
                rtl.paths(source),
                rtl.top,
                bus=rtl.bus,
                owner=ns.package,
                replacing=ns.replacing,
            )
        engine = self._fabric.engine_of(design)
        if engine == "model":
            module = source.display(source.descriptor)
            if self._options.strict:
                raise ConfigurationError(
                    f"module {ns.module_name!r} ({module}): design {design!r} has no RTL (no "
                    f"hdl/{design}/*.v, no [services.hardware.rtl], no built-in RTL), and "
                    "strict=True refuses a design that would run on its register model under "
                    'hardware="rtl"',
                    path=module,
                    value=design,
                )
            log.warning(
                "module %s: design %s has no RTL (no hdl/%s/*.v, no [services.hardware.rtl], "
                "no built-in RTL): it runs on its register model (engine model)",
                ns.module_name,
                design,
                design,
            )
        return engine

    def _resources(
        self,
        spec: ServiceSpec,
        source: ModuleSource,
        bitstreams: Mapping[str, tuple[Bitstream, bytes]],
        rtl: Mapping[str, DesignRtl | None],
    ) -> tuple[dict[str, Resources | None], dict[str, str]]:
        """Each region's resource needs, checked against it, and where they come from.

        A design with RTL and a synthesis report (``resources.json``) in the region's kinds
        needs the report's figures (``synthesized``); any other design what the descriptor
        declares, else its register model (``declared``). Raises
        :class:`~juggle.errors.ResourceError` naming the region, the design, the figures'
        origin and the resource short, and what :meth:`Fabric.check
        <juggle.fabric.fabric.Fabric.check>` raises.
        """
        hw = spec.hardware
        assert hw is not None
        shown = source.display(source.descriptor)
        declared_table = None
        if hw.resources is not None:
            regions = self._fabric.profile.regions  # a board's regions share one family
            family = regions[0].resources.family if regions else "xc2vp"
            declared_table = hw.resources.for_family(family)
        synthesized = read_report(source)  # juggle module build's figures, if any
        by_region: dict[str, Resources | None] = {}
        origins: dict[str, str] = {}
        for region, (bitstream, _) in bitstreams.items():
            design = bitstream.design
            declared = (
                declared_table if declared_table is not None else self._model_resources(design)
            )
            synth = synthesized.get(design) if rtl.get(design) is not None else None
            target = self._fabric.region(region).profile.resources
            figures, origin = pick_figures(declared, synth, target)
            if synth is not None and origin != "synthesized":
                log.info(
                    "module %s: the synthesis report of design %s counts %s figures, region %s "
                    "counts %s: it is not this board's, so the declared figures are used",
                    shown,
                    design,
                    synth.family,
                    region,
                    target.family,
                )
            elif synth is not None and declared is not None and declared != synth:
                log.info(
                    "module %s: design %s: declared %s, synthesized %s; the synthesized "
                    "figures are used",
                    shown,
                    design,
                    declared,
                    synth,
                )
            self._fabric.check(bitstream, region, figures, figures=origin)
            by_region[region] = figures
            if origin is not None:
                origins[region] = origin
        return by_region, origins

    def _model_resources(self, design: str) -> Resources | None:
        try:
            model = self._fabric.models.resolve(design)
        except FabricError:
            return None
        declared = getattr(model, "resources", None)
        if isinstance(declared, Mapping):
            return Resources.of({str(k): int(v) for k, v in declared.items()})
        return None

    def register_service(
        self,
        interface: str,
        implementation: object,
        properties: Mapping[str, Any] | None,
        ranking: int,
    ) -> int:
        """Register a plain software ``implementation`` of ``interface``; returns its id.
        Raises :class:`UnknownInterfaceError` or :class:`DescriptorError` (methods missing)."""
        iface = self._table.interfaces.resolve(interface)
        check_class(type(implementation), type(implementation).__name__, iface)
        managed = ManagedService(
            self._host,
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
        self._table.add(managed, ranking=ranking, module_id=None)
        return managed.service_id

    # -- looking up --------------------------------------------------------------------------

    def module(self, module_id_or_name: int | str) -> Module:
        """An installed module by id or name (:class:`UnknownModuleError` if none)."""
        for module in self._installed():
            if module_id_or_name in (module.module_id, module.name):
                return module
        raise UnknownModuleError(
            f"no installed module {module_id_or_name!r}", module=str(module_id_or_name)
        )

    def start_hint(self, interface: str) -> str | None:
        """Why no service offers ``interface`` (full or short name) when an installed module
        would offer it once started: a sentence naming the module(s) and what to do, for the
        framework to add to its :class:`~juggle.errors.ServiceUnavailableError`; None when no
        installed, unstarted module declares that interface."""
        from juggle.runtime.interfaces import short_name

        waiting = [
            module
            for module in self._installed()
            if module.state is ModuleState.INSTALLED
            and any(
                interface in (name, short_name(name))
                for spec in module.descriptor.services
                for name in spec.interfaces
            )
        ]
        if not waiting:
            return None
        names = ", ".join(f"{m.name!r} (id {m.module_id})" for m in waiting)
        return (
            f"module {names} offers it but is installed, not started: start it first "
            "(module.start(); in the shell: start ID)"
        )

    def modules(self) -> tuple[ModuleSnapshot, ...]:
        """Snapshots of the installed modules."""
        return tuple(m.snapshot() for m in self._installed())

    def _installed(self) -> list[Module]:
        with self._lock:
            return list(self._modules.values())

    # -- ModuleHost: the lifecycle -----------------------------------------------------------

    def start_module(self, module: Module) -> None:
        """Build and register ``module``'s services; a hardware-only one not shared among
        tenants is juggled into the fabric. Undone on any error."""
        self.check_open()
        module.state = ModuleState.STARTING
        try:
            for resolved in module.resolved:
                spec = resolved.spec
                managed = ManagedService(
                    self._host,
                    tuple(spec.interfaces),
                    resolved.interface,
                    spec,
                    resolved.classes,
                    resolved.hardware,
                    module,
                    spec.properties,
                    per_consumer=spec.per_consumer,
                )
                self._table.add(managed, ranking=spec.ranking, module_id=module.module_id)
                module.service_ids.append(managed.service_id)
                arbitrated = self._juggler.arbiter.add_service(managed)
                if managed.home_tier == Tier.HARDWARE and not arbitrated:
                    self._juggler.juggle(to_hardware=managed.service_id)
        except BaseException:
            self._unregister_services(module)
            module.state = ModuleState.INSTALLED
            raise
        module.state = ModuleState.ACTIVE

    def stop_module(self, module: Module) -> None:
        """Take ``module``'s services out of the fabric and the registry. Raises
        :class:`ModuleStateError` from inside a juggle (a driver or hook it runs)."""
        if self._juggler.running_here():  # its services would leave in the middle of it
            raise ModuleStateError(
                f"cannot stop module {module.name!r} (id {module.module_id}) from inside a "
                "juggle (a driver or a hook that a juggle runs): stop it from another thread, "
                "which waits for the juggle to end",
                module=module.name,
            )
        module.state = ModuleState.STOPPING
        try:
            self._unregister_services(module)
        finally:
            module.state = ModuleState.INSTALLED

    def update_module(self, module: Module, path: str | Path | None) -> None:
        """Replace ``module``'s code (from ``path`` or where it came from) under load."""
        self.check_open()
        source, descriptor = self._open_module(path if path is not None else module.source.location)
        if descriptor.module.name != module.name:
            raise ModuleError(
                f"update of {module.name!r} found module {descriptor.module.name!r}",
                module=module.name,
                path=str(source.location),
            )
        namespace, resolved = self._load_code(source, descriptor, module.namespace.package)
        old_namespace = module.namespace
        if module.state is ModuleState.ACTIVE:
            self._swap_code(module, resolved)
        module.source, module.descriptor = source, descriptor
        module.namespace, module.resolved = namespace, resolved
        self._release(old_namespace.package)  # what the new code no longer claims
        old_namespace.unload()

    def uninstall_module(self, module: Module) -> None:
        """Stop ``module`` if active, then unload its code."""
        if module.state is ModuleState.ACTIVE:
            self.stop_module(module)
        self._release(module.namespace.package)
        module.namespace.unload()
        module.state = ModuleState.UNINSTALLED
        with self._lock:
            self._modules.pop(module.module_id, None)

    def close(self) -> None:
        """Stop and uninstall every module (the framework is closing: the fabric is left
        empty; a module that fails to go is logged, the others still go)."""
        for module in self._installed():
            try:
                if module.state is ModuleState.ACTIVE:
                    self.stop_module(module)
                self.uninstall_module(module)
            except JuggleError as exc:
                log.warning("module %s: closing: %s", module.name, exc)

    # -- helpers -----------------------------------------------------------------------------

    def _release(self, package: str) -> None:
        """Forget the register models and RTL the code namespace ``package`` provided."""
        self._fabric.models.release(package)
        self._fabric.release_rtl(package)

    def _unregister_services(self, module: Module) -> None:
        """Take the module's services out of the fabric and the registry. Under the juggle
        lock: a juggle running now finishes first (a service it is placing is then taken out
        like any other), and none starts meanwhile."""
        with self._juggler.lock:
            for service_id in list(module.service_ids):
                managed = self._table.find(service_id)
                if managed is None:
                    continue
                if managed.region is not None:  # placed (or quarantined in place): take out
                    self._take_out(managed)
                if managed.registration is not None and managed.registration.registered:
                    managed.registration.unregister()
                self._juggler.arbiter.forget(service_id)  # its device leaves the allocator
                self._table.remove(service_id)
            module.service_ids.clear()

    def _take_out(self, m: ManagedService) -> None:
        """Under the juggle lock: ``m``, which is stopping, leaves its region. A juggle out
        first (state carried, calls drained); if that fails (or the framework is closing), by
        force: its proxies go to software, its core is cut off (calls on it fall back to
        software), and the region is emptied (or discarded: ERROR, to be programmed afresh)
        and blank for the allocator."""
        if m.tier == Tier.HARDWARE and m.quarantined is None and not self._life.closing:
            try:
                self._juggler.juggle(to_hardware=None, to_software=[m.service_id])
                return
            except JuggleError as exc:
                log.warning("service %s: stopping; juggle out failed: %s", m.label, exc)
        region, core = m.region, m.core
        if region is None:
            return
        if m.has_software and m.tier == Tier.HARDWARE:
            with contextlib.suppress(JuggleError):
                m.switch(m.home_tier, twins=True)
        if core is not None:
            core.quarantine(f"service {m.service_id} stopped")
        m.core, m.region = None, None
        m.quarantined = None
        self._juggler.settle([region])
        quarantined = self._fabric.region(region).snapshot().quarantined  # out until recovered
        arbiter = self._juggler.arbiter
        if not quarantined and arbiter.holder(region) is None:
            arbiter.blank(region)

    def _swap_code(self, module: Module, resolved: tuple[ResolvedService, ...]) -> None:
        """Point the running services of ``module`` at new classes, losslessly."""
        by_interface = {tuple(r.spec.interfaces): r for r in resolved}
        for service_id in list(module.service_ids):
            managed = self._table.managed(service_id)
            new = by_interface.get(managed.interfaces)
            if new is None:
                continue
            with self._juggler.lock, managed.lock:
                managed.classes = new.classes
                managed.spec = new.spec
                managed.hardware = new.hardware
                if managed.tier == Tier.HARDWARE:
                    continue  # the loaded design keeps serving; new driver on next juggle
                tier = managed.tier if managed.tier in managed.classes else managed.home_tier
                switched = managed.switch(tier)
                managed.drain(switched, self._options.drain_timeout_s)

    def __repr__(self) -> str:
        return f"<Installer {len(self._installed())} modules>"
