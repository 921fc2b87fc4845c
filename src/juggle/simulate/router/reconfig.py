"""The reconfigurable part of a simulated fabric: slots that hold units of one kind at a time.

A stage with a trapdoor: the static part of the fabric always plays, the reconfigurable part
holds ``slots`` units of one kind (two processors, or two DES units, ...) and can be swapped
for another kind. While it is being swapped (``reconfig_us``) it holds nothing at all: the
units it had are gone at once and the new ones arrive only when the bitstream is in. The
swap runs as a SimPy process, so it takes virtual time and the rest of the model keeps going.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import simpy

from juggle.core.regionfsm import RegionPhase
from juggle.errors import ConfigurationError, RegionBusyError

__all__ = ["PartStatistics", "ReconfigurablePart"]


@dataclass(frozen=True, slots=True)
class PartStatistics:
    """Snapshot of a :class:`ReconfigurablePart`."""

    holds: str | None
    state: str
    reconfigurations: int
    reconfiguring_us: float


class ReconfigurablePart:
    """``slots`` units of one of ``kinds``; reprogramming takes ``reconfig_us``.

    ``on_change(kind, delta)`` is called with ``delta = -slots`` when units leave and
    ``+slots`` when they arrive, so the owner can adjust its pools.

    Raises :class:`~juggle.errors.ConfigurationError` for bad parameters.
    """

    def __init__(
        self,
        kinds: Sequence[str],
        slots: int,
        reconfig_us: float,
        holds: str | None,
        on_change: Callable[[str, int], None],
        name: str = "rp0",
    ) -> None:
        if slots <= 0:
            raise ConfigurationError(f'"slots" must be > 0, got {slots!r}')
        if reconfig_us < 0:
            raise ConfigurationError(f'"reconfig_us" must be >= 0, got {reconfig_us!r}')
        if holds is not None and holds not in kinds:
            raise ConfigurationError(f'"holds" must be one of {list(kinds)}, got {holds!r}')
        self.name = name
        self.kinds = tuple(kinds)
        self.slots = slots
        self.reconfig_us = reconfig_us
        self.holds = holds
        self._on_change = on_change
        self.reconfiguring = False
        self.reconfigurations = 0
        self.reconfiguring_us = 0.0

    @property
    def state(self) -> RegionPhase:
        """Ker-ONE region state: RECONFIG while swapping, BUSY holding units, else IDLE."""
        if self.reconfiguring:
            return RegionPhase.RECONFIG
        return RegionPhase.BUSY if self.holds is not None else RegionPhase.IDLE

    def reprogram(
        self, env: simpy.Environment, kind: str | None
    ) -> Generator[simpy.Event, Any, None]:
        """SimPy process: swap to ``kind`` (None: empty the part).

        Raises :class:`~juggle.errors.RegionBusyError` when a swap is already running and
        :class:`~juggle.errors.ConfigurationError` for an unknown kind; both before any change.
        """
        self.check(kind)
        old = self.holds
        self.reconfiguring = True
        self.reconfigurations += 1
        self.holds = None
        if old is not None:
            self._on_change(old, -self.slots)
        start = env.now
        if kind is not None:
            yield env.timeout(self.reconfig_us)
        self.reconfiguring_us += env.now - start
        self.holds = kind
        self.reconfiguring = False
        if kind is not None:
            self._on_change(kind, self.slots)

    def check(self, kind: str | None) -> None:
        """Raise unless a swap to ``kind`` may start now (see :meth:`reprogram`)."""
        if self.reconfiguring:
            raise RegionBusyError(
                f"part {self.name!r} is already being reconfigured", region=self.name
            )
        if kind is not None and kind not in self.kinds:
            raise ConfigurationError(
                f"part {self.name!r} cannot hold {kind!r} (kinds: {list(self.kinds)})", value=kind
            )

    def statistics(self) -> PartStatistics:
        """A frozen snapshot of the part."""
        return PartStatistics(
            self.holds, self.state.value, self.reconfigurations, self.reconfiguring_us
        )

    def __repr__(self) -> str:
        return (
            f"<ReconfigurablePart {self.name} {self.state.value} holds={self.holds} "
            f"x{self.slots}, {self.reconfigurations} reconfigurations>"
        )
