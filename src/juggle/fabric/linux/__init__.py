"""The Linux backend: FPGA Manager and bridges through sysfs, MMIO through UIO."""

from juggle.fabric.linux.backend import LinuxBackend, open_linux_backend
from juggle.fabric.linux.fake import FakeKernel
from juggle.fabric.linux.ops import LinuxBridgeOps, LinuxManagerOps, SoftBridgeOps
from juggle.fabric.linux.sysfs import HostSysfs, SysfsOps
from juggle.fabric.linux.uio import UioMap, UioWindow, find_uio, read_uio_map

__all__ = [
    "FakeKernel",
    "HostSysfs",
    "LinuxBackend",
    "LinuxBridgeOps",
    "LinuxManagerOps",
    "SoftBridgeOps",
    "SysfsOps",
    "UioMap",
    "UioWindow",
    "find_uio",
    "open_linux_backend",
    "read_uio_map",
]
