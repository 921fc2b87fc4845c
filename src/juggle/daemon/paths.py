"""Where the daemon listens by default."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_socket_path"]


def default_socket_path() -> Path:
    """``$JUGGLE_SOCKET``, else ``$XDG_RUNTIME_DIR/juggle/juggle.sock``, else
    ``/run/juggle/juggle.sock``."""
    explicit = os.environ.get("JUGGLE_SOCKET")
    if explicit:
        return Path(explicit)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "juggle" / "juggle.sock"
    return Path("/run/juggle/juggle.sock")
