"""``juggle module new`` / ``juggle module bitstream`` and the from-scratch ``crc32`` co-module.

The acceptance scenario of issue 13 item 3 runs through the commands on a local Typer app (the
scaffold's two commands and juggle's own ``module validate``): scaffold ``demo_svc`` for
``demo.EchoService``, validate it, install it, call it, juggle it to hardware and back. The
``crc32`` example is checked against :func:`zlib.crc32` at every tier on both boards it ships
for, and its core and driver on a register window of their own.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import json
import random
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import juggle
from juggle.commands.module import module_bitstream, module_new, module_validate
from juggle.errors import (
    BitstreamTooLargeError,
    ConfigurationError,
    CoreTimeoutError,
    ModuleError,
    ServiceArgumentError,
    UnknownRegionError,
)
from juggle.fabric.bitstream import read_bitstream
from juggle.fabric.sim.model import RegisterModel
from juggle.fabric.sim.window import SimWindow
from juggle.scaffold import new_module, scaffold_module, write_module_bitstream
from juggle.shipped import example_module

runner = CliRunner()
_ids = itertools.count()


def _app() -> typer.Typer:
    """``juggle module new|bitstream|validate`` on an app of the test's own."""
    app = typer.Typer()
    module_app = typer.Typer()
    app.add_typer(module_app, name="module")
    module_app.command("new")(module_new)
    module_app.command("bitstream")(module_bitstream)
    module_app.command("validate")(module_validate)
    return app


APP = _app()


def _json(args: list[str], exit_code: int = 0) -> dict[str, Any]:
    """Run ``args``; it exits with ``exit_code`` and prints exactly one JSON document."""
    result = runner.invoke(APP, args)
    assert result.exit_code == exit_code, (result.stdout, result.exception)
    document = json.loads(result.stdout)  # one document: anything more does not parse
    assert isinstance(document, dict)
    return document


def _core(fw: juggle.Framework, region: str) -> RegisterModel:
    window = fw.fabric.window(region)
    assert isinstance(window, SimWindow)
    return window.model


def _xor(data: bytes, mask: int) -> bytes:
    key = mask.to_bytes(4, "little")
    return bytes(b ^ key[i % 4] for i, b in enumerate(data))


# -- juggle module new: the acceptance scenario --------------------------------------------------


def test_module_new_validates_installs_calls_and_juggles(tmp_path: Path) -> None:
    made = _json(
        [
            "module",
            "new",
            "demo_svc",
            "--interface",
            "demo.EchoService",
            "--target-dir",
            str(tmp_path),
            "--json",
        ]
    )
    path = tmp_path / "demo_svc"
    assert made["path"] == str(path) and made["region"] == "prr0"
    assert made["part"] == "2vp30ff896" and made["bitstream"]["bytes"] == 149_088
    assert sorted(made["files"]) == sorted(
        ["juggle.toml", "demo.py", "demo_svc_module.py", "bitstreams/demo_svc_prr0.bit"]
    )
    assert all((path / f).is_file() for f in made["files"])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left

    report = _json(["module", "validate", str(path), "--json"])
    assert report["valid"] is True and report["imported"] is False
    (service,) = report["services"]
    assert service["interfaces"] == ["demo.EchoService"]
    assert service["tiers"] == ["software", "hardware"]
    assert service["bitstreams"]["prr0"]["design"] == "demo_svc"
    assert _json(["module", "validate", str(path), "--import", "--json"])["imported"] is True

    message = b"juggle me to hardware and back!"  # 31 bytes: the last word is partial
    with juggle.Framework("xupv2p") as fw:
        fw.install(path).start()
        echo = fw.get_service("demo.EchoService")
        sid = echo.service_id
        assert echo.echo(message) == message  # mask 0 echoes
        echo.set_mask(0x5A3C_0F01)  # state: replayed onto every new implementation
        expected = _xor(message, 0x5A3C_0F01)
        assert echo.echo(message) == expected
        assert fw.services()[0].tier == "software"

        juggled = fw.juggle(to_hardware=sid)
        assert juggled.region == "prr0" and fw.services()[0].tier == "hardware"
        assert fw.regions()[0].design == "demo_svc" and fw.regions()[0].module == "demo_svc"
        assert echo.echo(message) == expected
        core = _core(fw, "prr0")
        assert core.operations == 8  # type: ignore[attr-defined]  # 31 bytes: 8 words
        assert core.read(0x00, 0) == 0x5A3C_0F01  # the mask was replayed into MASK

        fw.juggle(to_software=[sid])
        assert fw.services()[0].tier == "software"
        assert echo.echo(message) == expected
        stats = fw.statistics(sid)
        assert stats.fallbacks == 0 and stats.per_tier["hardware"].calls == 1


@pytest.mark.parametrize(
    ("fabric", "region", "expected_region", "size"),
    [("zedboard", None, "prr1", 80_911), ("zedboard", "prr3", "prr3", 525_923)],
)
def test_module_new_for_a_board_and_region_juggles_there(
    tmp_path: Path, fabric: str, region: str | None, expected_region: str, size: int
) -> None:
    made = scaffold_module(
        "z-svc", "acme.tools.ZService", target_dir=tmp_path, fabric=fabric, region=region
    )
    assert made.region == expected_region and made.bitstream_bytes == size
    header = read_bitstream(made.path / made.bitstream)
    assert (header.design, header.part, header.region) == ("z-svc", "7z020clg484", made.region)
    assert (made.path / "acme" / "__init__.py").is_file()
    assert made.classes["software"] == "z_svc_module.SoftwareZ"
    with juggle.Framework(fabric) as fw:
        fw.install(made.path).start()
        svc = fw.get_service("acme.tools.ZService")
        svc.set_mask(0xFF)
        assert fw.juggle(to_hardware=svc.service_id).region == expected_region
        assert svc.z(b"\x00\x01\x02\x03\x04") == b"\xff\x01\x02\x03\xfb"


def test_module_new_refuses_bad_input_as_one_json_error(tmp_path: Path) -> None:
    base = ["module", "new", "--target-dir", str(tmp_path), "--json"]
    error = _json([*base, "Bad Name", "--interface", "demo.EchoService"], exit_code=2)
    assert error["type"] == "ConfigurationError" and "Bad Name" in error["error"]
    error = _json([*base, "ok", "--interface", "EchoService"], exit_code=2)
    assert error["type"] == "ConfigurationError" and "package.Class" in error["error"]
    error = _json([*base, "ok", "--interface", "crypto.EncryptionService"], exit_code=2)
    assert "reference interfaces" in error["error"]
    error = _json([*base, "ok", "--interface", "demo.EchoService", "--region", "prr9"], 2)
    assert error["type"] == "UnknownRegionError" and "prr9" in error["error"]
    error = _json([*base, "tdes", "--interface", "demo.EchoService"], exit_code=2)
    assert "built-in core" in error["error"]
    (tmp_path / "taken").mkdir()
    error = _json([*base, "taken", "--interface", "demo.EchoService"], exit_code=2)
    assert error["type"] == "ModuleError" and "exists already" in error["error"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]  # nothing else written


def test_module_new_api_errors_and_text_output(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="code file"):
        new_module("demo", "demo_module.Service", target_dir=tmp_path)
    with pytest.raises(UnknownRegionError, match="regions: prr1, prr2, prr3"):
        new_module("demo", "demo.Service", target_dir=tmp_path, fabric="zedboard", region="x")
    path = new_module("demo", "demo.Service", target_dir=tmp_path / "new" / "folder")
    assert (path / "juggle.toml").is_file()
    with pytest.raises(ModuleError, match="exists already"):
        new_module("demo", "demo.Service", target_dir=tmp_path / "new" / "folder")
    result = runner.invoke(
        APP, ["module", "new", "echo", "--interface", "x.Echo", "--target-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert "created" in result.stdout and "juggle.toml" in result.stdout
    assert "juggle module validate" in result.stdout


# -- juggle module bitstream ----------------------------------------------------------------------


def test_module_bitstream_writes_part_region_and_size(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "core_prr2.bit"
    doc = _json(
        [
            "module",
            "bitstream",
            str(out),
            "--design",
            "mycore",
            "--fabric",
            "zedboard",
            "--region",
            "prr2",
            "--json",
        ]
    )
    assert doc == {
        "path": str(out),
        "design": "mycore",
        "fabric": "zedboard",
        "part": "7z020clg484",
        "region": "prr2",
        "bytes": 323_645,
        "max_bytes": 344_000,
    }
    header = read_bitstream(out)
    assert (header.design, header.part, header.region, header.size) == (
        "mycore",
        "7z020clg484",
        "prr2",
        323_645,
    )
    doc = _json(["module", "bitstream", str(tmp_path / "a.bit"), "--design", "a", "--json"])
    assert (doc["part"], doc["region"], doc["bytes"]) == ("2vp30ff896", "prr0", 149_088)
    doc = _json(
        [
            "module",
            "bitstream",
            str(tmp_path / "b.bit"),
            "--design",
            "b",
            "--size",
            "160001",
            "--json",
        ],
        exit_code=2,
    )
    assert doc["type"] == "BitstreamTooLargeError" and "160,000" in doc["error"]
    assert not (tmp_path / "b.bit").exists()
    doc = _json(
        ["module", "bitstream", str(tmp_path / "c.bit"), "--design", "no/slash", "--json"], 2
    )
    assert doc["type"] == "BitstreamFormatError"
    result = runner.invoke(APP, ["module", "bitstream", str(tmp_path / "d.bit"), "--design", "d"])
    assert result.exit_code == 0 and "wrote" in result.stdout


def test_write_module_bitstream_api(tmp_path: Path) -> None:
    path = write_module_bitstream(
        tmp_path / "x.bit", "x", fabric="xupv2p", region="prr0", size=2_000
    )
    assert read_bitstream(path).size == 2_000
    with pytest.raises(BitstreamTooLargeError, match="prr1"):
        write_module_bitstream(
            tmp_path / "y.bit", "y", fabric="zedboard", region="prr1", size=102_001
        )
    with pytest.raises(UnknownRegionError):
        write_module_bitstream(tmp_path / "z.bit", "z", fabric="zedboard", region="prr0")


# -- the crc32 example -----------------------------------------------------------------------------

CRC32 = example_module("crc32")
BOARDS = [
    pytest.param("xupv2p", CRC32, "prr0", id="xupv2p"),
    pytest.param("zedboard", CRC32 / "zedboard.toml", "prr1", id="zedboard"),
]
_rng = random.Random(32)
MESSAGES = [b"", b"a", b"ab", b"abc", b"abcd", b"123456789", _rng.randbytes(63)]
MESSAGES += [_rng.randbytes(n) for n in (64, 257, 1_000, 4_099)]


@pytest.fixture(scope="module")
def crc_code() -> Iterator[Any]:
    """The crc32 module's code, imported as a package of its own (it uses relative imports)."""
    package = f"_test_scaffold_crc32_{next(_ids)}"
    spec = importlib.util.spec_from_file_location(
        package, CRC32 / "__init__.py", submodule_search_locations=[str(CRC32)]
    )
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[package] = module
    writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ in there
    try:
        yield importlib.import_module(f"{package}.crc32_module")
    finally:
        sys.dont_write_bytecode = writes
        for name in [n for n in sys.modules if n.split(".")[0] == package]:
            del sys.modules[name]


def test_crc32_validates_on_both_boards() -> None:
    for target, fabric, region, size in (
        (CRC32, "xupv2p", "prr0", 149_088),
        (CRC32 / "zedboard.toml", "zedboard", "prr1", 80_911),
    ):
        report = _json(["module", "validate", str(target), "--fabric", fabric, "--json"])
        (service,) = report["services"]
        assert report["name"] == "crc32" and service["interfaces"] == ["crc.ChecksumService"]
        assert service["tiers"] == ["software", "native", "hardware"]
        assert service["bitstreams"] == {
            region: {
                "design": "crc32",
                "part": read_bitstream(CRC32 / "bitstreams" / f"crc32_{fabric}_{region}.bit").part,
                "bytes": size,
            }
        }
    # one descriptor per board: the xupv2p one names a region the zedboard does not have
    # (validate re-raises the error after its JSON; juggle's main() makes that exit status 2)
    result = runner.invoke(
        APP, ["module", "validate", str(CRC32), "--fabric", "zedboard", "--json"]
    )
    assert result.exit_code != 0 and isinstance(result.exception, UnknownRegionError)
    assert "no region 'prr0'" in json.loads(result.stdout)["error"]


def test_crc32_is_written_from_scratch() -> None:
    for source in CRC32.glob("*.py"):
        assert "juggle.services" not in source.read_text(), source


@pytest.mark.parametrize(("fabric", "target", "region"), BOARDS)
def test_crc32_matches_zlib_at_every_tier(fabric: str, target: Path, region: str) -> None:
    expected = [zlib.crc32(m) for m in MESSAGES]
    head, tail = MESSAGES[-1][:1_001], MESSAGES[-1][1_001:]
    with juggle.Framework(fabric) as fw:
        fw.install(target).start()
        crc = fw.get_service("crc.ChecksumService", filter="(algorithm=crc-32)")
        sid = crc.service_id
        for tier in ("software", "native", "hardware", "software"):
            fw.set_tier(sid, tier)
            assert fw.services()[0].tier == tier
            assert [crc.crc32(m) for m in MESSAGES] == expected, tier
            assert crc.crc32(tail, crc.crc32(head)) == expected[-1], tier  # continued
            assert crc.crc32(bytearray(b"abc"), 0xFFFFFFFF) == zlib.crc32(b"abc", 0xFFFFFFFF)
            assert crc.crc32(memoryview(b"x" * 10)[::2]) == zlib.crc32(b"xxxxx"), tier
            with pytest.raises(ServiceArgumentError, match='"data" must be bytes-like'):
                crc.crc32("text")
            with pytest.raises(ServiceArgumentError, match='"value"'):
                crc.crc32(b"x", 1 << 32)
            if tier == "hardware":
                assert fw.regions()[0].name == region and fw.regions()[0].design == "crc32"
                core = _core(fw, region)
                whole = sum(len(m) // 4 for m in MESSAGES)
                assert core.words >= whole  # type: ignore[attr-defined]
        assert fw.regions()[0].state == "EMPTY"  # back in software, the region is free
        stats = fw.statistics(sid)
        assert stats.fallbacks == 0 and stats.per_tier["hardware"].calls > len(MESSAGES)


class _Window:
    """An MMIO window over ``model`` whose clock advances ``cycles`` core cycles per access."""

    def __init__(self, model: RegisterModel, cycles: int = 1) -> None:
        self.model, self.cycles, self.now = model, cycles, 0
        self.reads = self.writes = 0

    @property
    def size(self) -> int:
        return self.model.window_size

    def read32(self, offset: int) -> int:
        assert offset % 4 == 0 and 0 <= offset < self.size
        self.now += self.cycles
        self.reads += 1
        return self.model.read(offset, self.now)

    def write32(self, offset: int, value: int) -> None:
        assert offset % 4 == 0 and 0 <= offset < self.size and 0 <= value < 1 << 32
        self.now += self.cycles
        self.writes += 1
        self.model.write(offset, value, self.now)


def test_crc32_software_and_native_match_zlib(crc_code: Any) -> None:
    for cls in (crc_code.SoftwareCrc32, crc_code.NativeCrc32):
        impl = cls()
        for message in MESSAGES:
            assert impl.crc32(message) == zlib.crc32(message), (cls, len(message))
            assert impl.crc32(message, 0x1234_5678) == zlib.crc32(message, 0x1234_5678)
        with pytest.raises(ServiceArgumentError):
            impl.crc32(b"x", True)
        with pytest.raises(ServiceArgumentError):
            impl.crc32(b"x", -1)
    assert crc_code.crc32_table()[1] == 0x7707_3096  # the reflected table's first entry


def test_crc32_core_registers_and_cycles(crc_code: Any) -> None:
    core = crc_code.Crc32Core()
    assert core.read(0x3C, 0) == 0x4352_4331 and core.read(0x38, 0) == 1  # "CRC1", 1 cycle
    core.write(0x00, 0, 10)  # seed
    core.write(0x08, int.from_bytes(b"1234", "little"), 10)  # a word at cycle 10
    assert core.read(0x04, 10) == 1  # BUSY until cycle 11
    assert core.read(0x00, 10) == 0  # CRC still shows the settled value
    core.write(0x0C, ord("5"), 10)  # queued behind the word: ready at 12
    assert core.read(0x04, 11) == 1 and core.read(0x04, 12) == 0
    assert core.read(0x00, 12) == zlib.crc32(b"12345")
    assert core.read(0x10, 12) == 5 and core.operations == 2
    assert core.read(0x14, 12) == 0  # unmapped
    core.reset()
    assert core.read(0x00, 0) == 0 and core.read(0x10, 0) == 0


def test_crc32_driver_on_a_window(crc_code: Any) -> None:
    window = _Window(crc_code.Crc32Core(), cycles=8)
    driver = crc_code.Crc32Driver(window)
    for message in MESSAGES:
        assert driver.crc32(message) == zlib.crc32(message), len(message)
    window.reads = window.writes = 0
    assert driver.crc32(b"x" * 4_099, 7) == zlib.crc32(b"x" * 4_099, 7)
    assert window.writes == 1 + 1_024 + 3  # seed, one write per word, the 3-byte tail
    assert window.reads == 2  # STATUS once (the core keeps up with the bus), then CRC
    slow = _Window(crc_code.Crc32Core(), cycles=0)  # a clock that never moves: never done
    with pytest.raises(CoreTimeoutError, match="BUSY"):
        crc_code.Crc32Driver(slow, max_polls=5).crc32(b"abcd")
