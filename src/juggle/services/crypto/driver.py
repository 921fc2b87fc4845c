"""The hardware tier of the encryption service: drivers for the DES and TDES cores.

A driver is an :class:`EncryptionService` that talks to a core through an MMIO window only, as
the paper's JNI driver does (section 6.2): per 8-byte block it writes the block into two data
registers, sets the control register (operation + START), busy-waits on the status register
until DONE, and reads the two result registers. The same driver runs on the simulated fabric and
on a board. A lock keeps concurrent callers from interleaving their register sequences.
Register map: :mod:`juggle.services.crypto.registers`.
"""

from __future__ import annotations

import struct
import threading

from juggle.errors import CoreTimeoutError, KeyNotLoadedError
from juggle.fabric.mmio import MMIO
from juggle.services.crypto import registers as r
from juggle.services.crypto.des import check_des_key, tdes_keys
from juggle.services.crypto.interface import Buffer, EncryptionService, block_view

__all__ = ["DEFAULT_MAX_POLLS", "DesDriver", "TdesDriver"]

#: Status reads per block before a driver gives up with :class:`CoreTimeoutError`.
DEFAULT_MAX_POLLS = 100_000

_HALVES = struct.Struct(">II")


class _CipherDriver(EncryptionService):
    """Shared block loop; subclasses split the key into the 8-byte keys the core takes."""

    algorithm = ""

    def __init__(self, mmio: MMIO, *, max_polls: int = DEFAULT_MAX_POLLS) -> None:
        self._mmio = mmio
        self._max_polls = max_polls
        self._lock = threading.Lock()
        self._key_loaded = False

    def _split_key(self, key: bytes) -> tuple[bytes, ...]:
        raise NotImplementedError

    def load_key(self, key: bytes) -> None:
        """Write the key registers. Raises :class:`~juggle.errors.KeyLengthError`."""
        keys = self._split_key(key)  # validates before touching the core
        write = self._mmio.write32
        with self._lock:
            for index, part in enumerate(keys):
                hi, lo = _HALVES.unpack(part)
                write(r.KEY_HI[index], hi)
                write(r.KEY_LO[index], lo)
            self._key_loaded = True

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
        if not self._key_loaded:
            raise KeyNotLoadedError(
                f"{type(self).__name__}: load_key() must be called before encrypt/decrypt",
                subject=self,
            )
        read, write = self._mmio.read32, self._mmio.write32
        unpack, pack = _HALVES.unpack_from, _HALVES.pack_into
        max_polls, done = self._max_polls, r.STATUS_DONE
        out = bytearray(size)  # written back only when every block succeeded
        with self._lock:
            for offset in range(0, size, 8):
                hi, lo = unpack(view, offset)
                write(r.DATA_HI, hi)
                write(r.DATA_LO, lo)
                write(r.CONTROL, control)
                polls = 0
                while not read(r.STATUS) & done:
                    polls += 1
                    if polls >= max_polls:
                        raise CoreTimeoutError(
                            f"{type(self).__name__}: core not DONE after {polls} status reads "
                            f"(block at offset {offset})",
                            subject=self._mmio,
                        )
                pack(out, offset, read(r.RESULT_HI), read(r.RESULT_LO))
        view[:size] = out
        return size

    def __repr__(self) -> str:
        state = "key loaded" if self._key_loaded else "no key"
        return f"<{type(self).__name__} on {self._mmio!r}, {state}>"


class DesDriver(_CipherDriver):
    """Driver of the DES core (8-byte key in KEY1)."""

    algorithm = "des"

    def _split_key(self, key: bytes) -> tuple[bytes, ...]:
        return (check_des_key(key),)


class TdesDriver(_CipherDriver):
    """Driver of the Triple-DES core (KEY1..KEY3; a 16-byte 2-key key writes K1 into KEY3)."""

    algorithm = "tdes"

    def _split_key(self, key: bytes) -> tuple[bytes, ...]:
        return tdes_keys(key)
