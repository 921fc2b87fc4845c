"""The minimal FDT writer/reader behind the fake kernel's overlays (fdt.py): what it writes
is what dtc writes, it reads what dtc writes, and a malformed blob is a BitstreamFormatError
naming the field, never an IndexError or struct.error."""

from __future__ import annotations

import random
import struct

import pytest

from juggle.errors import BitstreamFormatError
from juggle.fabric.linux.fdt import (
    FdtNode,
    UioNode,
    build_overlay,
    decode_fdt,
    encode_fdt,
    read_overlay,
)

# `dtc -@ -I dts -O dtb` (device-tree-compiler 1.6.1) of this source:
DTS = """
/dts-v1/;
/plugin/;
&fpga_PR0 {
	firmware-name = "AES128_slot0.bit.bin";
	partial-fpga-config;
	fpga-bridges = <&br_pr0>;
};
&amba {
	#address-cells = <2>;
	#size-cells = <2>;
	AccelConfig_0: AccelConfig@a4010000 {
		compatible = "generic-uio";
		reg = <0x0 0xa4010000 0x0 0x1000>;
	};
	rm_comm_box@a4020000 {
		compatible = "generic-uio";
		reg = <0x0 0xa4020020 0x0 0x1000>;
		linux,uio-name = "rm_comm_box";
	};
};
"""
DTC_BLOB = bytes.fromhex(
    "d00dfeed0000036200000038000002c80000002800000011000000100000"
    "00000000009a000002900000000000000000000000000000000000000001"
    "0000000000000001667261676d656e744030000000000003000000040000"
    "0000ffffffff000000015f5f6f7665726c61795f5f000000000300000015"
    "000000074145533132385f736c6f74302e6269742e62696e000000000000"
    "00030000000000000015000000030000000400000029ffffffff00000002"
    "0000000200000001667261676d656e744031000000000003000000040000"
    "0000ffffffff000000015f5f6f7665726c61795f5f000000000300000004"
    "000000360000000200000003000000040000004500000002000000014163"
    "63656c436f6e66696740613430313030303000000000000000030000000c"
    "0000005167656e657269632d75696f0000000003000000100000005c0000"
    "0000a4010000000000000000100000000003000000040000006000000001"
    "0000000200000001726d5f636f6d6d5f626f784061343032303030300000"
    "0000000000030000000c0000005167656e657269632d75696f0000000003"
    "000000100000005c00000000a40200200000000000001000000000030000"
    "000c00000068726d5f636f6d6d5f626f7800000000020000000200000002"
    "000000015f5f73796d626f6c735f5f00000000030000002d000000772f66"
    "7261676d656e7440312f5f5f6f7665726c61795f5f2f416363656c436f6e"
    "6669674061343031303030300000000000000002000000015f5f66697875"
    "70735f5f00000000000300000015000000852f667261676d656e7440303a"
    "7461726765743a300000000000000003000000270000008e2f667261676d"
    "656e7440302f5f5f6f7665726c61795f5f3a667067612d62726964676573"
    "3a3000000000000300000015000000952f667261676d656e7440313a7461"
    "726765743a30000000000000000200000002000000097461726765740066"
    "69726d776172652d6e616d65007061727469616c2d667067612d636f6e66"
    "696700667067612d627269646765730023616464726573732d63656c6c73"
    "002373697a652d63656c6c7300636f6d70617469626c6500726567007068"
    "616e646c65006c696e75782c75696f2d6e616d6500416363656c436f6e66"
    "69675f3000667067615f5052300062725f70723000616d626100"
)


def test_reads_an_overlay_compiled_by_dtc() -> None:
    info = read_overlay(DTC_BLOB, source="slot.dtbo")
    assert info.firmware_name == "AES128_slot0.bit.bin"
    assert (info.target, info.partial, info.bridges) == ("fpga_PR0", True, ("br_pr0",))
    assert info.targets == ("fpga_PR0", "amba")
    assert [(n.node, n.reg, n.uio_name) for n in info.uio_nodes] == [
        ("AccelConfig@a4010000", (0xA4010000, 0x1000), None),
        ("rm_comm_box@a4020000", (0xA4020020, 0x1000), "rm_comm_box"),
    ]
    assert info.uio_nodes[1].base_name == "rm_comm_box"


def test_build_overlay_round_trips_like_dtc_writes_it() -> None:
    blob = build_overlay(
        firmware_name="rp0/aes.bit.bin",
        target="fpga_PR0",
        bridges=["br_pr0"],
        uio=[
            UioNode("AccelConfig", (0xA4010000, 0x1000)),
            UioNode("box", (0x1_0000_0000, 0x20), "b"),
        ],
    )
    assert blob[:4] == bytes.fromhex("d00dfeed")
    assert struct.unpack_from(">I", blob, 4)[0] == len(blob)  # totalsize
    root = decode_fdt(blob)
    fixups = root.child("__fixups__")
    assert fixups is not None
    assert fixups.props["fpga_PR0"] == b"/fragment@0:target:0\0"
    assert fixups.props["br_pr0"] == b"/fragment@0/__overlay__:fpga-bridges:0\0"
    assert fixups.props["amba"] == b"/fragment@1:target:0\0"
    info = read_overlay(blob)
    assert (info.firmware_name, info.target, info.partial) == ("rp0/aes.bit.bin", "fpga_PR0", True)
    assert [(n.full_name, n.reg, n.uio_name) for n in info.uio_nodes] == [
        ("AccelConfig@a4010000", (0xA4010000, 0x1000), None),
        ("box@100000000", (0x1_0000_0000, 0x20), "b"),
    ]
    base = read_overlay(build_overlay(firmware_name="shell.bit.bin"))
    assert (base.target, base.partial, base.uio_nodes) == ("fpga_full", False, ())
    zynq = read_overlay(
        build_overlay(firmware_name=None, uio=[UioNode("r", (0x43C00000, 0x100))], cells=1)
    )
    assert zynq.firmware_name is None and zynq.uio_nodes[0].reg == (0x43C00000, 0x100)


def test_encode_decode_keeps_every_property_and_child() -> None:
    tree = FdtNode("", {"a": b"", "bb": b"xyz"}, [FdtNode("c@1", {"a": b"\x01\x02\x03\x04"})])
    assert decode_fdt(encode_fdt(tree)) == tree


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"firmware_name": "x.bin", "target": "fpga PR0"}, '"target"'),
        ({"firmware_name": "../x.bin"}, '"firmware_name"'),
        ({"firmware_name": "x.bin", "bridges": ["br-0"]}, '"bridges"'),
        ({"firmware_name": None, "uio": [UioNode("a b", (0, 4))]}, '"node"'),
        ({"firmware_name": None, "uio": [UioNode("r", (1 << 32, 4))], "cells": 1}, '"reg"'),
        ({"firmware_name": None, "cells": 3}, '"cells"'),
    ],
)
def test_build_refuses_bad_names(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(BitstreamFormatError, match=field):
        build_overlay(**kwargs)  # type: ignore[arg-type]


def _header(blob: bytes, index: int, value: int) -> bytes:
    return blob[: 4 * index] + struct.pack(">I", value) + blob[4 * index + 4 :]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: b[:20], "truncated in the header"),
        (lambda b: _header(b, 0, 0xFEEDFACE), "field magic"),
        (lambda b: _header(b, 1, len(b) + 4), "field totalsize"),
        (lambda b: _header(b, 5, 15), "field version"),
        (lambda b: _header(b, 2, 6), "field off_dt_struct"),
        (lambda b: _header(b, 8, 1 << 20), "field off_dt_strings"),
        (lambda b: b[:56] + struct.pack(">I", 7) + b[60:], "unknown token 0x7"),
        (lambda b: b[:84] + struct.pack(">I", 0x10000) + b[88:], "runs past the structure"),
        (lambda b: _header(b, 9, struct.unpack_from(">I", b, 36)[0] - 4), "truncated in a token"),
        (lambda b: _header(b, 8, 3), "not NUL-terminated"),
    ],
)
def test_malformed_blobs_name_the_field(mutate: object, field: str) -> None:
    blob = build_overlay(firmware_name="x.bin")
    with pytest.raises(BitstreamFormatError, match=field):
        read_overlay(mutate(blob), source="bad.dtbo")  # type: ignore[operator]


def test_semantic_faults_name_the_field() -> None:
    reg = FdtNode("d@0", {"compatible": b"generic-uio\0", "reg": b"\0" * 12})
    two_fw = FdtNode(
        "",
        children=[
            FdtNode(
                "fragment@0",
                {"target-path": b"/a\0"},
                [FdtNode("__overlay__", {"firmware-name": b"a\0"})],
            ),
            FdtNode(
                "fragment@1",
                {"target-path": b"/b\0"},
                [FdtNode("__overlay__", {"firmware-name": b"b\0"}, [reg])],
            ),
        ],
    )
    with pytest.raises(BitstreamFormatError, match="second firmware-name"):
        read_overlay(encode_fdt(two_fw))
    no_target = FdtNode("", children=[FdtNode("fragment@0", children=[FdtNode("__overlay__")])])
    with pytest.raises(BitstreamFormatError, match="no field target"):
        read_overlay(encode_fdt(no_target))
    bad_reg = FdtNode(
        "",
        children=[
            FdtNode(
                "fragment@0", {"target-path": b"/a\0"}, [FdtNode("__overlay__", children=[reg])]
            )
        ],
    )
    with pytest.raises(BitstreamFormatError, match="field reg is 12 bytes"):
        read_overlay(encode_fdt(bad_reg))
    deep = FdtNode("")
    node = deep
    for level in range(20):
        node.children.append(FdtNode(f"n{level}"))
        node = node.children[0]
    with pytest.raises(BitstreamFormatError, match="nests deeper"):
        decode_fdt(encode_fdt(deep))
    with pytest.raises(BitstreamFormatError, match="over the limit"):
        decode_fdt(bytes((1 << 20) + 1))
    with pytest.raises(BitstreamFormatError, match="must be bytes"):
        decode_fdt("d00dfeed")  # type: ignore[arg-type]


def test_every_truncation_and_byte_flip_is_a_format_error_or_parses() -> None:
    rng = random.Random(20)
    for blob in (DTC_BLOB, build_overlay(firmware_name="a.bin", uio=[UioNode("u", (0x1000, 4))])):
        cases = [blob[:n] for n in range(len(blob))]
        for _ in range(400):
            flipped = bytearray(blob)
            flipped[rng.randrange(len(blob))] ^= 1 << rng.randrange(8)
            cases.append(bytes(flipped))
        for case in cases:
            try:
                read_overlay(case)
            except BitstreamFormatError:
                pass
