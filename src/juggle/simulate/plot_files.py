"""What every ``--plot`` shares: checking the target path and saving a figure.

Nothing here imports matplotlib at module level, so a command can refuse a bad ``--plot`` path
before it spends seconds computing what it would draw.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from juggle.errors import ConfigurationError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["check_png", "save_png"]


def check_png(path: Path) -> Path:
    """Return ``path`` if a PNG can be written there.

    Raises :class:`~juggle.errors.ConfigurationError` naming the path when it does not end in
    .png, names a folder, or its folder does not exist or is not a folder.
    """
    if path.suffix.lower() != ".png":
        raise ConfigurationError(
            f'"--plot" must name a .png file, got {str(path)!r}', path=str(path)
        )
    if path.is_dir():
        raise ConfigurationError(f'"--plot" {str(path)!r} is a folder, not a file', path=str(path))
    folder = path.parent
    if not folder.exists():
        raise ConfigurationError(
            f'folder {str(folder)!r} of "--plot" {str(path)!r} does not exist', path=str(path)
        )
    if not folder.is_dir():
        raise ConfigurationError(
            f'{str(folder)!r} of "--plot" {str(path)!r} is not a folder', path=str(path)
        )
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
            f'cannot write "--plot" {str(path)!r}: {exc.strerror or exc}', path=str(path)
        ) from exc
    finally:
        plt.close(fig)
    return path
