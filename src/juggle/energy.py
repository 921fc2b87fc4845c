"""Joules per tier and per job of a run, from its per-tier call statistics and the board's
power model (the profile's ``[power]`` section, whose figures are inputs).

energy = power of the tier's state x the board's time in that state. The power comes from
the profile: ``cpu_busy_w`` for a software or native call, the region's ``fabric_active_w``
for a hardware call (the CPU drives the core over the bus meanwhile), ``reconfiguration_w``
while bitstreams are written. The board's time is NOT what this machine measured: the host
runs Python, the board a PowerPC. It is taken, per service and tier, from the first of

1. for the hardware tier, the simulated fabric's bus time of the run
   (``ServiceStatistics.hardware_modeled_mean_us`` x calls, modeled at the profile's ``[bus]``
   costs; ``xupv2p``'s are calibrated to the paper's TDES timing, see that profile),
2. the service's board cost model (``board_models``; TDES: Fig 7's per-call and per-block
   costs, :func:`juggle.simulate.tdes.model.tier_seconds`, modeled with calibrated costs: libdes's
   block fitted to Fig 8's C runtime, J9 JCE's three times that),
3. otherwise nothing: the pair is listed in ``not_modeled`` and left out of the sums, unless
   ``host_stand_in`` asks for the host's wall clock (mean x calls) in its place, labeled
   ``measured`` and said to be a stand-in in ``how``.

The board has one CPU: calls that overlapped on the host are counted one after another, and
time the CPU spent idle between calls is not counted (the figures are the work's energy).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from juggle.core.tiers import Tier
from juggle.errors import ConfigurationError, ProfileError
from juggle.fabric.profiles import BoardProfile, PowerSection, load_profile

if TYPE_CHECKING:
    from juggle.runtime.snapshots import ServiceStatistics

__all__ = ["BoardModel", "energy_of", "tdes_board_model"]

BoardModel = Callable[[str, int, int], float | None]
"""``(tier, calls, nbytes) -> board seconds``, or None for a tier the model does not cover."""

_TDES_TIERS = {"software": "software", "native": "native", "hardware": "hardware-proxied"}


def tdes_board_model(profile: str | BoardProfile = "xupv2p") -> BoardModel:
    """TDES on ``profile``: the juggle tiers software, native and hardware as Fig 7's
    software (J9 JCE), native (libdes) and hardware-proxied paths (modeled, costs calibrated:
    see :class:`~juggle.simulate.tdes.model.TierCosts`)."""
    from juggle.simulate.tdes.model import tier_seconds

    board = load_profile(profile) if isinstance(profile, str) else profile

    def model(tier: str, calls: int, nbytes: int) -> float | None:
        path = _TDES_TIERS.get(tier)
        return None if path is None else tier_seconds(path, calls, nbytes, board)

    return model


def energy_of(
    statistics_by_service: Mapping[str, ServiceStatistics],
    profile: str | BoardProfile,
    bytes_by_service_tier: Mapping[tuple[str, str], int],
    *,
    board_models: Mapping[str, BoardModel] | None = None,
    reconfiguration_s: float = 0.0,
    region: str | None = None,
    host_stand_in: bool = False,
) -> dict[str, Any]:
    """Joules per tier (``energy_j``), per job (``energy_j_per_job``: one per service) and per
    service and tier (``per_service``), with the board time and power behind each, a label per
    key and how each figure was obtained.

    ``statistics_by_service`` maps a job's name to its service's statistics; ``bytes_by_service
    _tier`` the bytes each (job, tier) moved. ``board_models`` defaults to ``{"tdes": ...}``
    (:func:`tdes_board_model`). ``reconfiguration_s``: modeled time spent writing bitstreams
    and switching bridges in the run. ``region``: where hardware calls ran (its
    ``region_active_w`` if the profile has one). ``host_stand_in``: see the module's docstring.

    Raises :class:`~juggle.errors.ProfileError` for a profile without ``[power]`` and
    :class:`~juggle.errors.ConfigurationError` for a negative ``reconfiguration_s``.
    """
    board = load_profile(profile) if isinstance(profile, str) else profile
    power = board.power
    if power is None:
        raise ProfileError(f"profile {board.name!r} has no [power] section", profile=board.name)
    if not reconfiguration_s >= 0:
        raise ConfigurationError(
            f'"reconfiguration_s" must be >= 0, got {reconfiguration_s!r}', value=reconfiguration_s
        )
    models = {"tdes": tdes_board_model(board)} if board_models is None else board_models
    per_service: dict[str, dict[str, Any]] = {}
    per_tier: dict[str, float] = {}
    stand_ins: list[str] = []
    not_modeled: dict[str, dict[str, int]] = {}
    for job, stats in statistics_by_service.items():
        rows: dict[str, Any] = {}
        for tier, calls in stats.per_tier.items():
            if tier == "gone" or calls.calls == 0:
                continue
            nbytes = bytes_by_service_tier.get((job, tier), 0)
            timed = _board_seconds(models.get(job), stats, tier, calls.calls, nbytes)
            if timed is None and not host_stand_in:
                not_modeled[f"{job}/{tier}"] = {"calls": calls.calls, "bytes": nbytes}
                continue
            seconds, source = timed or _host_seconds(stats, tier, calls.calls)
            if source.startswith("measured"):
                stand_ins.append(f"{job}/{tier}")
            watts, watts_from = _power(power, tier, region)
            joules = watts * seconds
            rows[tier] = {
                "calls": calls.calls,
                "bytes": nbytes,
                "board_s": round(seconds, 6),
                "power_w": watts,
                "energy_j": round(joules, 6),
                "labels": {
                    "calls": "measured",
                    "bytes": "measured",
                    "board_s": "measured" if source.startswith("measured") else "modeled",
                    "power_w": "input",
                    "energy_j": "modeled",
                },
                "how": {"board_s": source, "power_w": watts_from},
            }
            per_tier[tier] = per_tier.get(tier, 0.0) + joules
        per_service[job] = rows
    reconfig_w = power.reconfiguration_w or power.cpu_busy_w
    reconfig_j = reconfig_w * reconfiguration_s
    if reconfiguration_s:
        per_tier["reconfiguration"] = reconfig_j
    per_job = {
        job: round(sum(row["energy_j"] for row in rows.values()), 6)
        for job, rows in per_service.items()
    }
    stand_in_note = (
        f"; {', '.join(stand_ins)} use the host's wall clock as a stand-in for the board's "
        "time (no board cost model)"
        if stand_ins
        else ""
    )
    return {
        "board": board.name,
        "energy_j": {tier: round(j, 6) for tier, j in sorted(per_tier.items())},
        "energy_j_per_job": per_job,
        "total_j": round(sum(per_tier.values()), 6),
        "per_service": per_service,
        "not_modeled": not_modeled,
        "reconfiguration": {
            "seconds": reconfiguration_s,
            "power_w": reconfig_w,
            "energy_j": round(reconfig_j, 6),
        },
        "labels": {
            "board": "input",
            "energy_j": "modeled",
            "energy_j_per_job": "modeled",
            "total_j": "modeled",
            "per_service": "modeled",
            "not_modeled": "measured",
            "reconfiguration": "modeled",
        },
        "how": {
            "energy_j": "sum over jobs of power (profile [power], input) x board time in the "
            "tier's state (see per_service.*.how)" + stand_in_note,
            "energy_j_per_job": "the job's service over all its tiers, reconfiguration not "
            "included (it is shared)",
            "not_modeled": "(job/tier: calls, bytes) with no model of the board's time: not "
            "counted in any energy",
            "reconfiguration": "modeled reconfiguration and bridge time of the run x "
            + ("reconfiguration_w" if power.reconfiguration_w else "cpu_busy_w")
            + f" ({power.how('reconfiguration_w' if power.reconfiguration_w else 'cpu_busy_w')})",
        },
    }


def _board_seconds(
    model: BoardModel | None, stats: ServiceStatistics, tier: str, calls: int, nbytes: int
) -> tuple[float, str] | None:
    """The board's modeled time for one service's tier and how it was obtained (None: no
    model covers it)."""
    if tier == Tier.HARDWARE and stats.hardware_modeled_mean_us is not None:
        return (
            stats.hardware_modeled_mean_us * calls / 1e6,
            "modeled: the simulated fabric's bus time of this run (mean x calls) at the "
            "profile's bus read/write cycles (xupv2p: calibrated to the paper's TDES timing)",
        )
    modeled = None if model is None else model(tier, calls, nbytes)
    if modeled is not None:
        return (
            modeled,
            "modeled: the service's board cost model (calls x per-call + blocks x "
            "per-block; TDES: Fig 7's TierCosts, calibrated: libdes's block to Fig 8's C "
            "runtime, J9 JCE's = 3x that, section 6.2)",
        )
    return None


def _host_seconds(stats: ServiceStatistics, tier: str, calls: int) -> tuple[float, str]:
    """This machine's time for the tier's calls, standing in for the board's."""
    mean_us = stats.per_tier[tier].mean_us
    return (
        mean_us * calls / 1e6,
        "measured: this machine's wall clock (mean x calls), a stand-in: the board's time "
        "is not modeled for this service and tier",
    )


def _power(power: PowerSection, tier: str, region: str | None) -> tuple[float, str]:
    """The board's power while ``tier`` runs, and where the figure comes from."""
    if tier == Tier.HARDWARE:
        key = "region_active_w" if region in power.region_active_w else "fabric_active_w"
        return power.active_w(region), power.how(key)
    return power.cpu_busy_w, power.how("cpu_busy_w")
