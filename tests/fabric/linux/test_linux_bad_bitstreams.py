"""Bad bitstreams on a kv260 that behaves like one (issue 20, acceptance): each is a specific
``BitstreamError`` naming the file and the field, raised before the kernel sees a byte:
nothing is written under the fake's root (its write log is unchanged) and rp0 stays EMPTY."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from linux_support import KV_PART, kv260_fake

from juggle.errors import (
    BitstreamError,
    BitstreamFamilyError,
    NotPartialError,
    PartMismatchError,
    SyncWordError,
    TruncatedBitstreamError,
)
from juggle.fabric import Fabric, open_fabric
from juggle.fabric.bitstream import build_vendor_bit, parse_any
from juggle.fabric.linux.fake import FakeKernel


def _kv260(root: Path) -> FakeKernel:
    return kv260_fake(root)


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


GOOD = build_vendor_bit("accel", KV_PART, payload_words=256)


def _truncated() -> tuple[str, bytes]:
    return "accel_trunc.bit", GOOD[:40]


def _no_sync() -> tuple[str, bytes]:
    return "accel_nosync.bit.bin", bytes(4096)


def _wrong_part() -> tuple[str, bytes]:
    return "accel_7z.bit", build_vendor_bit("accel", "xc7z020clg484-1", payload_words=256)


def _full_image() -> tuple[str, bytes]:
    return "accel_full.bit", build_vendor_bit("accel", KV_PART, payload_words=256, partial=False)


def _pdi_on_zynqmp() -> tuple[str, bytes]:
    return "accel.pdi", b"\x00" * 16 + b"XNLX" + bytes(64)


CASES: dict[str, tuple[Callable[[], tuple[str, bytes]], type[BitstreamError], str]] = {
    "truncated header": (_truncated, TruncatedBitstreamError, ""),
    "no sync word": (_no_sync, SyncWordError, ""),
    "wrong part": (_wrong_part, PartMismatchError, "part"),
    "full image for a partial slot": (_full_image, NotPartialError, ""),
    "a .pdi for a ZynqMP": (_pdi_on_zynqmp, BitstreamFamilyError, ""),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_bitstream_is_refused_before_the_kernel_sees_a_byte(
    tmp_path: Path, case: str
) -> None:
    make, error, field = CASES[case]
    name, data = make()
    kernel = _kv260(tmp_path / "root")
    fab: Fabric = open_fabric("kv260", backend="linux", sysfs=kernel, load_shell=True)
    try:
        before_log = list(kernel.log)
        before_tree = _tree(kernel.root)
        with pytest.raises(error) as refused:
            bitstream = parse_any(data, source=name, expect_part=None)
            fab.program("rp0", bitstream, data)
        message = str(refused.value)
        assert name in message, message  # the file is named
        if field:
            assert field in message, message
        assert kernel.log == before_log  # not one write reached the kernel
        assert _tree(kernel.root) == before_tree
        assert fab.regions()[0].state == "EMPTY"
        # the same slot then takes a good partial
        fab.program("rp0", parse_any(GOOD, source="accel.bit"), GOOD)
        assert fab.regions()[0].state == "PROGRAMMED"
    finally:
        fab.close()
