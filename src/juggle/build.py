"""``juggle module build``: synthesize a module's hardware and write its resource report.

For every hardware service of a module, the design named in its bitstream is synthesized with
Yosys ``synth_xilinx`` for the family of the target board's part (see
:func:`juggle.fabric.rtl.synthesize`). The Verilog is what install runs under
``hardware="rtl"`` (:func:`juggle.runtime.rtlsources.module_rtl`): the files and top the
service's ``[services.hardware.rtl]`` names, else the module's ``hdl/<design>/*.v`` with top
``<design>_top``, else juggle's reference RTL of that name. The report goes next to the
descriptor as ``resources.json``; at install those synthesized figures are the design's
resources, checked against the region (the descriptor's declared figures are used only for a
design without RTL or report).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from juggle.errors import BackendError, DescriptorError
from juggle.fabric.profiles import load_profile
from juggle.limits import DEFAULT_LIMITS, Limits
from juggle.progress import Progress
from juggle.runtime.descriptors import RtlSpec
from juggle.runtime.modules import ModuleSource
from juggle.runtime.rtlsources import module_rtl
from juggle.runtime.synthesis import REPORT_FILE

__all__ = ["build_module"]


def _rtl_of(source: ModuleSource, rtl: RtlSpec | None, design: str) -> tuple[list[Path], str]:
    """The Verilog sources and top of ``design`` as install finds them
    (:func:`~juggle.runtime.rtlsources.module_rtl`: the service's ``[services.hardware.rtl]``,
    then the module's ``hdl/<design>/*.v``, then juggle's reference RTL). Raises
    :class:`~juggle.errors.BackendError` when there is none, and what ``module_rtl`` raises."""
    found = module_rtl(source, rtl, design)
    if found is None:
        raise BackendError(
            f"design {design!r} has no RTL: the module has no hdl/{design}/*.v, no "
            "[services.hardware.rtl] and juggle no reference core of that name",
            design=design,
        )
    return list(found.paths(source)), found.top


def build_module(
    path: str | Path,
    *,
    fabric: str = "xupv2p",
    limits: Limits = DEFAULT_LIMITS,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Synthesize every hardware design of the module at ``path`` for board ``fabric`` and
    write ``resources.json`` beside its descriptor; returns the report written. ``progress``
    hears of each design before its synthesis (Yosys takes seconds per design).

    Raises :class:`~juggle.errors.ModuleError` / :class:`~juggle.errors.DescriptorError` for
    the module, :class:`~juggle.errors.BackendError` when a design has no RTL or synthesis
    fails (naming the tool and the end of its log).
    """
    from juggle.fabric.rtl import family_for_part, synthesize

    source = ModuleSource.open(path, limits)
    if source.zip_prefix is not None:
        raise DescriptorError(
            f"{str(source.location)!r}: build a module folder (the report is written into it)",
            path=str(source.location),
        )
    descriptor = source.load_descriptor()
    board = load_profile(fabric)
    family = family_for_part(board.board.part)
    todo: dict[str, RtlSpec | None] = {}  # design -> the rtl table of its first service
    for spec in descriptor.services:
        if spec.hardware is None:
            continue
        loaded = source.load_bitstreams(spec.hardware.bitstreams, board.region_names())
        for _, bitstream, _ in loaded.values():
            todo.setdefault(bitstream.design, spec.hardware.rtl)
    designs: dict[str, Any] = {}
    for done, (design, rtl) in enumerate(todo.items()):
        if progress is not None:
            progress(design, done, len(todo))
        sources, top = _rtl_of(source, rtl, design)
        report = synthesize(sources, top, family)
        entry = report.as_dict()
        entry["resources"] = report.resources().as_dict()  # in the family's own kinds
        designs[design] = entry
    if progress is not None:
        progress("done", len(todo), len(todo))
    document = {
        "figure": "modeled (Yosys synth_xilinx; slices, where counted, are a packing estimate)",
        "board": board.name,
        "part": board.board.part,
        "family": family,
        "designs": designs,
    }
    target = source.root / REPORT_FILE
    target.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    document["path"] = str(target)
    return document
