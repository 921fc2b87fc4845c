"""The ``math.AddService`` and ``math.MulService`` reference services (Juggle Listing 3, Table 2).

Both take two Java ``int`` values and return a Java ``int``: operands must lie in the 32-bit
two's-complement range and the result wraps the way Java's ``+`` and ``*`` do. Each service has a
software tier (:class:`SoftwareAdd`, :class:`SoftwareMul`) and a hardware tier: a driver
(:class:`AdderDriver`, :class:`MultiplierDriver`) over an MMIO window, backed on the simulated
fabric by the core models :class:`AdderCore` and :class:`MultiplierCore`.

Register map of both cores (byte offsets, 32-bit registers):

=====  ==========  ====  ==================================================================
0x00   CONTROL     R/W   bit 0 START: latch OPERAND_A/OPERAND_B and compute
0x04   STATUS      R     bit 0 BUSY, bit 1 DONE (RESULT holds the last operation's result)
0x08   OPERAND_A   R/W   first operand, two's complement
0x0C   OPERAND_B   R/W   second operand, two's complement
0x10   RESULT      R     low 32 bits of the sum / product, two's complement
0x38   LATENCY     R     core cycles per operation (adder 1, multiplier 4)
0x3C   ID          R     ``ID_ADDER`` (0x41444431, "ADD1") or ``ID_MULTIPLIER`` ("MUL1")
=====  ==========  ====  ==================================================================

Resources (``resources``, what install and the fabric use): *modeled*, Yosys
``synth_xilinx -family xc2vp`` of juggle's Verilog of the cores (``services/hdl/adder``,
``services/hdl/multiplier``; the figures ``juggle module build`` writes into the math example
module's ``resources.json``), the slices a packing estimate (a floor). Juggle Table 2's figures
stand beside them as *input*, the paper's numbers, never used at run time:

==========  ==========================================  ===========================================
core        modeled (synthesis, xc2vp)                  Juggle Table 2 (input)
==========  ==========================================  ===========================================
adder       138 slices, 161 flip-flops                  108 slices, 176 flip-flops
multiplier  304 slices, 260 flip-flops, one MULT18X18   88 slices, 144 flip-flops, one MULT18X18
==========  ==========================================  ===========================================

The multiplier builds the 32x32 product from four 18x18 partial products on its single MULT18
block, one per cycle, hence four cycles. A START while BUSY is ignored; unmapped offsets read 0.
"""

from __future__ import annotations

import operator
import threading
from typing import ClassVar, SupportsIndex, cast

from juggle.errors import CoreTimeoutError, OperandRangeError
from juggle.fabric.mmio import MMIO
from juggle.fabric.sim.model import RegisterModel

__all__ = [
    "AddService",
    "AdderCore",
    "AdderDriver",
    "MulService",
    "MultiplierCore",
    "MultiplierDriver",
    "SoftwareAdd",
    "SoftwareMul",
    "to_int32",
]

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1

CONTROL = 0x00
STATUS = 0x04
OPERAND_A = 0x08
OPERAND_B = 0x0C
RESULT = 0x10
LATENCY = 0x38
ID = 0x3C
CTRL_START = 0x1
STATUS_BUSY = 0x1
STATUS_DONE = 0x2
ID_ADDER = 0x41444431  # "ADD1"
ID_MULTIPLIER = 0x4D554C31  # "MUL1"
WINDOW_SIZE = 0x40
DEFAULT_MAX_POLLS = 100_000


def to_int32(value: int) -> int:
    """``value`` wrapped to 32-bit two's complement, as a Java ``int`` cast does."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _operand(name: str, value: object) -> int:
    """``value`` as a Java int; :class:`OperandRangeError` if not an int in 32-bit range."""
    # an __index__ method, looked up on the type (a runtime Protocol check costs ~5 µs a call)
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise OperandRangeError(
            f'"{name}" must be an int, got {type(value).__name__} {value!r}', argument=name
        )
    number = operator.index(cast("SupportsIndex", value))
    if not INT32_MIN <= number <= INT32_MAX:
        raise OperandRangeError(
            f'"{name}" must be a 32-bit int in [{INT32_MIN}, {INT32_MAX}], got {number}',
            argument=name,
            value=number,
        )
    return number


# -- interfaces -------------------------------------------------------------------------------


class AddService:
    """Adds two Java ints: ``add(a, b)`` is ``a + b`` wrapped to 32 bits."""

    def add(self, a: int, b: int) -> int:
        """The 32-bit wrapped sum. Raises :class:`~juggle.errors.OperandRangeError`."""
        raise NotImplementedError


class MulService:
    """Multiplies two Java ints: ``mul(a, b)`` is ``a * b`` wrapped to 32 bits."""

    def mul(self, a: int, b: int) -> int:
        """The 32-bit wrapped product. Raises :class:`~juggle.errors.OperandRangeError`."""
        raise NotImplementedError


# -- software tier ----------------------------------------------------------------------------


class SoftwareAdd(AddService):
    """``a + b`` in Python, wrapped to 32 bits."""

    def add(self, a: int, b: int) -> int:
        """The 32-bit wrapped sum. Raises :class:`~juggle.errors.OperandRangeError`."""
        return to_int32(_operand("a", a) + _operand("b", b))


class SoftwareMul(MulService):
    """``a * b`` in Python, wrapped to 32 bits."""

    def mul(self, a: int, b: int) -> int:
        """The 32-bit wrapped product. Raises :class:`~juggle.errors.OperandRangeError`."""
        return to_int32(_operand("a", a) * _operand("b", b))


# -- hardware models --------------------------------------------------------------------------


class _ArithCore(RegisterModel):
    """Two operand registers, START, a latency in core cycles, a 32-bit result."""

    design: ClassVar[str] = ""
    window_size: ClassVar[int] = WINDOW_SIZE
    latency: ClassVar[int] = 1
    core_id: ClassVar[int] = 0
    resources: ClassVar[dict[str, int]] = {}
    result_offsets: ClassVar[tuple[int, ...]] = (RESULT,)

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Power-on state: registers zero, idle, no result."""
        self._control = 0
        self._operands = [0, 0]
        self._result = 0
        self._pending = 0
        self._ready_at = 0
        self._busy = False
        self._has_result = False
        #: operations started since power-on (statistics only)
        self.operations = 0

    def _compute(self, a: int, b: int) -> int:
        raise NotImplementedError

    def _settle(self, now: int) -> bool:
        if self._busy and now >= self._ready_at:
            self._result, self._busy = self._pending, False
        return self._busy

    def read(self, offset: int, now: int) -> int:
        """Register value at cycle ``now`` (see the module's register map)."""
        busy = self._settle(now)
        if offset == STATUS:
            return STATUS_BUSY if busy else (STATUS_DONE if self._has_result else 0)
        if offset == RESULT:
            return self._result
        if offset in (OPERAND_A, OPERAND_B):
            return self._operands[(offset - OPERAND_A) // 4]
        if offset == CONTROL:
            return self._control
        if offset == LATENCY:
            return self.latency
        if offset == ID:
            return self.core_id
        return 0

    def write(self, offset: int, value: int, now: int) -> None:
        """Write a register at cycle ``now``; START latches the operands."""
        value &= 0xFFFFFFFF
        busy = self._settle(now)
        if offset in (OPERAND_A, OPERAND_B):
            self._operands[(offset - OPERAND_A) // 4] = value
        elif offset == CONTROL:
            self._control = value
            if value & CTRL_START and not busy:
                a, b = (to_int32(v) for v in self._operands)
                self._pending = self._compute(a, b) & 0xFFFFFFFF
                self._ready_at = now + self.latency
                self._busy = self._has_result = True
                self.operations += 1

    def __repr__(self) -> str:
        state = "busy" if self._busy else "idle"
        return f"<{type(self).__name__} {state}, {self.operations} operations>"


class AdderCore(_ArithCore):
    """The adder core: one cycle per sum; resources: module docstring."""

    design = "adder"
    latency = 1
    core_id = ID_ADDER
    resources = {"slices": 138, "flipflops": 161, "mult18": 0, "ram16": 0}

    def _compute(self, a: int, b: int) -> int:
        return a + b


class MultiplierCore(_ArithCore):
    """The multiplier core: four cycles per product on one MULT18; resources: module docstring."""

    design = "multiplier"
    latency = 4
    core_id = ID_MULTIPLIER
    resources = {"slices": 304, "flipflops": 260, "mult18": 1, "ram16": 0}

    def _compute(self, a: int, b: int) -> int:
        return a * b


# -- drivers ----------------------------------------------------------------------------------


class _ArithDriver:
    """Write both operands, START, poll STATUS until DONE, read RESULT; one caller at a time."""

    def __init__(self, mmio: MMIO, *, max_polls: int = DEFAULT_MAX_POLLS) -> None:
        self._mmio = mmio
        self._max_polls = max_polls
        self._lock = threading.Lock()

    def _compute(self, a: int, b: int) -> int:
        a, b = _operand("a", a), _operand("b", b)
        read, write = self._mmio.read32, self._mmio.write32
        with self._lock:
            write(OPERAND_A, a & 0xFFFFFFFF)
            write(OPERAND_B, b & 0xFFFFFFFF)
            write(CONTROL, CTRL_START)
            polls = 0
            while not read(STATUS) & STATUS_DONE:
                polls += 1
                if polls >= self._max_polls:
                    raise CoreTimeoutError(
                        f"{type(self).__name__}: core not DONE after {polls} status reads"
                    )
            return to_int32(read(RESULT))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} on {self._mmio!r}>"


class AdderDriver(_ArithDriver, AddService):
    """``math.AddService`` on the adder core."""

    def add(self, a: int, b: int) -> int:
        """The 32-bit wrapped sum computed by the core.

        Raises :class:`~juggle.errors.OperandRangeError` for a bad operand and
        :class:`~juggle.errors.CoreTimeoutError` if the core never reports DONE.
        """
        return self._compute(a, b)


class MultiplierDriver(_ArithDriver, MulService):
    """``math.MulService`` on the multiplier core."""

    def mul(self, a: int, b: int) -> int:
        """The 32-bit wrapped product computed by the core.

        Raises :class:`~juggle.errors.OperandRangeError` for a bad operand and
        :class:`~juggle.errors.CoreTimeoutError` if the core never reports DONE.
        """
        return self._compute(a, b)
