"""The same controllers drive the live runtime: a synthetic call mix, then a juggle."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import juggle
from juggle.core.controllers import load_controller

MODULES = Path(__file__).resolve().parents[2] / "examples" / "modules"
TDES_KEY = bytes(range(24))
DES_KEY = bytes(range(8))


@pytest.fixture
def fw() -> Iterator[juggle.Framework]:
    framework = juggle.Framework("xupv2p")
    for name in ("tdes", "des"):
        framework.install(MODULES / name).start()
    yield framework
    framework.close()


def tiers(fw: juggle.Framework) -> dict[int, str]:
    return {s.service_id: s.tier for s in fw.services()}


def test_distribution_juggles_the_busiest_service_into_the_fabric(fw: juggle.Framework) -> None:
    mail = fw.get_service("EncryptionService", consumer="mail", filter="(algorithm=tdes)")
    music = fw.get_service("EncryptionService", consumer="music", filter="(algorithm=des)")
    mail.load_key(TDES_KEY)
    music.load_key(DES_KEY)
    buf = bytearray(64)
    for _ in range(40):
        mail.encrypt(buf, 64)
    for _ in range(5):
        music.encrypt(buf, 64)
    assert "hardware" not in tiers(fw).values()
    fw.set_controller(load_controller("distribution", threshold=0.5))
    reports = fw.control()
    assert [r.to_hardware for r in reports] == [mail.service_id]
    assert tiers(fw)[mail.service_id] == "hardware"
    assert fw.control() == []  # already there: nothing more to do
    mail.encrypt(buf, 64)  # still serves, now from the fabric


def test_foreground_follows_the_focus(fw: juggle.Framework) -> None:
    mail = fw.get_service("EncryptionService", consumer="mail", filter="(algorithm=tdes)")
    music = fw.get_service("EncryptionService", consumer="music", filter="(algorithm=des)")
    mail.load_key(TDES_KEY)
    music.load_key(DES_KEY)
    buf = bytearray(16)
    for _ in range(3):
        mail.encrypt(buf, 16)
        music.encrypt(buf, 16)
    fw.set_controller(load_controller("foreground"))
    assert [r.to_hardware for r in fw.set_foreground("mail")] == [mail.service_id]
    reports = fw.set_foreground("music")
    assert [(r.to_hardware, r.to_software) for r in reports] == [
        (music.service_id, (mail.service_id,))
    ]
    assert tiers(fw)[music.service_id] == "hardware"
    assert fw.set_foreground("nobody") == []
