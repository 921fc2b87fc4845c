"""The native tier of the encryption service: DES and Triple-DES from pycryptodome (C code).

``load_key`` builds the ECB cipher object once and caches its bound ``encrypt``/``decrypt``;
a call then costs one argument check and one C call. (Measured with pycryptodome's ctypes
backend, handing it bytes and copying the result back is cheaper than its ``output=`` path.)

pycryptodome refuses Triple-DES keys that degenerate to single DES (K1 = K2, or K2 = K3,
comparing without parity bits). The software and hardware tiers accept them, so this tier does
too and computes the equivalent single DES: K1 = K2 gives E(K3), K2 = K3 gives E(K1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from Crypto.Cipher import DES as _PyDES
from Crypto.Cipher import DES3 as _PyDES3

from juggle.errors import KeyNotLoadedError
from juggle.services.crypto.des import check_des_key, tdes_keys
from juggle.services.crypto.interface import Buffer, EncryptionService, block_view

__all__ = ["NativeDES", "NativeTDES"]

_Op = Callable[..., Any]


def _same_ignoring_parity(a: bytes, b: bytes) -> bool:
    """DES ignores the low bit of every key byte; compare keys the way the cipher sees them."""
    return all((x ^ y) & 0xFE == 0 for x, y in zip(a, b, strict=True))


def _fast(op: _Op | None, buf: object, size: object, mask: int) -> bool:
    """True for the common call: key loaded, a bytearray, an int size in range and aligned
    (``mask``: the block size less one)."""
    return (
        op is not None
        and type(buf) is bytearray
        and type(size) is int
        and 0 <= size <= len(buf)
        and not size & mask
    )


class _NativeCipher(EncryptionService):
    """Shared body of the pycryptodome ciphers: cached bound cipher operations, ``None``
    before ``load_key``; ``_mask`` is the block size less one, ``_view`` the argument check."""

    algorithm = ""
    _mask = 7
    _view = staticmethod(block_view)

    def __init__(self) -> None:
        self._encrypt: _Op | None = None
        self._decrypt: _Op | None = None

    def _make(self, key: bytes) -> Any:
        raise NotImplementedError

    def load_key(self, key: bytes) -> None:
        """Build and cache the cipher. Raises :class:`~juggle.errors.KeyLengthError`."""
        cipher = self._make(key)
        self._encrypt, self._decrypt = cipher.encrypt, cipher.decrypt

    def _not_loaded(self) -> KeyNotLoadedError:
        return KeyNotLoadedError(
            f"{type(self).__name__}: load_key() must be called before encrypt/decrypt"
        )

    def encrypt(self, buf: Buffer, size: int) -> int:
        """Encrypt ``buf[:size]`` in place; errors as :meth:`EncryptionService.encrypt`."""
        op = self._encrypt
        if _fast(
            op, buf, size, self._mask
        ):  # a bytearray and a valid size: skip the general checks
            assert op is not None and isinstance(buf, bytearray)
            buf[:size] = op(bytes(buf) if size == len(buf) else bytes(buf[:size]))
            return size
        return self._slow(buf, size, op)

    def decrypt(self, buf: Buffer, size: int) -> int:
        """Decrypt ``buf[:size]`` in place; errors as :meth:`EncryptionService.decrypt`."""
        op = self._decrypt
        if _fast(
            op, buf, size, self._mask
        ):  # a bytearray and a valid size: skip the general checks
            assert op is not None and isinstance(buf, bytearray)
            buf[:size] = op(bytes(buf) if size == len(buf) else bytes(buf[:size]))
            return size
        return self._slow(buf, size, op)

    def _slow(self, buf: Buffer, size: int, op: _Op | None) -> int:
        """Any buffer: full checks, then copy in, one C call, copy back."""
        view = self._view(buf, size)
        if op is None:
            raise self._not_loaded()
        if size:
            view[:size] = op(view[:size].tobytes())
        return size

    def __repr__(self) -> str:
        state = "key loaded" if self._encrypt is not None else "no key"
        return f"<{type(self).__name__} {state}>"


class NativeDES(_NativeCipher):
    """DES through pycryptodome (8-byte key)."""

    algorithm = "des"

    def _make(self, key: bytes) -> Any:
        return _PyDES.new(check_des_key(key), _PyDES.MODE_ECB)


class NativeTDES(_NativeCipher):
    """Triple-DES EDE through pycryptodome (16-byte 2-key or 24-byte 3-key)."""

    algorithm = "tdes"

    def _make(self, key: bytes) -> Any:
        k1, k2, k3 = tdes_keys(key)
        if _same_ignoring_parity(k1, k2):
            return _PyDES.new(k3, _PyDES.MODE_ECB)
        if _same_ignoring_parity(k2, k3):
            return _PyDES.new(k1, _PyDES.MODE_ECB)
        return _PyDES3.new(k1 + k2 + k3, _PyDES3.MODE_ECB)
