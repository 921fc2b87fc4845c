"""``Framework.install`` finds a shipped example module by name, as ``juggle profile`` does;
a path that exists always wins over the name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import juggle
from juggle.errors import ModuleError
from juggle.runtime.installer import find_module
from juggle.shipped import example_module


def test_a_bare_name_installs_the_shipped_example(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # nothing called "tdes" here
    with juggle.Framework("xupv2p") as fw:
        module = fw.install("tdes")
        assert module.name == "tdes"
        assert Path(module.source.location) == example_module("tdes")


def test_a_path_that_exists_wins_over_the_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(example_module("crc32"), tmp_path / "tdes")  # a folder named like an example
    monkeypatch.chdir(tmp_path)
    assert find_module("tdes") == "tdes"
    with juggle.Framework("xupv2p") as fw:
        assert fw.install("tdes").name == "crc32"


def test_a_name_that_is_neither_says_which_examples_there_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with juggle.Framework("xupv2p") as fw:
        with pytest.raises(ModuleError) as caught:
            fw.install("tdse")
        assert fw.modules() == ()
    assert "'tdse'" in str(caught.value) and "tdes" in str(caught.value)
    assert caught.value.path == "tdse"
    # a path with a folder part is a path, never a name
    assert find_module("nowhere/tdes") == "nowhere/tdes"


def test_the_installer_hints_at_a_module_installed_but_not_started() -> None:
    with juggle.Framework("xupv2p") as fw:
        installer = fw._installer  # the framework adds the hint to get_service's error
        assert installer.start_hint("EncryptionService") is None  # nothing installed
        module = fw.install("tdes")
        for name in ("EncryptionService", "crypto.EncryptionService"):
            hint = installer.start_hint(name)
            assert hint is not None and "'tdes' (id 1)" in hint and "not started" in hint
        assert installer.start_hint("AddService") is None  # tdes does not offer it
        module.start()
        assert installer.start_hint("EncryptionService") is None  # started: no hint


def test_get_service_before_start_says_to_start_the_module() -> None:
    with juggle.Framework("xupv2p") as fw:
        module = fw.install("tdes")
        with pytest.raises(juggle.ServiceUnavailableError, match="start") as caught:
            fw.get_service("EncryptionService")
        assert "tdes" in str(caught.value)
        module.start()
        assert fw.get_service("EncryptionService") is not None
