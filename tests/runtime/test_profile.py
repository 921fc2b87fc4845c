"""``juggle profile``: every tier on the same inputs, a differential check, the cost split."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from juggle.commands.profile import register, render_profile
from juggle.errors import ConfigurationError, ServiceUnavailableError
from juggle.fabric.fabric import open_fabric
from juggle.profile import Call, ProfileWorkload, profile_service, workload_for
from juggle.services.crypto.model import TdesCore

ROOT = Path(__file__).resolve().parents[2]
MODULES = ROOT / "examples" / "modules"
LABELS = {"measured", "modeled", "input", "calibrated"}
FAST = {"rounds": 2, "round_ms": 1.0}
runner = CliRunner()


def app() -> typer.Typer:
    juggle = typer.Typer()
    register(juggle)
    juggle.callback()(lambda: None)
    return juggle


def _labeled(tier: dict[str, Any]) -> None:
    """Every number of a tier's report has a label among the four."""
    labels = tier["labels"]
    for key in ("interface_us", "core_us", "total_us", "gain"):
        assert labels[key] in LABELS, key
    for part in ("interface", "core"):
        for key, value in tier[part].items():
            if value is not None:
                assert labels[f"{part}.{key}"] in LABELS, f"{part}.{key}"


def test_tdes_json_has_every_tier_agreeing_and_the_split() -> None:
    result = runner.invoke(app(), ["profile", str(MODULES / "tdes"), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["agree"] is True and doc["modules"] == ["tdes"] and doc["backend"] == "sim"
    [service] = doc["services"]
    assert service["agree"] is True and service["disagreements"] == []
    tiers = service["tiers"]
    assert list(tiers) == ["software", "native", "hardware"]
    for tier in tiers.values():
        _labeled(tier)
        assert tier["total_us"] == pytest.approx(tier["interface_us"] + tier["core_us"], abs=1e-3)
        assert tier["interface"]["proxy_us"] >= 0 and tier["core_us"] > 0
    for soft in ("software", "native"):
        assert tiers[soft]["labels"]["total_us"] == "measured"
    assert tiers[service["slowest_tier"]]["gain"] == 1.0
    hw = tiers["hardware"]
    assert hw["labels"]["total_us"] == "modeled" and hw["labels"]["core.cycles"] == "modeled"
    # one 8-byte block: DATA0/1 + CONTROL written (xupv2p: 5-cycle writes), STATUS polled
    # until the 48-cycle core is done (8-cycle reads: at +8, +16, ... +48), RESULT0/1 read
    assert hw["core"]["cycles"] == TdesCore.latency
    assert (hw["interface"]["bus_writes"], hw["interface"]["bus_reads"]) == (3, 8)
    assert hw["interface"]["bus_cycles"] == 3 * 5 + 8 * 8 - TdesCore.latency
    assert hw["interface"]["driver_us"] > 0 and hw["simulator_us"] > 0
    assert hw["wall_us"] > hw["interface"]["driver_us"]  # the wall clock pays the simulator
    assert service["workload"]["checks"] == 16 and service["workload"]["label"] == "input"


def test_an_interface_name_profiles_the_shipped_services_a_filter_selects() -> None:
    doc = profile_service("EncryptionService", filter="(algorithm=aes)", **FAST)
    assert doc["agree"] is True and sorted(doc["modules"]) == ["aes", "des", "tdes"]
    [service] = doc["services"]
    assert service["properties"]["algorithm"] == "aes"
    hw = service["tiers"]["hardware"]
    assert hw["core"]["cycles"] == 11  # ThumbPod's core: Nr + 1 cycles per block
    # 4 data words + CONTROL at 5 cycles; 2 STATUS polls (8-cycle reads, the 11-cycle core is
    # done at the second) + 4 result words at 8 cycles; less the 11 core cycles they hide
    assert (hw["interface"]["bus_writes"], hw["interface"]["bus_reads"]) == (5, 6)
    assert hw["interface"]["bus_cycles"] == 5 * 5 + 6 * 8 - 11
    assert service["workload"]["timed"] == "encrypt(16 bytes, 16)"


def test_a_stateful_per_consumer_service_and_a_two_service_module_agree() -> None:
    audio = profile_service("audio", **FAST)
    [decoder] = audio["services"]
    assert decoder["agree"] is True and list(decoder["tiers"]) == ["software", "hardware"]
    assert decoder["tiers"]["hardware"]["core"]["operations"] == 128  # 64 bytes, 2 codes each
    math = profile_service(MODULES / "math", vectors=2, **FAST)
    assert [s["interface"] for s in math["services"]] == ["math.AddService", "math.MulService"]
    assert math["agree"] is True
    assert [s["tiers"]["hardware"]["core"]["cycles"] for s in math["services"]] == [1, 4]


def _broken_math(tmp_path: Path) -> Path:
    module = tmp_path / "math"
    shutil.copytree(MODULES / "math", module)
    code = module / "math" / "__init__.py"
    code.write_text(
        code.read_text()
        + "\n\nclass MathAddImpl(SoftwareAdd):  # off by one on purpose\n"
        + "    def add(self, a, b):\n"
        + "        return super().add(a, b) + 1\n"
    )
    return module


def test_a_tier_that_computes_differently_fails_the_check(tmp_path: Path) -> None:
    module = _broken_math(tmp_path)
    result = runner.invoke(
        app(), ["profile", str(module), "--json", "--rounds", "1", "--round-ms", "1"]
    )
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["agree"] is False
    add, mul = doc["services"]
    assert add["agree"] is False and mul["agree"] is True
    problem = add["disagreements"][0]
    assert problem["tiers"] == ["software", "hardware"] and problem["call"].startswith("add(")


def test_garbage_from_the_core_fails_the_check() -> None:
    fabric = open_fabric("xupv2p")
    fabric.faults.arm("core_garbage")
    doc = profile_service(MODULES / "tdes", fabric=fabric, **FAST)
    [service] = doc["services"]
    assert service["agree"] is False
    assert {p["why"] for p in service["disagreements"]} == {"results differ"}


def test_calls_served_by_the_software_fallback_do_not_count_as_agreeing() -> None:
    fabric = open_fabric("xupv2p")
    fabric.faults.arm("driver_error")  # the first hardware access raises: a contained fault
    doc = profile_service(MODULES / "math", filter="(objectClass=math.AddService)", fabric=fabric)
    [service] = doc["services"]
    assert service["agree"] is False
    problem = service["disagreements"][0]
    assert problem["tier"] == "hardware" and "software fallback" in problem["why"]
    assert "error" in service["tiers"]["hardware"]
    assert service["tiers"]["software"]["gain"] == 1.0
    out = io.StringIO()
    render_profile(doc, Console(file=out, width=120))
    assert "DISAGREE" in out.getvalue() and "not timed" in out.getvalue()


def test_a_tier_that_cannot_be_entered_is_reported_not_compared() -> None:
    fabric = open_fabric("xupv2p")
    fabric.faults.arm("driver_error")  # fires while the key is carried onto the core
    doc = profile_service(MODULES / "aes", fabric=fabric, **FAST)
    [service] = doc["services"]
    assert service["agree"] is False
    problem = service["disagreements"][0]
    assert problem["tier"] == "hardware" and "could not serve" in problem["why"]
    assert "injected fault" in service["tiers"]["hardware"]["error"]
    assert service["tiers"]["native"]["gain"] >= 1.0  # against the slowest tier that served


def test_the_table_shows_each_tier_its_parts_and_the_verdict() -> None:
    result = runner.invoke(app(), ["profile", "aes", "--rounds", "1", "--round-ms", "1"])
    assert result.exit_code == 0, result.output
    for text in ("software", "native", "hardware", "agree", "modeled", "measured"):
        assert text in result.stdout


def test_bad_targets_and_options_are_refused_naming_the_value() -> None:
    result = runner.invoke(app(), ["profile", "nonesuch"])
    assert result.exit_code == 2 and "'nonesuch'" in result.output
    result = runner.invoke(app(), ["profile", str(MODULES / "aes"), "--size", "24"])
    assert result.exit_code == 2 and "24" in result.output
    with pytest.raises(ServiceUnavailableError, match="matches"):
        profile_service(MODULES / "aes", filter="(algorithm=des)", **FAST)
    with pytest.raises(ConfigurationError, match="rounds"):
        profile_service(MODULES / "aes", rounds=0)
    with pytest.raises(ConfigurationError, match="round_ms"):
        profile_service(MODULES / "aes", round_ms=0)
    with pytest.raises(ConfigurationError, match="no built-in workload"):
        workload_for("my.Service")
    with pytest.raises(ConfigurationError, match="algorithm"):
        workload_for("crypto.EncryptionService", {"algorithm": "rc4"})


def test_workloads_are_seeded_and_sized_per_cipher() -> None:
    aes = workload_for("EncryptionService", {"algorithm": "aes"}, seed=3, vectors=2, size=32)
    assert aes == workload_for(
        "EncryptionService", {"algorithm": "aes"}, seed=3, vectors=2, size=32
    )
    assert aes != workload_for(
        "EncryptionService", {"algorithm": "aes"}, seed=4, vectors=2, size=32
    )
    assert [len(c.args[0]) for c in aes.checks] == [32] * 4 and len(aes.setup[0].args[0]) == 16
    tdes = workload_for("crypto.EncryptionService", {"algorithm": "tdes"})
    assert len(tdes.setup[0].args[0]) == 24 and tdes.timed.args[1] == 8
    fresh = aes.timed.fresh_args()
    assert fresh[0] == aes.timed.args[0] and fresh[0] is not aes.timed.args[0]


def test_a_workload_of_ones_own_replaces_the_built_in_one() -> None:
    checks = (Call("mul", (6, 7)), Call("mul", (-3, 3)))
    mine = ProfileWorkload((), checks, Call("mul", (2, 2)), "mine")
    doc = profile_service(
        MODULES / "math", filter="(objectClass=math.MulService)", workload=mine, **FAST
    )
    [service] = doc["services"]
    assert service["agree"] is True and service["workload"]["timed"] == "mul(2, 2)"
    assert service["workload"]["checks"] == 2
