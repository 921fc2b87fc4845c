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
import zipfile
from fnmatch import fnmatch
from pathlib import Path

import pytest

from fresh_install_support import NOT_SOURCE, ROOT, FreshInstall, fresh_install

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


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> FreshInstall:
    """The session's fresh, non-editable install (shared with tests/test_readme_snippets.py)."""
    return fresh_install(tmp_path_factory)


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
