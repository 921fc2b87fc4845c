"""Progress of long computations: the callback they report through.

A computation that takes a while (a benchmark suite, a synthesis, a long simulation) takes an
optional :data:`Progress` and calls it as it goes, like a runner calling out lap times; it
never draws anything itself. The command line hands it a progress bar
(:func:`juggle.commands.progressbar.progress_bar`); a script passes None or its own callback.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Progress"]

Progress = Callable[[str, int, int], None]
"""A progress callback: ``(what is being done, steps done, steps in all)``."""
