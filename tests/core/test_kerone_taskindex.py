"""The hardware task index: compatibility, per-seat costs, Eq. 7 and 8, validation."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from juggle.core.taskindex import (
    DeviceSpec,
    ProfileDevice,
    ProfileRegion,
    RegionSpec,
    TaskDescriptor,
    TaskIndex,
)
from juggle.errors import NoCompatibleRegionError, TaskIndexError, UnknownDeviceError
from juggle.fabric.profiles import load_profile


@pytest.fixture(scope="module")
def zed() -> TaskIndex:
    return TaskIndex.from_profile(load_profile("zedboard"))


def test_zedboard_seats_follow_table5(zed: TaskIndex) -> None:
    seats = {d.name: [t.region for t in zed.compatible(d.name)] for d in zed.devices}
    assert seats == {
        "qam16": ["prr1", "prr2"],
        "qam64": ["prr1", "prr2"],
        "fft512": ["prr2", "prr3"],
        "fft1024": ["prr3"],
    }
    # T_RCFG from the profile's sizes (its bitstream rule: share x 4,045,564 B) at 400 MB/s;
    # Table 5 gives 231, 810 and 1,206 us (juggle.simulate.ofdm.costs.derive_t_rcfg shows both)
    rcfg = {t.region: t.t_rcfg_us for d in zed.devices for t in zed.compatible(d.name)}
    assert rcfg == {"prr1": 202.28, "prr2": 809.12, "prr3": 1314.81}
    desc = zed.descriptor("fft512", "prr3")
    assert desc.bitstream == "fft512@prr3.bit" and desc.size_bytes == 525_923
    assert zed.devices_for("prr2") == ("qam16", "qam64", "fft512")


@dataclass(frozen=True)
class _Region:
    name: str
    slices: int
    max_bitstream_bytes: int
    bitstream_bytes: int | None = None


@dataclass(frozen=True)
class _Device:
    name: str
    regions: tuple[str, ...]
    frame_us: float
    preempt_us: float
    context_bytes: int = 0


@dataclass(frozen=True)
class _Port:
    ps_per_byte: int

    def transfer_ps(self, nbytes: int) -> int:
        return nbytes * self.ps_per_byte


@dataclass(frozen=True)
class _Board:
    """Only what the core reads of a board profile (no juggle.fabric here)."""

    name: str
    regions: tuple[ProfileRegion, ...]
    devices: tuple[ProfileDevice, ...]
    config_port: _Port

    def region(self, name: str) -> ProfileRegion:
        return next(r for r in self.regions if r.name == name)


def test_an_index_from_anything_shaped_like_a_profile() -> None:
    board = _Board(
        "bench",
        (_Region("small", 100, 4000, 1000), _Region("big", 400, 9000)),
        (_Device("fir", ("small", "big"), 5.0, 1.0, 64),),
        _Port(ps_per_byte=1_000_000),  # 1 us per byte
    )
    index = TaskIndex.from_profile(board)
    assert [(t.region, t.size_bytes, t.t_rcfg_us) for t in index.compatible("fir")] == [
        ("small", 1000, 1000.0),  # the typical size
        ("big", 9000, 9000.0),  # none given: the maximum
    ]
    assert index.devices == (DeviceSpec("fir", 5.0, 1.0, 64),)
    with pytest.raises(TaskIndexError, match="'empty' has no"):
        TaskIndex.from_profile(_Board("empty", board.regions, (), board.config_port))


def test_frame_times_and_delta_pre(zed: TaskIndex) -> None:
    frame = {d.name: d.frame_us for d in zed.devices}
    pre = {d.name: d.preempt_us for d in zed.devices}
    assert frame == {"qam16": 47.0, "qam64": 31.0, "fft512": 71.1, "fft1024": 90.6}
    assert pre == {"qam16": 47.0, "qam64": 31.0, "fft512": 24.1, "fft1024": 33.6}


def test_eq7_and_eq8(zed: TaskIndex) -> None:
    # Eq. 7: QAM16 competes with QAM64 and FFT512 (not FFT1024), the paper's example
    assert set(zed.competitors("qam16")) == {"qam16", "qam64", "fft512"}
    assert zed.t_preempt_wcet_us("qam16") == 47.0
    assert zed.t_preempt_wcet_us("fft1024") == 33.6
    # Eq. 8: the longest reconfiguration over its regions
    assert zed.t_rcfg_wcet_us("qam16") == 809.12
    assert zed.t_rcfg_wcet_us("fft512") == 1314.81


def test_compatible_regions_are_sorted_by_size() -> None:
    regions = [RegionSpec("big", 900), RegionSpec("small", 100), RegionSpec("mid", 400)]
    devices = [DeviceSpec("d", 10.0, 5.0)]
    tasks = [TaskDescriptor("d", r.name, f"d@{r.name}", 10, 1.0) for r in regions]
    index = TaskIndex(regions, devices, tasks)
    assert [t.region for t in index.compatible("d")] == ["small", "mid", "big"]


def test_a_device_that_does_not_fit_is_rejected() -> None:
    regions = [RegionSpec("tiny", 50), RegionSpec("large", 500)]
    devices = [DeviceSpec("fft", 90.0, 30.0, slices=200)]
    with pytest.raises(TaskIndexError, match="does not fit"):
        TaskIndex(regions, devices, [TaskDescriptor("fft", "tiny", "x", 10, 1.0)])
    index = TaskIndex(regions, devices, [TaskDescriptor("fft", "large", "x", 10, 1.0)])
    with pytest.raises(NoCompatibleRegionError):
        index.descriptor("fft", "tiny")


@pytest.mark.parametrize(
    ("regions", "devices", "tasks", "message"),
    [
        ([RegionSpec("a", 1), RegionSpec("a", 2)], [], [], "appears twice"),
        ([RegionSpec("a", 1)], [DeviceSpec("d", 1, 1), DeviceSpec("d", 1, 1)], [], "twice"),
        ([RegionSpec("a", 1)], [], [TaskDescriptor("d", "a", "b", 1, 1)], "unknown device"),
        (
            [RegionSpec("a", 1)],
            [DeviceSpec("d", 1, 1)],
            [TaskDescriptor("d", "z", "b", 1, 1)],
            "unknown region",
        ),
        (
            [RegionSpec("a", 1)],
            [DeviceSpec("d", 1, 1)],
            [TaskDescriptor("d", "a", "b", 0, 1)],
            "size_bytes",
        ),
        ([RegionSpec("a", 1)], [DeviceSpec("d", -1, 1)], [], "frame_us"),
        ([], [], [], "regions"),
    ],
)
def test_inconsistent_indexes_are_refused(
    regions: list[RegionSpec], devices: list[DeviceSpec], tasks: list[TaskDescriptor], message: str
) -> None:
    with pytest.raises(TaskIndexError, match=message):
        TaskIndex(regions, devices, tasks)


def test_unknown_device(zed: TaskIndex) -> None:
    with pytest.raises(UnknownDeviceError, match="'fft4096'"):
        zed.compatible("fft4096")
    assert "qam16->prr1/prr2" in repr(zed)
