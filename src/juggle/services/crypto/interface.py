"""The ``crypto.EncryptionService`` contract (Juggle Listing 5) and its argument checks.

A block cipher service works in place: ``encrypt(buf, size)`` replaces the first ``size`` bytes
of ``buf`` with their ciphertext (ECB over the cipher's blocks: 8 bytes for DES/TDES, 16 for
AES) and returns ``size``; ``decrypt`` is the inverse. The key is state the service keeps
between calls, so ``load_key`` is marked :func:`~juggle.runtime.interfaces.state_setting` and a
proxy replays it when it switches tiers.
"""

from __future__ import annotations

import operator
from typing import SupportsIndex

from juggle.errors import BlockSizeError, BufferSizeError, ServiceArgumentError
from juggle.runtime.interfaces import state_setting

__all__ = ["BLOCK_SIZE", "Buffer", "EncryptionService", "block_view"]

#: DES and TDES work on 8-byte blocks.
BLOCK_SIZE = 8

#: What ``encrypt``/``decrypt`` accept: a writable byte buffer.
Buffer = bytearray | memoryview


class EncryptionService:
    """A symmetric block cipher: load a key, then encrypt/decrypt buffers in place.

    Every tier (software, native, hardware) implements these three methods with the same
    signature and gives the same bytes for the same key and input.
    """

    @state_setting
    def load_key(self, key: bytes) -> None:
        """Set the key for later calls.

        Raises :class:`~juggle.errors.KeyLengthError` if the key has the wrong length
        (DES: 8 bytes; TDES: 16 for 2-key or 24 for 3-key; AES-128: 16).
        """
        raise NotImplementedError

    def encrypt(self, buf: Buffer, size: int) -> int:
        """Encrypt the first ``size`` bytes of ``buf`` in place (ECB) and return ``size``.

        Raises :class:`~juggle.errors.BlockSizeError` if ``size`` is not a multiple of 8,
        :class:`~juggle.errors.BufferSizeError` if it is negative or exceeds ``buf``,
        :class:`~juggle.errors.ServiceArgumentError` if ``buf`` is not a writable byte buffer,
        :class:`~juggle.errors.KeyNotLoadedError` before ``load_key``.
        """
        raise NotImplementedError

    def decrypt(self, buf: Buffer, size: int) -> int:
        """Decrypt the first ``size`` bytes of ``buf`` in place (ECB) and return ``size``.

        Raises the same errors as :meth:`encrypt`.
        """
        raise NotImplementedError


def _as_int(size: object) -> int:
    """``size`` as an int; :class:`ServiceArgumentError` for a bool or a non-integer."""
    if isinstance(size, bool) or not isinstance(size, SupportsIndex):
        raise ServiceArgumentError(
            f'"size" must be an int, got {type(size).__name__} {size!r}', argument="size"
        )
    return operator.index(size)


def block_view(buf: Buffer, size: int) -> memoryview:
    """A writable 1-D byte view of ``buf`` after checking ``size`` against it.

    Raises :class:`ServiceArgumentError` if ``buf`` is not a writable, contiguous buffer or
    ``size`` is not an int, :class:`BufferSizeError` if ``size`` is negative or larger than the
    buffer, :class:`BlockSizeError` if ``size`` is not a multiple of 8.
    """
    if type(size) is not int:
        size = _as_int(size)
    try:
        view = memoryview(buf)
    except TypeError as exc:
        raise ServiceArgumentError(
            f'"buf" must be a writable bytes-like object, got {type(buf).__name__}', argument="buf"
        ) from exc
    if view.readonly:
        raise ServiceArgumentError(
            f'"buf" must be writable, got a read-only {type(buf).__name__}', argument="buf"
        )
    if view.ndim != 1 or view.format != "B":
        try:
            view = view.cast("B")
        except TypeError as exc:
            raise ServiceArgumentError(
                f'"buf" must be a contiguous buffer, got {type(buf).__name__}', argument="buf"
            ) from exc
    if size < 0 or size > view.nbytes:
        raise BufferSizeError(
            f'"size" must be between 0 and the buffer length {view.nbytes}, got {size}',
            argument="size",
            value=size,
        )
    if size % BLOCK_SIZE:
        raise BlockSizeError(
            f'"size" must be a multiple of the {BLOCK_SIZE}-byte block, got {size}',
            argument="size",
            value=size,
        )
    return view
