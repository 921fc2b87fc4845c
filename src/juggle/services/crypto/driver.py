"""The hardware tier of the encryption service: drivers for the DES and TDES cores.

A driver is an :class:`EncryptionService` that talks to a core through an MMIO window only, as
the paper's JNI driver does (section 6.2): per 8-byte block it writes the block into two data
registers, sets the control register (operation + START), busy-waits on the status register
until DONE, and reads the two result registers. The same driver runs on the simulated fabric and
on a board. A lock keeps concurrent callers from interleaving their register sequences.
Register map: :mod:`juggle.services.crypto.registers`.

Context operations (a core time-multiplexed among consumers, Ker-ONE 4.3): ``save_context()``
returns one consumer's context as bytes and ``restore_context(data)`` puts a saved context back,
both with the driver's own register accesses and its own fields only, so they work on every
backend (simulated window, UIO mmap, ...). A driver completes every block inside one call, so
between calls the context is the key and whether one is loaded. Layout, big-endian, version 1
(``n`` = :attr:`key_count`: 1 for DES, 3 for TDES; DES 12 bytes, TDES 28 bytes)::

    byte 0        version, 1
    byte 1        n, the number of 8-byte keys
    byte 2        flags: bit 0 set = a key is loaded (no other bit may be set)
    byte 3        reserved, 0
    bytes 4..     KEY1_HI, KEY1_LO, ..., KEYn_HI, KEYn_LO: 2n unsigned 32-bit words
                  (so bytes 4.. are the key bytes K1 || ... || Kn; all zero without a key)

A context saved without a key carries zero words, whatever the registers hold, so it never
carries another consumer's key. ``restore_context(b"")`` is the power-on state: key registers
zero, no key loaded. Every restore also zeroes DATA_HI, DATA_LO and CONTROL, so no input block
of the previous consumer stays in the core; RESULT_HI/RESULT_LO are read-only and keep the last
block's output until the next block overwrites them, before the driver ever reads them again.
"""

from __future__ import annotations

import functools
import struct
import threading
from typing import Any, ClassVar

from juggle.errors import (
    CoreTimeoutError,
    KeyNotLoadedError,
    ServiceArgumentError,
    ServiceStateError,
)
from juggle.fabric.mmio import MMIO
from juggle.services.crypto import registers as r
from juggle.services.crypto.des import check_des_key, tdes_keys
from juggle.services.crypto.interface import Buffer, EncryptionService, block_view

__all__ = ["CONTEXT_VERSION", "DEFAULT_MAX_POLLS", "DesDriver", "KeyedDriver", "TdesDriver"]

#: Status reads per block before a driver gives up with :class:`CoreTimeoutError`.
DEFAULT_MAX_POLLS = 100_000

#: Version byte of the contexts ``save_context`` produces (layout in the module docstring).
CONTEXT_VERSION = 1
_FLAG_KEY_LOADED = 0x01

_HALVES = struct.Struct(">II")


@functools.cache
def _context_layout(words: int) -> struct.Struct:
    """A context holding ``words`` key words: version, key tag, flags, reserved, the words."""
    return struct.Struct(f">BBBB{words}I")


class KeyedDriver(EncryptionService):
    """What the drivers of the keyed cores share: the MMIO window, a lock over register
    sequences, whether a key is loaded, and the context operations, whose context is the key
    registers (layout in the module docstring; byte 1 is :attr:`key_tag`).

    Subclasses name their registers: :attr:`key_offsets` in key-byte order (two words per
    8-byte DES key, four for AES-128) and :attr:`cleared_offsets`, the input block and
    CONTROL, which every restore zeroes.
    """

    algorithm = ""
    key_offsets: ClassVar[tuple[int, ...]] = ()
    cleared_offsets: ClassVar[tuple[int, ...]] = ()
    #: byte 1 of a context: what key the core holds (DES/TDES: 8-byte keys; AES: key bytes)
    key_tag: ClassVar[int] = 0

    def __init__(self, mmio: MMIO, *, max_polls: int = DEFAULT_MAX_POLLS) -> None:
        self._mmio = mmio
        self._max_polls = max_polls
        self._lock = threading.Lock()
        self._key_loaded = False
        self._context = _context_layout(len(self.key_offsets))

    @classmethod
    def _key_text(cls, tag: int) -> str:
        """How messages name the key a context's tag says (``"3 keys"``)."""
        return f"{tag} keys"

    def _write_key(self, words: list[int], *, loaded: bool) -> None:
        """Write the key registers; the caller holds the lock and passed validated words."""
        write = self._mmio.write32
        self._key_loaded = False  # a half-written key is no key
        for offset, word in zip(self.key_offsets, words, strict=True):
            write(offset, word)
        self._key_loaded = loaded

    # -- context operations ----------------------------------------------------------------

    @property
    def context_size(self) -> int:
        """Length in bytes of the contexts :meth:`save_context` returns (DES 12, TDES 28,
        AES 20)."""
        return self._context.size

    def save_context(self) -> bytes:
        """This consumer's context: the key read back from the key registers and whether one
        is loaded. Without a loaded key the words are zero (the registers are not read).
        Raises what the window raises (e.g. a closed or decoupled region).
        """
        words = [0] * len(self.key_offsets)
        with self._lock:
            loaded = self._key_loaded
            if loaded:
                read = self._mmio.read32
                words = [read(offset) for offset in self.key_offsets]
        flags = _FLAG_KEY_LOADED if loaded else 0
        return self._context.pack(CONTEXT_VERSION, self.key_tag, flags, 0, *words)

    def restore_context(self, data: bytes) -> None:
        """Put a context from :meth:`save_context` back into the core and the driver.

        ``b""`` restores the power-on state (key registers zero, no key loaded). The key goes
        in through the key registers; the input block and CONTROL are zeroed. Raises
        :class:`~juggle.errors.ServiceArgumentError` if ``data`` is not bytes and
        :class:`~juggle.errors.ServiceStateError` naming the length, version, key or flags of
        a context this driver did not produce (nothing is changed then); window errors as
        :meth:`load_key` (the driver is then left with no key loaded).
        """
        loaded, words = self._parse_context(data)
        write = self._mmio.write32
        with self._lock:
            self._write_key(words, loaded=False)
            for offset in self.cleared_offsets:
                write(offset, 0)
            self._key_loaded = loaded

    def _parse_context(self, data: object) -> tuple[bool, list[int]]:
        """(key loaded, key words) of ``data``; raises before anything is touched."""
        name = type(self).__name__
        if not isinstance(data, bytes | bytearray):
            raise ServiceArgumentError(
                f'{name}.restore_context: "data" must be bytes, got {type(data).__name__}',
                method=f"{name}.restore_context",
                argument="data",
            )
        if not data:
            return False, [0] * len(self.key_offsets)
        mine = self._key_text(self.key_tag)
        if len(data) != self._context.size:
            raise ServiceStateError(
                f"{name}.restore_context: a context is {self._context.size} bytes "
                f"(version {CONTEXT_VERSION}, {mine}) or empty, got {len(data)} bytes",
                method="restore_context",
            )
        version, tag, flags, reserved, *words = self._context.unpack(data)
        if version != CONTEXT_VERSION or tag != self.key_tag:
            raise ServiceStateError(
                f"{name}.restore_context: context version {version} with "
                f"{self._key_text(tag)}, expected version {CONTEXT_VERSION} with {mine}",
                method="restore_context",
            )
        if flags & ~_FLAG_KEY_LOADED or reserved or (not flags and any(words)):
            raise ServiceStateError(
                f"{name}.restore_context: malformed context (flags {flags:#04x}, reserved "
                f"{reserved:#04x}, key words {'set' if any(words) else 'zero'})",
                method="restore_context",
            )
        return bool(flags), words

    def __repr__(self) -> str:
        state = "key loaded" if self._key_loaded else "no key"
        return f"<{type(self).__name__} on {self._mmio!r}, {state}>"


def _des_key_registers(key_count: int) -> tuple[int, ...]:
    """KEY1_HI, KEY1_LO, ..., KEYn_HI, KEYn_LO."""
    return tuple(off for i in range(key_count) for off in (r.KEY_HI[i], r.KEY_LO[i]))


class _CipherDriver(KeyedDriver):
    """Shared block loop; subclasses split the key into the 8-byte keys the core takes."""

    #: 8-byte keys the core holds (KEY1..KEYn); fixes the context's length
    key_count = 1
    cleared_offsets = (r.DATA_HI, r.DATA_LO, r.CONTROL)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.key_offsets = _des_key_registers(cls.key_count)
        cls.key_tag = cls.key_count

    def _split_key(self, key: bytes) -> tuple[bytes, ...]:
        raise NotImplementedError

    def load_key(self, key: bytes) -> None:
        """Write the key registers. Raises :class:`~juggle.errors.KeyLengthError`.

        A register write that fails part-way (the window raises) leaves no key loaded.
        """
        keys = self._split_key(key)  # validates before touching the core
        words = [word for part in keys for word in _HALVES.unpack(part)]
        with self._lock:
            self._write_key(words, loaded=True)

    def encrypt(self, buf: Buffer, size: int) -> int:
        """Encrypt ``buf[:size]`` in place on the core; errors as ``EncryptionService.encrypt``.

        Also raises :class:`~juggle.errors.CoreTimeoutError` if the core never reports DONE.
        """
        return self._run(buf, size, r.CTRL_START)

    def decrypt(self, buf: Buffer, size: int) -> int:
        """Decrypt ``buf[:size]`` in place on the core; errors as :meth:`encrypt`."""
        return self._run(buf, size, r.CTRL_START | r.CTRL_DECRYPT)

    def _run(self, buf: Buffer, size: int, control: int) -> int:
        view = block_view(buf, size)
        src = view if view.c_contiguous else view[:size].tobytes()  # a strided view: a copy
        read, write = self._mmio.read32, self._mmio.write32
        unpack, pack = _HALVES.unpack_from, _HALVES.pack_into
        max_polls, done = self._max_polls, r.STATUS_DONE
        out = bytearray(size)  # written back only when every block succeeded
        with self._lock:  # the key check too: a context restore may be under way
            if not self._key_loaded:
                raise KeyNotLoadedError(
                    f"{type(self).__name__}: load_key() must be called before encrypt/decrypt"
                )
            for offset in range(0, size, 8):
                hi, lo = unpack(src, offset)
                write(r.DATA_HI, hi)
                write(r.DATA_LO, lo)
                write(r.CONTROL, control)
                polls = 0
                while not read(r.STATUS) & done:
                    polls += 1
                    if polls >= max_polls:
                        raise CoreTimeoutError(
                            f"{type(self).__name__}: core not DONE after {polls} status reads "
                            f"(block at offset {offset})"
                        )
                pack(out, offset, read(r.RESULT_HI), read(r.RESULT_LO))
        view[:size] = out
        return size


class DesDriver(_CipherDriver):
    """Driver of the DES core (8-byte key in KEY1)."""

    algorithm = "des"
    key_count = 1

    def _split_key(self, key: bytes) -> tuple[bytes, ...]:
        return (check_des_key(key),)


class TdesDriver(_CipherDriver):
    """Driver of the Triple-DES core (KEY1..KEY3; a 16-byte 2-key key writes K1 into KEY3)."""

    algorithm = "tdes"
    key_count = 3

    def _split_key(self, key: bytes) -> tuple[bytes, ...]:
        return tdes_keys(key)
