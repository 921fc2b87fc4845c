"""One tenant's typo does not take hardware away from everyone (issue 19, item 2), end to end.

A real daemon; alice (uid 0, admin) installs the tdes co-module and puts its service in
hardware; bob (uid 65534, another process) makes argument mistakes on it. Each comes back to
bob as :class:`~juggle.errors.ServiceArgumentError` naming the method, the argument and the
value; none reaches the driver, so none is a hardware fault: the region stays PROGRAMMED with
the service in it, and alice's next call is served by the hardware with her key.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from Crypto.Cipher import DES3
from daemon_support import MODULES, NOBODY, run_as, running_as_root

from juggle.daemon import connect
from juggle.errors import ServiceArgumentError

ALICE_KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")
BOB_KEY = bytes.fromhex("FEDCBA9876543210A1B2C3D4E5F60718293A4B5C6D7E8F90")
PLAIN = b"bob's sixteen b."


def tdes(key: bytes, data: bytes) -> bytes:
    return bytes(DES3.new(key, DES3.MODE_ECB).encrypt(data))


def policy() -> str:
    return (
        'version = 1\nadmin_uids = [0]\nsocket_mode = "0666"\n'
        '\n[[tenants]]\nname = "alice"\nuids = [0]\n'
        f'\n[[tenants]]\nname = "bob"\nuids = [{NOBODY}]\n'
    )


def _outcome(call: Any) -> dict[str, Any]:
    try:
        result = call()
    except Exception as exc:
        return {
            "error": type(exc).__name__,
            "is_argument_error": isinstance(exc, ServiceArgumentError),
            "message": str(exc),
            "about": [getattr(exc, "method", None), getattr(exc, "argument", None)],
        }
    return {"result": result}


def bob_mistakes(socket: str) -> dict[str, Any]:
    """As bob: his own key, one good call, then each mistake; what came back, and the regions
    bob sees afterwards."""
    with connect(socket) as client:
        out: dict[str, Any] = {"identity": client.identity["name"]}
        enc = client.get_service("EncryptionService")
        enc.load_key(BOB_KEY)
        buf = bytearray(PLAIN)
        enc.encrypt(buf, len(buf))
        out["good"] = bytes(buf) == tdes(BOB_KEY, PLAIN)
        mistakes = {
            "unknown keyword": lambda b: enc.encrypt(b, sizee=8),
            "missing argument": lambda b: enc.encrypt(b),
            "extra positional": lambda b: enc.encrypt(b, 8, 8),
            "extra keyword on load_key": lambda b: enc.load_key(BOB_KEY, extra=1),
        }
        for name, mistake in mistakes.items():
            buf = bytearray(PLAIN)
            out[name] = _outcome(lambda m=mistake, b=buf: m(b))
            out[name]["untouched"] = bytes(buf) == PLAIN
        buf = bytearray(PLAIN)
        enc.encrypt(buf, len(buf))
        out["good_after"] = bytes(buf) == tdes(BOB_KEY, PLAIN)
        out["regions"] = [[r.name, r.state, r.service_id] for r in client.regions()]
        return out


#: each mistake: words its message must hold (method, argument, value) and its (method, argument)
EXPECTED = {
    "unknown keyword": (
        ("EncryptionService.encrypt()", "unexpected keyword argument 'sizee'", "(=8)"),
        ["EncryptionService.encrypt", "sizee"],
    ),
    "missing argument": (
        ("EncryptionService.encrypt()", "missing argument 'size'"),
        ["EncryptionService.encrypt", "size"],
    ),
    "extra positional": (
        ("EncryptionService.encrypt()", "takes 2 arguments, 3 given", "the 3rd is 8"),
        ["EncryptionService.encrypt", 3],
    ),
    "extra keyword on load_key": (
        ("EncryptionService.load_key()", "unexpected keyword argument 'extra'", "(=1)"),
        ["EncryptionService.load_key", "extra"],
    ),
}


@pytest.mark.skipif(not running_as_root(), reason="needs a second uid (setuid in a child)")
def test_a_tenants_argument_mistakes_on_hardware_are_his_alone(spawn: Any) -> None:
    daemon = spawn(policy())
    with daemon.client() as alice:
        assert alice.identity["name"] == "alice" and alice.admin
        alice.install(MODULES / "tdes")
        enc = alice.get_service("EncryptionService")
        sid = enc.service_id
        enc.load_key(ALICE_KEY)
        alice.juggle(to_hardware=sid)
        data = os.urandom(64)
        buf = bytearray(data)
        enc.encrypt(buf, len(buf))
        assert bytes(buf) == tdes(ALICE_KEY, data)
        programmed = ["prr0", "PROGRAMMED", sid]
        assert programmed in [[r.name, r.state, r.service_id] for r in alice.regions()]
        before = alice.statistics(sid)
        assert before.tier == "hardware" and before.fallbacks == 0

        bob = run_as(NOBODY, bob_mistakes, str(daemon.socket))

        assert bob["identity"] == "bob" and bob["good"] and bob["good_after"]
        for name, (words, about) in EXPECTED.items():
            got = bob[name]
            assert got.get("error") == "ServiceArgumentError", (name, got)
            assert got["is_argument_error"], (name, got)
            for word in words:
                assert word in got["message"], (name, word, got["message"])
            assert got["about"] == about, (name, got)
            assert got["untouched"], name
        assert programmed in bob["regions"]  # what bob saw after his mistakes
        # alice: the region is still PROGRAMMED with the service, nothing was a fault, and her
        # next call is served by the hardware, with her key
        assert programmed in [[r.name, r.state, r.service_id] for r in alice.regions()]
        (service,) = [s for s in alice.services() if s.service_id == sid]
        assert service.tier == "hardware" and service.region == "prr0"
        after = alice.statistics(sid)
        assert (after.fallbacks, after.mismatches) == (0, 0)
        hardware_calls = after.per_tier["hardware"].calls
        data = os.urandom(64)
        buf = bytearray(data)
        enc.encrypt(buf, len(buf))
        assert bytes(buf) == tdes(ALICE_KEY, data)
        last = alice.statistics(sid)
        served = last.per_tier["hardware"].calls - hardware_calls
        assert served >= 1  # her encrypt (and the replay of her key: bob's was in the core)
        assert last.total.calls - after.total.calls == served  # ... all of it by the hardware
        assert (last.fallbacks, last.mismatches) == (0, 0) and last.tier == "hardware"
    assert "fault" not in daemon.logs().lower()
