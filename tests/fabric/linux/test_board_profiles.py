"""Profiles of real boards (kv260, zcu102, zedboard): their ``[linux]`` and ``[shell]`` tables,
validated; the shell as the Linux backend's ShellSpec; the new profiles on the sim backend; and
``--backend-option KEY=VALUE`` as the daemon and ``juggle board check`` read it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from Crypto.Cipher import DES3

import juggle
from juggle.errors import BackendError, ProfileError
from juggle.fabric import open_fabric
from juggle.fabric.bitstream import write_bitstream
from juggle.fabric.linux.check import backend_options
from juggle.fabric.linux.loader import IsolationWrite, ShellSpec
from juggle.fabric.profiles import _builtin_dir, load_profile

ROOT = Path(__file__).resolve().parents[3]
MODULES = ROOT / "examples" / "modules"
KV260 = (_builtin_dir() / "kv260.toml").read_text(encoding="utf-8")
TDES_KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")


def variant(tmp_path: Path, old: str, new: str, *, count: int = 1) -> Path:
    """kv260.toml with ``old`` replaced by ``new`` (``old`` must occur ``count`` times)."""
    assert KV260.count(old) == count, old
    path = tmp_path / "board.toml"
    path.write_text(KV260.replace(old, new), encoding="utf-8")
    return path


# -- the built-in tables ------------------------------------------------------------------


def test_kv260_shell_is_kria_2rp_with_dfx_mgr_isolation_writes() -> None:
    profile = load_profile("kv260")
    assert profile.board.part == "xck26-sfvc784-2LV-c"
    assert profile.region_names() == ("rp0", "rp1")
    assert [(r.window_base, r.window_size) for r in profile.regions] == [
        (0x8000_0000, 0x0200_0000),
        (0x8200_0000, 0x0200_0000),
    ]
    assert profile.linux is not None
    assert (profile.linux.family, profile.linux.load, profile.linux.manager) == (
        "zynqmp",
        "overlay",
        "fpga0",
    )
    assert profile.linux.dfxmgrd_socket == "/var/run/dfx-mgrd.socket"
    assert profile.shell is not None
    spec = profile.shell.spec()
    assert isinstance(spec, ShellSpec)
    assert spec.isolation_uio == "SIHA_Manager"
    assert (spec.base_image, spec.base_overlay) == (
        "opendfx_shell_wrapper.bit.bin",
        "opendfx_shell_wrapper.dtbo",
    )
    rp0, rp1 = spec.slot("rp0"), spec.slot("rp1")
    assert (rp0.slot, rp1.slot) == (0, 1)
    # Kria's shell.json isolation_slots: 0x01, 0x01, 0x0b, 0x02 at 0x4000.. / 0x5000..
    assert rp0.release == tuple(
        IsolationWrite(o, v)
        for o, v in zip((0x4000, 0x4004, 0x4008, 0x400C), (1, 1, 0xB, 2), strict=True)
    )
    assert rp1.release == tuple(
        IsolationWrite(o, v)
        for o, v in zip((0x5000, 0x5004, 0x5008, 0x500C), (1, 1, 0xB, 2), strict=True)
    )
    assert rp0.isolate == tuple(IsolationWrite(0x4000 + 4 * i, 0) for i in range(4))
    assert dict(rp0.windows) == {"ctrl": "AccelConfig", "comm": "rm_comm_box"}
    with pytest.raises(KeyError):
        spec.slot("rp2")


def test_zcu102_and_zedboard_have_linux_tables() -> None:
    zcu = load_profile("zcu102")
    assert zcu.linux is not None and zcu.linux.family == "zynqmp"
    assert zcu.board.part == "xczu9eg-ffvb1156-2-e"
    assert zcu.shell is not None and zcu.shell.spec().isolation_uio is None
    zed = load_profile("zedboard")
    assert zed.linux is not None and zed.linux.family == "zynq"
    assert zed.shell is not None
    spec = zed.shell.spec()
    assert [s.region for s in spec.slots] == ["prr1", "prr2", "prr3"]
    assert spec.base_image is None and spec.isolation_uio is None


def test_profiles_without_linux_tables_still_load() -> None:
    profile = load_profile("xupv2p")
    assert profile.linux is None and profile.shell is None


# -- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "written, expected",
    [('"0x4000"', 0x4000), ('"16384"', 0x4000), ("0x4000", 0x4000), ("16384", 0x4000)],
)
def test_register_numbers_as_ints_or_strings(tmp_path: Path, written: str, expected: int) -> None:
    path = variant(
        tmp_path, '{ offset = "0x4000", value = "0x01" }', f"{{ offset = {written}, value = 1 }}"
    )
    spec = load_profile(path).shell.spec()  # type: ignore[union-attr]
    assert spec.slot("rp0").release[0] == IsolationWrite(expected, 1)


@pytest.mark.parametrize(
    "written, words",
    [
        ('"0xZZ"', ["shell.slots.0.release.0.offset", "0xZZ"]),
        ('"4 000"', ["shell.slots.0.release.0.offset", "4 000"]),
        ('""', ["shell.slots.0.release.0.offset"]),
        ("-4", ["shell.slots.0.release.0.offset"]),
        ('"0x100000000"', ["shell.slots.0.release.0.offset"]),
        ('"0x4002"', ["not 32-bit aligned"]),
        ("4.0", ["shell.slots.0.release.0.offset"]),
    ],
)
def test_bad_register_numbers_name_the_key(tmp_path: Path, written: str, words: list[str]) -> None:
    path = variant(
        tmp_path,
        '{ offset = "0x4000", value = "0x01" }',
        f'{{ offset = {written}, value = "0x01" }}',
    )
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    for word in words:
        assert word in str(caught.value)


@pytest.mark.parametrize(
    "old, new, words",
    [
        ('family = "zynqmp"', 'family = "virtex"', ["linux.family", "virtex"]),
        ('load = "overlay"', 'load = "fpgautil"', ["linux.load", "fpgautil"]),
        ('load = "overlay"', 'load = "overlay"\nbridges = "br0"', ["linux.bridges", "Extra"]),
        ('name = "k26-dfx-2rp"', 'name = "k26-dfx-2rp"\nslot_count = 2', ["shell.slot_count"]),
        (
            'region = "rp0"\nslot = 0',
            'region = "rp0"\nslot = 0\nbridge = "br0"',
            ["shell.slots.0.bridge"],
        ),
        ('region = "rp0"', 'region = "rp9"', ["rp9", "is no region"]),
        ('region = "rp1"', 'region = "rp0"', ["shell slot region", "rp0", "twice"]),
        ("slot = 1", "slot = 0", ["shell slot index", "twice"]),
        ('isolation_uio = "SIHA_Manager"', "", ["rp0", "isolation_uio"]),
        ("uio_timeout_s = 5.0", "uio_timeout_s = 0", ["linux.uio_timeout_s"]),
        (
            'windows = { ctrl = "AccelConfig", comm = "rm_comm_box" }',
            'windows = { ctrl = "" }',
            ["ctrl", "names no UIO"],
        ),
    ],
)
def test_malformed_tables_are_refused_naming_the_key(
    tmp_path: Path, old: str, new: str, words: list[str]
) -> None:
    path = variant(tmp_path, old, new, count=KV260.count(old))
    if KV260.count(old) > 1:  # only the first occurrence
        path.write_text(KV260.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    for word in words:
        assert word in str(caught.value), (word, str(caught.value)[:2000])


# -- the new profiles on the simulated board ----------------------------------------------


@pytest.mark.parametrize("name", ["kv260", "zcu102", "zedboard"])
def test_linux_profiles_open_on_the_sim_backend(name: str) -> None:
    profile = load_profile(name)
    assert profile.shell is not None
    with open_fabric(name) as fabric:
        assert [r.name for r in fabric.regions()] == [s.region for s in profile.shell.slots]


def test_kv260_juggles_a_service_on_the_sim_backend(tmp_path: Path) -> None:
    module = tmp_path / "tdes"
    shutil.copytree(MODULES / "tdes", module)
    write_bitstream(
        module / "bitstreams" / "tdes_rp0.bit", "tdes", "xck26-sfvc784-2LV-c", "rp0", 200_000
    )
    descriptor = module / "juggle.toml"
    text = descriptor.read_text(encoding="utf-8")
    text, n = re.subn(
        r"bitstreams = \{[^}]*\}", 'bitstreams = { rp0 = "bitstreams/tdes_rp0.bit" }', text
    )
    assert n == 1
    descriptor.write_text(text, encoding="utf-8")
    with juggle.Framework("kv260") as fw:
        fw.install(module).start()
        enc = fw.get_service("EncryptionService", consumer="mail")
        enc.load_key(TDES_KEY)
        plain = bytes(range(16))
        expected = DES3.new(TDES_KEY, DES3.MODE_ECB).encrypt(plain)
        for to_hardware in (True, False):
            if to_hardware:
                fw.juggle(to_hardware=enc.service_id, to_software=[])
            else:
                fw.juggle(to_hardware=None, to_software=[enc.service_id])
            where = {s.service_id: (s.tier, s.region) for s in fw.services()}[enc.service_id]
            assert (where[0] == "hardware") is to_hardware
            assert where[1] == ("rp0" if to_hardware else None)
            buf = bytearray(plain)
            assert enc.encrypt(buf, len(buf)) == len(buf)
            assert bytes(buf) == expected
        stats = fw.statistics(enc.service_id)
        assert stats.per_tier["hardware"].calls == 1
        assert stats.total.errors == 0 and stats.fallbacks == 0


# -- --backend-option ---------------------------------------------------------------------


def test_backend_options_convert_to_the_option_types() -> None:
    options = backend_options(["root=/tmp/fake", "manager=fpga0", "load=sysfs"])
    assert options == {"root": "/tmp/fake", "manager": "fpga0", "load": "sysfs"}
    flags = backend_options(["dfxmgrd=false", "use_dtbo=on"])
    assert flags == {"dfxmgrd": False, "use_dtbo": True}
    assert backend_options(["dfxmgrd=/run/other.sock"]) == {"dfxmgrd": "/run/other.sock"}
    assert backend_options([]) == {}


@pytest.mark.parametrize(
    "items, words",
    [
        (["root"], ["'root'", "KEY=VALUE"]),
        (["=x"], ["KEY=VALUE"]),
        (["bridges=br0"], ["no option 'bridges'", "root"]),
        (["root=/a", "root=/b"], ["'root'", "twice"]),
        (["shell=k26"], ["shell", "cannot be written as text"]),
    ],
)
def test_bad_backend_options_name_the_item(items: list[str], words: list[str]) -> None:
    with pytest.raises(BackendError) as caught:
        backend_options(items)
    for word in words:
        assert word in str(caught.value)


def test_sim_takes_no_backend_option() -> None:
    with pytest.raises(BackendError, match="'sim' takes no --backend-option"):
        backend_options(["root=/x"], "sim")


def _daemon_params(argv: list[str]) -> dict[str, Any]:
    """What ``juggle daemon ARGV`` parses to, without starting a daemon."""
    import typer

    from juggle.daemon.command import app as daemon_app

    command = typer.main.get_command(daemon_app)
    with command.make_context("juggle daemon", argv) as ctx:
        return dict(ctx.params)


def test_daemon_parser_repeats_backend_option() -> None:
    params = _daemon_params(
        [
            "--fabric",
            "kv260",
            "--backend",
            "linux",
            "--backend-option",
            "root=/r",
            "--backend-option",
            "manager=fpga0",
        ]
    )
    assert list(params["backend_option"]) == ["root=/r", "manager=fpga0"]
    assert not _daemon_params([])["backend_option"]
