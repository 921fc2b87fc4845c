"""Scaffolding a module: a working co-module in one call, and bitstreams for its regions.

:func:`new_module` writes a complete co-module for a new interface ``pkg.Service`` into
``target_dir/NAME``: the interface (a state-setting ``set_mask`` and one data method), a
software implementation, a driver over the register window, a register model for the simulated
fabric, the descriptor and a bitstream for one region of a board profile. The generated service
XORs data with a 32-bit mask (mask 0 echoes it), so every tier computes something checkable;
the module validates, installs and juggles as generated, and ``docs/writing-a-module.md`` walks
through replacing the placeholder with a real service. With ``hdl=True`` the module also has
the core in Verilog-2005 (``hdl/<design>/<top>.v``) on juggle's register bus or on an AXI4-Lite
slave (``bus``), named in ``[services.hardware.rtl]``: it implements the register model's map
with the model's cycle timing, so ``juggle module test`` finds the two equal as generated, and
``Framework(hardware="rtl")`` runs it (docs/bring-your-own-core.md).

:func:`write_module_bitstream` writes a bitstream for a design into a region of a board profile,
with the board's part and the region's typical size (or ``size``), checked against the region's
``max_bitstream_bytes``. The commands ``juggle module new`` and ``juggle module bitstream``
(:mod:`juggle.commands.module`) wrap them.

Generated files are written into a hidden sibling folder first and renamed into place, so a
failure leaves no half module behind.
"""

from __future__ import annotations

import json
import keyword
import os
import re
import shutil
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from juggle.errors import (
    BitstreamError,
    BitstreamTooLargeError,
    ConfigurationError,
    ModuleError,
    ResourceError,
    scalar,
)
from juggle.fabric.bitstream import build_bitstream, normalize_part
from juggle.fabric.resources import SLICE_KINDS, Resources, kinds_of
from juggle.rtlcheck import VECTORS_FILE, encode_value

if TYPE_CHECKING:
    from juggle.fabric.profiles import BoardProfile, RegionProfile

__all__ = [
    "HDL_BUSES",
    "TEMPLATE_RESOURCES",
    "TEMPLATE_RESOURCES_LUT",
    "ModuleScaffold",
    "new_module",
    "scaffold_module",
    "template_resources",
    "write_module_bitstream",
]

#: what the generated core declares (a modeled estimate: a 32-bit mask, input and output
#: register, an XOR per bit and the bus glue)
TEMPLATE_RESOURCES = Resources(slices=48, flipflops=104, mult18=0, ram16=0)
#: the same core on a 6-input-LUT family (7-series, UltraScale+): no more 6-input LUTs than the
#: 96 4-input LUTs of the 48 slices above, the same flip-flops (a modeled bound)
TEMPLATE_RESOURCES_LUT = Resources(family="xc7", lut=96, ff=104, dsp=0, bram=0)


def template_resources(family: str) -> Resources:
    """What the generated core declares on ``family`` (a ``synth_xilinx`` family name), in that
    family's kinds."""
    template = TEMPLATE_RESOURCES if kinds_of(family) == SLICE_KINDS else TEMPLATE_RESOURCES_LUT
    return Resources.of(template.as_dict(), family)


_MODULE_NAME = re.compile(r"^[a-z0-9][a-z0-9_\-]*$")  # ModuleInfo.name of the descriptor
_FALLBACK_METHOD = "process"
_RESERVED_METHODS = frozenset({"set_mask", "juggle_save_state", "juggle_restore_state"})


# -- bitstreams ---------------------------------------------------------------------------------


def _profile(fabric: str | Path | BoardProfile) -> BoardProfile:
    from juggle.fabric.profiles import BoardProfile, load_profile

    return fabric if isinstance(fabric, BoardProfile) else load_profile(fabric)


def _size_for(region: RegionProfile, size: int | None, source: str) -> int:
    """``size``, or the region's typical bitstream size; refused over its maximum."""
    if size is None:
        size = region.bitstream_bytes or region.max_bitstream_bytes
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise BitstreamError(f'"size" must be a positive int of bytes, got {size!r}', value=size)
    if size > region.max_bitstream_bytes:
        raise BitstreamTooLargeError(
            f"bitstream {source!r} would be {size:,} bytes, region {region.name!r} takes at "
            f"most {region.max_bitstream_bytes:,} (max_bitstream_bytes)",
            region=region.name,
            path=source,
            value=size,
        )
    return size


def _write_bitstream(
    path: Path, design: str, board: BoardProfile, region: str, size: int | None
) -> tuple[Path, int]:
    target = board.region(region)  # UnknownRegionError naming the board's regions
    nbytes = _size_for(target, size, str(path))
    data = build_bitstream(design, normalize_part(board.board.part), region, nbytes)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as exc:
        raise BitstreamError(
            f"cannot write bitstream {str(path)!r}: {exc}", path=str(path)
        ) from exc
    return path, nbytes


def write_module_bitstream(
    path: str | Path,
    design: str,
    *,
    fabric: str | Path | BoardProfile,
    region: str,
    size: int | None = None,
) -> Path:
    """Write a bitstream for ``design`` into ``region`` of board profile ``fabric`` (a name, a
    profile path or a loaded profile) to ``path`` (parents created); returns the path.

    The header carries the board's part and ``Region=region``; the file is ``size`` bytes, by
    default the region's typical partial bitstream (``bitstream_bytes``, else its maximum).
    Raises :class:`~juggle.errors.ProfileError` for an unknown board,
    :class:`~juggle.errors.UnknownRegionError` naming the board's regions,
    :class:`~juggle.errors.BitstreamTooLargeError` for a size over the region's
    ``max_bitstream_bytes``, :class:`~juggle.errors.BitstreamFormatError` for a design name
    outside ``[A-Za-z0-9_.-]`` or a size too small for the header, and
    :class:`~juggle.errors.BitstreamError` when the file cannot be written.
    """
    written, _ = _write_bitstream(Path(path), design, _profile(fabric), region, size)
    return written


# -- names ----------------------------------------------------------------------------------------


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not _MODULE_NAME.fullmatch(name):
        raise ConfigurationError(
            f"module name {name!r} must be lower-case letters, digits, '_' and '-', starting "
            "with a letter or digit (e.g. demo_svc)",
            value=scalar(name),
        )
    from juggle.fabric.sim.catalog import BUILTIN_MODELS

    if name in BUILTIN_MODELS:
        raise ConfigurationError(
            f"module name {name!r} is the design of a built-in core (built in: "
            f"{', '.join(sorted(BUILTIN_MODELS))}); the design is named after the module, "
            "choose another name",
            value=name,
        )
    return name


def _check_interface(interface: object) -> tuple[list[str], str]:
    """(package parts, class name) of ``pkg.Service``."""
    parts = interface.split(".") if isinstance(interface, str) else []
    if len(parts) < 2 or not all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        raise ConfigurationError(
            f"interface {interface!r} must be a dotted name package.Class (e.g. "
            "demo.EchoService): the class is written to the module's package.py",
            value=scalar(interface),
        )
    from juggle.runtime.interfaces import BUILTIN_INTERFACES

    if interface in BUILTIN_INTERFACES:
        raise ConfigurationError(
            f"interface {interface!r} is one of juggle's reference interfaces; the scaffold "
            "writes a new interface (see examples/modules for modules implementing the "
            "reference ones)",
            value=interface,
        )
    return parts[:-1], parts[-1]


def _snake(text: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", text).lower()


def _base_name(cls: str) -> str:
    """``EchoService`` → ``Echo`` (the stem of the generated class names)."""
    stem = cls.removesuffix("Service")
    return stem if stem and stem[0].isalpha() else cls


def _method_name(cls: str) -> str:
    """``EchoService`` → ``echo``; ``process`` where that is no usable method name."""
    method = _snake(_base_name(cls)).strip("_")
    if (
        not method.isidentifier()
        or keyword.iskeyword(method)
        or method in _RESERVED_METHODS
        or method == cls
    ):
        return _FALLBACK_METHOD
    return method


def _core_id(design: str) -> int:
    """The core's ID register: the design's first four characters in ASCII, upper case."""
    return int.from_bytes(design[:4].upper().ljust(4, "_").encode("ascii"), "big")


# -- templates ------------------------------------------------------------------------------------

_INTERFACE = Template('''\
"""The interface of a co-module generated by ``juggle module new``.

$module_doc
"""

from __future__ import annotations

from juggle.runtime.interfaces import state_setting

__all__ = ["$cls"]


class $cls:
    """A template service: XOR data with a 32-bit mask (mask 0 echoes the data)."""

    @state_setting
    def set_mask(self, mask: int) -> None:
        """Set the mask applied from now on: an int in ``0..0xFFFFFFFF``.

        State-setting: the service keeps the mask between calls, so its proxy records the last
        call and replays it onto the next implementation whenever the service changes tiers.
        """
        raise NotImplementedError

    def $method(self, data: bytes) -> bytes:
        """``data`` with its bytes XORed with the mask's four bytes in turn, least significant
        first (mask 0 returns ``data`` unchanged). ``data`` is bytes-like; raises
        :class:`~juggle.errors.ServiceArgumentError` otherwise."""
        raise NotImplementedError
''')

_CODE = Template('''\
"""The code of a co-module generated by ``juggle module new``.

$code_doc

Register map of the core (byte offsets, 32-bit registers):

=====  ========  ====  ====================================================================
0x00   MASK      R/W   the mask (``set_mask``)
0x04   STATUS    R     bit 0 BUSY: a word is in the datapath
0x08   DATA_IN   W     one word of data (four bytes, little-endian); starts the core
0x0C   DATA_OUT  R     the last word XOR MASK, once STATUS.BUSY is clear
0x38   LATENCY   R     core cycles per word
0x3C   ID        R     ``CORE_ID`` ("$core_id_text")
=====  ========  ====  ====================================================================
"""

from __future__ import annotations

import threading
from typing import ClassVar

from juggle.errors import CoreTimeoutError, ServiceArgumentError
from juggle.fabric.mmio import MMIO
from juggle.fabric.sim.model import RegisterModel

from $relative import $cls

__all__ = [
    "$cls",
    "$core",
    "$driver",
    "$soft",
]

MASK = 0x00
STATUS = 0x04
DATA_IN = 0x08
DATA_OUT = 0x0C
LATENCY = 0x38
ID = 0x3C
STATUS_BUSY = 0x1
CORE_ID = $core_id
WINDOW_SIZE = 0x40
MAX_POLLS = 100_000


def _mask(mask: object) -> int:
    if isinstance(mask, bool) or not isinstance(mask, int) or not 0 <= mask <= 0xFFFFFFFF:
        raise ServiceArgumentError(f'"mask" must be an int in 0..0xFFFFFFFF, got {mask!r}', mask)
    return mask


def _data(data: object) -> bytes:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ServiceArgumentError(
            f'"data" must be bytes-like, got {type(data).__name__}', type(data).__name__
        )
    return bytes(data)


# -- software tier ------------------------------------------------------------------------------


class $soft($cls):
    """The service in Python: the software tier."""

    def __init__(self) -> None:
        self._mask = 0

    def set_mask(self, mask: int) -> None:
        """Set the mask."""
        self._mask = _mask(mask)

    def $method(self, data: bytes) -> bytes:
        """``data`` XOR the mask, byte by byte."""
        key = self._mask.to_bytes(4, "little")
        return bytes(b ^ key[i % 4] for i, b in enumerate(_data(data)))


# -- the core's model on the simulated fabric ----------------------------------------------------


class $core(RegisterModel):
    """The core on the simulated fabric: one word per ``latency`` core cycles.

    ``resources`` is a modeled estimate (32-bit mask, input and output registers, 32 XORs and
    the bus glue); replace it with your synthesis figures, here and in juggle.toml.
    """

    design: ClassVar[str] = "$design"
    window_size: ClassVar[int] = WINDOW_SIZE
    result_offsets: ClassVar[tuple[int, ...]] = (DATA_OUT,)
    #: core cycles per word
    latency: ClassVar[int] = 1
    resources: ClassVar[dict[str, int]] = $resources

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Power-on state: mask 0, idle; happens on every (re)programming."""
        self._mask = 0
        self._out = 0
        self._pending = 0
        self._ready_at = 0
        #: words computed since power-on (statistics only)
        self.operations = 0

    def _busy(self, now: int) -> bool:
        if now < self._ready_at:
            return True
        self._out = self._pending
        return False

    def read(self, offset: int, now: int) -> int:
        """Register value at cycle ``now`` (see the register map)."""
        busy = self._busy(now)
        if offset == MASK:
            return self._mask
        if offset == STATUS:
            return STATUS_BUSY if busy else 0
        if offset == DATA_OUT:
            return self._out
        if offset == LATENCY:
            return self.latency
        if offset == ID:
            return CORE_ID
        return 0

    def write(self, offset: int, value: int, now: int) -> None:
        """Write a register at cycle ``now``; DATA_IN starts the core."""
        value &= 0xFFFFFFFF
        if offset == MASK:
            self._mask = value
        elif offset == DATA_IN and not self._busy(now):
            self._pending = value ^ self._mask
            self._ready_at = now + self.latency
            self.operations += 1


# -- hardware tier: the driver ------------------------------------------------------------------


class $driver($cls):
    """The service on the core, through the core's register window (``mmio``)."""

    def __init__(self, mmio: MMIO, *, max_polls: int = MAX_POLLS) -> None:
        self._mmio = mmio
        self._max_polls = max_polls
        self._lock = threading.Lock()  # one caller's register sequence at a time

    def set_mask(self, mask: int) -> None:
        """Load the mask into the core's MASK register."""
        value = _mask(mask)
        with self._lock:
            self._mmio.write32(MASK, value)

    def $method(self, data: bytes) -> bytes:
        """Each word through the core: write DATA_IN, wait until not BUSY, read DATA_OUT."""
        raw = _data(data)
        padded = raw + bytes(-len(raw) % 4)
        out = bytearray()
        read, write = self._mmio.read32, self._mmio.write32
        with self._lock:
            for i in range(0, len(padded), 4):
                write(DATA_IN, int.from_bytes(padded[i : i + 4], "little"))
                polls = 0
                while read(STATUS) & STATUS_BUSY:
                    polls += 1
                    if polls >= self._max_polls:
                        raise CoreTimeoutError(
                            f"{type(self).__name__}: core still BUSY after {polls} status reads",
                            self._mmio,
                        )
                out += read(DATA_OUT).to_bytes(4, "little")
        return bytes(out[: len(raw)])
''')

_DESCRIPTOR = Template("""\
# The $name co-module, generated by `juggle module new` for board $board, region $region.
# Schema: `juggle module schema`. Check: `juggle module validate <this folder> --fabric $board`.
[module]
name = $name_s
version = "0.1.0"
description = $description_s
$board_line

[[services]]
interfaces = [$interface_s]
ranking = 0
per_consumer = false
properties = { version = "0.1.0" }

[services.software]
class = "$code.$soft"

[services.hardware]
driver = "$code.$driver"
model = "$code.$core"
# region name -> bitstream file (`juggle module bitstream` writes one for another region)
bitstreams = { $region_s = $bitstream_s }

$resources_note
[services.hardware.resources]
$resources_toml
""")

_PROFILE_TABLE = Template("""
# the workload `juggle profile <this folder>` runs: random calls $method(data) at every tier,
# compared, of 64, 1 and 1,000 bytes (the timed call: the first size); args, one generator per
# argument: bytes, buffer (changed in place), size, int32, uint32
[services.profile]
method = "$method"
args = ["bytes"]
sizes = [64, 1, 1000]
""")


# -- the core in Verilog (--hdl) -----------------------------------------------------------------

#: the buses a generated top speaks (:data:`juggle.fabric.rtl.catalog.BUSES`)
HDL_BUSES = ("regbus", "axi4-lite")

# The core behind either bus: one register write port (wr, widx, wdata, wmask) and the
# registers as read values; both buses' templates substitute it as $core_logic.
_HDL_CORE = Template("""\
    // -- the core: the register model $core_class of $code.py, cycle for cycle
    localparam [31:0] CORE_ID = 32'h$core_id_hex;  // "$core_id_text"
    localparam [7:0]  LAT = LATENCY[7:0];  // core cycles per word (1..255)

    reg  [31:0] mask;      // MASK
    reg  [31:0] pending;   // the word in the datapath: DATA_IN ^ MASK
    reg  [31:0] result;    // DATA_OUT: the last word done
    reg  [7:0]  left;      // edges until the word in the datapath is done; 0 when idle
    wire        busy = (left != 8'd0);
    wire        start = wr && (widx == 4'h2) && !busy;

    // THE DATAPATH: what the core computes from one word of data (the model's write() of
    // DATA_IN and the software tier compute the same). Edit here.
    wire [31:0] computed = (wdata & wmask) ^ mask;

    always @(posedge clk) begin
        if (!rst_n) begin
            mask <= 32'd0;
            pending <= 32'd0;
            result <= 32'd0;
            left <= 8'd0;
        end else begin
            if (wr && widx == 4'h0) begin
                mask <= (mask & ~wmask) | (wdata & wmask);
            end
            if (start) begin
                pending <= computed;
                left <= (LAT > 8'd1) ? LAT - 8'd1 : 8'd0;
                if (LAT <= 8'd1) begin
                    result <= computed;  // done in the cycle it started
                end
            end else if (busy) begin
                left <= left - 8'd1;
                if (left == 8'd1) begin
                    result <= pending;
                end
            end
        end
    end

    // the registers as the bus reads them, selected by ridx (unmapped offsets read 0)
    wire [31:0] rvalue = ({32{ridx == 4'h0}} & mask)
                       | ({32{ridx == 4'h1}} & {31'd0, busy})
                       | ({32{ridx == 4'h3}} & result)
                       | ({32{ridx == 4'hE}} & {24'd0, LAT})
                       | ({32{ridx == 4'hF}} & CORE_ID);
""")

_HDL_REGISTER_MAP = Template("""\
// Register map (byte offsets, 32-bit registers; the register model's, see $code.py):
//   0x00  MASK      R/W  the mask (set_mask)
//   0x04  STATUS    R    bit 0 BUSY: a word is in the datapath
//   0x08  DATA_IN   W    one word of data; starts the core unless BUSY (then it is ignored)
//   0x0C  DATA_OUT  R    the last word done: DATA_IN ^ MASK (MASK as it was at the write)
//   0x38  LATENCY   R    core cycles per word (the parameter LATENCY)
//   0x3C  ID        R    "$core_id_text"
//   others          R    0; writes ignored
//
// Timing (the model's): a DATA_IN written at edge t while idle is done for reads sampled at
// edge t + LATENCY and later: STATUS.BUSY reads 1 before, and DATA_OUT keeps the previous
// word until then. Reset (rst_n low, synchronous) clears every register.
""")

_HDL_REGBUS = Template("""\
// $top: the $design core of the $name module, on juggle's 32-bit register bus.
// Generated by `juggle module new --hdl`; Verilog-2005, self-contained (no other file).
//
$register_map//
// The register bus (juggle's RTL backend drives it; every signal sampled at the rising edge):
//   write  bus_we=1 with bus_addr and bus_wdata for one cycle: the register takes the value
//          at that edge.
//   read   bus_re=1 with bus_addr for one cycle: bus_rdata is loaded at that edge with the
//          register as it was just before the edge, and holds until the next read.
//   bus_addr is a byte offset inside the 0x40-byte window; one that is not 4-byte aligned is
//   unmapped (writes ignored, reads 0). rst_n is synchronous and active low.

`default_nettype none

module $top #(
    parameter integer LATENCY = 1  // core cycles per word: keep it equal to the model's latency
) (
    input  wire        clk,
    input  wire        rst_n,
    input  wire [15:0] bus_addr,
    input  wire [31:0] bus_wdata,
    input  wire        bus_we,
    input  wire        bus_re,
    output reg  [31:0] bus_rdata
);
    // -- the bus: a byte offset to a register index ----------------------------------------
    // The window is 0x40 bytes: the RTL backend never drives an offset past it (drivers cannot
    // reach one), so the top decodes bus_addr[5:0] only (the rest is named unused for lint).
    wire        mapped = (bus_addr[1:0] == 2'b00);
    wire        unused_high_addr = |bus_addr[15:6];
    wire        wr = bus_we && mapped;
    wire [3:0]  widx = bus_addr[5:2];
    wire [3:0]  ridx = bus_addr[5:2];
    wire [31:0] wdata = bus_wdata;
    wire [31:0] wmask = 32'hFFFFFFFF;  // the register bus writes whole words

$core_logic
    always @(posedge clk) begin
        if (!rst_n) begin
            bus_rdata <= 32'd0;
        end else if (bus_re && !bus_we) begin
            bus_rdata <= mapped ? rvalue : 32'd0;
        end
    end
endmodule

`default_nettype wire
""")

_HDL_AXI = Template("""\
// $top: the $design core of the $name module, on an AXI4-Lite slave port.
// Generated by `juggle module new --hdl --bus axi4-lite`; Verilog-2005, self-contained.
//
$register_map//
// The AXI4-Lite slave (every signal sampled at the rising edge of clk; responses always OKAY):
//   write  AW and W are taken together, at the first edge where both AWVALID and WVALID are
//          high and no write response is waiting (AWREADY = WREADY = that condition): the
//          register takes WDATA at that edge, the bytes WSTRB selects (DATA_IN takes the
//          strobed bytes, the others as 0). BVALID rises after it and holds until BREADY.
//   read   AR is taken at the first edge where ARVALID is high and no read data is waiting
//          (ARREADY = that condition): RDATA is loaded at that edge with the register as it
//          was just before the edge; RVALID rises after it and holds until RREADY.
//   Addresses are byte offsets; an unaligned one is unmapped (writes ignored, reads 0).
//   Reset (rst_n low, synchronous) drops BVALID and RVALID.

`default_nettype none

module $top #(
    parameter integer LATENCY = 1,  // core cycles per word: keep it equal to the model's latency
    parameter integer AW = 6        // address width: a 0x40-byte window
) (
    input  wire          clk,
    input  wire          rst_n,
    input  wire [AW-1:0] s_axi_awaddr,
    input  wire          s_axi_awvalid,
    output wire          s_axi_awready,
    input  wire [31:0]   s_axi_wdata,
    input  wire [3:0]    s_axi_wstrb,
    input  wire          s_axi_wvalid,
    output wire          s_axi_wready,
    output wire [1:0]    s_axi_bresp,
    output reg           s_axi_bvalid,
    input  wire          s_axi_bready,
    input  wire [AW-1:0] s_axi_araddr,
    input  wire          s_axi_arvalid,
    output wire          s_axi_arready,
    output reg  [31:0]   s_axi_rdata,
    output wire [1:0]    s_axi_rresp,
    output reg           s_axi_rvalid,
    input  wire          s_axi_rready
);
    // -- the slave: handshakes to one register write and one register read ----------------
    wire        take_w = s_axi_awvalid && s_axi_wvalid && !s_axi_bvalid;
    wire        take_r = s_axi_arvalid && !s_axi_rvalid;
    wire        wr = take_w && (s_axi_awaddr[1:0] == 2'b00);
    wire [3:0]  widx = s_axi_awaddr[5:2];
    wire [3:0]  ridx = s_axi_araddr[5:2];
    wire [31:0] wdata = s_axi_wdata;
    wire [31:0] wmask = {{8{s_axi_wstrb[3]}}, {8{s_axi_wstrb[2]}},
                         {8{s_axi_wstrb[1]}}, {8{s_axi_wstrb[0]}}};

    assign s_axi_awready = take_w;
    assign s_axi_wready = take_w;
    assign s_axi_arready = take_r;
    assign s_axi_bresp = 2'b00;  // OKAY
    assign s_axi_rresp = 2'b00;  // OKAY

$core_logic
    always @(posedge clk) begin
        if (!rst_n) begin
            s_axi_bvalid <= 1'b0;
            s_axi_rvalid <= 1'b0;
            s_axi_rdata <= 32'd0;
        end else begin
            if (take_w) begin
                s_axi_bvalid <= 1'b1;
            end else if (s_axi_bready) begin
                s_axi_bvalid <= 1'b0;
            end
            if (take_r) begin
                s_axi_rvalid <= 1'b1;
                s_axi_rdata <= (s_axi_araddr[1:0] == 2'b00) ? rvalue : 32'd0;
            end else if (s_axi_rready) begin
                s_axi_rvalid <= 1'b0;
            end
        end
    end
endmodule

`default_nettype wire
""")

_HDL_DESCRIPTOR = Template("""
# the core in Verilog: `juggle module test` checks it against the model, `juggle module build`
# synthesizes it, and Framework(hardware="rtl") runs it
[services.hardware.rtl]
top = $top_s
sources = [$source_s]
bus = $bus_s
""")


# -- the scaffold ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModuleScaffold:
    """What :func:`scaffold_module` wrote: the module folder, its files (relative POSIX paths)
    and the bitstream's target; ``hdl`` is the core's Verilog (relative path) on ``bus``, or
    ``None`` for a module without it."""

    path: Path
    name: str
    interface: str
    fabric: str
    part: str
    region: str
    design: str
    bitstream: str
    bitstream_bytes: int
    classes: dict[str, str] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    hdl: str | None = None
    bus: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The scaffold as a JSON-able dict (what ``juggle module new --json`` prints)."""
        return {
            "path": str(self.path),
            "name": self.name,
            "interface": self.interface,
            "fabric": self.fabric,
            "part": self.part,
            "region": self.region,
            "design": self.design,
            "bitstream": {"path": self.bitstream, "bytes": self.bitstream_bytes},
            "classes": dict(self.classes),
            "files": list(self.files),
            "hdl": None if self.hdl is None else {"path": self.hdl, "bus": self.bus},
            "next": [
                f"juggle module validate {self.path} --fabric {self.fabric}",
                f"juggle module validate {self.path} --fabric {self.fabric} --import",
                *(
                    [f"juggle module test {self.path} --fabric {self.fabric}"]
                    if self.hdl is not None
                    else []
                ),
            ],
        }


def _pick_region(board: BoardProfile, region: str | None) -> RegionProfile:
    """``region`` of ``board`` (checked to fit the template core), or the first that fits."""
    if region is not None:
        chosen = board.region(region)
        template = template_resources(chosen.resources.family)
        if not template.fits_in(chosen.resources):
            raise ResourceError(
                f"the generated core does not fit region {region!r} of board {board.name!r}: "
                f"{template.describe_shortfall(chosen.resources)}",
                region=region,
            )
        return chosen
    for candidate in board.regions:
        if template_resources(candidate.resources.family).fits_in(candidate.resources):
            return candidate
    family = board.regions[0].resources.family if board.regions else "xc2vp"
    raise ResourceError(
        f"no region of board {board.name!r} fits the generated core ({template_resources(family)})"
    )


def _wrap(text: str) -> str:
    """``text`` as lines of at most 96 characters (a generated docstring's paragraph)."""
    return textwrap.fill(text, width=96, break_long_words=False, break_on_hyphens=False)


def _toml_str(text: str) -> str:
    return json.dumps(text)  # a JSON string of printable text is a TOML basic string


def _identifier(name: str) -> str:
    """``name`` as a Python/Verilog identifier stem: ``-`` as ``_``, ``m`` before a digit."""
    stem = name.replace("-", "_")
    return "m" + stem if stem[0].isdigit() else stem


def _check_bus(bus: object) -> str:
    if bus not in HDL_BUSES:
        raise ConfigurationError(
            f'"bus" must be one of {", ".join(HDL_BUSES)}, got {bus!r}', value=scalar(bus)
        )
    assert isinstance(bus, str)
    return bus


def _hdl_files(
    name: str, code: str, core_class: str, core_id: int, bus: str
) -> tuple[str, str, str]:
    """(path, Verilog text, descriptor table) of the core's top on ``bus``."""
    top = _identifier(name) + "_top"
    relpath = f"hdl/{name}/{top}.v"
    text_id = core_id.to_bytes(4, "big").decode("ascii")
    names = {"code": code, "core_class": core_class, "core_id_text": text_id}
    template = _HDL_REGBUS if bus == "regbus" else _HDL_AXI
    verilog = template.substitute(
        top=top,
        design=name,
        name=name,
        register_map=_HDL_REGISTER_MAP.substitute(names),
        core_logic=_HDL_CORE.substitute(names, core_id_hex=f"{core_id:08X}"),
    )
    table = _HDL_DESCRIPTOR.substitute(
        top_s=_toml_str(top), source_s=_toml_str(relpath), bus_s=_toml_str(bus)
    )
    return relpath, verilog, table


def _vectors(method: str) -> str:
    """The known answers ``juggle module test`` checks (``vectors.json``), as JSON text."""

    def xor(data: bytes, mask: int) -> bytes:
        key = mask.to_bytes(4, "little")
        return bytes(b ^ key[i % 4] for i, b in enumerate(data))

    plain = b"juggle: bring your own core"  # 27 bytes: the last word is partial
    mask = 0x5A3C_0F01
    about = (
        "Known answers `juggle module test` checks at every tier, in order (state-setting calls "
        'included). Bytes are {"hex": "..."}; "expect" is the result the call must return. '
        "Replace them with your service's."
    )
    vectors: list[dict[str, Any]] = [
        {"method": method, "args": [encode_value(plain)], "expect": encode_value(plain)},
        {"method": "set_mask", "args": [mask]},
        {"method": method, "args": [encode_value(plain)], "expect": encode_value(xor(plain, mask))},
        {"method": method, "args": [encode_value(b"")], "expect": encode_value(b"")},
    ]
    lines = ",\n".join(f"    {json.dumps(v)}" for v in vectors)
    return f'{{\n  "about": {json.dumps(about)},\n  "vectors": [\n{lines}\n  ]\n}}\n'


def _sources(
    name: str,
    interface: str,
    package: list[str],
    cls: str,
    region: str,
    board: str,
    template: Resources = TEMPLATE_RESOURCES,
    bus: str | None = None,
) -> tuple[dict[str, str], dict[str, str], str]:
    """(relative path → text, role → class path, bitstream path) of the module's files; with
    ``bus``, the core's Verilog on that bus too."""
    base = _base_name(cls)
    code = _identifier(name) + "_module"
    if package[0] == code:
        raise ConfigurationError(
            f"interface package {package[0]!r} is the module's code file {code}.py; choose "
            "another package for the interface",
            value=interface,
        )
    method = _method_name(cls)
    names = {"soft": f"Software{base}", "core": f"{base}Core", "driver": f"{base}Driver"}
    if cls in names.values():
        names = {role: f"{n}Impl" for role, n in names.items()}
    core_id = _core_id(name)
    files: dict[str, str] = {}
    for depth in range(1, len(package)):
        init = "/".join(package[:depth]) + "/__init__.py"
        files[init] = f'"""Package of the ``{name}`` module\'s interface."""\n'
    files["/".join(package) + ".py"] = _INTERFACE.substitute(
        cls=cls,
        method=method,
        module_doc=_wrap(
            f"Module ``{name}``, interface ``{interface}``. The descriptor names the interface; "
            "the framework finds it here, in the module's own code, before it looks among "
            "juggle's reference interfaces. Its public methods are the contract every tier "
            "implements: replace the two below with your service's (docs/writing-a-module.md)."
        ),
    )
    resources = template.as_dict()  # in the kinds of the region's family
    files[f"{code}.py"] = _CODE.substitute(
        code_doc=_wrap(
            f"Module ``{name}``, interface ``{interface}``. Every part works as generated: the "
            "module validates, installs and juggles before you change a line. To make it your "
            "service, change the placeholder computation (XOR with a mask) in all three "
            f"places: :class:`{names['soft']}` (the software tier), :class:`{names['core']}` "
            "(the simulated core: what the hardware computes, and how many cycles it takes) "
            f"and :class:`{names['driver']}` (how the CPU talks to the core through its "
            "register window)"
            + (
                "; and in the core's Verilog (hdl/), which `juggle module test` checks "
                f"against :class:`{names['core']}`."
                if bus is not None
                else "."
            )
        ),
        design=name,
        cls=cls,
        method=method,
        relative="." + ".".join(package),
        core_id=f"0x{core_id:08X}",
        core_id_text=core_id.to_bytes(4, "big").decode("ascii"),
        resources=json.dumps(resources),
        **names,
    )
    bitstream = f"bitstreams/{name}_{region}.bit"
    from juggle.fabric.profiles import available_profiles

    files["juggle.toml"] = _DESCRIPTOR.substitute(
        name=name,
        board=board,
        board_line=(
            f"board = {_toml_str(board)}  # the board it was made for: what validate checks"
            if board in available_profiles()
            else f"# made for the board profile {board!r} (a file: give --fabric to validate)"
        ),
        region=region,
        name_s=_toml_str(name),
        description_s=_toml_str(f"{interface} in software and on a {name} core (generated)"),
        interface_s=_toml_str(interface),
        code=code,
        region_s=_toml_str(region),
        bitstream_s=_toml_str(bitstream),
        resources_toml="\n".join(f"{k} = {v}" for k, v in resources.items()),
        resources_note=(
            "# a modeled estimate: `juggle module build` synthesizes the Verilog into "
            "resources.json,\n# whose figures install checks; copy them here"
            if bus is not None
            else "# a modeled estimate, not synthesized: replace with your core's figures"
        ),
        **names,
    )
    if bus is not None:
        relpath, verilog, table = _hdl_files(name, code, names["core"], core_id, bus)
        files[relpath] = verilog
        files["juggle.toml"] += table
        files[VECTORS_FILE] = _vectors(method)
    files["juggle.toml"] += _PROFILE_TABLE.substitute(method=method)
    classes = {
        "interface": interface,
        "software": f"{code}.{names['soft']}",
        "driver": f"{code}.{names['driver']}",
        "model": f"{code}.{names['core']}",
    }
    return files, classes, bitstream


def scaffold_module(
    name: str,
    interface: str,
    *,
    target_dir: str | Path,
    fabric: str | Path = "xupv2p",
    region: str | None = None,
    hdl: bool = False,
    bus: str = "regbus",
) -> ModuleScaffold:
    """:func:`new_module`, returning everything it wrote (a :class:`ModuleScaffold`)."""
    name = _check_name(name)
    package, cls = _check_interface(interface)
    bus = _check_bus(bus)
    board = _profile(fabric)
    chosen = _pick_region(board, region)
    parent = Path(target_dir).expanduser()
    path = parent / name
    if path.exists() or path.is_symlink():
        raise ModuleError(
            f"{str(path)!r} exists already; choose another NAME or target folder", path=str(path)
        )
    files, classes, bitstream = _sources(
        name,
        interface,
        package,
        cls,
        chosen.name,
        board.name,
        template_resources(chosen.resources.family),
        bus if hdl else None,
    )
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=parent))
    except OSError as exc:
        raise ModuleError(
            f"cannot create a module in {str(parent)!r}: {exc}", path=str(parent)
        ) from exc
    try:
        for relpath, text in files.items():
            target = staging / relpath
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        _, nbytes = _write_bitstream(staging / bitstream, name, board, chosen.name, None)
        os.chmod(staging, 0o755)  # mkdtemp made it private
        os.rename(staging, path)  # fails on a non-empty folder created meanwhile
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ModuleError(f"cannot write module {str(path)!r}: {exc}", path=str(path)) from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return ModuleScaffold(
        path=path,
        name=name,
        interface=interface,
        fabric=str(fabric),
        part=normalize_part(board.board.part),
        region=chosen.name,
        design=name,
        bitstream=bitstream,
        bitstream_bytes=nbytes,
        classes=classes,
        files=tuple(sorted([*files, bitstream])),
        hdl=next((f for f in files if f.startswith("hdl/")), None),
        bus=bus if hdl else None,
    )


def new_module(
    name: str,
    interface: str,
    *,
    target_dir: str | Path,
    fabric: str | Path = "xupv2p",
    region: str | None = None,
    hdl: bool = False,
    bus: str = "regbus",
) -> Path:
    """Write a complete co-module ``name`` for the new interface ``interface``
    (``package.Class``) into ``target_dir/name``; returns that folder.

    The module has the interface (``set_mask`` state-setting, and a data method named after
    the class: ``EchoService`` → ``echo``), a software implementation, a driver over the
    register window, a register model, ``juggle.toml`` and a bitstream for ``region`` of board
    profile ``fabric`` (default: the first region the generated core fits). It validates,
    installs and juggles as generated.

    With ``hdl=True`` it also has the core in Verilog-2005, ``hdl/<name>/<top>.v`` (top
    ``<name>_top``, ``-`` written ``_``), on ``bus``: ``"regbus"`` (juggle's register bus) or
    ``"axi4-lite"``; the descriptor names it in ``[services.hardware.rtl]``, and
    ``vectors.json`` holds known answers for ``juggle module test``
    (:func:`juggle.rtlcheck.check_module`), which finds the Verilog and the model equal.

    Raises :class:`~juggle.errors.ConfigurationError` for a bad name, interface or bus,
    :class:`~juggle.errors.ProfileError` / :class:`~juggle.errors.UnknownRegionError` /
    :class:`~juggle.errors.ResourceError` for the board and region, and
    :class:`~juggle.errors.ModuleError` when the folder exists or cannot be written.
    """
    return scaffold_module(
        name, interface, target_dir=target_dir, fabric=fabric, region=region, hdl=hdl, bus=bus
    ).path
