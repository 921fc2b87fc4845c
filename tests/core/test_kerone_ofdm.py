"""The OFDM experiment (issue 3, item 8) and its command, on short runs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from juggle.commands.simulate.ofdm import register
from juggle.errors import ConfigurationError, ServiceArgumentError
from juggle.simulate.ofdm.costs import PATH_US, wcet
from juggle.simulate.ofdm.dsp import (
    FRAME_BITS,
    fft_blocks,
    measure_software,
    qam_demap,
    qam_map,
    random_frame,
    to_iq16,
)
from juggle.simulate.ofdm.experiment import OfdmConfig, OfdmResult, run_ofdm

SHORT = 1.5  # virtual seconds: enough for every path, well under a second of wall time


@pytest.fixture(scope="module")
def result() -> OfdmResult:
    return run_ofdm(7, SHORT, software_repeats=3)


def test_json_has_every_path_and_the_papers_figures(result: OfdmResult) -> None:
    doc = json.loads(json.dumps(result.to_json()))
    for p in (1, 2, 3, 4):
        entry = doc["paths"][f"path{p}"]
        assert entry["count"] > 0
        assert 0 < entry["min_us"] <= entry["mean_us"] <= entry["max_us"]
        assert entry["decision_us_measured"] > 0
    # derived from bitstream sizes (share x full bitstream, PCAP 400 MB/s); Table 5 beside
    assert doc["t_rcfg_us"] == {"prr1": 202.28, "prr2": 809.12, "prr3": 1314.81}
    assert doc["t_rcfg_derivation"]["prr2"]["paper_us"] == 810.0
    assert doc["rt_deadline_misses"] == 0 and doc["rt_jobs"] > 0
    assert doc["context_mismatches"] == 0 and doc["violations"] == 0
    assert set(doc["wcet_us"]) == {"qam16", "qam64", "fft512", "fft1024"}


def test_latencies_follow_eq6(result: OfdmResult) -> None:
    paths = result.modeled["paths"]
    # Path 1 is the fixed overhead; Path 2 adds exactly one region's T_RCFG
    assert paths["path1"]["min_us"] == paths["path1"]["max_us"] == 3.03
    assert paths["path2"]["min_us"] == round(6.76 + 202.28, 3)
    assert paths["path2"]["max_us"] == round(6.76 + 1314.81, 3)
    # Path 3 waits at most the longest δ_pre for the next consistency point
    assert paths["path3"]["preempt_max_us"] <= 47.0
    assert paths["path3"]["max_us"] <= 5.10 + 47.0 + 1e-9
    # no real-time allocation took longer than the device's Eq. 5 bound plus its queue wait
    assert paths["path4"]["max_us"] <= max(result.modeled["wcet_us"].values()) + 1e-9


def test_same_seed_same_modeled_result_other_seed_differs() -> None:
    a = run_ofdm(11, 0.6, software_repeats=0).to_json(include_measured=False)
    b = run_ofdm(11, 0.6, software_repeats=0).to_json(include_measured=False)
    c = run_ofdm(12, 0.6, software_repeats=0).to_json(include_measured=False)
    assert json.dumps(a) == json.dumps(b)
    assert a["paths"] != c["paths"]
    assert not any(k.endswith("_measured") for k in json.dumps(a).split('"'))


def test_modeled_only_document_has_no_measured_keys(result: OfdmResult) -> None:
    full = result.to_json()
    bare = result.to_json(include_measured=False)
    assert "measured" in full and "measured" not in bare
    assert "decision_us_measured" not in bare["paths"]["path1"]
    assert full["measured"]["software_frame_us_measured"]["fft1024"] > 0


def test_wcet_eq5_to_8() -> None:
    from juggle.core.taskindex import TaskIndex
    from juggle.fabric.profiles import load_profile

    index = TaskIndex.from_profile(load_profile("zedboard"))
    assert PATH_US == {1: 3.03, 2: 6.76, 3: 5.10, 4: 9.96}  # Table 4 adds up to Eq. 6
    qam16 = wcet(index, "qam16")
    assert (qam16.t_preempt_wcet_us, qam16.t_rcfg_wcet_us) == (47.0, 809.12)
    assert qam16.wcet_us == pytest.approx(9.96 + 47.0 + 809.12)
    assert wcet(index, "fft1024").wcet_us == pytest.approx(9.96 + 33.6 + 1314.81)


def test_aware_tenant_can_fall_back_to_software() -> None:
    base = run_ofdm(5, 0.8, software_repeats=0).modeled
    fallback = run_ofdm(5, 0.8, config=OfdmConfig(gp_fallback=True), software_repeats=0).modeled
    assert base["gp_software_fallbacks"] == 0
    assert fallback["gp_software_fallbacks"] > 0
    assert fallback["rt_deadline_misses"] == 0


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="duration_s"):
        run_ofdm(1, 0.0)
    with pytest.raises(ConfigurationError, match="hold_us"):
        run_ofdm(1, 0.1, config=OfdmConfig(hold_us=5.0))


def test_cli_json_and_table() -> None:
    app, sim = typer.Typer(), typer.Typer()
    app.add_typer(sim, name="simulate")
    register(sim)
    runner = CliRunner()
    out = runner.invoke(app, ["simulate", "ofdm", "--json", "--seed", "3", "--duration", "0.5"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["config"]["seed"] == 3 and doc["virtual_s"] == 0.5
    assert doc["paths"]["path1"]["count"] > 0
    again = runner.invoke(
        app, ["simulate", "ofdm", "--json", "--modeled-only", "--seed", "3", "--duration", "0.5"]
    )
    twice = runner.invoke(
        app, ["simulate", "ofdm", "--json", "--modeled-only", "--seed", "3", "--duration", "0.5"]
    )
    assert again.stdout == twice.stdout and "_measured" not in again.stdout
    table = runner.invoke(app, ["simulate", "ofdm", "--duration", "0.3"])
    assert table.exit_code == 0 and "Preempt" in table.stdout and "prr3 1315" in table.stdout
    bad = runner.invoke(app, ["simulate", "ofdm", "--duration", "-1"])
    assert bad.exit_code == 2 and "duration_s" in bad.output


# -- the software implementations ------------------------------------------------------------


@pytest.mark.parametrize("bits_per_symbol", [4, 6])
def test_qam_round_trip_and_power(bits_per_symbol: int) -> None:
    bits = random_frame(np.random.default_rng(bits_per_symbol))
    symbols = qam_map(bits, bits_per_symbol)
    assert symbols.size == -(-FRAME_BITS // bits_per_symbol)  # 4,700 for QAM16
    assert abs(np.mean(np.abs(symbols) ** 2) - 1.0) < 0.05
    assert np.array_equal(qam_demap(symbols, bits_per_symbol)[:FRAME_BITS], bits)
    assert to_iq16(symbols).dtype == np.int16


def test_qam16_gray_constellation() -> None:
    # 0000 -> (-3, -3); 0010 -> (+3, -3) with Gray levels 00,01,11,10 = -3,-1,+1,+3
    symbols = qam_map(np.array([0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1], dtype=np.uint8), 4)
    scaled = symbols * np.sqrt(10.0)
    assert np.allclose(scaled, [-3 - 3j, 3 - 3j, -1 + 1j])


def test_fft_blocks_invert() -> None:
    symbols = qam_map(random_frame(np.random.default_rng(0)), 4)
    spectra = fft_blocks(symbols, 512)
    assert spectra.shape == (10, 512)
    back = np.fft.ifft(spectra, axis=1).ravel()[: symbols.size]
    assert np.allclose(back, symbols)
    with pytest.raises(ServiceArgumentError):
        fft_blocks(symbols, 500)
    with pytest.raises(ServiceArgumentError):
        qam_map(np.zeros(8, dtype=np.uint8), 5)


def test_software_is_timed() -> None:
    times = measure_software(repeats=2)
    assert set(times) == {"qam16", "qam64", "fft512", "fft1024"}
    assert all(t > 0 for t in times.values())
