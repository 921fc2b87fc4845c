"""A fresh, non-editable install: the wheel built offline from this tree, installed into a new
virtual environment, run from a folder outside the repository.

The wheel is built with ``pip wheel --no-build-isolation --no-index`` from a copy of the tree
(so the work tree gets no ``build/``), which compiles both C extensions. The new environment
gets the wheel with ``--no-deps`` and, for the third-party dependencies only, a ``.pth`` line
naming this environment's site-packages. Python reads the ``.pth`` files of site folders only,
not those of a folder a ``.pth`` line adds, so the editable install's path to ``src/`` does not
come along: every ``juggle`` module the checks import must come from the new environment's
site-packages. The whole module takes about 15 s (the wheel with its C extensions: 3 s).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from dataclasses import dataclass
from fnmatch import fnmatch
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
#: what a build reads besides ``src/``: the rest of the tree is not the package's business
BUILD_INPUTS = ("pyproject.toml", "setup.py", "README.md")
#: left out of the copy: byte code, and what an editable install or earlier build left in src/
NOT_SOURCE = ("__pycache__", "*.pyc", "*.so", "*.egg-info")
EXTENSIONS = ("juggle/runtime/_dispatch", "juggle/fabric/linux/_busguard")

#: run by the fresh environment's Python: where juggle and its extensions come from, and a
#: shipped example module installed, called in software, juggled to hardware and called again
PROBE = """
import json, sys
import juggle
from juggle.fabric.linux import _busguard, busguard
from juggle.runtime import _dispatch, tracing
from juggle.shipped import example_module, example_modules

fw = juggle.Framework("xupv2p")
fw.install(example_module("math")).start()
add = fw.get_service("AddService", consumer="probe")
software = add.add(40, 2)
fw.juggle(to_hardware=add.service_id)
hardware = add.add(-7, 3)
tier = fw.statistics(add.service_id).tier
fw.close()
print(json.dumps({
    "files": [juggle.__file__, _dispatch.__file__, _busguard.__file__, str(example_modules())],
    "compiled": tracing.COMPILED,
    "guarded": busguard.GUARDED,
    "sys_path": sys.path,
    "software": software,
    "hardware": hardware,
    "tier": tier,
}))
"""


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

    def run(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        """Run a command of the new environment in the folder outside the repository."""
        return subprocess.run(
            [str(a) for a in args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=self.elsewhere,
            env=self.env,
        )


def _clean_env() -> dict[str, str]:
    """This process's environment without what would lead Python or pip back to the tree."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
    }
    env["PYTHONNOUSERSITE"] = "1"
    env["PIP_NO_INDEX"] = "1"  # offline: nothing may come from an index
    return env


def _build_backend_present() -> None:
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


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> FreshInstall:
    _build_backend_present()
    base = tmp_path_factory.mktemp("fresh-install")
    env = _clean_env()
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


def test_the_wheel_carries_every_file_of_the_package_and_both_c_extensions(
    fresh: FreshInstall,
) -> None:
    tree = fresh.source / "src"
    sources = {
        p.relative_to(tree).as_posix()
        for p in tree.rglob("*")
        if p.is_file() and not any(fnmatch(part, pat) for part in p.parts for pat in NOT_SOURCE)
    }
    names = set(zipfile.ZipFile(fresh.wheel).namelist())
    assert {n for n in sources if n.startswith("juggle/examples/modules/")}, sources
    assert sorted(sources - names) == []
    for extension in EXTENSIONS:
        assert [n for n in names if n.startswith(extension + ".") and n.endswith(".so")], extension


def test_the_demo_runs_from_anywhere_on_the_fresh_install(fresh: FreshInstall) -> None:
    assert not fresh.elsewhere.resolve().is_relative_to(ROOT)
    proc = fresh.run(fresh.juggle, "demo", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["failed_calls"] == 0 and doc["mismatches"] == 0 and doc["results_agree"] is True
    for tier in ("software", "native", "hardware"):
        assert doc["tiers"][tier]["calls"] > 0 and doc["tiers"][tier]["throughput_mb_s"] > 0
    # the shipped bitstreams were loaded: every juggle into the fabric reconfigured a region
    into_fabric = [j for j in doc["juggles"] if j["direction"] == "to_hardware"]
    assert {j["service"] for j in into_fabric} == {"tdes", "adpcm"}
    assert all(j["reconfiguration_ms"] > 0 for j in into_fabric)


def test_juggle_and_its_extensions_come_from_the_fresh_site_packages(fresh: FreshInstall) -> None:
    proc = fresh.run(fresh.python, "-c", PROBE)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    for file in doc["files"]:
        assert Path(file).resolve().is_relative_to(fresh.site_packages.resolve()), file
    assert doc["compiled"] is True and doc["guarded"] is True
    tree = [ROOT, ROOT / "src"]  # the checkout (the .venv below it holds only the dependencies)
    assert not [p for p in doc["sys_path"] if p and Path(p).resolve() in tree]
    assert (doc["software"], doc["hardware"], doc["tier"]) == (42, -4, "hardware")


def _modules(folder: Path) -> list[str]:
    return sorted(
        p.name
        for p in folder.iterdir()
        if (p / "juggle.toml").is_file() or (p / "comodule.xml").is_file()
    )


def test_every_shipped_example_module_installs_from_the_fresh_install(fresh: FreshInstall) -> None:
    examples = fresh.site_packages / "juggle" / "examples" / "modules"
    shipped = _modules(examples)
    in_tree = _modules(ROOT / "src" / "juggle" / "examples" / "modules")
    assert shipped == in_tree and "tdes" in shipped
    for name in shipped:
        proc = fresh.run(fresh.juggle, "module", "validate", examples / name, "--import", "--json")
        assert proc.returncode == 0, f"{name}: {proc.stderr}"
        doc = json.loads(proc.stdout)
        assert doc["valid"] is True and doc["imported"] is True, name
        assert all(s["bitstreams"] for s in doc["services"] if "hardware" in s["tiers"]), name
