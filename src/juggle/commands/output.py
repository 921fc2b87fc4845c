"""What every ``juggle`` command prints, and how: one JSON document on stdout with ``--json``,
errors as one line on stderr, the files a command wrote named once.

A :class:`~juggle.errors.JuggleError` is reported by :func:`fail`: one line on stderr
(``error: ...``), with ``--json`` also one JSON document ``{"error", "type"}`` on stdout, and
exit status 2. A usage error of the command line (typer's ``UsageError``: an unknown option, a
bad value; a :class:`CommandLineError`) is reported by :func:`fail_usage` the same way with
``--json``; without it, as typer shows it (usage, hint and the message in a box, on stderr).

An error raised by the library names its arguments as the API does (``"round_ms" must be
> 0``); run from the command line, :func:`fail` and :func:`fail_usage` name them as the user
typed them (``--round-ms must be > 0``): :func:`speak_flags` tells them the running command's
options (the console script's :func:`~juggle.commands.cli.main` does).

Tables and text go through :func:`console`: piped, its lines are wide enough that a table is
not cut, and every table it prints folds a long cell onto the next line instead of cutting it
with ``…``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from juggle.errors import JuggleError

__all__ = [
    "PIPED_WIDTH",
    "CommandLineError",
    "FoldingConsole",
    "JsonOpt",
    "announce",
    "console",
    "emit_json",
    "fail",
    "fail_usage",
    "speak_flags",
]

PIPED_WIDTH = 200
"""Columns of a command's output when it goes to a file or a pipe and ``$COLUMNS`` is not
set (rich would take 80 and cut the wider tables)."""

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
"""The ``--json`` option every command takes."""


class FoldingConsole(Console):
    """A rich console whose tables never cut a cell: before a :class:`~rich.table.Table` is
    printed, each of its columns wraps (``no_wrap`` off) and folds a word longer than the
    column onto the next line (``overflow="fold"``) instead of ending it with ``…``."""

    def print(self, *objects: Any, **options: Any) -> None:
        """Print ``objects`` as :meth:`rich.console.Console.print` does, tables folded."""
        for item in objects:
            if isinstance(item, Table):
                fold(item)
        super().print(*objects, **options)


def fold(table: Table) -> Table:
    """Make every column of ``table`` wrap and fold (see :class:`FoldingConsole`); returns it."""
    for column in table.columns:
        column.no_wrap = False
        column.overflow = "fold"
    return table


def console(*, stderr: bool = False, highlight: bool = True) -> FoldingConsole:
    """The console a command prints its text and tables with (stdout, or stderr): on a
    terminal as wide as the terminal; piped, ``$COLUMNS`` wide, else :data:`PIPED_WIDTH`."""
    stream = sys.stderr if stderr else sys.stdout
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):
        terminal = False
    width: int | None = None
    if not terminal:
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH
    return FoldingConsole(stderr=stderr, width=width, highlight=highlight)


def emit_json(document: Any) -> None:
    """Print ``document`` as JSON on stdout (values JSON does not know as their ``str()``)."""
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=False, default=str) + "\n")


_FLAGS: dict[str, str] = {}
"""The running command's options: API argument name -> the flag typed (``round_ms`` ->
``--round-ms``); set by :func:`speak_flags`."""


def speak_flags(flags: Mapping[str, str]) -> None:
    """Name the running command's options in its error messages: ``"NAME"`` (an argument
    name in double quotes, as juggle's errors write them) becomes the flag, for each
    ``NAME -> flag`` of ``flags`` (replacing what an earlier call gave)."""
    _FLAGS.clear()
    _FLAGS.update(flags)


def _as_typed(message: str) -> str:
    """``message`` on one line, its quoted argument names replaced by their flags."""
    message = " ".join(message.split())  # one line, whatever the terminal's width
    if not _FLAGS:
        return message
    pattern = "|".join(re.escape(name) for name in sorted(_FLAGS, key=len, reverse=True))
    return re.sub(rf'"({pattern})"', lambda m: _FLAGS[m[1]], message)


def fail(exc: JuggleError, json_out: bool) -> NoReturn:
    """Report ``exc`` as described above and exit 2."""
    message = _as_typed(str(exc))
    if json_out and not getattr(exc, "reported_as_json", False):
        sys.stdout.write(json.dumps({"error": message, "type": type(exc).__name__}) + "\n")
        sys.stdout.flush()
    sys.stderr.write(f"error: {message}\n")
    raise typer.Exit(2) from exc


class CommandLineError(typer.TyperException):
    """A usage error found outside typer's parser (e.g. by a command's own ``argparse``
    parser): reported as typer's usage errors are, exit status 2."""

    exit_code = 2


def fail_usage(exc: typer.TyperException, json_out: bool) -> NoReturn:
    """Report a command-line error of typer (a usage error: exit status 2) and exit.

    With ``json_out``: one JSON document ``{"error", "type": "UsageError", "command"}`` on
    stdout (``command``: the command path, e.g. ``juggle simulate sort``) and ``error: ...``
    on stderr. Without: typer's usage box on stderr (a missing subcommand prints the help).
    """
    if json_out:
        message = _as_typed(exc.format_message())
        kind = "UsageError" if exc.exit_code == 2 else type(exc).__name__
        doc: dict[str, Any] = {"error": message, "type": kind}
        ctx = getattr(exc, "ctx", None)
        if ctx is not None:
            doc["command"] = ctx.command_path
        sys.stdout.write(json.dumps(doc) + "\n")
        sys.stdout.flush()
        sys.stderr.write(f"error: {message}\n")
    elif type(exc).__name__ == "NoArgsIsHelpError":
        exc.show()  # type: ignore[attr-defined]  # the command's help
    else:
        from typer import rich_utils

        rich_utils.rich_format_error(exc)  # type: ignore[arg-type]
    raise typer.Exit(exc.exit_code) from exc


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
