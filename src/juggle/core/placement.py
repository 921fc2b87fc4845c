"""The juggle primitive's decision: which region a service enters, and whether it may at all.

Sans-I/O like the allocator: :func:`plan_juggle` reads frozen views of the services and regions
and answers with a :class:`JugglePlan` or an error; it changes nothing and touches no hardware.
The live runtime and the virtual-time simulations both ask it, so a juggle means the same in
both: the entering service needs a hardware tier and a region its bitstreams target that is
free (empty or holding nobody's design), or that a leaving service frees; a region in ERROR
(quarantined) is never chosen; every leaving service must be in hardware; regions a tenant
holds are not the juggle's to take. The allocator (:meth:`juggle.core.allocator.Allocator.
juggle`) asks it with views of its own regions before it commits a juggle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from juggle.core.tiers import Tier
from juggle.errors import SanityCheckError, TierUnavailableError

__all__ = ["JugglePlan", "RegionView", "ServiceView", "plan_juggle"]


@dataclass(frozen=True, slots=True)
class ServiceView:
    """A service as the planner sees it.

    ``regions`` are the regions its hardware module has bitstreams for, in preference order
    (empty: no hardware tier); ``region`` is where it is now (None: not in the fabric);
    ``arbitrated``: tenants' requests place it, juggles do not; ``device``: its name in the
    allocator's task index.
    """

    service_id: int
    label: str
    tier: str
    region: str | None
    regions: tuple[str, ...]
    arbitrated: bool = False
    device: str = ""


@dataclass(frozen=True, slots=True)
class RegionView:
    """A region as the planner sees it: the service using it, or a tenant's claim (``holder``
    names it), and whether it is quarantined (ERROR)."""

    name: str
    service_id: int | None = None
    claimed: bool = False
    error: bool = False
    holder: str | None = None


@dataclass(frozen=True, slots=True)
class JugglePlan:
    """What a juggle will do: ``region`` for ``entering`` (None: nothing enters), and whether
    that region is freed by a leaving service (``reclaimed``) rather than free already."""

    entering: int | None
    leaving: tuple[int, ...]
    region: str | None
    reclaimed: bool


def plan_juggle(
    entering: ServiceView | None,
    leaving: Sequence[ServiceView],
    regions: Mapping[str, RegionView],
) -> JugglePlan:
    """Check a juggle and choose the entering service's region; nothing changes.

    An entering service already in the fabric enters nowhere (``region`` None). Raises
    :class:`~juggle.errors.SanityCheckError` (a leaving service not in hardware, listed twice,
    arbitrated, or no region for the entering one, naming the holders) and
    :class:`~juggle.errors.TierUnavailableError` (the entering service has no hardware tier).
    """
    seen: set[int] = set()
    for m in leaving:
        if m.service_id in seen:
            raise SanityCheckError(
                f"service {m.service_id} ({m.label}) is listed twice in to_software",
                service_id=m.service_id,
            )
        seen.add(m.service_id)
        if m.arbitrated:
            raise SanityCheckError(
                f"service {m.service_id} ({m.label}) is arbitrated among tenants: the allocator "
                "places it, juggles do not",
                service_id=m.service_id,
            )
        if m.tier != Tier.HARDWARE or m.region is None:
            raise SanityCheckError(
                f"service {m.service_id} ({m.label}) is in {m.tier}, not in hardware: it "
                "cannot be taken out of the fabric",
                service_id=m.service_id,
            )
    ids = tuple(m.service_id for m in leaving)
    if entering is None:
        return JugglePlan(None, ids, None, False)
    if entering.service_id in seen:
        raise SanityCheckError(
            f"service {entering.service_id} ({entering.label}) cannot enter and leave the "
            "fabric in one juggle",
            service_id=entering.service_id,
        )
    if not entering.regions:
        raise TierUnavailableError(
            f"service {entering.service_id} ({entering.label}) has no hardware implementation",
            service_id=entering.service_id,
        )
    if entering.region is not None:
        return JugglePlan(entering.service_id, ids, None, False)
    if entering.arbitrated:
        raise SanityCheckError(
            f"service {entering.service_id} ({entering.label}) is arbitrated among tenants: "
            "the allocator places it, juggles do not",
            service_id=entering.service_id,
        )
    freed = {m.region for m in leaving}
    free: list[str] = []
    reclaimed: list[str] = []
    holders: list[str] = []
    for name in entering.regions:
        view = regions.get(name, RegionView(name))
        if name in freed:
            reclaimed.append(name)
        elif view.error:
            holders.append(f"{name} is quarantined (ERROR; recover it first)")
        elif view.claimed:
            holders.append(f"{name} is held by {view.holder or 'a tenant'}")
        elif view.service_id is not None:
            holders.append(f"{name} is held by service id {view.service_id}")
        else:
            free.append(name)
    if free:
        return JugglePlan(entering.service_id, ids, free[0], False)
    if reclaimed:
        return JugglePlan(entering.service_id, ids, reclaimed[0], True)
    raise SanityCheckError(
        f"no region for service {entering.service_id} ({entering.label}): "
        f"{'; '.join(holders)}; list the holder in to_software to free it",
        service_id=entering.service_id,
    )
