"""``oracle``: knows the future traffic and plans the fabric for it (the upper bound).

A satnav that has the whole road ahead: given the schedule of the traffic to come (phases of
calls with their mix) and a cost model (µs per call of a mix for each fabric content, and
``None`` for the fabric while it is being reprogrammed), it plans once, by dynamic programming
over the phase boundaries, which service the fabric should hold when, and then juggles at the
right moments. A reconfiguration may span several short phases. Where it is in the
schedule it reads from the snapshot: the total number of calls so far. Other controllers
cannot know the future; this one shows how far from ideal they are. It is exact for the
cost model it is given, not for effects the model leaves out (in the edge router: what the
FIFOs buffer across phases).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from juggle.core.controllers._common import find_service, juggle_to, reconfiguring
from juggle.core.controllers.base import JuggleAction, StatsSnapshot
from juggle.errors import ControllerError

__all__ = ["OracleController", "OraclePhase", "plan_phases"]

CostModel = Callable[[Mapping[int, float], "int | None"], float]
"""µs per call for a mix (service id → share) when the fabric holds a service (None: empty)."""


@dataclass(frozen=True, slots=True)
class OraclePhase:
    """A stretch of future traffic: calls ``first`` .. ``first + calls`` with ``shares``."""

    first: int
    calls: int
    shares: Mapping[int, float]


def plan_phases(
    phases: Sequence[OraclePhase],
    candidates: Sequence[int],
    start: int | None,
    cost: CostModel,
    reconfig_us: float,
) -> list[tuple[int, int]]:
    """The cheapest plan: ``(first call, service to hold)`` at each phase where it changes.

    Dynamic programming over phase boundaries; state = what the fabric holds. Switching at a
    boundary empties the fabric for ``reconfig_us``, which may span several short phases;
    the next decision is at the first boundary after the new content is in.
    """
    n = len(phases)
    empty = [cost(p.shares, None) for p in phases]
    best: list[dict[int | None, tuple[float, int, int | None, bool]]] = [{} for _ in range(n + 1)]
    best[0][start] = (0.0, -1, None, False)
    for i in range(n):
        for held, (total, _, _, _) in list(best[i].items()):
            stay = total + phases[i].calls * cost(phases[i].shares, held)
            _relax(best[i + 1], held, stay, i, held, False)
            for target in candidates:
                if target == held:
                    continue
                j, extra = _switch(phases, empty, i, target, cost, reconfig_us)
                _relax(best[j], target, total + extra, i, held, True)
    return _backtrack(best, phases)


def _relax(
    slot: dict[int | None, tuple[float, int, int | None, bool]],
    held: int | None,
    value: float,
    came_from: int,
    before: int | None,
    switched: bool,
) -> None:
    if held not in slot or value < slot[held][0] - 1e-9:
        slot[held] = (value, came_from, before, switched)


def _switch(
    phases: Sequence[OraclePhase],
    empty: Sequence[float],
    i: int,
    target: int,
    cost: CostModel,
    reconfig_us: float,
) -> tuple[int, float]:
    """Cost of switching to ``target`` at phase ``i``; returns (next boundary, cost)."""
    left = reconfig_us
    spent = 0.0
    j = i
    while j < len(phases):
        whole = phases[j].calls * empty[j]
        if whole >= left:
            served = left / empty[j] if empty[j] > 0 else phases[j].calls
            rest = phases[j].calls - served
            return j + 1, spent + left + rest * cost(phases[j].shares, target)
        spent += whole
        left -= whole
        j += 1
    return len(phases), spent


def _backtrack(
    best: list[dict[int | None, tuple[float, int, int | None, bool]]],
    phases: Sequence[OraclePhase],
) -> list[tuple[int, int]]:
    final = best[len(phases)]
    held = min(final, key=lambda k: final[k][0])
    plan: list[tuple[int, int]] = []
    i = len(phases)
    while i > 0:
        _, came_from, before, switched = best[i][held]
        if switched and held is not None:
            plan.append((phases[came_from].first, held))
        i, held = came_from, before
    plan.reverse()
    return plan


class OracleController:
    """Follow a plan computed from ``schedule`` and ``cost`` (see :func:`plan_phases`).

    ``start`` is what the fabric holds when the schedule begins (id or interface name
    resolved at the first snapshot; None: empty).

    Raises :class:`~juggle.errors.ControllerError` when ``schedule`` or ``cost`` is missing
    or ``reconfig_us`` is negative.
    """

    name: str = "oracle"

    def __init__(
        self,
        schedule: Sequence[OraclePhase] | None = None,
        cost: CostModel | None = None,
        reconfig_us: float = 0.0,
        start: int | None = None,
        candidates: Sequence[int] | None = None,
    ) -> None:
        if schedule is None or cost is None:
            raise ControllerError(
                'the oracle needs the future: pass "schedule" (phases of calls) and "cost" '
                "(µs per call for a mix and a fabric content)",
                schedule,
            )
        if reconfig_us < 0:
            raise ControllerError(f'"reconfig_us" must be >= 0, got {reconfig_us!r}', reconfig_us)
        self.schedule = tuple(schedule)
        ids = sorted({sid for p in self.schedule for sid in p.shares})
        self.candidates = tuple(candidates) if candidates is not None else tuple(ids)
        self.plan = plan_phases(self.schedule, self.candidates, start, cost, reconfig_us)
        self._next = 0

    def decide(self, snapshot: StatsSnapshot) -> Sequence[JuggleAction]:
        """Juggle to the planned service once the calls reach the next step of the plan."""
        position = sum(s.calls for s in snapshot.services)
        target: int | None = None
        while self._next < len(self.plan) and self.plan[self._next][0] <= position:
            target = self.plan[self._next][1]
            self._next += 1
        if target is None:
            target = self.plan[self._next - 1][1] if self._next else None
        if target is None or reconfiguring(snapshot):
            return []
        entry = find_service(snapshot, target)
        if entry is None:
            return []
        return juggle_to(snapshot, entry.service_id, "oracle: planned for the coming phase")

    def __repr__(self) -> str:
        return f"<OracleController {len(self.plan)} planned juggles, next #{self._next}>"
