"""``juggle board check`` against the fake kernel laid out like a KV260 with AMD's 2-RP shell
applied; and ``juggle daemon --fabric kv260 --backend linux --backend-option root=...`` serving a
client process on that fake.

The check reads and changes nothing (the tree is snapshotted before and after); with a node
removed it exits non-zero naming what is missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from juggle.commands.cli import app
from juggle.errors import BackendError
from juggle.fabric.bitstream import build_vendor_bit, to_bin
from juggle.fabric.linux.check import examine
from juggle.fabric.linux.fake import FakeKernel
from juggle.fabric.linux.fake_dfxmgrd import FakeDfxMgrd
from juggle.fabric.linux.fdt import UioNode, build_overlay
from juggle.fabric.profiles import load_profile

ROOT = Path(__file__).resolve().parents[3]
PART = "xck26-sfvc784-2LV-c"
OVERLAYS = "sys/kernel/config/device-tree/overlays"
BASE_OVERLAY = "opendfx_shell_wrapper.dtbo"
BASE_IMAGE = "opendfx_shell_wrapper.bit.bin"
# the base shell's UIO nodes, as Xilinx/kria-apps-firmware k26-dfx/2rp/opendfx_shell_wrapper.dtsi
# declares them
SHELL_NODES = (
    UioNode("SIHA_Manager@a0100000", (0xA010_0000, 0x1_0000)),
    UioNode("AccelConfig@80000000", (0x8000_0000, 0x100_0000)),
    UioNode("rm_comm_box@81000000", (0x8100_0000, 0x100_0000)),
    UioNode("AccelConfig@82000000", (0x8200_0000, 0x100_0000)),
    UioNode("rm_comm_box@83000000", (0x8300_0000, 0x100_0000)),
)


def _unlabeled() -> Any:
    """THE RULE of tests/test_json_labels.py (one place defines it: tests/labels_support.py)."""
    spec = importlib.util.spec_from_file_location(
        "_labels_support", ROOT / "tests" / "labels_support.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.unlabeled


def kv260_board(root: Path, *, apply_base: bool = True) -> FakeKernel:
    """A fake ZynqMP kernel with the 2-RP shell's base design staged and (by default) its
    overlay applied through configfs, as the Kria boot or ``load_shell`` leaves it."""
    kernel = FakeKernel(root, part=PART, family="zynqmp")
    kernel.write_file(
        f"lib/firmware/{BASE_IMAGE}",
        to_bin(build_vendor_bit("opendfx_shell_wrapper", PART, partial=False)),
    )
    kernel.write_file(
        f"lib/firmware/{BASE_OVERLAY}",
        build_overlay(firmware_name=BASE_IMAGE, target="fpga_full", uio=SHELL_NODES),
    )
    if apply_base:
        kernel.mkdir(f"{OVERLAYS}/base")
        kernel.write(f"{OVERLAYS}/base/path", BASE_OVERLAY)
        assert kernel.read(f"{OVERLAYS}/base/status").strip() == "applied"
    return kernel


@pytest.fixture
def board(tmp_path: Path) -> FakeKernel:
    return kv260_board(tmp_path / "root")


def check(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        app,
        ["board", "check", "--fabric", "kv260", "--backend-option", f"root={root}", *args],
        catch_exceptions=False,
    )
    return result.exit_code, result.stdout


def snapshot(root: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """Every path under ``root``: its mode, mtime and (for a file) its bytes."""
    seen: dict[str, tuple[int, int, bytes | None]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            info = path.lstat()
            data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
            seen[str(path.relative_to(root))] = (info.st_mode, info.st_mtime_ns, data)
    return seen


def uio_named(kernel: FakeKernel, name: str, addr: int) -> str:
    for device in kernel.listdir("sys/class/uio"):
        base = f"sys/class/uio/{device}"
        if kernel.read(f"{base}/name").strip() == name:
            start = int(kernel.read(f"{base}/maps/map0/addr"), 0) + int(
                kernel.read(f"{base}/maps/map0/offset")
                if kernel.exists(f"{base}/maps/map0/offset")
                else "0",
                0,
            )
            if start == addr:
                return device
    raise AssertionError(f"no UIO {name!r} at {addr:#x}")


# -- the check ----------------------------------------------------------------------------


def test_check_reports_shell_slots_and_windows(board: FakeKernel) -> None:
    code, out = check(board.root, "--json")
    doc = json.loads(out)
    assert code == 0, doc["missing"]
    assert doc["ok"] is True and doc["missing"] == []
    assert doc["board"] == "kv260" and doc["family"] == "zynqmp"
    assert doc["manager"]["device"] == "fpga0" and doc["manager"]["state"]
    assert doc["loader"] == "overlay"  # no dfx-mgrd socket under the root
    assert doc["shell"]["name"] == "k26-dfx-2rp" and doc["shell"]["loaded"] is True
    assert doc["shell"]["base_overlay_applied_as"] == "base"
    siha = uio_named(board, "SIHA_Manager", 0xA010_0000)
    assert doc["shell"]["isolation_device"] == siha
    assert any(o["name"] == "base" and o["status"] == "applied" for o in doc["overlays"])
    slots = {s["region"]: s for s in doc["slots"]}
    assert [slots["rp0"]["slot"], slots["rp1"]["slot"]] == [0, 1]
    for region, ctrl, comm in (
        ("rp0", 0x8000_0000, 0x8100_0000),
        ("rp1", 0x8200_0000, 0x8300_0000),
    ):
        windows = {w["window"]: w for w in slots[region]["windows"]}
        assert windows["ctrl"]["device"] == uio_named(board, "AccelConfig", ctrl)
        assert windows["comm"]["device"] == uio_named(board, "rm_comm_box", comm)
        assert int(windows["ctrl"]["addr"], 16) + int(windows["ctrl"]["offset"], 16) == ctrl
        assert slots[region]["state"] == "windows-present"
        assert slots[region]["isolation_writes"] == {"release": 4, "isolate": 4}
    assert any("own fpga0" in a for a in doc["actions"])
    assert _unlabeled()(doc) == []


def test_check_changes_nothing(board: FakeKernel) -> None:
    before = snapshot(board.root)
    log = list(board.log)
    for args in ((), ("--json",)):
        code, _ = check(board.root, *args)
        assert code == 0
    assert snapshot(board.root) == before
    assert board.log == log


def test_check_text_names_what_is_there(board: FakeKernel) -> None:
    code, out = check(board.root)
    assert code == 0
    assert "shell k26-dfx-2rp: loaded" in out
    assert "slot 0 (rp0): windows-present" in out


def _remove_uio(kernel: FakeKernel, device: str) -> None:
    """The class entry of ``device`` gone (sys/class/uio/uioN is a symlink on a kernel)."""
    path = kernel.root / "sys/class/uio" / device
    if path.is_symlink():
        path.unlink()
    else:
        shutil.rmtree(path)


def _drop_siha(kernel: FakeKernel) -> str:
    _remove_uio(kernel, uio_named(kernel, "SIHA_Manager", 0xA010_0000))
    return "SIHA_Manager"


def _drop_dev_node(kernel: FakeKernel) -> str:
    device = uio_named(kernel, "AccelConfig", 0x8000_0000)
    (kernel.root / "dev" / device).unlink()
    return f"dev/{device}"


def _drop_manager(kernel: FakeKernel) -> str:
    shutil.rmtree(kernel.root / "sys/class/fpga_manager/fpga0")
    return "sys/class/fpga_manager/fpga0"


def _drop_configfs(kernel: FakeKernel) -> str:
    kernel.rmdir(f"{OVERLAYS}/base")
    shutil.rmtree(kernel.root / OVERLAYS)
    return OVERLAYS


def _unapply_base(kernel: FakeKernel) -> str:
    kernel.rmdir(f"{OVERLAYS}/base")
    return f"base overlay {BASE_OVERLAY!r} is not applied"


def _half_slot(kernel: FakeKernel) -> str:
    _remove_uio(kernel, uio_named(kernel, "rm_comm_box", 0x8100_0000))
    return "slot 'rp0': window(s) comm absent"


@pytest.mark.parametrize(
    "drop", [_drop_siha, _drop_dev_node, _drop_manager, _drop_configfs, _unapply_base, _half_slot]
)
def test_check_exits_nonzero_naming_what_is_missing(board: FakeKernel, drop: Any) -> None:
    named = drop(board)
    code, out = check(board.root, "--json")
    doc = json.loads(out)
    assert code == 1
    assert doc["ok"] is False
    assert any(named in item for item in doc["missing"]), (named, doc["missing"])
    code, out = check(board.root)
    assert code == 1 and named in out


def test_check_says_it_would_load_the_base_shell(tmp_path: Path) -> None:
    kernel = kv260_board(tmp_path / "root", apply_base=False)
    doc = json.loads(check(kernel.root, "--json")[1])
    assert doc["shell"]["loaded"] is False
    assert any("load_shell=true" in a for a in doc["actions"])
    # its files are on the search path: only the overlay itself is missing
    assert [m for m in doc["missing"] if BASE_IMAGE in m or "dtbo (" in m] == []
    (kernel.root / "lib/firmware" / BASE_IMAGE).unlink()
    doc = json.loads(check(kernel.root, "--json")[1])
    assert any(m.startswith(BASE_IMAGE) for m in doc["missing"])


@pytest.fixture
def dfxmgrd(board: FakeKernel) -> Iterator[FakeDfxMgrd]:
    path = board.root / "var/run/dfx-mgrd.socket"
    path.parent.mkdir(parents=True)
    with FakeDfxMgrd(path, kernel=board) as daemon:
        yield daemon


def test_check_with_dfxmgrd_answering_says_it_loads_through_it(
    board: FakeKernel, dfxmgrd: FakeDfxMgrd
) -> None:
    doc = json.loads(check(board.root, "--json")[1])
    assert doc["loader"] == "dfx-mgrd"
    assert any("through dfx-mgrd" in a and "never writes" in a for a in doc["actions"])
    assert dfxmgrd.loads == [] and dfxmgrd.unloads == []  # asked, nothing loaded
    for option in ("dfxmgrd=false", f"dfxmgrd={board.root}/nowhere.sock"):
        doc = json.loads(check(board.root, "--json", "--backend-option", option)[1])
        assert doc["loader"] == "overlay", option


def test_check_with_dfxmgrd_and_no_shell_says_dfx_mgr_loads_it(tmp_path: Path) -> None:
    kernel = kv260_board(tmp_path / "root", apply_base=False)
    path = kernel.root / "var/run/dfx-mgrd.socket"
    path.parent.mkdir(parents=True)
    with FakeDfxMgrd(path, kernel=kernel, base_active=False):
        code, out = check(kernel.root, "--json")
    doc = json.loads(out)
    assert code == 1 and doc["loader"] == "dfx-mgrd"
    assert any("not applied" in m for m in doc["missing"])
    assert any("dfx-mgr's own client" in a for a in doc["actions"])
    assert not any("load_shell" in a for a in doc["actions"])


def test_check_requiring_dfxmgrd_names_it_missing(board: FakeKernel) -> None:
    code, out = check(board.root, "--json", "--backend-option", "dfxmgrd=true")
    doc = json.loads(out)
    assert code == 1
    assert any("dfx-mgrd" in m and "dfxmgrd=true" in m for m in doc["missing"])


def test_check_of_a_stale_dfxmgrd_socket_says_juggle_owns_the_manager(board: FakeKernel) -> None:
    path = board.root / "var/run/dfx-mgrd.socket"
    path.parent.mkdir(parents=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    stale.bind(str(path))  # bound, never listening: a dead daemon's socket file
    try:
        doc = json.loads(check(board.root, "--json")[1])
    finally:
        stale.close()
    assert doc["loader"] == "overlay"
    assert any("does not answer" in a for a in doc["actions"])


def test_check_of_a_profile_without_shell(board: FakeKernel) -> None:
    report = examine(load_profile("xupv2p"), root=board.root)
    assert report.shell is None and report.slots == []
    assert report.ok, report.missing


def test_check_refuses_an_unknown_option(board: FakeKernel) -> None:
    with pytest.raises(BackendError, match="no option 'bridges'"):
        check(board.root, "--backend-option", "bridges=br0")


# -- the daemon on the fake board ---------------------------------------------------------


@pytest.mark.skipif(os.getuid() != 0, reason="the daemon tests run as root here")
def test_daemon_starts_on_kv260_fake_and_serves_a_client_process(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "daemon"))
    try:
        from daemon_support import DaemonProcess, make_base, worker_json
    finally:
        sys.path.remove(str(ROOT / "tests" / "daemon"))
    kernel = kv260_board(tmp_path / "root")
    base = make_base()
    daemon = DaemonProcess(
        base,
        extra=(
            "--fabric",
            "kv260",
            "--backend",
            "linux",
            "--backend-option",
            f"root={kernel.root}",
        ),
    )
    try:
        daemon.start()
        probe = worker_json("probe", str(daemon.socket))
        assert "identity" in probe, probe
        with daemon.client() as client:
            names = [r.name for r in client.regions()]
        assert names == ["rp0", "rp1"]
        assert daemon.alive
        assert daemon.terminate() == 0
    finally:
        daemon.kill()
        shutil.rmtree(base, ignore_errors=True)
