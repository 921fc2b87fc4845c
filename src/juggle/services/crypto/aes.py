"""Pure-Python AES-128, written from FIPS-197, and the software tier of the AES service.

AES-128 works on 128-bit blocks with a 128-bit key: an initial AddRoundKey, nine full rounds
(SubBytes, ShiftRows, MixColumns, AddRoundKey) and a final round without MixColumns, with the
eleven round keys of the key expansion (FIPS-197 5.2). ThumbPod's core does one round per
clock, hence its 11-cycle block.

The state is kept as four big-endian 32-bit column words. As FIPS-197 5.2 suggests for 32-bit
processors, SubBytes, ShiftRows and MixColumns of a full round are folded into four 256-entry
tables (``te0``..``te3``: the S-box output times the MixColumns column, rotated by 0, 8, 16, 24
bits), so a round is sixteen look-ups and XORs. Decryption uses the equivalent inverse cipher
(FIPS-197 5.3.5): the same structure with the inverse tables, and round keys 1..9 passed
through InvMixColumns. Every table is computed here from GF(2^8) arithmetic (the S-box as the
multiplicative inverse followed by the affine map), none is typed in.

The service class :class:`SoftwareAES` is an :class:`EncryptionService` like the DES ones
(:mod:`juggle.services.crypto.software`), except that its block is 16 bytes: ``encrypt(buf,
size)`` works in place over ECB blocks and ``size`` must be a multiple of 16.

Key errors are :class:`~juggle.errors.KeyLengthError` (anything but 16 bytes, AES-192/256
keys included); block functions take and return 128-bit integers (big-endian block value).
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Callable
from functools import cache
from typing import SupportsIndex

from juggle.errors import (
    BlockSizeError,
    BufferSizeError,
    KeyLengthError,
    ServiceArgumentError,
)
from juggle.services.crypto.interface import Buffer, block_view
from juggle.services.crypto.software import _SoftwareCipher

__all__ = [
    "AES128",
    "AES_BLOCK_SIZE",
    "AES_KEY_SIZE",
    "AES_ROUNDS",
    "SoftwareAES",
    "aes_block_view",
    "aes_decrypt_block",
    "aes_encrypt_block",
    "aes_key_schedule",
    "check_aes_key",
]

#: AES works on 16-byte blocks.
AES_BLOCK_SIZE = 16
#: AES-128 keys are 16 bytes (the only size this service and ThumbPod's core take).
AES_KEY_SIZE = 16
#: Rounds of AES-128 (Nr); with the initial AddRoundKey, 11 round keys.
AES_ROUNDS = 10

_WORDS = struct.Struct(">4I")
_M128 = (1 << 128) - 1


# -- GF(2^8) and the tables -------------------------------------------------------------------


def _xtime(a: int) -> int:
    """``a`` times x in GF(2^8) modulo x^8 + x^4 + x^3 + x + 1 (FIPS-197 4.2.1)."""
    a <<= 1
    return a ^ 0x11B if a & 0x100 else a


def _gmul(a: int, b: int) -> int:
    """Product of two bytes in GF(2^8) (FIPS-197 4.2)."""
    product = 0
    while b:
        if b & 1:
            product ^= a
        a = _xtime(a)
        b >>= 1
    return product


def _rotl8(b: int, n: int) -> int:
    return ((b << n) | (b >> (8 - n))) & 0xFF


def _ror32(w: int, n: int) -> int:
    return ((w >> n) | (w << (32 - n))) & 0xFFFFFFFF


class _Tables:
    """S-box, inverse S-box and the round tables, computed from the field (FIPS-197 5.1.1)."""

    def __init__(self) -> None:
        # powers of the generator 3 give every non-zero byte: log/antilog tables for inverses
        exp = [0] * 255
        log = [0] * 256
        x = 1
        for i in range(255):
            exp[i] = x
            log[x] = i
            x ^= _xtime(x)  # x * 3
        sbox = [0] * 256
        for a in range(256):
            b = exp[(255 - log[a]) % 255] if a else 0
            sbox[a] = b ^ _rotl8(b, 1) ^ _rotl8(b, 2) ^ _rotl8(b, 3) ^ _rotl8(b, 4) ^ 0x63
        inv = [0] * 256
        for a, s in enumerate(sbox):
            inv[s] = a
        self.sbox: tuple[int, ...] = tuple(sbox)
        self.inv_sbox: tuple[int, ...] = tuple(inv)
        # MixColumns column (02 01 01 03) and InvMixColumns column (0e 09 0d 0b), big-endian
        te0 = tuple((_gmul(s, 2) << 24) | (s << 16) | (s << 8) | _gmul(s, 3) for s in self.sbox)
        td0 = tuple(
            (_gmul(s, 14) << 24) | (_gmul(s, 9) << 16) | (_gmul(s, 13) << 8) | _gmul(s, 11)
            for s in self.inv_sbox
        )
        self.te = (te0, *(tuple(_ror32(w, n) for w in te0) for n in (8, 16, 24)))
        self.td = (td0, *(tuple(_ror32(w, n) for w in td0) for n in (8, 16, 24)))
        # final round: S-box bytes already in place in the output word
        self.s_final = tuple(tuple(s << n for s in self.sbox) for n in (24, 16, 8, 0))
        self.is_final = tuple(tuple(s << n for s in self.inv_sbox) for n in (24, 16, 8, 0))

    def inv_mix_column(self, w: int) -> int:
        """InvMixColumns of one column word (the inverse tables after undoing their S-box)."""
        s = self.sbox
        td0, td1, td2, td3 = self.td
        return td0[s[w >> 24]] ^ td1[s[(w >> 16) & 255]] ^ td2[s[(w >> 8) & 255]] ^ td3[s[w & 255]]


@cache
def _tables() -> _Tables:
    """The tables, built once on first use (a few milliseconds)."""
    return _Tables()


# -- key expansion ----------------------------------------------------------------------------


def check_aes_key(key: bytes) -> bytes:
    """``key`` as bytes; :class:`KeyLengthError` unless it is a 16-byte bytes-like object."""
    try:
        raw = memoryview(key).tobytes()
    except TypeError as exc:
        raise KeyLengthError(
            f'"key" must be bytes-like, got {type(key).__name__}', argument="key"
        ) from exc
    if len(raw) != AES_KEY_SIZE:
        raise KeyLengthError(
            f'AES-128 "key" must be {AES_KEY_SIZE} bytes long, got {len(raw)} bytes',
            argument="key",
            value=len(raw),
        )
    return raw


def aes_key_schedule(key: bytes) -> tuple[int, ...]:
    """The 44 words w[0..43] of the AES-128 key expansion (FIPS-197 5.2), big-endian ints.

    Raises :class:`KeyLengthError` if ``key`` is not 16 bytes.
    """
    sbox = _tables().sbox
    words = list(_WORDS.unpack(check_aes_key(key)))
    rcon = 1
    for i in range(4, 4 * (AES_ROUNDS + 1)):
        temp = words[i - 1]
        if i % 4 == 0:
            temp = ((temp << 8) | (temp >> 24)) & 0xFFFFFFFF  # RotWord
            temp = (
                (sbox[temp >> 24] << 24)
                | (sbox[(temp >> 16) & 255] << 16)
                | (sbox[(temp >> 8) & 255] << 8)
                | sbox[temp & 255]
            )  # SubWord
            temp ^= rcon << 24
            rcon = _xtime(rcon)
        words.append(words[i - 4] ^ temp)
    return tuple(words)


_RoundKey = tuple[int, int, int, int]


def _round_keys(words: tuple[int, ...]) -> tuple[_RoundKey, ...]:
    """The 11 round keys as 4-word groups."""
    return tuple(
        (words[i], words[i + 1], words[i + 2], words[i + 3]) for i in range(0, len(words), 4)
    )


# -- the block functions ----------------------------------------------------------------------


def _encrypt(
    s0: int, s1: int, s2: int, s3: int, keys: tuple[_RoundKey, ...]
) -> tuple[int, int, int, int]:
    """Cipher (FIPS-197 5.1) on four column words with the 11 round keys."""
    t = _tables()
    te0, te1, te2, te3 = t.te
    f0, f1, f2, f3 = t.s_final
    k0, k1, k2, k3 = keys[0]
    s0 ^= k0
    s1 ^= k1
    s2 ^= k2
    s3 ^= k3
    for k0, k1, k2, k3 in keys[1:AES_ROUNDS]:
        s0, s1, s2, s3 = (
            te0[s0 >> 24] ^ te1[(s1 >> 16) & 255] ^ te2[(s2 >> 8) & 255] ^ te3[s3 & 255] ^ k0,
            te0[s1 >> 24] ^ te1[(s2 >> 16) & 255] ^ te2[(s3 >> 8) & 255] ^ te3[s0 & 255] ^ k1,
            te0[s2 >> 24] ^ te1[(s3 >> 16) & 255] ^ te2[(s0 >> 8) & 255] ^ te3[s1 & 255] ^ k2,
            te0[s3 >> 24] ^ te1[(s0 >> 16) & 255] ^ te2[(s1 >> 8) & 255] ^ te3[s2 & 255] ^ k3,
        )
    k0, k1, k2, k3 = keys[AES_ROUNDS]
    return (
        (f0[s0 >> 24] | f1[(s1 >> 16) & 255] | f2[(s2 >> 8) & 255] | f3[s3 & 255]) ^ k0,
        (f0[s1 >> 24] | f1[(s2 >> 16) & 255] | f2[(s3 >> 8) & 255] | f3[s0 & 255]) ^ k1,
        (f0[s2 >> 24] | f1[(s3 >> 16) & 255] | f2[(s0 >> 8) & 255] | f3[s1 & 255]) ^ k2,
        (f0[s3 >> 24] | f1[(s0 >> 16) & 255] | f2[(s1 >> 8) & 255] | f3[s2 & 255]) ^ k3,
    )


def _decrypt(
    s0: int, s1: int, s2: int, s3: int, keys: tuple[_RoundKey, ...]
) -> tuple[int, int, int, int]:
    """Equivalent inverse cipher (FIPS-197 5.3.5) with the decryption round keys."""
    t = _tables()
    td0, td1, td2, td3 = t.td
    f0, f1, f2, f3 = t.is_final
    k0, k1, k2, k3 = keys[0]
    s0 ^= k0
    s1 ^= k1
    s2 ^= k2
    s3 ^= k3
    for k0, k1, k2, k3 in keys[1:AES_ROUNDS]:
        s0, s1, s2, s3 = (
            td0[s0 >> 24] ^ td1[(s3 >> 16) & 255] ^ td2[(s2 >> 8) & 255] ^ td3[s1 & 255] ^ k0,
            td0[s1 >> 24] ^ td1[(s0 >> 16) & 255] ^ td2[(s3 >> 8) & 255] ^ td3[s2 & 255] ^ k1,
            td0[s2 >> 24] ^ td1[(s1 >> 16) & 255] ^ td2[(s0 >> 8) & 255] ^ td3[s3 & 255] ^ k2,
            td0[s3 >> 24] ^ td1[(s2 >> 16) & 255] ^ td2[(s1 >> 8) & 255] ^ td3[s0 & 255] ^ k3,
        )
    k0, k1, k2, k3 = keys[AES_ROUNDS]
    return (
        (f0[s0 >> 24] | f1[(s3 >> 16) & 255] | f2[(s2 >> 8) & 255] | f3[s1 & 255]) ^ k0,
        (f0[s1 >> 24] | f1[(s0 >> 16) & 255] | f2[(s3 >> 8) & 255] | f3[s2 & 255]) ^ k1,
        (f0[s2 >> 24] | f1[(s1 >> 16) & 255] | f2[(s0 >> 8) & 255] | f3[s3 & 255]) ^ k2,
        (f0[s3 >> 24] | f1[(s2 >> 16) & 255] | f2[(s1 >> 8) & 255] | f3[s0 & 255]) ^ k3,
    )


class AES128:
    """AES-128 with one 16-byte key: ``encrypt_block``/``decrypt_block`` on 128-bit ints.

    Raises :class:`KeyLengthError` if ``key`` is not 16 bytes.
    """

    def __init__(self, key: bytes) -> None:
        words = aes_key_schedule(key)
        self._enc = _round_keys(words)
        t = _tables()
        inverse = [self._enc[AES_ROUNDS]]
        for rk in self._enc[AES_ROUNDS - 1 : 0 : -1]:
            a, b, c, d = (t.inv_mix_column(w) for w in rk)
            inverse.append((a, b, c, d))
        inverse.append(self._enc[0])
        self._dec = tuple(inverse)

    def encrypt_block(self, block: int) -> int:
        """Encrypt one 128-bit block (big-endian integer value of the 16 bytes)."""
        block &= _M128
        out = _encrypt(
            block >> 96,
            (block >> 64) & 0xFFFFFFFF,
            (block >> 32) & 0xFFFFFFFF,
            block & 0xFFFFFFFF,
            self._enc,
        )
        return (out[0] << 96) | (out[1] << 64) | (out[2] << 32) | out[3]

    def decrypt_block(self, block: int) -> int:
        """Decrypt one 128-bit block."""
        block &= _M128
        out = _decrypt(
            block >> 96,
            (block >> 64) & 0xFFFFFFFF,
            (block >> 32) & 0xFFFFFFFF,
            block & 0xFFFFFFFF,
            self._dec,
        )
        return (out[0] << 96) | (out[1] << 64) | (out[2] << 32) | out[3]

    def encrypt_words(self, words: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        """Encrypt one block given as four big-endian 32-bit words (a core's registers)."""
        return _encrypt(*words, self._enc)

    def decrypt_words(self, words: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        """Decrypt one block given as four big-endian 32-bit words."""
        return _decrypt(*words, self._dec)

    def encrypt_into(self, view: memoryview, size: int) -> None:
        """Encrypt the first ``size`` bytes of a writable byte view in place (ECB)."""
        _crypt_view(view, size, _encrypt, self._enc)

    def decrypt_into(self, view: memoryview, size: int) -> None:
        """Decrypt the first ``size`` bytes of a writable byte view in place (ECB)."""
        _crypt_view(view, size, _decrypt, self._dec)


def _crypt_view(
    view: memoryview,
    size: int,
    block: Callable[[int, int, int, int, tuple[_RoundKey, ...]], tuple[int, int, int, int]],
    keys: tuple[_RoundKey, ...],
) -> None:
    """ECB in place over the first ``size`` bytes of a byte view (size a multiple of 16); a
    strided view is worked on through a contiguous copy."""
    buf: memoryview | bytearray = view if view.c_contiguous else bytearray(view[:size])
    unpack, pack = _WORDS.unpack_from, _WORDS.pack_into
    for offset in range(0, size, AES_BLOCK_SIZE):
        w0, w1, w2, w3 = unpack(buf, offset)
        pack(buf, offset, *block(w0, w1, w2, w3, keys))
    if buf is not view:
        view[:size] = buf


def aes_encrypt_block(key: bytes, block: int) -> int:
    """Encrypt one 128-bit block with a 16-byte key (convenience; builds the schedule)."""
    return AES128(key).encrypt_block(block)


def aes_decrypt_block(key: bytes, block: int) -> int:
    """Decrypt one 128-bit block with a 16-byte key (convenience; builds the schedule)."""
    return AES128(key).decrypt_block(block)


# -- argument checks --------------------------------------------------------------------------


def _size_int(size: object) -> int:
    """``size`` as an int; :class:`ServiceArgumentError` for a bool or a non-integer."""
    if isinstance(size, bool) or not isinstance(size, SupportsIndex):
        raise ServiceArgumentError(
            f'"size" must be an int, got {type(size).__name__} {size!r}', argument="size"
        )
    return operator.index(size)


def aes_block_view(buf: Buffer, size: int) -> memoryview:
    """:func:`~juggle.services.crypto.interface.block_view` for 16-byte blocks.

    The same checks in the same order, with the same errors, except that ``size`` must be a
    multiple of 16 (:class:`BlockSizeError` naming the 16-byte block otherwise).
    """
    if type(size) is not int:
        size = _size_int(size)
    view = block_view(buf, 0)  # the buffer checks: writable, contiguous bytes
    if size < 0 or size > view.nbytes:
        raise BufferSizeError(
            f'"size" must be between 0 and the buffer length {view.nbytes}, got {size}',
            argument="size",
            value=size,
        )
    if size % AES_BLOCK_SIZE:
        raise BlockSizeError(
            f'"size" must be a multiple of the {AES_BLOCK_SIZE}-byte block, got {size}',
            argument="size",
            value=size,
        )
    return view


# -- the software tier ------------------------------------------------------------------------


class SoftwareAES(_SoftwareCipher):
    """AES-128 in pure Python (16-byte key, ECB over 16-byte blocks, in place).

    ``load_key`` raises :class:`~juggle.errors.KeyLengthError` for a key that is not 16 bytes
    (and keeps the previous key); ``encrypt``/``decrypt`` raise as
    :meth:`EncryptionService.encrypt`, with :class:`~juggle.errors.BlockSizeError` for a size
    that is not a multiple of 16.
    """

    algorithm = "aes"
    _view = staticmethod(aes_block_view)

    def _make(self, key: bytes) -> AES128:
        return AES128(key)
