"""dfx-mgr, with it or instead of it (issue 20, item 6): package folders as dfx-mgr writes
them, the dfx-mgrd socket protocol against the fake daemon, and ``juggle module import-dfx``.
"""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from juggle.commands.cli import app
from juggle.errors import DescriptorError, DfxPackageError, ProgrammingError
from juggle.fabric.linux.dfxmgr import (
    BASE_REGION,
    LIST_ACCEL_UIO,
    MAX_JSON_BYTES,
    UNLOAD_ACCEL,
    USER_LOAD,
    USER_LOAD_HAS_OVERLAY,
    USER_LOAD_PARTIAL,
    DfxMgrdLoader,
    decode_message,
    dfxmgrd_answers,
    encode_message,
    read_package,
)
from juggle.fabric.linux.fake_dfxmgrd import FakeDfxMgrd
from juggle.fabric.linux.loader import IsolationWrite, SlotLoad
from juggle.runtime.descriptors import parse_toml
from juggle.runtime.dfximport import import_package

PARTIAL0 = "opendfx_shell_i_RP_0_AES128_inst_0_partial.bit.bin"
PARTIAL1 = "opendfx_shell_i_RP_1_AES128_inst_1_partial.bit.bin"

SHELL_JSON = {
    # as Xilinx/kria-apps-firmware's k26-dfx shell.json and dfx-mgr's example write it:
    # numbers as strings, hex and decimal, "" for "not given"
    "shell_type": "PL_DFX",
    "num_pl_slots": "2",
    "num_aie_slots": "0",
    "load_base_design": "no",
    "device_name": "a0010000.SIHA_Manager",
    "reg_base": "",
    "reg_size": "",
    "clock_device_name": "",
    "isolation_slots": [
        {"offset": ["0x4000", "0x4004", "0x4008", "0x400c"], "values": ["0x01", "1", "0x0b", "2"]},
        {"offset": ["0x5000", "0x5004", "0x5008", "0x500c"], "values": ["0x01", "1", "11", "0x02"]},
    ],
}


def _accel_json(base: str) -> dict[str, object]:
    return {
        "accel_type": "SIHA_PL_DFX",
        "accel_devices": [
            {"dev_name": f"{base}.AccelConfig", "reg_base": f"0x{base}", "reg_size": "16777216"},
            {"dev_name": "rm_comm_box", "reg_base": "", "reg_size": ""},
        ],
        "fallbackBehaviour": "software",
    }


def write_package(root: Path) -> Path:
    """A 2-RP dfx-mgr base folder with one accelerator built for both slots, as dfx-mgr's
    README lays it out."""
    base = root / "k26_2rp"
    base.mkdir(parents=True)
    (base / "shell.json").write_text(json.dumps(SHELL_JSON, indent=1))
    (base / "opendfx_shell_wrapper.bit.bin").write_bytes(b"\xaa\x99\x55\x66" * 16)
    (base / "pl.dtbo").write_bytes(b"\xd0\x0d\xfe\xed base")
    for slot, partial, addr in ((0, PARTIAL0, "80000000"), (1, PARTIAL1, "82000000")):
        folder = base / "AES128" / f"AES128_slot{slot}"
        folder.mkdir(parents=True)
        (folder / "accel.json").write_text(json.dumps(_accel_json(addr)))
        (folder / partial).write_bytes(bytes([slot]) * 64)
        (folder / f"{partial}_i.dtbo").write_bytes(b"\xd0\x0d\xfe\xed slot")
        (folder / f"{partial}_i.dtsi").write_text("/dts-v1/; /plugin/;\n")
    return base


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (to see that nothing was written)."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short folder for Unix sockets (sun_path holds 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="jdfx", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


# -- package folders ---------------------------------------------------------------------------


def test_package_as_dfx_mgr_writes_it_parses(tmp_path: Path) -> None:
    base = write_package(tmp_path)
    pkg = read_package(base)
    assert pkg.name == "k26_2rp" and pkg.shell_type == "PL_DFX"
    assert pkg.load_base_design is False  # "no"
    shell = pkg.shell
    assert [(s.region, s.slot) for s in shell.slots] == [("rp0", 0), ("rp1", 1)]
    assert shell.slot("rp0").release == (
        IsolationWrite(0x4000, 1),
        IsolationWrite(0x4004, 1),
        IsolationWrite(0x4008, 0x0B),
        IsolationWrite(0x400C, 2),
    )
    assert shell.slot("rp1").release[2] == IsolationWrite(0x5008, 11)  # decimal "11"
    assert shell.slot("rp1").isolate[0] == IsolationWrite(0x500C, 0)
    assert shell.isolation_uio == "SIHA_Manager"
    assert shell.base_image == "opendfx_shell_wrapper.bit.bin"
    assert shell.base_overlay == "pl.dtbo"
    accel = pkg.accel("AES128")
    assert sorted(accel.slots) == [0, 1]
    slot1 = accel.slots[1]
    assert slot1.partial.name == PARTIAL1
    assert slot1.overlay is not None and slot1.overlay.name == f"{PARTIAL1}_i.dtbo"
    assert slot1.windows() == {"AccelConfig": "AccelConfig", "rm_comm_box": "rm_comm_box"}
    # regions come from a mapping when given (the profile's slot -> region)
    mapped = read_package(base, regions={0: "RP_0", 1: "RP_1"})
    assert [s.region for s in mapped.shell.slots] == ["RP_0", "RP_1"]


def _edit_json(path: Path, change: Callable[[dict[str, object]], None]) -> None:
    table = json.loads(path.read_text())
    change(table)
    path.write_text(json.dumps(table))


def _shell(change: Callable[[dict[str, object]], None]) -> Callable[[Path], None]:
    return lambda base: _edit_json(base / "shell.json", change)


def _accel(change: Callable[[dict[str, object]], None]) -> Callable[[Path], None]:
    return lambda base: _edit_json(base / "AES128" / "AES128_slot1" / "accel.json", change)


def _set_isolation_offset(table: dict[str, object]) -> None:
    slots = table["isolation_slots"]
    assert isinstance(slots, list)
    slots[1]["offset"][2] = "0x50zz"


def _drop_value(table: dict[str, object]) -> None:
    slots = table["isolation_slots"]
    assert isinstance(slots, list)
    slots[0]["values"].pop()


def _bad_reg_base(table: dict[str, object]) -> None:
    devices = table["accel_devices"]
    assert isinstance(devices, list)
    devices[0]["reg_base"] = "0xgg"


MALFORMED: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "shell.json not JSON": (
        lambda base: (base / "shell.json").write_text("{ shell_type: PL_DFX"),
        "shell.json",
        "<file>",
    ),
    "shell.json a list": (
        lambda base: (base / "shell.json").write_text("[1, 2]"),
        "shell.json",
        "<file>",
    ),
    "shell.json too large": (
        # valid JSON, only too long: the bound, not the parser, refuses it
        lambda base: (base / "shell.json").write_text(
            json.dumps(SHELL_JSON) + " " * MAX_JSON_BYTES
        ),
        "shell.json",
        "<file>",
    ),
    "shell.json missing": (
        lambda base: (base / "shell.json").unlink(),
        "shell.json",
        "<file>",
    ),
    "shell_type missing": (_shell(lambda t: t.pop("shell_type")), "shell.json", "shell_type"),
    "shell_type unknown": (
        _shell(lambda t: t.update(shell_type="PL_MAGIC")),
        "shell.json",
        "shell_type",
    ),
    "num_pl_slots missing": (_shell(lambda t: t.pop("num_pl_slots")), "shell.json", "num_pl_slots"),
    "num_pl_slots not a number": (
        _shell(lambda t: t.update(num_pl_slots="two")),
        "shell.json",
        "num_pl_slots",
    ),
    "isolation offset not a number": (
        _shell(_set_isolation_offset),
        "shell.json",
        "isolation_slots[1].offset[2]",
    ),
    "isolation values short": (_shell(_drop_value), "shell.json", "isolation_slots[0].values"),
    "accel_type missing": (_accel(lambda t: t.pop("accel_type")), "accel.json", "accel_type"),
    "accel reg_base not a number": (
        _accel(_bad_reg_base),
        "accel.json",
        "accel_devices[0].reg_base",
    ),
    "accel.json not JSON": (
        lambda base: (base / "AES128" / "AES128_slot0" / "accel.json").write_bytes(b"\xff\xfe"),
        "accel.json",
        "<file>",
    ),
    "accel.json missing": (
        lambda base: (base / "AES128" / "AES128_slot0" / "accel.json").unlink(),
        "accel.json",
        "<file>",
    ),
    "slot folder without a partial": (
        lambda base: (base / "AES128" / "AES128_slot1" / PARTIAL1).unlink(),
        "AES128_slot1",
        "partial",
    ),
    "slot beyond the shell's slots": (
        lambda base: shutil.copytree(
            base / "AES128" / "AES128_slot1", base / "AES128" / "AES128_slot2"
        ),
        "AES128_slot2",
        "<folder>",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_package_names_file_and_field(case: str, tmp_path: Path, short_dir: Path) -> None:
    base = write_package(tmp_path / "fw")
    breaks, file_name, field_name = MALFORMED[case]
    breaks(base)
    module = tmp_path / "module"
    module.mkdir()
    before = snapshot(tmp_path)
    with pytest.raises(DfxPackageError) as caught:
        read_package(base)
    path, named_field = caught.value.path, caught.value.field
    assert path is not None
    assert Path(path).name == file_name or file_name in path
    assert named_field == field_name
    assert file_name in str(caught.value) and repr(field_name) in str(caught.value)
    # import-dfx reads the same package: refused the same way, with nothing written anywhere
    with FakeDfxMgrd(short_dir / "d.sock") as daemon:
        with pytest.raises(DfxPackageError):
            import_package(base, interface="crypto.Aes", driver="aes.Driver", target_dir=tmp_path)
        assert daemon.requests == []
    assert snapshot(tmp_path) == before


# -- the socket protocol ---------------------------------------------------------------------


def test_message_layout_is_dfx_mgr_struct_message() -> None:
    packet = encode_message(USER_LOAD, "a.bin:a.dtbo:rp0", flags=3, slot=7)
    # HEADERSIZE (24) + size, size counting the NUL: what dfx-mgr-client writes
    assert len(packet) == 24 + len("a.bin:a.dtbo:rp0") + 1
    assert packet[:16] == (16).to_bytes(4, "little") + (17).to_bytes(4, "little") + (3).to_bytes(
        4, "little"
    ) + (7).to_bytes(4, "little")
    assert decode_message(packet) == (USER_LOAD, 3, 7, "a.bin:a.dtbo:rp0")


def _job(region: str = "rp0", design: str = "aes128", overlay: bytes | None = b"dtbo") -> SlotLoad:
    return SlotLoad(
        region=region,
        slot=0,
        design=design,
        image=b"\x00\x00\x00\xbb\x11\x22\x00\x44" + bytes(range(32)),
        firmware_name=f"{design}_{region}.bin",
        overlay=overlay,
        package="AES128",
    )


def test_load_and_unload_go_through_dfx_mgrd(short_dir: Path) -> None:
    with FakeDfxMgrd(short_dir / "d.sock") as daemon:
        loader = DfxMgrdLoader(short_dir / "d.sock", stage_dir=short_dir / "stage")
        job = _job()
        loader.load(job)
        assert loader.loaded() == {"rp0": "aes128"}
        (load,) = daemon.loads
        assert load.flags == USER_LOAD_PARTIAL | USER_LOAD_HAS_OVERLAY
        assert load.region == "rp0"
        assert load.image == job.image and load.overlay == b"dtbo"
        assert Path(load.overlay_path or "").name == "aes128_rp0.bin.dtbo"
        handle = loader.handle("rp0")
        assert handle == load.handle
        assert loader.uio("rp0", "AccelConfig") is None  # no kernel behind the fake: no UIO
        assert daemon.requests[-1][:3] == (LIST_ACCEL_UIO, 0, handle)
        loader.unload("rp0")
        assert daemon.unloads == [(handle, "rp0")]
        assert daemon.requests[-1] == (UNLOAD_ACCEL, 0, 0, str(handle))
        assert loader.loaded() == {} and daemon.held() == {}
        assert list((short_dir / "stage" / "rp0").iterdir()) == []  # staged files removed
        loader.unload("rp0")  # nothing held: no request
        assert daemon.requests[-1][0] == UNLOAD_ACCEL and len(daemon.unloads) == 1


def test_two_regions_and_reload(short_dir: Path) -> None:
    with FakeDfxMgrd(short_dir / "d.sock") as daemon:
        loader = DfxMgrdLoader(short_dir / "d.sock")
        loader.load(_job("rp0", "aes128"))
        loader.load(_job("rp1", "fft"))
        loader.load(_job("rp0", "fir"))  # rp0 is unloaded first, then loaded again
        assert loader.loaded() == {"rp0": "fir", "rp1": "fft"}
        assert [region for _, region in daemon.unloads] == ["rp0"]
        assert sorted(load.region for load in daemon.held().values()) == ["rp0", "rp1"]
        loader.close()


def test_dfx_mgrd_refusal_is_programming_error_naming_reply(short_dir: Path) -> None:
    with FakeDfxMgrd(short_dir / "d.sock") as daemon:
        loader = DfxMgrdLoader(short_dir / "d.sock", stage_dir=short_dir / "stage")
        daemon.fail_next("-3:write error")
        with pytest.raises(ProgrammingError, match=r"'-3:write error'.*no empty slot.*write error"):
            loader.load(_job())
        assert loader.loaded() == {} and daemon.loads == []
        assert list((short_dir / "stage" / "rp0").iterdir()) == []
    with FakeDfxMgrd(short_dir / "e.sock", base_active=False) as daemon:
        loader = DfxMgrdLoader(short_dir / "e.sock")
        with pytest.raises(ProgrammingError, match="reply '-1'"):
            loader.load(_job())  # a partial with no base design active: dfx-mgrd says -1
        assert daemon.loads == [] and loader.loaded() == {}


def test_base_design_loads_through_dfx_mgrd_as_a_full_load(tmp_path: Path, short_dir: Path) -> None:
    pkg = read_package(write_package(tmp_path))
    with FakeDfxMgrd(short_dir / "d.sock", base_active=False) as daemon:
        loader = DfxMgrdLoader(short_dir / "d.sock", firmware_dir=pkg.folder)
        with pytest.raises(ProgrammingError, match="reply '-1'"):
            loader.load(_job())  # no base yet
        loader.load_base(pkg.shell)
        (base,) = daemon.loads
        assert not base.partial and base.flags == USER_LOAD_HAS_OVERLAY
        assert base.region == BASE_REGION
        assert Path(base.image_path) == pkg.folder / "opendfx_shell_wrapper.bit.bin"
        assert Path(base.overlay_path or "") == pkg.folder / "pl.dtbo"
        loader.load(_job())  # now a partial takes
        assert loader.loaded() == {BASE_REGION: "k26_2rp", "rp0": "aes128"}
    with pytest.raises(ProgrammingError, match="firmware_dir"):
        DfxMgrdLoader(short_dir / "d.sock").load_base(pkg.shell)


def test_region_dfx_mgr_cannot_name_is_refused_before_any_request(short_dir: Path) -> None:
    with FakeDfxMgrd(short_dir / "d.sock") as daemon:
        loader = DfxMgrdLoader(short_dir / "d.sock")
        for region in ("region_too_long", "rp:0", "rp 0"):
            with pytest.raises(ProgrammingError, match="dfx-mgr region"):
                loader.load(_job(region))
        assert daemon.requests == []


def test_dfxmgrd_answers_only_while_a_daemon_listens(short_dir: Path) -> None:
    path = short_dir / "d.sock"
    assert dfxmgrd_answers(path) is False  # no socket file
    daemon = FakeDfxMgrd(path)
    assert dfxmgrd_answers(path) is True
    daemon.close()
    assert not path.exists()
    assert dfxmgrd_answers(path) is False
    # a stale socket file (a daemon that died without removing it) does not answer
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    stale.bind(str(path))
    stale.close()
    assert path.exists() and dfxmgrd_answers(path, timeout_s=0.2) is False
    with pytest.raises(ProgrammingError, match="did not answer"):
        DfxMgrdLoader(path, timeout_s=0.2).load(_job())


# -- import-dfx --------------------------------------------------------------------------------


def test_import_dfx_writes_a_descriptor_that_validates(tmp_path: Path) -> None:
    base = write_package(tmp_path)
    result = CliRunner().invoke(
        app,
        [
            "module",
            "import-dfx",
            str(base),
            "--interface",
            "crypto.AesService",
            "--driver",
            "aes_module.AesDriver",
            "--software",
            "aes_module.SoftwareAes",
            "--fabric",
            "kv260",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    target = base / "juggle.toml"
    assert report["path"] == str(target)
    descriptor = parse_toml(target.read_bytes(), str(target))
    (service,) = descriptor.services
    assert service.interfaces == ["crypto.AesService"]
    assert service.software is not None and service.software.class_ == "aes_module.SoftwareAes"
    assert service.hardware is not None and service.hardware.driver == "aes_module.AesDriver"
    # slot N -> the kv260 profile's region of slot N; paths relative to the module folder
    assert service.hardware.bitstreams == {
        "rp0": f"AES128/AES128_slot0/{PARTIAL0}",
        "rp1": f"AES128/AES128_slot1/{PARTIAL1}",
    }
    assert descriptor.module.name == "aes128"
    assert report["overlays"]["rp1"].endswith(f"{PARTIAL1}_i.dtbo")
    # a second run does not replace it without --force
    again = CliRunner().invoke(
        app,
        ["module", "import-dfx", str(base), "--interface", "a.B", "--driver", "c.D"],
    )
    assert again.exit_code == 2 and "exists" in again.output
    assert parse_toml(target.read_bytes(), str(target)).services[0].interfaces == [
        "crypto.AesService"
    ]


def test_import_maps_each_slot_to_its_region(tmp_path: Path) -> None:
    base = write_package(tmp_path / "module" / "fw")
    report = import_package(
        base,
        interface="crypto.AesService",
        driver="aes_module.AesDriver",
        regions={0: "RP_A", 1: "RP_B"},
        target_dir=tmp_path / "module",
        name="aes-dfx",
    )
    target = tmp_path / "module" / "juggle.toml"
    assert report["path"] == str(target)
    hardware = parse_toml(target.read_bytes(), str(target)).services[0].hardware
    assert hardware is not None
    assert hardware.bitstreams == {
        "RP_A": f"fw/k26_2rp/AES128/AES128_slot0/{PARTIAL0}",
        "RP_B": f"fw/k26_2rp/AES128/AES128_slot1/{PARTIAL1}",
    }
    # a package outside the module folder cannot be pinned by relative path: refused
    with pytest.raises(DescriptorError, match="outside the module folder"):
        import_package(base, interface="a.B", driver="c.D", target_dir=tmp_path / "other")
    assert not (tmp_path / "other").exists()


def test_import_dfx_refuses_a_bad_interface_writing_nothing(tmp_path: Path) -> None:
    base = write_package(tmp_path)
    before = snapshot(tmp_path)
    result = CliRunner().invoke(
        app,
        ["module", "import-dfx", str(base), "--interface", "not an id", "--driver", "a.B"],
    )
    assert result.exit_code == 2 and "interface" in result.output
    assert snapshot(tmp_path) == before
