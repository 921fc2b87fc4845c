"""Ker-ONE's OFDM document labels every key, and T_RCFG is derived (issue 12, item 4)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from juggle.commands.simulate.ofdm import register
from juggle.errors import ConfigurationError
from juggle.fabric.profiles import _builtin_dir, load_profile
from juggle.simulate.ofdm.costs import (
    TABLE5_T_RCFG_US,
    BitstreamRule,
    apply_bitstream_rule,
    derive_t_rcfg,
)
from juggle.simulate.ofdm.experiment import OfdmConfig, run_ofdm

LABELS = {"measured", "modeled", "input", "calibrated"}
ZED_TEXT = (_builtin_dir() / "zedboard.toml").read_text()
PCAP_BYTES_PER_US = 400.0  # the profile's port: 4 B per 100 MHz cycle


def _cli(*args: str) -> dict[str, Any]:
    app, sim = typer.Typer(), typer.Typer()
    app.add_typer(sim, name="simulate")
    register(sim)
    out = CliRunner().invoke(app, ["simulate", "ofdm", *args])
    assert out.exit_code == 0, out.output
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


@pytest.fixture(scope="module")
def modeled_only() -> dict[str, Any]:
    return _cli("--json", "--modeled-only", "--seed", "3", "--duration", "0.3")


def test_modeled_only_json_labels_every_key(modeled_only: dict[str, Any]) -> None:
    labels = modeled_only["labels"]
    keys = set(modeled_only) - {"labels", "how"}
    assert keys == set(labels)
    assert set(labels.values()) <= LABELS
    assert "measured" not in labels.values()  # --modeled-only: nothing measured is left
    # what is copied from the paper reads as input, not as a modeled result
    for key in ("delta_pre_us", "hardware_frame_us", "kernel_overhead_us"):
        assert labels[key] == "input", key
    assert labels["software_frame_us_paper"] == "input"
    for key in ("t_rcfg_us", "t_rcfg_derivation", "wcet_us", "path_overhead_us", "paths"):
        assert labels[key] == "modeled", key
    for key in ("t_rcfg_us", "delta_pre_us", "hardware_frame_us", "path_overhead_us"):
        assert modeled_only["how"][key], key
    for entry in modeled_only["t_rcfg_derivation"].values():
        assert set(entry) - {"labels"} == set(entry["labels"])
        assert set(entry["labels"].values()) <= LABELS


def test_full_document_labels_the_measured_keys() -> None:
    doc = _cli("--json", "--seed", "3", "--duration", "0.3")
    labels = doc["labels"]
    assert set(doc) - {"labels", "how"} <= set(labels)
    assert labels["measured"] == "measured"
    for key in doc["paths"]["path1"]:
        if key.endswith("_measured"):
            assert labels[f"paths.*.{key}"] == "measured"


def test_t_rcfg_is_derived_from_bitstream_sizes_with_its_deviation(
    modeled_only: dict[str, Any],
) -> None:
    rule = load_profile("zedboard").scenario["bitstream_rule"]
    full, shares = rule["full_bitstream_bytes"], rule["region_share_pct"]
    assert full == 4_045_564 and shares == {"prr1": 2.0, "prr2": 8.0, "prr3": 13.0}
    derivation = modeled_only["t_rcfg_derivation"]
    for region, entry in derivation.items():
        size = round(shares[region] / 100 * full)
        assert entry["bitstream_bytes"] == size
        t_us = math.ceil(size / 4) * 4 / PCAP_BYTES_PER_US  # whole 32-bit words
        assert entry["t_rcfg_us"] == pytest.approx(t_us, abs=1e-3)
        assert modeled_only["t_rcfg_us"][region] == entry["t_rcfg_us"]
        paper = TABLE5_T_RCFG_US[region]
        assert entry["paper_us"] == paper
        assert entry["deviation_pct"] == round((entry["t_rcfg_us"] - paper) / paper * 100, 1)
        assert entry["labels"]["t_rcfg_us"] == "modeled"
        assert entry["labels"]["paper_us"] == "input"
    # the deviations are shown, not hidden: 202 / 809 / 1,315 us against 231 / 810 / 1,206
    assert [derivation[r]["deviation_pct"] for r in ("prr1", "prr2", "prr3")] == [
        -12.4,
        -0.1,
        9.0,
    ]
    # Table 5's prr3 lies outside what 12.5-13.5 % of the device would take
    assert derivation["prr1"]["paper_within_share_interval"] is True
    assert derivation["prr3"]["paper_within_share_interval"] is False
    # the WCET uses the derived T_RCFG
    assert modeled_only["wcet_detail"]["fft1024"]["t_rcfg_wcet_us"] == 1314.81


def test_the_simulation_follows_the_rule_not_the_typed_sizes(tmp_path: Path) -> None:
    # same typed bitstream_bytes, another share for prr2: T_RCFG follows the share
    text = ZED_TEXT.replace("prr2 = 8.0", "prr2 = 6.0")
    assert text != ZED_TEXT
    path = tmp_path / "zed6.toml"
    path.write_text(text)
    profile = load_profile(path)
    assert profile.region("prr2").bitstream_bytes == 323_645  # unchanged in the file
    derived = derive_t_rcfg(profile)["prr2"]
    assert derived.bitstream_bytes == round(0.06 * 4_045_564)
    assert derived.paper_us is None and derived.deviation_pct is None  # nothing to compare
    result = run_ofdm(3, 0.2, config=OfdmConfig(profile=str(path)), software_repeats=0)
    doc = result.to_json(include_measured=False)
    assert doc["t_rcfg_us"]["prr2"] == derived.t_rcfg_us != 809.12
    assert doc["labels"]["t_rcfg_us"] == "modeled"


def test_the_profile_sizes_are_the_rules_output() -> None:
    profile = load_profile("zedboard")
    ruled = apply_bitstream_rule(profile)
    assert [r.bitstream_bytes for r in ruled.regions] == [
        r.bitstream_bytes for r in profile.regions
    ]
    rule = BitstreamRule.from_profile(profile)
    assert rule is not None and rule.bytes_for(13.0) == 525_923


def test_without_a_rule_the_sizes_are_inputs() -> None:
    profile = load_profile("xupv2p")
    assert BitstreamRule.from_profile(profile) is None
    (entry,) = derive_t_rcfg(profile).values()
    assert entry.label == "input" and entry.share_pct is None
    assert apply_bitstream_rule(profile) is profile


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        ("full_bitstream_bytes = 4_045_564", "full_bitstream_bytes = 0", "full_bitstream"),
        ("prr3 = 13.0 }", "prr9 = 13.0 }", "prr9"),
        ("prr3 = 13.0 }", "prr3 = 130.0 }", "share of 'prr3'"),
        ("prr3 = 13.0 }", "prr3 = 14.0 }", "max_bitstream_bytes"),
    ],
)
def test_a_malformed_rule_is_refused(tmp_path: Path, old: str, new: str, match: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(ZED_TEXT.replace(old, new))
    with pytest.raises(ConfigurationError, match=match):
        apply_bitstream_rule(load_profile(path))
