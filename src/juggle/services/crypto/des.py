"""Pure-Python DES and Triple-DES (EDE), written from FIPS 46-3: the software tier's engine.

DES is a 16-round Feistel network on 64-bit blocks. This implementation keeps each half of the
state in an *expanded* 34-bit form ``X(R) = R32 ‖ R1..R32 ‖ R1`` (the E expansion's wrap-around
bits duplicated at both ends), so every 6-bit S-box input is a plain bit field of ``X(R)``.
Because the expansion is linear, the round function's output can be produced directly in the
expanded form, and the state never leaves it between the initial and the final permutation.

Per round the S-boxes, the P permutation and the expansion are folded into four tables indexed
by 14-bit fields (two S-box inputs each, which do not overlap within a field), and the round key
is split into an "even" and an "odd" 34-bit mask. One round is then two XORs, four table look-ups
and a few shifts; the initial and final permutations are eight byte-indexed look-ups each.

Triple-DES EDE (ANSI X9.52 / SP 800-67) is E(K3, D(K2, E(K1, x))). Between the three passes the
final permutation of one and the initial permutation of the next cancel, so the three passes run
as 48 rounds between a single IP/FP pair.

All functions raise :class:`~juggle.errors.KeyLengthError` for a key of the wrong length; block
functions take and return 64-bit integers (big-endian block value).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from juggle.errors import KeyLengthError

__all__ = [
    "DES",
    "TripleDES",
    "check_des_key",
    "des_decrypt_block",
    "des_encrypt_block",
    "des_subkeys",
    "tdes_keys",
]

# -- FIPS 46-3 tables (bit numbers are 1-based, bit 1 is the most significant) ----------------

_IP = (
    58, 50, 42, 34, 26, 18, 10, 2, 60, 52, 44, 36, 28, 20, 12, 4,
    62, 54, 46, 38, 30, 22, 14, 6, 64, 56, 48, 40, 32, 24, 16, 8,
    57, 49, 41, 33, 25, 17, 9, 1, 59, 51, 43, 35, 27, 19, 11, 3,
    61, 53, 45, 37, 29, 21, 13, 5, 63, 55, 47, 39, 31, 23, 15, 7,
)  # fmt: skip

_FP = (
    40, 8, 48, 16, 56, 24, 64, 32, 39, 7, 47, 15, 55, 23, 63, 31,
    38, 6, 46, 14, 54, 22, 62, 30, 37, 5, 45, 13, 53, 21, 61, 29,
    36, 4, 44, 12, 52, 20, 60, 28, 35, 3, 43, 11, 51, 19, 59, 27,
    34, 2, 42, 10, 50, 18, 58, 26, 33, 1, 41, 9, 49, 17, 57, 25,
)  # fmt: skip

_E = (
    32, 1, 2, 3, 4, 5, 4, 5, 6, 7, 8, 9, 8, 9, 10, 11, 12, 13, 12, 13, 14, 15, 16, 17,
    16, 17, 18, 19, 20, 21, 20, 21, 22, 23, 24, 25, 24, 25, 26, 27, 28, 29, 28, 29, 30, 31, 32, 1,
)  # fmt: skip

_P = (
    16, 7, 20, 21, 29, 12, 28, 17, 1, 15, 23, 26, 5, 18, 31, 10,
    2, 8, 24, 14, 32, 27, 3, 9, 19, 13, 30, 6, 22, 11, 4, 25,
)  # fmt: skip

_PC1 = (
    57, 49, 41, 33, 25, 17, 9, 1, 58, 50, 42, 34, 26, 18,
    10, 2, 59, 51, 43, 35, 27, 19, 11, 3, 60, 52, 44, 36,
    63, 55, 47, 39, 31, 23, 15, 7, 62, 54, 46, 38, 30, 22,
    14, 6, 61, 53, 45, 37, 29, 21, 13, 5, 28, 20, 12, 4,
)  # fmt: skip

_PC2 = (
    14, 17, 11, 24, 1, 5, 3, 28, 15, 6, 21, 10, 23, 19, 12, 4,
    26, 8, 16, 7, 27, 20, 13, 2, 41, 52, 31, 37, 47, 55, 30, 40,
    51, 45, 33, 48, 44, 49, 39, 56, 34, 53, 46, 42, 50, 36, 29, 32,
)  # fmt: skip

_SHIFTS = (1, 1, 2, 2, 2, 2, 2, 2, 1, 2, 2, 2, 2, 2, 2, 1)

_S = (
    (
        14, 4, 13, 1, 2, 15, 11, 8, 3, 10, 6, 12, 5, 9, 0, 7,
        0, 15, 7, 4, 14, 2, 13, 1, 10, 6, 12, 11, 9, 5, 3, 8,
        4, 1, 14, 8, 13, 6, 2, 11, 15, 12, 9, 7, 3, 10, 5, 0,
        15, 12, 8, 2, 4, 9, 1, 7, 5, 11, 3, 14, 10, 0, 6, 13,
    ),
    (
        15, 1, 8, 14, 6, 11, 3, 4, 9, 7, 2, 13, 12, 0, 5, 10,
        3, 13, 4, 7, 15, 2, 8, 14, 12, 0, 1, 10, 6, 9, 11, 5,
        0, 14, 7, 11, 10, 4, 13, 1, 5, 8, 12, 6, 9, 3, 2, 15,
        13, 8, 10, 1, 3, 15, 4, 2, 11, 6, 7, 12, 0, 5, 14, 9,
    ),
    (
        10, 0, 9, 14, 6, 3, 15, 5, 1, 13, 12, 7, 11, 4, 2, 8,
        13, 7, 0, 9, 3, 4, 6, 10, 2, 8, 5, 14, 12, 11, 15, 1,
        13, 6, 4, 9, 8, 15, 3, 0, 11, 1, 2, 12, 5, 10, 14, 7,
        1, 10, 13, 0, 6, 9, 8, 7, 4, 15, 14, 3, 11, 5, 2, 12,
    ),
    (
        7, 13, 14, 3, 0, 6, 9, 10, 1, 2, 8, 5, 11, 12, 4, 15,
        13, 8, 11, 5, 6, 15, 0, 3, 4, 7, 2, 12, 1, 10, 14, 9,
        10, 6, 9, 0, 12, 11, 7, 13, 15, 1, 3, 14, 5, 2, 8, 4,
        3, 15, 0, 6, 10, 1, 13, 8, 9, 4, 5, 11, 12, 7, 2, 14,
    ),
    (
        2, 12, 4, 1, 7, 10, 11, 6, 8, 5, 3, 15, 13, 0, 14, 9,
        14, 11, 2, 12, 4, 7, 13, 1, 5, 0, 15, 10, 3, 9, 8, 6,
        4, 2, 1, 11, 10, 13, 7, 8, 15, 9, 12, 5, 6, 3, 0, 14,
        11, 8, 12, 7, 1, 14, 2, 13, 6, 15, 0, 9, 10, 4, 5, 3,
    ),
    (
        12, 1, 10, 15, 9, 2, 6, 8, 0, 13, 3, 4, 14, 7, 5, 11,
        10, 15, 4, 2, 7, 12, 9, 5, 6, 1, 13, 14, 0, 11, 3, 8,
        9, 14, 15, 5, 2, 8, 12, 3, 7, 0, 4, 10, 1, 13, 11, 6,
        4, 3, 2, 12, 9, 5, 15, 10, 11, 14, 1, 7, 6, 0, 8, 13,
    ),
    (
        4, 11, 2, 14, 15, 0, 8, 13, 3, 12, 9, 7, 5, 10, 6, 1,
        13, 0, 11, 7, 4, 9, 1, 10, 14, 3, 5, 12, 2, 15, 8, 6,
        1, 4, 11, 13, 12, 3, 7, 14, 10, 15, 6, 8, 0, 5, 9, 2,
        6, 11, 13, 8, 1, 4, 10, 7, 9, 5, 0, 15, 14, 2, 3, 12,
    ),
    (
        13, 2, 8, 4, 6, 15, 11, 1, 10, 9, 3, 14, 5, 0, 12, 7,
        1, 15, 13, 8, 10, 3, 7, 4, 12, 5, 6, 11, 0, 14, 9, 2,
        7, 11, 4, 1, 9, 12, 14, 2, 0, 6, 10, 13, 15, 3, 5, 8,
        2, 1, 14, 7, 4, 10, 8, 13, 15, 12, 9, 0, 3, 5, 6, 11,
    ),
)  # fmt: skip

_M32 = 0xFFFFFFFF
_M34 = (1 << 34) - 1
_F14 = 0x3FFF


def _permute(value: int, table: Sequence[int], width: int) -> int:
    """Bit permutation as FIPS writes it: output bit i is input bit ``table[i]`` (1-based)."""
    out = 0
    for src in table:
        out = (out << 1) | ((value >> (width - src)) & 1)
    return out


def _expand(r: int) -> int:
    """The 34-bit expanded form of a 32-bit half: ``R32 ‖ R1..R32 ‖ R1``."""
    return ((r & 1) << 33) | (r << 1) | (r >> 31)


# Position (right shift) of the i-th 6-bit S-box input inside the expanded form. Inputs with the
# same parity do not overlap, so S1/S3, S5/S7, S2/S4 and S6/S8 each share one 14-bit field.
_CHUNK_SHIFT = tuple(28 - 4 * i for i in range(8))


class _Tables:
    """Precomputed look-up tables: IP and FP by byte, and the four combined SP tables."""

    def __init__(self) -> None:
        sp = [[0] * 64 for _ in range(8)]
        for box in range(8):
            for six in range(64):
                row = ((six >> 4) & 2) | (six & 1)
                col = (six >> 1) & 0xF
                s_out = _S[box][row * 16 + col] << (28 - 4 * box)
                sp[box][six] = _expand(_permute(s_out, _P, 32))
        # field (shift) -> the two boxes it holds: (high box, low box)
        self.sp = tuple(self._pair(sp[hi], sp[lo]) for hi, lo in ((0, 2), (4, 6), (1, 3), (5, 7)))
        self.ip = tuple(
            tuple(self._ip_entry(byte << (56 - 8 * pos)) for byte in range(256)) for pos in range(8)
        )
        self.fp = tuple(
            tuple(_permute(byte << (56 - 8 * pos), _FP, 64) for byte in range(256))
            for pos in range(8)
        )

    @staticmethod
    def _pair(high: list[int], low: list[int]) -> tuple[int, ...]:
        """A 14-bit-indexed table: bits 13..8 select ``high``, bits 5..0 ``low``, 7..6 unused."""
        combos = [[h | lo for lo in low] for h in high]
        return tuple(combos[index >> 8][index & 63] for index in range(1 << 14))

    @staticmethod
    def _ip_entry(block: int) -> int:
        """IP of ``block`` as ``X(L0) << 34 | X(R0)``."""
        permuted = _permute(block, _IP, 64)
        return (_expand(permuted >> 32) << 34) | _expand(permuted & _M32)


@cache
def _tables() -> _Tables:
    """The look-up tables, built once on first use (about 50 ms)."""
    return _Tables()


# -- key schedule -----------------------------------------------------------------------------


def _check_key(key: bytes, lengths: tuple[int, ...], what: str) -> bytes:
    """``key`` as bytes; :class:`KeyLengthError` unless its length is one of ``lengths``."""
    try:
        raw = memoryview(key).tobytes()
    except TypeError as exc:
        raise KeyLengthError(
            f'"key" must be bytes-like, got {type(key).__name__}', argument="key"
        ) from exc
    if len(raw) not in lengths:
        allowed = " or ".join(str(n) for n in lengths)
        raise KeyLengthError(
            f'{what} "key" must be {allowed} bytes long, got {len(raw)} bytes',
            argument="key",
            value=len(raw),
        )
    return raw


def check_des_key(key: bytes) -> bytes:
    """``key`` as bytes; :class:`KeyLengthError` unless it is 8 bytes long."""
    return _check_key(key, (8,), "DES")


def des_subkeys(key: bytes) -> tuple[int, ...]:
    """The sixteen 48-bit round keys K1..K16 of an 8-byte DES key (parity bits ignored).

    Raises :class:`KeyLengthError` if ``key`` is not 8 bytes.
    """
    raw = check_des_key(key)
    cd = _permute(int.from_bytes(raw, "big"), _PC1, 64)
    c, d = cd >> 28, cd & 0xFFFFFFF
    keys = []
    for shift in _SHIFTS:
        c = ((c << shift) | (c >> (28 - shift))) & 0xFFFFFFF
        d = ((d << shift) | (d >> (28 - shift))) & 0xFFFFFFF
        keys.append(_permute((c << 28) | d, _PC2, 56))
    return tuple(keys)


def _round_masks(subkey: int) -> tuple[int, int]:
    """A 48-bit round key as the (even, odd) masks XORed onto the expanded half."""
    even = odd = 0
    for box in range(8):
        six = (subkey >> (42 - 6 * box)) & 63
        if box % 2 == 0:
            even |= six << _CHUNK_SHIFT[box]
        else:
            odd |= six << _CHUNK_SHIFT[box]
    return even, odd


_Pass = tuple[tuple[int, int, int, int], ...]  # 8 double rounds: (even1, odd1, even2, odd2)


def _pass(subkeys: Sequence[int]) -> _Pass:
    """Round masks for one DES pass, grouped two rounds per step."""
    masks = [_round_masks(k) for k in subkeys]
    return tuple(
        (masks[i][0], masks[i][1], masks[i + 1][0], masks[i + 1][1]) for i in range(0, 16, 2)
    )


# -- the block function -----------------------------------------------------------------------


def _crypt(block: int, passes: Sequence[_Pass]) -> int:
    """IP, one or more 16-round passes (swapping halves after each), FP."""
    t = _tables()
    sp0, sp1, sp2, sp3 = t.sp
    ip, fp = t.ip, t.fp
    v = (
        ip[0][block >> 56]
        | ip[1][(block >> 48) & 255]
        | ip[2][(block >> 40) & 255]
        | ip[3][(block >> 32) & 255]
        | ip[4][(block >> 24) & 255]
        | ip[5][(block >> 16) & 255]
        | ip[6][(block >> 8) & 255]
        | ip[7][block & 255]
    )
    left, right = v >> 34, v & _M34
    for rounds in passes:
        for e1, o1, e2, o2 in rounds:
            a = right ^ e1
            b = right ^ o1
            left ^= sp0[a >> 20] | sp1[(a >> 4) & _F14] | sp2[(b >> 16) & _F14] | sp3[b & _F14]
            a = left ^ e2
            b = left ^ o2
            right ^= sp0[a >> 20] | sp1[(a >> 4) & _F14] | sp2[(b >> 16) & _F14] | sp3[b & _F14]
        left, right = right, left
    out = (((left >> 1) & _M32) << 32) | ((right >> 1) & _M32)
    return (
        fp[0][out >> 56]
        | fp[1][(out >> 48) & 255]
        | fp[2][(out >> 40) & 255]
        | fp[3][(out >> 32) & 255]
        | fp[4][(out >> 24) & 255]
        | fp[5][(out >> 16) & 255]
        | fp[6][(out >> 8) & 255]
        | fp[7][out & 255]
    )


def _crypt_buffer(view: memoryview, size: int, passes: Sequence[_Pass]) -> None:
    """ECB in place over the first ``size`` bytes of a byte view (size a multiple of 8)."""
    crypt = _crypt
    from_bytes = int.from_bytes
    for offset in range(0, size, 8):
        end = offset + 8
        view[offset:end] = crypt(from_bytes(view[offset:end], "big"), passes).to_bytes(8, "big")


# -- public API -------------------------------------------------------------------------------


class DES:
    """Single DES with one 8-byte key: ``encrypt_block``/``decrypt_block`` on 64-bit ints.

    Raises :class:`KeyLengthError` if ``key`` is not 8 bytes.
    """

    def __init__(self, key: bytes) -> None:
        subkeys = des_subkeys(key)
        self._enc: tuple[_Pass, ...] = (_pass(subkeys),)
        self._dec: tuple[_Pass, ...] = (_pass(subkeys[::-1]),)

    def encrypt_block(self, block: int) -> int:
        """Encrypt one 64-bit block."""
        return _crypt(block, self._enc)

    def decrypt_block(self, block: int) -> int:
        """Decrypt one 64-bit block."""
        return _crypt(block, self._dec)

    def encrypt_into(self, view: memoryview, size: int) -> None:
        """Encrypt the first ``size`` bytes of a writable byte view in place (ECB)."""
        _crypt_buffer(view, size, self._enc)

    def decrypt_into(self, view: memoryview, size: int) -> None:
        """Decrypt the first ``size`` bytes of a writable byte view in place (ECB)."""
        _crypt_buffer(view, size, self._dec)


def tdes_keys(key: bytes) -> tuple[bytes, bytes, bytes]:
    """(K1, K2, K3) of a 16-byte (2-key, K3 = K1) or 24-byte (3-key) Triple-DES key.

    Raises :class:`KeyLengthError` for any other length.
    """
    raw = _check_key(key, (16, 24), "TDES")
    k3 = raw[16:24] if len(raw) == 24 else raw[0:8]
    return raw[0:8], raw[8:16], k3


class TripleDES(DES):
    """Triple-DES EDE: encrypt = E(K3, D(K2, E(K1, x))), decrypt the inverse.

    Raises :class:`KeyLengthError` if ``key`` is not 16 or 24 bytes.
    """

    def __init__(self, key: bytes) -> None:
        k1, k2, k3 = (des_subkeys(k) for k in tdes_keys(key))
        self._enc = (_pass(k1), _pass(k2[::-1]), _pass(k3))
        self._dec = (_pass(k3[::-1]), _pass(k2), _pass(k1[::-1]))


def des_encrypt_block(key: bytes, block: int) -> int:
    """Encrypt one 64-bit block with an 8-byte key (convenience; builds the schedule)."""
    return DES(key).encrypt_block(block)


def des_decrypt_block(key: bytes, block: int) -> int:
    """Decrypt one 64-bit block with an 8-byte key (convenience; builds the schedule)."""
    return DES(key).decrypt_block(block)
