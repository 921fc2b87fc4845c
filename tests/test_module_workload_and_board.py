"""A module's own profile workload (``[services.profile]``), the board its descriptor records
(``[module] board``) and what static validation reads: the interface a module defines and the
design name of its register model.

``juggle profile examples/modules/crc32`` works from the command line (juggle has no built-in
workload for ``crc.ChecksumService``: the module declares one); ``juggle module new`` writes
both tables, so a scaffolded module profiles and validates on its own board without options.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from juggle.commands.cli import app
from juggle.errors import (
    ConfigurationError,
    DescriptorError,
    ModelRegistrationError,
    UnknownInterfaceError,
)
from juggle.profile import declared_workload, profile_service
from juggle.runtime.descriptors import ProfileSpec, parse_toml
from juggle.runtime.validate import validate_module
from juggle.shipped import example_module

runner = CliRunner()
QUICK = ["--rounds", "1", "--round-ms", "1", "--vectors", "2"]
CRC32 = example_module("crc32")


def _copy(tmp_path: Path, name: str = "crc32") -> Path:
    target = tmp_path / name
    shutil.copytree(example_module(name), target)
    return target


def test_juggle_profile_crc32_runs_the_module_s_declared_workload() -> None:
    result = runner.invoke(app, ["profile", str(CRC32), "--json", *QUICK])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (service,) = doc["services"]
    assert service["interface"] == "crc.ChecksumService" and service["agree"] is True
    assert set(service["tiers"]) == {"software", "native", "hardware"}
    workload = service["workload"]
    assert "[services.profile]" in workload["description"]
    assert workload["checks"] == 2 * 3  # 2 vectors x the 3 declared sizes
    assert workload["timed"].startswith("crc32(64 bytes, ")
    text = runner.invoke(app, ["profile", str(CRC32), *QUICK])
    assert text.exit_code == 0, text.output
    assert "agree" in text.stdout and "crc32(64 bytes" in text.stdout


def test_without_a_declared_workload_the_error_says_how_to_declare_one(tmp_path: Path) -> None:
    module = _copy(tmp_path)
    toml = module / "juggle.toml"
    text = toml.read_text()
    toml.write_text(text[: text.index("\n# the workload `juggle profile` runs")] + "\n")
    result = runner.invoke(app, ["profile", str(module), "--json", *QUICK])
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    assert doc["type"] == "ConfigurationError"
    assert "[services.profile]" in doc["error"] and "juggle.toml" in doc["error"]


def test_declared_workload_generates_each_kind_and_honours_size() -> None:
    spec = ProfileSpec(method="m", args=["bytes", "buffer", "size", "int32", "uint32"], sizes=[3])
    workload = declared_workload(spec, seed=5, vectors=2)
    assert len(workload.checks) == 2
    data, buffer, size, signed, unsigned = workload.checks[0].args
    assert isinstance(data, bytes) and len(data) == 3
    assert isinstance(buffer, bytearray) and len(buffer) == 3 and size == 3
    assert -(1 << 31) <= signed < 1 << 31 and 0 <= unsigned < 1 << 32
    assert declared_workload(spec, seed=5, vectors=2) == workload  # seeded: the same inputs
    assert len(declared_workload(spec, size=7).timed.args[0]) == 7
    with pytest.raises(ConfigurationError, match="size"):
        declared_workload(spec, size=0)
    with pytest.raises(ConfigurationError, match="vectors"):
        declared_workload(spec, vectors=0)


def test_a_bad_profile_table_is_a_descriptor_error_naming_it() -> None:
    base = (CRC32 / "juggle.toml").read_text()
    bad = base.replace('args = ["bytes", "uint32"]', 'args = ["bytes", "float"]')
    assert bad != base
    with pytest.raises(DescriptorError, match=r"profile\.args.*float"):
        parse_toml(bad, "juggle.toml")


def test_validate_checks_against_the_board_the_descriptor_records() -> None:
    zedboard = CRC32 / "zedboard.toml"
    report = validate_module(zedboard)
    assert (report["fabric"], report["fabric_from"]) == ("zedboard", "descriptor")
    assert validate_module(CRC32, fabric="xupv2p")["fabric_from"] == "argument"
    with pytest.raises(Exception, match="prr1"):  # an explicit --fabric still wins
        validate_module(zedboard, fabric="xupv2p")
    result = runner.invoke(app, ["module", "validate", str(zedboard)])
    assert result.exit_code == 0, result.output
    assert "on zedboard (the descriptor's board)" in result.stdout


def test_a_module_made_for_a_board_validates_and_profiles_there_without_options(
    tmp_path: Path,
) -> None:
    made = runner.invoke(
        app,
        [
            *("module", "new", "echo_z", "--interface", "demo.EchoService"),
            *("--fabric", "zedboard", "--target-dir", str(tmp_path)),
        ],
    )
    assert made.exit_code == 0, made.output
    module = tmp_path / "echo_z"
    descriptor = parse_toml((module / "juggle.toml").read_bytes(), "juggle.toml")
    assert descriptor.module.board == "zedboard"
    assert descriptor.services[0].profile == ProfileSpec(
        method="echo", args=["bytes"], sizes=[64, 1, 1000]
    )
    valid = runner.invoke(app, ["module", "validate", str(module), "--json"])
    assert valid.exit_code == 0, valid.output
    assert json.loads(valid.stdout)["fabric"] == "zedboard"
    doc = profile_service(module, vectors=2, rounds=1, round_ms=1.0)
    assert doc["fabric"] == "zedboard" and doc["agree"] is True


def test_static_validate_reads_the_module_s_own_interface(tmp_path: Path) -> None:
    module = _copy(tmp_path)
    toml = module / "juggle.toml"
    toml.write_text(toml.read_text().replace('"crc.ChecksumService"', '"crc.NoSuchService"'))
    with pytest.raises(UnknownInterfaceError, match="NoSuchService") as caught:
        validate_module(module)
    assert caught.value.interface == "crc.NoSuchService"
    # the interface's methods are read: a class that does not inherit them must have them
    toml.write_text(toml.read_text().replace('"crc.NoSuchService"', '"crc.ChecksumService"'))
    code = module / "crc32_module.py"
    code.write_text(
        code.read_text().replace("class SoftwareCrc32(ChecksumService):", "class SoftwareCrc32:")
    )
    validate_module(module)  # it defines crc32 itself
    crc = module / "crc.py"
    crc.write_text(
        crc.read_text() + "\n    def reset(self) -> None:\n        raise NotImplementedError\n"
    )
    with pytest.raises(DescriptorError, match="SoftwareCrc32.*lacks method.*reset"):
        validate_module(module)


def test_static_validate_checks_the_model_s_design_against_the_bitstream(
    tmp_path: Path,
) -> None:
    module = _copy(tmp_path)
    code = module / "crc32_module.py"
    code.write_text(
        code.read_text().replace('design: ClassVar[str] = "crc32"', 'design: ClassVar[str] = "crc"')
    )
    with pytest.raises(ModelRegistrationError, match="'crc'.*'crc32'") as caught:
        validate_module(module)
    assert (caught.value.design, caught.value.value) == ("crc32", "crc")
