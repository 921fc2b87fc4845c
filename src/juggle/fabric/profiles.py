"""Board profiles: a board's fabric described as data (a TOML file), validated by pydantic.

A profile is the datasheet of a board as juggle sees it: the device part, the clocks, the
configuration port's throughput, the cost of switching a bridge and of one bus access, and the
partially reconfigurable regions (PRRs) with their resources, adjacency and MMIO windows.
Built-in profiles live in ``juggle/fabric/profiles/*.toml``; users load their own by path.

Tables ``[board]``, ``[config_port]``, ``[bridge]``, ``[bus]``, ``[[regions]]`` and
``[[devices]]`` refuse unknown keys; ``[scenario]`` is a free table that a scenario validates
itself.
"""

from __future__ import annotations

import math
import tomllib
from importlib import resources as importlib_resources
from itertools import pairwise
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from juggle.errors import ProfileError, UnknownRegionError
from juggle.fabric.resources import Resources

__all__ = [
    "BoardProfile",
    "BoardSection",
    "BridgeSection",
    "BusSection",
    "ConfigPortSection",
    "DeviceProfile",
    "RegionProfile",
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


class RegionProfile(_Table):
    """``[[regions]]``: one partially reconfigurable region (PRR).

    ``max_bitstream_bytes`` bounds a partial bitstream for it; ``bitstream_bytes`` is the
    typical size (what an allocator estimates reconfiguration time from).
    """

    name: str = Field(min_length=1)
    slices: int = Field(ge=0)
    flipflops: int = Field(ge=0)
    mult18: int = Field(ge=0)
    ram16: int = Field(ge=0)
    tbuf: int | None = Field(default=None, ge=0)
    max_bitstream_bytes: int = Field(gt=0)
    adjacent: tuple[str, ...] = ()
    window_base: int = Field(ge=0)
    window_size: int = Field(gt=0, multiple_of=4)
    bitstream_bytes: int | None = Field(default=None, gt=0)

    @property
    def resources(self) -> Resources:
        """The region's capacity as :class:`Resources`."""
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


class BoardProfile(_Table):
    """A whole board: the tables above, cross-checked (unique names, existing references,
    non-overlapping windows)."""

    board: BoardSection
    config_port: ConfigPortSection
    bridge: BridgeSection
    bus: BusSection
    regions: tuple[RegionProfile, ...] = Field(min_length=1)
    devices: tuple[DeviceProfile, ...] = ()
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
            f"board {self.name!r} has no region {name!r} (regions: {known})", name
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


def load_profile(name_or_path: str | Path) -> BoardProfile:
    """Load a built-in profile by name (``"xupv2p"``) or any profile by path.

    A string containing a path separator or ending in ``.toml`` is taken as a path.
    Raises :class:`~juggle.errors.ProfileError` naming the profile for an unknown name, a
    missing or unreadable file, bad TOML, or a schema violation (pydantic's message included).
    """
    path = _resolve(name_or_path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError(f"profile {str(path)!r} cannot be read: {exc}", path) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"profile {str(path)!r} is not valid TOML: {exc}", path) from exc
    try:
        return BoardProfile.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(f"profile {str(path)!r} is invalid: {exc}", path) from exc


def _resolve(name_or_path: str | Path) -> Path:
    if isinstance(name_or_path, Path):
        return name_or_path
    text = name_or_path
    if "/" in text or "\\" in text or text.endswith(".toml"):
        return Path(text)
    candidate = _builtin_dir() / f"{text}.toml"
    if not candidate.is_file():
        known = ", ".join(available_profiles())
        raise ProfileError(f"unknown board profile {text!r} (built-in: {known})", text)
    return candidate
