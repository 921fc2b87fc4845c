"""A minimal flattened device tree (``.dtb`` / ``.dtbo``) writer and reader.

Enough of the format to build the device-tree overlay an FPGA slot needs and to read one back
(what :class:`~juggle.fabric.linux.fake.FakeKernel` does when an overlay is applied).

The format (Devicetree Specification v0.4, chapter 5 "Flattened Devicetree (DTB) Format") is
a 40-byte big-endian header, a memory reservation block, a *structure block* of 32-bit tokens
and a *strings block* holding property names::

    header   magic 0xd00dfeed, totalsize, off_dt_struct, off_dt_strings, off_mem_rsvmap,
             version 17, last_comp_version 16, boot_cpuid_phys, size_dt_strings, size_dt_struct
    rsvmap   (address, size) u64 pairs ending with (0, 0)
    struct   FDT_BEGIN_NODE name\\0 (padded to 4) | FDT_PROP len nameoff value (padded to 4)
             | FDT_END_NODE | FDT_NOP ... FDT_END
    strings  NUL-terminated property names, referenced by offset

An overlay (Documentation/devicetree/overlay-notes.rst; dtc's ``/plugin/`` output) is a tree of
``fragment@N`` nodes, each with a ``target`` phandle and an ``__overlay__`` node holding what
is added to the target. A reference to a label of the live tree (``&fpga_full``) is written as
the placeholder phandle ``0xffffffff`` and listed in the root's ``__fixups__`` node as
``label = "/fragment@0:target:0"`` (path, property, byte offset), which the kernel resolves
when it applies the overlay. An FPGA overlay (Documentation/devicetree/bindings/fpga/
fpga-region.yaml, "Device Tree Overlay" section) targets an fpga-region and carries
``firmware-name``, ``partial-fpga-config`` for a partial image and optionally
``fpga-bridges``; the region's devices are child nodes, here in a second fragment targeting
the bus (``&amba`` on Zynq/ZynqMP, as Kria's and dfx-mgr's overlays do), each with
``compatible = "generic-uio"`` (bound by ``uio_pdrv_genirq`` when the kernel runs with
``uio_pdrv_genirq.of_id=generic-uio``), ``reg`` and optionally ``linux,uio-name``.

Parsing is bounded: every length and offset is checked against the blob before it is used, the
blob is at most :data:`MAX_BLOB_BYTES`, nesting at most :data:`MAX_DEPTH`; anything malformed
is a :class:`~juggle.errors.BitstreamFormatError` naming the source and the field.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from juggle.errors import BitstreamFormatError

__all__ = [
    "MAX_BLOB_BYTES",
    "MAX_DEPTH",
    "FdtNode",
    "OverlayInfo",
    "UioNode",
    "build_overlay",
    "decode_fdt",
    "encode_fdt",
    "read_overlay",
]

FDT_MAGIC = 0xD00DFEED
FDT_BEGIN_NODE = 0x1
FDT_END_NODE = 0x2
FDT_PROP = 0x3
FDT_NOP = 0x4
FDT_END = 0x9
_HEADER = struct.Struct(">10I")
_VERSION = 17
_LAST_COMP_VERSION = 16
_UNRESOLVED = 0xFFFFFFFF  # dtc's placeholder for a phandle fixed up at apply time

MAX_BLOB_BYTES = 1 << 20
"""Largest blob :func:`decode_fdt` accepts (an FPGA overlay is a few hundred bytes)."""
MAX_DEPTH = 16
"""Deepest node nesting :func:`decode_fdt` accepts."""

# Devicetree Specification 2.2.1: node names [A-Za-z0-9,._+-], at most 31 characters, then an
# optional @unit-address; labels (2.2.4 / dtc) [A-Za-z_][A-Za-z0-9_]*.
_NODE_NAME = re.compile(r"[A-Za-z0-9,._+\-]{1,31}")
_LABEL = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_PRINTABLE = re.compile(r"[\x20-\x7e]{1,255}")


@dataclass
class FdtNode:
    """One node: its name (with ``@unit-address``), properties (raw bytes) and children."""

    name: str
    props: dict[str, bytes] = field(default_factory=dict)
    children: list[FdtNode] = field(default_factory=list)

    def child(self, name: str) -> FdtNode | None:
        """The child called ``name`` (None when absent)."""
        for node in self.children:
            if node.name == name:
                return node
        return None

    def walk(self, path: str = "") -> Iterator[tuple[str, FdtNode]]:
        """``(path, node)`` for this node and every descendant, depth first."""
        yield path or "/", self
        for node in self.children:
            yield from node.walk(f"{path}/{node.name}")


@dataclass(frozen=True, slots=True)
class UioNode:
    """A device node of an overlay: ``node`` name (the UIO ``name`` unless ``uio_name``),
    ``reg`` = (address, size) of its first register window, ``more_regs`` any further windows
    (each becomes one UIO map), ``compatible`` its first compatible string."""

    node: str
    reg: tuple[int, int]
    uio_name: str | None = None
    compatible: str = "generic-uio"
    more_regs: tuple[tuple[int, int], ...] = ()

    @property
    def base_name(self) -> str:
        """The node name without its unit address (what the kernel's ``%pOFn`` prints)."""
        return self.node.partition("@")[0]

    @property
    def full_name(self) -> str:
        """``name@unit-address``: the unit address is the first ``reg`` address in hex."""
        return self.node if "@" in self.node else f"{self.node}@{self.reg[0]:x}"

    @property
    def regs(self) -> tuple[tuple[int, int], ...]:
        """Every register window, in ``reg`` order."""
        return (self.reg, *self.more_regs)


@dataclass(frozen=True, slots=True)
class OverlayInfo:
    """What an FPGA overlay says.

    ``target`` is the region of the fragment that carries ``firmware-name`` (a label such as
    ``fpga_full`` from ``__fixups__``, or a ``target-path``); ``targets`` every fragment's;
    ``partial`` whether ``partial-fpga-config`` is set; ``bridges`` the labels of
    ``fpga-bridges``; ``uio_nodes`` every device node (one with ``compatible`` and ``reg``).
    """

    firmware_name: str | None
    uio_nodes: tuple[UioNode, ...]
    target: str | None = None
    targets: tuple[str, ...] = ()
    partial: bool = False
    bridges: tuple[str, ...] = ()


# -- writer --------------------------------------------------------------------------------------


def encode_fdt(root: FdtNode) -> bytes:
    """The blob of the tree under ``root`` (version 17, empty reservation map)."""
    strings = bytearray()
    offsets: dict[str, int] = {}
    out = bytearray()

    def name_offset(name: str) -> int:
        if name not in offsets:
            offsets[name] = len(strings)
            strings.extend(name.encode("ascii") + b"\0")
        return offsets[name]

    def emit(node: FdtNode) -> None:
        out.extend(struct.pack(">I", FDT_BEGIN_NODE))
        out.extend(_pad(node.name.encode("ascii") + b"\0"))
        for key, value in node.props.items():
            out.extend(struct.pack(">III", FDT_PROP, len(value), name_offset(key)))
            out.extend(_pad(value))
        for child in node.children:
            emit(child)
        out.extend(struct.pack(">I", FDT_END_NODE))

    emit(root)
    out.extend(struct.pack(">I", FDT_END))
    rsvmap = bytes(16)  # the terminating (0, 0) entry
    off_rsvmap = _HEADER.size
    off_struct = off_rsvmap + len(rsvmap)
    off_strings = off_struct + len(out)
    total = off_strings + len(strings)
    header = _HEADER.pack(
        FDT_MAGIC,
        total,
        off_struct,
        off_strings,
        off_rsvmap,
        _VERSION,
        _LAST_COMP_VERSION,
        0,
        len(strings),
        len(out),
    )
    return header + rsvmap + bytes(out) + bytes(strings)


def _pad(data: bytes) -> bytes:
    return data + bytes(-len(data) % 4)


def _string(text: str) -> bytes:
    return text.encode("ascii") + b"\0"


def _cells(value: int, count: int) -> bytes:
    return b"".join(
        struct.pack(">I", (value >> (32 * i)) & 0xFFFFFFFF) for i in reversed(range(count))
    )


def build_overlay(
    *,
    firmware_name: str | None,
    target: str = "fpga_full",
    uio: Sequence[UioNode] = (),
    bridges: Sequence[str] = (),
    partial: bool | None = None,
    bus: str = "amba",
    cells: int = 2,
) -> bytes:
    """A ``.dtbo`` loading ``firmware_name`` into the fpga-region labelled ``target``.

    ``partial`` sets ``partial-fpga-config`` (default: any region but ``fpga_full``, the base
    region); ``bridges`` are labels of ``fpga-bridges`` the region switches around the load;
    ``uio`` device nodes go in a second fragment targeting ``bus``, their ``reg`` written with
    ``cells`` address and size cells (2 on ZynqMP and Versal, 1 on Zynq-7000).
    Raises :class:`~juggle.errors.BitstreamFormatError` naming the field for a bad name.
    """
    source = "build_overlay"
    for what, label in (("target", target), ("bus", bus), *(("bridges", b) for b in bridges)):
        if not _LABEL.fullmatch(label):
            raise _bad(source, f'"{what}" must be a device-tree label, got {label!r}')
    if firmware_name is not None and (
        not _PRINTABLE.fullmatch(firmware_name) or ".." in firmware_name.split("/")
    ):
        raise _bad(source, f'"firmware_name" must be printable ASCII, got {firmware_name!r}')
    if cells not in (1, 2):
        raise _bad(source, f'"cells" must be 1 or 2, got {cells!r}')
    if partial is None:
        partial = target != "fpga_full"
    fixups: dict[str, list[str]] = {target: ["/fragment@0:target:0"]}
    region = FdtNode("__overlay__")
    if firmware_name is not None:
        region.props["firmware-name"] = _string(firmware_name)
    if partial:
        region.props["partial-fpga-config"] = b""
    if bridges:
        region.props["fpga-bridges"] = struct.pack(
            f">{len(bridges)}I", *[_UNRESOLVED] * len(bridges)
        )
        for index, label in enumerate(bridges):
            fixups.setdefault(label, []).append(f"/fragment@0/__overlay__:fpga-bridges:{4 * index}")
    root = FdtNode(
        "", children=[FdtNode("fragment@0", {"target": _cells(_UNRESOLVED, 1)}, [region])]
    )
    if uio:
        devices = FdtNode(
            "__overlay__", {"#address-cells": _cells(cells, 1), "#size-cells": _cells(cells, 1)}
        )
        for node in uio:
            devices.children.append(_device(node, cells, source))
        root.children.append(FdtNode("fragment@1", {"target": _cells(_UNRESOLVED, 1)}, [devices]))
        fixups.setdefault(bus, []).append("/fragment@1:target:0")
    root.children.append(
        FdtNode("__fixups__", {k: b"".join(_string(v) for v in vs) for k, vs in fixups.items()})
    )
    return encode_fdt(root)


def _device(node: UioNode, cells: int, source: str) -> FdtNode:
    base, _, unit = node.full_name.partition("@")
    if not _NODE_NAME.fullmatch(base) or not re.fullmatch(r"[0-9a-fA-F,]{1,31}", unit):
        raise _bad(source, f'UIO "node" must be a device-tree node name, got {node.node!r}')
    limit = 1 << (32 * cells)
    reg = b""
    for address, size in node.regs:
        if not (0 <= address < limit and 0 < size < limit):
            raise _bad(
                source, f'UIO node {node.node!r}: "reg" ({address:#x}, {size:#x}) is out of range'
            )
        reg += _cells(address, cells) + _cells(size, cells)
    props = {"compatible": _string(node.compatible), "reg": reg}
    if node.uio_name is not None:
        if not _PRINTABLE.fullmatch(node.uio_name):
            raise _bad(source, f'"uio_name" must be printable ASCII, got {node.uio_name!r}')
        props["linux,uio-name"] = _string(node.uio_name)
    return FdtNode(node.full_name, props)


# -- reader --------------------------------------------------------------------------------------


def _bad(source: str, what: str) -> BitstreamFormatError:
    return BitstreamFormatError(f"device-tree blob {source!r}: {what}", path=source)


def decode_fdt(blob: bytes, *, source: str = "<dtbo>") -> FdtNode:
    """The tree in ``blob``. Raises :class:`~juggle.errors.BitstreamFormatError` naming
    ``source`` and the field for anything malformed (never IndexError/struct.error)."""
    if not isinstance(blob, bytes | bytearray | memoryview):
        raise _bad(source, f"must be bytes, got {type(blob).__name__}")
    data = bytes(blob)
    if len(data) > MAX_BLOB_BYTES:
        raise _bad(source, f"is {len(data)} bytes, over the limit of {MAX_BLOB_BYTES}")
    if len(data) < _HEADER.size:
        raise _bad(source, f"is truncated in the header ({len(data)} of {_HEADER.size} bytes)")
    (magic, total, off_struct, off_strings, _rsv, version, last_comp, _cpu, size_strings,
     size_struct) = _HEADER.unpack_from(data)  # fmt: skip
    if magic != FDT_MAGIC:
        raise _bad(source, f"field magic is {magic:#010x}, not {FDT_MAGIC:#010x}")
    if not _HEADER.size <= total <= len(data):
        raise _bad(source, f"field totalsize {total} is outside {_HEADER.size}..{len(data)}")
    if version < 16 or last_comp > _VERSION:
        raise _bad(
            source, f"field version {version} (last_comp_version {last_comp}) is unsupported"
        )
    if version < 17:
        size_struct = total - off_struct  # v16 has no size_dt_struct
    if off_struct % 4 or not _HEADER.size <= off_struct <= total - size_struct or size_struct < 0:
        raise _bad(
            source,
            f"field off_dt_struct/size_dt_struct ({off_struct}, {size_struct}) lies outside",
        )
    if not 0 <= off_strings <= total - size_strings or size_strings < 0:
        raise _bad(
            source,
            f"field off_dt_strings/size_dt_strings ({off_strings}, {size_strings}) lies outside",
        )
    block = data[off_struct : off_struct + size_struct]
    strings = data[off_strings : off_strings + size_strings]
    return _Parser(block, strings, source).parse()


class _Parser:
    def __init__(self, block: bytes, strings: bytes, source: str) -> None:
        self.block, self.strings, self.source, self.pos = block, strings, source, 0

    def u32(self, what: str) -> int:
        if self.pos + 4 > len(self.block):
            raise _bad(self.source, f"structure block is truncated in {what} at byte {self.pos}")
        value: int = struct.unpack_from(">I", self.block, self.pos)[0]
        self.pos += 4
        return value

    def cstring(self, buffer: bytes, start: int, what: str) -> str:
        end = buffer.find(b"\0", start)
        if start >= len(buffer) or end < 0:
            raise _bad(self.source, f"{what} at byte {start} is not NUL-terminated in its block")
        raw = buffer[start:end]
        if not re.fullmatch(rb"[\x20-\x7e]*", raw):
            raise _bad(self.source, f"{what} at byte {start} is not printable ASCII: {raw[:32]!r}")
        return raw.decode("ascii")

    def parse(self) -> FdtNode:
        stack: list[FdtNode] = []
        root: FdtNode | None = None
        while True:  # every round consumes at least 4 bytes, or u32() raises
            at = self.pos
            token = self.u32("a token")
            if token == FDT_BEGIN_NODE:
                name = self.cstring(self.block, self.pos, "a node name")
                self.pos += -(-(len(name) + 1) // 4) * 4
                if root is not None and not stack:
                    raise _bad(self.source, f"second root node {name!r} at byte {at}")
                if len(stack) >= MAX_DEPTH:
                    raise _bad(self.source, f"node {name!r} nests deeper than {MAX_DEPTH}")
                node = FdtNode(name)
                if stack:
                    stack[-1].children.append(node)
                else:
                    root = node
                stack.append(node)
            elif token == FDT_PROP:
                length = self.u32("a property length")
                nameoff = self.u32("a property name offset")
                if not stack:
                    raise _bad(self.source, f"property outside any node at byte {at}")
                name = self.cstring(self.strings, nameoff, "a property name")
                if length > len(self.block) - self.pos:
                    raise _bad(
                        self.source,
                        f"property {name!r} length {length} runs past the structure block",
                    )
                stack[-1].props[name] = self.block[self.pos : self.pos + length]
                self.pos += -(-length // 4) * 4
            elif token == FDT_END_NODE:
                if not stack:
                    raise _bad(self.source, f"FDT_END_NODE without a node at byte {at}")
                stack.pop()
            elif token == FDT_NOP:
                continue
            elif token == FDT_END:
                if stack or root is None:
                    raise _bad(
                        self.source, f"FDT_END at byte {at} inside an open node or before the root"
                    )
                return root
            else:
                raise _bad(
                    self.source, f"unknown token {token:#x} at byte {at} of the structure block"
                )


def _strings(value: bytes) -> list[str]:
    return (
        [part.decode("ascii", "replace") for part in value.split(b"\0")[:-1]]
        if value.endswith(b"\0")
        else []
    )


def _u32s(value: bytes) -> tuple[int, ...]:
    return struct.unpack(f">{len(value) // 4}I", value[: len(value) // 4 * 4])


def read_overlay(blob: bytes, *, source: str = "<dtbo>") -> OverlayInfo:
    """What the overlay in ``blob`` loads, where, and which devices it adds.

    Raises :class:`~juggle.errors.BitstreamFormatError` naming ``source`` and the field for a
    malformed blob, a fragment without a target, two ``firmware-name`` properties, or a
    ``reg`` whose length is not a whole number of (address, size) entries.
    """
    root = decode_fdt(blob, source=source)
    fixups: dict[tuple[str, str, int], str] = {}
    table = root.child("__fixups__")
    for label, value in table.props.items() if table is not None else ():
        for entry in _strings(value):
            path, _, rest = entry.partition(":")
            prop, _, offset = rest.partition(":")
            if offset.isdigit():
                fixups[(path, prop, int(offset))] = label
    firmware: str | None = None
    region: str | None = None
    partial = False
    bridges: tuple[str, ...] = ()
    targets: list[str] = []
    devices: list[UioNode] = []
    for fragment in root.children:
        overlay = fragment.child("__overlay__")
        if overlay is None:
            continue
        where = f"/{fragment.name}"
        target = _target(fragment, where, fixups, source)
        targets.append(target)
        name = overlay.props.get("firmware-name")
        if name is not None:
            names = _strings(name)
            if not names or not names[0]:
                raise _bad(source, f"{where}/__overlay__: field firmware-name is not a string")
            if firmware is not None:
                raise _bad(source, f"{where}/__overlay__: a second firmware-name {names[0]!r}")
            firmware, region = names[0], target
            partial = "partial-fpga-config" in overlay.props
            cells = _u32s(overlay.props.get("fpga-bridges", b""))
            bridges = tuple(
                fixups.get((f"{where}/__overlay__", "fpga-bridges", 4 * i), f"<phandle {c:#x}>")
                for i, c in enumerate(cells)
            )
        devices.extend(_devices(overlay, f"{where}/__overlay__", source))
    return OverlayInfo(firmware, tuple(devices), region, tuple(targets), partial, bridges)


def _target(
    fragment: FdtNode, where: str, fixups: dict[tuple[str, str, int], str], source: str
) -> str:
    if "target" in fragment.props:
        cells = _u32s(fragment.props["target"])
        if len(cells) != 1:
            raise _bad(source, f"{where}: field target is not one phandle cell")
        return fixups.get((where, "target", 0), f"<phandle {cells[0]:#x}>")
    if "target-path" in fragment.props:
        paths = _strings(fragment.props["target-path"])
        if paths and paths[0]:
            return paths[0]
    raise _bad(source, f"{where}: fragment has no field target or target-path")


def _devices(parent: FdtNode, where: str, source: str) -> list[UioNode]:
    ac = _u32s(parent.props.get("#address-cells", b"\0\0\0\x02"))
    sc = _u32s(parent.props.get("#size-cells", b"\0\0\0\x02"))
    if len(ac) != 1 or len(sc) != 1 or not 1 <= ac[0] <= 2 or not 1 <= sc[0] <= 2:
        raise _bad(source, f"{where}: field #address-cells/#size-cells must be 1 or 2")
    found: list[UioNode] = []
    for node in parent.children:
        path = f"{where}/{node.name}"
        if "compatible" in node.props and "reg" in node.props:
            compatible = _strings(node.props["compatible"])
            regs = _reg(node.props["reg"], ac[0], sc[0], path, source)
            uio_name = _strings(node.props.get("linux,uio-name", b""))
            found.append(
                UioNode(
                    node.name,
                    regs[0],
                    uio_name[0] if uio_name else None,
                    compatible[0] if compatible else "",
                    regs[1:],
                )
            )
        found.extend(_devices(node, path, source))
    return found


def _reg(value: bytes, ac: int, sc: int, where: str, source: str) -> tuple[tuple[int, int], ...]:
    width = 4 * (ac + sc)
    if not value or len(value) % width:
        raise _bad(source, f"{where}: field reg is {len(value)} bytes, not a multiple of {width}")
    cells = _u32s(value)
    out = []
    for i in range(0, len(cells), ac + sc):
        address = int.from_bytes(b"".join(struct.pack(">I", c) for c in cells[i : i + ac]), "big")
        size = int.from_bytes(
            b"".join(struct.pack(">I", c) for c in cells[i + ac : i + ac + sc]), "big"
        )
        out.append((address, size))
    return tuple(out)
