"""The Linux backend against a fake kernel that behaves like one (no board needed).

The xupv2p profile on the fake's toy ``virtex2p`` family (juggle's own ``.bit`` goes to the
kernel as it is): overlays through configfs, the sysfs path, read-only bridges, UIO windows
resolved after a load, and what open reports when a node is missing.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fabric_support import PART

from juggle.errors import (
    BackendError,
    PartMismatchError,
    ProgrammingError,
    RegionEmptyError,
    WindowAccessError,
    WindowAttachError,
)
from juggle.fabric import Bitstream, Fabric, ManagerState, open_fabric
from juggle.fabric.linux import FakeKernel, HostSysfs, UioWindow, read_uio_map

BitsFactory = Callable[..., tuple[Bitstream, bytes]]
MGR = "sys/class/fpga_manager/fpga0"
ITEM = "sys/kernel/config/device-tree/overlays/juggle-prr0"
STAGE = "run/juggle/firmware"


def _kernel(root: Path, **options: Any) -> FakeKernel:
    options.setdefault("family", "virtex2p")
    options.setdefault("shell_loaded", True)
    return FakeKernel(root, part=PART, **options)


@pytest.fixture
def kernel(tmp_path: Path) -> FakeKernel:
    return _kernel(tmp_path, bridges={"br0": "Xilinx DFX AXI shutdown mgr"})


def _open(kernel: FakeKernel, **options: Any) -> Fabric:
    options.setdefault("uio_timeout_s", 1.0)
    return open_fabric("xupv2p", backend="linux", sysfs=kernel, **options)


def _uio(kernel: FakeKernel, name: str) -> list[str]:
    return [d for d, n in kernel.uio_devices().items() if n == name]


def test_program_applies_an_overlay_and_checks_it(kernel: FakeKernel, bits: BitsFactory) -> None:
    with _open(kernel) as fab:
        report = fab.program("prr0", *bits("tdes"), owner="mail")
        assert [p for p, _ in kernel.log] == [
            "sys/module/firmware_class/parameters/path",  # juggle's staging folder
            ITEM,  # mkdir
            f"{ITEM}/path",
        ]
        assert kernel.writes_to(f"{ITEM}/path") == ["juggle-prr0-tdes.bit.bin.dtbo"]
        assert kernel.read(f"{ITEM}/status").strip() == "applied"
        assert kernel.loaded == ["tdes"]
        assert report.reconfiguration_ms == pytest.approx(13.418, rel=1e-3)  # modeled
        assert fab.regions()[0].state == "PROGRAMMED" and fab.backend == "linux"
        fab.unload("prr0")
        assert not kernel.exists(ITEM) and _uio(kernel, "prr0") == []
        assert kernel.listdir(STAGE) == []  # staged image and overlay removed
    assert not any("fpga_bridge" in p for p, _ in kernel.log)  # bridges are read-only


def test_window_reads_and_writes_the_uio_map(kernel: FakeKernel, bits: BitsFactory) -> None:
    with _open(kernel) as fab:
        fab.program("prr0", *bits("tdes"))
        (device,) = _uio(kernel, "prr0")  # the node the generated overlay declared
        dev = kernel.root / "dev" / device
        raw = bytearray(dev.read_bytes())
        raw[12:16] = struct.pack("=I", 0x12345678)
        dev.write_bytes(bytes(raw))
        window = fab.window("prr0")
        assert window.size == 0x1_0000  # the profile's window
        assert window.read32(12) == 0x12345678
        window.write32(8, 0xDEADBEEF)
        assert struct.unpack_from("=I", dev.read_bytes(), 8)[0] == 0xDEADBEEF
        with pytest.raises(WindowAccessError, match="offset 0x10000 is outside"):
            window.read32(0x1_0000)
        with pytest.raises(WindowAccessError, match="not 4-byte aligned"):
            window.write32(3, 0)
        fab.unload("prr0")
        with pytest.raises(RegionEmptyError):
            window.read32(8)


def test_failed_load_names_the_kernel_state(kernel: FakeKernel, bits: BitsFactory) -> None:
    with _open(kernel) as fab:
        kernel.fail_next_load("write error")
        with pytest.raises(ProgrammingError, match="'unapplied'.*'write error'") as caught:
            fab.program("prr0", *bits("tdes"))
        assert caught.value.value == ManagerState.WRITE_COMPLETE_ERR.value
        snap = fab.regions()[0]
        assert snap.state == "ERROR" and not snap.bridge_enabled
        assert not kernel.exists(ITEM) and kernel.listdir(STAGE) == []
        fab.program("prr0", *bits("tdes"))  # recovers
        assert fab.regions()[0].state == "PROGRAMMED"


def test_kernel_refusing_a_part_is_caught_by_the_check_first(
    kernel: FakeKernel, bits: BitsFactory
) -> None:
    with _open(kernel) as fab, pytest.raises(PartMismatchError):
        fab.program("prr0", *bits("tdes", part="7z020clg484"))
    assert kernel.overlays() == [] and kernel.received == []


def test_sysfs_path_writes_flags_in_hex_and_reads_the_state(
    tmp_path: Path, bits: BitsFactory
) -> None:
    # a Xilinx kernel's boot device tree holds the slot's UIO node (no overlay brings it)
    kernel = _kernel(tmp_path, uio={"uio0": ("prr0", 0x1_0000)})
    with _open(kernel, load="sysfs") as fab:
        # the node sits at 0x43c00000, the profile says 0x41000000: the attach refuses it
        with pytest.raises(WindowAttachError, match=r"starts at 0x43c00000.*at 0x41000000"):
            fab.program("prr0", *bits("tdes"))
        assert fab.regions()[0].state == "ERROR"
        kernel.write_file("sys/class/uio/uio0/maps/map0/addr", b"0x41000000\n")
        fab.program("prr0", *bits("tdes"))
        assert kernel.writes_to(f"{MGR}/flags") == ["1", "1"]
        assert kernel.writes_to(f"{MGR}/firmware") == ["juggle-prr0-tdes.bit.bin"] * 2
        assert fab.window("prr0").read32(0) == 0
        kernel.fail_next_load("write error", "reconfig error")
        with pytest.raises(ProgrammingError, match="state 'write error', status 'reconfig"):
            fab.program("prr0", *bits("tdes"))


def test_firmware_search_path_of_someone_else_is_left_alone(
    tmp_path: Path, bits: BitsFactory
) -> None:
    kernel = _kernel(tmp_path, firmware_path="/opt/vendor/firmware")
    with _open(kernel) as fab:
        fab.program("prr0", *bits("tdes"))
        assert kernel.read("sys/module/firmware_class/parameters/path").strip() == (
            "/opt/vendor/firmware"
        )
        assert "juggle-prr0-tdes.bit.bin" in kernel.listdir("lib/firmware")
    with pytest.raises(BackendError, match="does not take the firmware search path over"):
        _open(kernel, firmware_dir="srv/juggle")


@pytest.mark.parametrize(
    ("breakage", "options", "message"),
    [
        (
            lambda k: (k.root / "sys/class/fpga_manager/fpga0").rename(
                k.root / "sys/class/fpga_manager/gone"
            ),
            {"manager": "fpga0"},
            "no FPGA manager 'fpga0'",
        ),
        (
            lambda k: (k.root / MGR / "firmware").unlink(),
            {"load": "sysfs"},
            "no 'firmware' attribute",
        ),
        (
            lambda k: (k.root / ITEM).parent.rmdir(),
            {},
            "no device-tree overlay configfs",
        ),
        (lambda k: None, {"load": "ftp"}, '"load" must be "overlay" or "sysfs"'),
    ],
)
def test_missing_nodes_are_reported_at_open(
    kernel: FakeKernel,
    breakage: Callable[[FakeKernel], object],
    options: dict[str, Any],
    message: str,
) -> None:
    breakage(kernel)
    with pytest.raises(BackendError, match=message):
        _open(kernel, **options)


def test_missing_uio_node_fails_the_attach_not_the_process(
    kernel: FakeKernel, bits: BitsFactory
) -> None:
    with _open(kernel, uio={"prr0": "no-such-node"}, uio_timeout_s=0.05) as fab:
        with pytest.raises(Exception, match="no UIO device named 'no-such-node'"):
            fab.program("prr0", *bits("tdes"))
        assert fab.regions()[0].state == "ERROR"


def test_manager_must_be_chosen_when_several(kernel: FakeKernel) -> None:
    kernel.write_file("sys/class/fpga_manager/fpga1/state", b"unknown\n")
    with pytest.raises(BackendError, match="pass manager="):
        _open(kernel)
    _open(kernel, manager="fpga0").close()


def test_unknown_options_and_backends(kernel: FakeKernel) -> None:
    with pytest.raises(BackendError, match=r"no option\(s\) \['colour'\]"):
        _open(kernel, colour="red")
    with pytest.raises(BackendError, match="backend 'sim' takes no options"):
        open_fabric(root="/tmp")
    with pytest.raises(BackendError, match='"backend" must be one of'):
        open_fabric(backend="cuda")
    with _open(kernel) as fab, pytest.raises(BackendError, match="no fault injection"):
        fab.faults.arm("model_load")
    with pytest.raises(BackendError, match='"load_shell" must be true or false'):
        _open(kernel, load_shell="maybe")


def test_uio_window_on_a_plain_file_with_a_second_map(tmp_path: Path) -> None:
    page = mmap.PAGESIZE
    fs = HostSysfs(tmp_path)
    # uio_pdrv_genirq: size covers the in-page offset plus the registers (rounded to a page)
    fs.write_file("sys/class/uio/uio0/maps/map1/addr", b"0x43c10000\n")
    fs.write_file("sys/class/uio/uio0/maps/map1/size", b"0x1000\n")
    fs.write_file("sys/class/uio/uio0/maps/map1/offset", b"0x20\n")
    data = bytearray(2 * page)
    struct.pack_into("=I", data, page + 0x20 + 4, 77)  # map 1 starts at file offset 1 page
    fs.write_file("dev/uio0", bytes(data))
    uio_map = read_uio_map(fs, "uio0", 1)
    assert (uio_map.addr, uio_map.size, uio_map.offset) == (0x43C10000, 0x1000, 0x20)
    window = UioWindow("prr0", tmp_path / "dev/uio0", uio_map)
    assert window.read32(4) == 77
    assert window.size == 0x1000 - 0x20  # not one page too long
    window.close()
    window.close()  # idempotent
    with pytest.raises(BackendError, match="uio_mmap_physical refuses longer mappings"):
        UioWindow("prr0", tmp_path / "dev/uio0", uio_map, length=0x2000)
    with pytest.raises(BackendError, match="cannot (open|map) .*dev/uio9"):
        UioWindow("prr0", tmp_path / "dev/uio9", uio_map)
