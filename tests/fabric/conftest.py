"""Fixtures of the fabric suite: a model catalog, a bitstream factory, a simulated fabric.

The models are the suite's own (``fabric_support``); the reference cores in
``juggle.services`` belong to another layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fabric_support import PART, TDES_BYTES, RegFile, Timer

from juggle.fabric import (
    Bitstream,
    Fabric,
    ModelCatalog,
    build_bitstream,
    open_fabric,
    parse_bitstream,
)

BitsFactory = Callable[..., tuple[Bitstream, bytes]]


@pytest.fixture
def catalog() -> ModelCatalog:
    """Designs of the paper's Table 3 played by the suite's register file, plus the timer."""
    return ModelCatalog({"add": RegFile, "tdes": RegFile, "des": RegFile, "timer": Timer})


@pytest.fixture
def bits() -> BitsFactory:
    """``bits(design, size=..., region="prr0", part=PART)`` -> (Bitstream, file bytes)."""

    def make(
        design: str, size: int = TDES_BYTES, region: str = "prr0", part: str = PART
    ) -> tuple[Bitstream, bytes]:
        data = build_bitstream(design, part, region, size)
        return parse_bitstream(data, source=f"{design}.bit"), data

    return make


@pytest.fixture
def fabric(catalog: ModelCatalog) -> Iterator[Fabric]:
    """The simulated xupv2p board, unpaced."""
    with open_fabric("xupv2p", models=catalog) as fab:
        yield fab
