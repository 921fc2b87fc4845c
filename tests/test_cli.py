"""The command line: demo, module validate/schema, bench; JSON on stdout, clear errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from juggle.commands.cli import _register_scenarios, app
from juggle.errors import SignatureError

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
_register_scenarios()


def test_demo_json_acceptance() -> None:
    result = runner.invoke(app, ["demo", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["failed_calls"] == 0
    assert doc["results_agree"] is True
    assert doc["tiers"]["hardware"]["figure"] == "modeled"
    assert doc["tiers"]["software"]["figure"] == "measured"
    assert doc["tiers"]["native"]["figure"] == "measured"
    for tier in ("software", "native", "hardware"):
        assert doc["tiers"][tier]["calls"] > 0 and doc["tiers"][tier]["throughput_mb_s"] > 0
    directions = {(j["service"], j["direction"]) for j in doc["juggles"]}
    assert ("tdes", "to_hardware") in directions and ("tdes", "to_software") in directions
    assert ("adpcm", "to_hardware") in directions
    for j in doc["juggles"]:
        if j["direction"] == "to_hardware":
            assert 10.0 < j["reconfiguration_ms"] < 15.0
        assert j["overhead_us"] > 0
    assert [p["focus"] for p in doc["phases"]] == [None, "mail", "music", "mail"]


def test_demo_table() -> None:
    result = runner.invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    for text in ("modeled", "measured", "failed calls: 0", "Juggles", "programmed into"):
        assert text in result.stdout


def test_module_validate_and_schema(tmp_path: Path) -> None:
    ok = runner.invoke(app, ["module", "validate", str(ROOT / "examples/modules/math"), "--json"])
    assert ok.exit_code == 0, ok.output
    doc = json.loads(ok.stdout)
    assert doc["valid"] and doc["format"] == "comodule-xml"
    assert {tuple(s["interfaces"]) for s in doc["services"]} == {
        ("math.AddService",),
        ("math.MulService",),
    }
    schema = runner.invoke(app, ["module", "schema"])
    assert json.loads(schema.stdout)["title"] == "Descriptor"


def test_module_validate_error_names_value(tmp_path: Path) -> None:
    target = tmp_path / "tdes"
    shutil.copytree(ROOT / "examples/modules/tdes", target)
    (target / "bitstreams" / "tdes_prr0.bit").unlink()
    result = runner.invoke(app, ["module", "validate", str(target)])
    assert result.exit_code != 0
    assert "tdes_prr0.bit" in str(result.exception)


def test_bench_unknown_group() -> None:
    result = runner.invoke(app, ["bench", "--only", "nope"])
    assert result.exit_code != 0
    assert "nope" in str(result.exception)


@pytest.mark.parametrize("group", ["proxy"])
def test_bench_quick_json(group: str) -> None:
    result = runner.invoke(app, ["bench", "--quick", "--json", "--only", group])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    for key in ("proxy_overhead_ratio", "transparency_64", "transparency_1k"):
        assert doc[key] > 0


def test_console_script_error_exit_code(tmp_path: Path) -> None:
    import subprocess
    import sys

    missing = tmp_path / "nowhere"
    code = "import sys; from juggle.commands.cli import main; sys.argv[0] = 'juggle'; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "module", "validate", str(missing)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "error:" in proc.stderr and "nowhere" in proc.stderr


def _broken_copy(tmp_path: Path, code: str) -> Path:
    target = tmp_path / "broken"
    shutil.copytree(ROOT / "examples/modules/tdes", target)
    (target / "tdes_module.py").write_text(code)
    return target


def test_validate_reads_the_code_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    code = (
        f"open({str(marker)!r}, 'w').write('x')\n"
        + (ROOT / "examples/modules/tdes/tdes_module.py").read_text()
    )
    target = _broken_copy(tmp_path, code)
    result = runner.invoke(app, ["module", "validate", str(target), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["imported"] is False
    assert not marker.exists()
    result = runner.invoke(app, ["module", "validate", str(target), "--import", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["imported"] is True and marker.exists()


@pytest.mark.parametrize(
    ("code", "says"),
    [
        ("def f(:\n", "does not parse"),
        ("from juggle.services.crypto import NativeTDES\n", "defines no class 'SoftwareTDES'"),
        (
            "from juggle.services.crypto import NativeTDES, TdesDriver\n"
            "from juggle.services.crypto.model import TdesCore\n"
            "class SoftwareTDES:\n    def encrypt(self, buf, size): ...\n",
            "lacks method(s)",
        ),
        (
            "from juggle.services.crypto import NativeTDES, SoftwareTDES\n"
            "from juggle.services.crypto.model import TdesCore\n"
            "from juggle.services.crypto import TdesDriver as _D\n"
            "class TdesDriver(_D):\n    def __init__(self, mmio, clock): ...\n",
            "must take the MMIO window",
        ),
    ],
)
def test_validate_finds_broken_code_by_reading_it(tmp_path: Path, code: str, says: str) -> None:
    target = _broken_copy(tmp_path, code)
    result = runner.invoke(app, ["module", "validate", str(target), "--json"])
    assert result.exit_code != 0
    assert says in str(result.exception)
    assert json.loads(result.stdout)["valid"] is False


def test_console_validate_of_a_broken_module_is_one_line_exit_2(tmp_path: Path) -> None:
    import subprocess
    import sys

    target = _broken_copy(tmp_path, "x = (\n")
    code = "import sys; from juggle.commands.cli import main; sys.argv[0] = 'juggle'; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "module", "validate", str(target)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**__import__("os").environ, "COLUMNS": "40"},
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "tdes_module.py:1" in proc.stderr


def test_module_lock_keygen_sign_then_a_signed_install(tmp_path: Path) -> None:
    import juggle

    target = tmp_path / "tdes"
    shutil.copytree(ROOT / "examples/modules/tdes", target)
    assert runner.invoke(app, ["module", "lock", str(target)]).exit_code == 0
    key = tmp_path / "author.pem"
    made = runner.invoke(app, ["module", "keygen", str(key), "--json"])
    assert made.exit_code == 0, made.output
    public = json.loads(made.stdout)["public"]
    signed = runner.invoke(app, ["module", "sign", str(target), "--key", str(key)])
    assert signed.exit_code == 0, signed.output
    with juggle.Framework("xupv2p", trusted_keys=[Path(public)]) as fw:
        fw.install(target).start()
        assert fw.services()[0].module == "tdes"
    valid = runner.invoke(app, ["module", "validate", str(target), "--json"])
    assert len(json.loads(valid.stdout)["pinned"]) >= 2
    assert json.loads(valid.stdout)["signed_by"] is None  # no key asked for, none checked
    checked = runner.invoke(
        app, ["module", "validate", str(target), "--json", "--trusted-key", public]
    )
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.stdout)["signed_by"]  # the signing key's fingerprint
    other = tmp_path / "other.pem"
    other_public = json.loads(
        runner.invoke(app, ["module", "keygen", str(other), "--json"]).stdout
    )["public"]
    refused = runner.invoke(
        app, ["module", "validate", str(target), "--json", "--trusted-key", other_public]
    )
    assert isinstance(refused.exception, SignatureError)  # the console script exits 2
    assert json.loads(refused.stdout) == {
        "valid": False,
        "path": str(target),
        "error": str(refused.exception),
        "type": "SignatureError",
    }
    assert "matches no trusted key" in str(refused.exception)


def test_the_examples_are_package_data_and_an_unknown_one_is_named() -> None:
    # the demo from anywhere on a fresh (non-editable) install: tests/test_install.py
    import juggle
    from juggle.shipped import example_module, example_modules

    assert example_modules().resolve().is_relative_to(Path(juggle.__file__).resolve().parent)
    assert (example_module("tdes") / "juggle.toml").is_file()
    with pytest.raises(juggle.errors.UnknownModuleError, match="'nope'.*tdes"):
        example_module("nope")


def _leaves(command: object, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    subcommands = getattr(command, "commands", None)
    if subcommands:
        out = []
        for name, sub in subcommands.items():
            out += _leaves(sub, (*path, name))
        return out
    return [(path, command)]


def test_every_command_of_the_tree_takes_json() -> None:
    import typer.main

    from juggle.commands.cli import _register_scenarios

    _register_scenarios()
    tree = typer.main.get_command(app)
    leaves = _leaves(tree)
    assert len(leaves) >= 15
    missing = [
        " ".join(path)
        for path, command in leaves
        if not any("--json" in getattr(p, "opts", []) for p in getattr(command, "params", []))
    ]
    assert missing == []


def test_the_console_script_is_the_command_apps_main() -> None:
    import importlib
    import tomllib

    from juggle.commands import cli

    target = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["juggle"]
    module, _, name = target.partition(":")
    assert getattr(importlib.import_module(module), name) is cli.main


def test_every_command_and_group_shows_its_help() -> None:
    import typer.main

    _register_scenarios()
    tree = typer.main.get_command(app)

    def paths(command: object, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        subcommands = getattr(command, "commands", {})
        return [path] + [p for n, sub in subcommands.items() for p in paths(sub, (*path, n))]

    every = paths(tree)
    assert {("simulate", "tdes"), ("module", "new"), ("board", "check")} <= set(every)
    for path in every:
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "usage:" in result.stdout.lower(), path  # the daemon's own parser says "usage:"


@pytest.mark.parametrize(
    "argv",
    [
        ["module", "validate", "/nowhere/at/all"],
        ["module", "build", "/nowhere/at/all"],
        ["module", "lock", "/nowhere/at/all"],
        ["profile", "/nowhere/at/all"],
        ["bench", "--only", "nope"],
        ["simulate", "tdes", "--hardware", "fpga"],
    ],
)
def test_errors_under_json_are_one_json_document_and_exit_2(argv: list[str]) -> None:
    import subprocess
    import sys

    code = "import sys; from juggle.commands.cli import main; sys.argv[0] = 'juggle'; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv, "--json"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["error"] and doc["type"].endswith("Error")


def test_shell_json_answers_each_command_with_one_json_line() -> None:
    import io

    from juggle.commands.shell import run_shell

    out = io.StringIO()
    script = f"install {ROOT / 'examples/modules/tdes'}\nstart 1\nservices\nstart 9\nquit\n"
    # a piped shell whose command failed (start 9) exits 1, after running every line
    assert run_shell(stdin=io.StringIO(script), stdout=out, json_lines=True) == 1
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [d["command"] for d in lines] == [
        "install " + str(ROOT / "examples/modules/tdes"),
        "start 1",
        "services",
        "start 9",
        "quit",
    ]
    assert lines[2]["ok"]
    assert lines[2]["tables"][0]["rows"][0]["interface"] == "crypto.EncryptionService"
    assert not lines[3]["ok"] and lines[3]["type"] == "UnknownModuleError"


def test_the_demo_tells_its_story_in_80_columns() -> None:
    result = runner.invoke(app, ["demo"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert sum(line.lstrip().startswith("phase ") for line in lines) == 4
    assert "…" not in result.stdout  # no truncated header or cell
    doc = json.loads(runner.invoke(app, ["demo", "--json"]).stdout)
    assert len(doc["story"]) == len(doc["phases"]) == 4
    assert "music player" in doc["story"][2] and "programmed into prr0" in doc["story"][2]


def test_bench_shows_progress_on_stderr_and_counts_as_integers(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = "import sys; from juggle.commands.cli import main; sys.argv[0] = 'juggle'; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "bench", "--quick", "--only", "alloc"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "COLUMNS": "120"},
    )
    assert proc.returncode == 0, proc.stderr
    samples = [line for line in proc.stdout.splitlines() if "alloc_samples " in line]
    assert samples and ".000" not in samples[0]
    doc = json.loads(runner.invoke(app, ["bench", "--quick", "--json", "--only", "alloc"]).stdout)
    assert isinstance(doc["alloc_samples"], int)


def test_help_of_every_command_names_no_type_for_a_flag() -> None:
    """A flag takes no value: its help row shows no ``<bool>`` placeholder (typer 0.29 adds
    one to every flag, ``--help`` included; juggle pins the typer that does not)."""
    import typer.main

    _register_scenarios()
    tree = typer.main.get_command(app)
    shown = []
    for path, _ in _leaves(tree):
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "100"})
        assert result.exit_code == 0, (path, result.output)
        if "<bool>" in result.output:
            shown.append(" ".join(path))
    assert shown == []
