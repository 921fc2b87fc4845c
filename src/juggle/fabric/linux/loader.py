"""How a slot's design reaches the kernel, and what the static shell says about each slot.

A *loader* puts one partial design into one slot of the static shell and takes it out again.
Three exist: ``overlay`` (a device-tree overlay applied through configfs: the kernel's
fpga-region programs the firmware the overlay names and switches its bridges), ``sysfs``
(Xilinx kernels: ``flags`` and ``firmware`` of the FPGA manager) and ``dfx-mgrd`` (AMD's
daemon owns ``fpga0``; juggle asks it over its socket). The backend chooses one by the
profile's ``[linux]`` table, or dfx-mgrd when its socket answers; never two at once.

The shell (:class:`ShellSpec`) comes from the profile's ``[shell]`` table or a dfx-mgr
package's ``shell.json``: the base design, and per slot the register writes that isolate it
and release it from isolation (dfx-mgr's ``isolation_slots``) and the UIO windows its design
brings (by UIO name). A slot's window is never touched while the slot is isolated or empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["IsolationWrite", "Loader", "ShellSpec", "SlotLoad", "SlotSpec"]


@dataclass(frozen=True, slots=True)
class SlotLoad:
    """One partial design for one slot, ready for the kernel.

    ``image`` is the kernel-ready bitstream (converted for the family's manager:
    :func:`juggle.fabric.bitstream.kernel_image`), staged as ``firmware_name`` where the
    kernel's firmware loader looks. ``overlay`` is the slot's device-tree overlay blob
    (``.dtbo``) when the load path needs one; ``package`` the dfx-mgr accelerator name when
    the design came from a dfx-mgr package.
    """

    region: str
    slot: int
    design: str
    image: bytes
    firmware_name: str
    overlay: bytes | None = None
    package: str | None = None
    partial: bool = True


class Loader(Protocol):
    """Puts designs into slots and takes them out (see the module doc)."""

    name: str

    def load(self, job: SlotLoad) -> None:
        """Load ``job``; raises :class:`~juggle.errors.ProgrammingError` naming the kernel's
        (or dfx-mgrd's) state and status text when it did not take."""
        ...

    def unload(self, region: str) -> None:
        """Take the design out of ``region``'s slot (nothing loaded: no-op)."""
        ...

    def loaded(self) -> Mapping[str, str]:
        """Region -> design of every slot this loader holds now."""
        ...


@dataclass(frozen=True, slots=True)
class IsolationWrite:
    """One 32-bit register write on the shell's isolation window: ``value`` at ``offset``."""

    offset: int
    value: int


@dataclass(frozen=True, slots=True)
class SlotSpec:
    """One slot of the shell: the juggle region it is, its index, the writes that isolate it
    (before an unload) and release it (after a load, before any access), and its design's
    register windows: window name -> UIO name (node name or ``linux,uio-name``)."""

    region: str
    slot: int
    isolate: tuple[IsolationWrite, ...] = ()
    release: tuple[IsolationWrite, ...] = ()
    windows: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ShellSpec:
    """The static shell: its name, the base design (full image and overlay, as file names in
    the firmware folder), its ``uid`` when it has one, the UIO name of its isolation window
    (None: the kernel's bridges isolate, through the overlay), and its slots."""

    name: str
    slots: tuple[SlotSpec, ...]
    base_image: str | None = None
    base_overlay: str | None = None
    uid: int | None = None
    isolation_uio: str | None = None

    def slot(self, region: str) -> SlotSpec:
        """The slot that is ``region`` (KeyError when none)."""
        for spec in self.slots:
            if spec.region == region:
                return spec
        raise KeyError(region)
