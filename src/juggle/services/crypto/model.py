"""Behavioural models of the DES and Triple-DES cores (what a simulated region runs).

A model answers register accesses as the core in the FPGA would and computes real ciphertext
with the pure-Python DES, so a driver on the simulated fabric gets the same bytes as on a board.
Register map (byte offsets, see :mod:`juggle.services.crypto.registers`):

=====  ==========  ====  ==================================================================
0x00   CONTROL     R/W   bit 0 START, bit 1 DECRYPT (0 = encrypt)
0x04   STATUS      R     bit 0 BUSY, bit 1 DONE
0x08   DATA_HI     R/W   input block bytes 0..3 (big-endian)
0x0C   DATA_LO     R/W   input block bytes 4..7
0x10   RESULT_HI   R     output block bytes 0..3
0x14   RESULT_LO   R     output block bytes 4..7
0x20   KEY1_HI/LO  R/W   key 1 at 0x20/0x24; key 2 at 0x28/0x2C, key 3 at 0x30/0x34 (TDES)
0x38   LATENCY     R     core cycles per block
0x3C   ID          R     ``ID_DES`` (0x44455331) or ``ID_TDES`` (0x54444553)
=====  ==========  ====  ==================================================================

Resources (``resources``, what install and the fabric use): *modeled*, Yosys
``synth_xilinx -family xc2vp`` of juggle's Verilog of the core (``services/hdl/des``,
``services/hdl/tdes``; the figures ``juggle module build`` writes into the example modules'
``resources.json``), the slices a packing estimate (a floor). Juggle Table 2's figures stand
beside them as *input*, the paper's numbers, never used at run time:

======  ================================  ================================
core    modeled (synthesis, xc2vp)        Juggle Table 2 (input)
======  ================================  ================================
DES     744 slices, 441 flip-flops        660 slices, 513 flip-flops
TDES    830 slices, 625 flip-flops        1,835 slices, 1,527 flip-flops
======  ================================  ================================

Neither core uses a multiplier or block RAM, in synthesis or in the paper.

Timing: a START written at cycle ``t`` latches DATA and the keys; STATUS reads BUSY until cycle
``t + latency`` (DES 16, TDES 48 core cycles: one round per cycle, three DES passes for TDES),
then DONE, and only then do RESULT_HI/RESULT_LO show the new block. A START while BUSY is
ignored. Unmapped offsets read 0 and ignore writes (on the DES core, KEY2 and KEY3 too).

The key registers read back what was written, so a driver can save a consumer's context with
register reads alone (see :mod:`juggle.services.crypto.registers` for why, and who may read
them on a real board). RESULT_HI/RESULT_LO are the core's result registers
(``result_offsets``).
"""

from __future__ import annotations

import struct
from typing import ClassVar

from juggle.fabric.sim.model import RegisterModel
from juggle.services.crypto import registers as r
from juggle.services.crypto.des import DES, TripleDES

__all__ = ["DesCore", "TdesCore"]

#: control, data hi/lo, result hi/lo, six key words, "a result exists"
_CONTEXT = struct.Struct(">11I?")


class _CipherCore(RegisterModel):
    """Shared register behaviour of the DES and TDES cores; subclasses pick keys and latency."""

    design: ClassVar[str] = ""
    window_size: ClassVar[int] = r.WINDOW_SIZE
    latency: ClassVar[int] = 16
    core_id: ClassVar[int] = 0
    key_count: ClassVar[int] = 1
    resources: ClassVar[dict[str, int]] = {}
    result_offsets: ClassVar[tuple[int, ...]] = (r.RESULT_HI, r.RESULT_LO)

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Power-on state: registers zero, not busy, no result."""
        self._control = 0
        self._data = [0, 0]
        self._keys = [0] * 6
        self._result = 0
        self._pending = 0
        self._ready_at = 0
        self._started = False
        self._cipher: DES | None = None
        self._has_result = False
        #: blocks started since power-on (statistics only)
        self.blocks = 0

    # -- timing --------------------------------------------------------------------------------

    def _settle(self, now: int) -> bool:
        """Finish the running block if its latency has elapsed; True while still busy."""
        if self._started and now >= self._ready_at:
            self._result = self._pending
            self._started = False
        return self._started

    # -- register access -----------------------------------------------------------------------

    def read(self, offset: int, now: int) -> int:
        """Register value at cycle ``now`` (see the module's register map)."""
        busy = self._settle(now)
        if offset == r.STATUS:
            return r.STATUS_BUSY if busy else (r.STATUS_DONE if self._has_result else 0)
        if offset == r.RESULT_HI:
            return self._result >> 32
        if offset == r.RESULT_LO:
            return self._result & 0xFFFFFFFF
        if offset == r.CONTROL:
            return self._control
        if offset in (r.DATA_HI, r.DATA_LO):
            return self._data[(offset - r.DATA_HI) // 4]
        if r.KEY_HI[0] <= offset < r.KEY_HI[0] + 8 * self.key_count:
            return self._keys[(offset - r.KEY_HI[0]) // 4]
        if offset == r.LATENCY:
            return self.latency
        if offset == r.ID:
            return self.core_id
        return 0

    def write(self, offset: int, value: int, now: int) -> None:
        """Write a register at cycle ``now``; a START latches the block and the keys."""
        value &= 0xFFFFFFFF
        busy = self._settle(now)
        if offset in (r.DATA_HI, r.DATA_LO):
            self._data[(offset - r.DATA_HI) // 4] = value
        elif r.KEY_HI[0] <= offset < r.KEY_HI[0] + 8 * self.key_count:
            self._keys[(offset - r.KEY_HI[0]) // 4] = value
            self._cipher = None
        elif offset == r.CONTROL:
            self._control = value
            if value & r.CTRL_START and not busy:
                self._start(bool(value & r.CTRL_DECRYPT), now)

    def _start(self, decrypt: bool, now: int) -> None:
        cipher = self._cipher
        if cipher is None:
            cipher = self._cipher = self._make_cipher()
        block = (self._data[0] << 32) | self._data[1]
        self._pending = cipher.decrypt_block(block) if decrypt else cipher.encrypt_block(block)
        self._ready_at = now + self.latency
        self._started = True
        self._has_result = True
        self.blocks += 1

    def _key_bytes(self) -> bytes:
        return b"".join(w.to_bytes(4, "big") for w in self._keys[: 2 * self.key_count])

    def _make_cipher(self) -> DES:
        raise NotImplementedError

    # -- context ---------------------------------------------------------------------------------

    def save_context(self) -> bytes:
        """Control, data, result and key registers (a running block is completed first)."""
        if self._started:
            self._result, self._started = self._pending, False
        return _CONTEXT.pack(
            self._control,
            *self._data,
            self._result >> 32,
            self._result & 0xFFFFFFFF,
            *self._keys,
            self._has_result,
        )

    def restore_context(self, context: bytes) -> None:
        """Load registers saved by :meth:`save_context`."""
        fields = _CONTEXT.unpack(context)
        self.reset()
        self._control = fields[0]
        self._data = [fields[1], fields[2]]
        self._result = (fields[3] << 32) | fields[4]
        self._keys = list(fields[5:11])
        self._has_result = bool(fields[11])

    def __repr__(self) -> str:
        state = "busy" if self._started else "idle"
        return f"<{type(self).__name__} {state}, {self.blocks} blocks>"


class DesCore(_CipherCore):
    """The DES core: one key (KEY1), 16 core cycles per block; resources: module docstring."""

    design = "des"
    latency = 16
    core_id = r.ID_DES
    key_count = 1
    resources = {"slices": 744, "flipflops": 441, "mult18": 0, "ram16": 0}

    def _make_cipher(self) -> DES:
        return DES(self._key_bytes())


class TdesCore(_CipherCore):
    """The Triple-DES EDE core: keys KEY1..KEY3, 48 core cycles per block (three DES passes);
    resources: module docstring."""

    design = "tdes"
    latency = 48
    core_id = r.ID_TDES
    key_count = 3
    resources = {"slices": 830, "flipflops": 625, "mult18": 0, "ram16": 0}

    def _make_cipher(self) -> DES:
        return TripleDES(self._key_bytes())
