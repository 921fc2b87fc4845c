"""One row of a paper comparison: the paper's value, ours, the error, the label, and which of
our parameters were fitted to which of the paper's numbers.

Every ``juggle simulate`` document that sets a figure beside the paper's carries a
``paper_comparison`` list of these rows. The label follows from how the figure is produced:
an echoed value is *input*; a figure computed from a parameter fitted to a paper number is
*calibrated* (the row's ``fitted`` names the parameters and what they were fitted to); only a
figure with no fitted parameter in it is *modeled*, a prediction. ``of`` is the figure's path
in the document, so a reader (and the label walk of the tests) finds the same figure's label
there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from juggle.errors import ConfigurationError

__all__ = ["Fit", "comparison"]

_KINDS = ("modeled", "calibrated", "input")


@dataclass(frozen=True, slots=True)
class Fit:
    """A parameter of ours and the paper numbers it was fitted to."""

    parameter: str
    fitted_to: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """``{"parameter": ..., "fitted_to": [...]}``."""
        return {"parameter": self.parameter, "fitted_to": list(self.fitted_to)}


def comparison(
    figure: str,
    of: str,
    paper: float,
    ours: float,
    label: str,
    *,
    unit: str,
    fitted: Sequence[Fit] = (),
    echoed: bool = False,
    note: str = "",
) -> dict[str, Any]:
    """One ``paper_comparison`` row: ``figure`` names the paper's figure, ``of`` the path of
    ours in the document; ``error_pct`` is ``100 x (ours - paper) / paper`` (rounded to 0.01),
    labeled like ``ours``; the paper's value is *input*.

    Raises :class:`~juggle.errors.ConfigurationError` for a label that is not modeled,
    calibrated or input, or a paper value of zero (no error against it).
    """
    if label not in _KINDS:
        raise ConfigurationError(f"label must be one of {list(_KINDS)}, got {label!r}", value=label)
    if paper == 0:
        raise ConfigurationError(f"paper value of {figure!r} is 0: no error against it", value=0)
    row: dict[str, Any] = {
        "figure": figure,
        "of": of,
        "unit": unit,
        "paper": paper,
        "ours": ours,
        "error_pct": round(100.0 * (ours - paper) / paper, 2),
        "label": label,
        "echoed": echoed,
        "fitted": [fit.to_json() for fit in fitted],
        "labels": {"paper": "input", "ours": label, "error_pct": label},
    }
    if note:
        row["note"] = note
    return row
