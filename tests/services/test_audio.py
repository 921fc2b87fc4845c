"""audio.DecoderService: IMA ADPCM decoding, the core model, the driver and state carry-over."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from juggle.errors import CoreTimeoutError, ServiceArgumentError
from juggle.runtime.interfaces import interface_methods
from juggle.services import audio
from juggle.services.audio import (
    STEP_TABLE,
    AdpcmCore,
    AdpcmDriver,
    DecoderService,
    SoftwareAdpcmDecoder,
    decode_ima_adpcm,
    encode_ima_adpcm,
    sine_sweep,
)

WindowFactory = Callable[..., Any]  # the `window` fixture (conftest.py)


def pcm(data: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(data) // 2}h", data))


def test_interface_marks_reset_as_state_setting() -> None:
    specs = {m.name: m.state_setting for m in interface_methods(DecoderService)}
    assert specs == {"reset": True, "decode": False}


def test_tables() -> None:
    assert len(STEP_TABLE) == 89
    assert (STEP_TABLE[0], STEP_TABLE[-1]) == (7, 32767)
    assert list(STEP_TABLE) == sorted(STEP_TABLE)


def test_hand_computed_codes() -> None:
    # index 0, step 7: code 7 -> +(0+7+3+1)=11, index 8; code 15 at step 16 -> -(2+16+8+4),
    # index 16; code 0 at step 34 -> +4, index 15; code 0 at step 31 -> +3, index 14.
    decoder = SoftwareAdpcmDecoder()
    assert pcm(decoder.decode(b"\xf7\x00")) == [11, -19, -15, -12]
    assert decoder.juggle_save_state() == (-12, 14)


def test_clamps_at_the_16_bit_limits() -> None:
    decoder = SoftwareAdpcmDecoder()
    assert pcm(decoder.decode(b"\x77" * 200))[-1] == 32767
    assert pcm(decoder.decode(b"\xff" * 400))[-1] == -32768
    assert decoder.juggle_save_state()[1] == 88


def test_round_trip_is_close_to_the_input() -> None:
    signal = sine_sweep(0.5, rate=8000, f0=220.0, f1=2000.0)
    assert signal.dtype == np.int16 and len(signal) == 4000
    coded = encode_ima_adpcm(signal)
    assert len(coded) == 2000  # 4 bits per sample
    decoded = np.frombuffer(SoftwareAdpcmDecoder().decode(coded), "<i2").astype(float)
    error = decoded - signal
    snr = 10 * np.log10(np.mean(signal.astype(float) ** 2) / np.mean(error**2))
    assert snr > 20
    assert np.max(np.abs(error[200:])) < 0.15 * 32767  # after the step size has adapted


def test_sine_sweep_seed_is_reproducible_noise() -> None:
    plain = sine_sweep(0.1)
    a, b, c = sine_sweep(0.1, seed=1), sine_sweep(0.1, seed=1), sine_sweep(0.1, seed=2)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    noise = a.astype(float) - plain
    assert 100 < np.std(noise) < 600  # about 1% of full scale
    tone = sine_sweep(0.01, f0=1000.0, f1=1000.0, amplitude=1.0)
    assert tone.max() <= 32767 and tone[2] == 32767  # 1 kHz at 8 kHz: a peak every 8 samples


def test_encoder_pads_odd_lengths_and_checks_range() -> None:
    assert len(encode_ima_adpcm([0, 100, 200])) == 2
    with pytest.raises(ServiceArgumentError, match="16-bit, got 40000"):
        encode_ima_adpcm([0, 40000])
    with pytest.raises(ServiceArgumentError, match="sine_sweep"):
        sine_sweep(0.0)


def test_decode_is_stateful_across_calls() -> None:
    data = encode_ima_adpcm(sine_sweep(0.1))
    whole = SoftwareAdpcmDecoder().decode(data)
    split = SoftwareAdpcmDecoder()
    assert split.decode(data[:137]) + split.decode(data[137:]) == whole
    out, state = decode_ima_adpcm(data[:137])
    rest, _ = decode_ima_adpcm(data[137:], state)
    assert out + rest == whole


def test_reset_starts_a_new_stream(window: WindowFactory) -> None:
    data = os.urandom(64)
    for decoder in (SoftwareAdpcmDecoder(), AdpcmDriver(window(AdpcmCore()))):
        first = decoder.decode(data)
        assert decoder.decode(data) != first
        decoder.reset()
        assert decoder.decode(data) == first


def test_software_and_hardware_are_bit_exact(window: WindowFactory) -> None:
    data = os.urandom(1001) + encode_ima_adpcm(sine_sweep(0.2))
    software = SoftwareAdpcmDecoder()
    hardware = AdpcmDriver(window(AdpcmCore()))
    offset = 0
    for size in (1, 3, 4, 5, 7, 8, 13, 250, 1000):  # partial words exercise COUNT
        chunk = data[offset : offset + size]
        assert hardware.decode(chunk) == software.decode(chunk)
        offset += size
    assert hardware.decode(data[offset:]) == software.decode(data[offset:])
    assert hardware.juggle_save_state() == software.juggle_save_state()


@pytest.mark.parametrize("direction", ["software->hardware", "hardware->software"])
def test_state_carried_across_a_mid_stream_switch(direction: str, window: WindowFactory) -> None:
    data = encode_ima_adpcm(sine_sweep(0.25))
    unswitched = SoftwareAdpcmDecoder().decode(data)
    software = SoftwareAdpcmDecoder()
    hardware = AdpcmDriver(window(AdpcmCore()))
    first, second = (
        (software, hardware) if direction.startswith("software") else (hardware, software)
    )
    head = first.decode(data[:321])
    second.juggle_restore_state(first.juggle_save_state())
    assert head + second.decode(data[321:]) == unswitched


def test_switch_without_state_would_differ(window: WindowFactory) -> None:
    """The carry-over matters: a fresh decoder continuing mid-stream gives other samples."""
    data = encode_ima_adpcm(sine_sweep(0.25))
    software = SoftwareAdpcmDecoder()
    software.decode(data[:321])
    assert AdpcmDriver(window(AdpcmCore())).decode(data[321:]) != software.decode(data[321:])


@pytest.mark.parametrize("bad", [(40000, 0), (0, 89), (0, -1), [0, 0], (0.5, 1), (1, 2, 3)])
def test_restore_rejects_bad_state(bad: object, window: WindowFactory) -> None:
    win = window(AdpcmCore())
    for decoder in (SoftwareAdpcmDecoder(), AdpcmDriver(win)):
        with pytest.raises(ServiceArgumentError, match='"state" must be'):
            decoder.juggle_restore_state(bad)  # type: ignore[arg-type]
    assert win.writes == 0


def test_decode_rejects_non_bytes(window: WindowFactory) -> None:
    for decoder in (SoftwareAdpcmDecoder(), AdpcmDriver(window(AdpcmCore()))):
        with pytest.raises(ServiceArgumentError, match='"data" must be bytes-like'):
            decoder.decode("abc")  # type: ignore[arg-type]
        decoder.reset()
        assert decoder.decode(memoryview(b"\xf7\x00")) == SoftwareAdpcmDecoder().decode(b"\xf7\x00")
        decoder.reset()
        assert decoder.decode(bytearray(b"\xf7")) == SoftwareAdpcmDecoder().decode(b"\xf7")


def test_core_timing_one_cycle_per_sample() -> None:
    core = AdpcmCore()
    core.write(audio.COUNT, 6, 0)
    core.write(audio.DATA, 0x00F7F7, 10)
    assert core.read(audio.STATUS, 15) == audio.STATUS_BUSY
    assert core.read(audio.PCM[0], 15) == 0  # previous word's samples until done
    core.write(audio.PREDICTOR, 1234, 12)  # ignored while busy
    assert core.read(audio.STATUS, 16) == audio.STATUS_DONE
    words = [core.read(reg, 16) for reg in audio.PCM[:3]]
    samples = pcm(b"".join(w.to_bytes(4, "little") for w in words))
    assert samples == pcm(SoftwareAdpcmDecoder().decode(b"\xf7\xf7\x00"))
    assert core.read(audio.PREDICTOR, 16) == samples[-1] & 0xFFFFFFFF
    assert core.samples == 6


def test_core_context_and_identity() -> None:
    core = AdpcmCore()
    assert core.design == "adpcm"
    assert core.resources["slices"] <= 2240 and core.resources["mult18"] <= 20
    core.write(audio.PREDICTOR, (-300) & 0xFFFFFFFF, 0)
    core.write(audio.STEP_INDEX, 200, 0)  # clamped
    assert core.read(audio.PREDICTOR, 0) == (-300) & 0xFFFFFFFF
    assert core.read(audio.STEP_INDEX, 0) == 88
    fresh = AdpcmCore()
    fresh.restore_context(core.save_context())
    assert (fresh.read(audio.PREDICTOR, 0), fresh.read(audio.STEP_INDEX, 0)) == (
        (-300) & 0xFFFFFFFF,
        88,
    )
    core.write(audio.CONTROL, audio.CTRL_RESET, 1)
    assert (core.read(audio.PREDICTOR, 1), core.read(audio.STEP_INDEX, 1)) == (0, 0)


def test_driver_feeds_whole_words(window: WindowFactory) -> None:
    core = AdpcmCore()
    win = window(core)
    driver = AdpcmDriver(win)
    driver.decode(bytes(400))
    assert core.samples == 800
    data_writes = win.writes - 1  # one COUNT write up front
    assert data_writes == 100  # 4 bytes = 8 codes per DATA write


def test_driver_times_out_when_the_core_stays_busy(window: WindowFactory) -> None:
    class StuckCore(AdpcmCore):
        def read(self, offset: int, now: int) -> int:
            return audio.STATUS_BUSY if offset == audio.STATUS else 0

    with pytest.raises(CoreTimeoutError, match="BUSY after 20 status reads"):
        AdpcmDriver(window(StuckCore()), max_polls=20).decode(b"\x00" * 8)
