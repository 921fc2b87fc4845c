"""The native tier of the AES service: AES-128 from pycryptodome (C code).

Like :mod:`juggle.services.crypto.native`: ``load_key`` builds the ECB cipher object once and
caches its bound ``encrypt``/``decrypt``; a call then costs one argument check and one C call.
The key is checked by :func:`~juggle.services.crypto.aes.check_aes_key` before pycryptodome
sees it, so this tier refuses AES-192/256 keys (which pycryptodome would take) with the same
:class:`~juggle.errors.KeyLengthError` as the software and hardware tiers.
"""

from __future__ import annotations

from typing import Any

from Crypto.Cipher import AES as _PyAES

from juggle.services.crypto.aes import AES_BLOCK_SIZE, aes_block_view, check_aes_key
from juggle.services.crypto.native import _NativeCipher

__all__ = ["NativeAES"]


class NativeAES(_NativeCipher):
    """AES-128 through pycryptodome (16-byte key, ECB over 16-byte blocks, in place).

    Errors as :class:`~juggle.services.crypto.aes.SoftwareAES`.
    """

    algorithm = "aes"
    _mask = AES_BLOCK_SIZE - 1
    _view = staticmethod(aes_block_view)

    def _make(self, key: bytes) -> Any:
        return _PyAES.new(check_aes_key(key), _PyAES.MODE_ECB)
