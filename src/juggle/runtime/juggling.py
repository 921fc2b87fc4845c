"""The steps of a juggle as allocator actions, each paired with its undo, so a juggle never wedges.

The decision (which region, may it at all) is the allocator's
(:meth:`juggle.core.allocator.Allocator.juggle`, which asks
:func:`juggle.core.placement.plan_juggle`). :func:`juggle_actions` writes the plan out as the
decision core's actions (:mod:`juggle.core.actions`), in the order they run: a
:class:`~juggle.core.actions.Disconnect` per leaving service, then a
:class:`~juggle.core.actions.Reconfigure` and a :class:`~juggle.core.actions.Connect` for the
entering one. :func:`juggle.core.execute.execute` dispatches them, as it does every shell's
actions, to :class:`JuggleSteps`, which carries each out against the fabric and the proxies
like ``fpga_region_program_fpga``: each step that succeeded pushes its undo on the
:class:`JuggleAccount` account, and the caller runs the undos in reverse on any failure.
Afterwards every service serves from the tier it was on before, every region holds the design
of the service that serves from it or is empty or ERROR, and the next juggle works.

Disconnect (a service leaving the fabric): its proxies switch to its software tier (state
carried), the old hardware slots drain, the region is unloaded (unless the entering service
reuses it). Reconfigure: the region is programmed and the driver built on it. Connect: the
proxies switch to hardware (state carried onto the virtual devices), the old software slots
drain. A leaving service whose design was overwritten or unloaded before a later step failed
is programmed back.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from juggle.core.actions import (
    Action,
    Connect,
    Disconnect,
    Reconfigure,
    RestoreContext,
    SaveContext,
    Signal,
    Solution,
    StopAtConsistencyPoint,
)
from juggle.core.execute import execute
from juggle.core.placement import JugglePlan
from juggle.core.tiers import Tier
from juggle.errors import (
    FabricError,
    HardwareFaultError,
    JuggleError,
    UnknownActionError,
    UnknownServiceError,
)
from juggle.fabric.bitstream import Bitstream
from juggle.fabric.fabric import Fabric
from juggle.fabric.region import RegionState
from juggle.runtime.hardware import HardwareCore
from juggle.runtime.options import FrameworkOptions
from juggle.runtime.proxy import binding_of
from juggle.runtime.services import ManagedService, Switched
from juggle.runtime.table import ServiceTable
from juggle.runtime.tenancy import SYSTEM_TENANT

__all__ = ["ActionMemo", "JuggleAccount", "JuggleSteps", "device_name", "juggle_actions"]

log = logging.getLogger("juggle")

Undo = Callable[[], None]


@dataclass(slots=True)
class JuggleAccount:
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


def device_name(m: ManagedService) -> str:
    """How a juggle's actions name ``m``'s device: its service id."""
    return str(m.service_id)


#: actions already written, by what determines them (see :func:`juggle_actions`)
ActionMemo = dict[tuple[object, ...], tuple[Action, ...]]
#: entries an :data:`ActionMemo` keeps before it starts afresh
MEMO_LIMIT = 256


def juggle_actions(
    plan: JugglePlan,
    entering: ManagedService | None,
    leaving: Sequence[ManagedService],
    fabric: Fabric,
    memo: ActionMemo | None = None,
) -> list[Action]:
    """``plan`` as the actions that carry it out, in order: each leaving service is
    disconnected from its region; the entering one's region (if the plan gives it one) is
    reconfigured with its bitstream, then connected. ``memo`` keeps the actions written for
    a service and region (and bitstream), so a juggle that repeats makes none anew."""
    if memo is None:
        memo = {}
    elif len(memo) >= MEMO_LIMIT:
        memo.clear()
    actions: list[Action] = []
    for m in leaving:
        region = m.region
        assert region is not None
        found = memo.get((m.service_id, region))
        if found is None:
            found = memo[m.service_id, region] = (
                Disconnect(SYSTEM_TENANT, device_name(m), region),
            )
        actions += found
    region = plan.region
    if entering is not None and region is not None:
        assert entering.hardware is not None
        bitstream = entering.hardware.bitstreams[region][0]
        key = (entering.service_id, region, bitstream.design, bitstream.size)
        found = memo.get(key)
        if found is None:
            found = memo[key] = _enter(entering, region, bitstream, fabric)
        actions += found
    return actions


def _enter(
    m: ManagedService, region: str, bitstream: Bitstream, fabric: Fabric
) -> tuple[Action, ...]:
    """The actions that put ``m`` into ``region`` with ``bitstream``."""
    name = device_name(m)
    t_rcfg_us = float(fabric.profile.config_port.transfer_ps(bitstream.size)) / 1e6
    return (
        Reconfigure(region, name, bitstream.design, bitstream.size, t_rcfg_us),
        Connect(SYSTEM_TENANT, name, region),
    )


class JuggleSteps:
    """The juggle's operations table (:class:`juggle.core.execute.Operations`): carries out
    a juggle's actions on ``fabric`` for the services of ``table`` (each named by
    :func:`device_name`). One serves every juggle of a juggler; :meth:`run` runs one."""

    __slots__ = (
        "_account",
        "_core",
        "_entering_region",
        "_fabric",
        "_moving",
        "_options",
        "_table",
    )

    def __init__(self, fabric: Fabric, options: FrameworkOptions, table: ServiceTable) -> None:
        self._fabric = fabric
        self._options = options
        self._table = table
        # the juggle running now: its account, services, and where the entering one goes
        self._account = JuggleAccount()
        self._moving: Sequence[ManagedService] = ()
        self._entering_region: str | None = None
        self._core: HardwareCore | None = None  # reconfigured, to connect

    def run(
        self,
        actions: Iterable[Action],
        account: JuggleAccount,
        moving: Sequence[ManagedService],
        region: str | None,
    ) -> None:
        """Carry out ``actions`` (through :func:`juggle.core.execute.execute`) on the
        ``moving`` services they name, noting each step and its undo on ``account``;
        ``region`` is where the plan puts the entering service (a leaving service's region it
        reuses is not unloaded). Raises what the failing step raised (the caller rolls
        ``account`` back), or :class:`UnknownServiceError` for a device none of ``moving``."""
        outer = self._account, self._moving, self._entering_region, self._core
        self._account, self._moving, self._entering_region, self._core = (
            account,
            moving,
            region,
            None,
        )
        try:
            execute(self, actions)
        finally:
            self._account, self._moving, self._entering_region, self._core = outer

    def _service(self, device: str) -> ManagedService:
        for m in self._moving:
            if device_name(m) == device:
                return m
        raise UnknownServiceError(
            f"a juggle's action names device {device!r}: no such service", value=device
        )

    # -- the juggle's steps ------------------------------------------------------------------

    def disconnect(self, action: Disconnect) -> None:
        """A service leaves ``action.region``: proxies to its home tier (state carried), old
        slots drained, the region unloaded unless the entering service reuses it."""
        m = self._service(action.device)
        region, core, account = action.region, m.core, self._account
        assert m.region == region and core is not None
        versions = m.versions()
        switched = m.switch(m.home_tier)
        account.did(
            f"proxies of service {m.service_id} switched to {m.home_tier}",
            lambda: self._back_to_hardware(m, region, core, switched, versions),
            f"service {m.service_id} back in hardware",
        )
        self._drain(m, switched)
        self._table.bank_modeled_time(m)
        if region != self._entering_region:
            unloaded = self._fabric.unload(region)
            account.bridge_ms += unloaded.bridge_ms
            account.did(f"bridge closed on {region}; region released")
        m.region, m.core = None, None

    def reconfigure(self, action: Reconfigure) -> None:
        """Program the entering service's bitstream into ``action.region`` and build its
        driver there (the region is emptied again if a later step fails)."""
        m = self._service(action.device)
        core = self._program(m, action.region)
        self._account.did(
            f"driver {type(core.driver).__name__} loaded",
            lambda: self._unload_quietly(action.region),
            f"region {action.region} emptied",
        )
        self._core = core

    def connect(self, action: Connect) -> None:
        """The entering service serves from ``action.region``: its proxies switch to the
        core reconfigured there (state carried), the old slots drain."""
        m = self._service(action.device)
        region, core = action.region, self._core
        assert core is not None and core.region == region
        m.core = core
        self._table.enter_region(m, region)
        versions = m.versions()
        try:
            switched = m.switch(Tier.HARDWARE)
        except BaseException:
            m.core, m.region = None, None
            raise
        self._account.did(
            f"proxies of service {m.service_id} switched to hardware",
            lambda: self._back_to_soft(m, switched, versions),
            f"service {m.service_id} stays in {switched.previous}",
        )
        if core.fault is not None:  # the driver failed while taking over the state
            raise HardwareFaultError(
                f"service {m.label}: the core in {region!r} failed while the state was carried "
                f"onto it: {core.fault}",
                service_id=m.service_id,
                region=region,
            )
        self._drain(m, switched)

    # -- actions that are no step of a juggle ------------------------------------------------

    def save_context(self, action: SaveContext) -> None:
        """Refused: a juggle carries state through the proxies, never by a context save."""
        raise _not_a_step(action)

    def restore_context(self, action: RestoreContext) -> None:
        """Refused: a juggle carries state through the proxies, never by a context restore."""
        raise _not_a_step(action)

    def stop_at_consistency_point(self, action: StopAtConsistencyPoint) -> None:
        """Refused: a juggle drains running calls instead of stopping a task."""
        raise _not_a_step(action)

    def signal(self, action: Signal) -> None:
        """Refused: the framework's own tenant is never signalled."""
        raise _not_a_step(action)

    def solution(self, action: Solution) -> None:
        """Refused: a juggle is decided before its steps run, never announced later."""
        raise _not_a_step(action)

    # -- undos -------------------------------------------------------------------------------

    def _back_to_hardware(
        self,
        m: ManagedService,
        region: str,
        core: HardwareCore,
        switched: Switched,
        versions: tuple[int, ...],
    ) -> None:
        """Undo of a leave: ``m`` serves from ``region`` again. Where its core is untouched
        the proxies go back to their virtual devices (the state they hold is carried only if
        it changed meanwhile); else the region is programmed anew and the state carried."""
        snap = self._fabric.region(region).snapshot()
        assert m.hardware is not None
        bitstream, _ = m.hardware.bitstreams[region]
        intact = snap.state is RegionState.PROGRAMMED and snap.design == bitstream.design
        if intact and not core.fault and m.region == region:
            m.core = core
            m.revert(switched, carry=m.versions() != versions)
            return
        m.core = self._program(m, region)
        self._table.enter_region(m, region)
        try:
            m.switch(Tier.HARDWARE)
        except BaseException:
            m.core, m.region = None, None
            self._unload_quietly(region)
            raise

    def _back_to_soft(
        self, m: ManagedService, switched: Switched, versions: tuple[int, ...]
    ) -> None:
        """Undo of a connect: the proxies go back to the implementations they had (carrying
        the state only if it changed meanwhile); the hardware slots drain before the region is
        emptied (calls still on them finish, or fall back to software when it is cut)."""
        core = m.core
        back = Switched(Tier.HARDWARE, [])
        with m.lock:
            for proxy, _ in switched.slots:
                back.slots.append((proxy, binding_of(proxy).dispatcher.slot))
            m.revert(switched, carry=m.versions() != versions)
        m.core, m.region = None, None
        m.devices.clear()
        try:
            m.drain(back, self._options.drain_timeout_s)
        except JuggleError:
            if core is not None:
                core.quarantine("the juggle into hardware was undone")

    # -- helpers -----------------------------------------------------------------------------

    def _program(self, m: ManagedService, region: str) -> HardwareCore:
        """Program ``m``'s bitstream into ``region`` and build its driver there."""
        assert m.hardware is not None
        account = self._account
        bitstream = m.hardware.bitstreams[region][0]
        report = m.hardware.program(self._fabric, region, owner=f"service {m.service_id}")
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
                self._fabric.window(region),
                call_timeout_s=self._options.call_timeout_s,
            )
        except BaseException:
            self._unload_quietly(region)
            raise

    def _unload_quietly(self, region: str) -> None:
        """Empty ``region`` after a failure; if even that fails it stays ERROR or loaded with
        nobody serving from it, which the next juggle may reprogram."""
        with contextlib.suppress(FabricError):
            self._fabric.unload(region)

    def _drain(self, m: ManagedService, switched: Switched) -> None:
        t0 = time.perf_counter()
        try:
            self._account.waited_s += m.drain(switched, self._options.drain_timeout_s)
        except BaseException:
            self._account.waited_s += time.perf_counter() - t0  # timed out: all of it waiting
            raise

    def __repr__(self) -> str:
        return f"<JuggleSteps {len(self._account.steps)} steps, {len(self._account.undo)} undos>"


def _not_a_step(action: Action) -> UnknownActionError:
    """The error for ``action``, which :func:`juggle_actions` never writes into a juggle."""
    return UnknownActionError(
        f"a juggle's steps are Disconnect, Reconfigure and Connect; {action!r:.120} is none",
        value=type(action).__name__,
    )
