"""``juggle module test PATH``: the register model and the RTL side by side through the driver.

The command's JSON report (every figure labeled, a mismatch with its stimulus), its exit
status (0 agree, 1 mismatch, 2 bad input), its text output, a difference in cycles alone, the
refusals, and the engine's stimuli (:mod:`juggle.rtlcheck`): made from the interface's type
annotations, seeded, bounded, and the module's own known answers first.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import random
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from typer.testing import CliRunner

from juggle.commands.cli import app
from juggle.errors import BackendError, ConfigurationError
from juggle.rtlcheck import (
    MAX_BYTES,
    VECTORS_FILE,
    Vector,
    _methods,
    _stimuli,
    check_module,
    decode_value,
    encode_value,
    load_vectors,
)
from juggle.runtime.interfaces import state_setting
from juggle.scaffold import scaffold_module

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
#: the datapath line of the generated Verilog, and the same with bit 8 of every word flipped
DATAPATH = "wire [31:0] computed = (wdata & wmask) ^ mask;"
BROKEN = "wire [31:0] computed = ((wdata & wmask) ^ mask) ^ 32'h00000100;"


@functools.cache
def _labels() -> ModuleType:
    """THE RULE of tests/test_json_labels.py (one place defines it: tests/labels_support.py)."""
    spec = importlib.util.spec_from_file_location(
        "_labels_support", ROOT / "tests" / "labels_support.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "fabric"))
from rtl_support import engine  # noqa: E402  (skips where Verilator cannot run)


@pytest.fixture
def verilator() -> None:
    """Skips the test where Verilator cannot run."""
    engine()


def scaffold(tmp_path: Path, name: str, bus: str = "regbus") -> tuple[Path, Path]:
    """A ``--hdl`` module ``name`` (same name, same Verilog: the simulator build is cached);
    returns (module folder, its Verilog)."""
    made = scaffold_module(name, "demo.EchoService", target_dir=tmp_path, hdl=True, bus=bus)
    assert made.hdl is not None
    return made.path, made.path / made.hdl


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def run(args: list[str]) -> tuple[int, str]:
    result = runner.invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout


def run_json(args: list[str], exit_code: int) -> dict[str, Any]:
    code, out = run([*args, "--json"])
    assert code == exit_code, out
    document = json.loads(out)  # exactly one document
    assert isinstance(document, dict)
    return document


# -- the report -----------------------------------------------------------------------------------


def test_an_unedited_module_passes_and_every_figure_is_labeled(
    tmp_path: Path, verilator: None
) -> None:
    path, _ = scaffold(tmp_path, "mt_pass")
    doc = run_json(["module", "test", str(path), "--samples", "8", "--seed", "3"], 0)
    assert doc["passed"] is True and (doc["samples"], doc["seed"]) == (8, 3)
    assert doc["module"] == "mt_pass" and doc["fabric"] == "xupv2p"
    (design,) = doc["designs"]
    assert design["design"] == "mt_pass" and design["interface"] == "demo.EchoService"
    assert design["rtl"] == {
        "top": "mt_pass_top",
        "bus": "regbus",
        "origin": "module",
        "sources": ["hdl/mt_pass/mt_pass_top.v"],
    }
    # 7 edge values of echo's bytes (5) ... : echo's 5, then set_mask's 7 each followed by 5
    assert design["calls"] == {"known_answer": 5 + 7 * (1 + 5), "vector": 4, "random": 2 * 8}
    assert design["cycles"]["model"] == design["cycles"]["rtl"] > 0
    assert 0 < design["refused"] < 30  # set_mask(-1), set_mask(-0x80000000), ...
    assert design["mismatches"] == [] and design["skipped"] == [] and not design["stopped"]
    assert _labels().unlabeled(doc) == []
    assert design["labels"]["cycles"] == {"model": "modeled", "rtl": "measured"}
    assert "measured" in doc["how"] and "modeled" in doc["how"]
    code, out = run(["module", "test", str(path), "--samples", "2"])
    assert code == 0 and "agree" in out and "mt_pass_top" in out


def test_a_wrong_result_is_reported_with_its_stimulus_and_exit_1(
    tmp_path: Path, verilator: None
) -> None:
    path, verilog = scaffold(tmp_path, "mt_wrong")
    edit(verilog, DATAPATH, BROKEN)
    doc = run_json(["module", "test", str(path)], 1)
    (design,) = doc["designs"]
    assert doc["passed"] is False and design["passed"] is False
    assert design["stopped"] is True and len(design["mismatches"]) == 10  # the default bound
    first = design["mismatches"][0]
    plain = b"juggle: bring your own core"  # the first vector: echo at power-on, mask 0
    assert (first["stimulus"], first["method"], first["index"]) == ("vector", "echo", 0)
    assert first["args"] == [{"hex": plain.hex()}] and first["kwargs"] == {}
    assert first["model"]["result"] == {"hex": plain.hex()}
    flipped = bytes(b ^ (1 if i % 4 == 1 else 0) for i, b in enumerate(plain))
    assert first["rtl"]["result"] == {"hex": flipped.hex()}
    assert first["model"]["cycles"] == first["rtl"]["cycles"] > 0
    assert first["expected"] == {"result": {"hex": plain.hex()}}
    assert first["expected_from"] == "vector"
    assert first["differences"] == ["result", "rtl-expected"]
    assert _labels().unlabeled(doc) == []
    code, out = run(["module", "test", str(path)])
    assert code == 1 and "MISMATCH" in out
    assert f'#0 vector echo({{"hex": "{plain.hex()}"}})' in " ".join(out.split())


def test_a_difference_in_cycles_alone_is_a_mismatch(tmp_path: Path, verilator: None) -> None:
    path, verilog = scaffold(tmp_path, "mt_slow", bus="axi4-lite")
    edit(verilog, "parameter integer LATENCY = 1,", "parameter integer LATENCY = 20,")
    report = check_module(path, samples=4)
    (design,) = report.designs
    assert not report.passed and design.rtl.bus == "axi4-lite"
    first = design.mismatches[0]
    assert first.differences == ("cycles",)  # same bytes, later
    assert first.rtl.result == first.model.result
    assert first.rtl.cycles is not None and first.model.cycles is not None
    assert first.rtl.cycles > first.model.cycles
    # the model told the same latency agrees again, cycle for cycle
    edit(path / "mt_slow_module.py", "latency: ClassVar[int] = 1", "latency: ClassVar[int] = 20")
    again = check_module(path, samples=4)
    assert again.passed and again.designs[0].model_cycles == again.designs[0].rtl_cycles


def test_the_reference_cores_run_as_builtin_rtl(verilator: None) -> None:
    from juggle.shipped import example_module

    report = check_module(example_module("math"), samples=4)
    assert report.passed and [d.design for d in report.designs] == ["adder", "multiplier"]
    assert {d.rtl.origin for d in report.designs} == {"builtin"}
    # AES without vectors: every call is refused (no 16-byte key, no whole block), and the
    # text says that nothing reached the core
    code, out = run(["module", "test", str(example_module("aes")), "--samples", "2"])
    assert code == 0 and "no call reached the core" in " ".join(out.split())


# -- bad input ------------------------------------------------------------------------------------


def test_bad_input_exits_2_naming_it(tmp_path: Path, verilator: None) -> None:
    error = run_json(["module", "test", str(tmp_path / "nowhere")], 2)
    assert error["type"] == "ModuleError" and "nowhere" in error["error"]
    path, _ = scaffold(tmp_path, "mt_bad")
    error = run_json(["module", "test", str(path), "--samples", "-1"], 2)
    assert error["type"] == "ConfigurationError" and "-1" in error["error"]
    error = run_json(["module", "test", str(path), "--fabric", "no-such-board"], 2)
    assert error["type"] == "ProfileError"
    plain = scaffold_module("mt_no_rtl", "demo.Service", target_dir=tmp_path).path
    error = run_json(["module", "test", str(plain)], 2)
    assert error["type"] == "BackendError" and "'mt_no_rtl' has no RTL" in error["error"]
    with pytest.raises(BackendError) as caught:
        check_module(plain)
    assert caught.value.design == "mt_no_rtl"
    broken, verilog = scaffold(tmp_path / "b", "mt_syntax")
    edit(verilog, DATAPATH, DATAPATH.rstrip(";"))
    error = run_json(["module", "test", str(broken)], 2)
    assert (
        error["type"] == "WindowAttachError" and "could not Verilate 'mt_syntax'" in error["error"]
    )
    (path / VECTORS_FILE).write_text('{"vectors": [{"method": "nope"}]}')
    error = run_json(["module", "test", str(path)], 2)
    assert error["type"] == "ConfigurationError" and "'nope'" in error["error"]
    (path / VECTORS_FILE).write_text('{"vectors": [{"method": "echo", "args": [{"hex": "zz"}]}]}')
    error = run_json(["module", "test", str(path)], 2)
    assert error["type"] == "ConfigurationError" and "hex" in error["error"]
    software_only = tmp_path / "soft"
    software_only.mkdir()
    (software_only / "juggle.toml").write_text(
        textwrap.dedent("""\
            [module]
            name = "soft"
            version = "1.0.0"
            [[services]]
            interfaces = ["math.AddService"]
            [services.software]
            class = "m.Add"
            """)
    )
    error = run_json(["module", "test", str(software_only)], 2)
    assert error["type"] == "ModuleError" and "no hardware service" in error["error"]


def test_vectors_files_are_checked(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(
        '{"vectors": [{"method": "f", "args": [1, {"hex": "00ff"}], "kwargs": {"x": [2]}, '
        '"expect": null, "interface": "a.B"}, {"method": "g"}]}'
    )
    first, second = load_vectors(good)
    assert (first.method, first.args, first.kwargs) == ("f", (1, b"\x00\xff"), {"x": [2]})
    assert first.has_expect and first.expect is None and first.interface == "a.B"
    assert not second.has_expect and second.args == ()
    for text, match in [
        ("[]", '"vectors"'),
        ("{", "cannot read"),
        ('{"vectors": [1]}', '"method"'),
        ('{"vectors": [{"method": "f", "args": 1}]}', '"args" must be a list'),
        ('{"vectors": [{"method": "f", "extra": 1}]}', "extra"),
        ('{"vectors": [{"method": "f", "args": [{"hex": 1}]}]}', "hex"),
    ]:
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(ConfigurationError, match=match):
            load_vectors(bad)
    for value in [None, True, 3, 1.5, "s", b"\x01", [b"\x02", (1,)], {"k": bytearray(b"\x03")}]:
        encoded = encode_value(value)
        assert json.loads(json.dumps(encoded)) == encoded
    assert decode_value(encode_value([b"\x02", 1])) == [b"\x02", 1]


# -- stimuli --------------------------------------------------------------------------------------


class Opaque:
    """A type the engine cannot make values of."""


OPAQUE = Opaque()


class Kinds:
    """An interface with a parameter of every kind the engine makes values of, and some not."""

    def ints(self, a: int, b: bool, c: float, d: str) -> int:
        raise NotImplementedError

    def buffers(self, data: bytes, out: bytearray | memoryview, maybe: int | None) -> None:
        raise NotImplementedError

    def collections(self, xs: list[int], ys: tuple[int, ...], pair: tuple[int, bytes]) -> int:
        raise NotImplementedError

    def optional_opaque(self, data: bytes, extra: Opaque = OPAQUE) -> bytes:
        raise NotImplementedError

    def opaque(self, thing: Opaque) -> None:
        raise NotImplementedError

    def opaque_or_none(self, thing: Opaque | None) -> None:
        raise NotImplementedError

    def keyword_only(self, data: bytes, *, size: int) -> None:
        raise NotImplementedError


def test_stimuli_follow_the_annotations() -> None:
    methods = {m.name: m for m in _methods(Kinds)}
    assert methods["opaque"].skipped is not None and "'thing'" in methods["opaque"].skipped
    assert methods["keyword_only"].skipped is not None
    assert methods["optional_opaque"].params == ("data",)  # left at its default
    assert methods["optional_opaque"].skipped is None
    assert methods["opaque_or_none"].edge_cases() == [(None,)]  # the member it can make
    rng = random.Random(1)
    seen_sizes = set()
    for _ in range(500):
        a, b, c, d = methods["ints"].draw(rng)
        assert type(a) is int and -(1 << 31) <= a < 1 << 32
        assert type(b) is bool and type(c) is float and type(d) is str and len(d) <= 16
        data, out, maybe = methods["buffers"].draw(rng)
        assert type(data) is bytes and len(data) <= MAX_BYTES
        assert type(out) is bytearray  # the members it can make: not memoryview
        assert maybe is None or type(maybe) is int
        seen_sizes.add(len(data))
        xs, ys, pair = methods["collections"].draw(rng)
        assert type(xs) is list and all(type(x) is int for x in xs)
        assert type(ys) is tuple and len(ys) <= 8
        assert type(pair[0]) is int and type(pair[1]) is bytes
    assert {0, 1, 4, 5, MAX_BYTES} <= seen_sizes
    edges = methods["ints"].edge_cases()
    assert {e[0] for e in edges} >= {0, 1, 0xFFFF_FFFF, -1, 0x8000_0000}


def test_stimuli_are_seeded_and_the_modules_vectors_come_first() -> None:
    class Svc:
        @state_setting
        def set_key(self, key: int) -> None:
            raise NotImplementedError

        def run(self, data: bytes) -> bytes:
            raise NotImplementedError

    methods = _methods(Svc)
    vectors = (Vector("set_key", (7,)), Vector("run", (b"ab",), expect=b"ba", has_expect=True))
    once = list(_stimuli(methods, vectors, 6, seed=5))
    assert once == list(_stimuli(methods, vectors, 6, seed=5))
    other = list(_stimuli(methods, vectors, 6, seed=6))
    kinds = [s.kind for s in once]
    assert kinds == ["vector"] * 2 + ["known-answer"] * (5 + 7 * (1 + 5)) + ["random"] * 12
    assert (once[1].method, once[1].args, once[1].expect, once[1].has_expect) == (
        "run",
        (b"ab",),
        b"ba",
        True,
    )
    assert [s.method for s in once[2:9]] == ["run"] * 5 + ["set_key", "run"]
    assert [s for s in once if s.kind == "random"] != [s for s in other if s.kind == "random"]
    assert sorted(s.method for s in once if s.kind == "random") == ["run"] * 6 + ["set_key"] * 6
