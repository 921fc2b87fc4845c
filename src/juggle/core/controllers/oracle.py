"""``oracle``: knows the future traffic and plans the fabric for it.

A satnav that has the whole road ahead. It follows one of two kinds of plan, both made
before the traffic starts:

* a *schedule* (phases of calls with their mix) and a cost model (µs per call of a mix for
  each fabric content, and ``None`` for the fabric while it is being reprogrammed): it plans
  once, by dynamic programming over the phase boundaries, which service the fabric should
  hold when, and juggles at the right moments. A reconfiguration may span several short
  phases. Where it is in the schedule it reads from the snapshot: the total number of calls
  so far. The plan is exact for the cost model it is given, not for effects the model leaves
  out (in the edge router: what the FIFOs buffer across phases);
* a *timeline*: the juggles to ask for at given times, e.g. the decisions any other policy
  makes on the same future traffic, which whoever knows that traffic can work out in
  advance. Replayed on the same deterministic system it reproduces that policy's run
  exactly.

A scenario that can evaluate plans on its own model (the edge router) gives the oracle every
plan it knows and keeps the fastest, so the oracle is at least as fast as every policy whose
timeline it was given (see :func:`juggle.simulate.router.experiments.run_oracle`). Other controllers
cannot know the future; this one shows how far from the best known plan they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from juggle.core.controllers._common import find_service, juggle_to, reconfiguring
from juggle.core.controllers.base import JuggleAction, StatsSnapshot
from juggle.errors import ControllerError

__all__ = ["CostModel", "OracleController", "OraclePhase", "TimedJuggles", "plan_phases"]

CostModel = Callable[[Mapping[int, float], "int | None"], float]
"""µs per call for a mix (service id → share) when the fabric holds a service (None: empty)."""


@dataclass(frozen=True, slots=True)
class OraclePhase:
    """A stretch of future traffic: calls ``first`` .. ``first + calls`` with ``shares``."""

    first: int
    calls: int
    shares: Mapping[int, float]


@dataclass(frozen=True, slots=True)
class TimedJuggles:
    """The juggles to ask for at the first snapshot taken at or after ``time_s``."""

    time_s: float
    actions: tuple[JuggleAction, ...]


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
    """Follow a plan made from ``schedule`` and ``cost`` (see :func:`plan_phases`), or replay
    a ``timeline`` of juggles.

    ``start`` is what the fabric holds when the schedule begins (id or interface name
    resolved at the first snapshot; None: empty). With a ``timeline`` the other options are
    not used: each entry's actions are returned, unchanged, by the first snapshot at or after
    its time (entries whose time has passed together, in order).

    Raises :class:`~juggle.errors.ControllerError` when neither a timeline nor both
    ``schedule`` and ``cost`` are given, or ``reconfig_us`` is negative.
    """

    name: str = "oracle"

    def __init__(
        self,
        schedule: Sequence[OraclePhase] | None = None,
        cost: CostModel | None = None,
        reconfig_us: float = 0.0,
        start: int | None = None,
        candidates: Sequence[int] | None = None,
        timeline: Sequence[TimedJuggles] | None = None,
    ) -> None:
        if reconfig_us < 0:
            raise ControllerError(
                f'"reconfig_us" must be >= 0, got {reconfig_us!r}', value=reconfig_us
            )
        self.timeline = None if timeline is None else tuple(timeline)
        self._next = 0
        self.schedule: tuple[OraclePhase, ...] = ()
        self.plan: list[tuple[int, int]] = []
        self.candidates: tuple[int, ...] = ()
        if self.timeline is not None:
            return
        if schedule is None or cost is None:
            raise ControllerError(
                'the oracle needs the future: pass "schedule" (phases of calls) and "cost" '
                '(µs per call for a mix and a fabric content), or a "timeline" of juggles'
            )
        self.schedule = tuple(schedule)
        ids = sorted({sid for p in self.schedule for sid in p.shares})
        self.candidates = tuple(candidates) if candidates is not None else tuple(ids)
        self.plan = plan_phases(self.schedule, self.candidates, start, cost, reconfig_us)

    def decide(self, snapshot: StatsSnapshot) -> Sequence[JuggleAction]:
        """Juggle to the planned service once the calls reach the next step of the plan."""
        if self.timeline is not None:
            return self._replay(snapshot.time_s)
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

    def _replay(self, now_s: float) -> list[JuggleAction]:
        assert self.timeline is not None
        out: list[JuggleAction] = []
        while self._next < len(self.timeline) and self.timeline[self._next].time_s <= now_s:
            out.extend(self.timeline[self._next].actions)
            self._next += 1
        return out

    def __repr__(self) -> str:
        if self.timeline is not None:
            return f"<OracleController replaying {len(self.timeline)} steps, next #{self._next}>"
        return f"<OracleController {len(self.plan)} planned juggles, next #{self._next}>"
