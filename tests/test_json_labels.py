"""Every figure of every ``--json`` document of ``juggle`` says how it was obtained: the
``simulate`` scenarios, ``bench``, ``demo``, ``profile``, the shell's replies, and the operator
commands against a daemon (``juggle --connect SOCKET services|regions|tenants|stats|juggle|
tier|recover``, walked on one real daemon, :func:`remote_docs`).

THE RULE (the convention most documents already used): a numeric leaf (int or float, not a
bool) is labeled by the nearest enclosing object that has a ``labels`` dict with an entry for
the next key on the path down to the leaf. That entry is either one of the four kinds
(``measured``, ``modeled``, ``input``, ``calibrated``), which labels the whole subtree, or a
dict, which is followed key by key the same way. ``labels`` and ``how`` are not figures; list
items take their list's label. A label that is free text, or none at all, fails.

The ``simulate`` subcommands are found by walking the typer app (a new scenario is covered
without editing this file); each runs with the smallest arguments its options offer, and a
command with ``--experiment`` runs every experiment it has (listed in :data:`EXPERIMENTS_OF`).
Every other command of the app with ``--json`` is either walked here (:data:`WALKED`, the
daemon's :data:`REMOTE`, the :data:`SHELL_SCRIPT`) or listed with the reason it is not
(:data:`NOT_WALKED`); a new one is neither, and fails
:func:`test_every_json_command_is_walked_or_listed`.

THE USES RULE (beside the provenance rule of ``labels_support``): a ``paper_comparison`` row
that lists the parameters its figure is computed from (``uses``, each with its own label)
names every *calibrated* one among its ``fitted`` parameters, and an echoed row (*input*)
lists no fitted parameter: a figure computed from a fitted parameter is *calibrated*, a
figure that is the paper's value copied is *input*.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import json
import os
import shutil
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from juggle.commands.cli import _register_scenarios, app
from juggle.commands.remote import COMMANDS, labeled
from juggle.daemon.client import Client
from juggle.daemon.protocol import to_wire
from juggle.fabric.resources import Resources
from juggle.simulate.router.experiments import EXPERIMENTS
from labels_support import (
    figure_labels,
    paper_rows,
    paper_values_not_input,
    provenance_violations,
    unlabeled,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "daemon"))
from daemon_support import (  # type: ignore[import-not-found, unused-ignore]  # noqa: E402
    MODULES,
    DaemonProcess,
    make_base,
    wait_until,
)

SMALL: dict[str, list[str]] = {
    "--duration": ["--duration", "0.02"],
    "--size": ["--size", "4096"],
    "--scale": ["--scale", "0.02"],
}
"""Options that make a scenario small, used wherever a command has them."""

EXPERIMENTS_OF: dict[str, tuple[str, ...]] = {"edge-router": EXPERIMENTS}
"""The experiments of each command with ``--experiment``: each is a document of its own."""

VARIANTS: dict[str, list[str]] = {"--energy": ["--energy"]}
"""Flags that switch a command to another document: each is run as a variant too."""


def simulate_runs() -> list[tuple[str, list[str]]]:
    """``(id, argv)`` for every ``simulate`` subcommand and variant, with small arguments."""
    _register_scenarios()
    tree: Any = typer.main.get_command(app)
    group: Any = tree.commands["simulate"]
    runs: list[tuple[str, list[str]]] = []
    for name, command in sorted(group.commands.items()):
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        assert "--json" in options, name
        argv = ["simulate", name, "--json"]
        for opt, extra in SMALL.items():
            if opt in options:
                argv += extra
        if "--experiment" in options:
            assert name in EXPERIMENTS_OF, f"list the experiments of {name} in EXPERIMENTS_OF"
            runs += [(f"{name} {e}", [*argv, "--experiment", e]) for e in EXPERIMENTS_OF[name]]
            continue
        runs.append((name, argv))
        for opt, extra in VARIANTS.items():
            if opt in options:
                runs.append((f"{name} {opt}", argv + extra))
    return runs


RUNS = simulate_runs()

WALKED: dict[str, list[str]] = {
    "bench": ["bench", "--json", "--quick"],
    "demo": ["demo", "--json"],
    "profile": ["profile", "tdes", "--json", "--vectors", "2", "--rounds", "1", "--round-ms", "1"],
    "module test": ["module", "test", str(MODULES / "gcd"), "--json", "--samples", "4"],
}
"""Commands outside ``simulate`` whose ``--json`` the walk reads, with the arguments it uses."""

REMOTE: dict[str, list[str]] = {
    "whoami": ["whoami"],
    "install": ["install", "{module}"],
    "modules": ["modules"],
    "reload-policy": ["reload-policy"],
    "trust": ["trust"],
    "services": ["services"],
    "regions": ["regions"],
    "tenants": ["tenants"],
    "stats": ["stats", "1"],
    "recover": ["recover", "prr0"],
    "tier": ["tier", "1", "software"],
    "juggle": ["juggle", "--to-hardware", "1"],
    "uninstall": ["uninstall", "tdes"],
}
"""The operator commands (``juggle --connect SOCKET ARGS --json``) the walk runs on one daemon
(:func:`remote_docs`), with their arguments (service 1 is the module the walk installs, from
the folder ``{module}`` stands for)."""

SHELL_SCRIPT = [
    f"install {MODULES / 'tdes'}",
    "start 1",
    "modules",
    "services",
    "regions",
    "juggle 1",
    "stats 1",
    "tier 1 software",
    "focus mail",
    "controller",
    "stats 99",
    "quit",
]
"""The lines ``juggle shell --json`` is fed: each reply is a document of its own."""

NOT_WALKED: dict[str, str] = {
    "board check": "a pass/fail report of the board profile's checks: no figure",
    "cluster ca": "creates the cluster CA and prints its file paths: no figure",
    "cluster issue": "issues a certificate and prints its file paths and subject: no figure",
    "cluster status": "needs a Ray cluster: walked by the same rules in tests/cluster/"
    "test_cluster_runtime.py::test_status_and_snapshots_show_the_boards_and_what_their_"
    "regions_hold",
    "cluster dashboard": "needs a Ray cluster; serves the cluster page and prints its URL: no "
    "figure (its API's labels are checked in tests/ui/test_ui_cluster.py)",
    "daemon": "starts the daemon and prints its socket path and pid: no figure",
    "dashboard": "starts the web dashboard and prints its address: no figure",
    "module bitstream": "writes a bitstream file and prints its path, design, region and size "
    "in bytes (the file's, input): no derived figure",
    "module build": "the synthesis report (resources.json), whose own 'figure' field labels "
    "it (tests/runtime/test_resources_synth.py checks it)",
    "module import-dfx": "writes a module folder and prints what it wrote: no figure",
    "module keygen": "writes a key pair and prints its paths: no figure",
    "module lock": "writes juggle.lock and prints the pinned digests: no figure",
    "module new": "writes a module folder and prints what it wrote: no figure",
    "module schema": "the descriptor's JSON schema: no figure",
    "module sign": "writes a signature and prints its path: no figure",
    "module validate": "a pass/fail report of a module folder: no figure",
}
"""Commands with ``--json`` the walk does not read, and why."""

PENDING: set[str] = set()
"""Listed before the command lands: absent from the app is no error for these."""


def json_commands() -> set[str]:
    """Every leaf command of the typer app (``"module build"``, ...) that takes ``--json``."""
    _register_scenarios()
    out: set[str] = set()

    def walk(command: Any, path: list[str]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, child in subcommands.items():
                walk(child, [*path, name])
            return
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        if "--json" in options:
            out.add(" ".join(path))

    walk(typer.main.get_command(app), [])
    return out


def uses_violations(doc: Any) -> list[str]:
    """THE USES RULE over every ``paper_comparison`` row of ``doc``: one line per row that
    lists a calibrated parameter in ``uses`` but not in ``fitted``, a fitted parameter it
    does not use, or is echoed with fitted parameters (empty: all hold)."""
    out: list[str] = []
    for row in paper_rows(doc):
        name = row.get("figure")
        fitted = {str(f.get("parameter")) for f in row.get("fitted", []) if isinstance(f, dict)}
        if row.get("echoed") and fitted:
            out.append(f"{name}: echoed (input) but lists fitted {sorted(fitted)}")
        uses = row.get("uses")
        if uses is None:
            continue
        used = {u["parameter"]: u["label"] for u in uses}
        unnamed = sorted(p for p, kind in used.items() if kind == "calibrated" and p not in fitted)
        if unnamed and not row.get("echoed"):
            out.append(f"{name}: computed from calibrated {unnamed}, not in its fitted list")
        if fitted - set(used):
            out.append(f"{name}: fitted {sorted(fitted - set(used))} not among its uses")
    return out


def run_json(argv: list[str]) -> dict[str, Any]:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert isinstance(doc, dict)
    return doc


def test_the_rule_finds_what_it_should() -> None:
    doc: dict[str, Any] = {
        "a": 1.0,
        "b": {"x": 2, "y": {"z": 3}},
        "c": [4, 5],
        "d": {"v": 6, "labels": {"v": "input"}},
        "e": 7,
        "f": True,
        "labels": {"a": "modeled", "b": {"x": "input", "y": "measured"}, "c": "input"},
    }
    assert unlabeled(doc) == ["e (label None)"]
    doc["labels"]["e"] = "measured: wall clock"  # free text is no kind
    assert unlabeled(doc) == ["e (label 'measured: wall clock')"]
    doc["labels"]["e"] = "calibrated"
    assert unlabeled(doc) == []


def test_the_provenance_rule_fails_a_label_better_than_its_figure() -> None:
    """Planted wrong labels on the real ThumbPod document: each breaks the rule."""
    doc = run_json(["simulate", "thumbpod", "--json"])
    assert provenance_violations(doc) == []
    rows = {row["figure"]: row for row in paper_rows(doc)}
    fitted = rows["Fig 3 c total_cycles"]  # kni_cycles, fitted to Fig 3's C interface, is in it
    fitted["label"] = fitted["labels"]["ours"] = fitted["labels"]["error_pct"] = "modeled"
    doc["levels"]["c"]["labels"]["total_cycles"] = "modeled"
    assert provenance_violations(doc) == [
        f"Fig 3 c total_cycles: labeled 'modeled', produced as 'calibrated' (fitted: "
        f"{fitted['fitted']})"
    ]
    fitted["label"] = fitted["labels"]["ours"] = fitted["labels"]["error_pct"] = "calibrated"
    assert len(provenance_violations(doc)) == 1  # the figure in its level still says modeled
    doc["levels"]["c"]["labels"]["total_cycles"] = "calibrated"
    echoed = rows["Fig 3 hardware core_cycles"]  # the paper's 11 cycles, hard-coded
    echoed["label"] = "modeled"
    assert [v.split(":")[0] for v in provenance_violations(doc)] == [
        "Fig 3 hardware core_cycles",
        "Fig 3 hardware core_cycles",
        "Fig 3 hardware core_cycles",
    ]
    echoed["label"] = "input"
    rows["Fig 3 c core_cycles"]["fitted"] = [{"parameter": "x"}]  # no fitted_to: no provenance
    assert provenance_violations(doc) == [
        "Fig 3 c core_cycles: 'fitted' must list parameters with what they were fitted_to"
    ]


COMPARED: dict[str, set[str]] = {
    "tdes": {"Table 3 mul reconfiguration", "Table 2 tdes slices", "Table 2 multiplier slices"},
    "ofdm": {"Table 5 T_RCFG prr2", "Eq. 6 T_Path4 constant"},
    "edge-router fig3a": {"Fig 3a highest RMU speedup (abstract: 'up to 1.5x')"},
    "edge-router fig4": {"Figs 3-4 reconfiguration time ('almost 2.5ms')"},
    "oscall": {"Table 2 mutex_turnaround_hw_hw"},
    "tdes --energy": {"Fig 8 fpga energy", "Fig 8 java power"},
    "thumbpod": {"Fig 3 c core_cycles", "Fig 3 hardware core_cycles"},
    "edge-router table4": {"Table 4 60/20/20 A", "Table 4 20/20/60 reconfiguring"},
}
"""Runs whose documents set figures beside a paper's, and some rows each must hold."""


def test_a_paper_value_labeled_anything_but_input_is_found() -> None:
    doc: dict[str, Any] = {
        "paper_us": [1.0, 2.0],
        "cells_us": [1.1, 2.1],
        "paper_comparison": [{"paper": 1.0, "ours": 1.1, "labels": {"paper": "input"}}],
        "labels": {"paper_us": "modeled", "cells_us": "calibrated"},
    }
    assert paper_values_not_input(doc) == [
        "paper_us[0]: a paper value labeled 'modeled'",
        "paper_us[1]: a paper value labeled 'modeled'",
    ]
    doc["labels"]["paper_us"] = "input"
    doc["paper_comparison"][0]["labels"] = {"paper": "calibrated"}
    assert paper_values_not_input(doc) == [
        "paper_comparison[0].paper: a paper value labeled 'calibrated'"
    ]


def test_every_simulate_subcommand_is_walked() -> None:
    names = {run_id.split()[0] for run_id, _ in RUNS}
    assert {"tdes", "thumbpod", "oscall"} <= names and len(names) >= 6
    assert ("tdes --energy", ["simulate", "tdes", "--json", "--energy"]) in RUNS
    router = [argv for run_id, argv in RUNS if run_id.startswith("edge-router ")]
    assert [argv[-1] for argv in router] == ["table4", "fig3a", "fig3b", "fig4"]
    assert all(argv[3:5] == ["--scale", "0.02"] for argv in router)


@pytest.mark.parametrize("argv", [argv for _, argv in RUNS], ids=[i for i, _ in RUNS])
def test_simulate_json_labels_every_figure(argv: list[str]) -> None:
    doc = run_json(argv)
    assert unlabeled(doc) == []
    assert provenance_violations(doc) == []
    assert uses_violations(doc) == []
    assert paper_values_not_input(doc) == []
    run_id = next(i for i, a in RUNS if a == argv)
    figures = {row["figure"] for row in paper_rows(doc)}
    assert COMPARED.get(run_id, set()) <= figures, run_id


def test_bench_json_labels_every_figure() -> None:
    """Every bench group (a quick run of all of them, rtl and daemon included)."""
    doc = run_json(["bench", "--json", "--quick"])
    groups = [
        *("proxy", "alloc", "sim", "oscall", "sharing", "rtl", "daemon", "verify", "linux"),
        "cluster",
    ]
    assert set(doc["group_seconds"]) == set(groups)
    assert unlabeled(doc) == []
    assert paper_values_not_input(doc) == []
    assert doc["labels"]["sim_events_per_s"] == "measured"
    assert doc["labels"]["context_switch_modeled_us"] == "modeled"


def coverage_gaps(commands: set[str]) -> list[str]:
    """What is wrong with the walk's coverage of ``commands`` (the app's commands with
    ``--json``): one line per command neither walked nor listed, walked and listed, or listed
    but gone (a :data:`PENDING` one may be absent). Empty: every command is covered."""
    walked = {f"simulate {run_id.split()[0]}" for run_id, _ in RUNS} | set(WALKED)
    walked |= set(REMOTE) | {"shell"}
    listed = set(NOT_WALKED)
    out = [
        f"{c}: neither walked nor listed with a reason" for c in sorted(commands - walked - listed)
    ]
    out += [f"{c}: both walked and listed" for c in sorted(walked & listed)]
    out += [
        f"{c}: walked or listed, but no such command"
        for c in sorted((walked | listed) - commands - PENDING)
    ]
    return out


def test_every_json_command_is_walked_or_listed() -> None:
    """Each command with ``--json`` is walked (``simulate``'s subcommands, :data:`WALKED`,
    :data:`REMOTE`, the shell) or listed with a reason (:data:`NOT_WALKED`), never both;
    nothing listed is gone."""
    commands = json_commands()
    assert {"bench", "demo", "profile", "services", "shell", "module build"} <= commands
    assert coverage_gaps(commands) == []
    assert all(reason.strip() for reason in NOT_WALKED.values())


def test_a_new_json_command_fails_the_coverage() -> None:
    """Break it on purpose: a command with ``--json`` neither walked nor listed, and a listed
    one that is gone."""
    commands = json_commands()
    assert coverage_gaps(commands | {"frobnicate"}) == [
        "frobnicate: neither walked nor listed with a reason"
    ]
    assert coverage_gaps(commands - {"regions"}) == [
        "regions: walked or listed, but no such command"
    ]


@pytest.mark.parametrize("name", sorted(set(WALKED) - {"bench"}))  # bench: its own test below
def test_walked_command_labels_every_figure(name: str) -> None:
    doc = run_json(WALKED[name])
    assert unlabeled(doc) == []
    assert provenance_violations(doc) == []
    assert uses_violations(doc) == []
    assert paper_values_not_input(doc) == []


def test_the_uses_rule_catches_a_cell_computed_from_fitted_costs_labeled_modeled() -> None:
    """Break it on purpose, on the real oscall document: the labels ReconOS' turnarounds had
    (modeled, as they were no fitting target, nothing fitted listed) are found, and so is an
    echoed ThumbPod figure that lists what it was fitted to."""
    doc = run_json(["simulate", "oscall", "--json"])
    assert uses_violations(doc) == [] and provenance_violations(doc) == []
    rows = {row["figure"]: row for row in paper_rows(doc)}
    cell = rows["Table 2 mutex_turnaround_hw_hw"]
    assert cell["label"] == "calibrated" and "handoff" in {u["parameter"] for u in cell["uses"]}
    cell["label"] = cell["labels"]["ours"] = cell["labels"]["error_pct"] = "modeled"
    cell["fitted"] = []
    entry = doc["modeled_ecos_ppc"]["cells"]["mutex_turnaround_hw_hw"]
    entry["labels"]["model_cycles"] = "modeled"
    assert provenance_violations(doc) == []  # label and fitted agree: only the uses catch it
    assert uses_violations(doc) == [
        "Table 2 mutex_turnaround_hw_hw: computed from calibrated ['delegate_dispatch', "
        "'handoff', 'interrupt_entry', 'mutex_unlock', 'sem_post'], not in its fitted list"
    ]

    thumb = run_json(["simulate", "thumbpod", "--json"])
    echoed = {row["figure"]: row for row in paper_rows(thumb)}["Fig 3 c interface_cycles"]
    assert echoed["label"] == "input" and echoed["fitted"] == []
    echoed["fitted"] = [{"parameter": "kni_cycles", "fitted_to": ["Fig 3 C interface"]}]
    assert uses_violations(thumb) == [
        "Fig 3 c interface_cycles: echoed (input) but lists fitted ['kni_cycles']"
    ]


# -- the shell and the operator commands against a daemon ---------------------------------------


def test_the_shell_replies_label_every_figure() -> None:
    """``juggle shell --json`` fed :data:`SHELL_SCRIPT`: one reply per line, each a document
    (its figures, should a reply carry any, labeled); the juggle's reply says which kind each
    of its figures is."""
    result = CliRunner().invoke(app, ["shell", "--json"], input="\n".join(SHELL_SCRIPT) + "\n")
    assert result.exit_code == 1, result.output  # `stats 99` fails: a piped shell says so
    replies = [json.loads(line) for line in result.stdout.splitlines()]
    assert [reply["command"] for reply in replies] == SHELL_SCRIPT
    failed = [reply["command"] for reply in replies if not reply["ok"]]
    assert failed == ["stats 99"] and replies[-2]["type"] == "UnknownServiceError"
    for reply in replies:
        assert unlabeled(reply) == [], reply["command"]
        assert paper_values_not_input(reply) == [], reply["command"]
    juggled = "\n".join(replies[SHELL_SCRIPT.index("juggle 1")]["output"])
    assert "calibrated" in juggled and "input" in juggled and "measured" in juggled


FAULTY_DRIVER = '''"""The TDES driver with a bus error on a block that starts with b"BUSERROR"."""

from juggle.services.crypto import TdesDriver


class BusErrorDriver(TdesDriver):
    def encrypt(self, buf, size):
        if bytes(memoryview(buf)[:8]) == b"BUSERROR":
            raise OSError(5, "bus error (test driver)")
        return super().encrypt(buf, size)
'''

KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")


def faulty_tdes(where: Path) -> Path:
    """The tdes module whose driver raises a bus error on demand (quarantining its region),
    with a numeric property (``block_bytes``) beside its string ones."""
    target = where / "tdes"
    shutil.copytree(MODULES / "tdes", target)
    (target / "faulty_tdes.py").write_text(FAULTY_DRIVER)
    toml = (target / "juggle.toml").read_text()
    toml = toml.replace('"tdes_module.TdesDriver"', '"faulty_tdes.BusErrorDriver"')
    toml = toml.replace('version = "1.0.0" }', 'version = "1.0.0", block_bytes = 8 }')
    assert "BusErrorDriver" in toml and "block_bytes" in toml
    (target / "juggle.toml").write_text(toml)
    target.chmod(0o755)
    return target


def cli_json(socket: Path, argv: list[str]) -> Any:
    """``juggle --connect SOCKET ARGV --json`` in this process: its document."""
    result = CliRunner().invoke(app, ["--connect", str(socket), *argv, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def remote_docs() -> Iterator[dict[str, Any]]:
    """Every operator command's document, from one daemon (this uid a tenant and an admin)
    at its fullest, every one through the CLI (:data:`REMOTE`): the faulty tdes module
    installed and in hardware (``regions``), a bus error quarantines prr0 (``services``),
    ``recover`` puts it back, a hardware call, then ``stats``, ``tenants``, ``tier``,
    ``juggle``, and ``uninstall`` last."""
    base = make_base()
    uid = os.getuid()
    policy = f'version = 1\nadmin_uids = [{uid}]\n\n[[tenants]]\nname = "ops"\nuids = [{uid}]\n'
    daemon = DaemonProcess(base, policy)
    sock = daemon.socket
    docs: dict[str, Any] = {}
    try:
        module = faulty_tdes(base)
        daemon.start()
        for name in ("whoami", "install", "modules", "reload-policy", "trust"):
            argv = [word.format(module=module) for word in REMOTE[name]]
            docs[name] = cli_json(sock, argv)
        with daemon.client() as ops:
            (sid,) = [s.service_id for s in ops.services()]
            assert sid == 1  # what REMOTE's arguments name
            assert ops.juggle(to_hardware=sid).tiers[sid] == "hardware"
            docs["regions"] = cli_json(sock, REMOTE["regions"])
            enc = ops.get_service("EncryptionService")
            enc.load_key(KEY)
            enc.encrypt(bytearray(b"BUSERROR" + bytes(8)), 16)  # served by software
            # the daemon's supervisor contains the fault on its own thread: wait for it
            assert wait_until(lambda: [r.state for r in ops.regions()] == ["ERROR"], 30.0)
            for name in ("services", "recover"):
                docs[name] = cli_json(sock, REMOTE[name])
            enc.encrypt(bytearray(16), 16)  # in hardware again
            for name in ("stats", "tenants", "tier", "juggle"):
                docs[name] = cli_json(sock, REMOTE[name])
            ops.unget_service(enc)
        docs["uninstall"] = cli_json(sock, REMOTE["uninstall"])
        yield docs
    finally:
        daemon.kill()
        shutil.rmtree(base, ignore_errors=True)


def test_every_remote_command_is_walked(remote_docs: dict[str, Any]) -> None:
    """The walk has a document of every daemon command, and the state it meant: a
    programmed region, a report of the recovery, a fallback and a modeled hardware call in
    the statistics, a tenant with a device, a numeric service property."""
    assert set(remote_docs) == set(COMMANDS) == set(REMOTE)
    (region,) = remote_docs["regions"]
    assert region["state"] == "PROGRAMMED" and region["service_id"] == 1
    assert remote_docs["recover"]["to_hardware"] == 1
    assert remote_docs["recover"]["reconfiguration_ms"] > 0
    stats = remote_docs["stats"]
    assert stats["fallbacks"] == 1 and stats["hardware_modeled_mean_us"] is not None
    (tenant,) = remote_docs["tenants"]
    assert tenant["name"] == "ops" and tenant["devices"]
    (service,) = remote_docs["services"]
    assert service["properties"]["block_bytes"] == 8
    assert remote_docs["uninstall"]["name"] == remote_docs["install"]["name"] == "tdes"
    assert remote_docs["modules"][0]["services"] == [1]
    assert remote_docs["trust"] == {"required": False, "keys": [], "labels": {}}


FILLED: dict[str, dict[str, Any]] = {"reload-policy": {"closed_connections": [7]}}
"""Fields of a plain-map document the walk's daemon leaves empty, set as they would be (a
reload that closed connection 7)."""

NO_FIGURES: dict[str, str] = {"trust": "key fingerprints and the files they came from"}
"""Daemon commands whose document holds no figure, with what it holds instead."""


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_remote_command_labels_every_figure(remote_docs: dict[str, Any], name: str) -> None:
    doc = remote_docs[name]
    if name in FILLED:
        doc = {**doc, **FILLED[name]}
    assert bool(figure_labels(doc)) is (name not in NO_FIGURES), f"{name}: figures?"
    assert unlabeled(doc) == []
    assert paper_values_not_input(doc) == []


CLIENT_METHOD: dict[str, str] = {
    "services": "services",
    "regions": "regions",
    "tenants": "tenants",
    "modules": "modules",
    "install": "install",
    "uninstall": "uninstall",
    "stats": "statistics",
    "juggle": "juggle",
    "tier": "set_tier",
    "recover": "recover",
}
"""The client method behind each daemon command that returns snapshots (``whoami``,
``reload-policy`` and ``trust`` return plain maps: the daemon walk covers them)."""


def fullest(tp: Any) -> Any:
    """A value of type ``tp`` with every field set: numbers not zero, optional fields given,
    one item in each tuple and map, a number for ``Any`` (a service property may be one).
    Raises AssertionError for a type it does not know."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Resources:
        return Resources(slices=1, flipflops=2, mult18=3, ram16=4)
    if origin in (types.UnionType, typing.Union):
        return fullest(next(a for a in args if a is not type(None)))
    if origin is tuple:
        return tuple(fullest(a) for a in args if a is not Ellipsis)
    if origin in (collections.abc.Mapping, dict):
        return {fullest(args[0]): fullest(args[1])}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return tp(**{f.name: fullest(hints[f.name]) for f in dataclasses.fields(tp)})
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return next(iter(tp))
    if tp is bool:
        return True
    if tp in (int, float):
        return tp(3)
    if tp is str:
        return "x"
    if tp is Any:
        return 7
    raise AssertionError(f"no value for {tp!r}")


@pytest.mark.parametrize("name", sorted(CLIENT_METHOD))
def test_every_field_of_a_remote_snapshot_is_labeled(name: str) -> None:
    """Every numeric field the snapshot type behind ``name`` has (read from the client's
    return type: a field added to the runtime's snapshot is walked here at once), set, is
    labeled in the command's document."""
    assert set(CLIENT_METHOD) | {"whoami", "reload-policy", "trust"} == set(COMMANDS)
    returned = typing.get_type_hints(getattr(Client, CLIENT_METHOD[name]))["return"]
    doc = labeled(name, to_wire(fullest(returned)))
    assert figure_labels(doc), f"{name}: no figure to walk"
    assert unlabeled(doc) == []


KIND_AT: dict[tuple[str, str], str] = {
    ("services", "[0].properties.block_bytes"): "input",  # the module's descriptor: 8
    ("services", "[0].service_id"): "input",
    ("regions", "[0].resources.slices"): "input",  # the xupv2p profile's prr0
    ("tenants", "[0].priority"): "input",  # the policy's (its default)
    ("tenants", "[0].devices[0].calls"): "measured",
    ("stats", "service_id"): "input",  # the command's argument
    ("stats", "total.mean_us"): "measured",
    ("stats", "per_method.encrypt.calls"): "measured",
    ("stats", "hardware_modeled_mean_us"): "modeled",
    ("recover", "reconfiguration_ms"): "calibrated",
    ("juggle", "bridge_ms"): "input",  # the profile's bridge switch time
    ("juggle", "overhead_us"): "measured",
    ("tier", "to_software[0]"): "input",
    ("whoami", "max_frame"): "input",
}
"""Figures of the daemon walk and the kind each must have: an input (a value the walk gave:
descriptor, profile, policy, argument) labeled anything but *input* fails, as does a
measured, modeled or calibrated figure labeled otherwise."""


def test_remote_inputs_are_labeled_input(remote_docs: dict[str, Any]) -> None:
    found = {
        (name, path): label
        for name, doc in remote_docs.items()
        for path, _, label in figure_labels(doc)
        if (name, path) in KIND_AT
    }
    assert found == KIND_AT
    assert remote_docs["services"][0]["properties"]["block_bytes"] == 8
    assert remote_docs["stats"]["service_id"] == 1
