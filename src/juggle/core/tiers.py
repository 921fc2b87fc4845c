"""The tiers a service's implementation serves from: the one vocabulary the decision core, the
runtime and the snapshots share."""

from __future__ import annotations

import enum

__all__ = ["Tier"]


class Tier(enum.StrEnum):
    """The tiers an implementation serves from, in the order snapshots list them. The values
    are what JSON and the command line print, and a tier compares equal to its value
    (``Tier.HARDWARE == "hardware"``). A proxy given back serves from the pseudo-tier
    ``"gone"`` (every call raises), which is no tier of a service."""

    SOFTWARE = "software"
    NATIVE = "native"
    HARDWARE = "hardware"
