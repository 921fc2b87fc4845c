"""An interactive shell over one Framework: the Concierge shell of the Juggle prototype.

Like an OSGi console, each line is one command acting on a live :class:`Framework`: install and
start modules, list services and regions, juggle services in and out of the fabric, read
statistics, set the focus and the controller. A command that fails prints ``error: <message>``
and the shell goes on; fed a script on a non-terminal stdin, it prints no prompt (so
``juggle shell < script`` gives clean output) and its exit status is 1 when a command failed.
With ``--json`` each command is answered with one JSON line whose tables are data: rows of
values keyed by column, labeled (``{"command", "ok", "output", "tables", "reports"}``).
A juggle's reconfiguration time is labeled *calibrated* (the configuration port's rate is
fitted to the paper's times) and its bridge time *input* (the profile's); call durations and
the runtime's own overhead are *measured*.
"""

from __future__ import annotations

import cmd
import io
import json
import logging
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table

from juggle.commands.output import PIPED_WIDTH, FoldingConsole
from juggle.core.controllers import Controller, available_controllers, load_controller
from juggle.errors import JuggleError
from juggle.runtime.framework import Framework
from juggle.runtime.modules import Module
from juggle.runtime.snapshots import JuggleReport
from juggle.runtime.tracing import CallStats
from juggle.workload import Workload

__all__ = ["JuggleShell", "run_shell"]

_COMMAND_ORDER = (
    "install",
    "start",
    "stop",
    "update",
    "uninstall",
    "modules",
    "services",
    "regions",
    "juggle",
    "evict",
    "tier",
    "stats",
    "focus",
    "controller",
    "control",
    "help",
    "quit",
)

log = logging.getLogger("juggle.commands.shell")


class _UsageError(Exception):
    """A command got arguments it cannot use; the message names the bad value."""


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _split(arg: str) -> list[str]:
    """Shell-style words of ``arg`` (quotes group words with spaces)."""
    try:
        return shlex.split(arg)
    except ValueError as exc:
        raise _UsageError(f"cannot parse arguments {arg!r}: {exc}") from None


def _exactly(arg: str, count: int, usage: str) -> list[str]:
    words = _split(arg)
    if len(words) != count:
        raise _UsageError(f"expected {count} argument(s), got {len(words)} (usage: {usage})")
    return words


def _service_id(word: str) -> int:
    try:
        return int(word, 10)
    except ValueError:
        raise _UsageError(f"service id must be an integer, got {word!r}") from None


def _text(value: object) -> str:
    return "-" if value is None or value == () else str(value)


def _us(value: float) -> str:
    return f"{value:,.1f}"


def _list(values: Any) -> str:
    return ", ".join(str(v) for v in values) or "-"


@dataclass(frozen=True)
class _Column:
    """A column of a shell table: the row key, its header, how a value is shown."""

    key: str
    header: str
    right: bool = False
    show: Callable[[Any], str] = _text
    no_wrap: bool = False


_ID = "input"
"""Ids (service, module) and board figures: given, not measured (as ``juggle profile``)."""


class JuggleShell(cmd.Cmd):
    """The command interpreter; one instance drives one :class:`Framework` it does not own.

    ``stdin`` / ``stdout`` default to the process's streams. When ``stdin`` is not a terminal
    the shell prints no prompt and no banner. ``failures`` counts the commands that failed.
    """

    def __init__(
        self,
        framework: Framework,
        *,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        json_lines: bool = False,
    ) -> None:
        stdin = stdin if stdin is not None else sys.stdin
        stdout = stdout if stdout is not None else sys.stdout
        super().__init__(stdin=stdin, stdout=stdout)
        #: answer each command with one JSON line (``{"command", "ok", "output"}`` or
        #: ``{"command", "ok": false, "error", "type"}``) instead of text
        self.json_lines = json_lines
        self._out = stdout
        self._error: tuple[str, str] | None = None
        #: with ``json_lines``: the tables and juggle reports of the command being run
        self._data: dict[str, list[dict[str, Any]]] = {}
        self.framework = framework
        self.interactive = _isatty(stdin)
        self.use_rawinput = self.interactive and stdin is sys.stdin
        self.prompt = "juggle> " if self.interactive else ""
        terminal = _isatty(stdout)
        self.console: Console = FoldingConsole(
            file=stdout,
            width=None if terminal else PIPED_WIDTH,
            color_system="auto" if terminal else None,
            highlight=False,
            emoji=False,
        )
        self.failures = 0
        self.workload = Workload(framework)

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> None:
        """Read and run commands until ``quit`` or end of input.

        Ctrl-C at an interactive prompt abandons the line and goes on; on a script it stops.
        """
        intro: str | None = None
        if self.interactive:
            board = self.framework.fabric.profile.board.name
            intro = f"juggle shell on {board}; type 'help' for the commands, 'quit' to leave"
        while True:
            try:
                self.cmdloop(intro)
                return
            except KeyboardInterrupt:
                if not self.interactive:
                    raise
                self.console.print("^C")
                intro = None

    def onecmd(self, line: str) -> bool:
        """Run one line; a :class:`JuggleError` or a usage error is printed, not raised."""
        if not self.json_lines or not line.strip():
            return self._run_line(line)
        console, buffer = self.console, io.StringIO()
        self.console = Console(file=buffer, width=120, color_system=None, highlight=False)
        self._error = None
        self._data = {}
        try:
            stop = self._run_line(line)
        finally:
            self.console = console
        doc: dict[str, object] = {"command": line.strip(), "ok": self._error is None}
        if self._error is not None:
            doc["error"], doc["type"] = self._error
        else:
            doc["output"] = buffer.getvalue().splitlines()
            doc.update(self._data)
        self._out.write(json.dumps(doc) + "\n")
        self._out.flush()
        return stop

    def _run_line(self, line: str) -> bool:
        try:
            return bool(super().onecmd(line))
        except (_UsageError, JuggleError) as exc:
            self._fail(str(exc), type(exc).__name__.lstrip("_"))
            return False
        except Exception as exc:  # a bug of ours: say so in one line and keep the session
            log.exception("shell command %r failed", line)
            self._fail(f"internal error ({type(exc).__name__}): {exc}", "InternalError")
            return False

    def precmd(self, line: str) -> str:
        """Drop comments (lines starting with ``#``) so scripts may carry them."""
        return "" if line.lstrip().startswith("#") else line

    def emptyline(self) -> bool:
        """An empty line does nothing (``cmd`` would repeat the last command)."""
        return False

    def default(self, line: str) -> None:
        """An unknown command: say so, naming it."""
        name = line.split(maxsplit=1)[0] if line.split() else line
        raise _UsageError(f"unknown command {name!r}; type 'help' for the commands")

    def _fail(self, message: str, kind: str = "UsageError") -> None:
        self.failures += 1
        if self.json_lines:
            self._error = (message, kind)
            return
        self.console.print(f"error: {message}", markup=False, soft_wrap=True)

    def _say(self, message: str) -> None:
        self.console.print(message, markup=False, soft_wrap=True)

    # -- modules -----------------------------------------------------------------------------

    def _module(self, word: str) -> Module:
        key: int | str = int(word) if word.isascii() and word.isdigit() else word
        return self.framework.module(key)

    def do_install(self, arg: str) -> None:
        """install PATH: install the module at PATH (folder, .zip, juggle.toml or co-module XML)."""
        (path,) = _exactly(arg, 1, "install PATH")
        module = self.framework.install(path)
        self._say(
            f"installed module {module.module_id}: {module.name} {module.version} "
            f"({module.source.location})"
        )

    def do_start(self, arg: str) -> None:
        """start ID: start module ID (id or name); its services get registered."""
        (word,) = _exactly(arg, 1, "start ID")
        module = self._module(word)
        module.start()
        ids = ", ".join(str(i) for i in module.service_ids) or "none"
        label = "service id" if len(module.service_ids) == 1 else "service ids"
        self._say(f"started module {module.module_id} ({module.name}); {label}: {ids}")

    def do_stop(self, arg: str) -> None:
        """stop ID: stop module ID; its services are unregistered."""
        (word,) = _exactly(arg, 1, "stop ID")
        module = self._module(word)
        module.stop()
        self._say(f"stopped module {module.module_id} ({module.name})")

    def do_update(self, arg: str) -> None:
        """update ID [PATH]: replace module ID's code (from PATH or where it came from)."""
        words = _split(arg)
        if len(words) not in (1, 2):
            raise _UsageError(
                f"expected 1 or 2 arguments, got {len(words)} (usage: update ID [PATH])"
            )
        module = self._module(words[0])
        module.update(words[1] if len(words) == 2 else None)
        self._say(f"updated module {module.module_id} ({module.name} {module.version})")

    def do_uninstall(self, arg: str) -> None:
        """uninstall ID: stop module ID if active, then unload its code."""
        (word,) = _exactly(arg, 1, "uninstall ID")
        module = self._module(word)
        module.uninstall()
        self._say(f"uninstalled module {module.module_id} ({module.name})")

    def do_modules(self, arg: str) -> None:
        """modules: list the installed modules."""
        _exactly(arg, 0, "modules")
        columns = [
            _Column("id", "id", right=True),
            _Column("name", "name"),
            _Column("version", "version"),
            _Column("state", "state"),
            _Column("services", "services", show=_list),
            _Column("location", "location"),
        ]
        rows = [
            {
                "id": m.module_id,
                "name": m.name,
                "version": m.version,
                "state": m.state,
                "services": list(m.services),
                "location": m.location,
            }
            for m in self.framework.modules()
        ]
        labels = {"id": _ID, "services": _ID}
        self._table("modules", columns, rows, labels, "no modules installed")

    # -- services and regions ----------------------------------------------------------------

    def do_services(self, arg: str) -> None:
        """services: list the registered services, their tiers and where they run."""
        _exactly(arg, 0, "services")
        columns = [
            _Column("id", "id", right=True, no_wrap=True),
            _Column("interface", "interface", no_wrap=True),
            _Column("tier", "tier", no_wrap=True),
            _Column("tiers", "tiers", show=_list, no_wrap=True),
            _Column("region", "region", no_wrap=True),
            _Column("module", "module", no_wrap=True),
            _Column("consumers", "consumers", show=_list),
            _Column("properties", "properties", show=_properties),
        ]
        rows = [
            {
                "id": s.service_id,
                "interface": s.interface,
                "tier": s.tier,
                "tiers": list(s.tiers),
                "region": s.region,
                "module": s.module,
                "consumers": list(s.consumers),
                "properties": dict(s.properties),
            }
            for s in self.framework.services()
        ]
        labels = {"id": _ID, "properties": "input"}  # properties: the module's descriptor
        self._table("services", columns, rows, labels, "no services registered")

    def do_regions(self, arg: str) -> None:
        """regions: list the fabric's regions, their state and what they hold."""
        _exactly(arg, 0, "regions")
        columns = [
            _Column(key, key) for key in ("region", "state", "design", "service", "module")
        ] + [_Column(key, key, right=True) for key in ("slices", "flipflops", "mult18", "ram16")]
        rows = [
            {
                "region": r.name,
                "state": r.state,
                "design": r.design,
                "service": r.service_id,
                "module": r.module,
                "slices": r.resources.slices,
                "flipflops": r.resources.flipflops,
                "mult18": r.resources.mult18,
                "ram16": r.resources.ram16,
            }
            for r in self.framework.regions()
        ]
        labels = {key: _ID for key in ("service", "slices", "flipflops", "mult18", "ram16")}
        title = f"regions of {self.framework.fabric.profile.board.name}"
        self._table(title, columns, rows, labels, "the fabric has no regions")

    def _table(
        self,
        title: str | None,
        columns: list[_Column],
        rows: list[dict[str, Any]],
        labels: dict[str, str],
        empty: str | None = None,
    ) -> None:
        """Show ``rows`` (values keyed by column): as a table, or with ``json_lines`` as data
        under ``tables`` (``{"title", "rows", "labels"}``; the kind of each numeric column in
        ``labels["rows"]``, the rule of every ``--json`` document). No rows: the ``empty``
        line instead of a table (in JSON too)."""
        if self.json_lines:
            entry: dict[str, Any] = {"title": title, "rows": rows}
            if labels:
                entry["labels"] = {"rows": labels}
            self._data.setdefault("tables", []).append(entry)
            if not rows and empty is not None:
                self._say(empty)
            return
        if not rows and empty is not None:
            self._say(empty)
            return
        table = Table(title=title)
        for column in columns:
            table.add_column(
                column.header, justify="right" if column.right else "left", no_wrap=column.no_wrap
            )
        for row in rows:
            table.add_row(*(column.show(row[column.key]) for column in columns))
        self.console.print(table)

    # -- juggling ----------------------------------------------------------------------------

    def do_juggle(self, arg: str) -> None:
        """juggle ID [--out ID ...]: put service ID in hardware, taking the --out ones out."""
        usage = "juggle ID [--out ID ...]"
        words = _split(arg)
        if not words or words[0] == "--out":
            raise _UsageError(f"missing the service to put in hardware (usage: {usage})")
        entering = _service_id(words[0])
        leaving: list[int] = []
        seen_out = False
        for word in words[1:]:
            if word == "--out":
                seen_out = True
            elif seen_out:
                leaving.append(_service_id(word))
            else:
                raise _UsageError(f"unexpected argument {word!r} (usage: {usage})")
        if seen_out and not leaving:
            raise _UsageError(f"--out needs at least one service id (usage: {usage})")
        self._report(self.framework.juggle(to_hardware=entering, to_software=leaving))

    def do_evict(self, arg: str) -> None:
        """evict ID [ID ...]: take services out of the fabric, back to their home tier."""
        words = _split(arg)
        if not words:
            raise _UsageError("missing the service(s) to evict (usage: evict ID [ID ...])")
        ids = [_service_id(w) for w in words]
        self._report(self.framework.juggle(to_hardware=None, to_software=ids))

    def do_tier(self, arg: str) -> None:
        """tier ID TIER: serve service ID from TIER (software, native or hardware)."""
        word, tier = _exactly(arg, 2, "tier ID TIER")
        self._report(self.framework.set_tier(_service_id(word), tier))

    def _report(self, report: JuggleReport) -> None:
        moved = ", ".join(f"service {sid} → {tier}" for sid, tier in sorted(report.tiers.items()))
        where = f" (region {report.region})" if report.region else ""
        self._say(f"juggled: {moved or 'nothing changed'}{where}")
        if self.json_lines:
            self._say(
                f"reconfiguration {report.reconfiguration_ms:.3f} ms (calibrated), bridge "
                f"switching {report.bridge_ms:.3f} ms (input), runtime overhead "
                f"{_us(report.overhead_us)} µs (measured)"
            )
            for step in report.steps:
                self._say(f"  - {step}")
            self._data.setdefault("reports", []).append(
                {
                    "tiers": {str(sid): tier for sid, tier in sorted(report.tiers.items())},
                    "region": report.region,
                    "reconfiguration_ms": report.reconfiguration_ms,
                    "bridge_ms": report.bridge_ms,
                    "overhead_us": report.overhead_us,
                    "steps": list(report.steps),
                    "labels": {
                        "reconfiguration_ms": "calibrated",
                        "bridge_ms": "input",
                        "overhead_us": "measured",
                    },
                }
            )
            return
        table = Table(show_header=True)
        table.add_column("figure")
        table.add_column("value", justify="right")
        table.add_column("kind")
        table.add_row("reconfiguration", f"{report.reconfiguration_ms:.3f} ms", "calibrated")
        table.add_row("bridge switching", f"{report.bridge_ms:.3f} ms", "input")
        table.add_row("runtime overhead", f"{_us(report.overhead_us)} µs", "measured")
        self.console.print(table)
        for step in report.steps:
            self._say(f"  - {step}")

    # -- statistics --------------------------------------------------------------------------

    def do_stats(self, arg: str) -> None:
        """stats ID: measured call statistics of service ID (per tier, consumer and method)."""
        (word,) = _exactly(arg, 1, "stats ID")
        st = self.framework.statistics(_service_id(word))
        self._say(
            f"service {st.service_id} ({st.interface}) on {st.tier}: {st.total.calls} calls, "
            f"{st.rate_per_s:,.1f} calls/s, {st.inflight} in flight (measured)"
        )
        rows = [_stat_row("total", st.total)]
        for group, scopes in (
            ("tier", st.per_tier),
            ("consumer", st.per_consumer),
            ("method", st.per_method),
        ):
            rows += [_stat_row(f"{group} {name}", stats) for name, stats in scopes.items()]
        columns = [_Column("scope", "scope")]
        columns += [_Column(key, key, right=True, show=str) for key in ("calls", "errors", "timed")]
        columns += [
            _Column(f"{key}_us", f"{key} µs", right=True, show=_us)
            for key in ("mean", "p50", "p99", "max")
        ]
        labels = {column.key: "measured" for column in columns[1:]}
        self._table("call durations, measured (wall clock of this machine)", columns, rows, labels)

    # -- policy ------------------------------------------------------------------------------

    def do_workload(self, arg: str) -> None:
        """workload [on | off]: background calls to the started services (mail encrypts,
        music decodes, calc adds) so stats, focus and controllers have work to see."""
        words = _split(arg)
        if len(words) > 1 or (words and words[0] not in ("on", "off")):
            raise _UsageError("usage: workload [on | off]")
        if words and words[0] == "on":
            started = self.workload.start()
            if not started:
                raise _UsageError(
                    "no started service the workload knows (EncryptionService, "
                    "DecoderService, AddService): install and start one first"
                )
            self._say(f"workload on: {', '.join(started)}")
        elif words:
            self.workload.stop()
            self._say("workload off")
        status = self.workload.status()
        calls = ", ".join(f"{c} {n}" for c, n in sorted(status.calls.items())) or "none"
        self._say(
            f"workload {'running' if status.running else 'stopped'}: calls {calls}; "
            f"failed {status.failed}, wrong {status.wrong}"
        )

    def do_focus(self, arg: str) -> None:
        """focus [APP | -]: give APP the focus (- clears it) and run the controller once."""
        words = _split(arg)
        if len(words) > 1:
            raise _UsageError(f"expected at most 1 argument, got {len(words)} (usage: focus APP)")
        if not words:
            self._say(f"foreground: {_text(self.framework.foreground)}")
            return
        app = None if words[0] == "-" else words[0]
        errors: list[str] = []
        reports = self.framework.set_foreground(app, errors)
        self._say(f"foreground: {_text(app)}")
        self._control_result(reports, errors)

    def do_controller(self, arg: str) -> None:
        """controller [NAME | off]: use controller NAME (off: none); no NAME lists them."""
        words = _split(arg)
        if len(words) > 1:
            raise _UsageError(
                f"expected at most 1 argument, got {len(words)} (usage: controller NAME)"
            )
        if not words:
            current = self.framework.controller
            names = ", ".join(available_controllers())
            self._say(f"controller: {current.name if current is not None else 'off'}")
            self._say(f"available: {names}")
            return
        controller: Controller | None = None
        if words[0] != "off":
            controller = load_controller(words[0])
        self.framework.set_controller(controller)
        self._say(f"controller: {controller.name if controller is not None else 'off'}")

    def do_control(self, arg: str) -> None:
        """control: run the controller once on fresh statistics and carry out its juggles."""
        _exactly(arg, 0, "control")
        if self.framework.controller is None:
            raise _UsageError("no controller set (use: controller NAME)")
        errors: list[str] = []
        self._control_result(self.framework.control(errors), errors)

    def _control_result(self, reports: list[JuggleReport], errors: list[str]) -> None:
        """Print what one controller run did: its juggles, then the juggles that failed."""
        for report in reports:
            self._report(report)
        for message in errors:
            self._fail(f"controller: {message}")
        controller = self.framework.controller
        if controller is None:
            self._say("no controller set: nothing decided")
        elif not reports:
            self._say(f"controller {controller.name}: no juggle")

    # -- help and leaving --------------------------------------------------------------------

    def do_help(self, arg: str) -> None:
        """help [COMMAND]: list the commands, or describe one."""
        words = _split(arg)
        if len(words) > 1:
            raise _UsageError(f"expected at most 1 argument, got {len(words)} (usage: help)")
        if words:
            method = getattr(self, f"do_{words[0]}", None)
            if method is None or words[0] == "EOF":
                raise _UsageError(f"no command {words[0]!r}; type 'help' for the commands")
            self._say(str(method.__doc__))
            return
        rows = []
        for name in _COMMAND_ORDER:
            usage, _, what = str(getattr(self, f"do_{name}").__doc__).partition(": ")
            rows.append({"command": usage, "what": what})
        columns = [_Column("command", "command"), _Column("what", "what it does")]
        self._table("commands", columns, rows, {})

    def do_quit(self, arg: str) -> bool:
        """quit: leave the shell (end of input does too)."""
        return True

    def do_exit(self, arg: str) -> bool:
        """exit: leave the shell."""
        return True

    def do_EOF(self, arg: str) -> bool:
        """End of input leaves the shell."""
        if self.interactive:
            self._say("")
        return True


def _properties(props: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in props.items()) or "-"


def _stat_row(scope: str, s: CallStats) -> dict[str, Any]:
    return {
        "scope": scope,
        "calls": s.calls,
        "errors": s.errors,
        "timed": s.timed,
        "mean_us": s.mean_us,
        "p50_us": s.p50_us,
        "p99_us": s.p99_us,
        "max_us": s.max_us,
    }


def run_shell(
    fabric: str = "xupv2p",
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    json_lines: bool = False,
) -> int:
    """Run the shell over a fresh :class:`Framework` on board profile ``fabric``.

    Reads commands from ``stdin`` until ``quit`` or end of input, then closes the framework.
    A failed command is reported on its own line and the session goes on. Returns the exit
    status: 1 when ``stdin`` is no terminal (a script) and a command failed, else 0 (a script
    that must stop at the first error checks ``JuggleShell.failures``). Raises
    :class:`~juggle.errors.ProfileError` (or another :class:`~juggle.errors.JuggleError`) when
    the fabric cannot be opened.
    """
    framework = Framework(fabric=fabric)
    try:
        shell = JuggleShell(framework, stdin=stdin, stdout=stdout, json_lines=json_lines)
        try:
            shell.run()
        finally:
            shell.workload.stop()
        return 1 if shell.failures and not shell.interactive else 0
    finally:
        framework.close()
