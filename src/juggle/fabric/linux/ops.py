"""The Linux backend's operation tables: the manager's steps over a loader, slots as bridges.

The fabric's orchestration (:mod:`juggle.fabric.region`, ARCHITECTURE principle 2) drives
one manager and one bridge per region, in this order for a program: close the bridge,
detach the old window, ``write_init`` / ``write`` / ``write_complete``, open the bridge,
attach. On Linux those steps map onto the kernel like this:

* bridge closed = the slot isolated (:class:`~juggle.fabric.linux.shell.SlotBridgeOps`:
  the shell's isolation writes, or bookkeeping where the kernel's bridges isolate through the
  overlay; nothing is ever written to ``fpga_bridge`` sysfs, whose ``name`` and ``state``
  are read-only: Documentation/ABI/testing/sysfs-class-fpga-bridge);
* ``write_init`` takes the slot's previous design out (the loader's ``unload``: ``rmdir``
  of its overlay) and starts collecting the file; ``write`` collects it;
  ``write_complete`` converts it for the family's manager
  (:func:`juggle.fabric.bitstream.kernel_image`: header stripped, words swapped for the
  Zynq-7000 PCAP) and hands it to the loader (overlay, sysfs or dfx-mgrd), which stages it
  where the kernel's firmware loader looks and checks the kernel took it;
* bridge opened = the slot released (after the load, before any register access);
* unloading a region isolates it, then the backend's ``unload`` asks the loader to take the
  design out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from juggle.errors import ProgrammingError
from juggle.fabric.bitstream import Bitstream, kernel_image
from juggle.fabric.linux.loader import Loader, SlotLoad
from juggle.fabric.linux.shell import SlotBridgeOps

__all__ = [
    "TOY_FAMILY",
    "DesignExtras",
    "LinuxBridgeOps",
    "LinuxManagerOps",
    "SoftBridgeOps",
    "firmware_name",
]

#: kept under its old name: a slot's bridge is its isolation (see the module doc)
LinuxBridgeOps = SlotBridgeOps

_SAFE = re.compile(r"[^A-Za-z0-9_.-]")
#: juggle's own teaching family: its .bit goes to the (fake) kernel as it is
TOY_FAMILY = "virtex2p"


def firmware_name(region: str, design: str, fmt: str) -> str:
    """The file name an image is staged under: ``juggle-<region>-<design>.bit.bin`` (``.pdi``
    for a Versal image), characters the kernel's firmware loader or dfx-mgrd's request parser
    would trip on replaced."""
    suffix = ".pdi" if fmt == "pdi" else ".bit.bin"
    return f"juggle-{_SAFE.sub('_', region)}-{_SAFE.sub('_', design)}{suffix}"


@dataclass(frozen=True, slots=True)
class DesignExtras:
    """What a design brings beside its bitstream: its own overlay blob (a dfx-mgr package's
    ``.dtbo``) and its dfx-mgr accelerator name."""

    overlay: bytes | None = None
    package: str | None = None


class LinuxManagerOps:
    """``ManagerOps`` over a :class:`~juggle.fabric.linux.loader.Loader` (see the module doc).

    ``slots`` maps a region to its slot index; ``extras`` returns what a design brings beside
    its bitstream; ``state`` reads the device's state (the FPGA manager's ``state``).
    """

    def __init__(
        self,
        loader: Loader,
        *,
        family: str,
        slots: Mapping[str, int],
        extras: Callable[[str], DesignExtras],
        state: Callable[[], str],
        trace: Callable[[str], None] | None = None,
    ) -> None:
        self.loader = loader
        self.family = family
        self._slots = dict(slots)
        self._extras = extras
        self._state = state
        self._trace = trace
        self._bitstream: Bitstream | None = None
        self._region: str | None = None
        self._chunks: list[bytes] = []

    @property
    def directory(self) -> str:
        """What the manager loads through (the loader's name)."""
        return self.loader.name

    def write_init(self, bitstream: Bitstream) -> None:
        """Take the slot's previous design out and start collecting ``bitstream``'s file.

        Raises :class:`~juggle.errors.ProgrammingError` for a bitstream naming no slot."""
        region = bitstream.region
        if region is None or region not in self._slots:
            raise ProgrammingError(
                f"bitstream {bitstream.source!r} names no slot of this shell (region "
                f"{region!r}; slots: {', '.join(self._slots)})",
                region=region,
                design=bitstream.design,
            )
        self._bitstream, self._region, self._chunks = None, None, []
        if region in self.loader.loaded():
            if self._trace is not None:
                self._trace(f"unload {region}")
            self.loader.unload(region)
        self._bitstream, self._region = bitstream, region

    def write(self, chunk: bytes) -> None:
        """Collect ``chunk``."""
        if self._bitstream is None:
            raise ProgrammingError("write before write_init", path=self.directory)
        self._chunks.append(chunk)

    def write_complete(self) -> None:
        """Convert the file for the family's manager and load it through the loader.

        Raises :class:`~juggle.errors.ProgrammingError` (the loader's, naming the kernel's
        state and status) and :class:`~juggle.errors.BitstreamError` from the conversion."""
        bitstream, region = self._bitstream, self._region
        data = b"".join(self._chunks)
        self._bitstream, self._region, self._chunks = None, None, []
        if bitstream is None or region is None:
            raise ProgrammingError("write_complete before write_init", path=self.directory)
        # virtex2p is juggle's toy family (the paper's XUPV2P board, no Linux manager driver):
        # its juggle .bit goes as the file is; every real family gets the converted image
        image = data if self.family == TOY_FAMILY else kernel_image(bitstream, data, self.family)
        extras = self._extras(bitstream.design)
        job = SlotLoad(
            region=region,
            slot=self._slots[region],
            design=bitstream.design,
            image=image,
            firmware_name=firmware_name(region, bitstream.design, bitstream.format),
            overlay=extras.overlay,
            package=extras.package,
            partial=bitstream.partial is not False,
        )
        if self._trace is not None:
            self._trace(f"load {region}")
        self.loader.load(job)

    def state(self) -> str:
        """The device's state, as the kernel reports it."""
        return self._state()

    def __repr__(self) -> str:
        return f"<LinuxManagerOps through {self.loader.name}, family {self.family}>"


class SoftBridgeOps:
    """A bridge kept in software only: for regions without a controllable decoupler."""

    def __init__(self) -> None:
        self._enabled = False

    def enable_set(self, enable: bool) -> None:
        """Remember the requested state (nothing is isolated in hardware)."""
        self._enabled = enable

    def enable_show(self) -> bool:
        """The remembered state."""
        return self._enabled
