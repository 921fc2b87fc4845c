"""Ker-ONE's allocation costs (paper 6.2): Table 4's atomic overheads, the four solution paths
of Fig 15 (Eq. 6), the worst-case allocation latency per device (Eq. 5-8), and T_RCFG derived
from bitstream sizes.

Where each figure comes from:

* ``input`` (copied from the paper): Table 4's atomic overheads (:data:`KERNEL_US`, the
  paper's measurements of the Ker-ONE micro-kernel and Virtual Device Manager on a 667 MHz
  Cortex-A9), Table 6's software times (:data:`T_SW_US`), Table 5's T_RCFG
  (:data:`TABLE5_T_RCFG_US`, used only to compare with);
* ``modeled``: the path overheads of Eq. 6 (Table 4's steps summed along Fig 15; the paper's
  own sums are the same, so they agree by construction), T_RCFG per region and the WCET.

T_RCFG is derived, not typed in: a region's partial bitstream is its share of the device times
the device's full bitstream (:class:`BitstreamRule`, inputs in the board profile's
``[scenario.bitstream_rule]``), loaded at the configuration port's throughput (profile
``[config_port]``). :func:`derive_t_rcfg` shows Table 5's value beside, with the deviation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from juggle.core.taskindex import TaskIndex
from juggle.errors import ConfigurationError

if TYPE_CHECKING:
    from juggle.fabric.profiles import BoardProfile

__all__ = [
    "KERNEL_US",
    "PATH_US",
    "TABLE5_T_RCFG_US",
    "T_SW_US",
    "BitstreamRule",
    "DeviceWcet",
    "RcfgDerivation",
    "apply_bitstream_rule",
    "derive_t_rcfg",
    "path_overhead_us",
    "wcet",
]

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
"""Table 4: atomic overheads of an allocation, µs (input: the paper's measurements of Ker-ONE
on the ZedBoard)."""

T_SW_US: dict[str, float] = {"qam16": 1513.0, "qam64": 1174.0, "fft512": 6582.0, "fft1024": 12784.0}
"""Table 6: software time per frame on the 667 MHz Cortex-A9, µs (input: the paper's ARM
figures, used as the virtual duration of work an aware tenant moves to software)."""

TABLE5_T_RCFG_US: dict[str, float] = {"prr1": 231.0, "prr2": 810.0, "prr3": 1206.0}
"""Table 5: T_RCFG per region, µs (input). Compared with the derived T_RCFG, never used by
the simulation."""

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
"""Eq. 6 constants by path: T_Path = PATH_US[p] (+ T_preempt for 3, 4) (+ T_RCFG for 2, 4)
(modeled: Table 4 summed along Fig 15)."""


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


# -- T_RCFG from bitstream sizes -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BitstreamRule:
    """How big a region's partial bitstream is: ``round(share / 100 x full_bitstream_bytes)``.

    ``region_share_pct`` is each region's share of the device in percent; the paper rounds it
    to ``share_rounding_pct`` either way, which bounds the sizes the rule can claim.
    """

    full_bitstream_bytes: int
    region_share_pct: Mapping[str, float]
    share_rounding_pct: float = 0.0

    @classmethod
    def from_profile(cls, profile: BoardProfile) -> BitstreamRule | None:
        """The rule in ``profile``'s ``[scenario.bitstream_rule]``, or None without one.

        Raises:
            ConfigurationError: the table is malformed or names a region the board lacks.
        """
        raw = profile.scenario.get("bitstream_rule")
        if raw is None:
            return None
        where = f"profile {profile.name!r} [scenario.bitstream_rule]"
        if not isinstance(raw, dict):
            raise ConfigurationError(f"{where} must be a table")
        full = raw.get("full_bitstream_bytes")
        shares = raw.get("region_share_pct")
        rounding = raw.get("share_rounding_pct", 0.0)
        if isinstance(full, bool) or not isinstance(full, int) or full <= 0:
            raise ConfigurationError(
                f"{where}: full_bitstream_bytes must be an int > 0", value=full
            )
        if not isinstance(shares, dict) or not shares:
            raise ConfigurationError(f"{where}: region_share_pct must be a table")
        if not _number(rounding) or not 0 <= rounding < 100:
            raise ConfigurationError(
                f"{where}: share_rounding_pct must be in [0, 100)", value=rounding
            )
        known = set(profile.region_names())
        for region, share in shares.items():
            if region not in known:
                raise ConfigurationError(f"{where}: {region!r} is no region", value=region)
            if not _number(share) or not 0 < share <= 100:
                raise ConfigurationError(
                    f"{where}: share of {region!r} must be in (0, 100]", value=share
                )
        return cls(full, {r: float(v) for r, v in shares.items()}, float(rounding))

    def bytes_for(self, share_pct: float) -> int:
        """The rule: the bitstream bytes of a region holding ``share_pct`` % of the device."""
        return round(share_pct / 100.0 * self.full_bitstream_bytes)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class RcfgDerivation:
    """T_RCFG of one region, how it was obtained, and Table 5's value beside it.

    ``label`` is ``modeled`` when the size comes from the :class:`BitstreamRule` and ``input``
    when it is the profile's ``bitstream_bytes`` (no rule). ``share_interval_us`` is T_RCFG at
    both ends of the share's rounding interval; ``paper_within_share_interval`` says whether
    Table 5's value lies inside it.
    """

    region: str
    label: str
    share_pct: float | None
    full_bitstream_bytes: int | None
    bitstream_bytes: int
    port_bytes_per_s: float
    t_rcfg_us: float
    paper_us: float | None
    deviation_pct: float | None
    share_interval_us: tuple[float, float] | None
    paper_within_share_interval: bool | None

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict of the fields (the interval as a list) with ``labels`` per key."""
        derived = self.label  # "modeled" by the rule, "input" from the profile's sizes
        return {
            "share_pct": self.share_pct,
            "full_bitstream_bytes": self.full_bitstream_bytes,
            "bitstream_bytes": self.bitstream_bytes,
            "port_bytes_per_s": self.port_bytes_per_s,
            "t_rcfg_us": self.t_rcfg_us,
            "paper_us": self.paper_us,
            "deviation_pct": self.deviation_pct,
            "share_interval_us": None
            if self.share_interval_us is None
            else list(self.share_interval_us),
            "paper_within_share_interval": self.paper_within_share_interval,
            "labels": {
                "share_pct": "input",
                "full_bitstream_bytes": "input",
                "bitstream_bytes": derived,
                "port_bytes_per_s": "input",
                "t_rcfg_us": derived,
                "paper_us": "input",
                "deviation_pct": derived,
                "share_interval_us": derived,
                "paper_within_share_interval": derived,
            },
        }


def derive_t_rcfg(
    profile: BoardProfile, paper: Mapping[str, float] | None = None
) -> dict[str, RcfgDerivation]:
    """T_RCFG of every region of ``profile``: the bitstream size (by the profile's rule, else
    its ``bitstream_bytes``, else ``max_bitstream_bytes``) through its configuration port.

    ``paper`` (e.g. :data:`TABLE5_T_RCFG_US` for the zedboard; default: nothing to compare
    with) is shown beside, with the deviation in percent.

    Raises:
        ConfigurationError: a malformed rule (:meth:`BitstreamRule.from_profile`).
    """
    rule = BitstreamRule.from_profile(profile)
    reference: Mapping[str, float] = paper or {}
    port = profile.config_port

    def t_us(nbytes: int) -> float:
        return round(port.transfer_ps(nbytes) / 1e6, 3)

    out: dict[str, RcfgDerivation] = {}
    for region in profile.regions:
        share = None if rule is None else rule.region_share_pct.get(region.name)
        if rule is not None and share is not None:
            size = rule.bytes_for(share)
            low = rule.bytes_for(max(share - rule.share_rounding_pct, 0.0))
            high = rule.bytes_for(share + rule.share_rounding_pct)
            interval: tuple[float, float] | None = (t_us(low), t_us(high))
            label, full = "modeled", rule.full_bitstream_bytes
        else:
            size = region.bitstream_bytes or region.max_bitstream_bytes
            interval, label, full = None, "input", None
        t = t_us(size)
        ref = reference.get(region.name)
        out[region.name] = RcfgDerivation(
            region=region.name,
            label=label,
            share_pct=share,
            full_bitstream_bytes=full,
            bitstream_bytes=size,
            port_bytes_per_s=port.throughput_bytes_per_s,
            t_rcfg_us=t,
            paper_us=ref,
            deviation_pct=None if ref is None else round((t - ref) / ref * 100.0, 1),
            share_interval_us=interval,
            paper_within_share_interval=None
            if interval is None or ref is None
            else interval[0] <= ref <= interval[1],
        )
    return out


def apply_bitstream_rule(profile: BoardProfile) -> BoardProfile:
    """``profile`` with every region's ``bitstream_bytes`` set by its :class:`BitstreamRule`
    (unchanged without a rule), so an index built from it loads the derived sizes.

    Raises:
        ConfigurationError: a malformed rule, or a derived size over the region's
            ``max_bitstream_bytes``.
    """
    rule = BitstreamRule.from_profile(profile)
    if rule is None:
        return profile
    regions = []
    for region in profile.regions:
        share = rule.region_share_pct.get(region.name)
        if share is None:
            regions.append(region)
            continue
        size = rule.bytes_for(share)
        if size > region.max_bitstream_bytes:
            raise ConfigurationError(
                f"region {region.name!r}: the rule gives {size} B, over its "
                f"max_bitstream_bytes {region.max_bitstream_bytes}",
                value=size,
            )
        regions.append(region.model_copy(update={"bitstream_bytes": size}))
    return profile.model_copy(update={"regions": tuple(regions)})
