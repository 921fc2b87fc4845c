"""The hardware tier of the AES service: ThumbPod's AES-128 core as a model, and its driver.

ThumbPod's coprocessor takes a 128-bit key and a 128-bit block through memory-mapped registers
and encrypts in 11 core cycles (an initial AddRoundKey and ten rounds, one per cycle). This
module gives that interface a register map (32-bit registers, byte offsets, words big-endian:
word 0 holds bytes 0..3 of the key or block), a behavioural model :class:`AesCore` the
simulated fabric puts behind a region's window (design name ``"aes"``), and the driver
:class:`AesDriver`, an :class:`EncryptionService` that reaches the core through an MMIO window
only.

=====  ==========  ====  ==================================================================
off    name        dir   meaning
=====  ==========  ====  ==================================================================
0x00   CONTROL     R/W   bit 0 START (write 1 to start a block), bit 1 DECRYPT (0 = encrypt)
0x04   STATUS      R     bit 0 BUSY, bit 1 DONE (RESULT0..3 hold the last block's result)
0x08   LATENCY     R     core cycles per block: 11
0x0C   ID          R     core identifier ``ID_AES`` (0x41455331, "AES1")
0x10   KEY0        R/W   key bytes 0..3 (reads back what was written)
0x14   KEY1        R/W   key bytes 4..7
0x18   KEY2        R/W   key bytes 8..11
0x1C   KEY3        R/W   key bytes 12..15
0x20   DATA0       R/W   input block bytes 0..3
0x24   DATA1       R/W   input block bytes 4..7
0x28   DATA2       R/W   input block bytes 8..11
0x2C   DATA3       R/W   input block bytes 12..15
0x30   RESULT0     R     output block bytes 0..3
0x34   RESULT1     R     output block bytes 4..7
0x38   RESULT2     R     output block bytes 8..11
0x3C   RESULT3     R     output block bytes 12..15
=====  ==========  ====  ==================================================================

CONTROL and STATUS use the bits of the DES/TDES cores (:mod:`juggle.services.crypto.registers`),
so the block protocol is theirs: write DATA0..3, write CONTROL with START and the operation,
poll STATUS until DONE, read RESULT0..3. START while BUSY is ignored; unmapped offsets (none
inside the 0x40-byte window) read 0 and ignore writes. The key registers are readable for the
same reason as the TDES core's: the runtime's context save reads a consumer's key back (see
:mod:`juggle.services.crypto.registers` on who may read them on a real board).

Timing of the model: a START written at cycle ``t`` latches DATA0..3 and KEY0..3 and computes
the block at once; STATUS reads BUSY until cycle ``t + 11`` and DONE after, and only then do
RESULT0..3 show the new block. Decryption also takes 11 cycles: the model assumes the core
derives the last round key (where on-the-fly decryption starts) when the key is written, and
does not model the time of that step. juggle's Verilog of the core
(``services/hdl/aes/aes_core.v``) takes the 10 cycles after a KEY write for it: a decrypting
START at least 10 cycles after the last KEY write is timed as here, and the driver always
leaves that much (DATA0..3 and CONTROL are five bus writes, 10 cycles at least on every
board profile); a decrypting START sooner finishes ``10 - gap`` cycles later than this model
says (see that file's header). Encryption is never delayed.

Context operations of the driver (one core time-multiplexed among consumers), as the TDES
driver's (:mod:`juggle.services.crypto.driver`): between calls a consumer's context is its key
and whether one is loaded. Layout, big-endian, version 1, 20 bytes::

    byte 0        version, 1
    byte 1        key length in bytes, 16
    byte 2        flags: bit 0 set = a key is loaded (no other bit may be set)
    byte 3        reserved, 0
    bytes 4..19   KEY0..KEY3 (the key bytes; all zero without a key)

``restore_context(b"")`` is the power-on state. Every restore also zeroes DATA0..3 and CONTROL.

Resources (:attr:`AesCore.resources`, what install and the fabric use): *modeled*, Yosys
``synth_xilinx -family xc2vp`` of juggle's Verilog of the core (``services/hdl/aes``; the
figures ``juggle module build`` writes into the example module's ``resources.json``), the
slices a packing estimate (a floor): 1,884 slices (3,768 4-input LUTs), 716 flip-flops, 12
block RAMs (20 S-box look-ups a cycle for the state and the round keys plus 4 for the
background key schedule, two per dual-ported RAM, each RAM holding the S-box and its
inverse), no multiplier. The ThumbPod papers give cycle counts, not this core's area, so there
is no published figure beside them.
"""

from __future__ import annotations

import struct
from typing import ClassVar

from juggle.errors import (
    CoreTimeoutError,
    KeyNotLoadedError,
)
from juggle.fabric.sim.model import RegisterModel
from juggle.services.crypto import registers as _des_regs
from juggle.services.crypto.aes import (
    AES128,
    AES_BLOCK_SIZE,
    AES_KEY_SIZE,
    aes_block_view,
    check_aes_key,
)
from juggle.services.crypto.driver import CONTEXT_VERSION, KeyedDriver
from juggle.services.crypto.interface import Buffer

__all__ = [
    "AES_CORE_CYCLES",
    "CONTEXT_VERSION",
    "CONTROL",
    "CTRL_DECRYPT",
    "CTRL_START",
    "DATA",
    "ID",
    "ID_AES",
    "KEY",
    "LATENCY",
    "RESULT",
    "STATUS",
    "STATUS_BUSY",
    "STATUS_DONE",
    "WINDOW_SIZE",
    "AesCore",
    "AesDriver",
]

# -- register map -----------------------------------------------------------------------------

CONTROL = 0x00
STATUS = 0x04
LATENCY = 0x08
ID = 0x0C
#: KEY0..KEY3: key bytes 0..3, 4..7, 8..11, 12..15
KEY = (0x10, 0x14, 0x18, 0x1C)
#: DATA0..DATA3: input block bytes 0..3, ..., 12..15
DATA = (0x20, 0x24, 0x28, 0x2C)
#: RESULT0..RESULT3: output block bytes 0..3, ..., 12..15
RESULT = (0x30, 0x34, 0x38, 0x3C)
WINDOW_SIZE = 0x40

CTRL_START = _des_regs.CTRL_START
CTRL_DECRYPT = _des_regs.CTRL_DECRYPT
STATUS_BUSY = _des_regs.STATUS_BUSY
STATUS_DONE = _des_regs.STATUS_DONE

ID_AES = 0x41455331  # "AES1"

#: ThumbPod's core: one initial AddRoundKey and ten rounds, one per core cycle.
AES_CORE_CYCLES = 11


_Words = tuple[int, int, int, int]
_ZERO: _Words = (0, 0, 0, 0)
_M32 = 0xFFFFFFFF


# -- the core model ---------------------------------------------------------------------------

#: model context: control, data 0..3, result 0..3, key 0..3, "a result exists"
_CORE_CONTEXT = struct.Struct(">13I?")


class AesCore(RegisterModel):
    """ThumbPod's AES-128 core: KEY0..3, DATA0..3, RESULT0..3, 11 core cycles per block.

    Register map and timing in the module docstring; the result is real AES-128 from the
    pure-Python engine, so a driver on the simulated fabric gets the bytes a board would give.
    ``resources`` come from synthesis of the core's Verilog (module docstring).
    """

    design: ClassVar[str] = "aes"
    window_size: ClassVar[int] = WINDOW_SIZE
    latency: ClassVar[int] = AES_CORE_CYCLES
    core_id: ClassVar[int] = ID_AES
    resources: ClassVar[dict[str, int]] = {
        "slices": 1884,
        "flipflops": 716,
        "mult18": 0,
        "ram16": 12,
    }
    result_offsets: ClassVar[tuple[int, ...]] = RESULT

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Power-on state: registers zero, not busy, no result."""
        self._control = 0
        self._data = [0, 0, 0, 0]
        self._keys = [0, 0, 0, 0]
        self._result: _Words = _ZERO
        self._pending: _Words = _ZERO
        self._ready_at = 0
        self._started = False
        self._cipher: AES128 | None = None
        self._has_result = False
        #: blocks started since power-on (statistics only)
        self.blocks = 0

    def _settle(self, now: int) -> bool:
        """Finish the running block if its latency has elapsed; True while still busy."""
        if self._started and now >= self._ready_at:
            self._result = self._pending
            self._started = False
        return self._started

    def read(self, offset: int, now: int) -> int:
        """Register value at cycle ``now`` (see the module's register map)."""
        busy = self._settle(now)
        if offset == STATUS:
            return STATUS_BUSY if busy else (STATUS_DONE if self._has_result else 0)
        if RESULT[0] <= offset <= RESULT[3]:
            return self._result[(offset - RESULT[0]) // 4]
        if DATA[0] <= offset <= DATA[3]:
            return self._data[(offset - DATA[0]) // 4]
        if KEY[0] <= offset <= KEY[3]:
            return self._keys[(offset - KEY[0]) // 4]
        if offset == CONTROL:
            return self._control
        if offset == LATENCY:
            return self.latency
        if offset == ID:
            return self.core_id
        return 0

    def write(self, offset: int, value: int, now: int) -> None:
        """Write a register at cycle ``now``; a START latches the block and the key."""
        value &= _M32
        busy = self._settle(now)
        if DATA[0] <= offset <= DATA[3]:
            self._data[(offset - DATA[0]) // 4] = value
        elif KEY[0] <= offset <= KEY[3]:
            self._keys[(offset - KEY[0]) // 4] = value
            self._cipher = None
        elif offset == CONTROL:
            self._control = value
            if value & CTRL_START and not busy:
                self._start(bool(value & CTRL_DECRYPT), now)

    def _start(self, decrypt: bool, now: int) -> None:
        cipher = self._cipher
        if cipher is None:
            key = b"".join(w.to_bytes(4, "big") for w in self._keys)
            cipher = self._cipher = AES128(key)
        d0, d1, d2, d3 = self._data
        block = (d0, d1, d2, d3)
        self._pending = cipher.decrypt_words(block) if decrypt else cipher.encrypt_words(block)
        self._ready_at = now + self.latency
        self._started = True
        self._has_result = True
        self.blocks += 1

    def save_context(self) -> bytes:
        """Control, data, result and key registers (a running block is completed first)."""
        if self._started:
            self._result, self._started = self._pending, False
        return _CORE_CONTEXT.pack(
            self._control, *self._data, *self._result, *self._keys, self._has_result
        )

    def restore_context(self, context: bytes) -> None:
        """Load registers saved by :meth:`save_context`."""
        fields = _CORE_CONTEXT.unpack(context)
        self.reset()
        self._control = fields[0]
        self._data = list(fields[1:5])
        r0, r1, r2, r3 = fields[5:9]
        self._result = (r0, r1, r2, r3)
        self._keys = list(fields[9:13])
        self._has_result = bool(fields[13])

    def __repr__(self) -> str:
        state = "busy" if self._started else "idle"
        return f"<{type(self).__name__} {state}, {self.blocks} blocks>"


# -- the driver -------------------------------------------------------------------------------

_BLOCK = struct.Struct(">4I")


class AesDriver(KeyedDriver):
    """Driver of the AES-128 core: an :class:`EncryptionService` over an MMIO window.

    Per 16-byte block it writes DATA0..3, writes CONTROL (operation + START), polls STATUS
    until DONE and reads RESULT0..3; the key goes into KEY0..3 once, at ``load_key``. A lock
    keeps concurrent callers from interleaving their register sequences. Errors as
    :class:`~juggle.services.crypto.aes.SoftwareAES`, plus
    :class:`~juggle.errors.CoreTimeoutError` when the core never reports DONE (after
    ``max_polls`` status reads) and whatever the window raises. Context operations
    (:meth:`save_context`, :meth:`restore_context`) as documented in the module docstring:
    the key registers, byte 1 the key size (16).
    """

    algorithm = "aes"
    key_offsets = KEY
    cleared_offsets = (*DATA, CONTROL)
    key_tag = AES_KEY_SIZE

    @classmethod
    def _key_text(cls, tag: int) -> str:
        return f"a {tag}-byte key"

    def load_key(self, key: bytes) -> None:
        """Write KEY0..KEY3. Raises :class:`~juggle.errors.KeyLengthError`.

        A register write that fails part-way (the window raises) leaves no key loaded.
        """
        words = list(_BLOCK.unpack(check_aes_key(key)))  # validates before touching the core
        with self._lock:
            self._write_key(words, loaded=True)

    # -- blocks ----------------------------------------------------------------------------

    def encrypt(self, buf: Buffer, size: int) -> int:
        """Encrypt ``buf[:size]`` in place on the core; errors as the class docstring says."""
        return self._run(buf, size, CTRL_START)

    def decrypt(self, buf: Buffer, size: int) -> int:
        """Decrypt ``buf[:size]`` in place on the core; errors as :meth:`encrypt`."""
        return self._run(buf, size, CTRL_START | CTRL_DECRYPT)

    def _run(self, buf: Buffer, size: int, control: int) -> int:
        view = aes_block_view(buf, size)
        src = view if view.c_contiguous else view[:size].tobytes()  # a strided view: a copy
        read, write = self._mmio.read32, self._mmio.write32
        unpack, pack = _BLOCK.unpack_from, _BLOCK.pack_into
        max_polls, done = self._max_polls, STATUS_DONE
        d0, d1, d2, d3 = DATA
        r0, r1, r2, r3 = RESULT
        out = bytearray(size)  # written back only when every block succeeded
        with self._lock:  # the key check too: a context restore may be under way
            if not self._key_loaded:
                raise KeyNotLoadedError(
                    f"{type(self).__name__}: load_key() must be called before encrypt/decrypt"
                )
            for offset in range(0, size, AES_BLOCK_SIZE):
                w0, w1, w2, w3 = unpack(src, offset)
                write(d0, w0)
                write(d1, w1)
                write(d2, w2)
                write(d3, w3)
                write(CONTROL, control)
                polls = 0
                while not read(STATUS) & done:
                    polls += 1
                    if polls >= max_polls:
                        raise CoreTimeoutError(
                            f"{type(self).__name__}: core not DONE after {polls} status reads "
                            f"(block at offset {offset})"
                        )
                pack(out, offset, read(r0), read(r1), read(r2), read(r3))
        view[:size] = out
        return size
