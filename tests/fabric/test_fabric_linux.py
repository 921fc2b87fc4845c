"""The Linux backend against a fake sysfs tree that reacts like the kernel (no board needed)."""

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
    BridgeError,
    PartMismatchError,
    ProgrammingError,
    RegionEmptyError,
    WindowAccessError,
)
from juggle.fabric import Bitstream, Fabric, ManagerState, open_fabric
from juggle.fabric.linux import FakeKernel, HostSysfs, UioWindow, read_uio_map

BitsFactory = Callable[..., tuple[Bitstream, bytes]]
MGR = "sys/class/fpga_manager/fpga0"
BR = "sys/class/fpga_bridge/br0"


@pytest.fixture
def kernel(tmp_path: Path) -> FakeKernel:
    return FakeKernel(tmp_path, part=PART)


def _open(kernel: FakeKernel, **options: Any) -> Fabric:
    return open_fabric("xupv2p", backend="linux", sysfs=kernel, **options)


def test_program_drives_sysfs_in_order(kernel: FakeKernel, bits: BitsFactory) -> None:
    with _open(kernel) as fab:
        report = fab.program("prr0", *bits("tdes"), owner="mail")
        assert kernel.log == [
            (f"{BR}/enable", "0"),
            (f"{MGR}/flags", "1"),  # partial bitstream
            (f"{MGR}/firmware", "juggle-prr0-tdes.bit"),
            (f"{BR}/enable", "1"),
        ]
        assert kernel.loaded == ["tdes"]
        assert kernel.read(f"{MGR}/state").strip() == "operating"
        assert kernel.read(f"{BR}/state").strip() == "enabled"
        assert list((kernel.root / "lib/firmware").iterdir()) == []  # staging file removed
        assert report.reconfiguration_ms == pytest.approx(13.418, rel=1e-3)  # modeled
        assert fab.regions()[0].state == "PROGRAMMED"
        assert fab.backend == "linux"


def test_window_reads_and_writes_the_uio_map(kernel: FakeKernel, bits: BitsFactory) -> None:
    dev = kernel.root / "dev/uio0"
    raw = bytearray(dev.read_bytes())
    raw[12:16] = struct.pack("=I", 0x12345678)
    dev.write_bytes(bytes(raw))
    with _open(kernel) as fab:
        fab.program("prr0", *bits("tdes"))
        window = fab.window("prr0")
        assert window.size == 0x1000
        assert window.read32(12) == 0x12345678
        window.write32(8, 0xDEADBEEF)
        with pytest.raises(WindowAccessError, match="offset 0x1000 is outside"):
            window.read32(0x1000)
        with pytest.raises(WindowAccessError, match="not 4-byte aligned"):
            window.write32(3, 0)
        fab.unload("prr0")
        with pytest.raises(RegionEmptyError, match="closed"):
            window.read32(8)
    assert struct.unpack_from("=I", dev.read_bytes(), 8)[0] == 0xDEADBEEF
    assert kernel.read(f"{BR}/state").strip() == "disabled"


def test_failed_load_names_the_kernel_state(kernel: FakeKernel, bits: BitsFactory) -> None:
    with _open(kernel) as fab:
        kernel.fail_next_load("write error")
        with pytest.raises(ProgrammingError, match="'write error'") as caught:
            fab.program("prr0", *bits("tdes"))
        assert caught.value.subject is ManagerState.WRITE_COMPLETE_ERR
        snap = fab.regions()[0]
        assert snap.state == "ERROR" and not snap.bridge_enabled
        assert kernel.writes_to("enable") == ["0"]  # closed, never reopened
        assert list((kernel.root / "lib/firmware").iterdir()) == []
        fab.program("prr0", *bits("tdes"))  # recovers
        assert fab.regions()[0].state == "PROGRAMMED"


def test_kernel_refusing_a_part_is_caught_by_the_check_first(
    kernel: FakeKernel, bits: BitsFactory
) -> None:
    with _open(kernel) as fab, pytest.raises(PartMismatchError):
        fab.program("prr0", *bits("tdes", part="7z020clg484"))
    assert kernel.log == []


def test_mainline_bridges_are_read_only(tmp_path: Path, bits: BitsFactory) -> None:
    kernel = FakeKernel(tmp_path, part=PART, writable_bridges=False)
    with _open(kernel) as fab:
        with pytest.raises(BridgeError, match="no 'enable' attribute"):
            fab.program("prr0", *bits("tdes"))
        assert fab.regions()[0].state == "EMPTY"
        assert kernel.loaded == []
    with _open(kernel, bridges={"prr0": None}) as fab:  # run without a bridge
        fab.program("prr0", *bits("tdes"))
        assert kernel.loaded == ["tdes"] and fab.regions()[0].bridge_enabled


def test_explicit_mapping_of_nodes(tmp_path: Path, bits: BitsFactory) -> None:
    kernel = FakeKernel(
        tmp_path,
        part=PART,
        manager="fpga3",
        bridges={"br5": "socket-bridge"},
        uio={"uio2": ("user-logic", 0x2000)},
    )
    with pytest.raises(BackendError, match="no FPGA bridge named 'prr0'"):
        _open(kernel)
    with pytest.raises(BackendError, match=r"no UIO device named 'prr0'.*uio2='user-logic'"):
        _open(kernel, bridges={"prr0": "br5"})
    with _open(kernel, manager="fpga3", bridges={"prr0": "br5"}, uio={"prr0": "uio2"}) as fab:
        fab.program("prr0", *bits("tdes"))
        assert fab.window("prr0").size == 0x2000
        assert kernel.writes_to("br5/enable") == ["0", "1"]


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (lambda k: (k.root / MGR / "firmware").unlink(), "no 'firmware' attribute"),
        (
            lambda k: (k.root / "sys/class/fpga_manager/fpga0").rename(
                k.root / "sys/class/fpga_manager/gone"
            ),
            "no FPGA manager 'fpga0'",
        ),
        (lambda k: (k.root / "dev/uio0").unlink(), "/dev/uio0 for region 'prr0' is missing"),
        (
            lambda k: (k.root / "sys/class/uio/uio0/maps/map0/size").write_text("zero"),
            "UIO map .* is unusable",
        ),
    ],
)
def test_missing_nodes_are_reported_at_open(
    kernel: FakeKernel, breakage: Callable[[FakeKernel], object], message: str
) -> None:
    breakage(kernel)
    with pytest.raises(BackendError, match=message):
        _open(kernel, manager="fpga0")


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


def test_root_option_uses_host_files_and_bridge_readback(
    kernel: FakeKernel, bits: BitsFactory
) -> None:
    # Plain host files do not react like a kernel: writing 'enable' leaves 'state' as it
    # was, so the bridge wrapper's read-back catches a bridge that did not switch.
    (kernel.root / BR / "state").write_text("enabled\n")
    with open_fabric("xupv2p", backend="linux", root=kernel.root) as fab:
        with pytest.raises(BridgeError, match="did not disable: it reads back enabled"):
            fab.program("prr0", *bits("tdes"))
        assert fab.regions()[0].state == "EMPTY"
        assert HostSysfs(kernel.root).read(f"{BR}/enable") == "0"
        assert HostSysfs(kernel.root).read(f"{MGR}/firmware") == ""  # never reached


def test_uio_window_on_a_plain_file_with_a_second_map(tmp_path: Path) -> None:
    page = mmap.PAGESIZE
    fs = HostSysfs(tmp_path)
    fs.write_file("sys/class/uio/uio0/maps/map1/addr", b"0x43c10000\n")
    fs.write_file("sys/class/uio/uio0/maps/map1/size", b"0x100\n")
    fs.write_file("sys/class/uio/uio0/maps/map1/offset", b"0x20\n")
    data = bytearray(2 * page)
    struct.pack_into("=I", data, page + 0x20 + 4, 77)  # map 1 starts at file offset 1 page
    fs.write_file("dev/uio0", bytes(data))
    uio_map = read_uio_map(fs, "uio0", 1)
    assert (uio_map.addr, uio_map.size, uio_map.offset) == (0x43C10000, 0x100, 0x20)
    window = UioWindow("prr0", tmp_path / "dev/uio0", uio_map)
    assert window.read32(4) == 77
    window.close()
    window.close()  # idempotent
    with pytest.raises(BackendError, match="cannot open"):
        UioWindow("prr0", tmp_path / "dev/uio9", uio_map)
