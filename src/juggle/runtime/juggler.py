"""Carrying out a juggle: every step paired with its undo, so a juggle never wedges.

The decision (which region, may it at all) is the allocator's
(:meth:`juggle.core.allocator.Allocator.juggle`, which asks
:func:`juggle.core.placement.plan_juggle`); this module executes it against the fabric and the
proxies, like ``fpga_region_program_fpga``: each step that succeeded pushes its undo, and any
failure runs the undos in reverse. Afterwards every service serves from the tier it was on
before, every region holds the design of the service that serves from it or is empty or ERROR,
and the next juggle works.

Steps for a service leaving the fabric: its proxies switch to its software tier (state carried),
the old hardware slots drain, the region is unloaded (unless the entering service reuses it).
For the entering one: the region is programmed, the driver built on it, the proxies switch to
hardware (state carried onto the virtual devices), the old software slots drain. A leaving
service whose design was overwritten or unloaded before a later step failed is programmed back.

An undo can fail too (the fault that broke the juggle strikes again while a leaving service is
programmed back). That service then serves from its software tier, and the juggle settles the
regions it touched: one that holds a design nobody serves from is unloaded (or, if even that
fails, discarded: ERROR, to be programmed afresh). A region left in ERROR by a failed programming
step is the next juggle's to program; only a quarantined core keeps a region out until
``recover``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from juggle.core.allocator import JuggleTicket
from juggle.core.placement import JugglePlan
from juggle.errors import FabricError, HardwareFaultError, JuggleError
from juggle.runtime.hardware import HardwareCore
from juggle.runtime.proxy import binding_of
from juggle.runtime.services import ManagedService, Switched

if TYPE_CHECKING:
    from juggle.runtime.framework import Framework

__all__ = ["JuggleStep", "Juggler"]

log = logging.getLogger("juggle")

Undo = Callable[[], None]


@dataclass(slots=True)
class JuggleStep:
    """The running account of one juggle: steps done, modeled costs, undos pending."""

    steps: list[str] = field(default_factory=list)
    reconfiguration_ms: float = 0.0
    bridge_ms: float = 0.0
    undo: list[tuple[str, Undo]] = field(default_factory=list)
    waited_s: float = 0.0
    port_s: float = 0.0  # wall time the configuration port spent writing bitstreams

    def did(self, text: str, undo: Undo | None = None, label: str = "") -> None:
        """Note step ``text``; ``undo`` runs if a later step fails."""
        self.steps.append(text)
        if undo is not None:
            self.undo.append((label or text, undo))

    def rollback(self) -> None:
        """Run the undos in reverse; one that fails is logged and the rest still run."""
        while self.undo:
            label, undo = self.undo.pop()
            try:
                undo()
                self.steps.append(f"rolled back: {label}")
            except Exception as exc:  # the original error is what the caller gets
                self.steps.append(f"rollback of {label} failed: {exc}")
                log.warning("juggle rollback of %s failed: %s", label, exc)


class Juggler:
    """Executes planned juggles for ``framework`` (whose juggle lock the caller holds)."""

    def __init__(self, framework: Framework) -> None:
        self.fw = framework
        self._running_in: int | None = None  # the thread carrying out a juggle now

    def running_here(self) -> bool:
        """Whether the calling thread is inside a juggle's steps (a driver, a hook)."""
        return self._running_in == threading.get_ident()

    # -- planning ----------------------------------------------------------------------------

    def plan(
        self, entering: ManagedService | None, leaving: Sequence[ManagedService]
    ) -> JuggleTicket:
        """The allocator's decision (committed there; finish it with the arbiter's
        ``end_juggle``), with the fabric's own check of the chosen bitstream before any leaving
        service moves (with none, programming checks it first)."""
        tenancy = self.fw._tenancy
        ticket = tenancy.begin_juggle(entering, leaving)
        region = ticket.plan.region
        if entering is not None and region is not None and leaving:  # else program() checks
            assert entering.hardware is not None
            bitstream, _ = entering.hardware.bitstreams[region]
            try:
                self.fw.fabric.check(bitstream, region, entering.hardware.resources)
            except BaseException:
                tenancy.end_juggle(ticket, ok=False)
                raise
        return ticket

    # -- executing ---------------------------------------------------------------------------

    def run(
        self,
        plan: JugglePlan,
        entering: ManagedService | None,
        leaving: Sequence[ManagedService],
    ) -> JuggleStep:
        """Carry out ``plan``; on any failure undo what was done and raise the error."""
        account = JuggleStep()
        touched = {m.region for m in leaving if m.region is not None}
        if entering is not None and plan.region is not None:
            touched.add(plan.region)
        outer, self._running_in = self._running_in, threading.get_ident()
        try:
            for m in leaving:
                self._leave(m, reused=m.region == plan.region, account=account)
            if entering is not None and plan.region is not None:
                self._enter(entering, plan.region, account)
        except BaseException:
            account.rollback()
            self.settle(sorted(touched), account)
            raise
        finally:
            self._running_in = outer
        return account

    def settle(self, regions: Sequence[str], account: JuggleStep | None = None) -> None:
        """After an undone juggle (or a stopped service): each of ``regions`` that holds a
        design no service serves from is unloaded, or discarded (ERROR, to be programmed
        afresh) when even the unload fails; a region some service serves from is left alone."""
        serving = {m.region for m in self.fw._services_now() if m.region is not None}
        for region in regions:
            if region in serving:
                continue
            fabric = self.fw.fabric
            if fabric.region(region).snapshot().state != "PROGRAMMED":
                continue  # EMPTY, or ERROR: nothing loaded that anyone could take for served
            try:
                fabric.unload(region)
                note = f"region {region} emptied: no service serves from it"
            except FabricError as exc:
                with contextlib.suppress(FabricError):
                    fabric.discard(region, f"no service serves from it; unloading failed: {exc}")
                note = f"region {region} discarded (ERROR): unloading failed: {exc}"
            log.info("juggle: %s", note)
            if account is not None:
                account.steps.append(note)

    def _leave(self, m: ManagedService, *, reused: bool, account: JuggleStep) -> None:
        region, core = m.region, m.core
        assert region is not None and core is not None
        versions = m.versions()
        switched = m.switch(m.home_tier)
        account.did(
            f"proxies of service {m.service_id} switched to {m.home_tier}",
            lambda: self._back_to_hardware(m, region, core, switched, versions, account),
            f"service {m.service_id} back in hardware",
        )
        self._drain(m, switched, account)
        m.hw_modeled_ns += self.fw._busy_since_entry(m)
        if not reused:
            unloaded = self.fw.fabric.unload(region)
            account.bridge_ms += unloaded.bridge_ms
            account.did(f"bridge closed on {region}; region released")
        m.region, m.core = None, None

    def _back_to_hardware(
        self,
        m: ManagedService,
        region: str,
        core: HardwareCore,
        switched: Switched,
        versions: tuple[int, ...],
        account: JuggleStep,
    ) -> None:
        """Undo of a leave: ``m`` serves from ``region`` again. Where its core is untouched
        the proxies go back to their virtual devices (the state they hold is carried only if
        it changed meanwhile); else the region is programmed anew and the state carried."""
        snap = self.fw.fabric.region(region).snapshot()
        assert m.hardware is not None
        bitstream, _ = m.hardware.bitstreams[region]
        intact = snap.state == "PROGRAMMED" and snap.design == bitstream.design
        if intact and not core.fault and m.region == region:
            m.core = core
            m.revert(switched, carry=m.versions() != versions)
            return
        m.core = self._program(m, region, account)
        self.fw._enter_region(m, region)
        try:
            m.switch("hardware")
        except BaseException:
            m.core, m.region = None, None
            self._unload_quietly(region)
            raise

    def _enter(self, m: ManagedService, region: str, account: JuggleStep) -> None:
        core = self._program(m, region, account)
        account.did(
            f"driver {type(core.driver).__name__} loaded",
            lambda: self._unload_quietly(region),
            f"region {region} emptied",
        )
        m.core = core
        self.fw._enter_region(m, region)
        versions = m.versions()
        try:
            switched = m.switch("hardware")
        except BaseException:
            m.core, m.region = None, None
            raise
        account.did(
            f"proxies of service {m.service_id} switched to hardware",
            lambda: self._back_to_soft(m, switched, versions),
            f"service {m.service_id} stays in {switched.previous}",
        )
        if core.fault is not None:  # the driver failed while taking over the state
            raise HardwareFaultError(
                f"service {m.label}: the core in {region!r} failed while the state was carried "
                f"onto it: {core.fault}",
                (m.service_id, region),
            )
        self._drain(m, switched, account)

    def _back_to_soft(
        self, m: ManagedService, switched: Switched, versions: tuple[int, ...]
    ) -> None:
        """Undo of an enter: the proxies go back to the implementations they had (carrying
        the state only if it changed meanwhile); the hardware slots drain before the region is
        emptied (calls still on them finish, or fall back to software when it is cut)."""
        core = m.core
        back = Switched("hardware", [])
        with m.lock:
            for proxy, _ in switched.slots:
                back.slots.append((proxy, binding_of(proxy).dispatcher.slot))
            m.revert(switched, carry=m.versions() != versions)
        m.core, m.region = None, None
        m.devices.clear()
        try:
            m.drain(back, self.fw.drain_timeout_s)
        except JuggleError:
            if core is not None:
                core.quarantine("the juggle into hardware was undone")

    def _program(self, m: ManagedService, region: str, account: JuggleStep) -> HardwareCore:
        """Program ``m``'s bitstream into ``region`` and build its driver there."""
        assert m.hardware is not None
        bitstream, data = m.hardware.bitstreams[region]
        m.hardware.check_pinned(region)  # the module on disk changed since install: refuse
        report = self.fw.fabric.program(
            region,
            bitstream,
            data,
            resources=m.hardware.resources,
            owner=f"service {m.service_id}",
        )
        account.reconfiguration_ms += report.reconfiguration_ms
        account.bridge_ms += report.bridge_ms
        account.port_s += report.port_wall_ms / 1e3
        account.did(f"bridge closed on {region}")
        account.did(f"bitstream {bitstream.design} written ({bitstream.size} B)")
        account.did(f"bridge opened on {region}")
        try:
            return HardwareCore(
                region,
                m.hardware.driver,
                self.fw.fabric.window(region),
                call_timeout_s=self.fw.call_timeout_s,
            )
        except BaseException:
            self._unload_quietly(region)
            raise

    def _unload_quietly(self, region: str) -> None:
        """Empty ``region`` after a failure; if even that fails it stays ERROR or loaded with
        nobody serving from it, which the next juggle may reprogram."""
        with contextlib.suppress(FabricError):
            self.fw.fabric.unload(region)

    def _drain(self, m: ManagedService, switched: Switched, account: JuggleStep) -> None:
        t0 = time.perf_counter()
        try:
            account.waited_s += m.drain(switched, self.fw.drain_timeout_s)
        except BaseException:
            account.waited_s += time.perf_counter() - t0  # timed out: all of it was waiting
            raise
