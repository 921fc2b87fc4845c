"""Shared pieces of the cocotb testbenches: juggle's register bus, lock-stepped with a model.

A :class:`Bench` drives a design's top module (``clk``, ``rst_n``, ``bus_addr``, ``bus_wdata``,
``bus_we``, ``bus_re``, ``bus_rdata``) the way juggle's RTL backend does (``harness.cpp`` in
``juggle/fabric/rtl/``): reset held for 4 clock cycles, cycles counted from its release, and
every transaction ``read_cycles`` (``write_cycles``) long: idle wait cycles, then one cycle with
the strobe whose rising edge performs the access; a read's data is ``bus_rdata`` after that
edge. The bench changes inputs and samples outputs a quarter cycle after each rising edge,
so they are stable for the next rising edge as in the harness, and it waits out idle cycles with
one timer (the clock runs in the simulator), so a transaction costs two awaits however long.

The design's Python register model sees every access too, with ``now`` = the number of the
strobe's rising edge since reset (what a simulated window passes its model), so both sides get
the same stimuli at the same cycles. :meth:`Bench.read` checks that both answer the same;
:meth:`Bench.operation` starts an operation, polls STATUS on both until DONE and checks that
both took the same number of cycles, and that this is the core's latency rounded up to whole
status reads, as the register maps document.

Timings: the bus of each board profile (``[bus] read_cycles``/``write_cycles``) and
``strobe``, one-cycle transactions, where a status poll every cycle measures a latency exactly.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import cocotb
from cocotb.clock import Clock
from cocotb.task import bridge, resume
from cocotb.triggers import RisingEdge, Timer, Trigger

from juggle.fabric import load_profile
from juggle.fabric.sim.model import RegisterModel

__all__ = [
    "STATUS",
    "STATUS_BUSY",
    "STATUS_DONE",
    "TIMINGS",
    "TIMING_PARAMS",
    "DRIVER_TIMINGS",
    "Bench",
    "PairMMIO",
    "Timing",
    "OUTSIDE",
    "SPECIAL",
    "UNALIGNED",
    "on_driver",
    "random_accesses",
    "rng",
    "unmapped_accesses",
    "words",
]

T = TypeVar("T")

STATUS = 0x04
STATUS_BUSY = 0x1
STATUS_DONE = 0x2
MASK32 = 0xFFFFFFFF
RESET_CYCLES = 4  # the harness's
#: clock period in simulator steps (the clock starts low for half of it)
PERIOD = 4
PROFILES = ("xupv2p", "virtex4-router", "zedboard")


@dataclass(frozen=True)
class Timing:
    """Cycles of one read and one write transaction (at least one each)."""

    name: str
    read_cycles: int
    write_cycles: int


def _timings() -> dict[str, Timing]:
    found = {}
    for name in PROFILES:
        bus = load_profile(name).bus
        found[name] = Timing(name, bus.read_cycles, bus.write_cycles)
    found["strobe"] = Timing("strobe", 1, 1)
    return found


#: timing name -> Timing: every profile's bus, and one-cycle transactions
TIMINGS: dict[str, Timing] = _timings()
#: the timings as ``cocotb.parametrize`` values, named like identifiers in test names
TIMING_PARAMS = [cocotb.Param(name, name.replace("-", "_")) for name in TIMINGS]
#: the timings the slower driver tests run on: the paper's board and one-cycle transactions
DRIVER_TIMINGS = [p for p in TIMING_PARAMS if p.value in ("xupv2p", "strobe")]


def rng(*parts: object) -> random.Random:
    """A random generator seeded by ``parts`` (so a failure replays)."""
    return random.Random("/".join(str(p) for p in parts))


@dataclass
class Poll:
    """One operation's status polls: cycles from its start to DONE on each side."""

    rtl_cycles: int | None = None
    model_cycles: int | None = None
    rtl_statuses: list[int] = field(default_factory=list)
    model_statuses: list[int] = field(default_factory=list)


class Bench:
    """The design under test (``dut``) and its register model, on bus ``timing``."""

    def __init__(self, dut: Any, model: RegisterModel, timing: Timing) -> None:
        self.dut = dut
        self.model = model
        self.timing = timing
        #: rising edges since reset was released (the model's ``now``)
        self.cycle = 0
        #: accesses so far (for messages)
        self.accesses = 0

    # -- clock and reset -----------------------------------------------------------------------

    async def start(self) -> None:
        """Start the clock, reset the design and the model (4 cycles, as the harness)."""
        if os.environ.get("JUGGLE_TB_CLOCK") != "hdl":  # else jg_tb_top.v runs the clock
            Clock(self.dut.clk, PERIOD, unit="step").start(start_high=False)
        self.dut.rst_n.value = 0
        self._idle()
        # "home", where inputs change and outputs are sampled, is a step after a rising edge
        await RisingEdge(self.dut.clk)  # the first of the reset cycles
        await Timer(1 + PERIOD * (RESET_CYCLES - 1), unit="step")
        self.dut.rst_n.value = 1
        self.model.reset()
        self.cycle = 0

    def _idle(self) -> None:
        self.dut.bus_we.value = 0
        self.dut.bus_re.value = 0
        self.dut.bus_addr.value = 0
        self.dut.bus_wdata.value = 0

    async def idle(self, cycles: int) -> None:
        """Let ``cycles`` clock cycles pass with the bus idle."""
        if cycles > 0:
            await Timer(PERIOD * cycles, unit="step")
            self.cycle += cycles

    async def _transact(self, offset: int, value: int | None) -> int:
        """One transaction on the RTL's bus: a write of ``value``, or a read (``None``)."""
        timing = self.timing
        await self.idle((timing.read_cycles if value is None else timing.write_cycles) - 1)
        self.dut.bus_addr.value = offset
        if value is None:
            self.dut.bus_re.value = 1
        else:
            self.dut.bus_wdata.value = value
            self.dut.bus_we.value = 1
        await Timer(PERIOD, unit="step")  # the strobe's rising edge
        self.cycle += 1
        self.accesses += 1
        data = int(self.dut.bus_rdata.value) if value is None else 0
        self._idle()
        return data

    # -- transactions --------------------------------------------------------------------------

    async def read_both(self, offset: int) -> tuple[int, int]:
        """One read transaction at ``offset``: (RTL value, model value), not compared."""
        rtl = await self._transact(offset, None)
        return rtl, self.model.read(offset, self.cycle) & MASK32

    async def read(self, offset: int, what: str = "") -> int:
        """Read ``offset`` on both; fails unless they agree. Returns the value."""
        rtl, model = await self.read_both(offset)
        assert rtl == model, (
            f"{self.where()}: read {offset:#06x}{f' ({what})' if what else ''}: "
            f"RTL {rtl:#010x}, model {model:#010x}"
        )
        return rtl

    async def read_rtl(self, offset: int) -> int:
        """Read ``offset`` on the RTL alone (for bus behaviour a window never lets reach a
        model: unaligned offsets)."""
        return await self._transact(offset, None)

    async def write(self, offset: int, value: int, *, model: bool = True) -> None:
        """One write transaction of ``value`` at ``offset`` on both (the RTL alone with
        ``model=False``)."""
        value &= MASK32
        await self._transact(offset, value)
        if model:
            self.model.write(offset, value, self.cycle)

    def where(self) -> str:
        """Where the bench is, for messages."""
        return (
            f"{self.timing.name} bus ({self.timing.read_cycles}/{self.timing.write_cycles}), "
            f"cycle {self.cycle}, access {self.accesses}"
        )

    # -- operations ----------------------------------------------------------------------------

    async def operation(
        self, trigger: int, value: int, latency: int, *, max_polls: int = 1000
    ) -> int:
        """Write ``value`` to ``trigger`` (starting an operation of ``latency`` cycles), poll
        STATUS on both sides until DONE, and check both took the same cycles from the start
        to the first DONE read, equal to ``latency`` rounded up to whole status reads.
        Returns those cycles."""
        await self.write(trigger, value)
        started = self.cycle
        poll = Poll()
        for _ in range(max_polls):
            rtl, model = await self.read_both(STATUS)
            poll.rtl_statuses.append(rtl)
            poll.model_statuses.append(model)
            if poll.rtl_cycles is None and rtl == STATUS_DONE:
                poll.rtl_cycles = self.cycle - started
            if poll.model_cycles is None and model == STATUS_DONE:
                poll.model_cycles = self.cycle - started
            if poll.rtl_cycles is not None and poll.model_cycles is not None:
                break
        where = f"{self.where()}: operation (write {value:#x} to {trigger:#x})"
        assert poll.rtl_cycles is not None, f"{where}: the RTL never read DONE ({poll})"
        assert poll.model_cycles is not None, f"{where}: the model never read DONE ({poll})"
        assert poll.rtl_cycles == poll.model_cycles, (
            f"{where}: cycles from start to DONE: RTL {poll.rtl_cycles}, "
            f"model {poll.model_cycles} (statuses RTL {poll.rtl_statuses}, "
            f"model {poll.model_statuses})"
        )
        assert poll.rtl_statuses == poll.model_statuses, f"{where}: statuses differ ({poll})"
        assert all(s == STATUS_BUSY for s in poll.rtl_statuses[:-1]), f"{where}: {poll}"
        reads = self.timing.read_cycles
        expected = max(1, -(-latency // reads)) * reads
        assert poll.rtl_cycles == expected, (
            f"{where}: DONE after {poll.rtl_cycles} cycles on both, expected {expected} "
            f"(latency {latency}, status reads of {reads} cycles)"
        )
        return poll.rtl_cycles


class PairMMIO:
    """An MMIO window whose every access goes to both sides of a :class:`Bench` (values
    compared), for running juggle's real drivers from a :func:`on_driver` thread."""

    def __init__(self, bench: Bench, size: int) -> None:
        self.bench = bench
        self._size = size
        self._read: Callable[[int], int] = resume(bench.read)
        self._write: Callable[[int, int], None] = resume(self._write_async)

    async def _write_async(self, offset: int, value: int) -> None:
        await self.bench.write(offset, value)

    @property
    def size(self) -> int:
        """The window's size in bytes."""
        return self._size

    def read32(self, offset: int) -> int:
        """Read the register at ``offset`` on both sides; they must agree."""
        return self._read(offset)

    def write32(self, offset: int, value: int) -> None:
        """Write the register at ``offset`` on both sides."""
        self._write(offset, value)


def on_driver(call: Callable[[], T]) -> Coroutine[Trigger, None, T]:
    """Run the blocking ``call`` (a driver's method on a :class:`PairMMIO`) in a bridge
    thread; await the result."""
    return bridge(call)()


#: register values worth writing besides random ones: bounds of counts, indices and fields
SPECIAL = (0, 1, 2, 3, 4, 7, 8, 9, 15, 16, 88, 89, 100, 0x7FFF, 0x8000, 0xFFFF, 0xFFFFFFFF)
#: aligned offsets past every design's 64-byte window: unmapped on the bus, 0 in the models
OUTSIDE = (0x40, 0x44, 0x80, 0x100, 0x7FFC, 0xFFFC)
#: unaligned offsets: unmapped on the bus (a window refuses them before any model sees them)
UNALIGNED = (0x01, 0x02, 0x03, 0x05, 0x0A, 0x0F, 0x22, 0x3E)


async def random_accesses(
    bench: Bench, trigger: int, steps: int, rnd: random.Random, window: int = 0x40
) -> set[int]:
    """``steps`` random register reads and writes on both sides (every read compared):
    STATUS read often and the ``trigger`` register written often, so reads land while
    operations run; now and then idle cycles. Returns the STATUS values seen."""
    statuses: set[int] = set()
    for _ in range(steps):
        reading = rnd.random() < 0.5
        if reading and rnd.random() < 0.3:
            offset = STATUS
        elif not reading and rnd.random() < 0.2:
            offset = trigger
        elif rnd.random() < 0.03:
            offset = rnd.choice(OUTSIDE)
        else:
            offset = rnd.randrange(0, window, 4)
        if reading:
            value = await bench.read(offset)
            if offset == STATUS:
                statuses.add(value)
        else:
            value = rnd.getrandbits(32) if rnd.random() < 0.6 else rnd.choice(SPECIAL)
            await bench.write(offset, value)
        if rnd.random() < 0.05:
            await bench.idle(rnd.randint(1, 24))
    return statuses


async def unmapped_accesses(bench: Bench, rnd: random.Random, window: int = 0x40) -> None:
    """Unaligned offsets on the RTL's bus read 0 and writes there change nothing: afterwards
    every register still reads as the model's (which never saw those writes)."""
    for offset in UNALIGNED:
        await bench.write(offset, rnd.getrandbits(32), model=False)
        value = await bench.read_rtl(offset)
        assert value == 0, f"{bench.where()}: unaligned read {offset:#x} gave {value:#x}"
    for offset in range(0, window, 4):
        await bench.read(offset)


def words(block: bytes) -> Sequence[int]:
    """Big-endian 32-bit words of ``block``."""
    return [int.from_bytes(block[i : i + 4], "big") for i in range(0, len(block), 4)]
