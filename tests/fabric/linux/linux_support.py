"""Helpers of the Linux backend tests: a kv260 fake kernel with the 2-RP base shell in its
firmware folder, and a register model where the backend maps a slot's UIO device."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from juggle.errors import RegionEmptyError
from juggle.fabric.bitstream import build_vendor_bit, to_bin
from juggle.fabric.linux.busguard import GuardedMap
from juggle.fabric.linux.fake import FakeKernel
from juggle.fabric.linux.fdt import UioNode, build_overlay

KV_PART = "xck26-sfvc784-2LV-c"
SHELL_IMAGE = "opendfx_shell_wrapper.bit.bin"
SHELL_DTBO = "opendfx_shell_wrapper.dtbo"
SIHA = 0xA010_0000


def kv260_fake(root: Path, *, shell_nodes: tuple[UioNode, ...] = ()) -> FakeKernel:
    """A kv260-like fake whose firmware folder holds the 2-RP base shell (a full image) and
    its overlay, which declares the ``SIHA_Manager`` isolation window (and ``shell_nodes``)."""
    kernel = FakeKernel(root, part=KV_PART, family="zynqmp")
    shell = build_vendor_bit("opendfx_shell", KV_PART, partial=False)
    kernel.write_file(f"lib/firmware/{SHELL_IMAGE}", to_bin(shell))
    siha = UioNode(node="SIHA_Manager", reg=(SIHA, 0x10000))
    blob = build_overlay(firmware_name=SHELL_IMAGE, target="fpga_full", uio=[siha, *shell_nodes])
    kernel.write_file(f"lib/firmware/{SHELL_DTBO}", blob)
    return kernel


class ModelMap:
    """A register model (``ModelMap.core``, set by the test) where the backend maps the
    slot's ``AccelConfig`` UIO device: the core's logic behind the fake's ``/dev/uioN`` file;
    every other device maps the file itself (the fake cannot run logic behind a file)."""

    core: Any = None

    def __init__(self, path: str | Path, length: int, *, offset: int = 0) -> None:
        self.path = str(path)
        self._now = 0
        root = Path(path).parents[1]
        name = (root / "sys/class/uio" / Path(path).name / "name").read_text().strip()
        self._file = None if name == "AccelConfig" else GuardedMap(path, length, offset=offset)
        self._closed = False

    def read32(self, off: int) -> int:
        if self._file is not None:
            return self._file.read32(off)
        if self._closed:
            raise RegionEmptyError("closed", self.path)
        self._now += 1_000_000
        return int(ModelMap.core.read(off, self._now))

    def write32(self, off: int, value: int) -> None:
        if self._file is not None:
            self._file.write32(off, value)
            return
        if self._closed:
            raise RegionEmptyError("closed", self.path)
        self._now += 1_000_000
        ModelMap.core.write(off, value, self._now)

    def close(self) -> None:
        self._closed = True
        if self._file is not None:
            self._file.close()
