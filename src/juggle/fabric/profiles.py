"""Board profiles: a board's fabric described as data (a TOML file), validated by pydantic.

A profile is the datasheet of a board as juggle sees it: the device part, the clocks, the
configuration port's throughput, the cost of switching a bridge and of one bus access, and the
partially reconfigurable regions (PRRs) with their resources, adjacency and MMIO windows.
Built-in profiles live in ``juggle/fabric/profiles/*.toml``; users load their own by path.

Tables ``[board]``, ``[config_port]``, ``[bridge]``, ``[bus]``, ``[power]``, ``[[regions]]``,
``[[devices]]``, ``[linux]`` and ``[shell]`` refuse unknown keys; ``[scenario]`` is a free
table that a scenario validates itself. ``[power]`` is optional: the board's power in each
state, copied from a paper or a datasheet (every figure in it is an INPUT, labeled with its
``source``). ``[linux]`` and ``[shell]`` are optional: how the Linux backend reaches a real
board (manager, load path, family) and the static shell its slots live in (base design,
isolation writes, UIO windows); register numbers there may be written as dfx-mgr writes them,
as decimal or ``0x`` hex strings.

Profiles arrive from outside like modules do, so :func:`load_profile` checks the file's size by
``stat`` before reading it, decodes strict UTF-8 and bounds nesting and number size
(:class:`~juggle.limits.Limits`). The readers for untrusted TOML live here, in the lower
layer, and module descriptors (``juggle.runtime.descriptors``) use them too.
"""

from __future__ import annotations

import functools
import math
import os
import re
import stat
import tomllib
from importlib import resources as importlib_resources
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    model_validator,
)

from juggle.errors import (
    ConfigurationError,
    InputLimitError,
    ProfileError,
    ResourceError,
    UnknownRegionError,
)
from juggle.fabric.resources import Resources
from juggle.limits import DEFAULT_LIMITS, Limits, check_size

if TYPE_CHECKING:
    from juggle.fabric.linux.loader import ShellSpec

__all__ = [
    "BoardProfile",
    "BoardSection",
    "BridgeSection",
    "BusSection",
    "ConfigPortSection",
    "DeviceProfile",
    "IsolationEntry",
    "LinuxSection",
    "PowerSection",
    "RegionProfile",
    "ShellSection",
    "ShellSlotSection",
    "available_profiles",
    "load_profile",
]

_PS_PER_S = 10**12


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BoardSection(_Table):
    """``[board]``: the device and its clocks (``fabric_hz`` clocks the cores and the bus)."""

    name: str = Field(min_length=1)
    part: str = Field(min_length=1)
    description: str = ""
    cpu_hz: int = Field(gt=0)
    fabric_hz: int = Field(gt=0)


class ConfigPortSection(_Table):
    """``[config_port]``: the port bitstreams are written through (ICAP, PCAP, ...).

    It moves ``bytes_per_word`` bytes every ``cycles_per_word`` cycles of ``bus_hz``.
    """

    kind: str = Field(min_length=1)
    bus_hz: int = Field(gt=0)
    bytes_per_word: int = Field(gt=0)
    cycles_per_word: float = Field(gt=0)

    @property
    def throughput_bytes_per_s(self) -> float:
        """Modeled throughput: ``bus_hz * bytes_per_word / cycles_per_word``."""
        return self.bus_hz * self.bytes_per_word / self.cycles_per_word

    def transfer_ps(self, nbytes: int) -> int:
        """Modeled time to write ``nbytes`` (a partial last word costs a whole word), in ps."""
        words = math.ceil(nbytes / self.bytes_per_word)
        return round(words * self.cycles_per_word * _PS_PER_S / self.bus_hz)


class BridgeSection(_Table):
    """``[bridge]``: the decoupler between a region and the bus; one state change costs
    ``switch_us`` (a program closes, then opens: two changes)."""

    kind: str = Field(min_length=1)
    switch_us: float = Field(ge=0)

    @property
    def switch_ps(self) -> int:
        """Modeled time of one bridge state change, in ps."""
        return round(self.switch_us * 1_000_000)


class BusSection(_Table):
    """``[bus]``: modeled cost of one 32-bit MMIO access, in fabric (bus) cycles."""

    read_cycles: int = Field(ge=0)
    write_cycles: int = Field(ge=0)


class PowerSection(_Table):
    """``[power]``: the whole board's power draw (W, at the supply) in each state.

    ``idle_w``: nothing runs; ``cpu_busy_w``: the CPU computes (a software tier);
    ``fabric_active_w``: a hardware service runs in a region, the CPU driving it over the bus
    (``region_active_w`` overrides it per region); ``reconfiguration_w``: a bitstream is being
    written through the configuration port (None: unknown). ``source`` says where the figures
    come from; ``assumed`` lists the keys that are assumptions rather than copied figures.
    """

    source: str = Field(min_length=1)
    idle_w: float = Field(gt=0)
    cpu_busy_w: float = Field(gt=0)
    fabric_active_w: float = Field(gt=0)
    region_active_w: dict[str, float] = Field(default_factory=dict)
    reconfiguration_w: float | None = Field(default=None, gt=0)
    assumed: tuple[str, ...] = ()

    def active_w(self, region: str | None = None) -> float:
        """Board power while a hardware service runs in ``region`` (the board's figure when
        the region has none of its own, or for ``None``)."""
        if region is not None and region in self.region_active_w:
            return self.region_active_w[region]
        return self.fabric_active_w

    def how(self, key: str) -> str:
        """Where the figure ``key`` comes from: the source, or that it is an assumption."""
        if key in self.assumed:
            return f"input (assumption, not in the source): [power] {key} of the profile"
        return f"input: [power] {key} of the profile, from {self.source}"

    @model_validator(mode="after")
    def _check(self) -> PowerSection:
        keys = {"idle_w", "cpu_busy_w", "fabric_active_w", "region_active_w", "reconfiguration_w"}
        for key in self.assumed:
            if key not in keys:
                raise ValueError(f"[power] assumed names {key!r}, which is no power figure")
        for region, watts in self.region_active_w.items():
            if not watts > 0:
                raise ValueError(f"[power] region_active_w.{region} must be > 0, got {watts!r}")
        return self


class RegionProfile(_Table):
    """``[[regions]]``: one partially reconfigurable region (PRR).

    ``max_bitstream_bytes`` bounds a partial bitstream for it; ``bitstream_bytes`` is the
    typical size (what an allocator estimates reconfiguration time from).

    Resources are declared in the family's own kinds (see :mod:`juggle.fabric.resources`):
    ``slices``, ``flipflops``, ``mult18``, ``ram16`` on a slice-counted family (Virtex-II Pro,
    Virtex-4), or ``lut``, ``ff``, ``dsp``, ``bram`` (36 Kb tiles) on a LUT-counted one, plus
    ``uram`` on UltraScale+: declaring ``uram`` (0 included) makes the region UltraScale+
    (``xcup``), without it a LUT-counted region is 7-series (``xc7``). Either set is declared
    whole. A LUT-counted region's ``slices``/``flipflops``/``mult18``/``ram16`` fields are
    filled in as :class:`Resources` views them (a slice estimate, ff, dsp, 2 x bram), for code
    that sizes regions by slices.
    """

    name: str = Field(min_length=1)
    slices: int = Field(default=0, ge=0)
    flipflops: int = Field(default=0, ge=0)
    mult18: int = Field(default=0, ge=0)
    ram16: int = Field(default=0, ge=0)
    lut: int | None = Field(default=None, ge=0)
    ff: int | None = Field(default=None, ge=0)
    dsp: int | None = Field(default=None, ge=0)
    bram: int | None = Field(default=None, ge=0)
    uram: int | None = Field(default=None, ge=0)
    tbuf: int | None = Field(default=None, ge=0)
    max_bitstream_bytes: int = Field(gt=0)
    adjacent: tuple[str, ...] = ()
    window_base: int = Field(ge=0)
    window_size: int = Field(gt=0, multiple_of=4)
    bitstream_bytes: int | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _one_kind_set(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        name = data.get("name")
        old = [k for k in ("slices", "flipflops", "mult18", "ram16") if k in data]
        new = [k for k in ("lut", "ff", "dsp", "bram", "uram") if k in data]
        if old and new:
            raise ValueError(
                f"region {name!r} declares resources in two families' kinds: "
                f"{', '.join(old)} (slice-counted) and {', '.join(new)} (LUT-counted); "
                "declare one set"
            )
        if not new:
            missing = [k for k in ("slices", "flipflops", "mult18", "ram16") if k not in data]
            if missing:
                raise ValueError(
                    f"region {name!r} lacks {', '.join(missing)} (declare slices, flipflops, "
                    "mult18, ram16, or lut, ff, dsp, bram [, uram])"
                )
            return data
        missing = [k for k in ("lut", "ff", "dsp", "bram") if k not in data]
        if missing:
            raise ValueError(
                f"region {name!r} lacks {', '.join(missing)} (a LUT-counted region declares "
                "lut, ff, dsp, bram and, on UltraScale+, uram)"
            )
        filled = dict(data)
        try:
            view = Resources(
                family="xcup" if "uram" in data else "xc7",
                **{k: data[k] for k in new},
            )
        except ResourceError as exc:
            raise ValueError(f"region {name!r}: {exc}") from exc
        filled.update(
            slices=view.slices, flipflops=view.flipflops, mult18=view.mult18, ram16=view.ram16
        )
        return filled

    @functools.cached_property
    def resources(self) -> Resources:
        """The region's capacity as :class:`Resources` in its family's kinds (the profile is
        frozen: built once)."""
        if self.lut is not None and self.ff is not None and self.dsp is not None:
            counts = {"lut": self.lut, "ff": self.ff, "dsp": self.dsp, "bram": self.bram or 0}
            if self.uram is not None:
                return Resources(family="xcup", uram=self.uram, **counts)
            return Resources(family="xc7", **counts)
        return Resources(self.slices, self.flipflops, self.mult18, self.ram16)

    @model_validator(mode="after")
    def _typical_fits(self) -> RegionProfile:
        if self.bitstream_bytes is not None and self.bitstream_bytes > self.max_bitstream_bytes:
            raise ValueError(
                f"region {self.name!r}: bitstream_bytes {self.bitstream_bytes} exceeds "
                f"max_bitstream_bytes {self.max_bitstream_bytes}"
            )
        return self


class DeviceProfile(_Table):
    """``[[devices]]``: an accelerator function (Ker-ONE virtual device / HW task index entry).

    ``regions`` lists the compatible regions, ``frame_us`` the hardware time per data frame,
    ``preempt_us`` the worst-case wait to reach a consistency point, ``context_bytes`` the
    size of the state saved on preemption.
    """

    name: str = Field(min_length=1)
    regions: tuple[str, ...] = Field(min_length=1)
    frame_us: float = Field(ge=0)
    preempt_us: float = Field(ge=0)
    context_bytes: int = Field(default=0, ge=0)


#: how dfx-mgr writes a number in ``shell.json``: a decimal or ``0x`` hex string
_NUMBER_TEXT: Final = re.compile(r"0[xX][0-9a-fA-F]+(?:_?[0-9a-fA-F]+)*|[0-9]+(?:_?[0-9]+)*")
_U32: Final = 1 << 32


def _register_number(value: object) -> object:
    """A register offset or value as TOML gives it: an int, or a string holding a decimal or
    ``0x`` hex number (dfx-mgr's ``shell.json`` writes ``"0x4000"``; Xilinx/dfx-mgr
    example/sys/linux/shell.json). Anything else is left to pydantic, which refuses all but
    an int (no float, no bool: the type is strict)."""
    if isinstance(value, str):
        text = value.strip()
        if not _NUMBER_TEXT.fullmatch(text):
            raise ValueError(f"{shown(value)} is no number (write 16384, 0x4000 or '0x4000')")
        return int(text, 0)
    return value


#: a 32-bit register offset or value, as an int or a decimal / hex string
RegisterNumber = Annotated[StrictInt, BeforeValidator(_register_number), Field(ge=0, lt=_U32)]


class LinuxSection(_Table):
    """``[linux]``: how the Linux backend reaches this board's fabric (its defaults; options
    given to the backend override them).

    ``manager`` is the ``fpga_manager`` device (None: the only one); ``load`` the load path:
    ``"overlay"`` (a device-tree overlay through configfs, the kernel's fpga-region programs
    the firmware it names: Documentation/devicetree/bindings/fpga/fpga-region) or ``"sysfs"``
    (Xilinx kernels: the manager's ``flags`` and ``firmware`` attributes); ``firmware_dir``
    the folder firmware is staged in (None: the backend's default, a juggle-owned folder set
    through ``/sys/module/firmware_class/parameters/path``, else ``/lib/firmware``);
    ``family`` the device family, which decides how a ``.bit`` is converted for the
    manager (``"zynq"``: 32-bit words byte-swapped for the Zynq-7000 PCAP);
    ``dfxmgrd_socket`` where AMD's dfx-mgrd listens (juggle loads through it when it
    answers); ``uio_timeout_s`` how long to wait for ``/dev/uioN`` after a load.
    """

    manager: str | None = Field(default=None, min_length=1)
    load: Literal["overlay", "sysfs"] = "overlay"
    firmware_dir: str | None = Field(default=None, min_length=1)
    family: Literal["zynqmp", "zynq", "versal"]
    dfxmgrd_socket: str = Field(default="/var/run/dfx-mgrd.socket", min_length=1)
    uio_timeout_s: float = Field(default=5.0, gt=0, le=600)


class IsolationEntry(_Table):
    """One 32-bit register write on the shell's isolation window: ``value`` at ``offset``
    (a dfx-mgr ``isolation_slots`` pair: ``offset[i]``, ``values[i]``)."""

    offset: RegisterNumber
    value: RegisterNumber

    @model_validator(mode="after")
    def _aligned(self) -> IsolationEntry:
        if self.offset % 4:
            raise ValueError(f"offset {self.offset:#x} is not 32-bit aligned")
        return self


class ShellSlotSection(_Table):
    """``[[shell.slots]]``: one slot of the static shell.

    ``region`` is the juggle region the slot is, ``slot`` its index in the shell (dfx-mgr's
    slot number, the ``_slot<N>`` of a package folder); ``release`` the writes that take it
    out of isolation after a load (before any register access), ``isolate`` the writes that
    isolate it again before an unload; ``windows`` maps a window name (what the driver asks
    for) to the UIO name the slot's design brings (its device-tree node name or
    ``linux,uio-name``: Documentation/driver-api/uio-howto, uio_pdrv_genirq).
    """

    region: str = Field(min_length=1)
    slot: int = Field(ge=0, le=255)
    isolate: tuple[IsolationEntry, ...] = ()
    release: tuple[IsolationEntry, ...] = ()
    windows: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> ShellSlotSection:
        for window, uio_name in self.windows.items():
            if not window:
                raise ValueError(f"slot {self.region!r}: a window has an empty name")
            if not uio_name:
                raise ValueError(f"slot {self.region!r}: window {window!r} names no UIO device")
        return self


class ShellSection(_Table):
    """``[shell]``: the static shell the slots live in (Kria's DFX shells; dfx-mgr's
    ``shell.json``).

    ``name`` names it; ``base_image`` and ``base_overlay`` are the base design's full image
    and overlay (file names in the firmware folder; None: the boot loads the shell);
    ``uid`` its unique id when it has one (an int or a hex string); ``isolation_uio`` the UIO
    name of the register window the isolation writes go to (None: the kernel's bridges
    isolate, through the overlay); ``slots`` the slots.
    """

    name: str = Field(min_length=1)
    base_image: str | None = Field(default=None, min_length=1)
    base_overlay: str | None = Field(default=None, min_length=1)
    uid: RegisterNumber | None = None
    isolation_uio: str | None = Field(default=None, min_length=1)
    slots: tuple[ShellSlotSection, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> ShellSection:
        _unique("shell slot region", [s.region for s in self.slots])
        _unique("shell slot index", [str(s.slot) for s in self.slots])
        if self.isolation_uio is None:
            for slot in self.slots:
                if slot.isolate or slot.release:
                    raise ValueError(
                        f"[shell] slot {slot.region!r} lists isolation writes but the shell "
                        "names no isolation_uio to write them to"
                    )
        return self

    def spec(self) -> ShellSpec:
        """The shell as the Linux backend's :class:`~juggle.fabric.linux.loader.ShellSpec`."""
        from juggle.fabric.linux.loader import IsolationWrite, ShellSpec, SlotSpec

        return ShellSpec(
            name=self.name,
            slots=tuple(
                SlotSpec(
                    region=slot.region,
                    slot=slot.slot,
                    isolate=tuple(IsolationWrite(w.offset, w.value) for w in slot.isolate),
                    release=tuple(IsolationWrite(w.offset, w.value) for w in slot.release),
                    windows=dict(slot.windows),
                )
                for slot in self.slots
            ),
            base_image=self.base_image,
            base_overlay=self.base_overlay,
            uid=self.uid,
            isolation_uio=self.isolation_uio,
        )


class BoardProfile(_Table):
    """A whole board: the tables above, cross-checked (unique names, existing references,
    non-overlapping windows)."""

    board: BoardSection
    config_port: ConfigPortSection
    bridge: BridgeSection
    bus: BusSection
    regions: tuple[RegionProfile, ...] = Field(min_length=1)
    devices: tuple[DeviceProfile, ...] = ()
    power: PowerSection | None = None
    linux: LinuxSection | None = None
    shell: ShellSection | None = None
    scenario: dict[str, Any] = Field(default_factory=dict)

    @property
    def name(self) -> str:
        """The board's name (``[board] name``)."""
        return self.board.name

    def region(self, name: str) -> RegionProfile:
        """The region called ``name``.

        Raises :class:`~juggle.errors.UnknownRegionError` naming it and the known regions.
        """
        for region in self.regions:
            if region.name == name:
                return region
        known = ", ".join(r.name for r in self.regions)
        raise UnknownRegionError(
            f"board {self.name!r} has no region {name!r} (regions: {known})", region=name
        )

    def region_names(self) -> tuple[str, ...]:
        """Names of the regions, in profile order."""
        return tuple(r.name for r in self.regions)

    @model_validator(mode="after")
    def _cross_check(self) -> BoardProfile:
        names = [r.name for r in self.regions]
        _unique("region", names)
        _unique("device", [d.name for d in self.devices])
        known = set(names)
        for region in self.regions:
            for other in region.adjacent:
                if other not in known:
                    raise ValueError(f"region {region.name!r}: adjacent {other!r} is no region")
                if other == region.name:
                    raise ValueError(f"region {region.name!r} lists itself as adjacent")
        for device in self.devices:
            for name in device.regions:
                if name not in known:
                    raise ValueError(f"device {device.name!r}: region {name!r} is no region")
        for name in self.power.region_active_w if self.power else ():
            if name not in known:
                raise ValueError(f"[power] region_active_w: {name!r} is no region")
        for slot in self.shell.slots if self.shell else ():
            if slot.region not in known:
                raise ValueError(f"[shell] slot {slot.slot}: region {slot.region!r} is no region")
        _no_overlap(self.regions)
        return self


def _unique(kind: str, names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{kind} name {name!r} appears twice")
        seen.add(name)


def _no_overlap(regions: tuple[RegionProfile, ...]) -> None:
    spans = sorted((r.window_base, r.window_base + r.window_size, r.name) for r in regions)
    for (_, end, name), (base, _, nxt) in pairwise(spans):
        if base < end:
            raise ValueError(f"windows of regions {name!r} and {nxt!r} overlap")


def _builtin_dir() -> Path:
    return Path(str(importlib_resources.files("juggle.fabric") / "profiles"))


def available_profiles() -> list[str]:
    """Names of the built-in profiles, sorted (each loads with :func:`load_profile`)."""
    return sorted(p.stem for p in _builtin_dir().glob("*.toml"))


def load_profile(name_or_path: str | Path, *, limits: Limits = DEFAULT_LIMITS) -> BoardProfile:
    """Load a built-in profile by name (``"xupv2p"``) or any profile by path.

    A string containing a path separator or ending in ``.toml`` is taken as a path. The file is
    checked by ``stat`` before it is read (a regular file of at most
    ``limits.max_descriptor_bytes``), decoded as strict UTF-8 and parsed with nesting and
    number size bounded by ``limits``.
    Raises :class:`~juggle.errors.ProfileError` naming the profile for an unknown name, a
    missing or unreadable file, bytes that are not UTF-8, bad TOML, or a schema violation
    (pydantic's message included), and :class:`~juggle.errors.InputLimitError` naming the file
    (and the key) for a file, nesting or number over ``limits``.
    """
    path = _resolve(name_or_path)
    origin = f"profile {str(path)!r}"
    data = _read_bounded(path, origin, limits)
    text = decode_untrusted(data, origin, limits=limits, error=ProfileError, path=str(path))
    table = load_untrusted_toml(text, origin, limits=limits, error=ProfileError, path=str(path))
    try:
        return BoardProfile.model_validate(table)
    except ValidationError as exc:
        raise ProfileError(f"{origin} is invalid: {exc}", path=str(path)) from exc


def _read_bounded(path: Path, origin: str, limits: Limits) -> bytes:
    """The bytes of the regular file ``path``, its size checked by ``stat`` before reading."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ProfileError(f"{origin} cannot be read: it is not a regular file", path=str(path))
        check_size(origin, info.st_size, limits.max_descriptor_bytes, "max_descriptor_bytes")
        with open(path, "rb") as handle:
            data = handle.read(limits.max_descriptor_bytes + 1)  # it may have grown since stat
    except OSError as exc:
        raise ProfileError(f"{origin} cannot be read: {exc}", path=str(path)) from exc
    check_size(origin, len(data), limits.max_descriptor_bytes, "max_descriptor_bytes")
    return data


def _resolve(name_or_path: str | Path) -> Path:
    if isinstance(name_or_path, Path):
        return name_or_path
    text = name_or_path
    if "/" in text or "\\" in text or text.endswith(".toml"):
        return Path(text)
    candidate = _builtin_dir() / f"{text}.toml"
    if not candidate.is_file():
        known = ", ".join(available_profiles())
        raise ProfileError(f"unknown board profile {text!r} (built-in: {known})", profile=text)
    return candidate


# -- untrusted text and TOML (board profiles here; module descriptors in juggle.runtime) -----

_BARE_KEY: Final = re.compile(r"[A-Za-z0-9_\-]+")
_SHOWN_CHARS: Final = 80
_SHOWN_KEY_CHARS: Final = 200


def shown(value: str, width: int = _SHOWN_CHARS) -> str:
    """``repr(value)`` for a message, cut after ``width`` characters with the length noted (a
    value from outside may be a megabyte long)."""
    if len(value) <= width:
        return repr(value)
    return f"{value[:width]!r}... ({len(value):,} characters)"


def decode_untrusted(
    data: str | bytes,
    origin: str,
    *,
    limits: Limits,
    error: type[ConfigurationError],
    path: str | None = None,
) -> str:
    """``data`` as text: its size checked against ``limits.max_descriptor_bytes`` first, then
    decoded as strict UTF-8 (a leading byte-order mark is dropped).

    Raises :class:`InputLimitError` naming ``origin`` and the limit for too much data, and
    ``error`` naming ``origin`` and the offset of the first bad byte (or character, for text
    holding lone surrogates); its ``path`` is ``path``, else ``origin``.
    """
    about = origin if path is None else path
    limit = limits.max_descriptor_bytes
    if isinstance(data, str):
        check_size(origin, len(data), limit, "max_descriptor_bytes")  # UTF-8 is no shorter
        try:
            size = len(data.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise error(
                f"{origin} is not valid UTF-8: character {exc.start} is {exc.object[exc.start]!r}"
                f" ({exc.reason})",
                path=about,
            ) from exc
        check_size(origin, size, limit, "max_descriptor_bytes")
        text = data
    elif isinstance(data, bytes | bytearray):
        check_size(origin, len(data), limit, "max_descriptor_bytes")
        try:
            text = bytes(data).decode("utf-8", errors="strict")
        except UnicodeDecodeError as exc:
            bad = bytes(exc.object[exc.start : exc.start + 4])
            raise error(
                f"{origin} is not valid UTF-8 at byte offset {exc.start} "
                f"(bytes {bad.hex(' ')}: {exc.reason})",
                path=about,
            ) from exc
    else:
        raise error(f"{origin} must be str or bytes, got {type(data).__name__}", path=about)
    return text.removeprefix("\ufeff")


class _LongFloat:
    """What ``parse_float`` gives for a float literal of too many digits; the walk over the
    parsed tree finds it and names its key."""

    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal


def _bounded_float(max_digits: int, literal: str) -> float | _LongFloat:
    if sum(c.isdigit() for c in literal) > max_digits:
        return _LongFloat(literal)
    return float(literal)


#: a key path, built without copying: (parent path, key or index); ``None`` is the root
_Path = tuple["_Path", str | int] | None


def _render(path: _Path) -> str:
    parts: list[str | int] = []
    while path is not None:
        path, part = path
        parts.append(part)
    out = ""
    for part in reversed(parts):
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            key = part if _BARE_KEY.fullmatch(part) else repr(part)
            out += f".{key}" if out else key
    return out or "<root>"


def check_toml_tree(table: dict[str, Any], origin: str, *, limits: Limits) -> None:
    """Check a parsed TOML document without recursing over it: no table or array nests more
    than ``limits.max_depth`` levels below the document, no number has more than
    ``limits.max_number_digits`` digits.

    Raises :class:`InputLimitError` naming ``origin``, the key and the limit.
    """
    bound = 10**limits.max_number_digits
    stack: list[tuple[Any, _Path, int]] = [(table, None, 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > limits.max_depth:
                key = _render(path)
                raise InputLimitError(
                    f"{origin}: key {shown(key, _SHOWN_KEY_CHARS)} nests {depth} levels deep, "
                    f"over the limit of {limits.max_depth} (Limits.max_depth)",
                    path=origin,
                    value=key,
                )
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((child, (path, name), depth + 1) for name, child in items)
        elif isinstance(value, _LongFloat) or (
            isinstance(value, int) and not isinstance(value, bool) and abs(value) >= bound
        ):
            key = _render(path)
            raise InputLimitError(
                f"{origin}: key {shown(key, _SHOWN_KEY_CHARS)} holds a number of more than "
                f"{limits.max_number_digits} digits (Limits.max_number_digits)",
                path=origin,
                value=key,
            )


def load_untrusted_toml(
    text: str,
    origin: str,
    *,
    limits: Limits,
    error: type[ConfigurationError],
    path: str | None = None,
) -> dict[str, Any]:
    """Parse TOML from outside: ``error`` naming ``origin`` for bad TOML (its ``path`` is
    ``path``, else ``origin``), :class:`InputLimitError` naming ``origin`` and the key for
    nesting or numbers over ``limits`` (:func:`check_toml_tree`). The original exception is
    chained.
    """
    about = origin if path is None else path
    parse_float = functools.partial(_bounded_float, limits.max_number_digits)
    try:
        table = tomllib.loads(text, parse_float=parse_float)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{origin} is not valid TOML: {exc}", path=about) from exc
    except RecursionError as exc:  # tomllib recurses once per nested array or inline table
        raise InputLimitError(
            f"{origin} nests arrays or inline tables too deeply to parse (far over the limit "
            f"of {limits.max_depth}, Limits.max_depth)",
            path=origin,
        ) from exc
    except ValueError as exc:  # an integer past Python's int/str conversion limit
        _name_the_long_number(text, origin, limits, exc)
        raise error(f"{origin} is not valid TOML: {exc}", path=about) from exc
    check_toml_tree(table, origin, limits=limits)
    return table


def _name_the_long_number(text: str, origin: str, limits: Limits, exc: ValueError) -> None:
    """Raise :class:`InputLimitError` naming the key of the number that ``tomllib`` could not
    convert: parse again with every long digit run cut to ``max_number_digits + 1`` digits
    and let :func:`check_toml_tree` find it. Returns if that does not name one."""
    digits = limits.max_number_digits
    run = re.compile(rf"[0-9](?:_?[0-9]){{{digits},}}")
    probe_text = run.sub("1" + "0" * digits, text)
    try:
        probe = tomllib.loads(probe_text, parse_float=functools.partial(_bounded_float, digits))
        check_toml_tree(probe, origin, limits=limits)
    except InputLimitError as found:
        raise InputLimitError(str(found), path=found.path, value=found.value) from exc
    except (ValueError, RecursionError):
        return
