"""Software implementations of the OFDM receiver's blocks: QAM mapping and block FFTs (NumPy).

These are the software tier of the four Ker-ONE accelerators (paper 6.1): ``qam16`` and
``qam64`` map a frame of 18,800 bits to Gray-coded constellation symbols, ``fft512`` and
``fft1024`` transform the symbols of a frame in blocks of 512 or 1,024 points. They are real
computations, timed on this machine by :func:`measure_software` (measured, not modeled).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from juggle.errors import ServiceArgumentError

__all__ = [
    "FRAME_BITS",
    "fft_blocks",
    "measure_software",
    "qam_demap",
    "qam_map",
    "random_frame",
    "to_iq16",
]

FRAME_BITS = 18_800
"""Bits per OFDM frame (paper 6.1)."""

BitArray = npt.NDArray[np.uint8]
ComplexArray = npt.NDArray[np.complex128]


def _levels(bits_per_axis: int) -> npt.NDArray[np.float64]:
    """Gray table: the axis level for each value of ``bits_per_axis`` bits."""
    size = 1 << bits_per_axis
    table = np.empty(size, dtype=np.float64)
    for i in range(size):
        table[i ^ (i >> 1)] = 2 * i - (size - 1)
    return table


_TABLES = {k: _levels(k) for k in (1, 2, 3)}


def _check_order(bits_per_symbol: int) -> int:
    if bits_per_symbol not in (2, 4, 6):
        raise ServiceArgumentError(
            f'"bits_per_symbol" must be 2, 4 or 6; got {bits_per_symbol}',
            argument="bits_per_symbol",
            value=bits_per_symbol,
        )
    return bits_per_symbol // 2


def qam_map(bits: BitArray, bits_per_symbol: int) -> ComplexArray:
    """Map ``bits`` (0/1 values) to Gray-coded square QAM symbols of unit average power.

    A frame whose length is not a multiple of ``bits_per_symbol`` is padded with zeros.

    Raises :class:`~juggle.errors.ServiceArgumentError` for an order other than 2, 4, 6
    bits per symbol.
    """
    half = _check_order(bits_per_symbol)
    flat = np.asarray(bits, dtype=np.uint8).ravel()
    pad = (-flat.size) % bits_per_symbol
    if pad:
        flat = np.concatenate([flat, np.zeros(pad, dtype=np.uint8)])
    groups = flat.reshape(-1, 2, half)
    weights = (1 << np.arange(half - 1, -1, -1)).astype(np.uint8)
    values = (groups * weights).sum(axis=2)
    table = _TABLES[half]
    scale = np.sqrt(2.0 * ((1 << bits_per_symbol) - 1) / 3.0)
    symbols: ComplexArray = (table[values[:, 0]] + 1j * table[values[:, 1]]) / scale
    return symbols


def qam_demap(symbols: ComplexArray, bits_per_symbol: int) -> BitArray:
    """Hard-decision inverse of :func:`qam_map` (the nearest constellation point).

    Raises :class:`~juggle.errors.ServiceArgumentError` for an unsupported order.
    """
    half = _check_order(bits_per_symbol)
    size = 1 << half
    scale = np.sqrt(2.0 * ((1 << bits_per_symbol) - 1) / 3.0)
    out = []
    for axis in (np.real(symbols) * scale, np.imag(symbols) * scale):
        index = np.clip(np.rint((axis + size - 1) / 2.0), 0, size - 1).astype(np.int64)
        gray = index ^ (index >> 1)
        out.append((gray[:, None] >> np.arange(half - 1, -1, -1)) & 1)
    return np.concatenate(out, axis=1).astype(np.uint8).ravel()


def to_iq16(symbols: ComplexArray) -> npt.NDArray[np.int16]:
    """Quantize symbols to 16-bit I and Q words (an ``(n, 2)`` array), as the QAM cores emit."""
    peak = max(float(np.max(np.abs(np.real(symbols)), initial=0.0)), 1e-12)
    peak = max(peak, float(np.max(np.abs(np.imag(symbols)), initial=0.0)))
    iq = np.stack([np.real(symbols), np.imag(symbols)], axis=1) * (32767.0 / peak)
    return np.rint(iq).astype(np.int16)


def fft_blocks(symbols: ComplexArray, points: int) -> ComplexArray:
    """FFT of ``symbols`` in consecutive blocks of ``points`` (the last block zero-padded);
    returns a ``(blocks, points)`` array.

    Raises :class:`~juggle.errors.ServiceArgumentError` if ``points`` is not a power of two.
    """
    if points < 2 or points & (points - 1):
        raise ServiceArgumentError(
            f'"points" must be a power of two; got {points}', argument="points", value=points
        )
    flat = np.asarray(symbols, dtype=np.complex128).ravel()
    pad = (-flat.size) % points
    if pad:
        flat = np.concatenate([flat, np.zeros(pad, dtype=np.complex128)])
    return np.fft.fft(flat.reshape(-1, points), axis=1)


def random_frame(rng: np.random.Generator) -> BitArray:
    """One frame of :data:`FRAME_BITS` random bits."""
    return rng.integers(0, 2, size=FRAME_BITS, dtype=np.uint8)


def _qam16(bits: BitArray) -> npt.NDArray[np.int16]:
    return to_iq16(qam_map(bits, 4))


def _qam64(bits: BitArray) -> npt.NDArray[np.int16]:
    return to_iq16(qam_map(bits, 6))


def measure_software(repeats: int = 15, seed: int = 0) -> dict[str, float]:
    """Median wall-clock time per frame of each software implementation, in µs (measured).

    For the FFTs the QAM16 symbols are prepared outside the timed region.

    Raises :class:`~juggle.errors.ServiceArgumentError` if ``repeats`` < 1.
    """
    if repeats < 1:
        raise ServiceArgumentError(
            f'"repeats" must be >= 1; got {repeats}', argument="repeats", value=repeats
        )
    rng = np.random.default_rng(seed)
    frame = random_frame(rng)
    symbols = qam_map(frame, 4)
    timed: dict[str, Callable[[], object]] = {
        "qam16": lambda: _qam16(frame),
        "qam64": lambda: _qam64(frame),
        "fft512": lambda: fft_blocks(symbols, 512),
        "fft1024": lambda: fft_blocks(symbols, 1024),
    }
    out: dict[str, float] = {}
    for name, call in timed.items():
        call()  # warm up
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            call()
            samples.append(time.perf_counter_ns() - t0)
        samples.sort()
        out[name] = samples[len(samples) // 2] / 1000.0
    return out
