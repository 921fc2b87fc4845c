"""What every ``juggle`` command prints, and how: one JSON document on stdout with ``--json``,
errors as one line on stderr, the files a command wrote named once.

A :class:`~juggle.errors.JuggleError` is reported by :func:`fail`: one line on stderr
(``error: ...``), with ``--json`` also one JSON document ``{"error", "type"}`` on stdout, and
exit status 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from juggle.errors import JuggleError

__all__ = ["JsonOpt", "announce", "emit_json", "fail"]

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
"""The ``--json`` option every command takes."""


def emit_json(document: Any) -> None:
    """Print ``document`` as JSON on stdout (values JSON does not know as their ``str()``)."""
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=False, default=str) + "\n")


def fail(exc: JuggleError, json_out: bool) -> NoReturn:
    """Report ``exc`` as described above and exit 2."""
    message = " ".join(str(exc).split())  # one line, whatever the terminal's width
    if json_out and not getattr(exc, "reported_as_json", False):
        sys.stdout.write(json.dumps({"error": message, "type": type(exc).__name__}) + "\n")
        sys.stdout.flush()
    sys.stderr.write(f"error: {message}\n")
    raise typer.Exit(2) from exc


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
