"""``juggle simulate cluster``: the virtual-time cluster model on hand-made traces (routing,
spill, loads), the policies' comparison on seeded traces, its inputs' refusals, the command,
and one seed of the issue's 256-board scale (all five seeds with their wall-time budget:
``python -m juggle.simulate.cluster.scale``, ~10 s a seed on 2 cores)."""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from juggle.commands.cli import _register_scenarios, app
from juggle.core.cluster import (
    ClusterPlacement,
    NodeView,
    PerBoardPlacement,
    Placement,
    StaticPlacement,
)
from juggle.errors import ConfigurationError, InputLimitError, ProfileError
from juggle.fabric.profiles import load_profile
from juggle.simulate.cluster import ClusterConfig, run_cluster, scale, simulate
from juggle.simulate.cluster.model import reconfig_us
from juggle.simulate.cluster.trace import CallTrace, ServiceCosts

KV260 = load_profile("kv260")


def unlabeled(doc: Any) -> list[str]:
    """THE RULE of tests/test_json_labels.py (defined once, in tests/labels_support.py)."""
    spec = importlib.util.spec_from_file_location(
        "_labels_support", Path(__file__).parents[1] / "labels_support.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out: list[str] = module.unlabeled(doc)
    return out


LOAD_S = reconfig_us(KV260) / 1e6


def trace(calls: list[tuple[float, int, int]]) -> CallTrace:
    """A hand-made trace of ``(time_s, node, service)``; remote picks always the first
    holder."""
    calls = sorted(calls)
    zeros = [0.0] * len(calls)
    return CallTrace(
        [t for t, _, _ in calls], [n for _, n, _ in calls], [s for _, _, s in calls], zeros, zeros
    )


def costs(sw: float, hw: float, hop: float) -> ServiceCosts:
    """One service: ``sw``/``hw`` µs a call, ``hop`` µs to another board."""
    return ServiceCosts([1024], [sw], [hw], [hop])


def test_a_region_load_is_the_profiles_config_port_time() -> None:
    """kv260: 2,705,000 B through a 4-byte, 100 MHz PCAP, plus two 1 us bridge switches."""
    assert reconfig_us(KV260) == pytest.approx(2_705_000 / 4 / 100e6 * 1e6 + 2 * 1.0)


def test_hardware_serves_only_after_the_first_period_and_the_load() -> None:
    """One node calling one service every 100 us for 0.2 s: the cluster policy places it at
    the first period (0.05 s) and the region serves from 0.05 s + one load on; every call
    before runs in software."""
    cfg = ClusterConfig(nodes=1, services=1, duration_s=0.2)
    calls = [(i * 1e-4, 0, 0) for i in range(2000)]
    result = simulate(cfg, KV260, costs(100.0, 10.0, 50.0), trace(calls), ClusterPlacement())
    before = sum(1 for t, _, _ in calls if t < 0.05 + LOAD_S)
    assert result.reconfigurations == 1
    assert result.hardware_fraction == pytest.approx((2000 - before) / 2000)
    assert result.max_us == 100.0  # software, never worse
    assert result.remote_fraction == 0.0


def test_a_burst_spills_to_software_when_the_region_queue_is_longer_than_software() -> None:
    """A burst of 200 calls 1 us apart at a region that takes 10 us each: a call joins the
    region's queue while waiting + 10 us beats software's 100 us, else it spills to software.
    The first ~10 fill the queue (each adds 10 us, time moves 1 us); then the queue drains
    1 us per arrival and one call in ten gets in: about 10 + 190 / 10 = 29 in hardware. No
    call takes longer than software."""
    cfg = ClusterConfig(nodes=1, services=1, duration_s=0.2)
    steady = [(i * 1e-4, 0, 0) for i in range(1000)]  # up to 0.1 s
    burst = [(0.15 + i * 1e-6, 0, 0) for i in range(200)]
    result = simulate(
        cfg, KV260, costs(100.0, 10.0, 50.0), trace(steady + burst), ClusterPlacement()
    )
    served_before = sum(1 for t, _, _ in steady if t >= 0.05 + LOAD_S)
    burst_hw = result.hardware_fraction * 1200 - served_before
    assert 27 <= round(burst_hw) <= 31
    assert result.max_us <= 100.0


@pytest.mark.parametrize(("hop", "remote"), [(50.0, True), (95.0, False)])
def test_remote_callers_use_a_region_on_another_board_only_when_it_is_faster(
    hop: float, remote: bool
) -> None:
    """Node 0 calls the service more, so its region holds it; node 1's calls go there when
    hardware + hop (10 + ``hop`` us) beats software (100 us)."""
    cfg = ClusterConfig(nodes=2, services=1, duration_s=0.2, rtt_us=0.0)
    calls = [(i * 1e-4, 0, 0) for i in range(2000)] + [(i * 3e-4, 1, 0) for i in range(600)]
    result = simulate(cfg, KV260, costs(100.0, 10.0, hop), trace(calls), ClusterPlacement())
    assert result.reconfigurations == 1
    assert (result.remote_fraction > 0.1) is remote
    assert result.max_us == 100.0


def test_every_policy_runs_the_same_trace() -> None:
    """Static loads once; per-board loads the service on both boards; no call slower than
    software under any policy."""
    cfg = ClusterConfig(nodes=2, services=1, duration_s=0.2)
    calls = [(i * 1e-4, n, 0) for i in range(2000) for n in (0, 1)]
    service = costs(100.0, 10.0, 500.0)
    static = simulate(cfg, KV260, service, trace(calls), StaticPlacement())
    board = simulate(cfg, KV260, service, trace(calls), PerBoardPlacement())
    assert (static.reconfigurations, board.reconfigurations) == (1, 2)
    assert static.calls == board.calls == 4000
    assert board.hardware_fraction > static.hardware_fraction  # node 1 has its own region


class Scripted:
    """A policy that asks for given placements at given decision times."""

    name = "scripted"

    def __init__(self, script: dict[float, list[Placement]]) -> None:
        self.script = script

    def decide(self, nodes: Sequence[NodeView], now: float) -> list[Placement]:
        return next((p for t, p in self.script.items() if abs(t - now) < 1e-9), [])


def two_services(sw: float = 100.0, hw: float = 10.0) -> ServiceCosts:
    return ServiceCosts([1024, 1024], [sw, sw], [hw, hw], [50.0, 50.0])


def test_a_board_loads_one_region_at_a_time() -> None:
    """Two loads asked at 0.05 s on one board: the second region serves from 0.05 s + two
    loads on (one config port)."""
    cfg = ClusterConfig(nodes=1, services=2, duration_s=0.2)
    policy = Scripted(
        {0.05: [Placement("node0000", "svc00000", True), Placement("node0000", "svc00001", True)]}
    )
    calls = [(i * 1e-4 + 3e-7, 0, 1) for i in range(2000)]
    result = simulate(cfg, KV260, two_services(), trace(calls), policy)
    assert result.reconfigurations == 2
    served = sum(1 for t, _, _ in calls if t >= 0.05 + 2 * LOAD_S)
    assert result.hardware_fraction == pytest.approx(served / len(calls))


def test_a_region_drains_its_calls_before_it_loads_another_service() -> None:
    """svc0's region has 8 calls of 10 us queued from 0.09995 s (busy until 0.10003 s) when it
    is given to svc1 at 0.1 s: the load starts when the queue is drained, so svc1 is served
    from 0.10003 s + one load on."""
    cfg = ClusterConfig(nodes=1, services=2, duration_s=0.2)
    policy = Scripted(
        {
            0.05: [Placement("node0000", "svc00000", True)],
            0.1: [
                Placement("node0000", "svc00000", False),
                Placement("node0000", "svc00001", True),
            ],
        }
    )
    burst = [(0.09995 + i * 1e-8, 0, 0) for i in range(8)]
    calls = [(0.1 + i * 1e-5 + 3e-7, 0, 1) for i in range(9000)]
    result = simulate(cfg, KV260, two_services(), trace(burst + calls), policy)
    drained = 0.09995 + 8 * 10e-6
    served = 8 + sum(1 for t, _, _ in calls if t >= drained + LOAD_S)
    assert result.hardware_fraction == pytest.approx(served / (len(calls) + 8))


@pytest.fixture(scope="module")
def small() -> dict[int, dict[str, Any]]:
    """16 boards, 200 services, 2 virtual seconds, seeds 1-5."""
    return {
        seed: run_cluster(ClusterConfig(nodes=16, services=200, seed=seed))
        for seed in (1, 2, 3, 4, 5)
    }


def test_cluster_placement_beats_per_board_on_every_seed(small: dict[int, dict[str, Any]]) -> None:
    """More calls served by hardware and a lower mean latency than per-board placement and
    than static placement, on every seed."""
    for seed, doc in small.items():
        p = doc["policies"]
        assert doc["cluster_beats_per_board"], seed
        for other in ("per-board", "static"):
            assert p["cluster"]["hardware_fraction"] > p[other]["hardware_fraction"], (seed, other)
            assert p["cluster"]["mean_us"] < p[other]["mean_us"], (seed, other)
        assert p["cluster"]["mean_us"] < doc["software_only_mean_us"]
        assert p["static"]["reconfigurations"] == 32  # 16 boards x 2 regions, loaded once


def test_the_same_seed_gives_the_same_figures(small: dict[int, dict[str, Any]]) -> None:
    again = run_cluster(ClusterConfig(nodes=16, services=200, seed=3))
    first = {k: v for k, v in small[3].items() if k != "wall_s"}
    assert {k: v for k, v in again.items() if k != "wall_s"} == first
    assert small[3]["policies"] != small[4]["policies"]


def test_every_figure_is_labeled(small: dict[int, dict[str, Any]]) -> None:
    doc = small[1]
    assert unlabeled(doc) == []
    labels = doc["labels"]
    assert labels["policies"]["cluster"]["hardware_fraction"] == "calibrated"
    assert labels["policies"]["cluster"]["calls"] == "modeled"
    assert labels["reconfig_us"] == "modeled" and labels["wall_s"] == "measured"
    assert labels["costs_per_call"]["1024"] == {
        "software_us": "calibrated",
        "hardware_us": "modeled",
        "hop_us": "modeled",
    }


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("nodes", 0),
        ("services", 0),
        ("duration_s", math.nan),
        ("duration_s", -1.0),
        ("calls_per_s", math.inf),
        ("locality", 1.5),
        ("utilization", 0.0),
        ("margin", -0.1),
        ("window_periods", 0),
    ],
)
def test_bad_inputs_are_refused_by_name(field: str, value: float) -> None:
    with pytest.raises(ConfigurationError) as err:
        run_cluster(ClusterConfig(**{field: value}))  # type: ignore[arg-type]
    assert field in str(err.value)
    assert err.value.value == value or (math.isnan(value) and math.isnan(err.value.value))  # type: ignore[arg-type]


def test_too_large_a_run_and_an_unknown_board_are_refused() -> None:
    with pytest.raises(InputLimitError):
        run_cluster(ClusterConfig(nodes=4096, calls_per_s=1e4, duration_s=10.0))
    with pytest.raises(ProfileError):
        run_cluster(ClusterConfig(board="no-such-board"))


def test_the_command_prints_a_table_and_json_and_fails_with_status_2() -> None:
    _register_scenarios()
    runner = CliRunner()
    small_run = ["simulate", "cluster", "--nodes", "4", "--services", "20", "--duration", "0.3"]
    text = runner.invoke(app, small_run)
    assert text.exit_code == 0, text.output
    assert "cluster" in text.stdout and "per-board" in text.stdout and "CALIBRATED" in text.stdout
    doc = json.loads(runner.invoke(app, [*small_run, "--json"]).stdout)
    assert doc["inputs"]["nodes"] == 4 and set(doc["policies"]) == {
        "static",
        "per-board",
        "cluster",
    }
    bad = runner.invoke(app, ["simulate", "cluster", "--nodes", "0", "--json"])
    assert bad.exit_code == 2
    assert json.loads(bad.stdout)["type"] == "ConfigurationError"


def test_at_scale_cluster_placement_serves_more_from_hardware() -> None:
    """One seed of the issue's scale check (256 boards, 2,000 services; the other seeds and
    the wall-time budget: ``python -m juggle.simulate.cluster.scale``)."""
    doc = run_cluster(ClusterConfig(nodes=256, services=2000, seed=1))
    p = doc["policies"]
    assert p["cluster"]["hardware_fraction"] > p["per-board"]["hardware_fraction"]
    assert p["cluster"]["mean_us"] < p["per-board"]["mean_us"]
    assert p["static"]["reconfigurations"] == 512


def test_the_scale_check_passes_and_fails_as_it_should(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m juggle.simulate.cluster.scale`` on a small cluster: one line per seed, exit
    0; with a budget no run can meet, exit 1; a bad seed range is a usage error."""
    assert scale.main(["--nodes", "4", "--services", "20", "--seeds", "1-2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["seed 1", "seed 2"]
    assert all(line.endswith("ok") for line in lines)
    assert scale.main(["--nodes", "4", "--services", "20", "--seeds", "3", "--budget-s", "0"]) == 1
    assert capsys.readouterr().out.rstrip().endswith("FAILED")
    assert scale.parse_seeds("1,4") == [1, 4]
    with pytest.raises(SystemExit) as usage:
        scale.main(["--seeds", "5-1"])
    assert usage.value.code == 2
