"""AES-128 at every tier: known answers, the core model, the driver's contexts, the framework.

Vectors: FIPS-197 Appendix A.1 (key expansion), Appendix B (cipher example) and Appendix C.1
(AES-128 example); NIST SP 800-38A F.1.1/F.1.2 (ECB-AES128, four blocks). The hardware tier runs
through :class:`AesDriver` on a :class:`SimWindow` over :class:`AesCore` (bus costs of the
xupv2p profile), on the suite's cycle-counting window where timing matters, and through the
framework's proxy with the example module ``examples/modules/aes`` juggled into the fabric.
"""

from __future__ import annotations

import os
import random
import struct
import threading
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from Crypto.Cipher import AES as PyAES

import juggle
from juggle.errors import (
    BlockSizeError,
    BufferSizeError,
    CoreTimeoutError,
    KeyLengthError,
    KeyNotLoadedError,
    ServiceArgumentError,
    ServiceStateError,
)
from juggle.fabric.bitstream import build_bitstream, read_bitstream
from juggle.fabric.sim.clock import ModelClock
from juggle.fabric.sim.model import RegisterModel
from juggle.fabric.sim.window import SimWindow
from juggle.runtime.descriptors import parse_toml
from juggle.runtime.interfaces import InterfaceCatalog
from juggle.services.crypto import (
    AesCore,
    AesDriver,
    EncryptionService,
    NativeAES,
    SoftwareAES,
)
from juggle.services.crypto import aes_hw as hw
from juggle.services.crypto.aes import AES128, aes_key_schedule

WindowFactory = Callable[..., Any]  # the `window` fixture (conftest.py)

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "examples" / "modules" / "aes"
TIERS = ("software", "native", "hardware")

# (key, plaintext, ciphertext), hex
FIPS197_B = (
    "2b7e151628aed2a6abf7158809cf4f3c",
    "3243f6a8885a308d313198a2e0370734",
    "3925841d02dc09fbdc118597196a0b32",
)
FIPS197_C1 = (
    "000102030405060708090a0b0c0d0e0f",
    "00112233445566778899aabbccddeeff",
    "69c4e0d86a7b0430d8cdb78070b4c55a",
)
SP800_38A_KEY = "2b7e151628aed2a6abf7158809cf4f3c"
SP800_38A_BLOCKS = [  # F.1.1 ECB-AES128.Encrypt (F.1.2 is the same pairs decrypted)
    ("6bc1bee22e409f96e93d7e117393172a", "3ad77bb40d7a3660a89ecaf32466ef97"),
    ("ae2d8a571e03ac9c9eb76fac45af8e51", "f5d3d58503b9699de785895a96fdbaaf"),
    ("30c81c46a35ce411e5fbc1191a0a52ef", "43b1cd7f598ece23881b00e3ed030688"),
    ("f69f2445df4f9b17ad2b417be66c3710", "7b0c785e27e8ad3f8223207104725dd4"),
]
VECTORS = [
    pytest.param(*FIPS197_B, id="fips197-B"),
    pytest.param(*FIPS197_C1, id="fips197-C.1"),
    *(
        pytest.param(SP800_38A_KEY, p, c, id=f"sp800-38a-ecb-block{i}")
        for i, (p, c) in enumerate(SP800_38A_BLOCKS, 1)
    ),
]
SP_PLAIN = bytes.fromhex("".join(p for p, _ in SP800_38A_BLOCKS))
SP_CIPHER = bytes.fromhex("".join(c for _, c in SP800_38A_BLOCKS))

KEY_A = bytes.fromhex(FIPS197_B[0])
KEY_B = bytes.fromhex(FIPS197_C1[0])


def sim_window(core: RegisterModel | None = None) -> SimWindow:
    """A simulated fabric window over an AES core, with the xupv2p profile's bus costs."""
    return SimWindow(
        "prr0",
        core or AesCore(),
        ModelClock(),
        hz=100_000_000,
        read_cycles=12,
        write_cycles=8,
    )


def make(tier: str) -> EncryptionService:
    if tier == "software":
        return SoftwareAES()
    if tier == "native":
        return NativeAES()
    return AesDriver(sim_window())


def all_tiers() -> list[EncryptionService]:
    return [make(t) for t in TIERS]


def reference(key: bytes, data: bytes) -> bytes:
    return PyAES.new(key, PyAES.MODE_ECB).encrypt(data)


def encrypted(service: EncryptionService, data: bytes) -> bytes:
    buf = bytearray(data)
    assert service.encrypt(buf, len(buf)) == len(buf)
    return bytes(buf)


# -- the algorithm ------------------------------------------------------------------------------


def test_key_expansion_is_fips197_appendix_a1() -> None:
    words = aes_key_schedule(KEY_A)
    assert len(words) == 44
    assert [f"{w:08x}" for w in words[:8]] == [
        "2b7e1516", "28aed2a6", "abf71588", "09cf4f3c",
        "a0fafe17", "88542cb1", "23a33939", "2a6c7605",
    ]  # fmt: skip
    assert [f"{w:08x}" for w in words[40:]] == ["d014f9a8", "c9ee2589", "e13f0cc8", "b6630ca6"]


def test_block_functions_on_integers() -> None:
    key, plain, cipher = (bytes.fromhex(h) for h in FIPS197_C1)
    aes = AES128(key)
    block = int.from_bytes(plain, "big")
    assert aes.encrypt_block(block) == int.from_bytes(cipher, "big")
    assert aes.decrypt_block(int.from_bytes(cipher, "big")) == block


# -- known answers at every tier --------------------------------------------------------------


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize(("key", "plain", "cipher"), VECTORS)
def test_known_answer(tier: str, key: str, plain: str, cipher: str) -> None:
    service = make(tier)
    service.load_key(bytes.fromhex(key))
    buf = bytearray.fromhex(plain)
    assert service.encrypt(buf, 16) == 16
    assert buf.hex() == cipher
    assert service.decrypt(buf, 16) == 16
    assert buf.hex() == plain


@pytest.mark.parametrize("tier", TIERS)
def test_sp800_38a_ecb_four_blocks_in_one_call(tier: str) -> None:
    service = make(tier)
    service.load_key(bytes.fromhex(SP800_38A_KEY))
    buf = bytearray(SP_PLAIN) + b"tail"  # bytes past `size` stay untouched
    assert service.encrypt(buf, 64) == 64
    assert bytes(buf) == SP_CIPHER + b"tail"  # F.1.1
    assert service.decrypt(buf, 64) == 64
    assert bytes(buf) == SP_PLAIN + b"tail"  # F.1.2


def test_tiers_agree_on_random_keys_and_data() -> None:
    rng = random.Random(197)
    services = all_tiers()
    for _ in range(8):
        key = rng.randbytes(16)
        data = rng.randbytes(16 * rng.randrange(0, 5))
        outs = set()
        for service in services:
            service.load_key(key)
            outs.add(encrypted(service, data))
        assert outs == {reference(key, data)}, key.hex()


@pytest.mark.parametrize("tier", TIERS)
def test_typed_and_memoryview_buffers(tier: str) -> None:
    service = make(tier)
    service.load_key(KEY_A)
    words = array("I", SP_PLAIN)  # 16 words: a non-byte format is cast to bytes
    assert service.encrypt(words, 64) == 64  # type: ignore[arg-type]
    assert words.tobytes() == SP_CIPHER
    raw = bytearray(SP_PLAIN)
    view = memoryview(raw)[16:48]
    assert service.encrypt(view, 32) == 32
    assert raw == SP_PLAIN[:16] + SP_CIPHER[16:48] + SP_PLAIN[48:]
    assert service.encrypt(bytearray(0), 0) == 0


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [0, 8, 15, 17, 24, 32])
def test_wrong_key_length(length: int) -> None:
    for service in all_tiers():
        with pytest.raises(KeyLengthError, match=f"16 bytes long, got {length} bytes") as info:
            service.load_key(bytes(length))
        assert (info.value.argument, info.value.value) == ("key", length)
        assert isinstance(info.value, ServiceArgumentError)


def test_non_bytes_key_is_rejected() -> None:
    for service in all_tiers():
        with pytest.raises(KeyLengthError, match="bytes-like"):
            service.load_key("0123456789abcdef")  # type: ignore[arg-type]


def test_bad_key_keeps_the_previous_key() -> None:
    for service in all_tiers():
        service.load_key(KEY_A)
        with pytest.raises(KeyLengthError):
            service.load_key(bytes(24))
        assert encrypted(service, SP_PLAIN) == SP_CIPHER, service


def test_driver_validates_key_before_touching_registers(window: WindowFactory) -> None:
    win = window(AesCore())
    with pytest.raises(KeyLengthError):
        AesDriver(win).load_key(bytes(32))
    assert win.writes == 0 and win.reads == 0


@pytest.mark.parametrize("op", ["encrypt", "decrypt"])
def test_encrypt_before_load_key(op: str) -> None:
    for service in all_tiers():
        buf = bytearray(32)
        with pytest.raises(KeyNotLoadedError, match="load_key"):
            getattr(service, op)(buf, 32)
        assert buf == bytearray(32)


@pytest.mark.parametrize("size", [1, 8, 15, 17, 24, 40])
@pytest.mark.parametrize("op", ["encrypt", "decrypt"])
def test_size_not_a_16_byte_multiple(size: int, op: str) -> None:
    for service in all_tiers():
        service.load_key(KEY_A)
        buf = bytearray(range(48))
        with pytest.raises(BlockSizeError, match=f"multiple of the 16-byte block, got {size}"):
            getattr(service, op)(buf, size)
        assert buf == bytearray(range(48)), service


@pytest.mark.parametrize("size", [-16, 64])
def test_size_negative_or_beyond_buffer(size: int) -> None:
    for service in all_tiers():
        service.load_key(KEY_A)
        with pytest.raises(BufferSizeError, match=f"buffer length 48, got {size}"):
            service.encrypt(bytearray(48), size)


@pytest.mark.parametrize("size", [16.0, "16", True, None])
def test_size_must_be_an_int(size: object) -> None:
    for service in all_tiers():
        service.load_key(KEY_A)
        with pytest.raises(ServiceArgumentError, match='"size" must be an int'):
            service.encrypt(bytearray(16), size)  # type: ignore[arg-type]


def test_read_only_and_non_buffers_are_rejected() -> None:
    for service in all_tiers():
        service.load_key(KEY_A)
        with pytest.raises(ServiceArgumentError, match="writable"):
            service.encrypt(bytes(16), 16)  # type: ignore[arg-type]
        with pytest.raises(ServiceArgumentError, match="bytes-like"):
            service.encrypt([0] * 16, 16)  # type: ignore[arg-type]


# -- the core model -------------------------------------------------------------------------------


def _start_block(core: AesCore, key: bytes, block: bytes, now: int, decrypt: bool = False) -> None:
    for off, word in zip(hw.KEY, struct.unpack(">4I", key), strict=True):
        core.write(off, word, now)
    for off, word in zip(hw.DATA, struct.unpack(">4I", block), strict=True):
        core.write(off, word, now)
    core.write(hw.CONTROL, hw.CTRL_START | (hw.CTRL_DECRYPT if decrypt else 0), now)


def _result(core: AesCore, now: int) -> bytes:
    return struct.pack(">4I", *(core.read(off, now) for off in hw.RESULT))


def test_core_identity_and_window() -> None:
    core = AesCore()
    assert core.design == "aes"
    assert core.window_size == hw.WINDOW_SIZE == 0x40
    assert core.read(hw.LATENCY, 0) == hw.AES_CORE_CYCLES == 11
    assert core.read(hw.ID, 0) == hw.ID_AES
    assert core.read(hw.STATUS, 0) == 0  # power-on: neither busy nor done
    assert core.result_offsets == hw.RESULT
    assert len({hw.CONTROL, hw.STATUS, hw.LATENCY, hw.ID, *hw.KEY, *hw.DATA, *hw.RESULT}) == 16


@pytest.mark.parametrize("decrypt", [False, True])
def test_core_is_busy_for_11_cycles(decrypt: bool) -> None:
    key, plain, cipher = (bytes.fromhex(h) for h in FIPS197_B)
    core = AesCore()
    _start_block(core, key, cipher if decrypt else plain, now=100, decrypt=decrypt)
    for now in range(100, 111):
        assert core.read(hw.STATUS, now) == hw.STATUS_BUSY, now
        assert _result(core, now) == bytes(16), now  # the new result shows only when done
    assert core.read(hw.STATUS, 111) == hw.STATUS_DONE
    assert _result(core, 111) == (plain if decrypt else cipher)
    assert core.blocks == 1


def test_start_while_busy_is_ignored() -> None:
    key, plain, cipher = (bytes.fromhex(h) for h in FIPS197_C1)
    core = AesCore()
    _start_block(core, key, plain, now=0)
    core.write(hw.DATA[0], 0xDEADBEEF, 5)
    core.write(hw.KEY[0], 0, 6)  # key registers change, the running block keeps its key
    core.write(hw.CONTROL, hw.CTRL_START, 7)
    assert core.read(hw.STATUS, 10) == hw.STATUS_BUSY
    assert _result(core, 11) == cipher and core.blocks == 1
    assert core.read(hw.DATA[0], 11) == 0xDEADBEEF  # registers read back what was written


def test_core_context_round_trip() -> None:
    key, plain, cipher = (bytes.fromhex(h) for h in FIPS197_B)
    core = AesCore()
    _start_block(core, key, plain, now=0)
    ctx = core.save_context()  # completes the running block
    other = AesCore()
    other.restore_context(ctx)
    assert other.read(hw.STATUS, 0) == hw.STATUS_DONE
    assert _result(other, 0) == cipher
    assert struct.pack(">4I", *(other.read(off, 0) for off in hw.KEY)) == key
    other.write(hw.CONTROL, hw.CTRL_START, 20)  # DATA0..3 and the key came back too
    assert _result(other, 31) == cipher and other.blocks == 1
    other.restore_context(AesCore().save_context())
    assert other.read(hw.STATUS, 0) == 0 and _result(other, 0) == bytes(16)


def test_core_decrypt_after_restore_uses_the_restored_data() -> None:
    key, plain, cipher = (bytes.fromhex(h) for h in FIPS197_B)
    core = AesCore()
    _start_block(core, key, cipher, now=0, decrypt=True)
    other = AesCore()
    other.restore_context(core.save_context())
    other.write(hw.CONTROL, hw.CTRL_START | hw.CTRL_DECRYPT, 50)
    assert _result(other, 61) == plain and other.blocks == 1


# -- the driver -----------------------------------------------------------------------------------


def test_driver_register_protocol_per_block(window: WindowFactory) -> None:
    win = window(AesCore(), cycles_per_access=1)
    driver = AesDriver(win)
    driver.load_key(KEY_A)
    assert (win.writes, win.reads) == (4, 0)  # KEY0..3 once
    assert encrypted(driver, SP_PLAIN) == SP_CIPHER
    # per block: DATA0..3 and CONTROL, then STATUS polls for 11 cycles, then RESULT0..3
    assert win.writes == 4 + 4 * 5
    assert win.reads == 4 * (11 + 4)


def test_driver_on_the_simulated_window_counts_bus_time() -> None:
    win = sim_window()
    driver = AesDriver(win)
    driver.load_key(KEY_A)
    assert encrypted(driver, SP_PLAIN) == SP_CIPHER
    stats = win.statistics()
    # one status read (12 bus cycles) already finds the 11-cycle core done
    assert (stats.writes, stats.reads) == (4 + 4 * 5, 4 * (1 + 4))
    assert stats.busy_cycles == 24 * 8 + 20 * 12
    assert isinstance(win.model, AesCore) and win.model.blocks == 4


class _DeadCore(AesCore):
    def read(self, offset: int, now: int) -> int:
        return 0 if offset == hw.STATUS else super().read(offset, now)


def test_driver_times_out_on_a_dead_core(window: WindowFactory) -> None:
    driver = AesDriver(window(_DeadCore()), max_polls=50)
    driver.load_key(KEY_A)
    buf = bytearray(SP_PLAIN)
    with pytest.raises(CoreTimeoutError, match="50 status reads.*offset 0"):
        driver.encrypt(buf, 64)
    assert buf == SP_PLAIN  # nothing written back


def test_concurrent_callers_do_not_interleave(window: WindowFactory) -> None:
    driver = AesDriver(window(AesCore(), yield_gil=True))
    driver.load_key(KEY_B)
    plains = [os.urandom(48) for _ in range(4)]
    outs: list[bytes] = [b""] * 4

    def work(i: int) -> None:
        outs[i] = encrypted(driver, plains[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outs == [reference(KEY_B, p) for p in plains]


def test_reprs_show_key_state() -> None:
    for service in all_tiers():
        assert "no key" in repr(service)
        service.load_key(KEY_A)
        assert "key loaded" in repr(service)


# -- driver contexts -------------------------------------------------------------------------------


def test_two_consumers_share_one_core_through_contexts() -> None:
    win = sim_window()
    driver = AesDriver(win)
    driver.load_key(KEY_B)
    ctx_b = driver.save_context()
    driver.load_key(KEY_A)
    assert encrypted(driver, SP_PLAIN) == SP_CIPHER
    ctx_a = driver.save_context()
    assert len(ctx_a) == len(ctx_b) == driver.context_size == 20

    driver.restore_context(ctx_b)  # B's call runs
    assert encrypted(driver, SP_PLAIN) == reference(KEY_B, SP_PLAIN)
    assert driver.save_context() == ctx_b
    driver.restore_context(ctx_a)  # A's call runs, as if never interrupted
    assert encrypted(driver, SP_PLAIN) == SP_CIPHER
    buf = bytearray(SP_CIPHER)
    driver.decrypt(buf, len(buf))
    assert bytes(buf) == SP_PLAIN


def test_context_layout_is_the_documented_one(window: WindowFactory) -> None:
    mmio = window(AesCore())
    driver = AesDriver(mmio)
    assert driver.save_context() == bytes([1, 16, 0, 0]) + bytes(16)  # no key: no key bytes
    driver.load_key(KEY_A)
    assert driver.save_context() == bytes([1, 16, 1, 0]) + KEY_A
    driver.restore_context(bytes([1, 16, 1, 0]) + KEY_B)
    assert struct.pack(">4I", *(mmio.read32(off) for off in hw.KEY)) == KEY_B
    assert all(mmio.read32(off) == 0 for off in (*hw.DATA, hw.CONTROL))


def test_empty_context_is_the_power_on_state(window: WindowFactory) -> None:
    mmio = window(AesCore())
    driver = AesDriver(mmio)
    driver.load_key(KEY_A)
    encrypted(driver, SP_PLAIN)
    driver.restore_context(b"")
    assert all(mmio.read32(off) == 0 for off in (*hw.KEY, *hw.DATA, hw.CONTROL))
    with pytest.raises(KeyNotLoadedError):
        driver.encrypt(bytearray(16), 16)
    assert driver.save_context() == AesDriver(window(AesCore())).save_context()


def test_bad_contexts_are_refused_and_change_nothing(window: WindowFactory) -> None:
    mmio = window(AesCore())
    driver = AesDriver(mmio)
    driver.load_key(KEY_A)
    ctx = driver.save_context()
    writes = mmio.writes
    for bad in (ctx[:-1], ctx + b"\0", b"\1"):
        with pytest.raises(ServiceStateError, match=f"is 20 bytes.*got {len(bad)} bytes"):
            driver.restore_context(bad)
    for bad in (b"\x02" + ctx[1:], ctx[:1] + b"\x18" + ctx[2:]):
        with pytest.raises(ServiceStateError, match="expected version 1 with a 16-byte key"):
            driver.restore_context(bad)
    for bad in (
        ctx[:2] + b"\x03" + ctx[3:],
        ctx[:3] + b"\x01" + ctx[4:],
        ctx[:2] + b"\0" + ctx[3:],
    ):
        with pytest.raises(ServiceStateError, match="malformed context"):
            driver.restore_context(bad)
    with pytest.raises(ServiceArgumentError, match='"data" must be bytes'):
        driver.restore_context(None)  # type: ignore[arg-type]
    with pytest.raises(ServiceStateError, match="is 20 bytes"):  # a TDES context (28 bytes)
        driver.restore_context(bytes([1, 3, 1, 0]) + bytes(24))
    assert mmio.writes == writes
    assert driver.save_context() == ctx
    assert encrypted(driver, SP_PLAIN) == SP_CIPHER


# -- the example module and the framework ---------------------------------------------------------


def test_example_module_descriptor_and_bitstream() -> None:
    text = (MODULE / "juggle.toml").read_text()
    (service,) = parse_toml(text, str(MODULE / "juggle.toml")).services
    assert service.interfaces == ["crypto.EncryptionService"]
    assert service.properties == {"algorithm": "aes", "version": "1.0.0"}
    assert service.tiers() == ("software", "native", "hardware")
    hardware = service.hardware
    assert hardware is not None and hardware.model == "aes_module.AesCore"
    assert hardware.resources is not None
    declared = hardware.resources.for_family("xc2vp").as_dict()  # the xupv2p's kinds
    assert declared == AesCore.resources
    prr0 = {"slices": 2240, "flipflops": 4480, "mult18": 20, "ram16": 20}
    assert all(declared[k] <= prr0[k] for k in prr0)
    assert "estimate" in text.lower()
    path = MODULE / hardware.bitstreams["prr0"]
    header = read_bitstream(path)
    assert (header.design, header.part, header.region) == ("aes", "2vp30ff896", "prr0")
    assert path.read_bytes() == build_bitstream("aes", "2vp30ff896", "prr0", header.size)
    interface = InterfaceCatalog().resolve("crypto.EncryptionService")
    assert all(isinstance(s, interface) for s in all_tiers())


@pytest.fixture
def fw() -> Iterator[juggle.Framework]:
    framework = juggle.Framework("xupv2p")
    yield framework
    framework.close()


def _core(fw: juggle.Framework) -> AesCore:
    window = fw.fabric.window("prr0")
    assert isinstance(window, SimWindow)
    model = window.model
    assert isinstance(model, AesCore)
    return model


def test_framework_juggles_aes_to_hardware_and_back_without_reloading_the_key(
    fw: juggle.Framework,
) -> None:
    fw.install(MODULE).start()
    enc = fw.get_service("EncryptionService", consumer="thumbpod", filter="(algorithm=aes)")
    enc.load_key(KEY_A)  # once: every switch below carries it
    sid = enc.service_id

    def check(tier: str) -> None:
        (snapshot,) = fw.services()
        assert snapshot.tier == tier
        buf = bytearray(SP_PLAIN)
        assert enc.encrypt(buf, 64) == 64
        assert bytes(buf) == SP_CIPHER, tier
        assert enc.decrypt(buf, 64) == 64
        assert bytes(buf) == SP_PLAIN, tier

    (snapshot,) = fw.services()
    check(snapshot.tier)  # where the framework starts it (a soft tier)
    fw.set_tier(sid, "software")
    check("software")
    fw.set_tier(sid, "native")
    check("native")
    report = fw.juggle(to_hardware=sid)
    assert report.region == "prr0"
    assert fw.regions()[0].design == "aes" and fw.regions()[0].module == "aes"
    check("hardware")
    core = _core(fw)
    assert core.blocks == 8  # the hardware calls ran on the core: 4 blocks each way
    fw.juggle(to_hardware=None, to_software=[sid])
    (snapshot,) = fw.services()
    check(snapshot.tier)
    assert snapshot.tier in ("software", "native")
    fw.set_tier(sid, "software")
    check("software")
    fw.set_tier(sid, "hardware")  # into the fabric a second time
    check("hardware")
    stats = fw.statistics(sid)
    assert stats.fallbacks == 0 and stats.mismatches == 0
    assert {"software", "native", "hardware"} <= set(stats.per_tier)


def test_framework_fips_vectors_and_errors_at_the_hardware_tier(fw: juggle.Framework) -> None:
    fw.install(MODULE).start()
    enc = fw.get_service("EncryptionService", consumer="x", filter="(algorithm=aes)")
    fw.set_tier(enc.service_id, "hardware")
    for key, plain, cipher in (FIPS197_B, FIPS197_C1):
        enc.load_key(bytes.fromhex(key))
        buf = bytearray.fromhex(plain)
        enc.encrypt(buf, 16)
        assert buf.hex() == cipher, key
    assert _core(fw).blocks == 2
    with pytest.raises(KeyLengthError, match="got 24 bytes"):
        enc.load_key(bytes(24))
    with pytest.raises(BlockSizeError, match="16-byte block, got 8"):
        enc.encrypt(bytearray(16), 8)
    buf = bytearray.fromhex(FIPS197_C1[1])  # the bad key did not replace the loaded one
    enc.encrypt(buf, 16)
    assert buf.hex() == FIPS197_C1[2]
    assert fw.services()[0].tier == "hardware"
    assert fw.statistics(enc.service_id).fallbacks == 0
