"""``juggle module new --hdl [--bus axi4-lite]``: the scaffold's core in Verilog.

What the option writes (the Verilog top, the ``[services.hardware.rtl]`` table, the known
answers of ``vectors.json``), what it refuses, and that the Verilog is what the contract asks:
the register-bus or AXI4-Lite ports exactly, Verilator-lint clean, and synthesizable by
``juggle module build``. That it agrees with the model is ``tests/commands/test_module_test.py``
and ``tests/test_byo_core.py``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import juggle
from juggle.commands.cli import app
from juggle.errors import ConfigurationError
from juggle.fabric.rtl import RtlDesign
from juggle.rtlcheck import VECTORS_FILE, load_vectors
from juggle.runtime.modules import ModuleSource
from juggle.scaffold import HDL_BUSES, new_module, scaffold_module

runner = CliRunner()

#: the AXI4-Lite top's ports (contract 3): name -> (direction, width)
AXI_PORTS = {
    "clk": ("input", 1),
    "rst_n": ("input", 1),
    "s_axi_awaddr": ("input", 6),
    "s_axi_awvalid": ("input", 1),
    "s_axi_awready": ("output", 1),
    "s_axi_wdata": ("input", 32),
    "s_axi_wstrb": ("input", 4),
    "s_axi_wvalid": ("input", 1),
    "s_axi_wready": ("output", 1),
    "s_axi_bresp": ("output", 2),
    "s_axi_bvalid": ("output", 1),
    "s_axi_bready": ("input", 1),
    "s_axi_araddr": ("input", 6),
    "s_axi_arvalid": ("input", 1),
    "s_axi_arready": ("output", 1),
    "s_axi_rdata": ("output", 32),
    "s_axi_rresp": ("output", 2),
    "s_axi_rvalid": ("output", 1),
    "s_axi_rready": ("input", 1),
}
#: the register-bus top's ports (those of juggle's common/jg_regbus.v)
REGBUS_PORTS = {
    "clk": ("input", 1),
    "rst_n": ("input", 1),
    "bus_addr": ("input", 16),
    "bus_wdata": ("input", 32),
    "bus_we": ("input", 1),
    "bus_re": ("input", 1),
    "bus_rdata": ("output", 32),
}
_PORT = re.compile(r"^\s*(input|output)\s+(?:wire|reg)\s*(\[[^\]]+\])?\s*(\w+)", re.M)


def ports(verilog: str) -> dict[str, tuple[str, int]]:
    """The top's ports: name -> (direction, width), with ``AW`` as its default, 6."""
    out = {}
    for direction, width, name in _PORT.findall(verilog):
        bits = 1
        if width:
            high, low = width[1:-1].replace("AW", "6").split(":")
            top, _, minus = high.partition("-")  # "31" or "6-1"
            bits = int(top) - int(minus or 0) - int(low) + 1
        out[name] = (direction, bits)
    return out


def run_json(args: list[str], exit_code: int = 0) -> dict[str, Any]:
    """``juggle ARGS``: it exits with ``exit_code`` and prints one JSON document."""
    result = runner.invoke(app, args)
    assert result.exit_code == exit_code, (result.stdout, result.exception)
    document = json.loads(result.stdout)
    assert isinstance(document, dict)
    return document


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fabric"))
from rtl_support import engine  # noqa: E402  (skips where Verilator cannot run)


@pytest.mark.parametrize("bus", HDL_BUSES)
def test_hdl_writes_the_top_its_table_and_known_answers(tmp_path: Path, bus: str) -> None:
    made = run_json(
        [
            "module",
            "new",
            "demo_svc",
            "--interface",
            "demo.EchoService",
            "--target-dir",
            str(tmp_path),
            "--hdl",
            "--bus",
            bus,
            "--json",
        ]
    )
    path = Path(made["path"])
    top = "hdl/demo_svc/demo_svc_top.v"
    assert made["hdl"] == {"path": top, "bus": bus}
    assert sorted(made["files"]) == sorted(
        [
            "juggle.toml",
            "demo.py",
            "demo_svc_module.py",
            "bitstreams/demo_svc_prr0.bit",
            top,
            VECTORS_FILE,
        ]
    )
    assert f"juggle module test {path} --fabric xupv2p" in made["next"]
    verilog = (path / top).read_text()
    assert ports(verilog) == (AXI_PORTS if bus == "axi4-lite" else REGBUS_PORTS)
    assert "module demo_svc_top" in verilog and "32'h44454D4F" in verilog  # ID "DEMO"
    assert "`include" not in verilog  # self-contained: builds alone
    (service,) = ModuleSource.open(path).load_descriptor().services
    assert service.hardware is not None and service.hardware.rtl is not None
    rtl = service.hardware.rtl
    assert (rtl.top, rtl.sources, rtl.bus) == ("demo_svc_top", [top], bus)
    # the known answers: the software tier computes each expected result
    vectors = load_vectors(path / VECTORS_FILE)
    assert [v.method for v in vectors] == ["echo", "set_mask", "echo", "echo"]
    assert vectors[2].has_expect and vectors[2].expect != vectors[2].args[0]  # masked
    assert not vectors[1].has_expect
    report = run_json(["module", "validate", str(path), "--import", "--json"])
    assert report["valid"] is True and report["imported"] is True


def test_without_hdl_the_module_has_no_verilog(tmp_path: Path) -> None:
    made = scaffold_module("plain", "demo.Service", target_dir=tmp_path)
    assert made.hdl is None and made.bus is None and made.to_json()["hdl"] is None
    assert not (made.path / "hdl").exists() and not (made.path / VECTORS_FILE).exists()
    (service,) = ModuleSource.open(made.path).load_descriptor().services
    assert service.hardware is not None and service.hardware.rtl is None
    assert not any("module test" in step for step in made.to_json()["next"])


def test_names_that_are_no_verilog_identifier(tmp_path: Path) -> None:
    made = scaffold_module("z-svc", "acme.ZService", target_dir=tmp_path, hdl=True)
    assert made.hdl == "hdl/z-svc/z_svc_top.v"
    assert "module z_svc_top" in (made.path / made.hdl).read_text()
    made = scaffold_module("9lives", "cat.LifeService", target_dir=tmp_path, hdl=True)
    assert made.hdl == "hdl/9lives/m9lives_top.v"
    (service,) = ModuleSource.open(made.path).load_descriptor().services
    assert service.hardware is not None and service.hardware.rtl is not None
    assert service.hardware.rtl.top == "m9lives_top"


def test_bad_bus_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="'pcie'") as caught:
        new_module("x", "demo.Service", target_dir=tmp_path, hdl=True, bus="pcie")
    assert caught.value.value == "pcie"
    base = ["module", "new", "y", "--interface", "demo.S", "--target-dir", str(tmp_path)]
    error = run_json([*base, "--bus", "axi4-lite", "--json"], exit_code=2)
    assert error["type"] == "ConfigurationError" and "--hdl" in error["error"]
    error = run_json([*base, "--hdl", "--bus", "wishbone", "--json"], exit_code=2)
    assert error["type"] == "ConfigurationError" and "wishbone" in error["error"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("bus", HDL_BUSES)
def test_the_verilog_is_lint_clean(tmp_path: Path, bus: str) -> None:
    made = scaffold_module("lint_me", "demo.EchoService", target_dir=tmp_path, hdl=True, bus=bus)
    design = RtlDesign("lint_me", ((made.path / str(made.hdl)).resolve(),), "lint_me_top")
    assert engine().lint(design) == []


@pytest.mark.parametrize("bus", HDL_BUSES)
def test_module_build_synthesizes_it_and_install_takes_those_figures(
    tmp_path: Path, bus: str
) -> None:
    made = scaffold_module("built", "demo.EchoService", target_dir=tmp_path, hdl=True, bus=bus)
    report = run_json(["module", "build", str(made.path), "--json"])
    entry = report["designs"]["built"]
    assert entry["top"] == "built_top" and entry["luts"] > 32 and entry["flipflops"] >= 64
    assert (made.path / "resources.json").is_file()
    with juggle.Framework("xupv2p") as fw:  # the synthesized figures fit and are booked
        fw.install(made.path).start()
        echo = fw.get_service("demo.EchoService")
        echo.set_mask(0x0000_00FF)
        fw.juggle(to_hardware=echo.service_id)
        assert echo.echo(b"\x00\x01") == b"\xff\x01"
