"""AES-128 through the framework's proxy at every tier, the hardware tier on both engines.

The example module ``examples/modules/aes`` installed in ``Framework("xupv2p")`` (its
hardware tier is the register model :class:`AesCore`) and in ``Framework("xupv2p",
hardware="rtl")`` (the core's Verilog, services/hdl/aes, in Verilator). Known answers: FIPS-197
Appendix C.1 and SP 800-38A F.1.1/F.1.2 (ECB-AES128, four blocks in one call). A key loaded
while the service runs in software reaches the RTL core when the service is juggled into the
fabric, with no second ``load_key`` (the runtime replays the recorded call onto the core's
driver); with a consumer each, the runtime's context switches (the driver's save_context and
restore_context: the key read back from and written to the RTL core) keep every key.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import juggle
from juggle.errors import BackendError
from juggle.fabric.rtl import RtlWindow, VerilatorEngine
from juggle.fabric.sim.window import SimWindow
from juggle.services.crypto.aes_hw import AesCore

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "examples" / "modules" / "aes"

# (key, plaintext, ciphertext), hex
FIPS197_C1 = (
    "000102030405060708090a0b0c0d0e0f",
    "00112233445566778899aabbccddeeff",
    "69c4e0d86a7b0430d8cdb78070b4c55a",
)
SP800_38A = (  # F.1.1 ECB-AES128.Encrypt; F.1.2 decrypts the same pairs
    "2b7e151628aed2a6abf7158809cf4f3c",
    "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
    "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710",
    "3ad77bb40d7a3660a89ecaf32466ef97f5d3d58503b9699de785895a96fdbaaf"
    "43b1cd7f598ece23881b00e3ed0306887b0c785e27e8ad3f8223207104725dd4",
)
VECTORS = (FIPS197_C1, SP800_38A)


def _verilator() -> None:
    """Skip, naming why, where Verilator cannot run (the RTL tier needs it)."""
    try:
        VerilatorEngine(progress=None)
    except BackendError as exc:
        pytest.skip(f"Verilator is not usable here ({exc})")


@pytest.fixture
def rtl_fw() -> Iterator[juggle.Framework]:
    _verilator()
    framework = juggle.Framework("xupv2p", hardware="rtl")
    yield framework
    framework.close()


def _check_answers(proxy: Any, tier: str) -> None:
    """Every vector encrypts and decrypts to its known answer through ``proxy``."""
    for key, plain, cipher in VECTORS:
        proxy.load_key(bytes.fromhex(key))
        buf = bytearray.fromhex(cipher)
        assert proxy.decrypt(buf, len(buf)) == len(buf)
        assert buf.hex() == plain, (tier, key)
        assert proxy.encrypt(buf, len(buf)) == len(buf)
        assert buf.hex() == cipher, (tier, key)


@pytest.mark.parametrize("hardware", ["model", "rtl"])
def test_known_answers_at_every_tier(hardware: str) -> None:
    rtl = hardware == "rtl"
    if rtl:
        _verilator()
    with juggle.Framework("xupv2p", hardware=hardware) as fw:
        _known_answers_at_every_tier(fw, rtl)


def _known_answers_at_every_tier(fw: juggle.Framework, rtl: bool) -> None:
    fw.install(MODULE).start()
    proxy = fw.get_service("EncryptionService", filter="(algorithm=aes)")
    sid = proxy.service_id
    for tier in ("software", "native", "hardware"):
        fw.set_tier(sid, tier)
        assert fw.services()[0].tier == tier
        _check_answers(proxy, tier)
    window = fw.fabric.window("prr0")
    if rtl:  # the Verilog served the hardware calls: 6 blocks each way
        assert isinstance(window, RtlWindow) and window.rtl_cycles > 0
    else:
        assert isinstance(window, SimWindow) and not isinstance(window, RtlWindow)
        assert isinstance(window.model, AesCore) and window.model.blocks == 10  # 5 each way
    stats = fw.statistics(sid)
    assert stats.engine == ("rtl" if rtl else "model")
    assert stats.fallbacks == 0 and stats.mismatches == 0
    assert stats.per_tier["hardware"].calls == 3 * len(VECTORS)  # load_key, decrypt, encrypt


def _decrypts_then_encrypts(proxy: Any) -> None:
    """SP 800-38A's four blocks through ``proxy`` without a load_key: decryption first (it
    needs the core's last round key of the key the runtime gave it), then encryption."""
    _, plain, cipher = SP800_38A
    buf = bytearray.fromhex(cipher)
    proxy.decrypt(buf, len(buf))
    assert buf.hex() == plain
    proxy.encrypt(buf, len(buf))
    assert buf.hex() == cipher


def _rtl_key(fw: juggle.Framework) -> str:
    """KEY0..3 of the core in prr0, read back through its RtlWindow, as hex."""
    window = fw.fabric.window("prr0")
    assert isinstance(window, RtlWindow) and window.simulator.alive
    return b"".join(window.read32(o).to_bytes(4, "big") for o in (0x10, 0x14, 0x18, 0x1C)).hex()


def test_key_loaded_in_software_reaches_the_rtl_core_without_a_second_load_key(
    rtl_fw: juggle.Framework,
) -> None:
    """The only load_key runs in software. Each juggle into the fabric gives the new RTL core
    the key by replaying the recorded load_key onto its driver (the module's service is
    shared: one virtual device, so no context switch; see the next test for those)."""
    fw = rtl_fw
    key, plain, cipher = SP800_38A
    fw.install(MODULE).start()
    proxy = fw.get_service("EncryptionService", consumer="thumbpod", filter="(algorithm=aes)")
    sid = proxy.service_id
    fw.set_tier(sid, "software")
    proxy.load_key(bytes.fromhex(key))  # the only load_key of the test
    buf = bytearray.fromhex(plain)
    proxy.encrypt(buf, len(buf))
    assert buf.hex() == cipher

    for entry in (1, 2):
        report = fw.juggle(to_hardware=sid)
        assert report.region == "prr0" and fw.services()[0].tier == "hardware"
        window = fw.fabric.window("prr0")
        assert isinstance(window, RtlWindow)
        cycles = window.rtl_cycles
        _decrypts_then_encrypts(proxy)
        assert window.rtl_cycles > cycles, entry  # the calls ran in the simulator
        assert _rtl_key(fw) == key, entry
        fw.juggle(to_hardware=None, to_software=[sid])  # and out: software has the key
        assert fw.services()[0].tier in ("software", "native")
        _decrypts_then_encrypts(proxy)

    stats = fw.statistics(sid)
    assert stats.engine == "rtl"
    assert stats.per_tier["hardware"].calls == 4  # two calls each entry, no load_key
    assert stats.fallbacks == 0 and stats.mismatches == 0


def test_consumers_context_switches_on_the_rtl_core(
    rtl_fw: juggle.Framework, tmp_path: Path
) -> None:
    """The module with a virtual device per consumer: two consumers with their own keys
    alternate on one RTL core, so every call switches contexts (save_context reads the
    owner's key back from the core, restore_context writes the next one's); each keeps
    getting its own known answers, decryption first after every switch."""
    fw = rtl_fw
    module = tmp_path / "aes"
    shutil.copytree(MODULE, module)
    toml = module / "juggle.toml"
    text = toml.read_text(encoding="utf-8")
    assert text.count("per_consumer = false") == 1
    toml.write_text(text.replace("per_consumer = false", "per_consumer = true"), encoding="utf-8")
    fw.install(module).start()
    consumers = {
        name: (fw.get_service("EncryptionService", consumer=name), vector)
        for name, vector in (("alice", FIPS197_C1), ("bob", SP800_38A))
    }
    (sid,) = {proxy.service_id for proxy, _ in consumers.values()}
    for proxy, (key, _, _) in consumers.values():
        proxy.load_key(bytes.fromhex(key))  # wherever the service runs now
    fw.juggle(to_hardware=sid)
    window = fw.fabric.window("prr0")
    assert isinstance(window, RtlWindow)
    for _ in range(3):
        for name, (proxy, (key, plain, cipher)) in consumers.items():
            buf = bytearray.fromhex(cipher)
            proxy.decrypt(buf, len(buf))
            assert buf.hex() == plain, name
            proxy.encrypt(buf, len(buf))
            assert buf.hex() == cipher, name
            assert _rtl_key(fw) == key, name  # the core holds the caller's key
    stats = fw.statistics(sid)
    assert stats.engine == "rtl" and stats.fallbacks == 0 and stats.mismatches == 0
    assert stats.per_tier["hardware"].calls == 12
