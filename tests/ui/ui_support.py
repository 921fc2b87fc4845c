"""Helpers of the ui suite: a hardware-only TDES module for tenants and tenants' calls."""

from __future__ import annotations

import shutil
from pathlib import Path

import juggle

MODULES = Path(__file__).resolve().parents[2] / "examples" / "modules"


def hardware_only_tdes(target: Path) -> Path:
    """A copy of the TDES co-module at ``target`` with its hardware tier alone: a service the
    tenant arbiter places for its tenants (device ``tdes``, region prr0)."""
    shutil.copytree(MODULES / "tdes", target)
    toml = target / "juggle.toml"
    text = toml.read_text()
    for tier, cls in (("software", "SoftwareTDES"), ("native", "NativeTDES")):
        text = text.replace(f'[services.{tier}]\nclass = "tdes_module.{cls}"\n', "")
    assert "[services.native]" not in text and "[services.software]" not in text
    toml.write_text(text.replace('name = "tdes"', 'name = "tdes_hw"'))
    return target


def tenant_call(fw: juggle.Framework, tenant: str, count: int = 1) -> None:
    """``count`` encryptions of 16 bytes by ``tenant`` (its key loaded first: one call more)."""
    enc = fw.get_service("EncryptionService", consumer=tenant)
    enc.load_key(bytes(range(24)))
    buf = bytearray(b"tenant! calls..!")
    for _ in range(count):
        assert enc.encrypt(buf, len(buf)) == len(buf)
