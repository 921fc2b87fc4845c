"""The runtime never reaches into a fabric backend: contexts are the drivers' own register work
(issue 8, item 2), so nothing under ``juggle/runtime`` imports ``juggle.fabric.sim``."""

from __future__ import annotations

import ast
from pathlib import Path

import juggle.runtime

RUNTIME = Path(juggle.runtime.__file__).parent


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_runtime_does_not_import_the_simulator() -> None:
    files = sorted(RUNTIME.glob("*.py"))
    assert len(files) > 10
    offenders = {
        f.name: sorted(m for m in imported(f) if m.startswith("juggle.fabric.sim")) for f in files
    }
    assert {k: v for k, v in offenders.items() if v} == {}
