"""Code of the ``gcd`` co-module: ``hls.GcdService`` at three tiers, written from scratch.

* software: :class:`SoftwareGcd`, Euclid's algorithm in pure Python;
* native: :class:`NativeGcd`, the C implementation behind :func:`math.gcd`;
* hardware: :class:`GcdDriver` over the AXI4-Lite window of the GCD core (``hdl/gcd/gcd_top.v``,
  design ``"gcd"``); on the simulated fabric :class:`GcdCore` plays that core, edge by edge.

The core is the shape of a Vivado HLS block: an AXI4-Lite slave with the control registers of
HLS's ``s_axi_control`` port (byte offsets, 32-bit registers; "COR" = clear on read):

=====  ============  ====  =================================================================
0x00   AP_CTRL       R/W   bit 0 ap_start (write 1 to start; reads 1 until the core finishes),
                           bit 1 ap_done (COR), bit 2 ap_idle, bit 3 ap_ready (COR),
                           bit 7 auto_restart (R/W)
0x04   GIE           R/W   bit 0: global interrupt enable (the core has no interrupt line)
0x08   IER           R/W   bit 0 done, bit 1 ready: which events set ISR
0x0C   ISR           R/W   bit 0 done, bit 1 ready; a write toggles the bits written 1
0x10   A             R/W   first operand
0x18   B             R/W   second operand
0x20   RESULT        R     gcd(A, B) of the last operation
0x24   RESULT_VLD    R     bit 0 (COR): RESULT was written since the last read of this register
=====  ============  ====  =================================================================

Other offsets in the 0x40-byte window read 0 and ignore writes. The core computes by the
binary (Stein) algorithm, one step per clock edge: the edge after ``ap_start`` is written it
loads A and B, then takes ``n`` steps (each halves an operand or both: ``n <= 64``), then one
edge writes RESULT and sets ap_done; :func:`stein_steps` gives ``n``. The full cycle schedule,
and the AXI4-Lite handshakes, are documented in the header of ``gcd_top.v``.
"""

from __future__ import annotations

import math
import operator
import threading
from typing import ClassVar, SupportsIndex, cast

from juggle.errors import CoreTimeoutError, ServiceArgumentError
from juggle.fabric.mmio import MMIO
from juggle.fabric.sim.model import RegisterModel

from .hls import GcdService

__all__ = [
    "AP_CTRL",
    "A",
    "B",
    "RESULT",
    "RESULT_VLD",
    "GcdCore",
    "GcdDriver",
    "GcdService",
    "NativeGcd",
    "SoftwareGcd",
    "stein_steps",
]

MASK32 = 0xFFFFFFFF

AP_CTRL = 0x00
GIE = 0x04
IER = 0x08
ISR = 0x0C
A = 0x10
B = 0x18
RESULT = 0x20
RESULT_VLD = 0x24
WINDOW_SIZE = 0x40

AP_START = 0x01
AP_DONE = 0x02
AP_IDLE = 0x04
AP_READY = 0x08
AUTO_RESTART = 0x80

#: status reads the driver makes before it gives up on a core that never reports ap_done; the
#: core finishes within 67 edges of ap_start, a status read takes at least 2 (AXI4-Lite)
DEFAULT_MAX_POLLS = 1_000


def _operand(name: str, value: object) -> int:
    """``value`` as an unsigned 32-bit int; :class:`ServiceArgumentError` naming ``name`` and
    the value when it is not an int (``bool`` is refused) or outside ``0..0xFFFFFFFF``."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise ServiceArgumentError(
            f'"{name}" must be an int in 0..0xFFFFFFFF, got {type(value).__name__} {value!r}',
            argument=name,
        )
    number = operator.index(cast("SupportsIndex", value))
    if not 0 <= number <= MASK32:
        raise ServiceArgumentError(
            f'"{name}" must be an unsigned 32-bit int in 0..0xFFFFFFFF, got {number}',
            argument=name,
            value=number,
        )
    return number


def stein_steps(a: int, b: int) -> tuple[int, int]:
    """``(n, gcd)``: the steps the core takes on operands ``a`` and ``b`` before one of them is
    0, and the result it then writes. The same steps as ``gcd_top.v``'s datapath."""
    x, y, k, n = a, b, 0, 0
    while x and y:
        n += 1
        if not x & 1 and not y & 1:
            x, y, k = x >> 1, y >> 1, k + 1
        elif not x & 1:
            x >>= 1
        elif not y & 1:
            y >>= 1
        elif x >= y:
            x = (x - y) >> 1
        else:
            y = (y - x) >> 1
    return n, ((x | y) << k) & MASK32


# -- software and native tiers ----------------------------------------------------------------


class SoftwareGcd(GcdService):
    """The GCD by Euclid's algorithm in pure Python (remainders until one is 0)."""

    def gcd(self, a: int, b: int) -> int:
        """``math.gcd(a, b)`` for unsigned 32-bit ``a`` and ``b``.

        Raises :class:`~juggle.errors.ServiceArgumentError` naming a bad operand.
        """
        x, y = _operand("a", a), _operand("b", b)
        while y:
            x, y = y, x % y
        return x


class NativeGcd(GcdService):
    """The GCD by the C code of :func:`math.gcd` (the native tier)."""

    def gcd(self, a: int, b: int) -> int:
        """``math.gcd(a, b)`` for unsigned 32-bit ``a`` and ``b``.

        Raises :class:`~juggle.errors.ServiceArgumentError` naming a bad operand.
        """
        return math.gcd(_operand("a", a), _operand("b", b))


# -- hardware model -----------------------------------------------------------------------------


class GcdCore(RegisterModel):
    """The GCD core on the simulated fabric, clock edge by clock edge as ``gcd_top.v``.

    The model keeps the number of the last clock edge it applied and runs the core's edges
    lazily, at each access, up to the edge where that access meets the core: a write changes
    the register at the edge of its AW/W handshake, ``write_tail`` cycles before the end of
    the transaction (``now``); a read's AR handshake is ``read_tail`` cycles before its end
    and returns the registers as they were after the edge before it (clear-on-read bits are
    cleared at the handshake edge). Those are the positions juggle's AXI4-Lite harness gives
    the handshakes (wait states first, then AW/W or AR, then B or R, each in one cycle), so
    on a bus whose transactions last at least 2 cycles (every board profile's) ap_done reads 1
    at the same access as on the RTL. An idle core skips any number of edges at once, and so
    does a core looping on auto_restart (after one whole operation it repeats itself). An
    access whose edge is not after the last one applied (the fabric's ``core_hang`` fault
    freezes ``now``) changes the registers it addresses and nothing else: the core is stopped.

    ``resources`` are the Yosys ``synth_xilinx`` figures of ``gcd_top.v`` (family ``xc2vp``,
    modeled; the slices a packing estimate) as in the module's ``resources.json``.
    """

    design: ClassVar[str] = "gcd"
    window_size: ClassVar[int] = WINDOW_SIZE
    result_offsets: ClassVar[tuple[int, ...]] = (RESULT,)
    #: cycles from a write's register edge (its AW/W handshake) to the end of the transaction
    write_tail: ClassVar[int] = 1
    #: cycles from a read's AR handshake edge to the end of the transaction
    read_tail: ClassVar[int] = 1
    resources: ClassVar[dict[str, int]] = {"slices": 368, "flipflops": 251, "mult18": 0, "ram16": 0}

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Power-on state (``rst_n`` low): every register 0, the core idle."""
        self._edge = 0  # the last clock edge applied
        self._start = self._done = self._ready = self._auto = False
        self._gie = self._ier = self._isr = 0
        self._a = self._b = self._result = 0
        self._vld = False
        self._running = False
        self._x = self._y = self._k = 0
        #: operations started (load edges) since power-on (statistics only)
        self.operations = 0

    # -- bus ------------------------------------------------------------------------------------

    def read(self, offset: int, now: int) -> int:
        """Register at ``offset`` read by the transaction ending at cycle ``now``."""
        edge = now - self.read_tail
        if edge <= self._edge:  # no edge since the last access: a stopped clock, a hung core
            return self._tick(read=offset >> 2, step=False)
        self._run_to(edge - 1)
        return self._tick(read=offset >> 2)

    def write(self, offset: int, value: int, now: int) -> None:
        """Write ``value`` by the transaction ending at cycle ``now`` (all four bytes)."""
        edge = now - self.write_tail
        if edge <= self._edge:
            self._tick(write=(offset >> 2, value & MASK32), step=False)
            return
        self._run_to(edge - 1)
        self._tick(write=(offset >> 2, value & MASK32))

    def _value(self, word: int) -> int:
        """The register at word index ``word`` as it is now (before the next edge)."""
        if word == AP_CTRL >> 2:
            return (
                self._start * AP_START
                | self._done * AP_DONE
                | (not self._running) * AP_IDLE
                | self._ready * AP_READY
                | self._auto * AUTO_RESTART
            )
        if word == GIE >> 2:
            return self._gie
        if word == IER >> 2:
            return self._ier
        if word == ISR >> 2:
            return self._isr
        if word == A >> 2:
            return self._a
        if word == B >> 2:
            return self._b
        if word == RESULT >> 2:
            return self._result
        if word == RESULT_VLD >> 2:
            return int(self._vld)
        return 0

    # -- clock ----------------------------------------------------------------------------------

    def _run_to(self, edge: int) -> None:
        """Apply the core's own edges (no bus access in them) up to edge ``edge``."""
        while self._edge < edge:
            if not self._running:
                if not self._start:
                    self._edge = edge  # idle: nothing changes
                    return
                if self._auto and edge - self._edge > 2 * (stein_steps(self._a, self._b)[0] + 2):
                    self._skip_loops(edge)
                    continue
                self._tick()  # the load edge
                continue
            x, y, k = self._x, self._y, self._k
            steps = 0
            room = edge - self._edge
            while x and y and steps < room:  # plain steps: only x, y and k change
                steps += 1
                if not x & 1 and not y & 1:
                    x, y, k = x >> 1, y >> 1, k + 1
                elif not x & 1:
                    x >>= 1
                elif not y & 1:
                    y >>= 1
                elif x >= y:
                    x = (x - y) >> 1
                else:
                    y = (y - x) >> 1
            self._x, self._y, self._k = x, y, k
            self._edge += steps
            if self._edge < edge:
                self._tick()  # the finish edge

    def _skip_loops(self, edge: int) -> None:
        """On auto_restart, idle with ap_start set: run one whole operation (its flags are then
        what every later one leaves), then skip whole operations while they end before
        ``edge``."""
        period = stein_steps(self._a, self._b)[0] + 2  # load, the steps, finish
        target = self._edge + period
        self._tick()
        self._run_to(target)
        loops = (edge - self._edge) // period
        if loops > 0:
            self._edge += loops * period
            self.operations += loops

    def _tick(
        self, *, read: int | None = None, write: tuple[int, int] | None = None, step: bool = True
    ) -> int:
        """Apply one clock edge with an optional AR handshake (``read``, a word index) or
        register write (``(word, value)``); returns what the read returns (0 without one).
        With ``step`` false only the access takes effect: the datapath stays where it is and
        the edge count does not move (the clock is stopped)."""
        value = 0 if read is None else self._value(read)
        finish = step and self._running and (self._x == 0 or self._y == 0)
        word, data = write if write is not None else (-1, 0)
        start, auto, a, b, ier = self._start, self._auto, self._a, self._b, self._ier
        read_ctrl = read == AP_CTRL >> 2
        # AP_CTRL
        if word == AP_CTRL >> 2:
            self._auto = bool(data & AUTO_RESTART)
        if word == AP_CTRL >> 2 and data & AP_START:
            self._start = True
        elif finish:
            self._start = auto
        if finish:
            self._done = self._ready = True
        elif read_ctrl:
            self._done = self._ready = False
        # interrupt registers
        if word == GIE >> 2:
            self._gie = data & 1
        elif word == IER >> 2:
            self._ier = data & 3
        toggle = data & 3 if word == ISR >> 2 else 0
        events = ier if finish else 0
        self._isr = ((self._isr ^ toggle) & ~events | events) & 3
        # operands
        if word == A >> 2:
            self._a = data
        elif word == B >> 2:
            self._b = data
        # result
        if finish:
            self._result = ((self._x | self._y) << self._k) & MASK32
            self._vld = True
        elif read == RESULT_VLD >> 2:
            self._vld = False
        # datapath, from the values before the edge
        if not step:
            return value
        if not self._running:
            if start:
                self._x, self._y, self._k = a, b, 0
                self._running = True
                self.operations += 1
        elif finish:
            self._running = False
        else:
            x, y = self._x, self._y
            if not x & 1 and not y & 1:
                self._x, self._y, self._k = x >> 1, y >> 1, self._k + 1
            elif not x & 1:
                self._x = x >> 1
            elif not y & 1:
                self._y = y >> 1
            elif x >= y:
                self._x = (x - y) >> 1
            else:
                self._y = (y - x) >> 1
        self._edge += 1
        return value

    def __repr__(self) -> str:
        state = "running" if self._running else "idle"
        return f"<GcdCore {state}, {self.operations} operations>"


# -- driver -------------------------------------------------------------------------------------


class GcdDriver(GcdService):
    """``hls.GcdService`` on the GCD core, as an HLS block is driven: write A and B, write
    ap_start, read AP_CTRL until ap_done, read RESULT. One caller at a time (a lock)."""

    def __init__(self, mmio: MMIO, *, max_polls: int = DEFAULT_MAX_POLLS) -> None:
        self._mmio = mmio
        self._max_polls = max_polls
        self._lock = threading.Lock()

    def gcd(self, a: int, b: int) -> int:
        """``math.gcd(a, b)`` computed by the core.

        Raises :class:`~juggle.errors.ServiceArgumentError` naming a bad operand (before any
        register access), :class:`~juggle.errors.CoreTimeoutError` when ap_done is still clear
        after ``max_polls`` reads of AP_CTRL, and whatever the window raises.
        """
        x, y = _operand("a", a), _operand("b", b)
        read, write = self._mmio.read32, self._mmio.write32
        with self._lock:
            write(A, x)
            write(B, y)
            write(AP_CTRL, AP_START)
            polls = 0
            while not read(AP_CTRL) & AP_DONE:
                polls += 1
                if polls >= self._max_polls:
                    raise CoreTimeoutError(
                        f"GcdDriver: ap_done still clear after {polls} reads of AP_CTRL "
                        f"(gcd({x}, {y}))",
                        design=GcdCore.design,
                    )
            return read(RESULT)

    def __repr__(self) -> str:
        return f"<GcdDriver on {self._mmio!r}>"
