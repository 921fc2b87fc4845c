"""Fabric resources: what a region offers and what a hardware module needs, in the family's kinds.

A region is like a parking lot with several kinds of spaces; a module fits when it needs no
more of any kind than the lot has (Juggle Tables 1 and 2). Which kinds a lot has depends on the
device family, named as Yosys' ``synth_xilinx -family`` names it:

* 4-input-LUT families (``xc2vp`` Virtex-II Pro, ``xc4v`` Virtex-4, and the other older
  ones): ``slices``, ``flipflops``, ``mult18`` (18x18 multipliers or DSP48), ``ram16`` (16/18 Kb
  block RAMs) -- Juggle's own four.
* 6-input-LUT families (``xc7`` 7-series and Zynq-7000, ``xcup`` UltraScale+ and Zynq
  UltraScale+, and the other newer ones): ``lut``, ``ff``, ``dsp`` (DSP48E1/E2), ``bram``
  (36 Kb block RAM tiles, RAMB36: what AMD's utilization reports and data sheets count as
  "Block RAM"; two RAMB18 make one), and on ``xcup`` only ``uram`` (URAM288).

:class:`Resources` is a frozen value of one family's kinds. Values of the two *kind systems*
(slice-counted and LUT-counted) never compare: :meth:`Resources.fits_in` raises
:class:`~juggle.errors.ResourceError` naming both families and their kinds. Within a system
a kind one family lacks counts as 0 (a 7-series region has no URAM: a need of 1 ``uram`` falls
short there).

For code that reads the four old figures, a LUT-counted value still answers ``slices`` (an
estimate, ``ceil(lut / 8)`` on UltraScale+, ``ceil(lut / 4)`` on the other 6-LUT families, as
their slices hold 8 and 4 LUTs), ``flipflops`` (= ``ff``), ``mult18`` (= ``dsp``) and ``ram16``
(= 2 x ``bram``, in 18 Kb units); a slice-counted value answers 0 for the LUT kinds. Those are
views for display and allocation sizing; fitting always compares the family's own kinds.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterator, Mapping
from typing import Any

from juggle.errors import ResourceError

__all__ = [
    "FAMILY_NAMES",
    "LUT_KINDS",
    "SLICE_KINDS",
    "Resources",
    "kinds_of",
]

#: the kinds of the slice-counted (4-input-LUT) families
SLICE_KINDS: tuple[str, ...] = ("slices", "flipflops", "mult18", "ram16")
#: the kinds of the LUT-counted (6-input-LUT) families; ``uram`` exists on ``xcup`` only
LUT_KINDS: tuple[str, ...] = ("lut", "ff", "dsp", "bram", "uram")

_SLICE_FAMILIES = ("xcv", "xcve", "xc2v", "xc2vp", "xc3s", "xc3se", "xc3sa", "xc3sda", "xc4v")
_LUT_FAMILIES = ("xc5v", "xc6v", "xc6s", "xc7", "xcu", "xcup")
_URAM_FAMILIES = ("xcup",)
#: readable names, for messages
FAMILY_NAMES: Mapping[str, str] = {
    "xc2vp": "Virtex-II Pro",
    "xc4v": "Virtex-4",
    "xc7": "7-series",
    "xcu": "UltraScale",
    "xcup": "UltraScale+",
}
#: LUTs per slice of the LUT-counted families (for the ``slices`` estimate)
_LUTS_PER_SLICE = {"xcup": 8, "xcu": 8}


def kinds_of(family: str) -> tuple[str, ...]:
    """The resource kinds ``family`` is counted in. Raises :class:`ResourceError` for a family
    juggle does not know."""
    if family in _SLICE_FAMILIES:
        return SLICE_KINDS
    if family in _URAM_FAMILIES:
        return LUT_KINDS
    if family in _LUT_FAMILIES:
        return LUT_KINDS[:4]
    known = ", ".join(_SLICE_FAMILIES + _LUT_FAMILIES)
    raise ResourceError(f'"family" must be one of {known}, got {family!r}', value=family)


def _system(family: str) -> str:
    return "slice" if family in _SLICE_FAMILIES else "lut"


def _label(family: str) -> str:
    name = FAMILY_NAMES.get(family)
    return f"{family} ({name})" if name else family


class Resources:
    """Counts of one family's fabric resources: kind -> count, frozen.

    ``Resources(slices=.., flipflops=.., mult18=.., ram16=..)`` (or positionally, in that
    order) is an ``xc2vp`` value as before; ``Resources(lut=.., ff=.., dsp=.., bram=..,
    uram=..)`` an ``xcup`` value (``xc7`` when no ``uram`` is given); ``family=`` names the
    family explicitly. Kinds not given count 0.

    Raises :class:`~juggle.errors.ResourceError` for a negative or non-integer count, a kind
    the family does not count, or kinds of both systems at once.
    """

    __slots__ = ("_counts", "_family")

    _family: str
    _counts: tuple[int, ...]

    def __init__(self, *positional: int, family: str | None = None, **counts: int) -> None:
        if len(positional) > len(SLICE_KINDS):
            raise ResourceError(
                f"at most {len(SLICE_KINDS)} positional counts ({', '.join(SLICE_KINDS)}), "
                f"got {len(positional)}",
                value=len(positional),
            )
        for kind, value in zip(SLICE_KINDS, positional, strict=False):
            if kind in counts:
                raise ResourceError(f'"{kind}" given twice', value=kind)
            counts[kind] = value
        for kind in counts:
            if kind not in SLICE_KINDS and kind not in LUT_KINDS:
                raise ResourceError(
                    f"{kind!r} is no resource kind (kinds: {', '.join(SLICE_KINDS + LUT_KINDS)})",
                    value=kind,
                )
        if family is None:
            old = [k for k in counts if k in SLICE_KINDS]
            new = [k for k in counts if k in LUT_KINDS]
            if old and new:
                raise ResourceError(
                    f"resources mix the kinds of two families: {', '.join(old)} (slice-counted, "
                    f"e.g. Virtex-II Pro) and {', '.join(new)} (LUT-counted, e.g. UltraScale+)"
                )
            family = ("xcup" if "uram" in counts else "xc7") if new else "xc2vp"
        kinds = kinds_of(family)
        for kind in counts:
            if kind not in kinds:
                raise ResourceError(
                    f"{_label(family)} resources are counted in {', '.join(kinds)}: "
                    f"{kind!r} is not one of them",
                    value=kind,
                )
        for kind, value in counts.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ResourceError(
                    f'"{kind}" must be an integer >= 0, got {value!r}.', value=value
                )
        object.__setattr__(self, "_family", family)
        object.__setattr__(self, "_counts", tuple(int(counts.get(k, 0)) for k in kinds))

    @classmethod
    def of(cls, counts: Mapping[str, int], family: str | None = None) -> Resources:
        """The value of ``counts`` (kind -> count), as the constructor builds it."""
        return cls(family=family, **dict(counts))

    # -- the value ---------------------------------------------------------------------------

    @property
    def family(self) -> str:
        """The ``synth_xilinx`` family whose kinds these are (``xc2vp``, ``xcup``, ...)."""
        return self._family

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds this value counts, in order."""
        return kinds_of(self._family)

    def as_dict(self) -> dict[str, int]:
        """Kind -> count, every kind of the family."""
        return dict(zip(self.kinds, self._counts, strict=True))

    def items(self) -> Iterator[tuple[str, int]]:
        """(kind, count) pairs in the family's order."""
        return iter(zip(self.kinds, self._counts, strict=True))

    def __getitem__(self, kind: str) -> int:
        """The count of ``kind``; raises :class:`ResourceError` for a kind the family does not
        count."""
        kinds = self.kinds
        if kind not in kinds:
            raise ResourceError(
                f"{_label(self._family)} resources are counted in {', '.join(kinds)}: "
                f"{kind!r} is not one of them",
                value=kind,
            )
        return self._counts[kinds.index(kind)]

    def _get(self, kind: str) -> int:
        kinds = self.kinds
        return self._counts[kinds.index(kind)] if kind in kinds else 0

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Resources is frozen: cannot set {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Resources):
            return NotImplemented
        return (self._family, self._counts) == (other._family, other._counts)

    def __hash__(self) -> int:
        return hash((self._family, self._counts))

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={v}" for k, v in self.items())
        return f"Resources({counts}, family={self._family!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self._family, self.as_dict()))

    # -- the old four figures (and their LUT-counted views) ----------------------------------

    @property
    def slices(self) -> int:
        """Slices; on a LUT-counted family an estimate from its LUTs (module docstring)."""
        if self.kinds is SLICE_KINDS:
            return self._counts[0]
        return math.ceil(self._get("lut") / _LUTS_PER_SLICE.get(self._family, 4))

    @property
    def flipflops(self) -> int:
        """Flip-flops (``ff`` on a LUT-counted family)."""
        return self._get("flipflops") if self.kinds is SLICE_KINDS else self._get("ff")

    @property
    def mult18(self) -> int:
        """18x18 multipliers (``dsp`` on a LUT-counted family)."""
        return self._get("mult18") if self.kinds is SLICE_KINDS else self._get("dsp")

    @property
    def ram16(self) -> int:
        """16/18 Kb block RAMs (2 x ``bram`` on a LUT-counted family)."""
        return self._get("ram16") if self.kinds is SLICE_KINDS else 2 * self._get("bram")

    @property
    def lut(self) -> int:
        """LUTs (0 on a slice-counted family)."""
        return self._get("lut")

    @property
    def ff(self) -> int:
        """Flip-flops of a LUT-counted family (0 on a slice-counted one)."""
        return self._get("ff")

    @property
    def dsp(self) -> int:
        """DSP slices (0 on a slice-counted family)."""
        return self._get("dsp")

    @property
    def bram(self) -> int:
        """36 Kb block RAM tiles (0 on a slice-counted family)."""
        return self._get("bram")

    @property
    def uram(self) -> int:
        """URAM288 blocks (0 but on UltraScale+)."""
        return self._get("uram")

    # -- fitting -----------------------------------------------------------------------------

    def _compared_kinds(self, other: Resources) -> tuple[str, ...]:
        if not self.comparable_with(other):
            raise ResourceError(
                f"resources counted in {_label(self._family)} kinds ({', '.join(self.kinds)}) "
                f"cannot be compared with {_label(other._family)} kinds "
                f"({', '.join(other.kinds)}): declare the figures in the region's kinds"
            )
        mine = self.kinds
        return mine + tuple(k for k in other.kinds if k not in mine)

    def comparable_with(self, other: Resources) -> bool:
        """Whether these figures and ``other`` are counted in one kind system (slices, or
        LUTs): only then do :meth:`fits_in` and :meth:`shortfall` compare them."""
        return _system(self._family) == _system(other._family)

    def fits_in(self, other: Resources) -> bool:
        """Whether these needs fit into ``other``, kind by kind. Raises :class:`ResourceError`
        when the two are counted in different kind systems."""
        if self._family == other._family:  # the same kinds in the same order: count by count
            return all(map(operator.le, self._counts, other._counts))
        return all(self._get(k) <= other._get(k) for k in self._compared_kinds(other))

    def shortfall(self, other: Resources) -> dict[str, tuple[int, int]]:
        """Each kind these needs exceed in ``other``: kind -> (needed, available).

        Empty when the needs fit; raises :class:`ResourceError` as :meth:`fits_in` does.
        """
        short: dict[str, tuple[int, int]] = {}
        for kind in self._compared_kinds(other):
            need, have = self._get(kind), other._get(kind)
            if need > have:
                short[kind] = (need, have)
        return short

    def describe_shortfall(self, other: Resources) -> str:
        """The shortfall as text, e.g. ``"slices 3008 > 2240"`` (empty when it fits)."""
        return ", ".join(f"{k} {n} > {h}" for k, (n, h) in self.shortfall(other).items())


def _rebuild(family: str, counts: dict[str, int]) -> Resources:
    return Resources(family=family, **counts)
