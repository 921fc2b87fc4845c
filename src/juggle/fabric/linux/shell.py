"""The static shell: which one is loaded, and each slot's isolation.

A DFX design is a static *shell* with reconfigurable *slots* (Kria's 2-RP DFX shell has RP_0
and RP_1). The shell comes from the profile's ``[shell]`` table or a dfx-mgr package's
``shell.json`` (:class:`~juggle.fabric.linux.loader.ShellSpec`).

A slot is isolated from the rest of the system while its logic is being replaced, and a
register access to an isolated (decoupled, held in reset) slot stalls the bus or raises
SIGBUS. Two ways to isolate exist, and the shell says which:

* register writes on the shell's own UIO window (``isolation_uio``): the DFX decoupler /
  SIHA manager of Kria shells. dfx-mgr's ``shell.json`` lists them per slot as
  ``isolation_slots`` (offsets and values); juggle writes ``release`` after a load, before
  any register access of the slot, and ``isolate`` before an unload, through a
  :class:`~juggle.fabric.linux.busguard.GuardedMap` (so even a faulty shell is a
  :class:`~juggle.errors.BusFaultError`, not a crash).
* the kernel's bridges: an fpga-region switches the bridges its overlay lists around the
  load (Documentation/devicetree/bindings/fpga/fpga-region: "fpga-bridges"). User space
  writes nothing: mainline ``fpga_bridge`` has a read-only ``name`` and ``state``
  (Documentation/ABI/testing/sysfs-class-fpga-bridge), so juggle never writes to it. The
  slot's isolation is then bookkeeping: released while its overlay is applied.

Either way each slot has a :class:`~juggle.fabric.linux.uio.SlotGate` its windows check on
every access: open only between a release and the next isolation, so a slot's window is never
touched while the slot is isolated or its design unloaded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from juggle.errors import BackendError, BridgeError, FabricError, JuggleError
from juggle.fabric.linux.busguard import GuardedMap
from juggle.fabric.linux.loader import IsolationWrite, ShellSpec, SlotSpec
from juggle.fabric.linux.sysfs import SysfsOps
from juggle.fabric.linux.uio import SlotGate, read_uio_map, wait_for_uio

__all__ = ["ShellControl", "ShellStatus", "SlotBridgeOps", "blob_loads"]

_OVERLAYS = "sys/kernel/config/device-tree/overlays"


@dataclass(frozen=True, slots=True)
class ShellStatus:
    """What open found: the shell's name, whether it is loaded, the configfs overlay that
    holds it (None: loaded at boot or not found) and what is missing when it is not."""

    name: str
    loaded: bool
    overlay: str | None
    missing: tuple[str, ...] = ()


def applied_overlays(sysfs: SysfsOps) -> dict[str, str]:
    """configfs overlay directory -> its ``path`` (empty when applied through ``dtbo``), for
    every overlay whose ``status`` reads ``applied`` (drivers/of/configfs.c)."""
    found: dict[str, str] = {}
    for entry in sysfs.listdir(_OVERLAYS):
        try:
            status = sysfs.read(f"{_OVERLAYS}/{entry}/status").strip()
        except OSError:
            continue
        if status != "applied":
            continue
        try:
            found[entry] = sysfs.read(f"{_OVERLAYS}/{entry}/path").strip()
        except OSError:
            found[entry] = ""
    return found


def blob_loads(blob: bytes | None, source: str, image: str | None) -> bool:
    """Whether the overlay ``blob`` (read back from an applied item's ``dtbo`` attribute:
    drivers/of/configfs.c ``cfs_overlay_item_dtbo_read``; dfx-mgrd applies blobs, so the item's
    ``path`` is empty) names ``image`` as its ``firmware-name``. A missing, empty or malformed
    blob names nothing."""
    if image is None or not blob:
        return False
    from juggle.fabric.linux.fdt import read_overlay

    try:
        name = read_overlay(blob, source=source).firmware_name
    except JuggleError:
        return False
    return name is not None and name.rsplit("/", 1)[-1] == image


def _blob_loads(sysfs: SysfsOps, entry: str, image: str | None) -> bool:
    """:func:`blob_loads` of overlay ``entry``'s ``dtbo`` attribute."""
    if image is None:
        return False
    attribute = f"{_OVERLAYS}/{entry}/dtbo"
    try:
        blob = sysfs.read_bytes(attribute)
    except OSError:
        return False
    return blob_loads(blob, attribute, image)


def shell_status(sysfs: SysfsOps, spec: ShellSpec) -> ShellStatus:
    """Whether ``spec`` is the loaded shell, judged from what the kernel shows: its base
    overlay applied (an overlay whose ``path`` names ``base_overlay``, or one applied through
    its ``dtbo`` attribute whose ``firmware-name`` is ``base_image``) and its isolation
    window present (a UIO device named ``isolation_uio``). Changes nothing."""
    missing: list[str] = []
    overlay: str | None = None
    if spec.base_overlay is not None:
        applied = applied_overlays(sysfs)
        for entry, path in applied.items():
            if path.rsplit("/", 1)[-1] == spec.base_overlay or (
                not path and _blob_loads(sysfs, entry, spec.base_image)
            ):
                overlay = entry
                break
        else:
            missing.append(
                f"overlay {spec.base_overlay!r} is not applied (applied: "
                f"{', '.join(f'{e}={p!r}' for e, p in applied.items()) or 'none'})"
            )
    if spec.isolation_uio is not None:
        names = set()
        for device in sysfs.listdir("sys/class/uio"):
            try:
                names.add(sysfs.read(f"sys/class/uio/{device}/name").strip())
            except OSError:
                continue
        if spec.isolation_uio not in names:
            missing.append(f"no UIO device named {spec.isolation_uio!r} (the isolation window)")
    return ShellStatus(spec.name, not missing, overlay, tuple(missing))


class ShellControl:
    """The shell's slots: gates, isolation state and the isolation window.

    ``spec`` None is a board without a described shell: every region is a slot isolated by
    the kernel's bridges. ``load_base`` (the loader's) applies the base design when open finds
    it missing and ``load_shell`` asks for it.
    """

    def __init__(
        self,
        sysfs: SysfsOps,
        spec: ShellSpec | None,
        regions: tuple[str, ...],
        *,
        uio_timeout_s: float,
        trace: Callable[[str], None] | None = None,
    ) -> None:
        self._sysfs = sysfs
        self.spec = spec
        self._trace = trace
        self._lock = threading.Lock()
        slots = {s.region: s for s in spec.slots} if spec is not None else {}
        unknown = sorted(set(slots) - set(regions))
        if unknown:
            raise BackendError(
                f"shell {spec.name if spec else ''!r} has slots for {unknown}, which the "
                f"profile has no regions for (regions: {', '.join(regions)})",
                region=unknown[0],
            )
        self.slots: dict[str, SlotSpec] = {
            r: slots.get(r, SlotSpec(region=r, slot=i)) for i, r in enumerate(regions)
        }
        self.gates: dict[str, SlotGate] = {r: SlotGate(r) for r in regions}
        self._released: dict[str, bool] = dict.fromkeys(regions, False)
        self._timeout = uio_timeout_s
        self._window: GuardedMap | None = None
        self._window_base = 0
        self._window_bytes = 0
        self.status: ShellStatus | None = None

    @property
    def isolates_by_register(self) -> bool:
        """Whether isolation is register writes on the shell's UIO (else: kernel bridges)."""
        return self.spec is not None and self.spec.isolation_uio is not None

    def open(self, *, load_shell: bool, load_base: Callable[[ShellSpec], None] | None) -> None:
        """Check the shell is loaded (loading it first when ``load_shell``), then map its
        isolation window. Raises :class:`~juggle.errors.BackendError` naming what is missing."""
        spec = self.spec
        if spec is None:
            return
        status = shell_status(self._sysfs, spec)
        if not status.loaded and load_shell:
            if load_base is None or (spec.base_image is None and spec.base_overlay is None):
                raise BackendError(
                    f"shell {spec.name!r} is not loaded ({'; '.join(status.missing)}) and "
                    "names no base design to load",
                    design=spec.name,
                )
            load_base(spec)
            if spec.isolation_uio is not None:
                wait_for_uio(self._sysfs, spec.isolation_uio, timeout_s=self._timeout)
            status = shell_status(self._sysfs, spec)
        if not status.loaded:
            raise BackendError(
                f"shell {spec.name!r} is not loaded: {'; '.join(status.missing)} (load it, "
                "or pass load_shell=True to have juggle load its base design)",
                design=spec.name,
            )
        self.status = status
        if spec.isolation_uio is not None:
            device = wait_for_uio(self._sysfs, spec.isolation_uio, timeout_s=self._timeout)
            uio_map = read_uio_map(self._sysfs, device)
            path = self._sysfs.root / "dev" / device
            try:
                self._window = GuardedMap(path, uio_map.size, offset=0)
            except (OSError, ValueError) as exc:
                raise BackendError(
                    f"cannot map the shell's isolation window {device} ({spec.isolation_uio!r}):"
                    f" {exc}",
                    path=device,
                ) from exc
            self._window_base, self._window_bytes = uio_map.offset, uio_map.window_bytes
            for slot in self.slots.values():
                for write in (*slot.isolate, *slot.release):
                    if not 0 <= write.offset <= self._window_bytes - 4:
                        raise BackendError(
                            f"shell {spec.name!r} slot {slot.region!r}: isolation offset "
                            f"{write.offset:#x} is outside the {self._window_bytes:#x}-byte "
                            f"window of {device}",
                            region=slot.region,
                            path=device,
                            value=write.offset,
                        )

    def released(self, region: str) -> bool:
        """Whether ``region``'s slot is released from isolation."""
        return self._released[region]

    def release(self, region: str) -> None:
        """Take ``region``'s slot out of isolation (its design was just loaded) and open its
        gate. Raises :class:`~juggle.errors.BridgeError` when a write fails."""
        with self._lock:
            self._write(region, self.slots[region].release, "release")
            self._released[region] = True
            self.gates[region].open = True

    def isolate(self, region: str, why: str = "the slot is isolated") -> None:
        """Shut ``region``'s gate, then isolate its slot (before an unload or a load).
        Raises :class:`~juggle.errors.BridgeError` when a write fails (the gate stays shut)."""
        with self._lock:
            self.gates[region].close(why)
            self._write(region, self.slots[region].isolate, "isolate")
            self._released[region] = False

    def _write(self, region: str, writes: tuple[IsolationWrite, ...], what: str) -> None:
        if self._trace is not None:
            self._trace(f"{what} {region}")
        if not writes:
            return
        window = self._window
        if window is None:
            raise BridgeError(
                f"slot {region!r}: the shell's isolation window is closed", region=region
            )
        for write in writes:
            try:
                window.write32(self._window_base + write.offset, write.value)
            except (FabricError, OSError) as exc:
                raise BridgeError(
                    f"slot {region!r}: {what} write {write.value:#x} at {write.offset:#x} "
                    f"failed: {exc}",
                    region=region,
                ) from exc

    def describe(self) -> Mapping[str, object]:
        """A plain summary (for reports): shell name, loaded, per-slot released."""
        return {
            "shell": self.spec.name if self.spec else None,
            "loaded": self.status.loaded if self.status else self.spec is None,
            "released": dict(self._released),
        }

    def close(self) -> None:
        """Unmap the isolation window."""
        window, self._window = self._window, None
        if window is not None:
            window.close()


class SlotBridgeOps:
    """``BridgeOps`` of one slot: enabling releases it from isolation, disabling isolates it.

    Enabling a slot whose design is not loaded is refused (a released empty slot would let a
    window be touched with nothing behind it).
    """

    def __init__(self, shell: ShellControl, region: str, loaded: Callable[[str], bool]) -> None:
        self._shell = shell
        self._region = region
        self._loaded = loaded

    def enable_set(self, enable: bool) -> None:
        """Release (True) or isolate (False) the slot."""
        if enable:
            if not self._loaded(self._region):
                raise BridgeError(
                    f"slot {self._region!r} holds no loaded design: it stays isolated",
                    region=self._region,
                )
            self._shell.release(self._region)
        else:
            self._shell.isolate(self._region)

    def enable_show(self) -> bool:
        """Whether the slot is released."""
        return self._shell.released(self._region)

    def __repr__(self) -> str:
        return f"<SlotBridgeOps {self._region}>"
