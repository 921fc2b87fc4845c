"""Which scenarios ``juggle simulate`` offers: each area registers its own commands."""

from __future__ import annotations

from collections.abc import Callable

import typer

Register = Callable[[typer.Typer], None]


def scenarios() -> list[Register]:
    """The ``register(simulate_app)`` functions of every scenario area."""
    from juggle.bench.oscall import register as oscall
    from juggle.hwthreads.cli_sort import register as sort
    from juggle.simulate.cli_router import register as router
    from juggle.simulate.ofdm_cli import register as ofdm
    from juggle.simulate.thumbpod import register as thumbpod

    return [router, ofdm, sort, thumbpod, oscall]


def register_all(simulate_app: typer.Typer) -> None:
    """Add every scenario command to ``simulate_app``."""
    for register in scenarios():
        register(simulate_app)
