"""Bitstream files: the .bit header round-trips; every malformed file is named and refused."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from fabric_support import PART, TDES_BYTES

from juggle.errors import BitstreamFormatError, MissingBitstreamError
from juggle.fabric import (
    build_bitstream,
    load_bitstream,
    normalize_part,
    parse_bitstream,
    read_bitstream,
    write_bitstream,
)


def test_round_trip_has_exact_size_and_fields() -> None:
    data = build_bitstream("tdes", PART, "prr0", TDES_BYTES)
    assert len(data) == TDES_BYTES
    bs = parse_bitstream(data, source="tdes.bit")
    assert (bs.design, bs.part, bs.region) == ("tdes", PART, "prr0")
    assert bs.design_field == "tdes_partial.ncd;UserID=0xFFFFFFFF;Region=prr0"
    assert bs.size == TDES_BYTES
    assert bs.header_length + bs.payload_length == TDES_BYTES
    assert (bs.date, bs.time, bs.source) == ("2011/06/14", "12:00:00", "tdes.bit")
    # the header is laid out as Xilinx tools write it
    assert data[:14] == bytes.fromhex("00090ff00ff00ff00ff000000161")
    payload = data[bs.header_length :]
    assert payload[:8] == bytes.fromhex("ffffffffaa995566")


def test_payload_is_deterministic_per_design() -> None:
    a1 = build_bitstream("des", PART, "prr0", 5000)
    a2 = build_bitstream("des", PART, "prr0", 5000)
    b = build_bitstream("tdes", PART, "prr0", 5000)
    assert a1 == a2
    header = parse_bitstream(a1).header_length
    assert a1[header + 8 :] != b[header + 9 :][: len(a1) - header - 8]


def test_write_and_read_file(tmp_path: Path) -> None:
    path = write_bitstream(tmp_path / "mods" / "add.bit", "add", PART, "prr0", 123_249)
    assert path.stat().st_size == 123_249
    bs = read_bitstream(path)
    assert (bs.design, bs.source) == ("add", str(path))
    bs2, data = load_bitstream(path)
    assert bs2 == bs and len(data) == bs.size


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "gone.bit"
    with pytest.raises(MissingBitstreamError, match=r"gone\.bit") as caught:
        read_bitstream(path)
    assert caught.value.path == str(path)


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda d: d[:40], "truncated"),
        (lambda d: d[:8], "truncated in the magic field"),
        (lambda d: d[:-1], r"length mismatch \(header says \d+ bytes, file holds \d+\)"),
        (lambda d: d + b"\0", "length mismatch"),
        (lambda d: b"\x00\x09" + b"\x00" * 9 + d[11:], "bad magic"),
        (lambda d: d[:13] + b"z" + d[14:], "unknown field key b.z. at byte 13"),
    ],
)
def test_malformed_headers_are_named(mangle: Callable[[bytes], bytes], message: str) -> None:
    data = mangle(build_bitstream("tdes", PART, "prr0", 2000))
    with pytest.raises(BitstreamFormatError, match=message) as caught:
        parse_bitstream(data, source="bad.bit")
    assert "bad.bit" in str(caught.value)


def test_header_without_region_or_with_tool_path() -> None:
    def field(key: bytes, text: str) -> bytes:
        raw = text.encode() + b"\0"
        return key + struct.pack(">H", len(raw)) + raw

    head = bytes.fromhex("00090ff00ff00ff00ff0000001")
    body = field(b"a", r"C:\work\implementation\adder_partial.ncd;UserID=0xFFFFFFFF")
    body += field(b"b", "xc2vp30ff896") + field(b"c", "2011/03/01") + field(b"d", "10:11:12")
    data = head + body + b"e" + struct.pack(">I", 4) + b"\xaa\x99\x55\x66"
    bs = parse_bitstream(data)
    assert (bs.design, bs.region, bs.payload_length) == ("adder", None, 4)


def test_bad_build_arguments() -> None:
    with pytest.raises(BitstreamFormatError, match='"size" must be >= '):
        build_bitstream("tdes", PART, "prr0", 20)
    with pytest.raises(BitstreamFormatError, match='"region" must match'):
        build_bitstream("tdes", PART, "prr0;Region=prr1", 1000)


def test_normalize_part() -> None:
    assert normalize_part("XC2VP30FF896-7") == "2vp30ff896"
    assert normalize_part("2vp30ff896") == "2vp30ff896"
    assert normalize_part("xc7z020clg484-1") == "7z020clg484"
    assert normalize_part("2vp50ff1152") != normalize_part("2vp30ff896")
