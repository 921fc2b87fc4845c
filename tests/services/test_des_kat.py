"""Known-answer tests: published DES and Triple-DES vectors give the same bytes at every tier.

Vectors: NIST SP 800-20 (variable plaintext, variable key, permutation operation and substitution
table tests; its Triple-DES tests run with K1 = K2 = K3), FIPS 81's ECB example ("Now is the time
for all "), and the Triple-DES example of NIST SP 800-67. The hardware tier runs through a
driver on a test MMIO window over the core model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juggle.services.crypto import (
    DesCore,
    DesDriver,
    EncryptionService,
    NativeDES,
    NativeTDES,
    SoftwareDES,
    SoftwareTDES,
    TdesCore,
    TdesDriver,
)

TIERS = ("software", "native", "hardware")

WindowFactory = Callable[..., Any]  # the `window` fixture (conftest.py)

# (key, plaintext, ciphertext), hex
SP800_20_DES = [
    # variable plaintext known answer test (key 0101..01)
    ("0101010101010101", "8000000000000000", "95F8A5E5DD31D900"),
    ("0101010101010101", "4000000000000000", "DD7F121CA5015619"),
    ("0101010101010101", "2000000000000000", "2E8653104F3834EA"),
    ("0101010101010101", "0000000000000001", "166B40B44ABA4BD6"),
    # variable key known answer test (plaintext 0)
    ("8001010101010101", "0000000000000000", "95A8D72813DAA94D"),
    ("4001010101010101", "0000000000000000", "0EEC1487DD8C26D5"),
    ("2001010101010101", "0000000000000000", "7AD16FFB79C45926"),
    ("0101010101010102", "0000000000000000", "869EFD7F9F265A09"),
    # permutation operation known answer test (plaintext 0)
    ("1046913489980131", "0000000000000000", "88D55E54F54C97B4"),
    ("1007103489988020", "0000000000000000", "0C0CC00C83EA48FD"),
    ("10071034C8980120", "0000000000000000", "83BC8EF3A6570183"),
    ("1046103489988020", "0000000000000000", "DF725DCAD94EA2E9"),
    # substitution table known answer test
    ("7CA110454A1A6E57", "01A1D6D039776742", "690F5B0D9A26939B"),
    ("0131D9619DC1376E", "5CD54CA83DEF57DA", "7A389D10354BD271"),
    ("07A1133E4A0B2686", "0248D43806F67172", "868EBB51CAB4599A"),
    # the classic worked example
    ("133457799BBCDFF1", "0123456789ABCDEF", "85E813540F0AB405"),
]

FIPS81_KEY = "0123456789ABCDEF"
FIPS81_PLAIN = b"Now is the time for all "
FIPS81_CIPHER = "3FA40E8A984D48156A271787AB8883F9893D51EC4B563B53"

SP800_67_KEY = "0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123"
SP800_67_PLAIN = b"The qufck brown fox jump"
SP800_67_CIPHER = "A826FD8CE53B855FCCE21C8112256FE668D5C05DD9B6B900"


def make_des(tier: str, window: WindowFactory) -> EncryptionService:
    if tier == "software":
        return SoftwareDES()
    if tier == "native":
        return NativeDES()
    return DesDriver(window(DesCore()))


def make_tdes(tier: str, window: WindowFactory) -> EncryptionService:
    if tier == "software":
        return SoftwareTDES()
    if tier == "native":
        return NativeTDES()
    return TdesDriver(window(TdesCore()))


def run(service: EncryptionService, key: bytes, data: bytes, op: str = "encrypt") -> bytes:
    service.load_key(key)
    buf = bytearray(data)
    call: Callable[[bytearray, int], int] = getattr(service, op)
    assert call(buf, len(buf)) == len(buf)
    return bytes(buf)


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize(("key", "plain", "cipher"), SP800_20_DES)
def test_des_sp800_20(tier: str, key: str, plain: str, cipher: str, window: WindowFactory) -> None:
    des = make_des(tier, window)
    assert run(des, bytes.fromhex(key), bytes.fromhex(plain)).hex().upper() == cipher
    assert run(des, bytes.fromhex(key), bytes.fromhex(cipher), "decrypt").hex().upper() == plain


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize(("key", "plain", "cipher"), SP800_20_DES[:4] + SP800_20_DES[8:12])
@pytest.mark.parametrize("key_bytes", [16, 24])
def test_tdes_sp800_20_equal_keys(
    tier: str, key: str, plain: str, cipher: str, key_bytes: int, window: WindowFactory
) -> None:
    """SP 800-20's Triple-DES tests: K1 = K2 = K3 reduces TDES to DES (accepted at every tier)."""
    tdes = make_tdes(tier, window)
    k = bytes.fromhex(key) * (key_bytes // 8)
    assert run(tdes, k, bytes.fromhex(plain)).hex().upper() == cipher
    assert run(tdes, k, bytes.fromhex(cipher), "decrypt").hex().upper() == plain


@pytest.mark.parametrize("tier", TIERS)
def test_des_fips81_now_is_the_time(tier: str, window: WindowFactory) -> None:
    des = make_des(tier, window)
    out = run(des, bytes.fromhex(FIPS81_KEY), FIPS81_PLAIN)
    assert out.hex().upper() == FIPS81_CIPHER
    assert run(des, bytes.fromhex(FIPS81_KEY), out, "decrypt") == FIPS81_PLAIN


@pytest.mark.parametrize("tier", TIERS)
def test_tdes_sp800_67_example(tier: str, window: WindowFactory) -> None:
    tdes = make_tdes(tier, window)
    out = run(tdes, bytes.fromhex(SP800_67_KEY), SP800_67_PLAIN)
    assert out.hex().upper() == SP800_67_CIPHER
    assert run(tdes, bytes.fromhex(SP800_67_KEY), out, "decrypt") == SP800_67_PLAIN


@pytest.mark.parametrize("tier", TIERS)
def test_tdes_two_key_is_three_key_with_k3_equal_k1(tier: str, window: WindowFactory) -> None:
    k1, k2 = bytes.fromhex(SP800_67_KEY[:16]), bytes.fromhex(SP800_67_KEY[16:32])
    two = run(make_tdes(tier, window), k1 + k2, SP800_67_PLAIN)
    three = run(make_tdes("native", window), k1 + k2 + k1, SP800_67_PLAIN)
    assert two == three
    assert two != run(make_tdes("native", window), bytes.fromhex(SP800_67_KEY), SP800_67_PLAIN)


@pytest.mark.parametrize("tier", TIERS)
def test_tdes_is_ede_of_three_des(tier: str, window: WindowFactory) -> None:
    """E(K3, D(K2, E(K1, x))) computed with three single-DES services equals TDES."""
    key = bytes(range(1, 25))
    data = bytes(range(64))
    ede = run(make_des("native", window), key[:8], data)
    ede = run(make_des("native", window), key[8:16], ede, "decrypt")
    ede = run(make_des("native", window), key[16:], ede)
    assert run(make_tdes(tier, window), key, data) == ede


# -- properties -------------------------------------------------------------------------------

blocks = st.integers(min_value=0, max_value=8).map(lambda n: 8 * n)


@settings(max_examples=60, deadline=None)
@given(key=st.binary(min_size=8, max_size=8), data=st.data(), size=blocks)
def test_des_software_matches_native_and_round_trips(
    key: bytes, data: st.DataObject, size: int
) -> None:
    plain = data.draw(st.binary(min_size=size, max_size=size + 7))
    soft, native = SoftwareDES(), NativeDES()
    a, b = run_partial(soft, key, plain, size), run_partial(native, key, plain, size)
    assert a == b
    assert a[size:] == plain[size:]  # bytes past size are untouched
    back = bytearray(a)
    assert soft.decrypt(back, size) == size
    assert bytes(back) == plain


@settings(max_examples=30, deadline=None)
@given(
    key=st.one_of(st.binary(min_size=16, max_size=16), st.binary(min_size=24, max_size=24)),
    plain=blocks.flatmap(lambda n: st.binary(min_size=n, max_size=n)),
)
def test_tdes_software_matches_native_and_round_trips(key: bytes, plain: bytes) -> None:
    soft, native = SoftwareTDES(), NativeTDES()
    a, b = run_partial(soft, key, plain, len(plain)), run_partial(native, key, plain, len(plain))
    assert a == b
    back = bytearray(a)
    native.decrypt(back, len(back))
    assert bytes(back) == plain
    back = bytearray(a)
    soft.decrypt(memoryview(back), len(back))
    assert bytes(back) == plain


def run_partial(service: EncryptionService, key: bytes, plain: bytes, size: int) -> bytes:
    """Encrypt the first ``size`` bytes, through a bytearray and through a memoryview."""
    service.load_key(key)
    buf, other = bytearray(plain), bytearray(plain)
    assert service.encrypt(buf, size) == size
    assert service.encrypt(memoryview(other), size) == size
    assert buf == other
    return bytes(buf)
