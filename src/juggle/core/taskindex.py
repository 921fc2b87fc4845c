"""The hardware task index (Ker-ONE 4.2): which regions can host which device, and at what cost.

Think of a seating chart: each accelerator function (a *device*, e.g. ``fft512``) lists the
regions it fits in; for each such seat a :class:`TaskDescriptor` names the partial bitstream,
its size and how long loading it takes. Regions differ in size and a device that does not fit a
region is never listed for it. The allocator reads compatible regions smallest first.

Eq. 7 and Eq. 8 of the paper (worst-case preemption wait and reconfiguration time of a device)
are properties of the index, so they live here too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from juggle.errors import NoCompatibleRegionError, TaskIndexError, UnknownDeviceError

__all__ = [
    "DeviceSpec",
    "ProfileDevice",
    "ProfilePort",
    "ProfileRegion",
    "ProfileSource",
    "RegionSpec",
    "TaskDescriptor",
    "TaskIndex",
]


class ProfileRegion(Protocol):
    """What :meth:`TaskIndex.from_profile` reads of a region of a board profile."""

    @property
    def name(self) -> str: ...
    @property
    def slices(self) -> int: ...
    @property
    def bitstream_bytes(self) -> int | None: ...
    @property
    def max_bitstream_bytes(self) -> int: ...


class ProfileDevice(Protocol):
    """What :meth:`TaskIndex.from_profile` reads of a device (``[[devices]]``) of a profile."""

    @property
    def name(self) -> str: ...
    @property
    def regions(self) -> Sequence[str]: ...
    @property
    def frame_us(self) -> float: ...
    @property
    def preempt_us(self) -> float: ...
    @property
    def context_bytes(self) -> int: ...


class ProfilePort(Protocol):
    """The configuration port of a profile: how long writing a bitstream takes."""

    def transfer_ps(self, nbytes: int) -> int:
        """Modeled time to write ``nbytes``, in picoseconds."""
        ...


class ProfileSource(Protocol):
    """What the decision core reads of a board profile (a
    :class:`~juggle.fabric.profiles.BoardProfile` is one): regions, devices and the
    configuration port. The core names only this shape, never the fabric package."""

    @property
    def name(self) -> str: ...
    @property
    def regions(self) -> Sequence[ProfileRegion]: ...
    @property
    def devices(self) -> Sequence[ProfileDevice]: ...
    @property
    def config_port(self) -> ProfilePort: ...

    def region(self, name: str) -> ProfileRegion:
        """The region called ``name``."""
        ...


@dataclass(frozen=True, slots=True)
class RegionSpec:
    """A reconfigurable region as the allocator sees it: a name and a size (slices)."""

    name: str
    slices: int


@dataclass(frozen=True, slots=True)
class DeviceSpec:
    """An accelerator function: hardware time per frame, worst-case wait to its next
    consistency point (``preempt_us``, the paper's δ_pre), context size, and optionally the
    slices it needs (checked against every region it is placed in)."""

    name: str
    frame_us: float
    preempt_us: float
    context_bytes: int = 1024
    slices: int | None = None


@dataclass(frozen=True, slots=True)
class TaskDescriptor:
    """One (device, region) seat: the bitstream to load, its size and its load time."""

    device: str
    region: str
    bitstream: str
    size_bytes: int
    t_rcfg_us: float


class TaskIndex:
    """Devices → compatible regions (smallest first) with one :class:`TaskDescriptor` each.

    Raises :class:`~juggle.errors.TaskIndexError` when built from inconsistent data: a name
    twice, a descriptor naming an unknown device or region, a device placed in a region
    smaller than it needs, a negative time or size.
    """

    def __init__(
        self,
        regions: Sequence[RegionSpec],
        devices: Sequence[DeviceSpec],
        tasks: Iterable[TaskDescriptor],
    ) -> None:
        self._regions = tuple(regions)
        self._devices = tuple(devices)
        if not self._regions:
            raise TaskIndexError('"regions" must not be empty')
        _unique("region", [r.name for r in self._regions])
        _unique("device", [d.name for d in self._devices])
        self._region_by_name = {r.name: r for r in self._regions}
        self._device_by_name = {d.name: d for d in self._devices}
        for dev in self._devices:
            _check_device(dev)
        seats: dict[tuple[str, str], TaskDescriptor] = {}
        for task in tasks:
            self._check_task(task, seats)
            seats[(task.device, task.region)] = task
        order = {r.name: (r.slices, i) for i, r in enumerate(self._regions)}
        self._compatible: dict[str, tuple[TaskDescriptor, ...]] = {
            d.name: tuple(
                sorted(
                    (t for (dev, _), t in seats.items() if dev == d.name),
                    key=lambda t: order[t.region],
                )
            )
            for d in self._devices
        }
        self._seats = seats

    def _check_task(
        self, task: TaskDescriptor, seats: dict[tuple[str, str], TaskDescriptor]
    ) -> None:
        dev = self._device_by_name.get(task.device)
        if dev is None:
            raise TaskIndexError(
                f"task names unknown device {task.device!r}", device=task.device, region=task.region
            )
        region = self._region_by_name.get(task.region)
        if region is None:
            raise TaskIndexError(
                f"task names unknown region {task.region!r}", device=task.device, region=task.region
            )
        if (task.device, task.region) in seats:
            raise TaskIndexError(
                f"device {task.device!r} is listed twice for region {task.region!r}",
                device=task.device,
                region=task.region,
            )
        if dev.slices is not None and dev.slices > region.slices:
            raise TaskIndexError(
                f"device {dev.name!r} needs {dev.slices} slices; region {region.name!r} has "
                f"{region.slices}: it does not fit",
                device=task.device,
                region=task.region,
            )
        if task.size_bytes <= 0 or task.t_rcfg_us < 0:
            raise TaskIndexError(
                f"task ({task.device!r}, {task.region!r}): size_bytes={task.size_bytes} must be "
                f"> 0 and t_rcfg_us={task.t_rcfg_us} >= 0",
                device=task.device,
                region=task.region,
            )

    @classmethod
    def from_profile(cls, profile: ProfileSource) -> TaskIndex:
        """The index of a board profile's ``[[devices]]``: one bitstream per (device, region),
        sized by the region's ``bitstream_bytes`` (else ``max_bitstream_bytes``) and loaded
        through the profile's configuration port.

        Raises :class:`~juggle.errors.TaskIndexError` if the profile lists no devices.
        """
        if not profile.devices:
            raise TaskIndexError(
                f"profile {profile.name!r} has no [[devices]]: nothing to allocate",
                value=profile.name,
            )
        regions = [RegionSpec(r.name, r.slices) for r in profile.regions]
        devices = [
            DeviceSpec(d.name, d.frame_us, d.preempt_us, d.context_bytes) for d in profile.devices
        ]
        tasks = []
        for dev in profile.devices:
            for name in dev.regions:
                region = profile.region(name)
                size = region.bitstream_bytes or region.max_bitstream_bytes
                t_us = profile.config_port.transfer_ps(size) / 1e6
                tasks.append(TaskDescriptor(dev.name, name, f"{dev.name}@{name}.bit", size, t_us))
        return cls(regions, devices, tasks)

    def with_device(self, spec: DeviceSpec, tasks: Iterable[TaskDescriptor]) -> TaskIndex:
        """A new index with ``spec`` and its ``tasks`` added (this one is unchanged).

        Raises :class:`~juggle.errors.TaskIndexError` as the constructor does (a name taken,
        a task of another device, a region too small).
        """
        tasks = tuple(tasks)
        for task in tasks:
            if task.device != spec.name:
                raise TaskIndexError(
                    f"task of device {task.device!r} given for device {spec.name!r}",
                    device=spec.name,
                )
        return TaskIndex(self._regions, (*self._devices, spec), (*self._seats.values(), *tasks))

    def without_device(self, name: str) -> TaskIndex:
        """A new index without device ``name`` and its tasks (this one is unchanged).

        Raises :class:`~juggle.errors.UnknownDeviceError`.
        """
        self.device(name)
        return TaskIndex(
            self._regions,
            tuple(d for d in self._devices if d.name != name),
            (t for t in self._seats.values() if t.device != name),
        )

    @property
    def regions(self) -> tuple[RegionSpec, ...]:
        """The regions, in declaration order."""
        return self._regions

    @property
    def devices(self) -> tuple[DeviceSpec, ...]:
        """The devices, in declaration order."""
        return self._devices

    def device(self, name: str) -> DeviceSpec:
        """The device called ``name``.

        Raises :class:`~juggle.errors.UnknownDeviceError` naming it and the known devices.
        """
        try:
            return self._device_by_name[name]
        except KeyError:
            known = ", ".join(self._device_by_name) or "none"
            raise UnknownDeviceError(
                f"unknown device {name!r} (devices: {known})", device=name
            ) from None

    def region(self, name: str) -> RegionSpec:
        """The region called ``name``.

        Raises :class:`~juggle.errors.TaskIndexError` naming it and the known regions.
        """
        try:
            return self._region_by_name[name]
        except KeyError:
            known = ", ".join(self._region_by_name)
            raise TaskIndexError(
                f"unknown region {name!r} (regions: {known})", region=name
            ) from None

    def compatible(self, device: str) -> tuple[TaskDescriptor, ...]:
        """The seats of ``device``, smallest region first (ties: declaration order).

        Raises :class:`~juggle.errors.UnknownDeviceError` for an unknown device.
        """
        self.device(device)
        return self._compatible[device]

    def descriptor(self, device: str, region: str) -> TaskDescriptor:
        """The seat of ``device`` in ``region``.

        Raises :class:`~juggle.errors.UnknownDeviceError` for an unknown device and
        :class:`~juggle.errors.NoCompatibleRegionError` if the device does not fit ``region``.
        """
        self.device(device)
        self.region(region)
        try:
            return self._seats[(device, region)]
        except KeyError:
            raise NoCompatibleRegionError(
                f"device {device!r} cannot be placed in region {region!r}",
                device=device,
                region=region,
            ) from None

    def devices_for(self, region: str) -> tuple[str, ...]:
        """Devices that can be placed in ``region``, in declaration order."""
        self.region(region)
        return tuple(d.name for d in self._devices if (d.name, region) in self._seats)

    def competitors(self, device: str) -> tuple[str, ...]:
        """Devices sharing at least one region with ``device`` (itself included): those it
        may preempt or be preempted by."""
        mine = {t.region for t in self.compatible(device)}
        return tuple(
            d.name for d in self._devices if mine & {t.region for t in self._compatible[d.name]}
        )

    def t_preempt_wcet_us(self, device: str) -> float:
        """Eq. 7: the longest δ_pre among the devices ``device`` competes with (0 if none).

        Raises :class:`~juggle.errors.UnknownDeviceError` for an unknown device.
        """
        return max(
            (self._device_by_name[d].preempt_us for d in self.competitors(device)), default=0.0
        )

    def t_rcfg_wcet_us(self, device: str) -> float:
        """Eq. 8: the longest reconfiguration time over the regions ``device`` fits.

        Raises :class:`~juggle.errors.UnknownDeviceError` for an unknown device.
        """
        return max((t.t_rcfg_us for t in self.compatible(device)), default=0.0)

    def __repr__(self) -> str:
        seats = ", ".join(
            f"{d}->{'/'.join(t.region for t in ts) or '-'}" for d, ts in self._compatible.items()
        )
        return f"<TaskIndex {len(self._regions)} regions, {len(self._devices)} devices: {seats}>"


def _unique(kind: str, names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise TaskIndexError(f"{kind} name {name!r} appears twice", value=name)
        seen.add(name)


def _check_device(dev: DeviceSpec) -> None:
    if dev.frame_us < 0 or dev.preempt_us < 0 or dev.context_bytes < 0:
        raise TaskIndexError(
            f"device {dev.name!r}: frame_us={dev.frame_us}, preempt_us={dev.preempt_us} and "
            f"context_bytes={dev.context_bytes} must be >= 0",
            device=dev.name,
        )
