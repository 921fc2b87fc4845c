"""Encryption service: argument errors, key handling, the core models and the drivers."""

from __future__ import annotations

import importlib
import threading
from array import array
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from juggle.errors import (
    BlockSizeError,
    BufferSizeError,
    CoreTimeoutError,
    KeyLengthError,
    KeyNotLoadedError,
    ServiceArgumentError,
)
from juggle.fabric.sim.model import RegisterModel
from juggle.runtime.interfaces import interface_methods
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
from juggle.services.crypto import registers as reg

WindowFactory = Callable[..., Any]  # the `window` fixture (conftest.py)

KEY8 = bytes.fromhex("133457799BBCDFF1")
KEY24 = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")


def des_tiers(window: WindowFactory) -> list[EncryptionService]:
    return [SoftwareDES(), NativeDES(), DesDriver(window(DesCore()))]


def tdes_tiers(window: WindowFactory) -> list[EncryptionService]:
    return [SoftwareTDES(), NativeTDES(), TdesDriver(window(TdesCore()))]


def test_interface_marks_load_key_as_state_setting() -> None:
    specs = {m.name: m.state_setting for m in interface_methods(EncryptionService)}
    assert specs == {"load_key": True, "encrypt": False, "decrypt": False}


# -- keys -------------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [0, 7, 9, 16, 24])
def test_des_rejects_wrong_key_length(length: int, window: WindowFactory) -> None:
    for service in des_tiers(window):
        with pytest.raises(KeyLengthError, match=f"got {length} bytes") as info:
            service.load_key(bytes(length))
        assert (info.value.argument, info.value.value) == ("key", length)
        assert isinstance(info.value, ServiceArgumentError)
        assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("length", [0, 8, 15, 17, 23, 25, 32])
def test_tdes_rejects_wrong_key_length(length: int, window: WindowFactory) -> None:
    for service in tdes_tiers(window):
        with pytest.raises(KeyLengthError, match=f"16 or 24 bytes long, got {length} bytes"):
            service.load_key(bytes(length))


def test_non_bytes_key_is_rejected(window: WindowFactory) -> None:
    for service in des_tiers(window):
        with pytest.raises(KeyLengthError, match="bytes-like"):
            service.load_key(12345678)  # type: ignore[arg-type]


def test_bad_key_keeps_the_previous_key(window: WindowFactory) -> None:
    expected = bytes.fromhex("85E813540F0AB405")
    for service in des_tiers(window):
        service.load_key(KEY8)
        with pytest.raises(KeyLengthError):
            service.load_key(b"short")
        buf = bytearray.fromhex("0123456789ABCDEF")
        service.encrypt(buf, 8)
        assert bytes(buf) == expected, service


def test_driver_validates_key_before_touching_registers(window: WindowFactory) -> None:
    win = window(TdesCore())
    driver = TdesDriver(win)
    with pytest.raises(KeyLengthError):
        driver.load_key(bytes(20))
    assert win.writes == 0 and win.reads == 0


@pytest.mark.parametrize("op", ["encrypt", "decrypt"])
def test_encrypt_before_load_key(op: str, window: WindowFactory) -> None:
    for service in des_tiers(window) + tdes_tiers(window):
        buf = bytearray(16)
        with pytest.raises(KeyNotLoadedError, match="load_key"):
            getattr(service, op)(buf, 16)
        assert buf == bytearray(16)


# -- sizes and buffers ------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 7, 9, 15])
def test_size_not_a_block_multiple(size: int, window: WindowFactory) -> None:
    for service in des_tiers(window) + tdes_tiers(window):
        service.load_key(KEY24 if "TDES" in type(service).__name__.upper() else KEY8)
        buf = bytearray(range(16))
        with pytest.raises(BlockSizeError, match=f"multiple of the 8-byte block, got {size}"):
            service.encrypt(buf, size)
        assert buf == bytearray(range(16))


@pytest.mark.parametrize("size", [-8, -1, 24, 1000])
def test_size_negative_or_beyond_buffer(size: int, window: WindowFactory) -> None:
    for service in des_tiers(window):
        service.load_key(KEY8)
        buf = bytearray(16)
        with pytest.raises(
            BufferSizeError, match=f"between 0 and the buffer length 16, got {size}"
        ):
            service.decrypt(buf, size)
        assert buf == bytearray(16)


@pytest.mark.parametrize("size", [8.0, "8", True, None])
def test_size_must_be_an_int(size: object, window: WindowFactory) -> None:
    for service in des_tiers(window):
        service.load_key(KEY8)
        with pytest.raises(ServiceArgumentError, match='"size" must be an int'):
            service.encrypt(bytearray(8), size)  # type: ignore[arg-type]


def test_read_only_buffer_is_rejected(window: WindowFactory) -> None:
    for service in des_tiers(window):
        service.load_key(KEY8)
        with pytest.raises(ServiceArgumentError, match="writable"):
            service.encrypt(bytes(8), 8)  # type: ignore[arg-type]
        with pytest.raises(ServiceArgumentError, match="writable"):
            service.encrypt(memoryview(bytes(8)), 8)
        with pytest.raises(ServiceArgumentError, match="bytes-like"):
            service.encrypt([0] * 8, 8)  # type: ignore[arg-type]


def test_zero_size_and_typed_buffers(window: WindowFactory) -> None:
    results = []
    for service in des_tiers(window):
        service.load_key(KEY8)
        assert service.encrypt(bytearray(), 0) == 0
        words = array("I", range(6))  # 24 bytes; encrypt the first two blocks
        assert service.encrypt(memoryview(words), 16) == 16
        assert words[4:] == array("I", [4, 5])
        results.append(words.tobytes())
    assert results[0] == results[1] == results[2]


# -- models -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("core", "design", "latency", "core_id", "resources"),
    [
        (DesCore, "des", 16, reg.ID_DES, {"slices": 744, "flipflops": 441, "mult18": 0}),
        (TdesCore, "tdes", 48, reg.ID_TDES, {"slices": 830, "flipflops": 625, "mult18": 0}),
    ],
)
def test_core_identity(
    core: type[RegisterModel],
    design: str,
    latency: int,
    core_id: int,
    resources: dict[str, int],
) -> None:
    model = core()
    assert model.design == design
    assert model.window_size == reg.WINDOW_SIZE
    assert model.read(reg.LATENCY, 0) == latency
    assert model.read(reg.ID, 0) == core_id
    assert core.resources == {**resources, "ram16": 0}  # type: ignore[attr-defined]
    assert model.read(reg.STATUS, 0) == 0  # neither busy nor done at power-on


def load_key_regs(model: RegisterModel, key: bytes, now: int = 0) -> None:
    for i in range(len(key) // 8):
        model.write(reg.KEY_HI[i], int.from_bytes(key[8 * i : 8 * i + 4], "big"), now)
        model.write(reg.KEY_LO[i], int.from_bytes(key[8 * i + 4 : 8 * i + 8], "big"), now)


def start_block(model: RegisterModel, block: int, now: int, decrypt: bool = False) -> None:
    model.write(reg.DATA_HI, block >> 32, now)
    model.write(reg.DATA_LO, block & 0xFFFFFFFF, now)
    model.write(reg.CONTROL, reg.CTRL_START | (reg.CTRL_DECRYPT if decrypt else 0), now)


def result(model: RegisterModel, now: int) -> int:
    return (model.read(reg.RESULT_HI, now) << 32) | model.read(reg.RESULT_LO, now)


@pytest.mark.parametrize(("core", "latency"), [(DesCore, 16), (TdesCore, 48)])
def test_core_is_busy_for_its_latency(core: type[RegisterModel], latency: int) -> None:
    model = core()
    load_key_regs(model, KEY24 if latency == 48 else KEY8)
    start_block(model, 0x0123456789ABCDEF, now=100)
    for now in (100, 100 + latency // 2, 100 + latency - 1):
        assert model.read(reg.STATUS, now) == reg.STATUS_BUSY
        assert result(model, now) == 0  # result registers still show the old value
    assert model.read(reg.STATUS, 100 + latency) == reg.STATUS_DONE
    first = result(model, 100 + latency)
    assert first != 0
    # decrypting it again gives the block back
    start_block(model, first, now=200, decrypt=True)
    assert result(model, 200 + latency) == 0x0123456789ABCDEF


def test_des_core_computes_the_published_answer() -> None:
    model = DesCore()
    load_key_regs(model, KEY8)
    start_block(model, 0x0123456789ABCDEF, now=0)
    assert result(model, 16) == 0x85E813540F0AB405


def test_start_while_busy_is_ignored() -> None:
    model = DesCore()
    load_key_regs(model, KEY8)
    start_block(model, 0x0123456789ABCDEF, now=0)
    start_block(model, 0, now=5)  # ignored: still busy until cycle 16
    assert model.read(reg.STATUS, 15) == reg.STATUS_BUSY
    assert result(model, 16) == 0x85E813540F0AB405


def test_keys_and_data_read_back() -> None:
    model = TdesCore()
    load_key_regs(model, KEY24)
    keys = [model.read(off, 0) for i in range(3) for off in (reg.KEY_HI[i], reg.KEY_LO[i])]
    assert b"".join(w.to_bytes(4, "big") for w in keys) == KEY24  # for the context save
    des = DesCore()
    load_key_regs(des, KEY24)  # the DES core maps KEY1 only
    assert [des.read(off, 0) for off in (reg.KEY_HI[0], reg.KEY_LO[0])] == keys[:2]
    assert all(des.read(off, 0) == 0 for off in reg.KEY_HI[1:] + reg.KEY_LO[1:])
    model.write(reg.DATA_HI, 0xDEADBEEF, 0)
    assert model.read(reg.DATA_HI, 0) == 0xDEADBEEF
    assert model.read(0x18, 0) == 0  # unmapped


def test_des_core_ignores_keys_2_and_3() -> None:
    model = DesCore()
    load_key_regs(model, KEY8 + b"\xff" * 16)
    start_block(model, 0x0123456789ABCDEF, now=0)
    assert result(model, 16) == 0x85E813540F0AB405


def test_context_save_restore_moves_key_and_result() -> None:
    model = TdesCore()
    load_key_regs(model, KEY24)
    start_block(model, 0x1122334455667788, now=0)
    context = model.save_context()  # completes the running block
    fresh = TdesCore()
    fresh.restore_context(context)
    assert fresh.read(reg.STATUS, 0) == reg.STATUS_DONE
    assert result(fresh, 0) == result(model, 48)
    start_block(fresh, 0xAABBCCDDEEFF0011, now=10)
    start_block(model, 0xAABBCCDDEEFF0011, now=100)
    assert result(fresh, 58) == result(model, 148)
    model.reset()
    assert model.read(reg.STATUS, 0) == 0 and result(model, 0) == 0


def test_cores_resolve_at_the_catalog_paths() -> None:
    for target, design in [
        ("juggle.services.crypto.model:DesCore", "des"),
        ("juggle.services.crypto.model:TdesCore", "tdes"),
    ]:
        module, _, attr = target.partition(":")
        assert getattr(importlib.import_module(module), attr).design == design


# -- drivers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("driver", "core", "latency"), [(DesDriver, DesCore, 16), (TdesDriver, TdesCore, 48)]
)
def test_driver_register_protocol_per_block(
    driver: type[DesDriver], core: type[RegisterModel], latency: int, window: WindowFactory
) -> None:
    win = window(core())
    service = driver(win)
    service.load_key(KEY24[: 8 if latency == 16 else 24])
    writes = win.writes
    blocks = 10
    buf = bytearray(8 * blocks)
    start = win.now
    service.encrypt(buf, len(buf))
    assert win.writes - writes == 3 * blocks  # DATA_HI, DATA_LO, CONTROL
    # each block: 2 result reads and status polls until the latency has elapsed
    per_block = (win.now - start) / blocks
    assert latency <= per_block <= latency + 6


def test_driver_times_out_on_a_dead_core(window: WindowFactory) -> None:
    class DeadCore(RegisterModel):
        design: ClassVar[str] = "dead"
        window_size: ClassVar[int] = reg.WINDOW_SIZE

        def read(self, offset: int, now: int) -> int:
            return reg.STATUS_BUSY if offset == reg.STATUS else 0

        def write(self, offset: int, value: int, now: int) -> None:
            pass

    driver = DesDriver(window(DeadCore()), max_polls=50)
    driver.load_key(KEY8)
    buf = bytearray(range(16))
    with pytest.raises(CoreTimeoutError, match="not DONE after 50 status reads"):
        driver.encrypt(buf, 16)
    assert buf == bytearray(range(16))  # nothing written back


def test_concurrent_callers_do_not_interleave(window: WindowFactory) -> None:
    driver = TdesDriver(window(TdesCore(), yield_gil=True))
    reference = NativeTDES()
    driver.load_key(KEY24)
    reference.load_key(KEY24)
    errors: list[str] = []

    def worker(seed: int) -> None:
        for round_ in range(3):
            data = bytes((seed * 31 + round_ * 7 + i) & 0xFF for i in range(64))
            buf, ref = bytearray(data), bytearray(data)
            driver.encrypt(buf, 64)
            reference.encrypt(ref, 64)
            if buf != ref:
                errors.append(f"thread {seed} round {round_}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_reprs_show_key_state(window: WindowFactory) -> None:
    for service in des_tiers(window):
        assert "no key" in repr(service)
        service.load_key(KEY8)
        assert "key loaded" in repr(service)
