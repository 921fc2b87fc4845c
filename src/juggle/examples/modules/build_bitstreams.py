"""Generate the example modules' partial bitstreams (Xilinx .bit files for the xupv2p board).

The files stand in for the PlanAhead output of the Juggle prototype: each carries a header naming
its design, the part (``2vp30ff896``) and the target region (``prr0``), and has the size of the
paper's Table 3 (add, mul, des, tdes) or a plausible one (adpcm). Contents are deterministic, so
running the script again changes nothing; it only writes a file whose bytes differ.

Usage: ``python examples/modules/build_bitstreams.py [--check]`` (``--check`` writes nothing and
exits 1 when a file is missing or stale).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from juggle.fabric.bitstream import build_bitstream, write_bitstream

PART = "2vp30ff896"
REGION = "prr0"
HERE = Path(__file__).resolve().parent

#: (file relative to examples/modules, design name, size in bytes)
BITSTREAMS: tuple[tuple[str, str, int], ...] = (
    ("tdes/bitstreams/tdes_prr0.bit", "tdes", 149_088),
    ("des/bitstreams/des_prr0.bit", "des", 149_087),
    ("math/opb_prr_0_adder_partial.bit", "adder", 123_249),
    ("math/opb_prr_0_multiplier_partial.bit", "multiplier", 128_222),
    ("audio/bitstreams/adpcm_prr0.bit", "adpcm", 138_412),
    ("aes/bitstreams/aes_prr0.bit", "aes", 149_088),
)


def stale(root: Path = HERE) -> list[Path]:
    """The bitstream files that are missing or differ from what this script generates."""
    out = []
    for relpath, design, size in BITSTREAMS:
        path = root / relpath
        if not path.is_file() or path.read_bytes() != build_bitstream(design, PART, REGION, size):
            out.append(path)
    return out


def build(root: Path = HERE) -> list[Path]:
    """Write every missing or stale bitstream under ``root``; the paths written."""
    written = []
    todo = set(stale(root))
    for relpath, design, size in BITSTREAMS:
        path = root / relpath
        if path in todo:
            written.append(write_bitstream(path, design, PART, REGION, size))
    return written


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="only check, write nothing")
    args = parser.parse_args(argv)
    if args.check:
        bad = stale()
        for path in bad:
            print(f"stale or missing: {path.relative_to(HERE)}")
        return 1 if bad else 0
    written = build()
    for path in written:
        print(f"wrote {path.relative_to(HERE)} ({path.stat().st_size} bytes)")
    if not written:
        print("all bitstreams up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
