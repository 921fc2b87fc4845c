"""Bridges: the gate between a region and the bus (a decoupler, the Juggle socket bridge).

While a region is reprogrammed its bridge is closed (disabled), like a drawbridge raised
during repairs, so half-configured logic never drives the bus. A backend implements
:class:`BridgeOps` (``struct fpga_bridge_ops``); :class:`Bridge` adds the checks: after each
change it reads the state back and raises :class:`~juggle.errors.BridgeError` if the bridge
did not get there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from juggle.errors import BridgeError

__all__ = ["Bridge", "BridgeOps", "BridgeStatistics"]


class BridgeOps(Protocol):
    """What a backend implements for one bridge."""

    def enable_set(self, enable: bool) -> None:
        """Open (``True``) or close (``False``) the bridge."""
        ...

    def enable_show(self) -> bool:
        """Whether the bridge is open."""
        ...


@dataclass(frozen=True, slots=True)
class BridgeStatistics:
    """A snapshot of a bridge: open or not, state changes done and failed."""

    name: str
    enabled: bool
    switches: int
    failures: int


class Bridge:
    """One region's bridge; ``name`` is the region (or sysfs bridge) it belongs to."""

    def __init__(self, name: str, ops: BridgeOps) -> None:
        self.name = name
        self._ops = ops
        self._switches = 0
        self._failures = 0

    @property
    def enabled(self) -> bool:
        """Whether the bridge is open, as the backend reports it."""
        return bool(self._ops.enable_show())

    def enable(self) -> None:
        """Open the bridge. Raises :class:`~juggle.errors.BridgeError` if it stays closed."""
        self._set(True)

    def disable(self) -> None:
        """Close the bridge. Raises :class:`~juggle.errors.BridgeError` if it stays open."""
        self._set(False)

    def _set(self, enable: bool) -> None:
        word = "enable" if enable else "disable"
        try:
            self._ops.enable_set(enable)
            reached = bool(self._ops.enable_show())
        except BridgeError:
            self._failures += 1
            raise
        except OSError as exc:
            self._failures += 1
            raise BridgeError(
                f"bridge {self.name!r}: {word} failed: {exc}", region=self.name
            ) from exc
        if reached != enable:
            self._failures += 1
            state = "enabled" if reached else "disabled"
            raise BridgeError(
                f"bridge {self.name!r} did not {word}: it reads back {state}", region=self.name
            )
        self._switches += 1

    def statistics(self) -> BridgeStatistics:
        """A frozen snapshot of this bridge."""
        return BridgeStatistics(self.name, self.enabled, self._switches, self._failures)

    def __repr__(self) -> str:
        state = "enabled" if self.enabled else "disabled"
        return f"<Bridge {self.name!r} {state}, {self._switches} switches>"
