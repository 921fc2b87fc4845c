"""Ker-ONE's modeled allocation costs (paper 6.2): Table 4's atomic overheads, the four
solution paths of Fig 15 (Eq. 6) and the worst-case allocation latency per device (Eq. 5-8).

All figures here are MODELED: they are the paper's measurements of the Ker-ONE micro-kernel
and Virtual Device Manager on a 667 MHz Cortex-A9, not anything measured on this machine.
"""

from __future__ import annotations

from dataclasses import dataclass

from juggle.core.taskindex import TaskIndex

__all__ = ["KERNEL_US", "PATH_US", "T_SW_US", "DeviceWcet", "path_overhead_us", "wcet"]

KERNEL_US: dict[str, float] = {
    "trap": 0.76,
    "resume": 0.64,
    "pl_irq": 0.81,
    "search": 0.50,
    "solution1": 1.13,
    "solution2": 2.77,
    "solution3": 0.34,
    "irq_pcap": 0.64,
    "irq_stop": 0.28,
}
"""Table 4: atomic overheads of an allocation, µs (modeled, Ker-ONE on the ZedBoard)."""

T_SW_US: dict[str, float] = {"qam16": 1513.0, "qam64": 1174.0, "fft512": 6582.0, "fft1024": 12784.0}
"""Table 6: software time per frame on the 667 MHz Cortex-A9, µs (modeled: the paper's ARM
figures, used as the virtual duration of work an aware tenant moves to software)."""

_PATH_STEPS: dict[int, tuple[str, ...]] = {
    # trap into the manager, search, handle the solution, resume the VM
    1: ("trap", "search", "solution1", "resume"),
    # ... then the PCAP-over IRQ is routed back and the VM resumed once more
    2: ("trap", "search", "solution2", "resume", "pl_irq", "irq_pcap", "resume"),
    # preempt: order the stop, resume; on the stop IRQ handle it as a direct Assign
    3: ("trap", "search", "solution3", "resume", "pl_irq", "irq_stop", "solution1", "resume"),
    # preempt, then reconfigure, then finish as an Assign
    4: (
        "trap",
        "search",
        "solution3",
        "resume",
        "pl_irq",
        "irq_stop",
        "solution2",
        "resume",
        "pl_irq",
        "irq_pcap",
        "solution1",
        "resume",
    ),
}


def path_overhead_us(path: int) -> float:
    """The fixed part of Eq. 6 for ``path`` (1..4): Table 4's steps along Fig 15, summed.

    They add up to the paper's 3.03, 6.76, 5.10 and 9.96 µs. Raises ``KeyError`` for another
    path number.
    """
    return round(sum(KERNEL_US[step] for step in _PATH_STEPS[path]), 2)


PATH_US: dict[int, float] = {p: path_overhead_us(p) for p in (1, 2, 3, 4)}
"""Eq. 6 constants by path: T_Path = PATH_US[p] (+ T_preempt for 3, 4) (+ T_RCFG for 2, 4)."""


@dataclass(frozen=True, slots=True)
class DeviceWcet:
    """Eq. 5-8 for one device: the four path latencies and their maximum, µs (modeled)."""

    device: str
    t_preempt_wcet_us: float
    t_rcfg_wcet_us: float
    path_us: tuple[float, float, float, float]

    @property
    def wcet_us(self) -> float:
        """Eq. 5: the worst of the four paths."""
        return max(self.path_us)


def wcet(index: TaskIndex, device: str) -> DeviceWcet:
    """Worst-case allocation latency of ``device`` on ``index`` (Eq. 5-8).

    T_preempt(WCET) is the longest δ_pre of the devices sharing a region with it (Eq. 7);
    T_RCFG(WCET) the longest reconfiguration over its regions (Eq. 8).

    Raises :class:`~juggle.errors.UnknownDeviceError` for an unknown device.
    """
    pre = index.t_preempt_wcet_us(device)
    rcfg = index.t_rcfg_wcet_us(device)
    paths = (
        PATH_US[1],
        round(PATH_US[2] + rcfg, 3),
        round(PATH_US[3] + pre, 3),
        round(PATH_US[4] + pre + rcfg, 3),
    )
    return DeviceWcet(device, pre, rcfg, paths)
