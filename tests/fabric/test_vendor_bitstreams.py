"""Bitstreams as vendor tools write them (issue 20, item 1): Vivado ``.bit`` with ``;KEY=VALUE``
tags and no ``Region=``, headerless ``.bin``/``.bit.bin`` in every word order, Versal ``.pdi``;
part names as Vivado spells them; the image each family's Linux FPGA manager takes; every bad
input refused with its own ``BitstreamError`` naming the file and the field."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from fabric_support import PART
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from juggle.errors import (
    BitstreamError,
    BitstreamFamilyError,
    BitstreamFormatError,
    BitstreamTooLargeError,
    NotPartialError,
    PartMismatchError,
    RegionMismatchError,
    SyncWordError,
    TruncatedBitstreamError,
)
from juggle.fabric import Fabric
from juggle.fabric.bitstream import (
    WORD_ORDERS,
    build_bitstream,
    build_vendor_bit,
    find_sync,
    kernel_image,
    load_any,
    parse_any,
    parse_bitstream,
    part_family,
    reorder_words,
    same_part,
    to_bin,
)
from juggle.limits import Limits

KV260 = "xck26-sfvc784-2LV-c"
ZEDBOARD = "xc7z020clg484-1"
SYNC_BE = bytes.fromhex("aa995566")


def _swap_words(image: bytes) -> bytes:
    """Every 32-bit word byte-swapped, computed independently of the code under test."""
    return b"".join(
        struct.pack("<I", struct.unpack(">I", image[i : i + 4])[0]) for i in range(0, len(image), 4)
    )


def _bitrev(image: bytes) -> bytes:
    return bytes(int(f"{b:08b}"[::-1], 2) for b in image)


def _payload(bit: bytes) -> bytes:
    """The payload of a .bit, found by walking the header by hand."""
    pos = 13
    while bit[pos : pos + 1] != b"e":
        pos += 3 + struct.unpack(">H", bit[pos + 1 : pos + 3])[0]
    (length,) = struct.unpack(">I", bit[pos + 1 : pos + 5])
    return bit[pos + 5 : pos + 5 + length]


# -- Vivado .bit -------------------------------------------------------------------------------


def test_vivado_partial_bit_reads_tags_and_needs_no_region() -> None:
    data = build_vendor_bit("kv260_rp0_accel", KV260, 32)
    bs = parse_any(data, source="fw/accel_partial.bit", expect_part="XCK26-SFVC784-2LV-I")
    assert bs.design_field == "kv260_rp0_accel;PARTIAL=TRUE;UserID=0XFFFFFFFF;Version=2022.1"
    assert (bs.format, bs.design, bs.part, bs.region, bs.partial) == (
        "bit",
        "kv260_rp0_accel",
        KV260,
        None,
        True,
    )
    assert bs.tags == (("PARTIAL", "TRUE"), ("UserID", "0XFFFFFFFF"), ("Version", "2022.1"))
    assert (bs.date, bs.time, bs.size) == ("2022/10/12", "09:30:00", len(data))
    payload = _payload(data)
    assert bs.payload_length == len(payload) and len(payload) % 4 == 0
    assert payload[: 64 + 16] == b"\xff" * 64 + bytes.fromhex("000000bb11220044" + "ff" * 8)
    assert payload[80:84] == SYNC_BE
    assert parse_any(data, source="fw/accel_partial.bit", expect_partial=True) == bs


def test_vivado_full_bit_is_not_partial() -> None:
    data = build_vendor_bit("kv260_base", KV260, 8, partial=False)
    bs = parse_any(data, source="fw/base.bit")
    assert bs.partial is False and "PARTIAL" not in bs.design_field
    with pytest.raises(NotPartialError, match=r"'fw/base\.bit' is a full-device image") as err:
        parse_any(data, source="fw/base.bit", expect_partial=True)
    assert (err.value.path, err.value.field) == ("fw/base.bit", "design")


def test_region_tag_optional_partial_flag_of_own_files() -> None:
    own = parse_bitstream(build_bitstream("tdes", PART, "prr0", 5000))
    assert (own.region, own.partial, own.format) == ("prr0", True, "bit")
    tagged = parse_any(build_vendor_bit("acc", KV260, 4, region="rp0"), source="a.bit")
    assert (tagged.region, tagged.partial) == ("rp0", True)
    bare = parse_any(build_vendor_bit("acc", KV260, 4), source="a.bit")
    assert bare.region is None


# -- headerless .bin ---------------------------------------------------------------------------


@pytest.mark.parametrize("order", WORD_ORDERS)
def test_bin_in_every_word_order_round_trips(order: str) -> None:
    bit = build_vendor_bit("accel", KV260, 40)
    payload = _payload(bit)
    expected = {
        "be": payload,
        "le": _swap_words(payload),
        "bitrev": _bitrev(payload),
        "bitrev-le": _swap_words(_bitrev(payload)),
    }[order]
    image = to_bin(bit, order)
    assert image == expected
    bs = parse_any(image, source="pkg/accel_slot0/accel.bit.bin", expect_part=ZEDBOARD)
    assert (bs.format, bs.word_order, bs.design, bs.part, bs.partial) == (
        "bin",
        order,
        "accel",
        "",
        None,
    )
    assert (bs.size, bs.payload_length, bs.header_length) == (len(image), len(image), 0)
    assert find_sync(image) == (80, order)
    assert kernel_image(bs, image, "zynqmp") == payload
    assert kernel_image(bs, image, "zynq") == _swap_words(payload)
    assert reorder_words(image, order, "be") == payload


def test_load_any_reads_files_of_each_format(tmp_path: Path) -> None:
    bit = build_vendor_bit("accel", KV260, 16)
    (tmp_path / "accel.bit").write_bytes(bit)
    (tmp_path / "accel.bit.bin").write_bytes(to_bin(bit, "le"))
    (tmp_path / "accel.pdi").write_bytes(b"\x01\x02\x03")
    assert load_any(tmp_path / "accel.bit")[0].format == "bit"
    bs, data = load_any(tmp_path / "accel.bit.bin")
    assert (bs.format, bs.word_order, data) == ("bin", "le", to_bin(bit, "le"))
    assert load_any(tmp_path / "accel.pdi")[0].format == "pdi"
    with pytest.raises(BitstreamTooLargeError, match=r"accel\.bit\.bin"):
        load_any(tmp_path / "accel.bit.bin", limits=Limits(max_bitstream_bytes=64))


# -- Versal .pdi -------------------------------------------------------------------------------


def test_pdi_passes_through_for_versal_only() -> None:
    pdi = b"\xff" * 16 + SYNC_BE + b"XNLX" + bytes(range(200))
    bs = parse_any(pdi, source="rm.img")  # recognised by its boot header, whatever its name
    assert (bs.format, bs.design, bs.size) == ("pdi", "rm.img", len(pdi))
    assert kernel_image(bs, pdi, "versal") == pdi
    with pytest.raises(BitstreamFamilyError, match=r"'rm\.img': format 'pdi'.*zynqmp") as err:
        kernel_image(bs, pdi, "zynqmp")
    assert (err.value.path, err.value.field) == ("rm.img", "format")
    bit = build_vendor_bit("accel", "xcvc1902-vsva2197-2MP-e-S", 4)
    with pytest.raises(BitstreamFamilyError, match="format 'bit'"):
        kernel_image(parse_any(bit, source="a.bit"), bit, "versal")
    with pytest.raises(BitstreamTooLargeError, match=r"'big\.pdi'"):
        parse_any(bytes(100), source="big.pdi", limits=Limits(max_bitstream_bytes=99))
    with pytest.raises(BitstreamFormatError, match=r"'empty\.pdi'.*empty"):
        parse_any(b"", source="empty.pdi")


# -- part names --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("xck26-sfvc784-2LV-c", "XCK26-SFVC784-2LV-I", True),
        ("xck26-sfvc784-2LV-c", "xck26", True),
        ("xck26-sfvc784-2LV-c", "xck24-sfvc784-2LV-c", False),
        ("xczu9eg-ffvb1156-2-e", "zu9eg-ffvb1156", True),
        ("xczu9eg-ffvb1156-2-e", "xczu9eg-ffvc900-2-e", False),
        ("xc7z020clg484-1", "7z020clg484", True),
        ("xc7z020clg484-1", "xc7z020clg400-1", False),
        ("xc7z020clg484-1", "xc7z010clg484-1", False),
        ("XC2VP30FF896-7", "2vp30ff896", True),
        ("2vp30ff896", "2vp50ff1152", False),
        ("", "", False),
    ],
)
def test_same_part_as_vivado_spells_them(a: str, b: str, same: bool) -> None:
    assert same_part(a, b) is same
    assert same_part(b, a) is same


def test_part_family() -> None:
    assert part_family(KV260) == "zynqmp"
    assert part_family("xczu9eg-ffvb1156-2-e") == "zynqmp"
    assert part_family(ZEDBOARD) == part_family("7z020clg484") == "zynq"
    assert part_family("xcvc1902-vsva2197-2MP-e-S") == "versal"
    assert part_family(PART) == "virtex2p"
    assert part_family("nosuchpart") is None


# -- kernel images -----------------------------------------------------------------------------


def test_zynq_kernel_image_is_header_stripped_and_word_swapped() -> None:
    bit = build_vendor_bit("zed_accel", ZEDBOARD, 100)
    bs = parse_any(bit, source="zed_accel.bit", expect_part="7z020clg484")
    image = kernel_image(bs, bit, "zynq")
    payload = _payload(bit)
    assert image == _swap_words(payload) and len(image) == len(bit) - bs.header_length
    assert image[80:84] == bytes.fromhex("665599aa")  # what zynq-fpga.c looks for
    assert kernel_image(bs, bit, "zynq") == kernel_image(
        parse_any(to_bin(bit), source="z.bin"), to_bin(bit), "zynq"
    )
    own = build_bitstream("tdes", "7z020clg484", "prr0", 10_001)  # whole words at this size
    own_bs = parse_bitstream(own, source="tdes.bit")
    assert own_bs.payload_length % 4 == 0
    assert kernel_image(own_bs, own, "zynq") == _swap_words(own[own_bs.header_length :])


def test_zynqmp_kernel_image_is_the_big_endian_payload() -> None:
    bit = build_vendor_bit("kv_accel", KV260, 100)
    bs = parse_any(bit, source="kv_accel.bit")
    assert kernel_image(bs, bit, "zynqmp") == _payload(bit)


# -- refusals: each bad input its own error, naming the file and the field ---------------------


def test_truncated_header_names_file_and_field() -> None:
    data = build_vendor_bit("accel", KV260, 4)
    fields = {
        1: "magic",
        14: "field design",
        40: "field design",
        80: "field part",
        95: "field date",
    }
    for cut, what in fields.items():
        with pytest.raises(TruncatedBitstreamError, match=rf"'cut\.bit' is truncated in .*{what}"):
            parse_any(data[:cut], source="cut.bit")
    header = parse_any(data, source="x.bit").header_length
    with pytest.raises(TruncatedBitstreamError, match="payload length"):
        parse_any(data[: header - 2], source="cut.bit")


def test_wrong_part_names_file_and_field() -> None:
    data = build_vendor_bit("accel", ZEDBOARD, 4)
    with pytest.raises(PartMismatchError, match=r"'a\.bit': field 'b' \(part\) is 'xc7z020") as err:
        parse_any(data, source="a.bit", expect_part=KV260)
    assert (err.value.path, err.value.field) == ("a.bit", "part")


def test_wrong_family_names_file_and_field() -> None:
    data = build_vendor_bit("accel", ZEDBOARD, 4)
    bs = parse_any(data, source="a.bit")
    with pytest.raises(
        BitstreamFamilyError,
        match=r"'a\.bit': field 'b' \(part\).*zynq device, the manager is zynqmp",
    ) as err:
        kernel_image(bs, data, "zynqmp")
    assert (err.value.path, err.value.field) == ("a.bit", "part")
    with pytest.raises(BitstreamFamilyError, match=r"'a\.bit': family 'zynq9'") as err:
        kernel_image(bs, data, "zynq9")
    assert (err.value.path, err.value.field) == ("a.bit", "family")


def test_bin_without_sync_word_is_refused() -> None:
    with pytest.raises(
        SyncWordError, match=r"'x\.bit\.bin' is neither a \.bit .* no sync word"
    ) as err:
        parse_any(b"\xff" * 4096, source="x.bit.bin")
    assert (err.value.path, err.value.field) == ("x.bit.bin", "sync word")
    # a sync word past the bounded prefix, or off a word boundary, does not count
    with pytest.raises(SyncWordError):
        parse_any(b"\xff" * 4100 + SYNC_BE, source="late.bin")
    with pytest.raises(SyncWordError):
        parse_any(b"\xff" * 6 + SYNC_BE + b"\xff" * 2, source="odd.bin")
    assert parse_any(b"\xff" * 4096 + SYNC_BE, source="edge.bin").format == "bin"


def test_bit_payload_without_sync_word_is_refused_at_conversion() -> None:
    data = build_bitstream("tdes", "7z020clg484", "prr0", 5000)
    bs = parse_bitstream(data, source="t.bit")
    payload = data[bs.header_length :].replace(SYNC_BE, b"\0\0\0\0")
    bad = data[: bs.header_length] + payload
    bad_bs = parse_bitstream(bad, source="t.bit")
    with pytest.raises(SyncWordError, match=r"'t\.bit': field 'e' \(payload\)") as err:
        kernel_image(bad_bs, bad, "zynq")
    assert (err.value.path, err.value.field) == ("t.bit", "payload")


def test_conversion_refuses_other_bytes_and_partial_words() -> None:
    bit = build_vendor_bit("accel", ZEDBOARD, 8)
    bs = parse_any(bit, source="a.bit")
    with pytest.raises(BitstreamFormatError, match=r"'a\.bit': data .* not the"):
        kernel_image(bs, bit[:-4], "zynq")
    image = to_bin(bit) + b"\x01\x02"
    bin_bs = parse_any(image, source="b.bin")
    assert kernel_image(bin_bs, image, "zynqmp") == image  # nothing to reorder
    with pytest.raises(
        BitstreamFormatError, match=r"'b\.bin': field 'e' \(payload\).*32-bit words"
    ):
        kernel_image(bin_bs, image, "zynq")
    with pytest.raises(BitstreamFormatError, match="word order"):
        reorder_words(image, "middle", "be")


# -- the fabric takes a Vivado partial without Region= and refuses a tag naming another region -


def test_fabric_programs_vendor_bit_and_bin_without_region_tag(fabric: Fabric) -> None:
    bit = build_vendor_bit("tdes", "XC2VP30FF896-7", 1000)
    fabric.program("prr0", parse_any(bit, source="tdes.bit"), bit)
    assert fabric.regions()[0].design == "tdes"
    image = to_bin(bit, "le")
    fabric.program("prr0", parse_any(image, source="tdes.bit.bin"), image)
    assert fabric.regions()[0].bitstreams_loaded == 2
    other = build_vendor_bit("tdes", PART, 1000, region="prr1")
    with pytest.raises(RegionMismatchError, match="built for region 'prr1', not 'prr0'"):
        fabric.program("prr0", parse_any(other, source="o.bit"), other)
    full = build_vendor_bit("tdes", PART, 1000, partial=False)
    with pytest.raises(NotPartialError, match=r"'f\.bit' is a full-device image"):
        fabric.program("prr0", parse_any(full, source="f.bit"), full)
    other_order = to_bin(bit, "be")  # the same design, but not the file the header describes
    with pytest.raises(BitstreamFormatError, match="is not the file"):
        fabric.program("prr0", parse_any(image, source="tdes.bit.bin"), other_order)
    assert fabric.regions()[0].bitstreams_loaded == 2


# -- hostile bytes: only BitstreamError, ever --------------------------------------------------

_FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_SEEDS = [
    build_vendor_bit("accel", KV260, 8),
    to_bin(build_vendor_bit("accel", KV260, 8), "le"),
    b"\xff" * 16 + SYNC_BE + b"XNLX" + bytes(8),
]


def _exercise(data: bytes, source: str) -> None:
    try:
        bs = parse_any(data, source=source, expect_part=KV260, expect_partial=True)
    except BitstreamError:
        return
    for family in ("zynq", "zynqmp", "versal"):
        try:
            kernel_image(bs, data, family)
        except BitstreamError:
            pass


@_FUZZ
@given(data=st.binary(max_size=512), source=st.sampled_from(["x.bit", "x.bit.bin", "x.pdi"]))
def test_random_bytes_raise_only_bitstream_errors(data: bytes, source: str) -> None:
    _exercise(data, source)


@_FUZZ
@given(
    seed=st.sampled_from(_SEEDS),
    edits=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=8),
    cut=st.integers(0, 500),
)
def test_mutated_vendor_files_raise_only_bitstream_errors(
    seed: bytes, edits: list[tuple[int, int]], cut: int
) -> None:
    data = bytearray(seed)
    for at, value in edits:
        if at < len(data):
            data[at] = value
    _exercise(bytes(data[: max(cut, len(data) // 2)]), "m.bit")
