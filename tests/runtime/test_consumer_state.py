"""In process, a consumer of a per-consumer service never gets state another consumer set
(issue 19, item 1): on every tier, across switches, after the other consumer left, and on a
hardware core whose driver has no context operations of its own (its state is replayed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sharing_support import KEYS, encrypt, tdes_module, tdes_reference

import juggle
from juggle.errors import KeyNotLoadedError, ServiceStateError

PLAIN = b"sixteen bytes!!!"
ALICE_KEY, BOB_KEY = KEYS[0], KEYS[1]

#: A TDES driver that declares no context operations: the core gets each consumer's state by
#: replaying its recorded ``load_key`` only (Ker-ONE's fallback).
NO_CONTEXT_DRIVER = """
from juggle.services.crypto import NativeTDES, SoftwareTDES, TdesDriver
from juggle.services.crypto.model import TdesCore


class ReplayOnlyDriver(TdesDriver):
    save_context = None
    restore_context = None
"""


@pytest.fixture
def fw() -> Iterator[juggle.Framework]:
    framework = juggle.Framework("xupv2p", verify_sample=0)
    yield framework
    framework.close()


def per_consumer_tdes(fw: juggle.Framework, tmp_path: Path, *, context: bool) -> int:
    """The tdes co-module, per consumer; ``context=False``: its driver saves no context."""
    folder = tdes_module(tmp_path, per_consumer=True, name="tdespc")
    if not context:
        (folder / "tdes_module.py").write_text(NO_CONTEXT_DRIVER)
        toml = folder / "juggle.toml"
        toml.write_text(
            toml.read_text().replace('"tdes_module.TdesDriver"', '"tdes_module.ReplayOnlyDriver"')
        )
    module = fw.install(folder)
    module.start()
    (snap,) = [s for s in fw.services() if s.module == "tdespc"]
    return snap.service_id


def no_state(proxy: Any) -> None:
    """``proxy`` has no key: its call raises a ServiceStateError (KeyNotLoadedError; on a
    core whose driver cannot clear another consumer's key, "call load_key first") and leaves
    the buffer as it was."""
    buf = bytearray(PLAIN)
    with pytest.raises(ServiceStateError) as caught:
        proxy.encrypt(buf, len(buf))
    error = caught.value
    assert isinstance(error, KeyNotLoadedError) or "call load_key first" in str(error), error
    assert bytes(buf) == PLAIN


@pytest.mark.parametrize("context", [True, False], ids=["context", "replay-only"])
@pytest.mark.parametrize("tier", ["software", "native", "hardware"])
def test_a_consumer_never_gets_another_consumers_state(
    fw: juggle.Framework, tmp_path: Path, tier: str, context: bool
) -> None:
    """alice loads her key and encrypts on ``tier``; bob, who loaded none, gets
    KeyNotLoadedError there (the core last held alice's key), and after a switch to every
    other tier; with his own key, his own results; alice keeps hers. alice gives her proxy
    back: a new one has no state (in process a released consumer's state is gone)."""
    sid = per_consumer_tdes(fw, tmp_path, context=context)
    fw.set_tier(sid, tier)
    alice = fw.get_service("EncryptionService", consumer="alice")
    bob = fw.get_service("EncryptionService", consumer="bob")
    alice.load_key(ALICE_KEY)
    assert encrypt(alice, PLAIN) == tdes_reference(ALICE_KEY, PLAIN)
    no_state(bob)
    for other in ("software", "native", "hardware", tier):
        fw.set_tier(sid, other)
        assert encrypt(alice, PLAIN) == tdes_reference(ALICE_KEY, PLAIN)
        no_state(bob)
    bob.load_key(BOB_KEY)
    for other in ("hardware", "software", "native", tier):
        fw.set_tier(sid, other)
        assert encrypt(bob, PLAIN) == tdes_reference(BOB_KEY, PLAIN)
        assert encrypt(alice, PLAIN) == tdes_reference(ALICE_KEY, PLAIN)
        assert encrypt(bob, PLAIN) == tdes_reference(BOB_KEY, PLAIN)
    fw.unget_service(alice)
    again = fw.get_service("EncryptionService", consumer="alice")
    no_state(again)
    assert encrypt(bob, PLAIN) == tdes_reference(BOB_KEY, PLAIN)
    newcomer = fw.get_service("EncryptionService", consumer="carol")
    no_state(newcomer)
