"""The ``audio.DecoderService`` reference service: IMA ADPCM (4-bit) decoding for the music player.

IMA ADPCM stores each 16-bit sample as a 4-bit code: the decoder keeps a *predictor* (the last
sample) and a *step index* into an 89-entry step table, and each code moves the predictor by a
fraction of the current step and the index up or down. A stream packs two codes per byte, the
earlier sample in the low nibble (the WAV/IMA convention); ``decode`` turns such bytes into
16-bit little-endian PCM, two samples per input byte, and carries the decoder state from one
call to the next. ``reset`` returns to the start-of-stream state (predictor 0, index 0).

Tiers: :class:`SoftwareAdpcmDecoder` (pure Python, table driven) and :class:`AdpcmDriver` over
an MMIO window, backed on the simulated fabric by :class:`AdpcmCore`. Both offer
``juggle_save_state()`` → ``(predictor, step_index)`` and ``juggle_restore_state(state)``, so a
stream switched between tiers mid-way decodes exactly as if it had not been switched.
:class:`AdpcmDriver` also offers the context operations of a core time-multiplexed among
consumers, ``save_context()`` → bytes and ``restore_context(data)``, built from its own
register accesses (PREDICTOR, STEP_INDEX, CONTROL, COUNT), so they work on every backend.
Context layout, big-endian, version 1, 6 bytes::

    byte 0        version, 1
    byte 1        reserved, 0
    bytes 2..3    predictor, signed 16-bit two's complement
    bytes 4..5    step index, unsigned 16-bit, 0..88

``restore_context(b"")`` is the power-on state: predictor 0, step index 0, COUNT 8. The read-only
PCM registers keep the last word's samples until the next DATA word overwrites them, before the
driver reads them again; a driver finishes every word inside one call, so they are no context.
:func:`encode_ima_adpcm` and :func:`sine_sweep` make test and demo audio.

Register map of the ADPCM core (byte offsets, 32-bit registers):

=====  ==========  ====  ==================================================================
0x00   CONTROL     W     bit 0 RESET: predictor 0, step index 0 (ignored while BUSY)
0x04   STATUS      R     bit 0 BUSY, bit 1 DONE (PCM registers hold the last word's samples)
0x08   COUNT       R/W   codes taken from the next DATA word, 1..8 (0 or >8 means 8)
0x0C   DATA        W     packed codes, first sample in bits 3..0; writing starts decoding
0x10   PCM0        R     samples 0 (bits 15..0) and 1 (bits 31..16) of the last word
0x14   PCM1        R     samples 2 and 3
0x18   PCM2        R     samples 4 and 5
0x1C   PCM3        R     samples 6 and 7
0x20   PREDICTOR   R/W   predictor, 16-bit two's complement (sign-extended on read)
0x24   STEP_INDEX  R/W   step index 0..88 (writes are clamped)
0x38   LATENCY     R     core cycles per sample (1)
0x3C   ID          R     ``ID_ADPCM`` (0x41445043, "ADPC")
=====  ==========  ====  ==================================================================

Timing: a DATA write at cycle ``t`` with COUNT codes is done at ``t + COUNT`` (one sample per
cycle); until then STATUS reads BUSY and the PCM, PREDICTOR and STEP_INDEX registers show the
previous word's values. Writes other than COUNT while BUSY are ignored.
"""

from __future__ import annotations

import struct
import sys
import threading
from array import array
from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np

from juggle.errors import CoreTimeoutError, ServiceArgumentError, ServiceStateError
from juggle.fabric.mmio import MMIO
from juggle.fabric.sim.model import RegisterModel
from juggle.runtime.interfaces import state_setting

__all__ = [
    "AdpcmCore",
    "AdpcmDriver",
    "DecoderService",
    "INDEX_TABLE",
    "STEP_TABLE",
    "SoftwareAdpcmDecoder",
    "decode_ima_adpcm",
    "encode_ima_adpcm",
    "sine_sweep",
]

#: The IMA ADPCM step sizes (89 entries).
STEP_TABLE: tuple[int, ...] = (
    7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 19, 21, 23, 25, 28, 31, 34, 37, 41, 45,
    50, 55, 60, 66, 73, 80, 88, 97, 107, 118, 130, 143, 157, 173, 190, 209, 230, 253, 279, 307,
    337, 371, 408, 449, 494, 544, 598, 658, 724, 796, 876, 963, 1060, 1166, 1282, 1411, 1552,
    1707, 1878, 2066, 2272, 2499, 2749, 3024, 3327, 3660, 4026, 4428, 4871, 5358, 5894, 6484,
    7132, 7845, 8630, 9493, 10442, 11487, 12635, 13899, 15289, 16818, 18500, 20350, 22385,
    24623, 27086, 29794, 32767,
)  # fmt: skip

#: Step-index adjustment per 4-bit code.
INDEX_TABLE: tuple[int, ...] = (-1, -1, -1, -1, 2, 4, 6, 8) * 2

_MAX_INDEX = len(STEP_TABLE) - 1
_PCM_MIN, _PCM_MAX = -32768, 32767

State = tuple[int, int]  # (predictor, step index)
ByteData = bytes | bytearray | memoryview  # what decode() takes


def _delta(step: int, code: int) -> int:
    """The signed predictor change of ``code`` at ``step`` (the standard shift-and-add form)."""
    diff = step >> 3
    if code & 4:
        diff += step
    if code & 2:
        diff += step >> 1
    if code & 1:
        diff += step >> 2
    return -diff if code & 8 else diff


#: (index * 16 + code) -> predictor change, and -> next index * 16.
_DELTA = tuple(_delta(step, c) for step in STEP_TABLE for c in range(16))
_NEXT16 = tuple(
    16 * min(max(i + INDEX_TABLE[c], 0), _MAX_INDEX)
    for i in range(_MAX_INDEX + 1)
    for c in range(16)
)


def _check_state(state: object) -> State:
    """``state`` as (predictor, index); :class:`ServiceArgumentError` if out of range."""
    if (
        not isinstance(state, tuple)
        or len(state) != 2
        or not all(type(v) is int for v in state)
        or not _PCM_MIN <= state[0] <= _PCM_MAX
        or not 0 <= state[1] <= _MAX_INDEX
    ):
        raise ServiceArgumentError(
            f'"state" must be (predictor in [-32768, 32767], step index in [0, 88]), got {state!r}',
            argument="state",
        )
    return state[0], state[1]


def _as_bytes(data: object) -> ByteData:
    """``data`` as a byte buffer; :class:`ServiceArgumentError` if it is not bytes-like."""
    if isinstance(data, bytes | bytearray):
        return data
    try:
        return memoryview(data).cast("B")  # type: ignore[arg-type]
    except TypeError:
        raise ServiceArgumentError(
            f'"data" must be bytes-like, got {type(data).__name__}', argument="data"
        ) from None


def _decode(data: Iterable[int], predictor: int, index: int) -> tuple[array[int], State]:
    """Decode packed codes from (predictor, index); the samples and the final state."""
    delta, next16 = _DELTA, _NEXT16
    out = array("h")
    append = out.append
    pred, idx16 = predictor, index * 16
    for byte in data:
        k = idx16 + (byte & 15)
        pred += delta[k]
        if pred > 32767:
            pred = 32767
        elif pred < -32768:
            pred = -32768
        append(pred)
        k = next16[k] + (byte >> 4)
        pred += delta[k]
        if pred > 32767:
            pred = 32767
        elif pred < -32768:
            pred = -32768
        append(pred)
        idx16 = next16[k]
    return out, (pred, idx16 // 16)


def _pcm_bytes(samples: array[int]) -> bytes:
    """Samples as 16-bit little-endian bytes."""
    if sys.byteorder != "little":
        samples.byteswap()
    return samples.tobytes()


def decode_ima_adpcm(data: ByteData, state: State = (0, 0)) -> tuple[bytes, State]:
    """Decode a packed IMA ADPCM stream from ``state``; 16-bit LE PCM and the final state.

    Raises :class:`ServiceArgumentError` if ``data`` is not bytes-like or ``state`` is invalid.
    """
    predictor, index = _check_state(state)
    samples, final = _decode(_as_bytes(data), predictor, index)
    return _pcm_bytes(samples), final


def encode_ima_adpcm(samples: Iterable[int] | np.ndarray[Any, Any], state: State = (0, 0)) -> bytes:
    """Encode 16-bit samples as a packed IMA ADPCM stream (earlier sample in the low nibble).

    The encoder tracks the decoder's state, so decoding from the same ``state`` reproduces the
    input closely. An odd number of samples is padded by repeating the last one. Raises
    :class:`ServiceArgumentError` for a sample outside the 16-bit range or an invalid ``state``.
    """
    values = [int(v) for v in samples]
    if any(not _PCM_MIN <= v <= _PCM_MAX for v in values):
        bad = next(v for v in values if not _PCM_MIN <= v <= _PCM_MAX)
        raise ServiceArgumentError(f"samples must be 16-bit, got {bad}", value=bad)
    if len(values) % 2:
        values.append(values[-1])
    pred, index = _check_state(state)
    codes = []
    for sample in values:
        step = STEP_TABLE[index]
        diff = sample - pred
        code = 8 if diff < 0 else 0
        diff = abs(diff)
        if diff >= step:
            code |= 4
            diff -= step
        if diff >= step >> 1:
            code |= 2
            diff -= step >> 1
        if diff >= step >> 2:
            code |= 1
        pred = min(max(pred + _DELTA[index * 16 + code], _PCM_MIN), _PCM_MAX)
        index = _NEXT16[index * 16 + code] // 16
        codes.append(code)
    return bytes(lo | (hi << 4) for lo, hi in zip(codes[0::2], codes[1::2], strict=True))


def sine_sweep(
    seconds: float,
    rate: int = 8000,
    f0: float = 220.0,
    f1: float = 2000.0,
    amplitude: float = 0.5,
    seed: int | None = None,
) -> np.ndarray[Any, np.dtype[np.int16]]:
    """A logarithmic sine sweep from ``f0`` to ``f1`` Hz as 16-bit samples (demo/test audio).

    With a ``seed``, soft white noise (1% of full scale, from ``numpy.random.default_rng(seed)``)
    is mixed in, so different seeds give different but reproducible signals.
    Raises :class:`ServiceArgumentError` for a non-positive duration, rate or frequency, or an
    amplitude outside (0, 1].
    """
    if seconds <= 0 or rate <= 0 or f0 <= 0 or f1 <= 0 or not 0 < amplitude <= 1:
        raise ServiceArgumentError(
            f"sine_sweep needs seconds, rate, f0, f1 > 0 and 0 < amplitude <= 1, got "
            f"seconds={seconds}, rate={rate}, f0={f0}, f1={f1}, amplitude={amplitude}"
        )
    t = np.arange(round(seconds * rate)) / rate
    k = np.log(f1 / f0) / seconds
    phase = 2 * np.pi * f0 * (np.exp(k * t) - 1) / k if f1 != f0 else 2 * np.pi * f0 * t
    wave = amplitude * 32767 * np.sin(phase)
    if seed is not None:
        wave += np.random.default_rng(seed).normal(0.0, 0.01 * 32767, len(t))
    samples: np.ndarray[Any, np.dtype[np.int16]] = np.clip(
        np.round(wave), _PCM_MIN, _PCM_MAX
    ).astype(np.int16)
    return samples


# -- interface --------------------------------------------------------------------------------


class DecoderService:
    """Decodes a compressed audio stream to 16-bit PCM, keeping stream state between calls."""

    @state_setting
    def reset(self) -> None:
        """Start a new stream (forget the decoder state)."""
        raise NotImplementedError

    def decode(self, data: ByteData) -> bytes:
        """Decode the next piece of the stream to 16-bit little-endian PCM.

        Raises :class:`~juggle.errors.ServiceArgumentError` if ``data`` is not bytes-like.
        """
        raise NotImplementedError


# -- software tier ----------------------------------------------------------------------------


class SoftwareAdpcmDecoder(DecoderService):
    """IMA ADPCM decoding in pure Python with precomputed (index, code) tables."""

    def __init__(self) -> None:
        self._state: State = (0, 0)

    def reset(self) -> None:
        """Predictor 0, step index 0."""
        self._state = (0, 0)

    def decode(self, data: ByteData) -> bytes:
        """Two PCM samples per input byte; errors as :meth:`DecoderService.decode`."""
        samples, self._state = _decode(_as_bytes(data), *self._state)
        return _pcm_bytes(samples)

    def juggle_save_state(self) -> State:
        """The decoder state (predictor, step index) to carry to another tier."""
        return self._state

    def juggle_restore_state(self, state: State) -> None:
        """Continue from a state saved by any tier. Raises :class:`ServiceArgumentError`."""
        self._state = _check_state(state)

    def __repr__(self) -> str:
        return f"<SoftwareAdpcmDecoder predictor={self._state[0]} index={self._state[1]}>"


# -- hardware model ---------------------------------------------------------------------------

CONTROL = 0x00
STATUS = 0x04
COUNT = 0x08
DATA = 0x0C
PCM = (0x10, 0x14, 0x18, 0x1C)
PREDICTOR = 0x20
STEP_INDEX = 0x24
LATENCY = 0x38
ID = 0x3C
CTRL_RESET = 0x1
STATUS_BUSY = 0x1
STATUS_DONE = 0x2
ID_ADPCM = 0x41445043  # "ADPC"
WINDOW_SIZE = 0x40
DEFAULT_MAX_POLLS = 100_000

_CONTEXT = struct.Struct("<hBB")  # the model's: predictor, step index, count
#: Version byte of the contexts ``AdpcmDriver.save_context`` produces.
CONTEXT_VERSION = 1
_DRIVER_CONTEXT = struct.Struct(">BBhH")  # version, reserved, predictor, step index


class AdpcmCore(RegisterModel):
    """Behavioural model of the IMA ADPCM decoder core: 8 codes per DATA word, 1 cycle each.

    Resources (modeled: Yosys ``synth_xilinx -family xc2vp`` of ``services/hdl/adpcm``, the
    slices a packing estimate): 545 slices, 379 flip-flops, no multiplier (the step is scaled by
    shift-and-add), one RAM16 block holding the step table. Register map: see :mod:`.audio`.
    """

    design: ClassVar[str] = "adpcm"
    window_size: ClassVar[int] = WINDOW_SIZE
    result_offsets: ClassVar[tuple[int, ...]] = PCM
    cycles_per_sample: ClassVar[int] = 1
    resources: ClassVar[dict[str, int]] = {"slices": 545, "flipflops": 379, "mult18": 0, "ram16": 1}

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Power-on state: predictor 0, index 0, COUNT 8, idle."""
        self._state: State = (0, 0)
        self._count = 8
        self._pcm = [0, 0, 0, 0]
        self._pending: tuple[list[int], State] = ([0, 0, 0, 0], (0, 0))
        self._ready_at = 0
        self._busy = False
        self._has_result = False
        #: samples decoded since power-on (statistics only)
        self.samples = 0

    def _settle(self, now: int) -> bool:
        if self._busy and now >= self._ready_at:
            self._pcm, self._state = self._pending
            self._busy = False
        return self._busy

    def read(self, offset: int, now: int) -> int:
        """Register value at cycle ``now`` (see the register map in :mod:`.audio`)."""
        busy = self._settle(now)
        if offset == STATUS:
            return STATUS_BUSY if busy else (STATUS_DONE if self._has_result else 0)
        if offset in PCM:
            return self._pcm[(offset - PCM[0]) // 4]
        if offset == PREDICTOR:
            return self._state[0] & 0xFFFFFFFF
        if offset == STEP_INDEX:
            return self._state[1]
        if offset == COUNT:
            return self._count
        if offset == LATENCY:
            return self.cycles_per_sample
        if offset == ID:
            return ID_ADPCM
        return 0

    def write(self, offset: int, value: int, now: int) -> None:
        """Write a register at cycle ``now``; a DATA write starts decoding COUNT codes."""
        value &= 0xFFFFFFFF
        busy = self._settle(now)
        if offset == COUNT:
            self._count = value if 1 <= value <= 8 else 8
        elif busy:
            return
        elif offset == DATA:
            self._start(value, now)
        elif offset == CONTROL and value & CTRL_RESET:
            self._state = (0, 0)
        elif offset == PREDICTOR:
            low = value & 0xFFFF
            self._state = (low - 0x10000 if low & 0x8000 else low, self._state[1])
        elif offset == STEP_INDEX:
            self._state = (self._state[0], min(value, _MAX_INDEX))

    def _start(self, word: int, now: int) -> None:
        count = self._count
        pred, index = self._state
        words = [0, 0, 0, 0]
        for i in range(count):
            k = index * 16 + ((word >> (4 * i)) & 15)
            pred = min(max(pred + _DELTA[k], _PCM_MIN), _PCM_MAX)
            index = _NEXT16[k] // 16
            words[i // 2] |= (pred & 0xFFFF) << (16 * (i % 2))
        self._pending = (words, (pred, index))
        self._ready_at = now + count * self.cycles_per_sample
        self._busy = self._has_result = True
        self.samples += count

    def save_context(self) -> bytes:
        """Predictor, step index and COUNT (a running word is completed first)."""
        if self._busy:
            self._pcm, self._state = self._pending
            self._busy = False
        return _CONTEXT.pack(self._state[0], self._state[1], self._count)

    def restore_context(self, context: bytes) -> None:
        """Load a context produced by :meth:`save_context`."""
        predictor, index, count = _CONTEXT.unpack(context)
        self.reset()
        self._state = _check_state((predictor, index))
        self._count = count

    def __repr__(self) -> str:
        state = "busy" if self._busy else "idle"
        return f"<AdpcmCore {state}, predictor={self._state[0]} index={self._state[1]}>"


# -- driver -----------------------------------------------------------------------------------


class AdpcmDriver(DecoderService):
    """``audio.DecoderService`` on the ADPCM core: packed code words in, PCM words out."""

    def __init__(self, mmio: MMIO, *, max_polls: int = DEFAULT_MAX_POLLS) -> None:
        self._mmio = mmio
        self._max_polls = max_polls
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Reset the core's predictor and step index."""
        with self._lock:
            self._wait_idle()
            self._mmio.write32(CONTROL, CTRL_RESET)

    def _wait_idle(self) -> None:
        """Poll STATUS until the core is not BUSY; :class:`CoreTimeoutError` after the budget."""
        read = self._mmio.read32
        polls = 0
        while read(STATUS) & STATUS_BUSY:
            polls += 1
            if polls >= self._max_polls:
                raise CoreTimeoutError(f"AdpcmDriver: core still BUSY after {polls} status reads")

    def decode(self, data: ByteData) -> bytes:
        """Decode on the core, one 32-bit word (8 codes) at a time.

        Raises :class:`~juggle.errors.ServiceArgumentError` if ``data`` is not bytes-like and
        :class:`~juggle.errors.CoreTimeoutError` if the core never reports DONE.
        """
        raw = bytes(_as_bytes(data))
        read, write = self._mmio.read32, self._mmio.write32
        out = bytearray()
        with self._lock:
            self._wait_idle()
            count = 8
            write(COUNT, count)
            for offset in range(0, len(raw), 4):
                chunk = raw[offset : offset + 4]
                if 2 * len(chunk) != count:
                    count = 2 * len(chunk)
                    write(COUNT, count)
                write(DATA, int.from_bytes(chunk, "little"))
                self._wait_idle()
                for reg in PCM[: len(chunk)]:
                    out += read(reg).to_bytes(4, "little")
        return bytes(out)

    def juggle_save_state(self) -> State:
        """The core's (predictor, step index), read from its registers.

        Raises :class:`~juggle.errors.CoreTimeoutError` if the core stays BUSY.
        """
        with self._lock:
            return self._read_state()

    def juggle_restore_state(self, state: State) -> None:
        """Write a saved (predictor, step index) into the core.

        Raises :class:`~juggle.errors.ServiceArgumentError` for an invalid state and
        :class:`~juggle.errors.CoreTimeoutError` if the core stays BUSY.
        """
        predictor, index = _check_state(state)
        with self._lock:
            self._write_state(predictor, index)

    def _read_state(self) -> State:
        """(predictor, step index) from the registers once idle; the caller holds the lock."""
        self._wait_idle()
        raw = self._mmio.read32(PREDICTOR) & 0xFFFF
        index = self._mmio.read32(STEP_INDEX)
        return (raw - 0x10000 if raw & 0x8000 else raw, index)

    def _write_state(self, predictor: int, index: int) -> None:
        """Write PREDICTOR and STEP_INDEX once idle; the caller holds the lock."""
        self._wait_idle()
        self._mmio.write32(PREDICTOR, predictor & 0xFFFFFFFF)
        self._mmio.write32(STEP_INDEX, index)

    # -- context operations ------------------------------------------------------------------

    def save_context(self) -> bytes:
        """This consumer's decoder context (layout in :mod:`.audio`), read from the registers.

        Raises :class:`~juggle.errors.CoreTimeoutError` if the core stays BUSY, and what the
        window raises.
        """
        with self._lock:
            predictor, index = self._read_state()
        return _DRIVER_CONTEXT.pack(CONTEXT_VERSION, 0, predictor, index)

    def restore_context(self, data: bytes) -> None:
        """Put a context from :meth:`save_context` back into the core; ``b""``: power-on state.

        Writes CONTROL (RESET, for ``b""``) or PREDICTOR and STEP_INDEX, and COUNT 8. Raises
        :class:`~juggle.errors.ServiceArgumentError` if ``data`` is not bytes,
        :class:`~juggle.errors.ServiceStateError` naming the length, version or values of a
        context this driver did not produce (nothing is changed then), and
        :class:`~juggle.errors.CoreTimeoutError` if the core stays BUSY.
        """
        state = self._parse_context(data)
        with self._lock:
            if state is None:
                self._wait_idle()
                self._mmio.write32(CONTROL, CTRL_RESET)
            else:
                self._write_state(*state)
            self._mmio.write32(COUNT, 8)

    @staticmethod
    def _parse_context(data: object) -> State | None:
        """The (predictor, step index) of ``data``, ``None`` for ``b""``; raises first."""
        if not isinstance(data, bytes | bytearray):
            raise ServiceArgumentError(
                f'AdpcmDriver.restore_context: "data" must be bytes, got {type(data).__name__}',
                method="AdpcmDriver.restore_context",
                argument="data",
            )
        if not data:
            return None
        if len(data) != _DRIVER_CONTEXT.size:
            raise ServiceStateError(
                f"AdpcmDriver.restore_context: a context is {_DRIVER_CONTEXT.size} bytes "
                f"(version {CONTEXT_VERSION}) or empty, got {len(data)} bytes",
                method="restore_context",
            )
        version, reserved, predictor, index = _DRIVER_CONTEXT.unpack(data)
        if version != CONTEXT_VERSION or reserved or index > _MAX_INDEX:
            raise ServiceStateError(
                f"AdpcmDriver.restore_context: malformed context (version {version}, "
                f"expected {CONTEXT_VERSION}; reserved {reserved:#04x}; step index {index}, "
                f"at most {_MAX_INDEX})",
                method="restore_context",
            )
        return predictor, index

    def __repr__(self) -> str:
        return f"<AdpcmDriver on {self._mmio!r}>"
