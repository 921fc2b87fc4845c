"""The Linux backend against a fake kernel that behaves like one (issue 20, items 2-4).

A kv260-like fake: the base 2-RP shell applied through its overlay, partials loaded into rp0
through configfs overlays, the slot released through the SIHA registers before any register
access, UIO windows resolved by name after the load, and a zedboard fake for the Zynq-7000
image conversion. The "hardware" behind a slot's UIO file is a register model plugged in
where the backend maps the device (the fake cannot run logic behind ``/dev/uioN``).
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from linux_support import KV_PART, SHELL_DTBO, juggle_round_trip, kv260_fake

import juggle
from juggle.errors import BackendError, RegionEmptyError
from juggle.fabric import Fabric, open_fabric
from juggle.fabric.bitstream import build_vendor_bit, kernel_image, parse_any, to_bin
from juggle.fabric.linux import shell as shell_module
from juggle.fabric.linux import uio as uio_module
from juggle.fabric.linux.busguard import GuardedMap
from juggle.fabric.linux.fake import FakeKernel

ZED_PART = "xc7z020clg484-1"
OVERLAYS = "sys/kernel/config/device-tree/overlays"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "modules"
RELEASE_RP0 = (0x01, 0x01, 0x0B, 0x02)  # kv260.toml [[shell.slots]] rp0 release, at 0x4000


def _kv260(root: Path) -> FakeKernel:
    return kv260_fake(root)


def _open(kernel: FakeKernel, profile: str = "kv260", **options: Any) -> Fabric:
    options.setdefault("uio_timeout_s", 2.0)
    return open_fabric(profile, backend="linux", sysfs=kernel, **options)


def _uio_by_name(kernel: FakeKernel, name: str) -> list[str]:
    found = []
    for device in kernel.listdir("sys/class/uio"):
        if kernel.read(f"sys/class/uio/{device}/name").strip() == name:
            found.append(device)
    return found


def _siha_words(kernel: FakeKernel, base: int = 0x4000) -> tuple[int, ...]:
    (device,) = _uio_by_name(kernel, "SIHA_Manager")
    return struct.unpack_from("=4I", (kernel.root / "dev" / device).read_bytes(), base)


class _Recorder:
    """Every guarded access of every map, in order: (device file name, op, offset, value)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, int, int]] = []
        recorder = self

        class RecordingMap(GuardedMap):
            def read32(self, off: int) -> int:
                value = super().read32(off)
                recorder.events.append((Path(self.path).name, "r", off, value))
                return value

            def write32(self, off: int, value: int) -> None:
                recorder.events.append((Path(self.path).name, "w", off, value))
                super().write32(off, value)

        self.cls = RecordingMap


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> _Recorder:
    rec = _Recorder()
    monkeypatch.setattr(uio_module, "GuardedMap", rec.cls)
    monkeypatch.setattr(shell_module, "GuardedMap", rec.cls)
    return rec


def test_open_checks_the_shell_and_loads_its_base_when_asked(tmp_path: Path) -> None:
    kernel = _kv260(tmp_path)
    with pytest.raises(BackendError, match=r"shell 'k26-dfx-2rp' is not loaded.*load_shell"):
        _open(kernel)
    assert kernel.listdir(OVERLAYS) == []  # nothing applied by a refused open
    with _open(kernel, load_shell=True) as fab:
        assert fab.backend == "linux"
        assert kernel.read(f"{OVERLAYS}/juggle-shell/status").strip() == "applied"
        assert kernel.read(f"{OVERLAYS}/juggle-shell/path").strip() == SHELL_DTBO
        assert len(_uio_by_name(kernel, "SIHA_Manager")) == 1
    with _open(kernel) as fab:  # the shell stays loaded: found, not loaded again
        assert fab.regions()[0].state == "EMPTY"
    assert kernel.writes_to("juggle-shell/path") == [SHELL_DTBO]  # applied once


@pytest.mark.parametrize("form", ["bit", "bit.bin"])
def test_a_vivado_partial_loads_into_rp0_through_an_overlay(
    tmp_path: Path, recorder: _Recorder, form: str
) -> None:
    kernel = _kv260(tmp_path)
    bit = build_vendor_bit("accel", KV_PART, payload_words=256)  # no Region= tag
    data = bit if form == "bit" else to_bin(bit)
    bitstream = parse_any(data, source=f"accel.{form}")
    assert bitstream.region is None and bitstream.format == ("bit" if form == "bit" else "bin")
    with _open(kernel, load_shell=True) as fab:
        backend: Any = fab._backend
        recorder.events.clear()
        fab.program("rp0", bitstream, data)
        item = f"{OVERLAYS}/juggle-rp0"
        assert kernel.read(f"{item}/status").strip() == "applied"
        # the kernel received the header-stripped big-endian image ZynqMP's manager takes
        assert kernel.received[-1][1] == kernel_image(bitstream, data, "zynqmp")
        assert kernel.received[-1][1] == to_bin(bit)
        assert list(backend.trace)[-4:] == ["isolate rp0", "load rp0", "release rp0", "attach rp0"]
        window: Any = fab.window("rp0")
        assert window.size == 0x0100_0000  # AccelConfig: half of rp0's 32 MiB window
        assert set(window.windows) == {"ctrl", "comm"}  # both of the design's windows, by name
        assert backend.windows("rp0")["comm"].map.register_base == 0x8100_0000
        window.write32(0, 7)
        assert window.read32(0) == 7
        # the slot's isolation registers were written before its first register access
        (ctrl,) = [d for d in _uio_by_name(kernel, "AccelConfig")]
        (siha,) = _uio_by_name(kernel, "SIHA_Manager")
        writes = [(off, v) for dev, op, off, v in recorder.events if dev == siha and op == "w"]
        assert writes[-4:] == list(zip(range(0x4000, 0x4010, 4), RELEASE_RP0, strict=True))
        first_access = next(i for i, e in enumerate(recorder.events) if e[0] == ctrl)
        last_release = max(i for i, e in enumerate(recorder.events) if e[0] == siha)
        assert last_release < first_access
        assert _siha_words(kernel) == RELEASE_RP0

        fab.unload("rp0")
        assert not kernel.exists(item)  # rmdir: the overlay is gone ...
        assert _uio_by_name(kernel, "AccelConfig") == []  # ... and the UIO nodes it created
        assert _uio_by_name(kernel, "rm_comm_box") == []
        assert _siha_words(kernel) == (0, 0, 0, 0)  # isolated before the unload
        assert list(backend.trace)[-2:] == ["isolate rp0", "unload rp0"]
        with pytest.raises(RegionEmptyError):
            window.read32(0)
        assert kernel.listdir("run/juggle/firmware") == []  # staged files removed


def test_an_isolated_slot_is_never_touched(tmp_path: Path, recorder: _Recorder) -> None:
    kernel = _kv260(tmp_path)
    data = build_vendor_bit("accel", KV_PART)
    with _open(kernel, load_shell=True) as fab:
        fab.program("rp0", parse_any(data, source="accel.bit"), data)
        window = fab.window("rp0")
        window.read32(0)
        (ctrl,) = _uio_by_name(kernel, "AccelConfig")
        bridge = fab.region("rp0").bridge
        bridge.disable()  # isolated, still mapped: the window refuses every access
        before = [e for e in recorder.events if e[0] == ctrl]
        with pytest.raises(RegionEmptyError, match="'rp0' is not accessible: the slot is isol"):
            window.read32(0)
        with pytest.raises(RegionEmptyError, match="rp0"):
            window.write32(0, 1)
        assert [e for e in recorder.events if e[0] == ctrl] == before
        bridge.enable()
        assert window.read32(0) == 0
        fab.quarantine("rp0", "core hung")  # isolated and unmapped: the old handle is refused
        before = [e for e in recorder.events if e[0] == ctrl]
        with pytest.raises(RegionEmptyError, match="rp0"):
            window.read32(0)
        assert [e for e in recorder.events if e[0] == ctrl] == before
        assert _siha_words(kernel) == (0, 0, 0, 0)
        fab.program("rp0", parse_any(data, source="accel.bit"), data)  # recovers
        assert fab.regions()[0].state == "PROGRAMMED"
        assert len(kernel.overlays()) == 2  # the shell and rp0, the old one replaced


def test_a_failed_overlay_leaves_nothing_behind(tmp_path: Path) -> None:
    kernel = _kv260(tmp_path)
    data = build_vendor_bit("accel", KV_PART)
    with _open(kernel, load_shell=True) as fab:
        kernel.fail_next_load("write error")
        with pytest.raises(juggle.errors.ProgrammingError, match="unapplied|write error"):
            fab.program("rp0", parse_any(data, source="accel.bit"), data)
        assert not kernel.exists(f"{OVERLAYS}/juggle-rp0")
        assert fab.regions()[0].state == "ERROR" and not fab.regions()[0].bridge_enabled
        assert _siha_words(kernel) == (0, 0, 0, 0)
        fab.program("rp0", parse_any(data, source="accel.bit"), data)
        assert fab.regions()[0].state == "PROGRAMMED"


def test_zedboard_kernel_receives_the_stripped_swapped_image(tmp_path: Path) -> None:
    kernel = FakeKernel(tmp_path, part=ZED_PART, family="zynq", shell_loaded=True)
    bit = build_vendor_bit("accel", ZED_PART, payload_words=64)
    bitstream = parse_any(bit, source="accel.bit")
    with _open(kernel, "zedboard") as fab:
        fab.program("prr1", bitstream, bit)
        image = kernel.received[-1][1]
        payload = bit[bitstream.header_length :]
        assert len(image) == len(payload) and image != payload
        swapped = b"".join(payload[i : i + 4][::-1] for i in range(0, len(payload), 4))
        assert image == swapped
        assert b"\x66\x55\x99\xaa" in image  # the sync word as zynq-fpga.c looks for it
        assert fab.window("prr1").size == 0x1_0000


# -- a service juggled to hardware and back ---------------------------------------------------


@pytest.fixture
def crc_module(tmp_path: Path) -> Iterator[Path]:
    target = tmp_path / "crc32"
    shutil.copytree(EXAMPLES / "crc32", target)
    (target / "bitstreams" / "crc32_kv260_rp0.bit").write_bytes(
        build_vendor_bit("crc32", KV_PART, payload_words=128)
    )
    text = (target / "juggle.toml").read_text()
    text = text.replace(
        'bitstreams = { prr0 = "bitstreams/crc32_xupv2p_prr0.bit" }',
        'bitstreams = { rp0 = "bitstreams/crc32_kv260_rp0.bit" }',
    )
    (target / "juggle.toml").write_text(text)
    yield target


def test_a_service_juggles_to_hardware_and_back(
    tmp_path: Path, crc_module: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = _kv260(tmp_path / "root")
    fab = _open(kernel, load_shell=True)

    def overlay_gone(fw: juggle.Framework) -> None:
        assert _uio_by_name(kernel, "AccelConfig") == []

    failed = juggle_round_trip(
        fab, crc_module, monkeypatch, messages=40, first_tier="native", after=overlay_gone
    )
    assert failed == 0
