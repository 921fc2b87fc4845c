"""cocotb testbench of the IMA ADPCM decoder core (``adpcm_top``) against its model ``AdpcmCore``.

Run by ``tests/fabric/test_rtl_cocotb.py`` inside the simulator; every test runs on the bus of
each board profile and on one-cycle transactions.

Known answers are nibble sequences decoded by hand from the IMA algorithm (step table, the
shift-and-add difference, the index table), written out below, so they do not lean on the
model's tables: the largest code up from silence, the same down, code 0 from a mid state, both
clamps of the predictor, the clamps of the step index, and words shorter than 8 codes.
"""

from __future__ import annotations

from typing import Any

import cocotb
from jg_tb import (
    DRIVER_TIMINGS,
    TIMING_PARAMS,
    TIMINGS,
    Bench,
    PairMMIO,
    on_driver,
    random_accesses,
    rng,
    unmapped_accesses,
)

from juggle.services.audio import (
    CONTROL,
    COUNT,
    CTRL_RESET,
    DATA,
    ID,
    ID_ADPCM,
    LATENCY,
    PCM,
    PREDICTOR,
    STEP_INDEX,
    WINDOW_SIZE,
    AdpcmCore,
    AdpcmDriver,
    decode_ima_adpcm,
    encode_ima_adpcm,
    sine_sweep,
)

#: (start predictor, start step index, COUNT, DATA word, samples, end step index), by hand:
#: e.g. code 7 at index 0 (step 7): diff = 7>>3 + 7 + 7>>1 + 7>>2 = 11, index + 8
KNOWN = (
    (0, 0, 8, 0x77777777, (11, 41, 104, 240, 533, 1164, 2521, 5431), 64),
    (0, 0, 8, 0xFFFFFFFF, (-11, -41, -104, -240, -533, -1164, -2521, -5431), 64),
    (100, 10, 8, 0x00000000, (102, 104, 106, 107, 108, 109, 110, 111), 2),
    (0, 0, 8, 0x00000000, (0,) * 8, 0),  # index stays at its floor
    (32000, 80, 8, 0x77777777, (32767,) * 8, 88),  # predictor and index at their ceilings
    (-32000, 88, 8, 0xFFFFFFFF, (-32768,) * 8, 88),
    (0, 0, 3, 0x00000777, (11, 41, 104), 24),  # COUNT 3: three codes, the rest read 0
    (0, 0, 1, 0x0000000C, (-7,), 2),  # code 12 (minus, 4) at step 7: -(0 + 7), index + 2
    (5, 3, 2, 0x00000098, (4, 1), 1),  # code 8 at step 10: -1; code 9 at step 9: -(1 + 2)
)


def signed32(value: int) -> int:
    """A register value as a signed 32-bit number."""
    return value - (1 << 32) if value & 0x80000000 else value


def software(state: tuple[int, int], count: int, data: int) -> tuple[int, ...]:
    """The first ``count`` samples the software decoder makes of ``data`` from ``state``."""
    pcm, _ = decode_ima_adpcm(data.to_bytes(4, "little"), state)
    return tuple(
        int.from_bytes(pcm[2 * i : 2 * i + 2], "little", signed=True) for i in range(count)
    )


def pack(samples: tuple[int, ...]) -> list[int]:
    """Samples as the PCM0..PCM3 registers hold them (two per word, the first in bits 15..0)."""
    regs = [0, 0, 0, 0]
    for i, sample in enumerate(samples):
        regs[i // 2] |= (sample & 0xFFFF) << (16 * (i % 2))
    return regs


async def bench(dut: Any, timing: str) -> Bench:
    """A started bench on bus ``timing``."""
    b = Bench(dut, AdpcmCore(), TIMINGS[timing])
    await b.start()
    assert await b.read(ID, "ID") == ID_ADPCM
    assert await b.read(LATENCY, "LATENCY") == 1
    assert await b.read(COUNT, "COUNT") == 8
    return b


async def word(b: Bench, count: int, data: int) -> tuple[list[int], int, int]:
    """Decode one word on both sides (COUNT written first); the PCM registers, PREDICTOR (as a
    signed value) and STEP_INDEX, all compared."""
    await b.write(COUNT, count)
    await b.operation(DATA, data, count)
    regs = [await b.read(offset, f"PCM{i}") for i, offset in enumerate(PCM)]
    raw = await b.read(PREDICTOR, "PREDICTOR")
    index = await b.read(STEP_INDEX, "STEP_INDEX")
    return regs, signed32(raw), index


async def set_state(b: Bench, pred: int, index: int) -> None:
    """Write PREDICTOR and STEP_INDEX on both sides."""
    await b.write(PREDICTOR, pred & 0xFFFFFFFF)
    await b.write(STEP_INDEX, index)


@cocotb.test
@cocotb.parametrize(timing=TIMING_PARAMS)
async def known_answers(dut: Any, timing: str) -> None:
    """Hand-decoded words: samples, state and cycles to DONE agree and are right."""
    for pred, index, count, data, samples, _ in KNOWN:  # the table has no typo
        assert software((pred, index), count, data) == samples, hex(data)
    b = await bench(dut, timing)
    for pred, index, count, data, samples, end in KNOWN:
        await set_state(b, pred, index)
        regs, got_pred, got_index = await word(b, count, data)
        assert regs == pack(samples), f"{b.where()}: {data:#x} from ({pred}, {index})"
        assert (got_pred, got_index) == (samples[-1], end), f"{b.where()}: state"
    # register clamps and CONTROL's reset
    for value, want in ((0, 8), (9, 8), (1, 1), (0xFFFFFFFF, 8), (8, 8)):
        await b.write(COUNT, value)
        assert await b.read(COUNT) == want
    for value, want in ((200, 88), (89, 88), (88, 88), (0x100, 88), (3, 3)):
        await b.write(STEP_INDEX, value)
        assert await b.read(STEP_INDEX) == want
    for value, want in ((0x12345, 0x2345), (0x8000, 0xFFFF8000), (0xFFFF7FFF, 0x7FFF)):
        await b.write(PREDICTOR, value)
        assert await b.read(PREDICTOR) == want
    await b.write(CONTROL, CTRL_RESET)
    assert (await b.read(PREDICTOR), await b.read(STEP_INDEX)) == (0, 0)


@cocotb.test
@cocotb.parametrize(timing=TIMING_PARAMS)
async def random_words(dut: Any, timing: str) -> None:
    """Random words, COUNTs and states, against the software decoder."""
    b = await bench(dut, timing)
    rnd = rng("adpcm", timing)
    for _ in range(40):
        if rnd.random() < 0.3:
            await set_state(b, rnd.randint(-32768, 32767), rnd.randint(0, 88))
        state = (signed32(await b.read(PREDICTOR)), await b.read(STEP_INDEX))
        count, data = rnd.randint(1, 8), rnd.getrandbits(32)
        regs, pred, _ = await word(b, count, data)
        samples = software(state, count, data)
        assert regs == pack(samples), f"{b.where()}: {data:#x} x{count} from {state}"
        assert pred == samples[-1], f"{b.where()}: PREDICTOR"


@cocotb.test
@cocotb.parametrize(timing=TIMING_PARAMS)
async def busy_core(dut: Any, timing: str) -> None:
    """While a word decodes, every write but COUNT is ignored."""
    b = await bench(dut, timing)
    rnd = rng("adpcm", "busy", timing)
    for _ in range(8):
        await b.write(COUNT, 8)
        await b.write(DATA, rnd.getrandbits(32))
        await b.write(PREDICTOR, rnd.getrandbits(16))
        await b.write(STEP_INDEX, rnd.randint(0, 88))
        await b.write(COUNT, rnd.randint(1, 8))
        await b.write(DATA, rnd.getrandbits(32))
        await b.write(CONTROL, CTRL_RESET)
        for offset in (0x04, COUNT, PREDICTOR, STEP_INDEX, *PCM):
            await b.read(offset)
        await b.idle(8)
        for offset in (0x04, COUNT, PREDICTOR, STEP_INDEX, *PCM):
            await b.read(offset)


@cocotb.test
@cocotb.parametrize(timing=TIMING_PARAMS)
async def register_accesses(dut: Any, timing: str) -> None:
    """Random register traffic, every read compared; unmapped offsets."""
    b = await bench(dut, timing)
    rnd = rng("adpcm", "registers", timing)
    statuses = await random_accesses(b, DATA, 1200, rnd)
    assert 2 in statuses, "DONE was never read"
    if b.timing.read_cycles < 8:  # a word of 8 codes outlasts a read
        assert 1 in statuses, "BUSY was never read"
    await unmapped_accesses(b, rnd, WINDOW_SIZE)


@cocotb.test
@cocotb.parametrize(timing=DRIVER_TIMINGS)
async def drivers(dut: Any, timing: str) -> None:
    """AdpcmDriver over model and RTL at once: a stream in ragged pieces, and its state."""
    b = await bench(dut, timing)
    driver = AdpcmDriver(PairMMIO(b, WINDOW_SIZE))
    stream = encode_ima_adpcm(sine_sweep(0.01, seed=5))  # 40 bytes
    pieces = [stream[:4], stream[4:11], stream[11:12], stream[12:14], stream[14:]]

    def decode_all() -> bytes:
        return b"".join(driver.decode(piece) for piece in pieces)

    pcm = await on_driver(decode_all)
    assert pcm == decode_ima_adpcm(stream)[0], f"{b.where()}: driver decode"
    state = await on_driver(driver.juggle_save_state)
    assert state == decode_ima_adpcm(stream)[1]
