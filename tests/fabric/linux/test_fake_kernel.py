"""The fake kernel's rules, one test per rule (the ground truth the Linux backend is tested
against): fpga_manager attributes, the firmware search path, configfs overlays, read-only
bridges, UIO nodes as uio_pdrv_genirq makes them, the static shell before slots."""

from __future__ import annotations

import errno
import mmap
import os
import struct
from pathlib import Path

import pytest

from juggle.errors import BackendError
from juggle.fabric.bitstream import build_bitstream
from juggle.fabric.linux import FakeKernel
from juggle.fabric.linux.fdt import UioNode, build_overlay

KV = "xck26-sfvc784-2LV-c"
MGR = "sys/class/fpga_manager/fpga0"
OVL = "sys/kernel/config/device-tree/overlays"
PAGE = mmap.PAGESIZE


def image(seed: int = 1, words: int = 64) -> bytes:
    """A header-less .bin: padding, bus-width words, sync word, then payload words."""
    head = bytes.fromhex("ffffffff" * 4 + "000000bb" + "11220044" + "ffffffff" * 2 + "aa995566")
    return head + bytes((seed + i) % 256 for i in range(4 * words))


def swapped(data: bytes) -> bytes:
    return b"".join(data[i : i + 4][::-1] for i in range(0, len(data), 4))


def errno_of(call: object, *args: object) -> int:
    with pytest.raises(OSError) as caught:
        call(*args)  # type: ignore[operator]
    return caught.value.errno or 0


@pytest.fixture
def kv(tmp_path: Path) -> FakeKernel:
    kernel = FakeKernel(tmp_path, part=KV, bridges={"br0": "Xilinx DFX AXI shutdown mgr"})
    kernel.write_file("lib/firmware/shell.bit.bin", image(0))
    kernel.write_file("lib/firmware/aes.bit.bin", image(7))
    kernel.write_file(
        "lib/firmware/shell.dtbo",
        build_overlay(
            firmware_name="shell.bit.bin", uio=[UioNode("SIHA_Manager", (0xA0100000, 0x10000))]
        ),
    )
    kernel.write_file(
        "lib/firmware/rp0.dtbo",
        build_overlay(
            firmware_name="aes.bit.bin",
            target="fpga_PR0",
            bridges=["br0"],
            uio=[
                UioNode("AccelConfig", (0xA4010000, 0x1000)),
                UioNode("rm_comm_box", (0xA4020020, 0x1000), uio_name="rm_comm_box_0"),
            ],
        ),
    )
    return kernel


def apply(kernel: FakeKernel, name: str, dtbo: str) -> str:
    kernel.mkdir(f"{OVL}/{name}")
    kernel.write(f"{OVL}/{name}/path", dtbo)
    return kernel.read(f"{OVL}/{name}/status").strip()


def uio_names(kernel: FakeKernel) -> dict[str, str]:
    return {
        d: kernel.read(f"sys/class/uio/{d}/name").strip() for d in kernel.listdir("sys/class/uio")
    }


# -- fpga_manager (Documentation/ABI/testing/sysfs-class-fpga-manager) ------------------------


@pytest.mark.parametrize(
    ("family", "name"),
    [
        ("zynqmp", "Xilinx ZynqMP FPGA Manager"),
        ("zynq", "Xilinx Zynq FPGA Manager"),
        ("versal", "Xilinx Versal FPGA Manager"),
    ],
)
def test_manager_layout_per_family(tmp_path: Path, family: str, name: str) -> None:
    kernel = FakeKernel(tmp_path, part=KV, family=family)
    assert kernel.read(f"{MGR}/name") == f"{name}\n"
    assert kernel.read(f"{MGR}/state") == "operating\n"
    assert kernel.read(f"{MGR}/status") == ""
    assert kernel.read(f"{MGR}/flags") == "0\n"
    mainline = FakeKernel(tmp_path / "m", part=KV, family=family, sysfs_loading=False)
    assert not mainline.exists(f"{MGR}/flags") and not mainline.exists(f"{MGR}/firmware")
    assert errno_of(mainline.write, f"{MGR}/firmware", "x.bin") == errno.ENOENT


def test_unknown_family_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="'ultrascale9'"):
        FakeKernel(tmp_path, part=KV, family="ultrascale9")


def test_read_only_and_write_only_attributes(kv: FakeKernel) -> None:
    for path in (f"{MGR}/name", f"{MGR}/state", f"{MGR}/status", "sys/class/fpga_bridge/br0/name"):
        before = kv.read(path)
        assert errno_of(kv.write, path, "operating") == errno.EACCES
        assert kv.read(path) == before
    assert errno_of(kv.write, "sys/class/fpga_bridge/br0/state", "enabled") == errno.EACCES
    assert not kv.exists("sys/class/fpga_bridge/br0/enable")  # mainline has no enable
    assert kv.read("sys/class/fpga_bridge/br0/name") == "Xilinx DFX AXI shutdown mgr\n"
    assert errno_of(kv.read, f"{MGR}/firmware") == errno.EACCES  # DEVICE_ATTR_WO
    assert errno_of(kv.write, f"{MGR}/nonesuch", "1") == errno.ENOENT
    assert errno_of(kv.mkdir, "sys/class/fpga_manager/fpga9") == errno.EPERM


def test_flags_are_parsed_as_hex_and_read_back(kv: FakeKernel) -> None:
    kv.write(f"{MGR}/flags", "20")
    assert kv.read(f"{MGR}/flags") == "20\n"
    kv.write(f"{MGR}/flags", "0x1\n")
    assert kv.read(f"{MGR}/flags") == "1\n"
    assert errno_of(kv.write, f"{MGR}/flags", "partial") == errno.EINVAL
    assert kv.read(f"{MGR}/flags") == "1\n"


def test_sysfs_load_partial_needs_a_shell_and_records_bytes(kv: FakeKernel) -> None:
    kv.write(f"{MGR}/flags", "1")
    assert errno_of(kv.write, f"{MGR}/firmware", "aes.bit.bin") == errno.EIO
    assert kv.read(f"{MGR}/state") == "write error\n"
    kv.write(f"{MGR}/flags", "0")
    kv.write(f"{MGR}/firmware", "shell.bit.bin\n")  # trailing newline dropped
    assert kv.read(f"{MGR}/state") == "operating\n" and kv.full_image == "shell.bit.bin"
    kv.write(f"{MGR}/flags", "1")
    kv.write(f"{MGR}/firmware", "aes.bit.bin")
    assert kv.read(f"{MGR}/state") == "operating\n"
    assert kv.received == [
        ("aes.bit.bin", image(7)),
        ("shell.bit.bin", image(0)),
        ("aes.bit.bin", image(7)),
    ]


def test_armed_failure_sets_state_and_status(kv: FakeKernel) -> None:
    kv.write(f"{MGR}/flags", "0")
    kv.fail_next_load("write complete error", "reconfig CRC error\n")
    assert errno_of(kv.write, f"{MGR}/firmware", "shell.bit.bin") == errno.EIO
    assert kv.read(f"{MGR}/state") == "write complete error\n"
    assert kv.read(f"{MGR}/status") == "reconfig CRC error\n"
    kv.write(f"{MGR}/firmware", "shell.bit.bin")  # armed once
    assert (kv.read(f"{MGR}/state"), kv.read(f"{MGR}/status")) == ("operating\n", "")


def test_zynq_pcap_needs_the_byte_swapped_image(tmp_path: Path) -> None:
    kernel = FakeKernel(tmp_path, part="xc7z020clg484-1", family="zynq")
    kernel.write_file("lib/firmware/plain.bin", image())
    kernel.write_file("lib/firmware/swapped.bin", swapped(image()))
    kernel.write(f"{MGR}/flags", "0")
    assert errno_of(kernel.write, f"{MGR}/firmware", "plain.bin") == errno.EINVAL
    assert kernel.read(f"{MGR}/state") == "write init error\n"
    kernel.write(f"{MGR}/firmware", "swapped.bin")
    assert kernel.read(f"{MGR}/state") == "operating\n"


def test_zynqmp_refuses_an_image_with_a_bit_header(kv: FakeKernel) -> None:
    kv.write_file("lib/firmware/design.bit", build_bitstream("tdes", "xck26", "rp0", 4096))
    kv.write(f"{MGR}/flags", "0")
    assert errno_of(kv.write, f"{MGR}/firmware", "design.bit") == errno.EINVAL
    assert kv.read(f"{MGR}/state") == "write error\n"
    kv.write_file("lib/firmware/swapped.bin", swapped(image()))  # either order for the PMU
    kv.write(f"{MGR}/firmware", "swapped.bin")
    assert kv.read(f"{MGR}/state") == "operating\n"


# -- firmware loader search path (drivers/base/firmware_loader/main.c fw_path[]) -------------


def test_firmware_is_looked_up_on_the_search_path_only(kv: FakeKernel) -> None:
    kv.write(f"{MGR}/flags", "0")
    kv.write_file("opt/juggle/fw/own.bin", image(3))
    kv.write_file("own.bin", image(3))  # the root / current folder is never searched
    assert errno_of(kv.write, f"{MGR}/firmware", "own.bin") == errno.ENOENT
    assert kv.read(f"{MGR}/state") == "firmware request error\n"
    assert errno_of(kv.write, f"{MGR}/firmware", "../../opt/juggle/fw/own.bin") == errno.EINVAL
    kv.write("sys/module/firmware_class/parameters/path", "/opt/juggle/fw\n")
    assert kv.read("sys/module/firmware_class/parameters/path") == "/opt/juggle/fw\n"
    kv.write(f"{MGR}/firmware", "own.bin")
    assert kv.received[-1] == ("own.bin", image(3))
    assert errno_of(kv.write, "sys/module/firmware_class/parameters/path", "/x" * 200) == (
        errno.ENOSPC
    )


def test_search_order_custom_updates_release_then_lib_firmware(tmp_path: Path) -> None:
    kernel = FakeKernel(tmp_path, part=KV, firmware_path="/opt/fw", release="6.8.0-1")
    kernel.write(f"{MGR}/flags", "0")
    folders = ["lib/firmware", "lib/firmware/6.8.0-1", "lib/firmware/updates"]
    folders += ["lib/firmware/updates/6.8.0-1", "opt/fw"]
    for seed, folder in enumerate(folders):  # each newly added folder must win
        kernel.write_file(f"{folder}/x.bin", image(seed))
        kernel.write(f"{MGR}/firmware", "x.bin")
        assert kernel.received[-1][1] == image(seed), folder
    assert kernel.search_path()[0] == "opt/fw"


# -- configfs overlays (drivers/of/configfs.c), fpga-region, uio_pdrv_genirq ------------------


def test_overlay_item_apply_creates_uio_nodes_and_rmdir_removes_them(kv: FakeKernel) -> None:
    kv.mkdir(f"{OVL}/shell")
    assert sorted(kv.listdir(f"{OVL}/shell")) == ["dtbo", "path", "status"]
    assert kv.read(f"{OVL}/shell/status") == "unapplied\n"
    assert errno_of(kv.mkdir, f"{OVL}/shell") == errno.EEXIST
    kv.write(f"{OVL}/shell/path", "shell.dtbo")
    assert kv.read(f"{OVL}/shell/status") == "applied\n"
    assert kv.read(f"{OVL}/shell/path") == "shell.dtbo\n"
    assert errno_of(kv.write, f"{OVL}/shell/status", "applied") == errno.EACCES
    assert uio_names(kv) == {"uio0": "SIHA_Manager"}
    assert apply(kv, "rp0", "rp0.dtbo") == "applied"
    assert uio_names(kv) == {"uio0": "SIHA_Manager", "uio1": "AccelConfig", "uio2": "rm_comm_box_0"}
    assert kv.overlays() == ["shell", "rp0"]
    assert kv.slots == {"fpga_PR0": "aes.bit.bin"}
    kv.rmdir(f"{OVL}/rp0")
    assert not kv.exists(f"{OVL}/rp0") and kv.overlays() == ["shell"]
    assert uio_names(kv) == {"uio0": "SIHA_Manager"}
    assert not kv.exists("dev/uio1") and not kv.exists("dev/uio2")
    assert not kv.exists("sys/bus/platform/devices/a4010000.AccelConfig")
    assert kv.slots == {}


def test_uio_maps_as_uio_pdrv_genirq_lays_them_out(kv: FakeKernel) -> None:
    apply(kv, "shell", "shell.dtbo")
    apply(kv, "rp0", "rp0.dtbo")
    base = "sys/class/uio/uio2/maps/map0"  # reg 0xa4020020 + 0x1000: not page aligned
    assert kv.read(f"{base}/addr") == "0x00000000a4020000\n"
    assert kv.read(f"{base}/offset") == "0x20\n"
    assert kv.read(f"{base}/size") == f"0x{2 * PAGE:016x}\n"  # offset + size, page-rounded
    assert kv.read(f"{base}/name") == "rm_comm_box@a4020020\n"
    assert os.path.getsize(kv.root / "dev/uio2") == 2 * PAGE
    assert kv.read("sys/bus/platform/devices/a4020020.rm_comm_box/uio/uio2/name") == (
        "rm_comm_box_0\n"
    )
    device = (kv.root / "sys/class/uio/uio2/device").resolve()
    assert device == (kv.root / "sys/bus/platform/devices/a4020020.rm_comm_box").resolve()


def test_uio_numbering_takes_the_lowest_free_index(kv: FakeKernel) -> None:
    apply(kv, "rp0x", "shell.dtbo")  # uio0
    kv.write_file(
        "lib/firmware/one.dtbo",
        build_overlay(firmware_name=None, uio=[UioNode("one", (0xB0000000, 0x1000))]),
    )
    kv.write_file(
        "lib/firmware/two.dtbo",
        build_overlay(firmware_name=None, uio=[UioNode("two", (0xB0010000, 0x1000))]),
    )
    apply(kv, "one", "one.dtbo")
    apply(kv, "two", "two.dtbo")
    assert uio_names(kv) == {"uio0": "SIHA_Manager", "uio1": "one", "uio2": "two"}
    kv.rmdir(f"{OVL}/one")
    apply(kv, "one-again", "one.dtbo")
    assert uio_names(kv)["uio1"] == "one"  # the freed number is reused


def test_failed_apply_reports_success_but_status_unapplied(kv: FakeKernel) -> None:
    kv.mkdir(f"{OVL}/rp0")
    kv.write(f"{OVL}/rp0/path", "rp0.dtbo")  # no shell yet: the store still succeeds
    assert kv.read(f"{OVL}/rp0/status") == "unapplied\n"
    assert kv.read(f"{OVL}/rp0/path") == "\n"  # cleared
    assert kv.read(f"{MGR}/state") == "write error\n"
    assert uio_names(kv) == {} and kv.overlays() == []
    assert kv.read("sys/class/fpga_bridge/br0/state") == "disabled\n"


def test_failed_apply_raises_when_the_kernel_reports_it(tmp_path: Path) -> None:
    kernel = FakeKernel(tmp_path, part=KV, overlay_store_errors=True)
    kernel.write_file("lib/firmware/bad.dtbo", build_overlay(firmware_name="missing.bin"))
    kernel.mkdir(f"{OVL}/bad")
    assert errno_of(kernel.write, f"{OVL}/bad/path", "bad.dtbo") == errno.ENOENT
    assert kernel.read(f"{OVL}/bad/status") == "unapplied\n"
    assert kernel.read(f"{MGR}/state") == "firmware request error\n"
    assert errno_of(kernel.write, f"{OVL}/bad/path", "nothere.dtbo") == errno.ENOENT


def test_dtbo_attribute_applies_the_blob_once(kv: FakeKernel) -> None:
    blob = (kv.root / "lib/firmware/shell.dtbo").read_bytes()
    kv.mkdir(f"{OVL}/shell")
    kv.write_bytes(f"{OVL}/shell/dtbo", blob)
    assert kv.read(f"{OVL}/shell/status") == "applied\n"
    assert kv.read_bytes(f"{OVL}/shell/dtbo") == blob
    assert errno_of(kv.write_bytes, f"{OVL}/shell/dtbo", blob) == errno.EPERM
    assert errno_of(kv.write, f"{OVL}/shell/path", "shell.dtbo") == errno.EPERM
    kv.mkdir(f"{OVL}/junk")
    kv.write_bytes(f"{OVL}/junk/dtbo", b"\xd0\x0d\xfe\xed" + bytes(8))
    assert kv.read(f"{OVL}/junk/status") == "unapplied\n"


def test_slot_before_shell_fails_and_shell_removal_takes_the_shell(kv: FakeKernel) -> None:
    assert apply(kv, "rp0", "rp0.dtbo") == "unapplied"
    kv.rmdir(f"{OVL}/rp0")
    assert apply(kv, "shell", "shell.dtbo") == "applied"
    assert kv.full_image == "shell.bit.bin"
    assert apply(kv, "rp0", "rp0.dtbo") == "applied"
    assert kv.read("sys/class/fpga_bridge/br0/state") == "enabled\n"  # switched by the region
    assert apply(kv, "rp0-again", "rp0.dtbo") == "unapplied"  # region already has an overlay
    kv.rmdir(f"{OVL}/rp0")
    assert kv.read("sys/class/fpga_bridge/br0/state") == "disabled\n"
    kv.rmdir(f"{OVL}/shell")
    assert kv.full_image is None
    kv.rmdir(f"{OVL}/rp0-again")
    assert apply(kv, "rp0", "rp0.dtbo") == "unapplied"


def test_unknown_labels_fail_the_apply(tmp_path: Path) -> None:
    kernel = FakeKernel(tmp_path, part=KV, regions=["fpga_PR0"], shell_loaded=True)
    kernel.write_file("lib/firmware/a.bin", image())
    for name, kwargs in (
        ("region", {"target": "fpga_PR7"}),
        ("bridge", {"target": "fpga_PR0", "bridges": ["nobridge"]}),
    ):
        kernel.write_file(
            f"lib/firmware/{name}.dtbo", build_overlay(firmware_name="a.bin", **kwargs)
        )
        assert apply(kernel, name, f"{name}.dtbo") == "unapplied", name
    assert kernel.received == []  # nothing reached the manager
    kernel.write_file(
        "lib/firmware/ok.dtbo", build_overlay(firmware_name="a.bin", target="fpga_PR0")
    )
    assert apply(kernel, "ok", "ok.dtbo") == "applied"


def test_driver_override_binds_a_node_that_is_not_generic_uio(kv: FakeKernel) -> None:
    node = UioNode("accel", (0xA4030000, 0x1000), compatible="xlnx,accel-1.0")
    kv.write_file("lib/firmware/plain.dtbo", build_overlay(firmware_name=None, uio=[node]))
    apply(kv, "plain", "plain.dtbo")
    dev = "sys/bus/platform/devices/a4030000.accel"
    assert kv.exists(dev) and uio_names(kv) == {}
    assert kv.read(f"{dev}/driver_override") == "(null)\n"
    bind = "sys/bus/platform/drivers/uio_pdrv_genirq/bind"
    assert errno_of(kv.write, bind, "a4030000.accel") == errno.ENODEV
    kv.write(f"{dev}/driver_override", "uio_pdrv_genirq\n")
    kv.write(bind, "a4030000.accel")
    assert uio_names(kv) == {"uio0": "accel"} and kv.exists(f"{dev}/uio/uio0")
    assert errno_of(kv.write, bind, "a4030000.accel") == errno.EBUSY
    kv.write("sys/bus/platform/drivers/uio_pdrv_genirq/unbind", "a4030000.accel")
    assert uio_names(kv) == {}
    kv.write("sys/bus/platform/drivers_probe", "a4030000.accel")
    assert uio_names(kv) == {"uio0": "accel"}


def test_dev_uio_file_holds_one_map_per_page_index(tmp_path: Path) -> None:
    kernel = FakeKernel(tmp_path, part=KV)
    node = UioNode("two", (0xA0000000, 0x100), more_regs=((0xA0001010, 0x100),))
    kernel.write_file("lib/firmware/two.dtbo", build_overlay(firmware_name=None, uio=[node]))
    apply(kernel, "two", "two.dtbo")
    assert kernel.read("sys/class/uio/uio0/maps/map1/offset") == "0x10\n"
    with kernel.map_uio("uio0", 1, PAGE) as second:
        struct.pack_into("=I", second, 0x10, 0xCAFE)
    raw = (tmp_path / "dev/uio0").read_bytes()
    assert len(raw) == 2 * PAGE
    assert struct.unpack_from("=I", raw, PAGE + 0x10)[0] == 0xCAFE


def test_mmap_longer_than_the_map_size_is_refused(kv: FakeKernel) -> None:
    apply(kv, "shell", "shell.dtbo")  # SIHA: 0x10000 bytes
    assert errno_of(kv.map_uio, "uio0", 0, 0x10000 + PAGE) == errno.EINVAL
    assert errno_of(kv.map_uio, "uio0", 1, PAGE) == errno.EINVAL  # no map 1
    with kv.map_uio("uio0", 0, 0x10000) as window:
        assert len(window) == 0x10000


def test_old_constructor_options_still_lay_out_boot_time_nodes(tmp_path: Path) -> None:
    kernel = FakeKernel(
        tmp_path,
        part="2vp30ff896",
        family="virtex2p",
        bridges={"br0": "prr0"},
        uio={"uio3": ("prr0", 0x2000)},
        writable_bridges=True,
        shell_loaded=True,
    )
    assert uio_names(kernel) == {"uio3": "prr0"}
    assert kernel.read("sys/class/uio/uio3/maps/map0/size").strip() == "0x0000000000002000"
    kernel.write("sys/class/fpga_bridge/br0/enable", "1")
    assert kernel.read("sys/class/fpga_bridge/br0/state") == "enabled\n"
    kernel.write_file("lib/firmware/t.bit", build_bitstream("tdes", "2vp30ff896", "prr0", 4096))
    kernel.write(f"{MGR}/flags", "1")
    kernel.write(f"{MGR}/firmware", "t.bit")
    assert kernel.loaded == ["tdes"]
    kernel.write_file("lib/firmware/w.bit", build_bitstream("tdes", "7z020clg484", "prr0", 4096))
    assert errno_of(kernel.write, f"{MGR}/firmware", "w.bit") == errno.EINVAL
    assert kernel.read(f"{MGR}/state") == "write init error\n"
