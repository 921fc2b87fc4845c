"""A module's synthesis report: the resources ``juggle module build`` measured for its designs.

``juggle module build`` synthesizes each hardware design of a module folder and writes the
figures next to the descriptor as :data:`REPORT_FILE`. At install the runtime reads them back
(:func:`read_report`): for a design with RTL they are the design's resources, checked against
the region in place of the figures the descriptor or the register model declares
(:func:`pick_figures`). The report is untrusted module data: it is read within the
descriptor's size limit and any malformed part is a :class:`~juggle.errors.DescriptorError`
naming the file.
"""

from __future__ import annotations

import json

from juggle.errors import DescriptorError, ResourceError
from juggle.fabric.resources import Resources, kinds_of
from juggle.runtime.modules import ModuleSource

__all__ = ["REPORT_FILE", "pick_figures", "read_report"]

#: the synthesis report beside a module's descriptor
REPORT_FILE = "resources.json"


def read_report(source: ModuleSource) -> dict[str, Resources]:
    """Design → synthesized resources from the module's ``resources.json`` (empty without
    one). Raises :class:`~juggle.errors.DescriptorError` naming the file when it is
    malformed."""
    if not source.exists(REPORT_FILE):
        return {}
    shown = source.display(REPORT_FILE)
    try:
        document = json.loads(source.read_bytes(REPORT_FILE, "max_descriptor_bytes"))
        family = document.get("family")
        out = {}
        for design, entry in document["designs"].items():
            figures = {str(k): int(v) for k, v in dict(entry["resources"]).items()}
            if not figures:
                raise KeyError("resources")
            # the family the report was built for, when its figures are in that family's kinds
            # (a report of an older juggle holds slice kinds for every family)
            known = isinstance(family, str) and _counts_in(family, figures)
            out[str(design)] = Resources(family=family if known else None, **figures)
        return out
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, ResourceError) as exc:
        raise DescriptorError(
            f"{shown}: not a synthesis report of juggle module build ({type(exc).__name__}: {exc})",
            path=shown,
        ) from exc


def pick_figures(
    declared: Resources | None, synthesized: Resources | None, region: Resources
) -> tuple[Resources | None, str | None]:
    """The resource needs a design is checked and programmed with in a region of capacity
    ``region``, and where they come from: ``(synthesized, "synthesized")`` when the design has
    a synthesis report (pass None for a design without RTL) counted in the region's kind
    system, else ``(declared, "declared")``; ``(None, None)`` when there are neither."""
    if synthesized is not None and synthesized.comparable_with(region):
        return synthesized, "synthesized"
    return declared, "declared" if declared is not None else None


def _counts_in(family: str, figures: dict[str, int]) -> bool:
    """Whether every kind in ``figures`` is one of ``family``'s own resource kinds."""
    try:
        kinds = kinds_of(family)
    except ResourceError:
        return False
    return all(k in kinds for k in figures)
