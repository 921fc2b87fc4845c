"""The progress bar of long commands: a transient rich bar on stderr, silent for scripts.

Computations take a :data:`~juggle.progress.Progress` callback and call it as they go; the
command wraps them in :func:`progress_bar`, which hands them a callback (or ``None`` with
``--json``/``--quiet``, or when stderr is no terminal), so stdout stays the command's output
alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from juggle.progress import Progress

__all__ = ["progress_bar"]


@contextmanager
def progress_bar(label: str, *, silent: bool) -> Iterator[Progress | None]:
    """A transient rich progress bar on stderr; yields the callback to hand to the
    computation, or None when ``silent`` (``--json`` or ``--quiet``) or stderr is no terminal
    (rich's ``TTY_COMPATIBLE=1`` says it is one)."""
    from rich.console import Console

    console = Console(stderr=True)
    if silent or not console.is_terminal:
        yield None
        return
    from rich.progress import Progress as Bar

    with Bar(console=console, transient=True, refresh_per_second=5) as bar:
        task = bar.add_task(label, total=None)

        def step(what: str, done: int, total: int) -> None:
            bar.update(task, total=total, completed=done, description=f"{label}: {what}")

        yield step
