"""Fabric resources: what a region offers and what a hardware module needs.

A region is like a parking lot with four kinds of spaces (slices, flip-flops, 18x18
multipliers, 16 Kbit block RAMs); a module fits when it needs no more of any kind than the lot
has (Juggle Tables 1 and 2).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from juggle.errors import ResourceError

__all__ = ["Resources"]


@dataclass(frozen=True, slots=True)
class Resources:
    """Counts of the four fabric resources juggle accounts for.

    Raises :class:`~juggle.errors.ResourceError` when built with a negative count.
    """

    slices: int = 0
    flipflops: int = 0
    mult18: int = 0
    ram16: int = 0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ResourceError(f'"{f.name}" must be an integer >= 0, got {value!r}.', value)

    def fits_in(self, other: Resources) -> bool:
        """Whether these needs fit into ``other`` (each count <= the other's)."""
        return (
            self.slices <= other.slices
            and self.flipflops <= other.flipflops
            and self.mult18 <= other.mult18
            and self.ram16 <= other.ram16
        )

    def shortfall(self, other: Resources) -> dict[str, tuple[int, int]]:
        """Each resource these needs exceed in ``other``: name -> (needed, available).

        Empty when the needs fit.
        """
        short: dict[str, tuple[int, int]] = {}
        for f in fields(self):
            need, have = getattr(self, f.name), getattr(other, f.name)
            if need > have:
                short[f.name] = (need, have)
        return short

    def describe_shortfall(self, other: Resources) -> str:
        """The shortfall as text, e.g. ``"slices 3008 > 2240"`` (empty when it fits)."""
        return ", ".join(f"{k} {n} > {h}" for k, (n, h) in self.shortfall(other).items())
