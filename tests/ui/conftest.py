"""Fixtures of the ui suite: module paths, a framework with the TDES co-module started, and one
with two tenants sharing a hardware-only TDES."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ui_support import hardware_only_tdes

import juggle

MODULES = Path(__file__).resolve().parents[2] / "examples" / "modules"


@pytest.fixture
def tdes_path() -> Path:
    """The TDES co-module folder (software, native and hardware tiers, region prr0)."""
    return MODULES / "tdes"


@pytest.fixture
def des_path() -> Path:
    """The DES co-module folder (its hardware also needs region prr0)."""
    return MODULES / "des"


@pytest.fixture
def framework(tdes_path: Path) -> Iterator[juggle.Framework]:
    """A framework on the simulated xupv2p with the TDES module started (service 1)."""
    fw = juggle.Framework(fabric="xupv2p")
    try:
        fw.install(tdes_path).start()
        yield fw
    finally:
        fw.close()


@pytest.fixture
def tenants_fw(tmp_path: Path) -> Iterator[juggle.Framework]:
    """A framework on the simulated xupv2p with tenants ``alice`` (priority 0) and ``bob``
    (priority 2) and the hardware-only TDES module started (service 1, device ``tdes``)."""
    fw = juggle.Framework(fabric="xupv2p")
    try:
        fw.add_tenant("alice", priority=0)
        fw.add_tenant("bob", priority=2)
        fw.install(hardware_only_tdes(tmp_path / "tdes_hw")).start()
        yield fw
    finally:
        fw.close()
