"""The native tier of the AES service: AES-128 from pycryptodome (C code).

Like :mod:`juggle.services.crypto.native`: ``load_key`` builds the ECB cipher object once and
caches its bound ``encrypt``/``decrypt``; a call then costs one argument check and one C call.
The key is checked by :func:`~juggle.services.crypto.aes.check_aes_key` before pycryptodome
sees it, so this tier refuses AES-192/256 keys (which pycryptodome would take) with the same
:class:`~juggle.errors.KeyLengthError` as the software and hardware tiers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from Crypto.Cipher import AES as _PyAES

from juggle.errors import KeyNotLoadedError
from juggle.services.crypto.aes import AES_BLOCK_SIZE, aes_block_view, check_aes_key
from juggle.services.crypto.interface import Buffer, EncryptionService

__all__ = ["NativeAES"]

_Op = Callable[..., Any]
_BLOCK_MASK = AES_BLOCK_SIZE - 1


def _fast(op: _Op | None, buf: object, size: object) -> bool:
    """True for the common call: key loaded, a bytearray, an int size in range and aligned."""
    return (
        op is not None
        and type(buf) is bytearray
        and type(size) is int
        and 0 <= size <= len(buf)
        and not size & _BLOCK_MASK
    )


class NativeAES(EncryptionService):
    """AES-128 through pycryptodome (16-byte key, ECB over 16-byte blocks, in place).

    Errors as :class:`~juggle.services.crypto.aes.SoftwareAES`.
    """

    algorithm = "aes"

    def __init__(self) -> None:
        self._encrypt: _Op | None = None
        self._decrypt: _Op | None = None

    def load_key(self, key: bytes) -> None:
        """Build and cache the cipher. Raises :class:`~juggle.errors.KeyLengthError`."""
        cipher = _PyAES.new(check_aes_key(key), _PyAES.MODE_ECB)
        self._encrypt, self._decrypt = cipher.encrypt, cipher.decrypt

    def _not_loaded(self) -> KeyNotLoadedError:
        return KeyNotLoadedError(
            f"{type(self).__name__}: load_key() must be called before encrypt/decrypt",
            subject=self,
        )

    def encrypt(self, buf: Buffer, size: int) -> int:
        """Encrypt ``buf[:size]`` in place; errors as ``SoftwareAES.encrypt``."""
        op = self._encrypt
        if _fast(op, buf, size):  # a bytearray and a valid size: skip the general checks
            assert op is not None and isinstance(buf, bytearray)
            buf[:size] = op(bytes(buf) if size == len(buf) else bytes(buf[:size]))
            return size
        return self._slow(buf, size, op)

    def decrypt(self, buf: Buffer, size: int) -> int:
        """Decrypt ``buf[:size]`` in place; errors as :meth:`encrypt`."""
        op = self._decrypt
        if _fast(op, buf, size):  # a bytearray and a valid size: skip the general checks
            assert op is not None and isinstance(buf, bytearray)
            buf[:size] = op(bytes(buf) if size == len(buf) else bytes(buf[:size]))
            return size
        return self._slow(buf, size, op)

    def _slow(self, buf: Buffer, size: int, op: _Op | None) -> int:
        """Any buffer: full checks, then copy in, one C call, copy back."""
        view = aes_block_view(buf, size)
        if op is None:
            raise self._not_loaded()
        if size:
            view[:size] = op(view[:size].tobytes())
        return size

    def __repr__(self) -> str:
        state = "key loaded" if self._encrypt is not None else "no key"
        return f"<{type(self).__name__} {state}>"
