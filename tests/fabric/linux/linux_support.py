"""Helpers of the Linux backend tests: a kv260 fake kernel with the 2-RP base shell in its
firmware folder, and a register model where the backend maps a slot's UIO device."""

from __future__ import annotations

import sys
import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import juggle
from juggle.errors import RegionEmptyError
from juggle.fabric import Fabric
from juggle.fabric.bitstream import build_vendor_bit, to_bin
from juggle.fabric.linux import uio as uio_module
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
            raise RegionEmptyError("closed", path=self.path)
        self._now += 1_000_000
        return int(ModelMap.core.read(off, self._now))

    def write32(self, off: int, value: int) -> None:
        if self._file is not None:
            self._file.write32(off, value)
            return
        if self._closed:
            raise RegionEmptyError("closed", path=self.path)
        self._now += 1_000_000
        ModelMap.core.write(off, value, self._now)

    def close(self) -> None:
        self._closed = True
        if self._file is not None:
            self._file.close()


def juggle_round_trip(
    fab: Fabric,
    module: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    messages: int = 24,
    first_tier: str | None = None,
    during: Callable[[juggle.Framework], None] | None = None,
    after: Callable[[juggle.Framework], None] | None = None,
) -> int:
    """Install the crc32 ``module`` on ``fab``, serve ``messages`` calls on its first tier
    (``first_tier`` when given), on rp0's hardware (the :class:`ModelMap` core serving them)
    and on software again; the number of failed calls. ``during(fw)`` runs while the service
    is on hardware, ``after(fw)`` once it is back and rp0 is EMPTY, before the framework
    closes."""
    fw = juggle.Framework(fabric=fab)
    failed = 0
    try:
        installed = fw.install(module)
        installed.start()
        crc = fw.get_service("crc.ChecksumService", consumer="app")
        code = sys.modules[f"{installed.namespace.package}.crc32_module"]
        ModelMap.core = code.Crc32Core()
        monkeypatch.setattr(uio_module, "GuardedMap", ModelMap)
        payloads = [bytes([i]) * (i + 1) for i in range(messages)]

        def call_all() -> None:
            nonlocal failed
            for message in payloads:
                try:
                    assert crc.crc32(message) == zlib.crc32(message)
                except Exception:  # counted: the acceptance is 0 failed calls
                    failed += 1

        call_all()
        if first_tier is not None:
            assert fw.services()[0].tier == first_tier
        fw.juggle(to_hardware=crc.service_id)
        service = fw.services()[0]
        assert service.tier == "hardware" and service.region == "rp0"
        operations = ModelMap.core.operations
        call_all()
        assert ModelMap.core.operations > operations  # the core served them
        if during is not None:
            during(fw)
        fw.juggle(to_software=[crc.service_id])
        assert fw.services()[0].tier != "hardware"
        call_all()
        assert fab.regions()[0].state == "EMPTY"
        if after is not None:
            after(fw)
    finally:
        fw.close()
    return failed


class Caller(threading.Thread):
    """Calls ``call(n)`` (the ``n``-th call: it returns what was wrong with the result, or
    None) until stopped; ``failures`` names every wrong result and every error."""

    def __init__(self, call: Callable[[int], str | None]) -> None:
        super().__init__(daemon=True)
        self.call = call
        self.calls = 0
        self.failures: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                wrong = self.call(self.calls)
                if wrong is not None:
                    self.failures.append(f"call {self.calls}: wrong result {wrong}")
            except Exception as exc:  # counted: the acceptance is 0 failed calls
                self.failures.append(f"call {self.calls}: {exc!r}")
            self.calls += 1
