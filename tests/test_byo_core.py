"""Bring your own core: issue 23's first acceptance line, on both buses.

A module written by ``juggle module new --hdl`` (``--bus axi4-lite`` the second time), then its
Verilog edited to compute a wrong result (bit 8 of every data word flipped):

(a) under ``Framework("xupv2p", hardware="rtl", verify_sample=0)`` the consumer gets the wrong
    result: the Verilog ran, not the register model;
(b) ``juggle module test`` reports the mismatch with its stimulus and exits 1;
(c) with ``verify_sample=1`` the region is quarantined (ERROR, in ``fw.faults``) and the
    consumer gets the software tier's (correct) result.

Unedited, ``juggle module test`` passes (exit 0) and the consumer gets the right result from
the RTL.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import juggle
from juggle.commands.cli import app
from juggle.fabric.rtl import RtlWindow

runner = CliRunner()
MESSAGE = b"juggle: bring your own core"  # 27 bytes: the last word is partial
MASK = 0x5A3C_0F01
DATAPATH = "wire [31:0] computed = (wdata & wmask) ^ mask;"
BROKEN = "wire [31:0] computed = ((wdata & wmask) ^ mask) ^ 32'h00000100;"


def xor(data: bytes, mask: int) -> bytes:
    key = mask.to_bytes(4, "little")
    return bytes(b ^ key[i % 4] for i, b in enumerate(data))


RIGHT = xor(MESSAGE, MASK)
WRONG = xor(RIGHT, 0x0000_0100)  # what the edited Verilog computes


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fabric"))
from rtl_support import engine  # noqa: E402  (skips where Verilator cannot run)


@pytest.fixture(params=["regbus", "axi4-lite"])
def module(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """``juggle module new byo_<bus> --hdl --bus <bus>``, through the CLI."""
    engine()
    bus = request.param
    name = "byo_" + bus.replace("-", "").replace("4", "")
    args = ["module", "new", name, "--interface", "demo.EchoService", "--hdl", "--bus", bus]
    result = runner.invoke(app, [*args, "--target-dir", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.stdout
    return Path(json.loads(result.stdout)["path"])


def module_test(path: Path, exit_code: int) -> dict[str, Any]:
    result = runner.invoke(app, ["module", "test", str(path), "--samples", "8", "--json"])
    assert result.exit_code == exit_code, result.stdout
    document = json.loads(result.stdout)
    assert isinstance(document, dict)
    return document


def break_verilog(path: Path) -> None:
    (verilog,) = (path / "hdl").glob("*/*_top.v")
    text = verilog.read_text()
    assert DATAPATH in text
    verilog.write_text(text.replace(DATAPATH, BROKEN))


def echo_on_rtl(fw: juggle.Framework, path: Path) -> tuple[bytes, int]:
    """Install ``path``, move its service to the RTL and call it once; (result, service id)."""
    fw.install(path).start()
    echo = fw.get_service("demo.EchoService")
    echo.set_mask(MASK)
    fw.juggle(to_hardware=echo.service_id)
    window = fw.fabric.window("prr0")
    assert isinstance(window, RtlWindow)  # the design runs as RTL, not as its model
    assert fw.statistics(echo.service_id).engine == "rtl"
    cycles = window.rtl_cycles
    result = echo.echo(MESSAGE)
    assert window.rtl_cycles > cycles  # and this call ran it
    return result, echo.service_id


def contained() -> None:
    """Wait until the fault supervisor's thread has contained the reported fault (it is
    started, synchronously, by the call that found the wrong result)."""
    for thread in threading.enumerate():
        if thread.name == "juggle-faults":
            thread.join(timeout=30)
            assert not thread.is_alive()


def test_unedited_the_rtl_agrees_and_serves_the_right_result(module: Path) -> None:
    doc = module_test(module, 0)
    assert doc["passed"] is True
    with juggle.Framework("xupv2p", hardware="rtl", verify_sample=1) as fw:
        result, sid = echo_on_rtl(fw, module)
        contained()
        assert result == RIGHT
        assert fw.regions()[0].state == "PROGRAMMED" and list(fw.faults) == []
        assert fw.statistics(sid).fallbacks == 0


def test_a_wrong_verilog_core_is_caught_everywhere(module: Path) -> None:
    break_verilog(module)
    # (a) verification off: the consumer gets what the Verilog computed
    with juggle.Framework("xupv2p", hardware="rtl", verify_sample=0) as fw:
        result, _ = echo_on_rtl(fw, module)
        assert result == WRONG
        assert fw.regions()[0].state == "PROGRAMMED"
    # (b) juggle module test: the mismatch, with its stimulus, and exit status 1
    doc = module_test(module, 1)
    (design,) = doc["designs"]
    first = design["mismatches"][0]
    assert (first["method"], first["args"]) == ("echo", [{"hex": MESSAGE.hex()}])
    assert first["model"]["result"] == {"hex": MESSAGE.hex()}
    assert first["rtl"]["result"] == {"hex": xor(MESSAGE, 0x0000_0100).hex()}
    assert first["model"]["cycles"] == first["rtl"]["cycles"]
    assert "result" in first["differences"]
    # (c) every call verified: quarantined, and the consumer gets the software result
    with juggle.Framework("xupv2p", hardware="rtl", verify_sample=1) as fw:
        result, _ = echo_on_rtl(fw, module)
        assert result == RIGHT
        contained()
        assert fw.regions()[0].state == "ERROR"
        assert any("prr0" in entry for entry in fw.faults)
        assert fw.services()[0].tier == "software"
        assert fw.get_service("demo.EchoService").echo(MESSAGE) == RIGHT
