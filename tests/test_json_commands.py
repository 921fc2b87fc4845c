"""The ``--json`` of ``juggle module schema`` and ``juggle dashboard``.

``module schema --json`` prints the published schema of ``juggle.toml``
(``src/juggle/schemas/juggle-module.schema.json``) byte for byte; it is checked to be a
well-formed JSON Schema (every keyword known, every ``$ref`` resolving) and to accept the
shipped modules' descriptors while rejecting broken ones (``jsonschema``, draft 2020-12).

``dashboard --json --port 0`` binds before it announces: the document names the port actually
bound, and the API answers there.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import subprocess
import sys
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from typer.testing import CliRunner

from juggle.commands.cli import app

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_FILE = ROOT / "src/juggle/schemas/juggle-module.schema.json"
EXAMPLES = sorted((ROOT / "examples/modules").glob("*/juggle.toml"))


def violations(instance: Any, schema: dict[str, Any]) -> list[str]:
    """What ``instance`` breaks of ``schema``: ``path: message`` per error (jsonschema)."""
    validator = Draft202012Validator(schema)
    return sorted(
        f"{error.json_path}: {error.message}" for error in validator.iter_errors(instance)
    )


def test_module_schema_json_is_the_published_schema() -> None:
    runner = CliRunner()
    with_json = runner.invoke(app, ["module", "schema", "--json"])
    assert with_json.exit_code == 0, with_json.output
    assert with_json.stdout == SCHEMA_FILE.read_text()
    without = runner.invoke(app, ["module", "schema"])
    assert without.exit_code == 0 and without.stdout == with_json.stdout
    doc = json.loads(with_json.stdout)
    assert doc["title"] == "Descriptor" and doc["type"] == "object"
    assert {"module", "services"} <= set(doc["properties"])


def test_module_schema_is_a_well_formed_json_schema() -> None:
    schema = json.loads(CliRunner().invoke(app, ["module", "schema", "--json"]).stdout)
    Draft202012Validator.check_schema(schema)  # the metaschema's verdict
    assert schema["$defs"], "the descriptor's parts are $defs"
    # every $ref resolves: validating the shipped descriptors walks them (below); a broken
    # schema is refused by the same check
    broken = json.loads(json.dumps(schema))
    broken["$defs"]["Nope"] = {"type": "strng"}
    with pytest.raises(SchemaError, match="strng"):
        Draft202012Validator.check_schema(broken)


@pytest.mark.parametrize("toml", EXAMPLES, ids=[p.parent.name for p in EXAMPLES])
def test_module_schema_accepts_the_shipped_descriptors(toml: Path) -> None:
    schema = json.loads(CliRunner().invoke(app, ["module", "schema", "--json"]).stdout)
    descriptor = tomllib.loads(toml.read_text())
    assert violations(descriptor, schema) == []
    wrong = {**descriptor, "modul": descriptor.get("module")}
    assert any("'modul'" in v for v in violations(wrong, schema)), violations(wrong, schema)
    missing = {k: v for k, v in descriptor.items() if k != "services"}
    assert any("'services' is a required property" in v for v in violations(missing, schema))


def test_the_shipped_descriptors_are_found() -> None:
    assert {p.parent.name for p in EXAMPLES} >= {"tdes", "des", "audio"}


@contextlib.contextmanager
def dashboard(*args: str) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, Any]]]:
    """A ``juggle dashboard --json`` process and the document it announced; always ended."""
    argv = [
        sys.executable,
        "-c",
        "from juggle.commands.cli import main; main()",
        "dashboard",
        "--json",
    ]
    proc = subprocess.Popen([*argv, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        text = b""
        deadline = time.monotonic() + 60
        doc: dict[str, Any] | None = None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while doc is None:
                left = deadline - time.monotonic()
                assert left > 0, f"no JSON document within 60 s: {text!r}"
                if not sel.select(timeout=left):
                    continue
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:  # the process ended before announcing
                    proc.wait(timeout=10)
                    raise AssertionError(f"exited {proc.returncode}: {proc.stderr.read()!r}")
                text += chunk
                with contextlib.suppress(json.JSONDecodeError):
                    doc = json.loads(text)
        yield proc, doc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_dashboard_json_port_0_announces_the_port_bound() -> None:
    with dashboard("--port", "0") as (proc, doc):
        match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/#token=[\w-]+", doc["url"])
        assert match, doc
        port = int(match[1])
        assert port != 0
        assert doc["api"] == f"http://127.0.0.1:{port}/api/services"
        assert doc["metrics"] == f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(doc["api"], timeout=10) as answer:
            assert answer.status == 200
            services = json.loads(answer.read())
        assert isinstance(services, list)
        with urllib.request.urlopen(doc["metrics"], timeout=10) as answer:
            assert answer.status == 200 and b"juggle" in answer.read()
        assert proc.poll() is None
    assert proc.returncode is not None
