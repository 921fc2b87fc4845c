"""Test bodies shared by the adder and multiplier testbenches (``test_adder``,
``test_multiplier``): the two cores have one register map and differ in operation and latency.

Known answers are the edge cases of 32-bit two's-complement arithmetic (zero, one, minus one,
the extremes, half-word boundaries) against Python's own wrapped arithmetic; random operands
follow. Every operation checks the result on both sides and the cycles from START to DONE.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jg_tb import TIMINGS, Bench, PairMMIO, on_driver, random_accesses, rng, unmapped_accesses

from juggle.services.arith import (
    CONTROL,
    CTRL_START,
    ID,
    INT32_MAX,
    INT32_MIN,
    LATENCY,
    OPERAND_A,
    OPERAND_B,
    RESULT,
    WINDOW_SIZE,
    AdderCore,
    AdderDriver,
    MultiplierCore,
    MultiplierDriver,
    to_int32,
)

EDGES = (
    *(0, 1, -1, 2, -2, INT32_MAX, INT32_MIN, INT32_MAX - 1, INT32_MIN + 1, 0x7FFF, -0x8000),
    *(0xFFFF, 0x10000, -0x10000, 65537, -65537, 0x12345678, -0x12345678, 46341, -46341),
)

Core = type[AdderCore] | type[MultiplierCore]


def expect(core: Core, a: int, b: int) -> int:
    """The core's documented result: the sum or product wrapped to 32 bits (unsigned)."""
    return to_int32(a + b if core is AdderCore else a * b) & 0xFFFFFFFF


async def bench(dut: Any, core: Core, timing: str) -> Bench:
    """A started bench of ``core`` on bus ``timing``."""
    b = Bench(dut, core(), TIMINGS[timing])
    await b.start()
    assert await b.read(ID, "ID") == core.core_id
    assert await b.read(LATENCY, "LATENCY") == core.latency
    return b


async def compute(b: Bench, core: Core, x: int, y: int) -> int:
    """One operation as the driver does it, compared on both sides; returns its result."""
    await b.write(OPERAND_A, x)
    await b.write(OPERAND_B, y)
    await b.operation(CONTROL, CTRL_START, core.latency)
    result = await b.read(RESULT, "RESULT")
    assert result == expect(core, x, y), f"{b.where()}: {x} op {y}: {result:#x}"
    return result


async def known_answers(dut: Any, core: Core, timing: str) -> None:
    """Every pair of edge operands (on the xupv2p and one-cycle buses; a third of them on the
    others, whose timing lies between)."""
    b = await bench(dut, core, timing)
    every = 1 if timing in ("xupv2p", "strobe") else 3
    for i, x in enumerate(EDGES):
        for y in EDGES[i % every :: every]:
            await compute(b, core, x, y)


async def random_operations(dut: Any, core: Core, timing: str) -> None:
    """Random operands, and reads of every register between operations."""
    b = await bench(dut, core, timing)
    rnd = rng(core.design, timing)
    for _ in range(60):
        await compute(b, core, rnd.randint(INT32_MIN, INT32_MAX), rnd.randint(INT32_MIN, INT32_MAX))
        for offset in (CONTROL, OPERAND_A, OPERAND_B):
            await b.read(offset)


async def busy_core(dut: Any, core: Core, timing: str) -> None:
    """While an operation runs, new operands and a second START change nothing of it."""
    b = await bench(dut, core, timing)
    rnd = rng(core.design, "busy", timing)
    for _ in range(20):
        x, y = rnd.randint(INT32_MIN, INT32_MAX), rnd.randint(INT32_MIN, INT32_MAX)
        await b.write(OPERAND_A, x)
        await b.write(OPERAND_B, y)
        await b.write(CONTROL, CTRL_START)
        first = b.cycle
        x2 = to_int32(rnd.getrandbits(32))
        await b.write(OPERAND_A, x2)
        await b.write(CONTROL, CTRL_START | 0x4)  # ignored while BUSY; CONTROL takes the value
        second = b.cycle
        await b.read(CONTROL)
        await b.read(OPERAND_A)
        await b.idle(core.latency)
        assert await b.read(0x04) == 2
        # the second START began an operation only if the first had finished by then
        want = expect(core, x2, y) if second - first >= core.latency else expect(core, x, y)
        assert await b.read(RESULT) == want, f"{b.where()}: START while busy"


async def register_accesses(dut: Any, core: Core, timing: str) -> None:
    """Random register traffic (reads compared), then the bus's unmapped offsets."""
    b = await bench(dut, core, timing)
    rnd = rng(core.design, "registers", timing)
    statuses = await random_accesses(b, CONTROL, 1000, rnd)
    assert 2 in statuses, "DONE was never read"
    if core.latency > b.timing.read_cycles:
        assert 1 in statuses, "BUSY was never read"
    await unmapped_accesses(b, rnd)


async def drivers(dut: Any, core: Core, timing: str) -> None:
    """juggle's real driver, unchanged, over both sides at once."""
    b = await bench(dut, core, timing)
    mmio = PairMMIO(b, WINDOW_SIZE)
    rnd = rng(core.design, "driver", timing)
    op: Callable[[int, int], int] = (
        AdderDriver(mmio).add if core is AdderCore else MultiplierDriver(mmio).mul
    )
    pairs = [(x, y) for x in EDGES[:7] for y in EDGES[:7]]
    pairs += [
        (rnd.randint(INT32_MIN, INT32_MAX), rnd.randint(INT32_MIN, INT32_MAX)) for _ in "0123"
    ]
    for x, y in pairs:

        def call(x: int = x, y: int = y) -> int:
            return op(x, y)

        got = await on_driver(call)
        assert got == to_int32(expect(core, x, y)), (x, y, got)
