"""How every ``juggle`` command reports a :class:`~juggle.errors.JuggleError`: one line on
stderr (``error: ...``), with ``--json`` also one JSON document ``{"error", "type"}`` on stdout,
and exit status 2."""

from __future__ import annotations

import json
import sys
from typing import NoReturn

import typer

from juggle.errors import JuggleError

__all__ = ["fail"]


def fail(exc: JuggleError, json_out: bool) -> NoReturn:
    """Report ``exc`` as described above and exit 2."""
    message = " ".join(str(exc).split())  # one line, whatever the terminal's width
    if json_out and not getattr(exc, "reported_as_json", False):
        sys.stdout.write(json.dumps({"error": message, "type": type(exc).__name__}) + "\n")
        sys.stdout.flush()
    sys.stderr.write(f"error: {message}\n")
    raise typer.Exit(2) from exc
