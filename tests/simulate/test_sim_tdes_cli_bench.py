"""``simulate tdes`` (Juggle Fig 7), the commands, and the simulator's speed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from juggle.bench import sim
from juggle.commands.simulate import router, tdes
from juggle.errors import ConfigurationError
from juggle.simulate.tdes.model import SIZES, TierCosts, run_tdes


def app() -> typer.Typer:
    simulate = typer.Typer()
    router.register(simulate)
    tdes.register(simulate)
    simulate.callback()(lambda: None)
    return simulate


def test_proxied_hardware_is_as_fast_as_direct_from_64_bytes() -> None:
    doc = run_tdes()
    assert doc["sizes"] == list(SIZES) and doc["sizes"][0] == 8 and doc["sizes"][-1] == 65536
    ratio = dict(zip(doc["sizes"], doc["proxied_vs_direct"], strict=True))
    assert ratio[8] < 0.9 and ratio[32] < 0.9  # the proxy's static overhead shows
    assert all(r >= 0.9 for size, r in ratio.items() if size >= 64)
    assert doc["proxied_as_fast_from"] == 64
    big = dict(zip(doc["sizes"], doc["proxied_vs_software"], strict=True))
    assert 15 <= big[64] <= 25  # "a factor of almost 20" over the best Java service
    throughput = doc["throughput_mb_s"]
    assert all(
        throughput["native"][i] > throughput["software"][i] for i in range(len(doc["sizes"]))
    )


def test_a_heavier_proxy_moves_the_break_even_point() -> None:
    slow = run_tdes(costs=TierCosts(proxy_cycles=2_000, jni_cycles=2_000))
    assert slow["proxied_as_fast_from"] is not None and slow["proxied_as_fast_from"] > 64
    with pytest.raises(ConfigurationError, match="multiple of 8"):
        run_tdes(sizes=[12])


def test_tdes_command_prints_one_json_document_or_a_table() -> None:
    runner = CliRunner()
    result = runner.invoke(app(), ["tdes", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.output)["modeled"] is True
    table = runner.invoke(app(), ["tdes"])
    assert table.exit_code == 0 and "CALIBRATED" in table.output and "64 KiB" in table.output


def test_edge_router_command_json_table_plot_and_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        app(), ["edge-router", "--experiment", "table4", "--json", "--seed", "2"]
    )
    assert result.exit_code == 0
    doc = json.loads(result.output)
    assert doc["experiment"] == "table4" and doc["seed"] == 2 and len(doc["cells_us"]) == 12
    png = tmp_path / "t4.png"
    table = runner.invoke(app(), ["edge-router", "--plot", str(png)])
    assert table.exit_code == 0 and "Table 4" in table.output and png.exists()
    bad = runner.invoke(app(), ["edge-router", "--experiment", "fig9"])
    assert bad.exit_code == 2 and "unknown experiment 'fig9'" in bad.output


def test_simulator_speed_packet_level_events_and_fluid_under_its_own_name() -> None:
    figures = sim.run(quick=True)
    assert set(figures) == set(sim.LABELS) and "sim_packets_per_s" not in figures
    assert set(sim.LABELS.values()) <= {"measured", "modeled", "input", "calibrated"}
    # the fluid model: the old figure, named for what it is
    assert figures["sim_fluid_packets"] > 50_000
    assert figures["sim_fluid_packets_per_s"] > 0  # its target is a benchmark, not a test
    assert figures["sim_fluid_steps"] >= figures["sim_fluid_virtual_s"] * 1e6 / 50.0
    # the packet-level run: several events a packet, and its makespan agrees with the fluid's
    assert figures["sim_event_packets"] > 10_000
    assert figures["sim_events"] >= 5 * figures["sim_event_packets"]
    assert figures["sim_events_per_s"] > figures["sim_event_packets_per_s"] > 0
    assert abs(figures["sim_fluid_vs_packet_makespan_pct"]) < 2.0


def test_packet_level_run_serves_every_packet_in_order_of_its_costs() -> None:
    import numpy as np

    from juggle.simulate.router.model import load_router_model

    model = load_router_model()
    flows = np.array([0, 1, 2, 1], dtype=np.int8)
    at_zero = np.zeros(4)
    one = sim.run_packet_level(model, flows[:1], at_zero[:1])
    assert one.packets == 1 and one.makespan_us == pytest.approx(
        model.flow_cycles[0] / model.params.processor_clock_mhz
    )
    des = sim.run_packet_level(model, flows[1:2], at_zero[:1])
    assert des.makespan_us == pytest.approx(
        model.flow_cycles[1] / model.params.processor_clock_mhz + model.des_us
    )
    run = sim.run_packet_level(model, flows, np.array([0.0, 1.0, 2.0, 1000.0]))
    assert run.packets == 4 and run.makespan_us > 1000.0 and run.events > 4 * 4


def test_simulate_tdes_plot_writes_fig7_and_says_so(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from juggle.commands.cli import _register_scenarios, app

    _register_scenarios()
    target = tmp_path / "fig7.png"
    result = CliRunner().invoke(app, ["simulate", "tdes", "--plot", str(target)])
    assert result.exit_code == 0, result.output
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and target.stat().st_size > 10_000
    assert f"wrote {target}" in result.stderr
    refused = CliRunner().invoke(app, ["simulate", "tdes", "--energy", "--plot", str(target)])
    assert refused.exit_code == 2 and "--energy" in refused.stderr


def test_table2_resources_come_from_the_synthesis_reports_beside_the_paper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ours is each example module's resources.json, labeled as the report says; the paper's
    Table 2 is input; a report without the design is refused naming its path."""
    import juggle.simulate.tdes.model as tdes_model
    from juggle.shipped import example_module

    table = tdes_model.table2_resources()
    report = json.loads((example_module("tdes") / "resources.json").read_text())
    assert table["tdes"]["ours"]["slices"] == report["designs"]["tdes"]["resources"]["slices"]
    assert table["tdes"]["paper"] == {"slices": 1835, "flipflops": 1527, "luts": 3008, "mult18": 0}
    assert table["multiplier"]["paper"]["mult18"] == 1
    assert all(e["labels"] == {"ours": "modeled", "paper": "input"} for e in table.values())
    (tmp_path / "resources.json").write_text(json.dumps({"figure": "modeled", "designs": {}}))
    monkeypatch.setattr(tdes_model, "example_module", lambda name: tmp_path)
    with pytest.raises(ConfigurationError, match="adder") as refused:
        tdes_model.table2_resources()
    assert refused.value.path == str(tmp_path / "resources.json")
