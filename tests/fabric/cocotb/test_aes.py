"""cocotb testbench of the AES-128 core (``aes_top``) against its model ``AesCore``.

Run by ``tests/fabric/test_rtl_cocotb.py`` inside the simulator; every test runs on the bus of
each board profile and on one-cycle transactions. Known answers: FIPS-197 Appendix B and C.1,
SP 800-38A F.1.1/F.1.2 (ECB-AES128); random keys and blocks are checked against pycryptodome.

The core derives the last round key (where decryption starts) in the 10 cycles after a KEY
write (aes_core.v's header); a decryption STARTed sooner finishes later than the model says.
The driver never does that on a board's bus; on one-cycle transactions it would, so the
bodies here wait out those cycles (idle bus) before a decrypting START, and
:func:`early_decryption` checks what the core does when they are not waited out.
"""

from __future__ import annotations

import random
from typing import Any

import cocotb
from Crypto.Cipher import AES as PyAES
from jg_tb import (
    DRIVER_TIMINGS,
    OUTSIDE,
    SPECIAL,
    STATUS,
    STATUS_BUSY,
    STATUS_DONE,
    TIMING_PARAMS,
    TIMINGS,
    Bench,
    PairMMIO,
    on_driver,
    rng,
    unmapped_accesses,
    words,
)

from juggle.services.crypto import aes_hw as hw
from juggle.services.crypto.aes_hw import AesCore, AesDriver

#: (key, plaintext, ciphertext), hex
VECTORS = (
    (  # FIPS-197 Appendix B
        "2b7e151628aed2a6abf7158809cf4f3c",
        "3243f6a8885a308d313198a2e0370734",
        "3925841d02dc09fbdc118597196a0b32",
    ),
    (  # FIPS-197 Appendix C.1
        "000102030405060708090a0b0c0d0e0f",
        "00112233445566778899aabbccddeeff",
        "69c4e0d86a7b0430d8cdb78070b4c55a",
    ),
    (  # SP 800-38A F.1.1 / F.1.2, four blocks
        "2b7e151628aed2a6abf7158809cf4f3c",
        "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
        "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710",
        "3ad77bb40d7a3660a89ecaf32466ef97f5d3d58503b9699de785895a96fdbaaf"
        "43b1cd7f598ece23881b00e3ed0306887b0c785e27e8ad3f8223207104725dd4",
    ),
)
#: cycles from a KEY write's edge until a decrypting START's edge is on time
KEY_SCHEDULE = 10
BOTH = hw.CTRL_START | hw.CTRL_DECRYPT


class AesBench(Bench):
    """A :class:`Bench` that remembers the edge of the last KEY write, and before every write
    of CONTROL that would start a decryption waits (idle bus) until that START's edge is at
    least :data:`KEY_SCHEDULE` cycles later, unless ``eager``."""

    eager = False
    key_edge: int | None = None

    async def write(self, offset: int, value: int, *, model: bool = True) -> None:
        starts_decryption = offset == hw.CONTROL and value & BOTH == BOTH
        if starts_decryption and not self.eager and self.key_edge is not None:
            strobe = self.cycle + self.timing.write_cycles
            await self.idle(self.key_edge + KEY_SCHEDULE - strobe)
        await super().write(offset, value, model=model)
        if offset in hw.KEY:
            self.key_edge = self.cycle


async def bench(dut: Any, timing: str) -> AesBench:
    """A started bench of the AES core on bus ``timing``."""
    b = AesBench(dut, AesCore(), TIMINGS[timing])
    await b.start()
    assert await b.read(hw.ID, "ID") == hw.ID_AES
    assert await b.read(hw.LATENCY, "LATENCY") == hw.AES_CORE_CYCLES
    return b


async def load_key(b: Bench, key: bytes) -> None:
    """Write KEY0..3 on both sides."""
    for offset, word in zip(hw.KEY, words(key), strict=True):
        await b.write(offset, word)


async def result(b: Bench) -> bytes:
    """RESULT0..3, read (and compared) on both sides."""
    out = b""
    for offset in hw.RESULT:
        out += (await b.read(offset, "RESULT")).to_bytes(4, "big")
    return out


async def block(b: Bench, data: bytes, decrypt: bool) -> bytes:
    """One block as the driver runs it, compared on both sides; returns the result block."""
    for offset, word in zip(hw.DATA, words(data), strict=True):
        await b.write(offset, word)
    control = hw.CTRL_START | (hw.CTRL_DECRYPT if decrypt else 0)
    await b.operation(hw.CONTROL, control, hw.AES_CORE_CYCLES)
    return await result(b)


@cocotb.test
@cocotb.parametrize(timing=TIMING_PARAMS)
async def known_answers(dut: Any, timing: str) -> None:
    """FIPS-197 and SP 800-38A vectors both ways: results and cycles to DONE agree."""
    b = await bench(dut, timing)
    for key, plain, cipher in VECTORS:
        await load_key(b, bytes.fromhex(key))
        for i in range(0, len(plain), 32):
            p, c = bytes.fromhex(plain[i : i + 32]), bytes.fromhex(cipher[i : i + 32])
            got = await block(b, c, decrypt=True)  # decryption first, right after the key
            assert got == p, f"{b.where()}: D({key}, {c.hex()}) = {got.hex()}, not {p.hex()}"
            got = await block(b, p, decrypt=False)
            assert got == c, f"{b.where()}: E({key}, {p.hex()}) = {got.hex()}, not {c.hex()}"


@cocotb.test
@cocotb.parametrize(timing=TIMING_PARAMS)
async def random_blocks(dut: Any, timing: str) -> None:
    """Random keys and blocks both ways, against pycryptodome; CONTROL, DATA, KEY read back."""
    b = await bench(dut, timing)
    rnd = rng("aes", timing)
    for _ in range(12):
        key, data, decrypt = rnd.randbytes(16), rnd.randbytes(16), rnd.random() < 0.5
        await load_key(b, key)
        got = await block(b, data, decrypt)
        cipher = PyAES.new(key, PyAES.MODE_ECB)
        want = cipher.decrypt(data) if decrypt else cipher.encrypt(data)
        assert got == want, f"{b.where()}: key {key.hex()}, decrypt {decrypt}"
        for offset in (hw.CONTROL, *hw.DATA, *hw.KEY):
            await b.read(offset)


@cocotb.test
@cocotb.parametrize(timing=TIMING_PARAMS)
async def busy_core(dut: Any, timing: str) -> None:
    """While a block runs, new data and key words and a second START leave it alone; the
    second START begins a block only if the first had finished."""
    b = await bench(dut, timing)
    rnd = rng("aes", "busy", timing)
    for _ in range(6):
        key, data = rnd.randbytes(16), rnd.randbytes(16)
        await load_key(b, key)
        for offset, word in zip(hw.DATA, words(data), strict=True):
            await b.write(offset, word)
        await b.write(hw.CONTROL, hw.CTRL_START)
        first = b.cycle
        data2, key_word = rnd.randbytes(4), rnd.getrandbits(32)
        await b.write(hw.DATA[0], words(data2)[0])
        await b.write(hw.KEY[3], key_word)
        b.eager = True  # a START while busy is ignored whenever it comes
        await b.write(hw.CONTROL, BOTH)
        b.eager = False
        second = b.cycle
        await b.read(STATUS)
        await b.idle(hw.AES_CORE_CYCLES + KEY_SCHEDULE)
        assert await b.read(STATUS) == STATUS_DONE
        if second - first >= hw.AES_CORE_CYCLES:  # the first block was done: a decryption
            key2 = key[:12] + key_word.to_bytes(4, "big")
            want = PyAES.new(key2, PyAES.MODE_ECB).decrypt(data2 + data[4:])
        else:
            want = PyAES.new(key, PyAES.MODE_ECB).encrypt(data)
        got = await result(b)
        assert got == want, f"{b.where()}: START while busy"


async def _random_accesses(b: Bench, steps: int, rnd: random.Random) -> set[int]:
    """Random reads (compared) and writes, STATUS read and CONTROL written often."""
    statuses: set[int] = set()
    for _ in range(steps):
        reading = rnd.random() < 0.5
        if reading and rnd.random() < 0.3:
            offset = STATUS
        elif not reading and rnd.random() < 0.25:
            offset = hw.CONTROL
        elif rnd.random() < 0.03:
            offset = rnd.choice(OUTSIDE)
        else:
            offset = rnd.randrange(0, hw.WINDOW_SIZE, 4)
        if reading:
            value = await b.read(offset)
            if offset == STATUS:
                statuses.add(value)
        else:
            value = rnd.getrandbits(32) if rnd.random() < 0.6 else rnd.choice(SPECIAL)
            await b.write(offset, value)
        if rnd.random() < 0.05:
            await b.idle(rnd.randint(1, 24))
    return statuses


@cocotb.test
@cocotb.parametrize(timing=TIMING_PARAMS)
async def register_accesses(dut: Any, timing: str) -> None:
    """Random register traffic (reads compared), then the bus's unmapped offsets."""
    b = await bench(dut, timing)
    statuses = await _random_accesses(b, 1000, rng("aes", "registers", timing))
    assert STATUS_DONE in statuses, "DONE was never read"
    if b.timing.read_cycles < hw.AES_CORE_CYCLES:
        assert STATUS_BUSY in statuses, "BUSY was never read"
    await unmapped_accesses(b, rng("aes", "unmapped", timing))


@cocotb.test
@cocotb.parametrize(timing=DRIVER_TIMINGS)
async def drivers(dut: Any, timing: str) -> None:
    """AesDriver, unchanged, over both sides at once: multi-block buffers."""
    b = await bench(dut, timing)
    driver = AesDriver(PairMMIO(b, hw.WINDOW_SIZE))
    rnd = rng("aes", "driver", timing)
    for _ in range(2):
        key, plain = rnd.randbytes(16), rnd.randbytes(48)
        buf = bytearray(plain)

        def run(key: bytes = key, buf: bytearray = buf) -> None:
            driver.load_key(key)
            driver.encrypt(buf, len(buf))

        await on_driver(run)
        assert bytes(buf) == PyAES.new(key, PyAES.MODE_ECB).encrypt(plain), b.where()

        def back(buf: bytearray = buf) -> None:
            driver.decrypt(buf, len(buf))

        await on_driver(back)
        assert bytes(buf) == plain, f"{b.where()}: driver decrypt"


@cocotb.test
async def early_decryption(dut: Any) -> None:
    """One-cycle transactions: a decrypting START ``gap`` cycles after the last KEY write
    begins ``KEY_SCHEDULE - gap`` cycles late (BUSY meanwhile) and is right; at a gap of 10
    it is on time. The model, which does not time the key schedule, is DONE after 11."""
    b = await bench(dut, "strobe")
    b.eager = True
    key, plain, cipher = (bytes.fromhex(h) for h in VECTORS[1])
    for gap in (1, 2, 5, 9, 10, 11):
        for offset, word in zip(hw.DATA, words(cipher), strict=True):
            await b.write(offset, word)
        await load_key(b, key)
        await b.idle(gap - 1)
        await b.write(hw.CONTROL, BOTH)
        start, rtl_done, model_done = b.cycle, None, None
        while rtl_done is None or model_done is None:
            rtl, model = await b.read_both(STATUS)
            if rtl_done is None and rtl == STATUS_DONE:
                rtl_done = b.cycle - start
            if model_done is None and model == STATUS_DONE:
                model_done = b.cycle - start
            assert rtl in (STATUS_BUSY, STATUS_DONE), f"{b.where()}: status {rtl:#x}"
        assert model_done == hw.AES_CORE_CYCLES, b.where()
        late = max(0, KEY_SCHEDULE - gap)
        assert rtl_done == hw.AES_CORE_CYCLES + late, f"{b.where()}: gap {gap}: {rtl_done}"
        got = await result(b)
        assert got == plain, f"{b.where()}: gap {gap}"
