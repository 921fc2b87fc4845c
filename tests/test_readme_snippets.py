"""The README's snippets run as a newcomer runs them: after a plain (non-editable) install of
this tree into a fresh virtual environment, from a folder outside the repository.

The README is read in order: every ``python`` block runs with the fresh environment's Python;
a ``sh`` block's ``juggle`` commands (``.venv/bin/juggle ...`` or ``juggle ...``) run with the
fresh environment's ``juggle`` before the blocks that follow (the five-minute walk scaffolds
the module its Python block installs); ``make`` lines build a development checkout and are not
a newcomer's step. All blocks share one working folder outside the repository. The install is
:func:`fresh_install_support.fresh_install`, built once per session.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from fresh_install_support import ROOT, FreshInstall, fresh_install

README = ROOT / "README.md"


@dataclass(frozen=True)
class Block:
    """A fenced block of the README: its language, text and first line number."""

    language: str
    text: str
    line: int


def blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown ``text``, in order."""
    found = []
    for match in re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S):
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(match[1], match[2], line))
    return found


def juggle_commands(block: Block) -> list[list[str]]:
    """The ``juggle`` commands of a ``sh`` block (comments dropped), as argument lists."""
    commands = []
    for line in block.text.splitlines():
        words = shlex.split(line, comments=True)
        if words and words[0] in ("juggle", ".venv/bin/juggle"):
            commands.append(words[1:])
    return commands


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> FreshInstall:
    return fresh_install(tmp_path_factory)


def test_the_readme_has_python_snippets_to_run() -> None:
    found = blocks(README.read_text())
    python = [b for b in found if b.language == "python"]
    assert len(python) >= 2
    assert 'fw.install("tdes")' in python[0].text  # a shipped example, by name
    assert ["module", "new", "echo_svc", "--interface", "demo.EchoService"] in [
        c for b in found if b.language == "sh" for c in juggle_commands(b)
    ]


def test_every_readme_snippet_runs_after_a_plain_install(
    fresh: FreshInstall, tmp_path: Path
) -> None:
    work = tmp_path / "newcomer"
    work.mkdir()
    assert not work.resolve().is_relative_to(ROOT)
    ran = 0
    for block in blocks(README.read_text()):
        if block.language == "sh":
            for argv in juggle_commands(block):
                proc = fresh.run(fresh.juggle, *argv, cwd=work)
                assert proc.returncode == 0, (block.line, argv, proc.stderr)
        elif block.language == "python":
            proc = fresh.run(fresh.python, "-c", block.text, cwd=work)
            assert proc.returncode == 0, f"README.md:{block.line}\n{proc.stderr}"
            ran += 1
    assert ran >= 2
