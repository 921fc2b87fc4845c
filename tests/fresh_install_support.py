"""A fresh, non-editable install of this tree, built once per test session and shared.

The wheel is built offline from a copy of the tree (``pip wheel --no-build-isolation
--no-index``, so the work tree gets no ``build/``; both C extensions are compiled), installed
with ``--no-deps`` into a new virtual environment that reaches the third-party dependencies
only through a ``.pth`` line naming this environment's site-packages. Python reads the ``.pth``
files of site folders only, not those of a folder a ``.pth`` line adds, so the editable
install's path to ``src/`` does not come along: every ``juggle`` module a check imports comes
from the new environment. Commands run in a folder outside the repository
(:meth:`FreshInstall.run`). :func:`fresh_install` builds it on first use (about 10 s) and hands
the same install to every later caller of the session (``tests/test_readme_snippets.py``; the
same build as ``tests/test_install.py``'s).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
#: what a build reads besides ``src/``: the rest of the tree is not the package's business
BUILD_INPUTS = ("pyproject.toml", "setup.py", "README.md")
#: left out of the copy: byte code, and what an editable install or earlier build left in src/
NOT_SOURCE = ("__pycache__", "*.pyc", "*.so", "*.egg-info")


@dataclass(frozen=True)
class FreshInstall:
    """The wheel, the new environment and a working folder outside the repository."""

    wheel: Path
    source: Path
    python: Path
    juggle: Path
    site_packages: Path
    elsewhere: Path
    env: dict[str, str]

    def run(self, *args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """Run a command of the new environment in the folder outside the repository (or in
        ``cwd``)."""
        return subprocess.run(
            [str(a) for a in args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=cwd or self.elsewhere,
            env=self.env,
        )


def clean_env() -> dict[str, str]:
    """This process's environment without what would lead Python or pip back to the tree."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
    }
    env["PYTHONNOUSERSITE"] = "1"
    env["PIP_NO_INDEX"] = "1"  # offline: nothing may come from an index
    return env


def build_backend_present() -> None:
    """The build backend pyproject.toml names must be installed here (``make test`` does it):
    --no-build-isolation builds with this environment's, and an older one refuses the file."""
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for line in requires:
        requirement = Requirement(line)
        try:
            version = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            version = "none"
        assert requirement.specifier.contains(version, prereleases=True), (
            f"the build backend {line!r} is not installed in {sys.prefix} (found {version}); "
            "`make test` installs it"
        )


def _step(args: list[str], env: dict[str, str], cwd: Path) -> None:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=cwd, env=env)
    assert proc.returncode == 0, f"{' '.join(args)}\n{proc.stdout}\n{proc.stderr}"


def build_fresh_install(base: Path) -> FreshInstall:
    """Build the wheel and the new environment under ``base`` (see the module docstring)."""
    build_backend_present()
    env = clean_env()
    source = base / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns(*NOT_SOURCE))
    wheels = base / "wheels"
    pip = [sys.executable, "-m", "pip"]
    _step(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(wheels), "."],
        env,
        source,
    )
    (wheel,) = wheels.glob("juggle-*.whl")
    venv = base / "venv"
    _step([sys.executable, "-m", "venv", "--without-pip", str(venv)], env, base)
    python = venv / "bin" / "python"
    # the wheel first, while the new environment sees nothing of this one (pip would take the
    # editable juggle of this environment for an installed one)
    _step(
        [*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)], env, base
    )
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    probe = subprocess.run(
        [python, "-c", where], capture_output=True, text=True, check=True, env=env
    )
    site_packages = Path(probe.stdout.strip())
    (site_packages / "_juggle_test_dependencies.pth").write_text(
        sysconfig.get_path("purelib") + "\n"
    )
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    return FreshInstall(
        wheel=wheel,
        source=source,
        python=python,
        juggle=venv / "bin" / "juggle",
        site_packages=site_packages,
        elsewhere=elsewhere,
        env=env,
    )


_SESSION: dict[int, FreshInstall] = {}


def fresh_install(factory: pytest.TempPathFactory) -> FreshInstall:
    """The session's fresh install: built on the first call (under the session's temporary
    folders), the same one on every later call."""
    key = id(factory)
    if key not in _SESSION:
        _SESSION[key] = build_fresh_install(factory.mktemp("fresh-install"))
    return _SESSION[key]
