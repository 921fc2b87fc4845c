"""A slot whose windows the static shell already declares (Kria's base overlay carries the
slots' ``AccelConfig`` and ``rm_comm_box`` UIO nodes): the overlay juggle generates for a partial
declares no second node at the same address, the design's windows are the shell's, and
unloading the slot leaves the shell's nodes in place."""

from __future__ import annotations

from pathlib import Path

from linux_support import KV_PART, SHELL_DTBO, kv260_fake

from juggle.fabric import open_fabric
from juggle.fabric.bitstream import build_vendor_bit, parse_any
from juggle.fabric.linux.check import examine
from juggle.fabric.linux.fake import FakeKernel
from juggle.fabric.linux.fdt import UioNode
from juggle.fabric.profiles import load_profile

DFX_ITEM = "sys/kernel/config/device-tree/overlays/dfx-mgr-base"
ACCEL = (0x8000_0000, 0x0100_0000)  # rp0's AccelConfig and rm_comm_box (kv260.toml windows)
COMM = (0x8100_0000, 0x0100_0000)


def _names(kernel: FakeKernel) -> list[str]:
    return sorted(
        kernel.read(f"sys/class/uio/{d}/name").strip() for d in kernel.listdir("sys/class/uio")
    )


def _shell_applied_as_a_blob(root: Path) -> FakeKernel:
    """A kv260 fake whose base shell was applied as dfx-mgrd does: the blob written to an
    overlay item's ``dtbo`` attribute (its ``path`` stays empty)."""
    kernel = kv260_fake(root)
    kernel.mkdir(DFX_ITEM)
    kernel.write_bytes(f"{DFX_ITEM}/dtbo", (root / "lib/firmware" / SHELL_DTBO).read_bytes())
    assert kernel.read(f"{DFX_ITEM}/status").strip() == "applied"
    assert kernel.read(f"{DFX_ITEM}/path").strip() == ""
    return kernel


def test_windows_the_shell_declares_are_not_declared_again(tmp_path: Path) -> None:
    shell_windows = (UioNode(node="AccelConfig", reg=ACCEL), UioNode(node="rm_comm_box", reg=COMM))
    kernel = kv260_fake(tmp_path, shell_nodes=shell_windows)
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
    kernel = _shell_applied_as_a_blob(tmp_path)
    before = list(kernel.log)
    with open_fabric("kv260", backend="linux", sysfs=kernel, uio_timeout_s=2.0) as fab:
        assert fab.regions()[0].state == "EMPTY"
    new = [path for path, _ in kernel.log[len(before) :]]
    assert not [p for p in new if "overlays" in p], new  # found, not applied again


def test_board_check_sees_a_shell_applied_through_the_dtbo_attribute(tmp_path: Path) -> None:
    _shell_applied_as_a_blob(tmp_path)
    report = examine(load_profile("kv260"), root=tmp_path)
    assert report.shell is not None
    assert report.shell["loaded"] is True, report.shell
    assert report.shell["base_overlay_applied_as"] == "dfx-mgr-base"
