"""Model and RTL agree: each reference core's Python register model against its Verilog.

Every test drives a design twice, through a SimWindow over the Python model and through an
RtlWindow over the Verilog running in Verilator, with the same stimuli: register by register
(random reads and writes, reads sampled while the core is busy included) and through the real
drivers (known-answer vectors and random data). Results must be equal, and so must the modeled
cycles each operation took: the RTL's transactions are real clock cycles and its cores finish
in the cycle the models count, so there is no difference to bound.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from typing import TypeVar

import pytest
from Crypto.Cipher import DES as PyDES
from Crypto.Cipher import DES3 as PyDES3
from rtl_support import DESIGNS, Pair, built

from juggle.errors import WindowAccessError
from juggle.services.arith import INT32_MAX, INT32_MIN, AdderDriver, MultiplierDriver, to_int32
from juggle.services.audio import (
    AdpcmDriver,
    decode_ima_adpcm,
    encode_ima_adpcm,
    sine_sweep,
)
from juggle.services.crypto.driver import DesDriver, TdesDriver

PROFILES = ("xupv2p", "virtex4-router", "zedboard")
T = TypeVar("T")


@pytest.fixture(scope="module", autouse=True)
def _simulators() -> None:
    built()  # build (or find) every simulator once, before the first test's clock starts


# -- register level ---------------------------------------------------------------------------

#: the longest operation of each core, in cycles (ADPCM: a word of 8 codes)
_LATENCY = {"des": 16, "tdes": 48, "adder": 1, "multiplier": 4, "adpcm": 8, "aes": 11}
#: the register whose write starts an operation
_TRIGGER = {
    "des": 0x00,
    "tdes": 0x00,
    "adder": 0x00,
    "multiplier": 0x00,
    "adpcm": 0x0C,
    "aes": 0x00,
}
_SPECIAL = (0, 1, 2, 3, 4, 7, 8, 9, 15, 16, 88, 89, 100, 0x7FFF, 0x8000, 0xFFFF, 0xFFFFFFFF)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("design", DESIGNS)
def test_random_register_accesses_agree(design: str, profile: str) -> None:
    rnd = random.Random(f"{design}/{profile}")
    statuses: set[int] = set()
    key_written_at: int | None = None  # aes: cycle of the last KEY write
    with Pair(design, profile) as pair:
        for step in range(1500):
            reading = rnd.random() < 0.5
            if reading and rnd.random() < 0.3:
                offset = 0x04  # STATUS, often: to catch operations in flight
            elif not reading and rnd.random() < 0.2:
                offset = _TRIGGER[design]  # start operations often
            else:
                offset = rnd.randrange(0, 0x40, 4)
            if reading:
                got, want = pair.rtl.read32(offset), pair.sim.read32(offset)
                assert got == want, f"step {step}: read {offset:#x}: RTL {got:#x}, model {want:#x}"
                if offset == 0x04:
                    statuses.add(want)
            else:
                value = rnd.getrandbits(32) if rnd.random() < 0.6 else rnd.choice(_SPECIAL)
                if design == "aes" and offset == 0x00 and value & 3 == 3:
                    # aes_core.v: a decrypting START waits for the last round key, derived
                    # in the 10 cycles after a KEY write; the model does not time that
                    while (
                        key_written_at is not None
                        and pair.cycles()[1] + pair.profile.bus.write_cycles - key_written_at < 10
                    ):
                        assert pair.rtl.read32(0x04) == pair.sim.read32(0x04)
                pair.rtl.write32(offset, value)
                pair.sim.write32(offset, value)
                if design == "aes" and 0x10 <= offset <= 0x1C:
                    key_written_at = pair.cycles()[1]
            model_cycles, rtl_cycles = pair.cycles()
            assert rtl_cycles == model_cycles, f"step {step}: clocks differ"
        for bad in (0x40, 0x02):
            with pytest.raises(WindowAccessError):
                pair.rtl.read32(bad)
            with pytest.raises(WindowAccessError):
                pair.sim.read32(bad)
        busy_visible = _LATENCY[design] > pair.profile.bus.read_cycles
    assert 2 in statuses  # DONE was seen
    if busy_visible:
        assert 1 in statuses  # and BUSY: reads sampled while an operation ran


def _both(pair: Pair, op_sim: Callable[[], T], op_rtl: Callable[[], T]) -> tuple[T, T, int]:
    """Run one operation on the model and on the RTL: both results and the modeled cycles it
    took, after checking that the two clocks and the RTL's own cycle count agree on them."""
    sim0, rtl0 = pair.cycles()
    rtl_own0 = pair.rtl.rtl_cycles
    got_sim = op_sim()
    got_rtl = op_rtl()
    sim1, rtl1 = pair.cycles()
    assert sim1 - sim0 == rtl1 - rtl0 == pair.rtl.rtl_cycles - rtl_own0
    return got_sim, got_rtl, sim1 - sim0


# -- DES and Triple-DES -----------------------------------------------------------------------

# FIPS 81 / the classic worked example / SP 800-17 variable-plaintext KATs (DES), and the
# Triple-DES example of SP 800-67 (three distinct keys, "The qufck brown fox jump").
DES_VECTORS = [
    ("0123456789abcdef", "4e6f772069732074", "3fa40e8a984d4815"),
    ("133457799bbcdff1", "0123456789abcdef", "85e813540f0ab405"),
    ("0101010101010101", "8000000000000000", "95f8a5e5dd31d900"),
    ("0101010101010101", "4000000000000000", "dd7f121ca5015619"),
]
TDES_VECTORS = [
    (
        "0123456789abcdef23456789abcdef01456789abcdef0123",
        b"The qufck brown fox jump".hex(),
        "a826fd8ce53b855fcce21c8112256fe668d5c05dd9b6b900",
    ),
]


@pytest.mark.parametrize(("key", "plain", "cipher"), DES_VECTORS)
def test_des_known_answers(key: str, plain: str, cipher: str) -> None:
    assert PyDES.new(bytes.fromhex(key), PyDES.MODE_ECB).encrypt(bytes.fromhex(plain)).hex() == (
        cipher
    )
    with Pair("des") as pair:
        drivers = DesDriver(pair.sim), DesDriver(pair.rtl)
        for driver in drivers:
            driver.load_key(bytes.fromhex(key))
        bufs = [bytearray.fromhex(plain) for _ in drivers]
        _both(
            pair, partial(drivers[0].encrypt, bufs[0], 8), partial(drivers[1].encrypt, bufs[1], 8)
        )
        assert bufs[1].hex() == bufs[0].hex() == cipher
        _both(
            pair, partial(drivers[0].decrypt, bufs[0], 8), partial(drivers[1].decrypt, bufs[1], 8)
        )
        assert bufs[1].hex() == bufs[0].hex() == plain


@pytest.mark.parametrize(("key", "plain", "cipher"), TDES_VECTORS)
def test_tdes_known_answers(key: str, plain: str, cipher: str) -> None:
    with Pair("tdes") as pair:
        driver = TdesDriver(pair.rtl)
        driver.load_key(bytes.fromhex(key))
        buf = bytearray.fromhex(plain)
        driver.encrypt(buf, len(buf))
        assert buf.hex() == cipher
        driver.decrypt(buf, len(buf))
        assert buf.hex() == plain


def test_tdes_with_one_key_is_des() -> None:
    """K1 = K2 = K3 reduces EDE to single DES: the DES vectors hold on the TDES core."""
    with Pair("tdes") as pair:
        driver = TdesDriver(pair.rtl)
        for key, plain, cipher in DES_VECTORS:
            driver.load_key(bytes.fromhex(key * 3))
            buf = bytearray.fromhex(plain)
            driver.encrypt(buf, 8)
            assert buf.hex() == cipher


@pytest.mark.parametrize("key_bytes", [16, 24])
def test_tdes_random_blocks_agree(key_bytes: int) -> None:
    rnd = random.Random(key_bytes)
    with Pair("tdes") as pair:
        drivers = TdesDriver(pair.sim), TdesDriver(pair.rtl)
        for _ in range(6):
            key = PyDES3.adjust_key_parity(rnd.randbytes(key_bytes))
            for driver in drivers:
                driver.load_key(key)
            size = 8 * rnd.randint(1, 8)
            plain = rnd.randbytes(size)
            bufs = [bytearray(plain) for _ in drivers]
            *_, cycles = _both(
                pair,
                partial(drivers[0].encrypt, bufs[0], size),
                partial(drivers[1].encrypt, bufs[1], size),
            )
            expected = PyDES3.new(key, PyDES3.MODE_ECB).encrypt(plain)
            assert bytes(bufs[1]) == bytes(bufs[0]) == expected
            # xupv2p: 3 writes of 5 cycles, 6 status reads of 8 to cover 48 cycles, 2 results
            assert cycles == (size // 8) * (3 * 5 + 6 * 8 + 2 * 8)
            _both(
                pair,
                partial(drivers[0].decrypt, bufs[0], size),
                partial(drivers[1].decrypt, bufs[1], size),
            )
            assert bytes(bufs[1]) == bytes(bufs[0]) == plain


def test_des_random_blocks_agree() -> None:
    rnd = random.Random(8)
    with Pair("des") as pair:
        drivers = DesDriver(pair.sim), DesDriver(pair.rtl)
        for _ in range(6):
            key = rnd.randbytes(8)
            for driver in drivers:
                driver.load_key(key)
            size = 8 * rnd.randint(1, 8)
            plain = rnd.randbytes(size)
            bufs = [bytearray(plain) for _ in drivers]
            *_, cycles = _both(
                pair,
                partial(drivers[0].encrypt, bufs[0], size),
                partial(drivers[1].encrypt, bufs[1], size),
            )
            assert bytes(bufs[1]) == bytes(bufs[0]) == PyDES.new(key, PyDES.MODE_ECB).encrypt(plain)
            # xupv2p: 3 writes of 5 cycles, 2 status reads of 8 to cover 16 cycles, 2 results
            assert cycles == (size // 8) * (3 * 5 + 2 * 8 + 2 * 8)


def test_tdes_context_round_trip_on_rtl() -> None:
    """The driver's context (keys read back from the core) is the same on model and RTL, and
    a context saved on one restores on the other."""
    key = bytes.fromhex(TDES_VECTORS[0][0])
    with Pair("tdes") as pair:
        sim, rtl = TdesDriver(pair.sim), TdesDriver(pair.rtl)
        sim.load_key(key)
        rtl.load_key(key)
        saved = rtl.save_context()
        assert saved == sim.save_context()
        rtl.restore_context(b"")
        sim.restore_context(b"")
        assert rtl.save_context() == sim.save_context()
        assert pair.rtl.read32(0x20) == pair.sim.read32(0x20) == 0  # the key is gone
        rtl.restore_context(saved)
        buf = bytearray.fromhex(TDES_VECTORS[0][1])
        rtl.encrypt(buf, len(buf))
        assert buf.hex() == TDES_VECTORS[0][2]


# -- adder and multiplier ---------------------------------------------------------------------

_EDGES = (0, 1, -1, 2, INT32_MAX, INT32_MIN, 0x7FFF, -0x8000, 0x10000, 65537, -65537)


@pytest.mark.parametrize("design", ["adder", "multiplier"])
def test_arith_operations_agree(design: str) -> None:
    rnd = random.Random(design)
    pairs = [(a, b) for a in _EDGES for b in _EDGES[:6]]
    pairs += [
        (rnd.randint(INT32_MIN, INT32_MAX), rnd.randint(INT32_MIN, INT32_MAX)) for _ in range(60)
    ]
    with Pair(design) as pair:
        if design == "adder":
            sim_op, rtl_op = AdderDriver(pair.sim).add, AdderDriver(pair.rtl).add
        else:
            sim_op, rtl_op = MultiplierDriver(pair.sim).mul, MultiplierDriver(pair.rtl).mul
        for a, b in pairs:
            got_sim, got_rtl, cycles = _both(pair, partial(sim_op, a, b), partial(rtl_op, a, b))
            want = to_int32(a + b) if design == "adder" else to_int32(a * b)
            assert got_rtl == got_sim == want, (a, b)
            # 3 writes of 5 cycles, one status read (8 cycles cover the latency), one result read
            assert cycles == 3 * 5 + 8 + 8


# -- IMA ADPCM --------------------------------------------------------------------------------


def _decode_both(pair: Pair, drivers: tuple[AdpcmDriver, AdpcmDriver], data: bytes) -> bytes:
    got_sim, got_rtl, _ = _both(
        pair, partial(drivers[0].decode, data), partial(drivers[1].decode, data)
    )
    assert got_rtl == got_sim
    return got_rtl


def test_adpcm_stream_agrees() -> None:
    samples = sine_sweep(0.08, seed=3)  # 640 samples
    stream = encode_ima_adpcm(samples)
    with Pair("adpcm") as pair:
        drivers = AdpcmDriver(pair.sim), AdpcmDriver(pair.rtl)
        pcm = b""
        for size in (4, 7, 1, 2, 3, 64, 19):  # word-aligned and ragged pieces (COUNT < 8)
            piece, stream = stream[:size], stream[size:]
            pcm_piece = _decode_both(pair, drivers, piece)
            pcm += pcm_piece
        pcm += _decode_both(pair, drivers, stream)
        assert pcm == decode_ima_adpcm(encode_ima_adpcm(samples))[0]
        assert drivers[1].juggle_save_state() == drivers[0].juggle_save_state()


def test_adpcm_saturation_and_state_agree() -> None:
    """Codes that drive the predictor and the step index into their clamps, from states
    written through the registers, and the driver's context operations."""
    rnd = random.Random(7)
    with Pair("adpcm") as pair:
        drivers = AdpcmDriver(pair.sim), AdpcmDriver(pair.rtl)
        for state, data in [
            ((0, 0), b"\x77" * 40),  # up to +32767, index to 88
            ((32000, 80), b"\x77" * 8),
            ((-32000, 88), b"\xff" * 40),  # down to -32768
            ((5, 3), b"\x00" * 12),  # index down to 0
            ((-1, 44), rnd.randbytes(37)),
        ]:
            for driver in drivers:
                driver.juggle_restore_state(state)
            pcm = _decode_both(pair, drivers, data)
            assert pcm == decode_ima_adpcm(data, state)[0]
        saved = drivers[1].save_context()
        assert saved == drivers[0].save_context()
        for driver in drivers:
            driver.restore_context(b"")
            driver.reset()
        assert drivers[1].juggle_save_state() == (0, 0)
        drivers[1].restore_context(saved)
        assert drivers[1].save_context() == saved
