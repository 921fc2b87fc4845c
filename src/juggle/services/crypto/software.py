"""The software tier of the encryption service: pure-Python DES and Triple-DES.

Each class is an :class:`EncryptionService` on top of :mod:`juggle.services.crypto.des`; it keeps
the key schedule built by ``load_key`` and encrypts buffers in place, one 8-byte block at a time.
"""

from __future__ import annotations

from typing import Protocol

from juggle.errors import KeyNotLoadedError
from juggle.services.crypto.des import DES, TripleDES
from juggle.services.crypto.interface import Buffer, EncryptionService, block_view

__all__ = ["SoftwareDES", "SoftwareTDES"]


class BlockCipher(Protocol):
    """A key-scheduled block cipher working in place on a byte view."""

    def encrypt_into(self, view: memoryview, size: int) -> None: ...

    def decrypt_into(self, view: memoryview, size: int) -> None: ...


class _SoftwareCipher(EncryptionService):
    """Shared body: a cipher object built from the key, or ``None`` before ``load_key``;
    ``_view`` checks the arguments (and the block size)."""

    algorithm = ""
    _view = staticmethod(block_view)

    def __init__(self) -> None:
        self._cipher: BlockCipher | None = None

    def _make(self, key: bytes) -> BlockCipher:
        raise NotImplementedError

    def load_key(self, key: bytes) -> None:
        """Build the key schedule. Raises :class:`~juggle.errors.KeyLengthError`."""
        self._cipher = self._make(key)

    def _ready(self) -> BlockCipher:
        cipher = self._cipher
        if cipher is None:
            raise KeyNotLoadedError(
                f"{type(self).__name__}: load_key() must be called before encrypt/decrypt"
            )
        return cipher

    def encrypt(self, buf: Buffer, size: int) -> int:
        """Encrypt ``buf[:size]`` in place; errors as :meth:`EncryptionService.encrypt`."""
        view = self._view(buf, size)
        self._ready().encrypt_into(view, size)
        return size

    def decrypt(self, buf: Buffer, size: int) -> int:
        """Decrypt ``buf[:size]`` in place; errors as :meth:`EncryptionService.decrypt`."""
        view = self._view(buf, size)
        self._ready().decrypt_into(view, size)
        return size

    def __repr__(self) -> str:
        state = "key loaded" if self._cipher is not None else "no key"
        return f"<{type(self).__name__} {state}>"


class SoftwareDES(_SoftwareCipher):
    """DES in pure Python (8-byte key)."""

    algorithm = "des"

    def _make(self, key: bytes) -> DES:
        return DES(key)


class SoftwareTDES(_SoftwareCipher):
    """Triple-DES EDE in pure Python (16-byte 2-key or 24-byte 3-key)."""

    algorithm = "tdes"

    def _make(self, key: bytes) -> DES:
        return TripleDES(key)
