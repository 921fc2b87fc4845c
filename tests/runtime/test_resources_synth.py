"""Resources from synthesis are the resources (issue 23 item 5).

Where a design has RTL (the module's own or juggle's) and the module has a synthesis report
(``resources.json``, written by ``juggle module build``), install checks the report's figures
against the region and the installed service carries them, labeled ``synthesized``; the
figures the descriptor or the register model declares are used, labeled ``declared``, only
for a design without RTL or without a report in the region's kinds. The cases are the tdes
example module (juggle's TDES Verilog, a committed report) copied and edited, and the
scaffold's module (no RTL). No simulator or synthesis tool runs here.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import juggle
from juggle.errors import ResourceError
from juggle.fabric import Resources
from juggle.runtime.modules import Module, ModuleSource
from juggle.runtime.resolved import Hardware
from juggle.runtime.synthesis import REPORT_FILE, read_report
from juggle.runtime.validate import validate_module
from juggle.scaffold import new_module

MODULES = Path(juggle.__file__).resolve().parent / "examples" / "modules"
#: the xupv2p board's region prr0 (input: its profile): 2,240 slices, 4,480 flip-flops
PRR0 = Resources(slices=2240, flipflops=4480, mult18=20, ram16=20)


def _hardware(module: Module) -> Hardware:
    hardware = module.resolved[0].hardware
    assert hardware is not None
    return hardware


def _tdes(tmp_path: Path) -> Path:
    target = tmp_path / "tdes"
    shutil.copytree(MODULES / "tdes", target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def _edit_report(module: Path, design: str, **figures: int) -> None:
    report = module / REPORT_FILE
    document: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    document["designs"][design]["resources"].update(figures)
    report.write_text(json.dumps(document, indent=2), encoding="utf-8")


def _declare(module: Path, **figures: int) -> None:
    """Set figures in the descriptor's ``[services.hardware.resources]``."""
    descriptor = module / "juggle.toml"
    text = descriptor.read_text(encoding="utf-8")
    for kind, value in figures.items():
        text, count = re.subn(rf"(?m)^{kind} = \d+", f"{kind} = {value}", text)
        assert count >= 1, kind
    descriptor.write_text(text, encoding="utf-8")


def test_installing_tdes_uses_the_synthesized_figures() -> None:
    synthesized = read_report(ModuleSource.open(MODULES / "tdes"))["tdes"]
    with juggle.Framework("xupv2p") as fw:
        hardware = _hardware(fw.install(MODULES / "tdes"))
    assert hardware.resources == synthesized and hardware.resources_origin == "synthesized"
    assert hardware.resources_for("prr0") == synthesized


def test_synthesized_figures_that_do_not_fit_are_refused_though_the_declared_ones_do(
    tmp_path: Path,
) -> None:
    module = _tdes(tmp_path)
    _edit_report(module, "tdes", slices=PRR0.slices + 1)  # declared: 830 slices, which fit
    with juggle.Framework("xupv2p") as fw:
        with pytest.raises(ResourceError, match=r"synthesized figures.*slices 2241 > 2240") as e:
            fw.install(module)
        assert e.value.region == "prr0" and e.value.design == "tdes"
        assert fw.modules() == ()
    with pytest.raises(ResourceError, match="synthesized figures"):  # as install checks
        validate_module(module)


def test_declared_figures_that_do_not_fit_are_not_used_when_synthesis_reports(
    tmp_path: Path,
) -> None:
    module = _tdes(tmp_path)
    _declare(module, slices=PRR0.slices * 10, flipflops=PRR0.flipflops * 10)
    with juggle.Framework("xupv2p") as fw:
        hardware = _hardware(fw.install(module))
    assert hardware.resources == read_report(ModuleSource.open(module))["tdes"]
    assert hardware.resources_origin == "synthesized"
    assert validate_module(module)["valid"]


def test_a_report_in_another_boards_kinds_leaves_the_declared_figures(tmp_path: Path) -> None:
    module = _tdes(tmp_path)
    report = module / REPORT_FILE
    document = json.loads(report.read_text(encoding="utf-8"))
    document["family"] = "xc7"
    document["designs"]["tdes"]["resources"] = {"lut": 1, "ff": 1, "dsp": 0, "bram": 0}
    report.write_text(json.dumps(document), encoding="utf-8")
    _declare(module, slices=831)
    with juggle.Framework("xupv2p") as fw:
        hardware = _hardware(fw.install(module))
    assert hardware.resources == Resources(slices=831, flipflops=625, mult18=0, ram16=0)
    assert hardware.resources_origin == "declared"


def _scaffold(tmp_path: Path) -> Path:
    """The scaffold's module, whose design (``rtlres``) has no RTL."""
    folder = new_module("rtlres", "rtlr.ResService", target_dir=tmp_path)
    shutil.rmtree(folder / "hdl", ignore_errors=True)
    text = (folder / "juggle.toml").read_text(encoding="utf-8")
    if "[services.hardware.rtl]" in text:  # a scaffold that writes Verilog: leave it out
        head, _, tail = text.partition("[services.hardware.rtl]")
        rest = tail.split("\n[", 1)
        (folder / "juggle.toml").write_text(head + ("[" + rest[1] if len(rest) > 1 else ""))
    return folder


def test_a_design_without_rtl_uses_its_declared_figures_despite_a_report(
    tmp_path: Path,
) -> None:
    module = _scaffold(tmp_path)
    too_big = {"slices": PRR0.slices + 1, "flipflops": 1, "mult18": 0, "ram16": 0}
    document = {"family": "xc2vp", "designs": {"rtlres": {"resources": too_big}}}
    (module / REPORT_FILE).write_text(json.dumps(document), encoding="utf-8")
    declared = ModuleSource.open(module).load_descriptor().services[0].hardware
    assert declared is not None and declared.resources is not None
    with juggle.Framework("xupv2p") as fw:
        hardware = _hardware(fw.install(module))
    assert hardware.resources == declared.resources.for_family("xc2vp")
    assert hardware.resources_origin == "declared"


def test_declared_figures_that_do_not_fit_are_refused_labeled_declared(tmp_path: Path) -> None:
    module = _scaffold(tmp_path)
    _declare(module, slices=PRR0.slices + 1)
    with (
        juggle.Framework("xupv2p") as fw,
        pytest.raises(ResourceError, match=r"'rtlres' \(declared figures\).*slices 2241 > 2240"),
    ):
        fw.install(module)


def test_the_region_is_programmed_with_the_synthesized_figures(tmp_path: Path) -> None:
    module = _tdes(tmp_path)
    _declare(module, slices=PRR0.slices)  # declared: the whole region
    with juggle.Framework("xupv2p") as fw:
        installed = fw.install(module)
        installed.start()
        sid = installed.service_ids[0]
        fw.set_tier(sid, "hardware")
        used = fw.fabric.region("prr0").snapshot().used
    assert used == read_report(ModuleSource.open(module))["tdes"]
