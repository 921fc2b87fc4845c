"""Bitstream files as Xilinx tools write them: parse, check, convert for the kernel, generate.

Three formats are read (:func:`parse_any`, :func:`load_any`): a ``.bit`` (below; Vivado's
design field tags ``;PARTIAL=TRUE;UserID=...;Version=...`` are parsed, a ``Region=`` tag is
optional), a headerless ``.bin``/``.bit.bin`` (sync word found, word order detected) and a
Versal ``.pdi`` (passed through). :func:`kernel_image` makes the bytes a family's Linux FPGA
manager takes (header stripped; words byte-swapped for Zynq-7000), :func:`same_part` compares
part names as Vivado spells them. See the section "bitstreams as vendor tools write them".

A ``.bit`` file is a short header in front of the configuration payload, like a parcel label:
a 9-byte magic field, then keyed fields ``'a'`` design, ``'b'`` part, ``'c'`` date, ``'d'``
time (each a 16-bit big-endian length and a NUL-terminated string) and ``'e'`` (a 32-bit
big-endian length, then the payload)::

    00 09  0f f0 0f f0 0f f0 0f f0 00   00 01  'a' len "tdes_partial.ncd;UserID=...;Region=prr0\\0"
    'b' len "2vp30ff896\\0"  'c' len "2011/06/14\\0"  'd' len "12:00:00\\0"  'e' u32 payload

juggle reads the target region from the design field when it carries a ``Region=`` option
(juggle's own files: ``name.ncd;UserID=0xFFFFFFFF;Region=prr0``); Vivado writes none, and the
region then comes from the module descriptor's per-region bitstream table. The design's short
name (``tdes``) is the file name without directory, ``.ncd`` and a trailing ``_partial``.

Bitstreams come from outside: a file's size is checked by ``stat`` before it is read
(:class:`~juggle.limits.Limits` ``max_bitstream_bytes``), and the header parser only ever reads
within the data it was given, refusing anything malformed with
:class:`~juggle.errors.BitstreamFormatError` (each string field at most once, printable ASCII).
"""

from __future__ import annotations

import array
import functools
import hashlib
import os
import random
import re
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

from juggle.errors import (
    BitstreamFamilyError,
    BitstreamFormatError,
    BitstreamTooLargeError,
    MissingBitstreamError,
    NotPartialError,
    PartMismatchError,
    SyncWordError,
    TruncatedBitstreamError,
)
from juggle.limits import DEFAULT_LIMITS, Limits

__all__ = [
    "FAMILIES",
    "FORMATS",
    "WORD_ORDERS",
    "Bitstream",
    "build_bitstream",
    "build_vendor_bit",
    "check_family",
    "find_sync",
    "kernel_image",
    "load_any",
    "load_bitstream",
    "normalize_part",
    "parse_any",
    "parse_bitstream",
    "part_family",
    "read_bitstream",
    "reorder_words",
    "same_part",
    "to_bin",
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
    format: str = "bit"
    partial: bool | None = None
    tags: tuple[tuple[str, str], ...] = ()
    word_order: str = "be"

    @property
    def header_length(self) -> int:
        """Bytes in front of the payload."""
        return self.size - self.payload_length


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
            raise TruncatedBitstreamError(
                f"bitstream {self.source!r} is truncated in {what} "
                f"(needs {end} bytes, file has {len(self.data)})",
                path=self.source,
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
            f"bitstream {source!r} must be bytes, got {type(data).__name__}", path=source
        )
    data = bytes(data)
    _check_size(source, len(data), limits)
    reader = _Reader(data, source)
    if reader.take(len(_PREAMBLE), "the magic field") != _PREAMBLE:
        raise BitstreamFormatError(f"bitstream {source!r} has a bad magic field", path=source)
    fields: dict[str, str] = {}
    while True:  # every round consumes at least 3 bytes, or take() raises
        key = reader.take(1, "a field key")
        if key == b"e":
            break
        at = reader.pos - 1
        name = _STRING_KEYS.get(key)
        if name is None:
            raise BitstreamFormatError(
                f"bitstream {source!r} has unknown field key {key!r} at byte {at}", path=source
            )
        if name in fields:
            raise BitstreamFormatError(
                f"bitstream {source!r} repeats field {key!r} ({name}) at byte {at}", path=source
            )
        raw = reader.take(reader.u16(f"field {name}"), f"field {name}").rstrip(b"\0")
        if not _PRINTABLE.fullmatch(raw):
            raise BitstreamFormatError(
                f"bitstream {source!r}: field {key!r} ({name}) at byte {at} is not printable "
                f"ASCII: {raw[:64]!r}",
                path=source,
            )
        fields[name] = raw.decode("ascii")
    declared = reader.u32("the payload length")
    actual = len(data) - reader.pos
    if declared != actual:
        raise BitstreamFormatError(
            f"bitstream {source!r}: payload length mismatch (header says {declared} bytes, "
            f"file holds {actual})",
            path=source,
        )
    for required in ("design", "part"):
        if not fields.get(required):
            raise BitstreamFormatError(f"bitstream {source!r} has no {required} field", path=source)
    design, region = _split_design_field(fields["design"], source)
    tags = _design_tags(fields["design"])
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
        format="bit",
        partial=_partial_from_tags(tags),
        tags=tags,
    )


def _check_size(source: str, size: int, limits: Limits) -> None:
    if size > limits.max_bitstream_bytes:
        raise BitstreamTooLargeError(
            f"bitstream {source!r} is {size:,} bytes, over the limit of "
            f"{limits.max_bitstream_bytes:,} (Limits.max_bitstream_bytes)",
            path=source,
        )


def _split_design_field(text: str, source: str) -> tuple[str, str | None]:
    first, *options = text.split(";")
    name = re.split(r"[\\/]", first)[-1].removesuffix(".ncd").removesuffix("_partial")
    if not name:
        raise BitstreamFormatError(
            f"bitstream {source!r}: design field {text!r} names no design", path=source
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
    data = _read_bounded(p, limits)
    return parse_bitstream(data, source=str(p), limits=limits), data


def _read_bounded(p: Path, limits: Limits) -> bytes:
    try:
        info = os.stat(p)
    except FileNotFoundError as exc:
        raise MissingBitstreamError(
            f"bitstream file {str(p)!r} does not exist", path=str(p)
        ) from exc
    except OSError as exc:
        raise BitstreamFormatError(
            f"bitstream file {str(p)!r} cannot be read: {exc}", path=str(p)
        ) from exc
    if not stat.S_ISREG(info.st_mode):
        raise BitstreamFormatError(f"bitstream file {str(p)!r} is not a regular file", path=str(p))
    if info.st_size > limits.max_bitstream_bytes:
        raise BitstreamTooLargeError(
            f"bitstream file {str(p)!r} is {info.st_size:,} bytes, over the limit of "
            f"{limits.max_bitstream_bytes:,} (Limits.max_bitstream_bytes)",
            path=str(p),
        )
    try:
        with open(p, "rb") as handle:
            data = handle.read(limits.max_bitstream_bytes + 1)  # it may have grown since stat
    except FileNotFoundError as exc:
        raise MissingBitstreamError(
            f"bitstream file {str(p)!r} does not exist", path=str(p)
        ) from exc
    except OSError as exc:
        raise BitstreamFormatError(
            f"bitstream file {str(p)!r} cannot be read: {exc}", path=str(p)
        ) from exc
    return data


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
                f'"{label}" must match [A-Za-z0-9_.-]+, got {value!r}', value=value
            )
    field = f"{design}_partial.ncd;UserID=0xFFFFFFFF;Region={region}"
    header = _header(field, part, date, time)
    payload_length = size - len(header) - 4
    if payload_length < 0:
        raise BitstreamFormatError(
            f'"size" must be >= {len(header) + 4} (the header), got {size}',
            field="size",
            value=size,
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


# -- bitstreams as vendor tools write them ----------------------------------------------------
#
# Three formats reach the intake (issue 20, item 1):
#
# * ``bit``: a Vivado ``.bit``, the header above (fields a-e). Vivado writes the design field as
#   ``name;PARTIAL=TRUE;UserID=0XFFFFFFFF;Version=2022.1`` for a partial and without
#   ``PARTIAL=`` for a full image; no Vivado writes ``Region=`` (juggle's own files do), so the
#   region comes from the module descriptor's per-region bitstream table.
# * ``bin``: a headerless ``.bin`` / ``.bit.bin`` (bootgen ``-process_bitstream bin``, dfx-mgr
#   packages, Kria firmware): the configuration words only. The sync word 0xAA995566 is found
#   at a word boundary within the first ``_SYNC_SEARCH_BYTES`` (after the dummy and bus-width
#   words: u-boot's drivers/fpga/zynqmppl.c ``bin_format``), and its byte order tells the
#   file's word order.
# * ``pdi``: a Versal programmable device image, handed to the manager as it is (the Versal
#   manager, drivers/fpga/versal-fpga.c, passes the whole image to the platform firmware).

FORMATS = ("bit", "bin", "pdi")
"""The formats :func:`parse_any` reads (``Bitstream.format``)."""

WORD_ORDERS = ("be", "le", "bitrev", "bitrev-le")
"""How a configuration image's 32-bit words are laid out (``Bitstream.word_order``): ``be``
as in a ``.bit`` payload (big-endian words); ``le`` each word byte-swapped (what Zynq-7000's
PCAP takes); ``bitrev`` the bits of every byte reversed (SelectMAP/flash images);
``bitrev-le`` both."""

_SYNC_WORD = 0xAA995566
_SYNC_SEARCH_BYTES = 4096  # dummy words, bus-width detection and padding come before the sync
_SYNC_FORMS: dict[bytes, str] = {
    bytes.fromhex("aa995566"): "be",
    bytes.fromhex("665599aa"): "le",
    bytes.fromhex("5599aa66"): "bitrev",
    bytes.fromhex("66aa9955"): "bitrev-le",
}
_BITREV_TABLE = bytes(int(f"{i:08b}"[::-1], 2) for i in range(256))
_PDI_SIGNATURE_OFFSET = 0x14  # Versal boot header: "XNLX" after the width detection word
_PDI_SIGNATURE = b"XNLX"  # xilpdi.h XIH_BH_IMAGE_IDENT
_BUS_WIDTH_WORDS = bytes.fromhex("000000bb11220044ffffffffffffffff")
_VENDOR_PREFIX = b"\xff" * 64 + _BUS_WIDTH_WORDS  # what Vivado writes in front of the sync

FAMILIES: dict[str, tuple[tuple[str, ...], str]] = {
    # family -> (formats its Linux FPGA manager takes, word order of the image it wants)
    # Zynq-7000: drivers/fpga/zynq-fpga.c looks for the sync word byte-swapped
    # (``zynq_fpga_has_sync``: 66 55 99 aa) and refuses anything else ("Bitstream must be a
    # byte swapped .bin file"); PYNQ's bit-to-bin conversion and meta-xilinx's
    # fpga-bit-to-bin.py ("Flip 32-bit endianess (needed for Zynq)") swap every word.
    "zynq": (("bit", "bin"), "le"),
    # ZynqMP: drivers/fpga/zynqmp-fpga.c hands the image to the PMU firmware, which takes the
    # header-stripped big-endian .bin bootgen writes (firmware API >= 1.1 takes either order,
    # barebox zynqmp-fpga.c ZYNQMP_PM_FEATURE_BYTE_ORDER_IRREL; juggle sends big-endian).
    "zynqmp": (("bit", "bin"), "be"),
    "versal": (("pdi",), "be"),
    "virtex2p": (("bit", "bin"), "be"),
    "7series": (("bit", "bin"), "be"),
    "ultrascale": (("bit", "bin"), "be"),
    "ultrascaleplus": (("bit", "bin"), "be"),
}
"""The families :func:`kernel_image` converts for."""

# Part name -> family, by the device name as Vivado spells it (after ``xc``).
_PART_FAMILIES: tuple[tuple[str, str], ...] = (
    (r"7z\d", "zynq"),
    (r"zu\d", "zynqmp"),
    (r"k2[46]", "zynqmp"),  # Kria K24/K26 SOMs (XCK26 is a ZU5EV-class ZynqMP)
    (r"v[cmpeh]\d", "versal"),
    (r"2vp", "virtex2p"),
    (r"7[aksv]\d", "7series"),
    (r"[kv]u\d+p", "ultrascaleplus"),
    (r"[kv]u\d", "ultrascale"),
)
_PACKAGE_RE = re.compile(r"[a-z]+\d+")
# 7z020clg484, 2vp30ff896: device (digit?, letters, digits, letters) then package
_RUN_TOGETHER_RE = re.compile(r"(\d?[a-z]+\d+[a-z]*?)([a-z]{2,}\d+)")


def part_family(part: str) -> str | None:
    """The family of ``part`` (a key of :data:`FAMILIES`), or None when juggle does not know it.

    ``"xck26-sfvc784-2LV-c"`` -> ``"zynqmp"``; ``"7z020clg484"`` -> ``"zynq"``.
    """
    device = _part_key(part)[0]
    for pattern, family in _PART_FAMILIES:
        if re.match(pattern, device):
            return family
    return None


@functools.lru_cache(maxsize=128)
def _part_key(part: str) -> tuple[str, str]:
    """(device, package) of a part name as Vivado spells it, lower case, without ``xc``,
    speed grade and temperature grade: ``xck26-sfvc784-2LV-c`` -> ``("k26", "sfvc784")``;
    7-series and older names run device and package together, ``xc7z020clg484-1`` and
    ``7z020clg484`` -> ``("7z020", "clg484")``; ``xck26`` -> ``("k26", "")``."""
    tokens = [t for t in part.strip().lower().split("-") if t]
    if not tokens:
        return ("", "")
    device = tokens[0].removeprefix("xc")
    if len(tokens) > 1 and _PACKAGE_RE.fullmatch(tokens[1]):
        return (device, tokens[1])  # UltraScale(+)/Versal: device-package-speed-temperature
    joined = _RUN_TOGETHER_RE.fullmatch(device)
    if joined:
        return (joined.group(1), joined.group(2))
    return (device, "")


def same_part(a: str, b: str) -> bool:
    """Whether part names ``a`` and ``b`` name the same device and package, as Vivado spells
    them: case, the ``xc`` prefix, the speed grade and the temperature grade do not matter
    (``xck26-sfvc784-2LV-c`` is ``XCK26-SFVC784-2LV-I``; ``xc7z020clg484-1`` is
    ``7z020clg484``), and a name without a package matches any package of its device.
    """
    if not isinstance(a, str) or not isinstance(b, str):
        return False
    dev_a, pkg_a = _part_key(a)
    dev_b, pkg_b = _part_key(b)
    if not dev_a or dev_a != dev_b:
        return False
    return not pkg_a or not pkg_b or pkg_a == pkg_b


def _design_tags(design_field: str) -> tuple[tuple[str, str], ...]:
    """The ``;KEY=VALUE`` options after the design name, in order (keys as written)."""
    tags: list[tuple[str, str]] = []
    for option in design_field.split(";")[1:]:
        key, sep, value = option.partition("=")
        if sep and key.strip():
            tags.append((key.strip(), value.strip()))
    return tuple(tags)


def _partial_from_tags(tags: tuple[tuple[str, str], ...]) -> bool | None:
    """``PARTIAL=TRUE`` -> True, ``PARTIAL=FALSE`` -> False; without the tag: True for juggle's
    own files (a ``Region=`` tag), False for Vivado's (a ``Version=`` tag: Vivado writes
    ``PARTIAL=TRUE`` in every partial), else None (unknown)."""
    keys = {key.lower(): value.lower() for key, value in tags}
    if "partial" in keys:
        return keys["partial"] in ("true", "1", "yes")
    if "region" in keys:
        return True
    if "version" in keys:
        return False
    return None


def find_sync(data: bytes, *, limit: int = _SYNC_SEARCH_BYTES) -> tuple[int, str] | None:
    """(offset, word order) of the first configuration sync word at a 32-bit word boundary
    within the first ``limit`` bytes of ``data`` (in any of :data:`WORD_ORDERS`), or None."""
    end = min(len(data), limit + 4)
    best: tuple[int, str] | None = None
    for form, order in _SYNC_FORMS.items():
        at = data.find(form, 0, end)
        while at != -1 and at % 4:
            at = data.find(form, at + 1, end)
        if at != -1 and (best is None or at < best[0]):
            best = (at, order)
    return best


def parse_any(
    data: bytes,
    *,
    source: str,
    expect_part: str | None = None,
    expect_partial: bool | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Bitstream:
    """Parse a bitstream in any of :data:`FORMATS`: a ``.bit`` (by its magic field), a ``.pdi``
    (by its name or its boot header's ``XNLX``), else a headerless ``.bin`` (by its sync word).

    A ``.bin`` or ``.pdi`` has no header: its ``design`` is the file name without directory and
    extensions (``.bit.bin``, ``.bin``, ``.pdi``) and ``_partial``, its ``part`` is empty (the
    manager checks the device's IDCODE itself), its ``partial`` None (unknown).
    ``expect_part`` refuses a ``.bit`` built for another part (:func:`same_part`);
    ``expect_partial=True`` refuses an image whose header says it is a full one.

    Raises, naming ``source`` and the field: :class:`~juggle.errors.BitstreamFormatError`
    (not bytes, a malformed header; :class:`~juggle.errors.TruncatedBitstreamError` for a
    header ending inside a field; :class:`~juggle.errors.SyncWordError` for a ``.bin``
    without a sync word), :class:`~juggle.errors.BitstreamTooLargeError`,
    :class:`~juggle.errors.PartMismatchError` and :class:`~juggle.errors.NotPartialError`.
    Never anything else, whatever ``data`` holds.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise BitstreamFormatError(
            f"bitstream {source!r} must be bytes, got {type(data).__name__}", path=source
        )
    data = bytes(data)
    _check_size(source, len(data), limits)
    if data and _PREAMBLE.startswith(data[: len(_PREAMBLE)]):  # a .bit, maybe truncated
        bitstream = parse_bitstream(data, source=source, limits=limits)
    elif _is_pdi(data, source):
        if not data:
            raise BitstreamFormatError(f"bitstream {source!r}: the .pdi file is empty", path=source)
        bitstream = _headerless(data, source, "pdi", "be")
    else:
        found = find_sync(data)
        if found is None:
            raise SyncWordError(
                f"bitstream {source!r} is neither a .bit (no magic field) nor a .bin: no sync "
                f"word 0x{_SYNC_WORD:08X} (in any word order) at a word boundary within its "
                f"first {_SYNC_SEARCH_BYTES} bytes",
                path=source,
                field="sync word",
            )
        bitstream = _headerless(data, source, "bin", found[1])
    if expect_part is not None and bitstream.part and not same_part(bitstream.part, expect_part):
        raise PartMismatchError(
            f"bitstream {source!r}: field 'b' (part) is {bitstream.part!r}, the board is "
            f"{expect_part!r}",
            path=source,
            field="part",
        )
    if expect_partial and bitstream.partial is False:
        raise NotPartialError(
            f"bitstream {source!r} is a full-device image (field 'a' (design) "
            f"{bitstream.design_field!r} carries no PARTIAL=TRUE), a partial is expected",
            path=source,
            field="design",
        )
    return bitstream


def _is_pdi(data: bytes, source: str) -> bool:
    if source.lower().endswith(".pdi"):
        return True
    end = _PDI_SIGNATURE_OFFSET + len(_PDI_SIGNATURE)
    return data[_PDI_SIGNATURE_OFFSET:end] == _PDI_SIGNATURE


def _headerless(data: bytes, source: str, fmt: str, order: str) -> Bitstream:
    name = re.split(r"[\\/]", source)[-1]
    for suffix in (".pdi", ".bin", ".bit"):
        name = name.removesuffix(suffix)
    name = name.removesuffix("_partial") or "bitstream"
    return Bitstream(
        design=name,
        part="",
        region=None,
        date="",
        time="",
        payload_length=len(data),
        size=len(data),
        source=source,
        design_field="",
        digest=hashlib.sha256(data).hexdigest(),
        format=fmt,
        partial=None,
        tags=(),
        word_order=order,
    )


def check_family(bitstream: Bitstream, family: str) -> None:
    """Whether ``family``'s Linux FPGA manager takes ``bitstream`` (its format, and the family
    of its part); changes nothing. Raises :class:`~juggle.errors.BitstreamFamilyError` naming
    the file and the field: an unknown ``family``, a format the manager does not take, a
    ``.bit`` whose part is of another family."""
    source = bitstream.source
    known = FAMILIES.get(family) if isinstance(family, str) else None
    if known is None:
        raise BitstreamFamilyError(
            f"bitstream {source!r}: family {family!r} is not one juggle converts for "
            f"(known: {', '.join(sorted(FAMILIES))})",
            path=source,
            field="family",
        )
    formats, _ = known
    if bitstream.format not in formats:
        raise BitstreamFamilyError(
            f"bitstream {source!r}: format {bitstream.format!r} is not what a {family} FPGA "
            f"manager takes ({' or '.join(formats)})",
            path=source,
            field="format",
        )
    if bitstream.part:
        of_part = part_family(bitstream.part)
        if of_part is not None and of_part != family:
            raise BitstreamFamilyError(
                f"bitstream {source!r}: field 'b' (part) {bitstream.part!r} is a {of_part} "
                f"device, the manager is {family}",
                path=source,
                field="part",
            )


def kernel_image(bitstream: Bitstream, data: bytes, family: str) -> bytes:
    """The bytes ``family``'s Linux FPGA manager takes for ``data`` (the file ``bitstream``
    describes): the header stripped and the words put in the order the manager wants
    (:data:`FAMILIES`: byte-swapped for Zynq-7000's PCAP, big-endian for ZynqMP); a ``.pdi``
    passed through for Versal.

    Raises, naming the file and the field, before anything is written anywhere:
    :class:`~juggle.errors.BitstreamFamilyError` for an unknown ``family``, a format the
    family's manager does not take, or a ``.bit`` whose part is of another family;
    :class:`~juggle.errors.BitstreamFormatError` when ``data`` is not ``bitstream.size``
    bytes or the image is not a whole number of 32-bit words where its words must be
    reordered; :class:`~juggle.errors.SyncWordError` for a ``.bit`` whose payload holds no
    sync word.
    """
    check_family(bitstream, family)
    source = bitstream.source
    _, want = FAMILIES[family]
    if not isinstance(data, bytes | bytearray | memoryview) or len(data) != bitstream.size:
        size = len(data) if isinstance(data, bytes | bytearray | memoryview) else type(data)
        raise BitstreamFormatError(
            f"bitstream {source!r}: data ({size} bytes) is not the {bitstream.size}-byte file "
            "the header describes",
            path=source,
            field="size",
        )
    if bitstream.format == "pdi":
        return bytes(data)
    payload = bytes(data[bitstream.header_length :])
    order = bitstream.word_order
    if bitstream.format == "bit":
        found = find_sync(payload)
        if found is None:
            raise SyncWordError(
                f"bitstream {source!r}: field 'e' (payload) holds no sync word "
                f"0x{_SYNC_WORD:08X} within its first {_SYNC_SEARCH_BYTES} bytes",
                path=source,
                field="payload",
            )
        order = found[1]
    return reorder_words(payload, order, want, source=source)


def reorder_words(image: bytes, have: str, want: str, *, source: str = "<bytes>") -> bytes:
    """``image`` (32-bit words in ``have`` order) in ``want`` order (both of
    :data:`WORD_ORDERS`). Raises :class:`~juggle.errors.BitstreamFormatError` for an unknown
    order or, where bytes move between positions, an image that is not whole words."""
    for label, value in (("have", have), ("want", want)):
        if value not in WORD_ORDERS:
            raise BitstreamFormatError(
                f"bitstream {source!r}: word order {label}={value!r} is not one of "
                f"{', '.join(WORD_ORDERS)}",
                path=source,
                field="word order",
            )
    if have == want:
        return image
    have_rev, have_le = have.startswith("bitrev"), have.endswith("le")
    want_rev, want_le = want.startswith("bitrev"), want.endswith("le")
    out = image
    if have_rev != want_rev:
        out = out.translate(_BITREV_TABLE)  # reversing bits is its own inverse
    if have_le != want_le:
        out = _swap32(out, source)
    return out


def _swap32(image: bytes, source: str) -> bytes:
    if len(image) % 4:
        raise BitstreamFormatError(
            f"bitstream {source!r}: field 'e' (payload) is {len(image)} bytes, not a whole "
            "number of 32-bit words, so its words cannot be byte-swapped",
            path=source,
            field="payload",
        )
    words = array.array("I")
    if words.itemsize != 4:  # pragma: no cover - every platform juggle runs on has 4-byte I
        return b"".join(image[i : i + 4][::-1] for i in range(0, len(image), 4))
    words.frombytes(image)
    words.byteswap()
    return words.tobytes()


def build_vendor_bit(
    design: str,
    part: str,
    payload_words: int = 64,
    *,
    partial: bool = True,
    version: str = "2022.1",
    region: str | None = None,
    date: str = "2022/10/12",
    time: str = "09:30:00",
) -> bytes:
    """A ``.bit`` as Vivado writes it (for tests and the fake kernel): design field
    ``design;PARTIAL=TRUE;UserID=0XFFFFFFFF;Version=2022.1`` (no ``PARTIAL`` tag when not
    ``partial``; a ``Region=`` tag only when ``region`` is given), part as given (Vivado's
    spelling, e.g. ``xck26-sfvc784-2LV-c``), and a payload of 64 bytes of 0xFF, the
    bus-width words, the sync word and ``payload_words`` deterministic words.

    Raises :class:`~juggle.errors.BitstreamFormatError` for names outside ``[A-Za-z0-9_.-]``
    or a negative ``payload_words``.
    """
    for label, value in (("design", design), ("part", part), ("region", region or "x")):
        if not _NAME_RE.fullmatch(value):
            raise BitstreamFormatError(
                f'"{label}" must match [A-Za-z0-9_.-]+, got {value!r}', value=value
            )
    if payload_words < 0:
        raise BitstreamFormatError(
            f'"payload_words" must be >= 0, got {payload_words}', value=payload_words
        )
    options = ["PARTIAL=TRUE"] if partial else []
    options += ["UserID=0XFFFFFFFF", f"Version={version}"]
    if region is not None:
        options.append(f"Region={region}")
    rng = random.Random(f"juggle-vendor-bit:{design}")
    payload = _VENDOR_PREFIX + _SYNC[4:] + rng.randbytes(4 * payload_words)
    header = _header(";".join([design, *options]), part, date, time)
    return header + struct.pack(">I", len(payload)) + payload


def to_bin(bit: bytes, order: str = "be", *, source: str = "<bytes>") -> bytes:
    """The headerless ``.bin`` of a ``.bit`` file's bytes in ``order`` (:data:`WORD_ORDERS`;
    ``le`` is what Zynq-7000 tools write, ``be`` bootgen's ZynqMP ``.bit.bin``).

    Raises :class:`~juggle.errors.BitstreamError` like :func:`parse_bitstream` and
    :func:`reorder_words`.
    """
    header = parse_bitstream(bit, source=source)
    return reorder_words(bytes(bit[header.header_length :]), "be", order, source=source)


def load_any(
    path: str | Path,
    *,
    expect_part: str | None = None,
    expect_partial: bool | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> tuple[Bitstream, bytes]:
    """The parsed header (:func:`parse_any`) and the bytes of the bitstream file at ``path``,
    whatever its format; the size is checked by ``stat`` before anything is read.

    Raises like :func:`load_bitstream` and :func:`parse_any`.
    """
    p = Path(path)
    data = _read_bounded(p, limits)
    bitstream = parse_any(
        data,
        source=str(p),
        expect_part=expect_part,
        expect_partial=expect_partial,
        limits=limits,
    )
    return bitstream, data
