"""UIO windows found by platform device (issue 20, item 4): a design's register node that is
not ``generic-uio`` appears as a platform device without a driver; juggle binds it to
``uio_pdrv_genirq`` through ``driver_override`` (Documentation/ABI/testing/sysfs-bus-platform)
and maps the ``uioN`` that appears, once, and names what is missing otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from juggle.errors import BackendError
from juggle.fabric.linux.fake import FakeKernel
from juggle.fabric.linux.fdt import UioNode, build_overlay
from juggle.fabric.linux.uio import find_uio_by_device, read_uio_map, wait_for_uio

KV = "xck26-sfvc784-2LV-c"
OVL = "sys/kernel/config/device-tree/overlays"
DEVICE = "a4030000.accel"


def _kernel_with_accel(root: Path) -> FakeKernel:
    kernel = FakeKernel(root, part=KV)
    node = UioNode("accel", (0xA4030000, 0x1000), compatible="xlnx,accel-1.0")
    kernel.write_file("lib/firmware/plain.dtbo", build_overlay(firmware_name=None, uio=[node]))
    kernel.mkdir(f"{OVL}/plain")
    kernel.write(f"{OVL}/plain/path", "plain.dtbo")
    assert kernel.read(f"{OVL}/plain/status").strip() == "applied"
    return kernel


def test_a_platform_device_without_a_driver_is_bound_to_uio_pdrv_genirq(tmp_path: Path) -> None:
    kernel = _kernel_with_accel(tmp_path)
    assert kernel.listdir("sys/class/uio") == []  # not generic-uio: no UIO device yet
    device = wait_for_uio(kernel, DEVICE, timeout_s=2.0)
    assert device == "uio0"
    base = f"sys/bus/platform/devices/{DEVICE}"
    assert kernel.read(f"{base}/driver_override").strip() == "uio_pdrv_genirq"
    assert kernel.writes_to("uio_pdrv_genirq/bind") == [DEVICE]  # bound once
    uio_map = read_uio_map(kernel, device)
    assert uio_map.addr == 0xA4030000 and uio_map.size == 0x1000
    assert (kernel.root / "dev" / device).exists()
    # found again without binding again
    assert find_uio_by_device(kernel, DEVICE, bind=True) == "uio0"
    assert kernel.writes_to("uio_pdrv_genirq/bind") == [DEVICE]


def test_an_absent_device_is_named_after_the_deadline(tmp_path: Path) -> None:
    kernel = _kernel_with_accel(tmp_path)
    with pytest.raises(BackendError, match=r"no UIO device named 'ghost'.*platform device"):
        wait_for_uio(kernel, "ghost", timeout_s=0.05)
    assert kernel.writes_to("uio_pdrv_genirq/bind") == []  # nothing to bind: nothing written
