"""Resources from synthesis: Yosys ``synth_xilinx`` on the reference cores, ``stat`` parsed.

The TDES run on xc2vp takes about 10 s (plus, once per machine, YoWASP's compilation of Yosys
when Yosys comes from PyPI); the other cores run only with ``-m slow``.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

import pytest

from juggle.errors import BackendError
from juggle.fabric import Resources, load_profile
from juggle.fabric.rtl import RtlCatalog
from juggle.fabric.rtl.synth import (
    ResourceReport,
    _report,
    family_for_part,
    find_yosys,
    synthesize,
)


@functools.cache
def _yosys() -> str | None:
    try:
        find_yosys()
    except BackendError as exc:
        return str(exc)
    return None


def _need_yosys() -> None:
    missing = _yosys()
    if missing is not None:
        pytest.skip(f"Yosys is not usable here ({missing})")


def test_tdes_on_xc2vp_has_luts_and_flipflops(tmp_path: Path) -> None:
    _need_yosys()
    tdes = RtlCatalog.builtin().get("tdes")
    report = synthesize(tdes.sources, tdes.top, "xc2vp", cache_dir=tmp_path)
    assert report.luts > 0 and report.flipflops > 0 and report.slices > 0
    # the iterative core's registers: bus registers, keys, Feistel state, key schedule
    assert 500 <= report.flipflops <= 1527  # at most Juggle Table 2's TDES core
    assert report.multipliers == 0 and report.block_rams == 0
    assert report.resources().fits_in(load_profile("xupv2p").regions[0].resources)
    assert "tdes_top on xc2vp" in report.summary() and report.tool.startswith("Yosys")
    started = time.perf_counter()
    again = synthesize(tdes.sources, tdes.top, "xc2vp", cache_dir=tmp_path)
    assert again == report and time.perf_counter() - started < 0.5  # from the cache
    assert ResourceReport.from_dict(report.as_dict()) == report


@pytest.mark.slow
@pytest.mark.parametrize(
    ("design", "mult18", "ram16"), [("multiplier", 1, 0), ("adpcm", 0, 1), ("adder", 0, 0)]
)
def test_cores_use_the_blocks_of_table_2(
    design: str, mult18: int, ram16: int, tmp_path: Path
) -> None:
    _need_yosys()
    spec = RtlCatalog.builtin().get(design)
    report = synthesize(spec.sources, spec.top, "xc2vp", cache_dir=tmp_path)
    assert (report.multipliers, report.block_rams) == (mult18, ram16)
    assert report.luts > 0 and report.flipflops > 0


def test_bad_inputs_are_refused(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="family"):
        synthesize([tmp_path / "a.v"], "a", "xc9000")
    with pytest.raises(BackendError, match="no source"):
        synthesize([], "a", "xc7")
    _need_yosys()
    with pytest.raises(BackendError, match="cannot read"):
        synthesize([tmp_path / "missing.v"], "a", "xc7", cache_dir=tmp_path)
    broken = tmp_path / "broken.v"
    broken.write_text("module broken(input a, output b); assign b = ; endmodule\n")
    with pytest.raises(BackendError, match="failed"):
        synthesize([broken], "broken", "xc7", cache_dir=tmp_path)


def test_families_of_the_board_parts() -> None:
    assert family_for_part(load_profile("xupv2p").board.part) == "xc2vp"
    assert family_for_part(load_profile("virtex4-router").board.part) == "xc4v"
    assert family_for_part(load_profile("zedboard").board.part) == "xc7"
    assert family_for_part("XC7A35T") == "xc7"
    with pytest.raises(BackendError):
        family_for_part("ep4ce22")


def test_slice_estimates() -> None:
    cells = {"LUT4": 10, "LUT2": 3, "FDRE": 30, "MUXF5": 4, "MUXF6": 2, "MUXCY": 9}
    old = _report(dict(cells), "t", "xc2vp", "Yosys test")
    assert (old.luts, old.flipflops, old.carry, old.muxf) == (13, 30, 9, 6)
    assert old.slices == 15  # the flip-flops bind: 30 / 2
    assert old.resources() == Resources(slices=15, flipflops=30, mult18=0, ram16=0)
    new = _report(
        {"LUT6": 41, "FDRE": 8, "CARRY4": 3, "DSP48E1": 2, "RAMB36E1": 1, "RAMB18E1": 1},
        "t",
        "xc7",
        "Yosys test",
    )
    assert (new.slices, new.multipliers, new.block_rams) == (11, 2, 3)  # 41 LUTs / 4
    assert "6-LUT" in new.slice_model and "4-LUT" in old.slice_model
