"""A bus error on the real Linux backend is a hardware fault, not a crash (issue 20, item 5).

The kv260-like fake kernel with the base shell applied through its overlay; a CRC-32 service is
juggled into ``rp0`` through the overlay path, so its register window is the backend's own
:class:`~juggle.fabric.linux.uio.UioWindow` over the fake's ``dev/uioN`` (``AccelConfig``).
Truncating that file under the mapping makes the next access to the mapped page raise a real
SIGBUS in the calling thread (mmap(2), "SIGBUS"), as a decoupled slot's window does on a board;
the guard turns it into :class:`~juggle.errors.BusFaultError` and the runtime's fault
containment serves the calls in software and puts the region in ERROR.

The fake cannot run logic behind ``/dev/uioN``: the window's map is the real guarded mapping
of the file (every access touches the mapped page first, so the SIGBUS is real), and the core's
behaviour comes from the module's register model, consulted after the mapped access succeeds.

Also here: the ``linux`` bench group's ``linux_program_us_p50`` is reported, finite, measured.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from linux_support import KV_PART, Caller, kv260_fake

import juggle
from juggle.errors import BusFaultError
from juggle.fabric import Fabric, open_fabric
from juggle.fabric.bitstream import build_vendor_bit
from juggle.fabric.linux import uio as uio_module
from juggle.fabric.linux.busguard import GUARDED, GuardedMap
from juggle.fabric.linux.fake import FakeKernel

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "modules"
MESSAGES = [bytes([i]) * (i + 1) for i in range(24)]


def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    """Poll ``condition`` until it holds; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        time.sleep(0.002)


def _kv260(root: Path) -> FakeKernel:
    return kv260_fake(root)


def _open(kernel: FakeKernel) -> Fabric:
    return open_fabric("kv260", backend="linux", sysfs=kernel, load_shell=True, uio_timeout_s=2.0)


@pytest.fixture
def crc_module(tmp_path: Path) -> Path:
    """The crc32 example for rp0 of the kv260, without its native tier (software and
    hardware only, so the fallback tier is software)."""
    target = tmp_path / "crc32"
    shutil.copytree(EXAMPLES / "crc32", target)
    (target / "bitstreams" / "crc32_kv260_rp0.bit").write_bytes(
        build_vendor_bit("crc32", KV_PART, payload_words=128)
    )
    toml = target / "juggle.toml"
    text = toml.read_text()
    text = text.replace(
        'bitstreams = { prr0 = "bitstreams/crc32_xupv2p_prr0.bit" }',
        'bitstreams = { rp0 = "bitstreams/crc32_kv260_rp0.bit" }',
    )
    text = text.replace('[services.native]\nclass = "crc32_module.NativeCrc32"\n', "")
    assert "rp0 =" in text and "[services.native]" not in text
    toml.write_text(text)
    return target


class _Slots:
    """What the backend's windows map: for the slot's ``AccelConfig`` device, a
    :class:`GuardedMap` of the fake's ``dev/uioN`` whose every access goes to the mapped page
    first (a real load or store, so a truncated file raises a real SIGBUS) and then to a
    fresh register model of the core (one per load, as a new partial is a new core)."""

    def __init__(self, core_class: type[Any]) -> None:
        self.cores: list[Any] = []
        self.faults: list[BusFaultError] = []
        self.paths: list[Path] = []
        slots = self

        class CoreMap(GuardedMap):
            def __init__(self, path: str | Path, length: int, *, offset: int = 0) -> None:
                super().__init__(path, length, offset=offset)
                root = Path(path).parents[1]
                uio = root / "sys/class/uio" / Path(path).name / "name"
                self.core: Any = None
                if uio.read_text().strip() == "AccelConfig":
                    self.core = core_class()
                    self._now = 0
                    slots.cores.append(self.core)
                    slots.paths.append(Path(path))

            def read32(self, off: int) -> int:
                value = self._touch(off, None)
                if self.core is None:
                    return value
                self._now += 1_000_000
                return int(self.core.read(off, self._now))

            def write32(self, off: int, value: int) -> None:
                self._touch(off, value)
                if self.core is not None:
                    self._now += 1_000_000
                    self.core.write(off, value, self._now)

            def _touch(self, off: int, value: int | None) -> int:
                try:
                    if value is None:
                        return GuardedMap.read32(self, off)
                    GuardedMap.write32(self, off, value)
                    return value
                except BusFaultError as exc:
                    slots.faults.append(exc)
                    raise

        self.cls = CoreMap


def crc_caller(proxy: Any) -> Caller:
    """A :class:`Caller` of ``crc32`` over MESSAGES, each result checked against zlib."""

    def call(n: int) -> str | None:
        message = MESSAGES[n % len(MESSAGES)]
        got = proxy.crc32(message)
        return None if got == zlib.crc32(message) else f"{got:#x}"

    return Caller(call)


@pytest.fixture
def rig(
    tmp_path: Path, crc_module: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[FakeKernel, juggle.Framework, _Slots, Any]]:
    """The kv260 fake with its base shell, a framework over the Linux backend, the crc32
    module installed and started, and its consumer proxy."""
    kernel = _kv260(tmp_path / "root")
    fab = _open(kernel)
    fw = juggle.Framework(fabric=fab, drain_timeout_s=0.5, call_timeout_s=2.0)
    try:
        module = fw.install(crc_module)
        module.start()
        code = sys.modules[f"{module.namespace.package}.crc32_module"]
        slots = _Slots(code.Crc32Core)
        monkeypatch.setattr(uio_module, "GuardedMap", slots.cls)
        proxy = fw.get_service("crc.ChecksumService", consumer="app")
        yield kernel, fw, slots, proxy
    finally:
        fw.close()


def test_a_sigbus_during_calls_is_contained_and_recovered(
    rig: tuple[FakeKernel, juggle.Framework, _Slots, Any],
) -> None:
    assert GUARDED, "juggle.fabric.linux._busguard was not built (see setup.py)"
    kernel, fw, slots, proxy = rig
    (service,) = fw.services()
    assert service.tier == "software"
    fw.juggle(to_hardware=service.service_id)
    assert fw.services()[0].tier == "hardware" and fw.services()[0].region == "rp0"
    assert fw.regions()[0].state == "PROGRAMMED"
    assert len(slots.cores) == 1 and slots.cores[0].operations == 0
    (dev,) = slots.paths
    length = dev.stat().st_size
    assert length > 0

    caller = crc_caller(proxy)
    caller.start()
    try:
        wait_for(lambda: slots.cores[0].operations > 0 and caller.calls >= 20)
        os.truncate(dev, 0)  # the mapped page now lies past the end of the file: SIGBUS
        # the failing call quarantines the region (ERROR) and is served in software; a
        # supervisor thread then moves the service to software: wait for both
        wait_for(
            lambda: (
                fw.regions()[0].state == "ERROR"
                and fw.services()[0].tier == "software"
                and fw.services()[0].region is None
            )
        )
        assert slots.faults, "no SIGBUS was taken"  # a real one, and the process lives
        served = caller.calls
        wait_for(lambda: caller.calls >= served + 20)  # software serves the calls
    finally:
        caller.stop.set()
        caller.join(30)
    assert not caller.is_alive()
    assert caller.failures == []  # 0 failed consumer calls
    assert all("SIGBUS" in str(f) and str(dev) in str(f) for f in slots.faults)
    assert any("BusFaultError" in f and "SIGBUS" in f for f in fw.faults), list(fw.faults)
    region = fw.regions()[0]
    assert region.name == "rp0" and region.state == "ERROR" and region.service_id is None

    os.truncate(dev, length)  # the fault is gone
    faults = len(slots.faults)
    fw.recover("rp0")
    assert fw.services()[0].tier == "hardware" and fw.services()[0].region == "rp0"
    assert fw.regions()[0].state == "PROGRAMMED"
    assert len(slots.cores) == 2  # a fresh load, a fresh core
    before = slots.cores[-1].operations
    for message in MESSAGES:
        assert proxy.crc32(message) == zlib.crc32(message)
    assert slots.cores[-1].operations > before  # served in hardware
    assert len(slots.faults) == faults  # no fault since the recovery
    assert "juggle-rp0" in kernel.overlays()


def test_bench_reports_linux_program_time_measured() -> None:
    from juggle.bench import TARGETS, run_bench

    result = run_bench(quick=True, only=["linux"])
    value = result["linux_program_us_p50"]
    assert isinstance(value, float) and math.isfinite(value) and value > 0
    assert result["labels"]["linux_program_us_p50"] == "measured"
    assert TARGETS["linux_program_us_p50"] == ("<=", 500.0)
    assert "linux_program_us_p50" in result["targets_met"]
    # the fake's own time was set apart: the whole load took longer than juggle's share
    assert result["linux_program_wall_us_p50"] > value
    assert result["labels"]["linux_program_wall_us_p50"] == "measured"
