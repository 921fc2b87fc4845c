"""Which scenarios ``juggle simulate`` offers: each area registers its own commands."""

from __future__ import annotations

from collections.abc import Callable

import typer

__all__ = ["Register", "register_all", "scenarios"]

Register = Callable[[typer.Typer], None]


def scenarios() -> list[Register]:
    """The ``register(simulate_app)`` functions of every scenario area."""
    from juggle.commands.simulate.cluster import register as cluster
    from juggle.commands.simulate.ofdm import register as ofdm
    from juggle.commands.simulate.oscall import register as oscall
    from juggle.commands.simulate.router import register as router
    from juggle.commands.simulate.sort import register as sort
    from juggle.commands.simulate.tdes import register as tdes
    from juggle.commands.simulate.thumbpod import register as thumbpod

    return [router, tdes, ofdm, sort, thumbpod, oscall, cluster]


def register_all(simulate_app: typer.Typer) -> None:
    """Add every scenario command to ``simulate_app``."""
    for register in scenarios():
        register(simulate_app)
