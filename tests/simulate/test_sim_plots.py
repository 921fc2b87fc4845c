"""Figures, progress bars and announced files of the ``simulate`` commands (issue 13, item 5).

Each ``--plot`` writes a PNG and says so (``wrote PATH`` on stderr, or ``files`` in the JSON);
the figures are checked through the functions that build them (rows, bars, lines), not by
pixels. The OFDM timeline is checked for consistency against the simulation's own counts, and
the OFDM document is the same with and without the progress callback.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
import typer
from matplotlib.patches import Rectangle
from typer.testing import CliRunner

from juggle.commands.simulate.ofdm import register as register_ofdm
from juggle.commands.simulate.router import register as register_router
from juggle.commands.simulate.sort import register as register_sort
from juggle.commands.simulate.tdes import register as register_tdes
from juggle.errors import ConfigurationError
from juggle.simulate.ofdm.experiment import OfdmResult, run_ofdm
from juggle.simulate.ofdm.plot import figure_ofdm
from juggle.simulate.ofdm.shell import Interval, Timeline
from juggle.simulate.plot_files import check_png, save_png
from juggle.simulate.reconos.plot import figure_sort
from juggle.simulate.reconos.sort import run_sort
from juggle.simulate.router.experiments import run_edge_router
from juggle.simulate.tdes.model import run_tdes
from juggle.simulate.tdes.plot import figure_tdes

PNG = b"\x89PNG\r\n\x1a\n"
TTY = {"TTY_COMPATIBLE": "1"}  # rich draws its bar as on a terminal


def _app() -> typer.Typer:
    sim = typer.Typer()
    for register in (register_router, register_tdes, register_ofdm, register_sort):
        register(sim)
    sim.callback()(lambda: None)
    return sim


def _run(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner(env=env).invoke(_app(), list(args))


@pytest.fixture(scope="module")
def ofdm() -> OfdmResult:
    return run_ofdm(3, 0.3013, software_repeats=0)  # ends inside a run and a reconfiguration


# -- the OFDM timeline ----------------------------------------------------------------------


def _overlaps(intervals: list[Interval]) -> list[tuple[Interval, Interval]]:
    ordered = sorted(intervals, key=lambda i: i.start_us)
    return [(a, b) for a, b in itertools.pairwise(ordered) if b.start_us < a.end_us]


def test_ofdm_timeline_is_consistent(ofdm: OfdmResult) -> None:
    timeline = ofdm.timeline
    assert timeline is not None and timeline.regions == ("prr1", "prr2", "prr3")
    assert timeline.end_us == pytest.approx(0.3013e6)
    kinds = {i.kind for i in timeline.intervals}
    assert kinds == {"held", "run", "rcfg"}
    # what was still going on at the end is closed there, not lost
    assert {i.kind for i in timeline.intervals if i.end == "cut"} == kinds
    assert all(i.end_us == timeline.end_us for i in timeline.intervals if i.end == "cut")
    for interval in timeline.intervals:  # every interval lies within the run
        assert 0.0 <= interval.start_us < interval.end_us <= timeline.end_us, interval
    for region in timeline.regions:
        held, runs = timeline.of(region, "held"), timeline.of(region, "run")
        rcfg = timeline.of(region, "rcfg")
        assert held and runs and rcfg, region
        assert not _overlaps(held), region  # one connection at a time
        assert not _overlaps(runs), region  # one job computing at a time
        assert not _overlaps(rcfg), region
        for run in runs:  # a job computes only while its device holds the region ...
            assert any(
                h.start_us <= run.start_us
                and run.end_us <= h.end_us
                and (h.tenant, h.device) == (run.tenant, run.device)
                for h in held
            ), run
            # ... and never while the region is being reconfigured
            assert not any(r.start_us < run.end_us and run.start_us < r.end_us for r in rcfg)
    # the timeline agrees with the simulation's own counts
    assert len(timeline.preemptions) == ofdm.modeled["preemptions"] > 0
    finished = [i for i in timeline.intervals if i.kind == "rcfg" and i.end != "cut"]
    assert len(finished) == ofdm.modeled["reconfigurations"]  # counted when they finish
    stopped = [i for i in timeline.intervals if i.kind == "run" and i.end == "stopped"]
    assert 0 < len(stopped) <= len(timeline.preemptions)
    for stop in timeline.preemptions:
        assert stop.stopped_us is None or stop.ordered_us <= stop.stopped_us
        assert stop.by_tenant and stop.by_device


def test_ofdm_progress_leaves_the_document_unchanged() -> None:
    calls: list[tuple[str, int, int]] = []
    plain = run_ofdm(5, 0.4, software_repeats=0).to_json(include_measured=False)
    traced = run_ofdm(5, 0.4, software_repeats=0, progress=lambda *c: calls.append(c))
    assert traced.to_json(include_measured=False) == plain
    assert len(calls) > 10 and calls[-1][1] == calls[-1][2]
    done = [c[1] for c in calls]
    assert done == sorted(done) and all(c[2] == calls[0][2] for c in calls)


def test_ofdm_figure_draws_one_row_per_region_and_every_bar(ofdm: OfdmResult) -> None:
    timeline = ofdm.timeline
    assert timeline is not None
    fig = figure_ofdm(timeline, start_ms=2.0, span_ms=8.0)
    try:
        (ax,) = fig.axes
        assert [t.get_text() for t in ax.get_yticklabels()] == list(timeline.regions)
        assert ax.get_xlim() == (2.0, 10.0)
        drawn: dict[str, int] = {}
        for collection in ax.collections:
            gid = collection.get_gid()
            assert gid is not None
            region, kind, _ = gid.split(":")
            drawn[f"{region}:{kind}"] = drawn.get(f"{region}:{kind}", 0) + len(
                collection.get_paths()
            )
        lo, hi = 2000.0, 10000.0
        expected: dict[str, int] = {}
        for i in timeline.intervals:
            if i.start_us < hi and i.end_us > lo:
                kind = "stopped" if i.kind == "run" and i.end == "stopped" else i.kind
                expected[f"{i.region}:{kind}"] = expected.get(f"{i.region}:{kind}", 0) + 1
        assert drawn == expected and sum(expected.values()) > 20
        lines = [str(line.get_gid()) for line in ax.get_lines() if line.get_gid()]
        stops = [p.region for p in timeline.preemptions if lo <= p.ordered_us < hi]
        assert sorted(lines) == sorted(f"{r}:preempt" for r in stops)
    finally:
        plt.close(fig)
    with pytest.raises(ConfigurationError, match="plot-span-ms"):
        figure_ofdm(timeline, span_ms=0)
    with pytest.raises(ConfigurationError, match="900"):
        figure_ofdm(timeline, start_ms=900)


def test_ofdm_plot_command_writes_announces_and_keeps_the_json(tmp_path: Path) -> None:
    args = ("ofdm", "--modeled-only", "--seed", "2", "--duration", "0.05")
    target = tmp_path / "timeline.png"
    table = _run(*args, "--plot", str(target))
    assert table.exit_code == 0, table.output
    assert target.read_bytes()[:8] == PNG and target.stat().st_size > 10_000
    assert table.stderr == f"wrote {target}\n"
    again = tmp_path / "again.png"
    plain = _run(*args, "--json")
    with_plot = _run(*args, "--json", "--plot", str(again))
    assert plain.exit_code == with_plot.exit_code == 0
    assert with_plot.stderr == ""  # no bar, no "wrote" line: the file is in the document
    doc, base = json.loads(with_plot.stdout), json.loads(plain.stdout)
    assert doc.pop("files") == [str(again)] and again.read_bytes()[:8] == PNG
    assert doc["labels"].pop("files") == "input"
    assert doc == base  # the modeled results are untouched by the figure


# -- sort -----------------------------------------------------------------------------------


def test_sort_figure_stacks_sort_and_merge_per_configuration() -> None:
    calls: list[tuple[str, int, int]] = []
    result = run_sort(4096, 4, seed=1, progress=lambda *c: calls.append(c))
    assert [c[1] for c in calls] == list(range(1, 13)) and {c[2] for c in calls} == {12}
    assert [c[0] for c in calls] == ["SW"] * 4 + ["HW"] * 4 + ["SW+HW"] * 4
    fig = figure_sort(result)
    try:
        (ax,) = fig.axes
        bars = {p.get_gid(): p for p in ax.patches if isinstance(p, Rectangle) and p.get_gid()}
        assert set(bars) == {
            f"{n}:{part}" for n in ("SW", "HW", "SW+HW") for part in ("sort", "merge")
        }
        for name, run in result["runs"].items():
            sort, merge = bars[f"{name}:sort"], bars[f"{name}:merge"]
            assert sort.get_height() == pytest.approx(run["sort_ms"])
            assert merge.get_height() == pytest.approx(run["merge_ms"])
            assert merge.get_y() == pytest.approx(run["sort_ms"])  # stacked on the sort
            assert sort.get_height() > 0 and merge.get_height() > 0  # both visible
        ticks = [t.get_text() for t in ax.get_xticklabels()]
        assert [t.split("\n")[0] for t in ticks] == ["SW", "HW", "SW+HW"]
        assert "measured" in ticks[0] and "modeled" in ticks[1]
        legend = ax.get_legend()
        assert legend is not None
        assert {t.get_text() for t in legend.get_texts()} == {"sort", "merge (measured)"}
    finally:
        plt.close(fig)


def test_sort_command_plot_progress_and_quiet(tmp_path: Path) -> None:
    args = ("sort", "--size", "4096", "--chunks", "2")
    target = tmp_path / "sort.png"
    shown = _run(*args, "--plot", str(target), env=TTY)
    assert shown.exit_code == 0, shown.output
    assert target.read_bytes()[:8] == PNG
    assert "sort: SW+HW" in shown.stderr  # the bar, on stderr
    assert shown.stderr.rstrip().endswith(f"wrote {target}")
    assert "sort: SW" not in shown.stdout
    quiet = _run(*args, "--quiet", env=TTY)
    assert quiet.exit_code == 0 and quiet.stderr == ""
    as_json = _run(*args, "--json", "--plot", str(tmp_path / "j.png"), env=TTY)
    assert as_json.exit_code == 0 and as_json.stderr == ""
    assert json.loads(as_json.stdout)["files"] == [str(tmp_path / "j.png")]


# -- edge router and tdes -------------------------------------------------------------------


def test_edge_router_reports_every_run() -> None:
    calls: list[tuple[str, int, int]] = []
    run_edge_router(
        "fig3a",
        policies=["distribution", "oracle"],
        duration_scale=0.05,
        progress=lambda *c: calls.append(c),
    )
    # three points, each: static, distribution, oracle
    assert [c[1] for c in calls] == list(range(1, 10)) and {c[2] for c in calls} == {9}
    assert [c[0] for c in calls[:3]] == [
        "stability_ms 5: static",
        "stability_ms 5: distribution",
        "stability_ms 5: oracle",
    ]
    table4: list[tuple[str, int, int]] = []
    run_edge_router("table4", progress=lambda *c: table4.append(c))
    assert [c[1] for c in table4] == list(range(1, 13)) and table4[0][0] == "60/20/20 A"


def test_edge_router_command_bar_on_stderr_only_without_json(tmp_path: Path) -> None:
    shown = _run("edge-router", "--experiment", "table4", env=TTY)
    assert shown.exit_code == 0 and "edge-router table4" in shown.stderr
    assert "edge-router table4" not in shown.stdout and "Table 4" in shown.stdout
    for flag in ("--json", "--quiet"):
        silent = _run("edge-router", "--experiment", "table4", flag, env=TTY)
        assert silent.exit_code == 0 and silent.stderr == "", flag
    target = tmp_path / "t4.png"
    as_json = _run("edge-router", "--json", "--plot", str(target))
    assert as_json.exit_code == 0 and as_json.stderr == ""
    assert json.loads(as_json.stdout)["files"] == [str(target)]
    assert target.read_bytes()[:8] == PNG
    tdes = tmp_path / "fig7.png"  # (its "wrote" line: test_sim_tdes_cli_bench)
    as_json = _run("tdes", "--json", "--plot", str(tdes))
    assert as_json.exit_code == 0 and json.loads(as_json.stdout)["files"] == [str(tdes)]
    assert tdes.read_bytes()[:8] == PNG


def test_tdes_figure_draws_every_tier() -> None:
    doc = run_tdes()
    fig = figure_tdes(doc)
    try:
        labels = [line.get_label() for line in fig.axes[0].get_lines()]
        assert labels == list(doc["throughput_mb_s"])
    finally:
        plt.close(fig)


# -- bad paths ------------------------------------------------------------------------------


def test_bad_plot_paths_are_refused_naming_the_path(tmp_path: Path) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    (tmp_path / "dir.png").mkdir()
    bad = {
        tmp_path / "fig.jpg": ".png",
        tmp_path / "missing" / "fig.png": "does not exist",
        a_file / "fig.png": "not a folder",
        tmp_path / "dir.png": "is a folder",
    }
    for path, reason in bad.items():
        with pytest.raises(ConfigurationError, match=reason) as caught:
            check_png(path)
        assert str(path) in str(caught.value) and caught.value.path == str(path)
    fig = plt.figure()
    with pytest.raises(ConfigurationError, match="cannot write") as caught:
        save_png(fig, Path("/proc/juggle-test.png"))  # no file can be made there, even as root
    assert "/proc/juggle-test.png" in str(caught.value)
    assert not plt.fignum_exists(fig.number)  # closed all the same


@pytest.mark.parametrize(
    ("args", "computation"),
    [
        (("ofdm", "--duration", "0.05"), "juggle.commands.simulate.ofdm.run_ofdm"),
        (("sort", "--size", "4096", "--chunks", "2"), "juggle.commands.simulate.sort.run_sort"),
        (
            ("edge-router", "--experiment", "fig4"),
            "juggle.simulate.router.experiments.load_router_model",
        ),
        (("tdes",), "juggle.commands.simulate.tdes.run_tdes"),
    ],
)
def test_every_command_refuses_a_bad_plot_path_before_running(
    tmp_path: Path, args: tuple[str, ...], computation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def ran(*_: object, **__: object) -> None:
        raise AssertionError("the computation ran before the path was checked")

    monkeypatch.setattr(computation, ran)
    target = tmp_path / "nowhere" / "fig.png"
    result = _run(*args, "--plot", str(target))
    assert result.exit_code == 2, result.output
    assert str(target) in result.stderr and "does not exist" in result.stderr
    jpg = _run(*args, "--plot", str(tmp_path / "fig.jpg"), "--json")
    assert jpg.exit_code == 2 and json.loads(jpg.stdout)["type"] == "ConfigurationError"


def test_empty_timeline_window_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="plot-start-ms"):
        figure_ofdm(Timeline(("r",), end_us=1000.0), start_ms=-1.0)
