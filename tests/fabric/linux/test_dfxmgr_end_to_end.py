"""dfx-mgr end to end (issue 20, item 6): a dfx-mgr package folder installed as a co-module's
hardware tier on a kv260-like fake kernel, loaded through the fake dfx-mgrd when it listens
(juggle never writes ``fpga0`` nor configfs itself) and through juggle's own overlay loader
when it does not (and the log says juggle owns ``fpga0``).

The fake kernel records which thread made every write, ``mkdir`` and ``rmdir``: the fake
dfx-mgrd works on its own thread (``fake-dfx-mgrd``), so what any other thread did is
juggle's. The "hardware" behind the slot's AccelConfig window is the module's CRC-32 register
model, plugged in where the backend maps that UIO device (the fake cannot run logic behind
``/dev/uioN``).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from linux_support import KV_PART, SHELL_DTBO, SHELL_IMAGE, SIHA, juggle_round_trip
from typer.testing import CliRunner

import juggle
from juggle.commands.cli import app
from juggle.errors import DfxPackageError
from juggle.fabric import Fabric, open_fabric
from juggle.fabric.bitstream import build_vendor_bit, to_bin
from juggle.fabric.linux.fake import FakeKernel
from juggle.fabric.linux.fake_dfxmgrd import FakeDfxMgrd
from juggle.fabric.linux.fdt import UioNode, build_overlay, read_overlay
from juggle.fabric.linux.loader import SlotLoad

OVERLAYS = "sys/kernel/config/device-tree/overlays"
MANAGER = "sys/class/fpga_manager"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "modules"
DAEMON_THREAD = "fake-dfx-mgrd"
PARTIALS = {
    0: "opendfx_shell_i_RP_0_crc32_inst_0_partial.bit.bin",
    1: "opendfx_shell_i_RP_1_crc32_inst_1_partial.bit.bin",
}
WINDOWS = {0: 0x8000_0000, 1: 0x8200_0000}  # kv260.toml: rp0, rp1 window_base
COMM_BYTES = 0x1_0000  # the package's rm_comm_box: smaller than the overlay juggle generates

SHELL_JSON = {
    # as Xilinx/kria-apps-firmware's k26-dfx shell.json writes it: numbers as strings
    "shell_type": "PL_DFX",
    "num_pl_slots": "2",
    "num_aie_slots": "0",
    "load_base_design": "no",
    "device_name": "a0100000.SIHA_Manager",
    "isolation_slots": [
        {"offset": ["0x4000", "0x4004", "0x4008", "0x400c"], "values": ["0x01", "1", "0x0b", "2"]},
        {"offset": ["0x5000", "0x5004", "0x5008", "0x500c"], "values": ["0x01", "1", "11", "0x02"]},
    ],
}


class _Kernel(FakeKernel):
    """The fake kernel, noting the thread of every write, mkdir and rmdir."""

    def __init__(self, root: Path) -> None:
        self.by: list[tuple[str, str, str]] = []
        super().__init__(root, part=KV_PART, family="zynqmp")

    def _note(self, path: str, op: str) -> None:
        self.by.append((threading.current_thread().name, path.lstrip("/"), op))

    def write(self, path: str, text: str) -> None:
        self._note(path, "write")
        super().write(path, text)

    def write_bytes(self, path: str, data: bytes) -> None:
        self._note(path, "write")
        super().write_bytes(path, data)

    def mkdir(self, path: str) -> None:
        self._note(path, "mkdir")
        super().mkdir(path)

    def rmdir(self, path: str) -> None:
        self._note(path, "rmdir")
        super().rmdir(path)


def _kv260(root: Path) -> _Kernel:
    """A K26 whose boot left the 2-RP shell applied through configfs (as dfx-mgrd's default
    accelerator does on Kria Ubuntu); the writes of that setup are cleared from the notes."""
    kernel = _Kernel(root)
    kernel.write_file(
        f"lib/firmware/{SHELL_IMAGE}", to_bin(build_vendor_bit("shell", KV_PART, partial=False))
    )
    siha = UioNode(node="SIHA_Manager", reg=(SIHA, 0x10000))
    blob = build_overlay(firmware_name=SHELL_IMAGE, target="fpga_full", uio=[siha])
    kernel.write_file(f"lib/firmware/{SHELL_DTBO}", blob)
    kernel.mkdir(f"{OVERLAYS}/k26-dfx-2rp")
    kernel.write(f"{OVERLAYS}/k26-dfx-2rp/path", SHELL_DTBO)
    assert kernel.read(f"{OVERLAYS}/k26-dfx-2rp/status").strip() == "applied"
    (kernel.root / "var/run").mkdir(parents=True)
    kernel.by.clear()
    kernel.log.clear()
    kernel.received.clear()
    return kernel


def _slot_overlay(slot: int, *, outside: bool = False) -> bytes:
    base = WINDOWS[slot]
    ctrl = UioNode(node="AccelConfig", reg=(base, 0x100_0000))
    comm = UioNode(
        node="rm_comm_box", reg=(base + (0x200_0000 if outside else 0x100_0000), COMM_BYTES)
    )
    return build_overlay(firmware_name=PARTIALS[slot], target=f"fpga_PR{slot}", uio=[ctrl, comm])


def _write_package(base: Path, bit: bytes) -> None:
    """A dfx-mgr base folder as dfx-mgr's README lays it out: shell.json, the shell's image
    and overlay, and accelerator crc32 built for both slots (accel.json, partial, .dtbo)."""
    base.mkdir(parents=True)
    (base / "shell.json").write_text(json.dumps(SHELL_JSON, indent=1))
    (base / SHELL_IMAGE).write_bytes(to_bin(build_vendor_bit("shell", KV_PART, partial=False)))
    (base / SHELL_DTBO).write_bytes(build_overlay(firmware_name=SHELL_IMAGE, target="fpga_full"))
    for slot, partial in PARTIALS.items():
        folder = base / "crc32" / f"crc32_slot{slot}"
        folder.mkdir(parents=True)
        accel = {
            "accel_type": "SIHA_PL_DFX",
            "accel_devices": [
                {"dev_name": f"{WINDOWS[slot]:x}.AccelConfig", "reg_base": "", "reg_size": ""},
                {"dev_name": "rm_comm_box", "reg_base": "", "reg_size": ""},
            ],
        }
        (folder / "accel.json").write_text(json.dumps(accel))
        (folder / partial).write_bytes(to_bin(bit))
        (folder / f"{partial}_i.dtbo").write_bytes(_slot_overlay(slot))


@pytest.fixture
def root() -> Iterator[Path]:
    """A short folder (the socket's path must fit sun_path's 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="jdfx", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


BIT = build_vendor_bit("crc32", KV_PART, payload_words=128)


@pytest.fixture
def module(tmp_path: Path) -> Path:
    """The CRC-32 example's code with a dfx-mgr package inside it, its juggle.toml written by
    ``juggle module import-dfx``."""
    target = tmp_path / "crc32"
    shutil.copytree(EXAMPLES / "crc32", target)
    shutil.rmtree(target / "bitstreams")
    (target / "zedboard.toml").unlink()
    package = target / "fw" / "k26_2rp"
    _write_package(package, BIT)
    result = CliRunner().invoke(
        app,
        [
            "module", "import-dfx", str(package),
            "--interface", "crc.ChecksumService",
            "--driver", "crc32_module.Crc32Driver",
            "--software", "crc32_module.SoftwareCrc32",
            "--native", "crc32_module.NativeCrc32",
            "--fabric", "kv260",
            "--target-dir", str(target),
            "--name", "crc32",
            "--force",
            "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["bitstreams"] == {
        "rp0": f"fw/k26_2rp/crc32/crc32_slot0/{PARTIALS[0]}",
        "rp1": f"fw/k26_2rp/crc32/crc32_slot1/{PARTIALS[1]}",
    }
    return target


def _open(kernel: FakeKernel) -> Fabric:
    # what Framework("kv260", backend="linux") opens with the daemon's backend options
    # root=<the fake> and uio_timeout_s=2 (sysfs= plugs the fake kernel in directly)
    return open_fabric("kv260", backend="linux", sysfs=kernel, uio_timeout_s=2.0)


def _uio_named(kernel: FakeKernel, name: str) -> list[str]:
    return [
        d
        for d in kernel.listdir("sys/class/uio")
        if kernel.read(f"sys/class/uio/{d}/name").strip() == name
    ]


def test_with_dfx_mgrd_loads_and_unloads_go_through_it(
    root: Path, module: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = _kv260(root)
    with FakeDfxMgrd(root / "var/run/dfx-mgrd.socket", kernel=kernel) as daemon:
        fab = _open(kernel)  # the backend checks <root>/var/run/dfx-mgrd.socket (kv260.toml)
        backend: Any = fab._backend
        assert backend.loader.name == "dfx-mgrd"
        jobs: list[SlotLoad] = []
        real_load = backend.loader.load

        def spy(job: SlotLoad) -> None:
            jobs.append(job)
            real_load(job)

        monkeypatch.setattr(backend.loader, "load", spy)
        seen: dict[str, Any] = {}

        def during(_fw: Any) -> None:
            (comm,) = _uio_named(kernel, "rm_comm_box")
            seen["comm_size"] = int(kernel.read(f"sys/class/uio/{comm}/maps/map0/size"), 16)
            seen["held"] = daemon.held()

        failed = juggle_round_trip(fab, module, monkeypatch, during=during)
        assert failed == 0

    # the load went through dfx-mgrd, with the package's overlay and accelerator
    (job,) = jobs
    assert job.region == "rp0" and job.package == "crc32" and job.overlay is not None
    (load,) = daemon.loads
    assert load.region == "rp0" and load.partial and load.overlay == job.overlay
    assert load.image == to_bin(BIT)  # the kernel-ready image, header-less big-endian
    info = read_overlay(load.overlay)
    # the package's overlay, its firmware-name the file the image was staged as
    assert info.firmware_name == Path(load.image_path).name == job.firmware_name
    assert info.target == "fpga_PR0" and info.partial
    assert [n.node for n in info.uio_nodes] == ["AccelConfig@80000000", "rm_comm_box@81000000"]
    assert seen["comm_size"] == COMM_BYTES  # the package's window, not one juggle generated
    assert [h.region for h in seen["held"].values()] == ["rp0"]
    assert daemon.unloads == [(load.handle, "rp0")]  # and the unload too
    assert kernel.received[-1] == (job.firmware_name, to_bin(BIT))
    assert _uio_named(kernel, "AccelConfig") == []  # gone with dfx-mgrd's rmdir
    assert "describe rp0 crc32_slot0" in backend.trace
    # juggle never wrote fpga0, nor any configfs overlay: dfx-mgrd made every overlay change
    assert [e for e in kernel.by if e[1].startswith(MANAGER)] == []
    assert [e for e in kernel.log if e[0].startswith(MANAGER)] == []
    by_juggle = [e for e in kernel.by if e[0] != DAEMON_THREAD]
    assert [e for e in by_juggle if e[1].startswith(OVERLAYS)] == []
    assert [(p, op) for t, p, op in kernel.by if t == DAEMON_THREAD and op != "write"] == [
        (f"{OVERLAYS}/rp0", "mkdir"),
        (f"{OVERLAYS}/rp0", "rmdir"),
    ]


def test_without_dfx_mgrd_juggle_owns_fpga0_and_loads_the_package_overlay(
    root: Path, module: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    kernel = _kv260(root)
    (root / "var/run/dfx-mgrd.socket").write_bytes(b"")  # a stale socket file: nobody answers
    with caplog.at_level(logging.INFO, logger="juggle.fabric.linux"):
        fab = _open(kernel)
    assert "juggle owns FPGA manager fpga0 (overlay path; no dfx-mgrd socket answers)" in (
        caplog.text
    )
    backend: Any = fab._backend
    assert backend.loader.name == "overlay"
    seen: dict[str, Any] = {}

    def during(_fw: Any) -> None:
        (comm,) = _uio_named(kernel, "rm_comm_box")
        seen["comm_size"] = int(kernel.read(f"sys/class/uio/{comm}/maps/map0/size"), 16)
        path = kernel.read(f"{OVERLAYS}/juggle-rp0/path").strip()
        seen["path"] = path
        seen["overlay"] = kernel.read_bytes(f"run/juggle/firmware/{path}")

    assert juggle_round_trip(fab, module, monkeypatch, during=during) == 0
    # juggle applied the package's overlay itself, naming the image it staged
    info = read_overlay(seen["overlay"])
    assert seen["path"] == f"{info.firmware_name}.dtbo"
    assert info.firmware_name is not None and info.firmware_name.startswith("juggle-rp0-")
    assert info.target == "fpga_PR0"
    assert seen["comm_size"] == COMM_BYTES  # the package's window, not a generated one
    assert kernel.received[-1] == (info.firmware_name, to_bin(BIT))
    ops = [(p, op) for _, p, op in kernel.by if op != "write"]
    assert ops == [(f"{OVERLAYS}/juggle-rp0", "mkdir"), (f"{OVERLAYS}/juggle-rp0", "rmdir")]
    assert {t for t, _, _ in kernel.by} == {threading.main_thread().name}


def test_a_slot_overlay_reaching_outside_the_window_is_refused_before_any_write(
    root: Path, module: Path
) -> None:
    folder = module / "fw" / "k26_2rp" / "crc32" / "crc32_slot0"
    dtbo = folder / f"{PARTIALS[0]}_i.dtbo"
    dtbo.write_bytes(_slot_overlay(0, outside=True))
    kernel = _kv260(root)
    with FakeDfxMgrd(root / "var/run/dfx-mgrd.socket", kernel=kernel) as daemon:
        fw = juggle.Framework(fabric=_open(kernel))
        try:
            with pytest.raises(DfxPackageError, match=r"_i\.dtbo.*rm_comm_box.*outside") as err:
                fw.install(module)
            assert (err.value.path, err.value.field) == (str(dtbo), "rm_comm_box@82000000/reg")
            assert fw.modules() == ()
        finally:
            fw.close()
        assert daemon.loads == []
    assert kernel.by == [] and kernel.received == []
