"""What every ``--plot`` shares: checking the target path, saving a figure, announcing the file,
and the transient progress bar of the long ``simulate`` commands.

Nothing here imports matplotlib at module level, so a command can refuse a bad ``--plot`` path
before it spends seconds computing what it would draw.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from juggle.errors import ConfigurationError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Progress", "announce", "check_png", "progress_bar", "save_png"]

Progress = Callable[[str, int, int], None]
"""A progress callback: ``(what is being done, steps done, steps in all)``."""


def check_png(path: Path) -> Path:
    """Return ``path`` if a PNG can be written there.

    Raises :class:`~juggle.errors.ConfigurationError` naming the path when it does not end in
    .png, names a folder, or its folder does not exist or is not a folder.
    """
    if path.suffix.lower() != ".png":
        raise ConfigurationError(f'"--plot" must name a .png file, got {str(path)!r}', path)
    if path.is_dir():
        raise ConfigurationError(f'"--plot" {str(path)!r} is a folder, not a file', path)
    folder = path.parent
    if not folder.exists():
        raise ConfigurationError(
            f'folder {str(folder)!r} of "--plot" {str(path)!r} does not exist', path
        )
    if not folder.is_dir():
        raise ConfigurationError(f'{str(folder)!r} of "--plot" {str(path)!r} is not a folder', path)
    return path


def save_png(fig: Figure, path: Path, *, dpi: int = 120) -> Path:
    """Check ``path``, write ``fig`` there as a PNG and close the figure.

    Raises :class:`~juggle.errors.ConfigurationError` naming the path when it is refused by
    :func:`check_png` or the file cannot be written (no permission, read-only folder).
    """
    import matplotlib.pyplot as plt

    try:
        check_png(path)
        fig.savefig(path, dpi=dpi, format="png")
    except OSError as exc:
        raise ConfigurationError(
            f'cannot write "--plot" {str(path)!r}: {exc.strerror or exc}', path
        ) from exc
    finally:
        plt.close(fig)
    return path


def announce(paths: list[Path], doc: dict[str, Any] | None, *, json_out: bool) -> None:
    """Say which files were written: under ``files`` in ``doc`` when the command prints JSON,
    else one ``wrote PATH`` line each on stderr."""
    if not paths:
        return
    if json_out:
        if doc is not None:
            doc["files"] = [str(p) for p in paths]
        return
    for path in paths:
        sys.stderr.write(f"wrote {path}\n")
    sys.stderr.flush()


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
