"""The Linux backend's operation tables: FPGA Manager and bridges through sysfs.

Manager (``/sys/class/fpga_manager/fpgaN``): the kernel's sysfs ABI exposes ``name`` and
``state`` (``"operating"``, ``"write error"``, ...). Loading from user space uses the
``firmware`` and ``flags`` attributes of vendor kernels (Xilinx linux-xlnx: ``flags`` 1 =
partial bitstream, then writing a file name found in the firmware search path, e.g.
``/lib/firmware``, to ``firmware`` programs it). The three manager steps map onto that:
``write_init`` starts a staging file in the firmware directory, ``write`` appends chunks,
``write_complete`` sets ``flags``, names the file in ``firmware``, reads ``state`` back
(it must be ``"operating"``) and removes the staging file. Mainline kernels without
``firmware`` program only through fpga-region device-tree overlays, which juggle does not drive.

Bridges (``/sys/class/fpga_bridge/brN``): mainline shows ``state`` (``"enabled"`` /
``"disabled"``) read-only. Older Altera/socfpga kernels accept ``0``/``1`` in an ``enable``
attribute; juggle switches a bridge through that attribute when it exists and otherwise raises
:class:`~juggle.errors.BridgeError` (map such a region's bridge to ``None`` to run without
isolation, see :func:`juggle.fabric.linux.backend.open_linux_backend`).
"""

from __future__ import annotations

from juggle.errors import BridgeError, ProgrammingError
from juggle.fabric.bitstream import Bitstream
from juggle.fabric.linux.sysfs import SysfsOps

__all__ = ["LinuxBridgeOps", "LinuxManagerOps", "SoftBridgeOps"]


class LinuxManagerOps:
    """``ManagerOps`` over ``sys/class/fpga_manager/<manager>`` and a firmware directory."""

    def __init__(
        self, sysfs: SysfsOps, manager: str, *, firmware_dir: str, partial: bool = True
    ) -> None:
        self._sysfs = sysfs
        self._dir = f"sys/class/fpga_manager/{manager}"
        self._firmware_dir = firmware_dir.strip("/")
        self._partial = partial
        self._staged: str | None = None

    @property
    def directory(self) -> str:
        """The manager's sysfs directory, relative to the root."""
        return self._dir

    def write_init(self, bitstream: Bitstream) -> None:
        """Start the staging file ``juggle-<region>-<design>.bit`` in the firmware directory."""
        name = f"juggle-{bitstream.region or 'any'}-{bitstream.design}.bit"
        self._staged = name
        self._sysfs.write_file(f"{self._firmware_dir}/{name}", b"")

    def write(self, chunk: bytes) -> None:
        """Append ``chunk`` to the staging file."""
        if self._staged is None:
            raise ProgrammingError("write before write_init", self._dir)
        self._sysfs.write_file(f"{self._firmware_dir}/{self._staged}", chunk, append=True)

    def write_complete(self) -> None:
        """Ask the kernel to load the staged file; it must then report ``"operating"``.

        Raises :class:`~juggle.errors.ProgrammingError` naming the state the kernel reports.
        """
        name, self._staged = self._staged, None
        if name is None:
            raise ProgrammingError("write_complete before write_init", self._dir)
        try:
            if self._sysfs.exists(f"{self._dir}/flags"):
                self._sysfs.write(f"{self._dir}/flags", "1" if self._partial else "0")
            try:
                self._sysfs.write(f"{self._dir}/firmware", name)
            except OSError as exc:
                raise ProgrammingError(
                    f"{self._dir}/firmware refused {name!r}: {exc} (state {self.state()!r})",
                    self._dir,
                ) from exc
            state = self.state()
            if state != "operating":
                raise ProgrammingError(
                    f"{self._dir} reports {state!r} after loading {name!r}", self._dir
                )
        finally:
            self._sysfs.remove(f"{self._firmware_dir}/{name}")

    def state(self) -> str:
        """The kernel's ``state`` attribute, stripped."""
        return self._sysfs.read(f"{self._dir}/state").strip()

    def __repr__(self) -> str:
        return f"<LinuxManagerOps {self._dir}>"


class LinuxBridgeOps:
    """``BridgeOps`` over ``sys/class/fpga_bridge/<bridge>`` (``state``, ``enable``)."""

    def __init__(self, sysfs: SysfsOps, bridge: str) -> None:
        self._sysfs = sysfs
        self._dir = f"sys/class/fpga_bridge/{bridge}"

    def enable_set(self, enable: bool) -> None:
        """Write ``1``/``0`` to ``enable``.

        Raises :class:`~juggle.errors.BridgeError` when the bridge has no writable control.
        """
        control = f"{self._dir}/enable"
        if not self._sysfs.exists(control):
            raise BridgeError(
                f"{self._dir} has no 'enable' attribute: this kernel switches bridges only "
                "through fpga-region; map the region's bridge to None to run without one",
                self._dir,
            )
        self._sysfs.write(control, "1" if enable else "0")

    def enable_show(self) -> bool:
        """Whether ``state`` reads ``enabled``."""
        return self._sysfs.read(f"{self._dir}/state").strip() == "enabled"

    def __repr__(self) -> str:
        return f"<LinuxBridgeOps {self._dir}>"


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
