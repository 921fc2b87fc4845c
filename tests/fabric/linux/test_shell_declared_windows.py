"""A slot whose windows the static shell already declares (Kria's base overlay carries the
slots' ``AccelConfig`` and ``rm_comm_box`` UIO nodes): the overlay juggle generates for a partial
declares no second node at the same address, the design's windows are the shell's, and
unloading the slot leaves the shell's nodes in place."""

from __future__ import annotations

from pathlib import Path

from juggle.fabric import open_fabric
from juggle.fabric.bitstream import build_vendor_bit, parse_any, to_bin
from juggle.fabric.linux.fake import FakeKernel
from juggle.fabric.linux.fdt import UioNode, build_overlay
from juggle.fabric.profiles import load_profile

KV_PART = "xck26-sfvc784-2LV-c"
SHELL_IMAGE = "opendfx_shell_wrapper.bit.bin"
SHELL_DTBO = "opendfx_shell_wrapper.dtbo"
ACCEL = (0x8000_0000, 0x0100_0000)  # rp0's AccelConfig and rm_comm_box (kv260.toml windows)
COMM = (0x8100_0000, 0x0100_0000)


def _names(kernel: FakeKernel) -> list[str]:
    return sorted(
        kernel.read(f"sys/class/uio/{d}/name").strip() for d in kernel.listdir("sys/class/uio")
    )


def test_windows_the_shell_declares_are_not_declared_again(tmp_path: Path) -> None:
    kernel = FakeKernel(tmp_path, part=KV_PART, family="zynqmp")
    kernel.write_file(
        f"lib/firmware/{SHELL_IMAGE}",
        to_bin(build_vendor_bit("opendfx_shell", KV_PART, partial=False)),
    )
    nodes = [
        UioNode(node="SIHA_Manager", reg=(0xA010_0000, 0x10000)),
        UioNode(node="AccelConfig", reg=ACCEL),
        UioNode(node="rm_comm_box", reg=COMM),
    ]
    kernel.write_file(
        f"lib/firmware/{SHELL_DTBO}",
        build_overlay(firmware_name=SHELL_IMAGE, target="fpga_full", uio=nodes),
    )
    with open_fabric(
        "kv260", backend="linux", sysfs=kernel, load_shell=True, uio_timeout_s=2.0
    ) as fab:
        shell_nodes = _names(kernel)
        assert shell_nodes == ["AccelConfig", "SIHA_Manager", "rm_comm_box"]
        bit = build_vendor_bit("accel", KV_PART, payload_words=256)
        fab.program("rp0", parse_any(bit, source="accel.bit"), bit)
        assert _names(kernel) == shell_nodes  # no second AccelConfig / rm_comm_box
        window = fab.window("rp0")
        window.write32(0, 5)
        assert window.read32(0) == 5
        fab.unload("rp0")
        assert _names(kernel) == shell_nodes  # the shell's nodes stay


def test_a_shell_applied_through_the_dtbo_attribute_is_recognised(tmp_path: Path) -> None:
    """dfx-mgrd applies overlays by writing the blob (``path`` stays empty): open finds the
    shell by the ``firmware-name`` its blob names, and loads nothing again."""
    kernel = FakeKernel(tmp_path, part=KV_PART, family="zynqmp")
    kernel.write_file(
        f"lib/firmware/{SHELL_IMAGE}",
        to_bin(build_vendor_bit("opendfx_shell", KV_PART, partial=False)),
    )
    siha = UioNode(node="SIHA_Manager", reg=(0xA010_0000, 0x10000))
    blob = build_overlay(firmware_name=SHELL_IMAGE, target="fpga_full", uio=[siha])
    item = "sys/kernel/config/device-tree/overlays/dfx-mgr-base"
    kernel.mkdir(item)
    kernel.write_bytes(f"{item}/dtbo", blob)
    assert kernel.read(f"{item}/status").strip() == "applied"
    assert kernel.read(f"{item}/path").strip() == ""
    before = list(kernel.log)
    with open_fabric("kv260", backend="linux", sysfs=kernel, uio_timeout_s=2.0) as fab:
        assert fab.regions()[0].state == "EMPTY"
    new = [path for path, _ in kernel.log[len(before) :]]
    assert not [p for p in new if "overlays" in p], new  # found, not applied again


def test_board_check_sees_a_shell_applied_through_the_dtbo_attribute(tmp_path: Path) -> None:
    from juggle.fabric.linux.check import examine

    kernel = FakeKernel(tmp_path, part=KV_PART, family="zynqmp")
    siha = UioNode(node="SIHA_Manager", reg=(0xA010_0000, 0x10000))
    kernel.write_file(
        f"lib/firmware/{SHELL_IMAGE}",
        to_bin(build_vendor_bit("opendfx_shell", KV_PART, partial=False)),
    )
    item = "sys/kernel/config/device-tree/overlays/dfx-mgr-base"
    kernel.mkdir(item)
    kernel.write_bytes(
        f"{item}/dtbo", build_overlay(firmware_name=SHELL_IMAGE, target="fpga_full", uio=[siha])
    )
    report = examine(load_profile("kv260"), root=tmp_path)
    assert report.shell is not None
    assert report.shell["loaded"] is True, report.shell
    assert report.shell["base_overlay_applied_as"] == "dfx-mgr-base"
