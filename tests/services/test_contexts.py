"""Context operations of hardware drivers: one core time-multiplexed among consumers.

A driver's ``save_context()`` / ``restore_context(data)`` are its own register work, so they are
checked on a window over a core model (the suite's ``window`` fixture), on the simulated
fabric's own windows, and on the Linux backend's UIO map over the shipped fake kernel.
"""

from __future__ import annotations

import importlib.util
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from Crypto.Cipher import DES, DES3

from juggle.errors import KeyNotLoadedError, ServiceArgumentError, ServiceStateError
from juggle.fabric import Fabric, build_bitstream, open_fabric, parse_bitstream
from juggle.fabric.linux import FakeKernel
from juggle.fabric.mmio import MMIO
from juggle.fabric.sim.model import RegisterModel
from juggle.services import arith
from juggle.services.audio import AdpcmCore, AdpcmDriver, encode_ima_adpcm, sine_sweep
from juggle.services.crypto import DesCore, DesDriver, TdesCore, TdesDriver
from juggle.services.crypto import registers as reg

WindowFactory = Callable[..., Any]  # the `window` fixture (conftest.py)

PART = "2vp30ff896"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "modules"
PLAIN = b"context!" * 4 + bytes(range(32))

K1, K2, K3 = (
    bytes.fromhex(h) for h in ("0123456789ABCDEF", "23456789ABCDEF01", "456789ABCDEF0123")
)
TDES_A = K1 + K2 + K3  # three distinct keys
TDES_B = K3 + K3 + K1  # K1 = K2 != K3: EDE degenerates to single DES under K3
TDES_2KEY = K2 + K1  # two-key: K3 = K1
DES_A, DES_B = K1, K3

CASES = [
    pytest.param(DesCore, DesDriver, DES_A, DES_B, id="des"),
    pytest.param(TdesCore, TdesDriver, TDES_A, TDES_B, id="tdes-3key-vs-K1=K2"),
    pytest.param(TdesCore, TdesDriver, TDES_2KEY, TDES_A, id="tdes-2key-vs-3key"),
]
CipherDriver = DesDriver | TdesDriver


def reference(key: bytes, data: bytes) -> bytes:
    """ECB encryption by pycryptodome (which refuses degenerate TDES keys: use single DES)."""
    if len(key) == 8:
        return DES.new(key, DES.MODE_ECB).encrypt(data)
    k1, k2 = key[:8], key[8:16]
    k3 = key[16:] if len(key) == 24 else k1
    if k1 == k2:
        return DES.new(k3, DES.MODE_ECB).encrypt(data)
    if k2 == k3:
        return DES.new(k1, DES.MODE_ECB).encrypt(data)
    return DES3.new(key, DES3.MODE_ECB).encrypt(data)


def encrypted(driver: CipherDriver, data: bytes = PLAIN) -> bytes:
    buf = bytearray(data)
    driver.encrypt(buf, len(buf))
    return bytes(buf)


def key_words(mmio: MMIO, count: int) -> bytes:
    """KEY1..KEYcount read back through the window, as key bytes."""
    return b"".join(
        mmio.read32(off).to_bytes(4, "big")
        for index in range(count)
        for off in (reg.KEY_HI[index], reg.KEY_LO[index])
    )


def full_key(key: bytes) -> bytes:
    """The bytes a TDES core holds for ``key`` (a 2-key key repeats K1 as K3)."""
    return key + key[:8] if len(key) == 16 else key


# -- DES / TDES on a window over the core model -----------------------------------------------


@pytest.mark.parametrize(("core", "driver_cls", "key_a", "key_b"), CASES)
def test_two_consumers_share_one_core(
    window: WindowFactory,
    core: type[RegisterModel],
    driver_cls: type[CipherDriver],
    key_a: bytes,
    key_b: bytes,
) -> None:
    driver = driver_cls(window(core()))
    driver.load_key(key_b)
    ctx_b = driver.save_context()
    driver.load_key(key_a)
    assert encrypted(driver) == reference(key_a, PLAIN)
    ctx_a = driver.save_context()
    assert len(ctx_a) == len(ctx_b) == driver.context_size == 4 + 8 * driver.key_count

    driver.restore_context(ctx_b)  # B's call runs
    assert encrypted(driver) == reference(key_b, PLAIN)
    assert driver.save_context() == ctx_b
    driver.restore_context(ctx_a)  # A's call runs, as if never interrupted
    assert encrypted(driver) == reference(key_a, PLAIN)
    buf = bytearray(reference(key_a, PLAIN))
    driver.decrypt(buf, len(buf))
    assert bytes(buf) == PLAIN


@pytest.mark.parametrize(("core", "driver_cls", "key_a", "key_b"), CASES)
def test_context_layout_is_the_documented_one(
    window: WindowFactory,
    core: type[RegisterModel],
    driver_cls: type[CipherDriver],
    key_a: bytes,
    key_b: bytes,
) -> None:
    driver = driver_cls(window(core()))
    n = driver.key_count
    assert driver.save_context() == bytes([1, n, 0, 0]) + bytes(8 * n)  # power-on: no key
    driver.load_key(key_a)
    expected_key = full_key(key_a) if n == 3 else key_a
    assert driver.save_context() == bytes([1, n, 1, 0]) + expected_key
    assert struct.unpack(f">BBBB{2 * n}I", driver.save_context())[4:] == struct.unpack(
        f">{2 * n}I", expected_key
    )


@pytest.mark.parametrize(("core", "driver_cls", "key_a", "key_b"), CASES)
def test_empty_context_is_the_power_on_state(
    window: WindowFactory,
    core: type[RegisterModel],
    driver_cls: type[CipherDriver],
    key_a: bytes,
    key_b: bytes,
) -> None:
    mmio = window(core())
    driver = driver_cls(mmio)
    driver.load_key(key_a)
    encrypted(driver)
    driver.restore_context(b"")
    with pytest.raises(KeyNotLoadedError):
        encrypted(driver)
    assert key_words(mmio, driver.key_count) == bytes(8 * driver.key_count)
    assert mmio.read32(reg.DATA_HI) == mmio.read32(reg.DATA_LO) == 0  # no input block left
    assert driver.save_context() == driver_cls(window(core())).save_context()
    driver.restore_context(driver.save_context())  # a saved "no key" context restores too
    with pytest.raises(KeyNotLoadedError):
        encrypted(driver)


def test_save_and_restore_take_the_drivers_lock(window: WindowFactory) -> None:
    driver = TdesDriver(window(TdesCore(), yield_gil=True))  # accesses yield the GIL
    driver.load_key(TDES_A)
    ctx = driver.save_context()
    errors: list[BaseException] = []

    def switch() -> None:  # restoring the same context between two calls changes nothing
        try:
            for _ in range(40):
                driver.restore_context(ctx)
                assert driver.save_context() == ctx
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=switch)
    thread.start()
    results = [encrypted(driver, PLAIN[:16]) for _ in range(20)]
    saved = [driver.save_context() for _ in range(20)]
    thread.join()
    assert not errors
    assert results == [reference(TDES_A, PLAIN[:16])] * 20  # no restore inside a call
    assert saved == [ctx] * 20  # no save inside a restore


def test_context_without_a_key_never_carries_the_registers(window: WindowFactory) -> None:
    mmio = window(TdesCore())
    TdesDriver(mmio).load_key(TDES_A)  # another driver instance on the same core
    fresh = TdesDriver(mmio)
    assert fresh.save_context() == bytes([1, 3, 0, 0]) + bytes(24)


@pytest.mark.parametrize(("core", "driver_cls", "key_a", "key_b"), CASES)
def test_bad_contexts_are_refused_and_change_nothing(
    window: WindowFactory,
    core: type[RegisterModel],
    driver_cls: type[CipherDriver],
    key_a: bytes,
    key_b: bytes,
) -> None:
    mmio = window(core())
    driver = driver_cls(mmio)
    driver.load_key(key_a)
    ctx = driver.save_context()
    writes = mmio.writes
    size = len(ctx)
    for bad in (ctx[:-1], ctx + b"\0", b"\1", bytes(size * 2)):
        with pytest.raises(ServiceStateError, match=f"is {size} bytes.*got {len(bad)} bytes"):
            driver.restore_context(bad)
    other_count = 3 if driver.key_count == 1 else 1
    malformed = [
        bytes([2]) + ctx[1:],  # version
        bytes([1, other_count]) + ctx[2:],  # key count of the other core
        ctx[:2] + b"\x03" + ctx[3:],  # unknown flag
        ctx[:3] + b"\x01" + ctx[4:],  # reserved
        ctx[:2] + b"\x00" + ctx[3:],  # "no key" with key words
    ]
    for bad in malformed:
        with pytest.raises(ServiceStateError, match="restore_context"):
            driver.restore_context(bad)
    with pytest.raises(ServiceArgumentError, match='"data" must be bytes'):
        driver.restore_context("not bytes")  # type: ignore[arg-type]
    assert mmio.writes == writes  # not one register touched
    assert driver.save_context() == ctx
    assert encrypted(driver) == reference(key_a, PLAIN)


def test_a_des_context_is_refused_by_a_tdes_driver(window: WindowFactory) -> None:
    des = DesDriver(window(DesCore()))
    des.load_key(DES_A)
    with pytest.raises(ServiceStateError, match="is 28 bytes.*got 12 bytes"):
        TdesDriver(window(TdesCore())).restore_context(des.save_context())


def test_context_operations_on_the_simulated_fabric() -> None:
    data = build_bitstream("tdes", PART, "prr0", 149_088)
    with open_fabric("xupv2p") as fab:
        fab.program("prr0", parse_bitstream(data, source="tdes.bit"), data)
        mmio = fab.window("prr0")
        driver = TdesDriver(mmio)
        driver.load_key(TDES_A)
        ctx_a = driver.save_context()
        driver.restore_context(b"")
        driver.load_key(TDES_B)
        ctx_b = driver.save_context()
        driver.restore_context(ctx_a)
        assert encrypted(driver) == reference(TDES_A, PLAIN)
        driver.restore_context(ctx_b)
        assert encrypted(driver) == reference(TDES_B, PLAIN)
        assert key_words(mmio, 3) == TDES_B


# -- ADPCM --------------------------------------------------------------------------------------


def _stream(seed: int) -> bytes:
    return encode_ima_adpcm(sine_sweep(0.05, seed=seed))


def test_adpcm_context_round_trip_mid_stream(window: WindowFactory) -> None:
    music, other = _stream(1), _stream(2)
    whole = AdpcmDriver(window(AdpcmCore())).decode(music)

    driver = AdpcmDriver(window(AdpcmCore()))
    half = len(music) // 2 + 1  # not a word boundary
    first = driver.decode(music[:half])
    ctx = driver.save_context()
    assert len(ctx) == 6 and ctx[:2] == b"\x01\x00"
    assert struct.unpack(">hH", ctx[2:]) == driver.juggle_save_state()

    driver.restore_context(b"")  # another consumer starts a stream of its own
    other_pcm = driver.decode(other)
    assert other_pcm == AdpcmDriver(window(AdpcmCore())).decode(other)
    other_ctx = driver.save_context()

    driver.restore_context(ctx)
    assert first + driver.decode(music[half:]) == whole
    driver.restore_context(other_ctx)
    assert driver.save_context() == other_ctx


def test_adpcm_empty_context_is_the_power_on_state(window: WindowFactory) -> None:
    mmio = window(AdpcmCore())
    driver = AdpcmDriver(mmio)
    driver.decode(_stream(3))
    driver.restore_context(b"")
    assert driver.save_context() == AdpcmDriver(window(AdpcmCore())).save_context()
    assert driver.save_context() == b"\x01\x00\x00\x00\x00\x00"
    assert mmio.read32(0x08) == 8  # COUNT at its power-on value
    music = _stream(4)
    assert driver.decode(music) == AdpcmDriver(window(AdpcmCore())).decode(music)


def test_adpcm_bad_contexts_are_refused_and_change_nothing(window: WindowFactory) -> None:
    mmio = window(AdpcmCore())
    driver = AdpcmDriver(mmio)
    driver.decode(_stream(5)[:100])
    ctx = driver.save_context()
    writes = mmio.writes
    for bad in (ctx[:-1], ctx + b"\0", b"\1"):
        with pytest.raises(ServiceStateError, match=f"is 6 bytes.*got {len(bad)} bytes"):
            driver.restore_context(bad)
    for bad in (b"\x02" + ctx[1:], ctx[:1] + b"\x01" + ctx[2:], ctx[:4] + b"\x00\x59"):
        with pytest.raises(ServiceStateError, match="malformed context"):
            driver.restore_context(bad)
    with pytest.raises(ServiceArgumentError):
        driver.restore_context(None)  # type: ignore[arg-type]
    assert mmio.writes == writes
    assert driver.save_context() == ctx


def test_stateless_arithmetic_drivers_declare_no_context() -> None:
    for driver in (arith.AdderDriver, arith.MultiplierDriver):
        assert not hasattr(driver, "save_context")
        assert not hasattr(driver, "restore_context")


def test_the_tdes_example_module_driver_has_the_operations() -> None:
    spec = importlib.util.spec_from_file_location(
        "_test_contexts_tdes_module", EXAMPLES / "tdes" / "tdes_module.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    driver_cls = module.TdesDriver
    assert callable(driver_cls.save_context) and callable(driver_cls.restore_context)


# -- the Linux backend: a UIO window over the fake kernel's register file -----------------------


@pytest.fixture
def uio_fabric(tmp_path: Path) -> Iterator[Fabric]:
    kernel = FakeKernel(tmp_path, part=PART, family="virtex2p", shell_loaded=True)
    data = build_bitstream("tdes", PART, "prr0", 149_088)
    with open_fabric("xupv2p", backend="linux", sysfs=kernel) as fab:
        fab.program("prr0", parse_bitstream(data, source="tdes.bit"), data)
        yield fab


def test_contexts_on_the_linux_backend(uio_fabric: Fabric, tmp_path: Path) -> None:
    mmio = uio_fabric.window("prr0")
    driver = TdesDriver(mmio)
    driver.load_key(TDES_A)
    ctx_a = driver.save_context()
    assert ctx_a == bytes([1, 3, 1, 0]) + TDES_A  # read back from the mapped registers
    driver.load_key(TDES_B)
    assert key_words(mmio, 3) == TDES_B
    ctx_b = driver.save_context()

    driver.restore_context(ctx_a)
    assert key_words(mmio, 3) == TDES_A
    assert driver.save_context() == ctx_a
    raw = (tmp_path / "dev/uio0").read_bytes()
    words = struct.unpack_from("=6I", raw, reg.KEY_HI[0])  # the file holds native words
    assert b"".join(w.to_bytes(4, "big") for w in words) == TDES_A

    driver.restore_context(ctx_b)
    assert driver.save_context() == ctx_b
    driver.restore_context(b"")
    assert key_words(mmio, 3) == bytes(24)
    with pytest.raises(KeyNotLoadedError):
        encrypted(driver)
