"""Bitstream files in the Xilinx ``.bit`` format: parse, check and generate.

A ``.bit`` file is a short header in front of the configuration payload, like a parcel label:
a 9-byte magic field, then keyed fields ``'a'`` design, ``'b'`` part, ``'c'`` date, ``'d'``
time (each a 16-bit big-endian length and a NUL-terminated string) and ``'e'`` (a 32-bit
big-endian length, then the payload)::

    00 09  0f f0 0f f0 0f f0 0f f0 00   00 01  'a' len "tdes_partial.ncd;UserID=...;Region=prr0\\0"
    'b' len "2vp30ff896\\0"  'c' len "2011/06/14\\0"  'd' len "12:00:00\\0"  'e' u32 payload

juggle reads the target region from the design field, where Xilinx tools append options
(``name.ncd;UserID=0xFFFFFFFF;Region=prr0``); the design's short name (``tdes``) is the file
name without directory, ``.ncd`` and a trailing ``_partial``.

Bitstreams come from outside: a file's size is checked by ``stat`` before it is read
(:class:`~juggle.limits.Limits` ``max_bitstream_bytes``), and the header parser only ever reads
within the data it was given, refusing anything malformed with
:class:`~juggle.errors.BitstreamFormatError` (each string field at most once, printable ASCII).
"""

from __future__ import annotations

import functools
import hashlib
import os
import random
import re
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

from juggle.errors import BitstreamFormatError, BitstreamTooLargeError, MissingBitstreamError
from juggle.limits import DEFAULT_LIMITS, Limits

__all__ = [
    "Bitstream",
    "build_bitstream",
    "load_bitstream",
    "normalize_part",
    "parse_bitstream",
    "read_bitstream",
    "write_bitstream",
]

_MAGIC = bytes.fromhex("0ff00ff00ff00ff000")
_PREAMBLE = struct.pack(">H", len(_MAGIC)) + _MAGIC + struct.pack(">H", 1)
_STRING_KEYS = {b"a": "design", b"b": "part", b"c": "date", b"d": "time"}
_SYNC = bytes.fromhex("ffffffffaa995566")  # dummy word + configuration sync word
_DEFAULT_DATE = "2011/06/14"
_DEFAULT_TIME = "12:00:00"
_NAME_RE = re.compile(r"[A-Za-z0-9_.\-]+")
_PRINTABLE = re.compile(rb"[\x20-\x7e]*")


@dataclass(frozen=True, slots=True)
class Bitstream:
    """What a bitstream's header says, and where it came from (``source``).

    ``region`` is ``None`` when the design field carries no ``Region=`` option; ``size`` is
    the whole file (header and payload) in bytes; ``digest`` its SHA-256 (hex), so the bytes
    handed to :meth:`Fabric.program` can be matched to the header that was checked.
    """

    design: str
    part: str
    region: str | None
    date: str
    time: str
    payload_length: int
    size: int
    source: str
    design_field: str
    digest: str

    @property
    def header_length(self) -> int:
        """Bytes in front of the payload."""
        return self.size - self.payload_length


@functools.lru_cache(maxsize=64)
@functools.lru_cache(maxsize=64)
def normalize_part(part: str) -> str:
    """A part name in the form ``.bit`` headers use: lower case, no ``xc`` prefix, no speed grade.

    ``"XC2VP30FF896-7"`` and ``"2vp30ff896"`` both give ``"2vp30ff896"``.
    """
    text = part.strip().lower()
    text = text.removeprefix("xc")
    return re.sub(r"-\d+[a-z]?$", "", text)


class _Reader:
    def __init__(self, data: bytes, source: str) -> None:
        self.data, self.pos, self.source = data, 0, source

    def take(self, n: int, what: str) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise BitstreamFormatError(
                f"bitstream {self.source!r} is truncated in {what} "
                f"(needs {end} bytes, file has {len(self.data)})",
                self.source,
            )
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def u16(self, what: str) -> int:
        return int.from_bytes(self.take(2, what), "big")

    def u32(self, what: str) -> int:
        return int.from_bytes(self.take(4, what), "big")


def parse_bitstream(
    data: bytes, *, source: str = "<bytes>", limits: Limits = DEFAULT_LIMITS
) -> Bitstream:
    """Parse the header of a ``.bit`` file held in ``data``.

    Every length comes from ``data`` and is checked against what is left of it, so nothing is
    read, allocated or looped over beyond ``data``.
    Raises :class:`~juggle.errors.BitstreamFormatError` naming ``source`` and the fault for
    any malformed input: not bytes, truncated, bad magic, unknown, repeated or missing field,
    a string field that is not printable ASCII, payload length mismatch; and
    :class:`~juggle.errors.BitstreamTooLargeError` for more than ``limits.max_bitstream_bytes``.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise BitstreamFormatError(
            f"bitstream {source!r} must be bytes, got {type(data).__name__}", source
        )
    data = bytes(data)
    _check_size(source, len(data), limits)
    reader = _Reader(data, source)
    if reader.take(len(_PREAMBLE), "the magic field") != _PREAMBLE:
        raise BitstreamFormatError(f"bitstream {source!r} has a bad magic field", source)
    fields: dict[str, str] = {}
    while True:  # every round consumes at least 3 bytes, or take() raises
        key = reader.take(1, "a field key")
        if key == b"e":
            break
        at = reader.pos - 1
        name = _STRING_KEYS.get(key)
        if name is None:
            raise BitstreamFormatError(
                f"bitstream {source!r} has unknown field key {key!r} at byte {at}", source
            )
        if name in fields:
            raise BitstreamFormatError(
                f"bitstream {source!r} repeats field {key!r} ({name}) at byte {at}", source
            )
        raw = reader.take(reader.u16(f"field {name}"), f"field {name}").rstrip(b"\0")
        if not _PRINTABLE.fullmatch(raw):
            raise BitstreamFormatError(
                f"bitstream {source!r}: field {key!r} ({name}) at byte {at} is not printable "
                f"ASCII: {raw[:64]!r}",
                source,
            )
        fields[name] = raw.decode("ascii")
    declared = reader.u32("the payload length")
    actual = len(data) - reader.pos
    if declared != actual:
        raise BitstreamFormatError(
            f"bitstream {source!r}: payload length mismatch (header says {declared} bytes, "
            f"file holds {actual})",
            source,
        )
    for required in ("design", "part"):
        if not fields.get(required):
            raise BitstreamFormatError(f"bitstream {source!r} has no {required} field", source)
    design, region = _split_design_field(fields["design"], source)
    return Bitstream(
        design=design,
        part=fields["part"],
        region=region,
        date=fields.get("date", ""),
        time=fields.get("time", ""),
        payload_length=declared,
        size=len(data),
        source=source,
        design_field=fields["design"],
        digest=hashlib.sha256(data).hexdigest(),
    )


def _check_size(source: str, size: int, limits: Limits) -> None:
    if size > limits.max_bitstream_bytes:
        raise BitstreamTooLargeError(
            f"bitstream {source!r} is {size:,} bytes, over the limit of "
            f"{limits.max_bitstream_bytes:,} (Limits.max_bitstream_bytes)",
            source,
        )


def _split_design_field(text: str, source: str) -> tuple[str, str | None]:
    first, *options = text.split(";")
    name = re.split(r"[\\/]", first)[-1].removesuffix(".ncd").removesuffix("_partial")
    if not name:
        raise BitstreamFormatError(
            f"bitstream {source!r}: design field {text!r} names no design", source
        )
    region = None
    for option in options:
        key, _, value = option.partition("=")
        if key.strip().lower() == "region" and value.strip():
            region = value.strip()
    return name, region


def read_bitstream(path: str | Path, *, limits: Limits = DEFAULT_LIMITS) -> Bitstream:
    """Parse the header of the ``.bit`` file at ``path``.

    Raises :class:`~juggle.errors.MissingBitstreamError` naming the path when it does not
    exist, :class:`~juggle.errors.BitstreamTooLargeError` naming the path, its size and the
    limit when ``stat`` finds it larger than ``limits.max_bitstream_bytes`` (nothing is read
    then), :class:`~juggle.errors.BitstreamFormatError` when it is no regular file, cannot be
    read or does not parse.
    """
    return load_bitstream(path, limits=limits)[0]


def load_bitstream(path: str | Path, *, limits: Limits = DEFAULT_LIMITS) -> tuple[Bitstream, bytes]:
    """The parsed header and the whole file's bytes (what :meth:`Fabric.program` takes).

    Raises like :func:`read_bitstream`.
    """
    p = Path(path)
    try:
        info = os.stat(p)
    except FileNotFoundError as exc:
        raise MissingBitstreamError(f"bitstream file {str(p)!r} does not exist", p) from exc
    except OSError as exc:
        raise BitstreamFormatError(f"bitstream file {str(p)!r} cannot be read: {exc}", p) from exc
    if not stat.S_ISREG(info.st_mode):
        raise BitstreamFormatError(f"bitstream file {str(p)!r} is not a regular file", p)
    if info.st_size > limits.max_bitstream_bytes:
        raise BitstreamTooLargeError(
            f"bitstream file {str(p)!r} is {info.st_size:,} bytes, over the limit of "
            f"{limits.max_bitstream_bytes:,} (Limits.max_bitstream_bytes)",
            p,
        )
    try:
        with open(p, "rb") as handle:
            data = handle.read(limits.max_bitstream_bytes + 1)  # it may have grown since stat
    except FileNotFoundError as exc:
        raise MissingBitstreamError(f"bitstream file {str(p)!r} does not exist", p) from exc
    except OSError as exc:
        raise BitstreamFormatError(f"bitstream file {str(p)!r} cannot be read: {exc}", p) from exc
    return parse_bitstream(data, source=str(p), limits=limits), data


def build_bitstream(
    design: str,
    part: str,
    region: str,
    size: int,
    *,
    date: str = _DEFAULT_DATE,
    time: str = _DEFAULT_TIME,
) -> bytes:
    """A whole ``.bit`` file of exactly ``size`` bytes for ``design`` targeting ``region``.

    The payload starts with a dummy word and the sync word, then deterministic bytes seeded
    from the design name (the same design always gives the same file).
    Raises :class:`~juggle.errors.BitstreamFormatError` for a name with characters outside
    ``[A-Za-z0-9_.-]`` or a ``size`` too small for the header.
    """
    for label, value in (("design", design), ("part", part), ("region", region)):
        if not _NAME_RE.fullmatch(value):
            raise BitstreamFormatError(
                f'"{label}" must match [A-Za-z0-9_.-]+, got {value!r}', value
            )
    header = _header(f"{design}_partial.ncd;UserID=0xFFFFFFFF;Region={region}", part, date, time)
    payload_length = size - len(header) - 4
    if payload_length < 0:
        raise BitstreamFormatError(
            f'"size" must be >= {len(header) + 4} (the header), got {size}', size
        )
    rng = random.Random(f"juggle-bitstream:{design}")
    body = (_SYNC + rng.randbytes(max(0, payload_length - len(_SYNC))))[:payload_length]
    return header + struct.pack(">I", payload_length) + body


def _header(design_field: str, part: str, date: str, time: str) -> bytes:
    out = bytearray(_PREAMBLE)
    for key, text in zip(_STRING_KEYS, (design_field, part, date, time), strict=True):
        raw = text.encode("latin-1") + b"\0"
        out += key + struct.pack(">H", len(raw)) + raw
    return bytes(out + b"e")


def write_bitstream(path: str | Path, design: str, part: str, region: str, size: int) -> Path:
    """Write :func:`build_bitstream`'s file to ``path`` (parents created); returns the path.

    Raises :class:`~juggle.errors.BitstreamFormatError` like :func:`build_bitstream`.
    """
    p = Path(path)
    data = build_bitstream(design, part, region, size)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p
