"""The thrash scenario of issue 25 (item 2), before and after the hysteresis hold.

The xupv2p board has one region, prr0. Tenant ``low`` (priority 0) uses the TDES co-module,
which a juggle put into prr0; tenant ``high`` (priority 2) then makes a stream of 40 short calls
(a CRC-32 of 24 KiB each) to a hardware-only CRC-32 service, whose bitstream also targets prr0.
Without a hold (``hysteresis_us=0``) every call preempts the co-module and the region is
programmed twice per call; with the default hold the stream keeps the region.

Every time is MODELED: the arbiter reads the simulated board's modeled clock (advanced only by
modeled hardware work: bus accesses, the configuration port, bridge switches), so the figures
are the same on any machine. A call's latency is from just before it to the end of its core's
work (read by the CRC driver), so the co-module's return to the region, which the manager
thread starts as the call leaves, is not counted in it; between calls the test waits until the
arbiter has carried out every job (events, no sleeps). The hold runs out when the test moves
the modeled clock past it and tells the arbiter.
"""

from __future__ import annotations

import importlib
import math
import shutil
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import juggle
import juggle.runtime.juggler as juggler_module
from juggle.core.tenants import SignalKind
from juggle.runtime.tenancy import TenantArbiter

ROOT = Path(__file__).resolve().parents[2]
MODULES = ROOT / "examples" / "modules"
DOC = ROOT / "docs" / "daemon.md"
CALLS = 40
DATA = bytes(i % 251 for i in range(24 * 1024))  # input: 24 KiB per call, ~0.3 ms modeled
CRC = zlib.crc32(DATA)
WAIT_S = 10.0  # bound on waiting for the arbiter's manager thread (never reached when working)
KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")

PROBE = '''
"""The end of each CRC core computation on the modeled clock (the test sets CLOCK)."""
ENDS = []
CLOCK = None
'''

PROBED_DRIVER = """


class ProbedCrc32(Crc32Driver):
    # notes the modeled time at which the core's work for a call is over
    def crc32(self, data, value=0):
        out = super().crc32(data, value)
        import thrash_probe

        thrash_probe.ENDS.append(thrash_probe.CLOCK())
        return out
"""


HW_ONLY_DESCRIPTOR = """
[module]
name = "crchw"
version = "1.0.0"

[[services]]
interfaces = ["crc.ChecksumService"]
properties = { algorithm = "crc-32" }

[services.hardware]
driver = "crc32_module.ProbedCrc32"
model = "crc32_module.Crc32Core"
bitstreams = { prr0 = "bitstreams/crc32_xupv2p_prr0.bit" }

[services.hardware.resources]
slices = 184
flipflops = 112
mult18 = 0
ram16 = 0
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The probe on sys.path and the hardware-only CRC-32 module (the crc32 example without
    its software and native tiers, its driver probed)."""
    root = tmp_path_factory.mktemp("thrash")
    lib = root / "lib"
    lib.mkdir()
    (lib / "thrash_probe.py").write_text(PROBE)
    sys.path.insert(0, str(lib))
    importlib.invalidate_caches()
    probe: ModuleType = importlib.import_module("thrash_probe")
    folder = root / "crchw"
    shutil.copytree(MODULES / "crc32", folder)
    code = folder / "crc32_module.py"
    code.write_text(code.read_text() + PROBED_DRIVER)
    (folder / "juggle.toml").write_text(HW_ONLY_DESCRIPTOR)
    (folder / "zedboard.toml").unlink(missing_ok=True)  # the other board's descriptor
    yield {"probe": probe, "crchw": folder}
    sys.path.remove(str(lib))


def modeled_framework(hysteresis_us: float | None) -> juggle.Framework:
    """A framework on xupv2p with the given hold (``tenant_hold_ms``; None: derived) whose
    arbiter reads the board's modeled clock instead of the wall clock, so that the test moves
    time itself (the framework has no option for the arbiter's clock)."""

    def arbiter(host: Any, **kwargs: Any) -> TenantArbiter:
        def clock() -> float:
            return float(host.fabric.clock.now_ns) / 1000.0

        return TenantArbiter(host, clock=clock, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(juggler_module, "TenantArbiter", arbiter)
        return juggle.Framework(
            "xupv2p", tenant_hold_ms=None if hysteresis_us is None else hysteresis_us / 1000.0
        )


@dataclass
class Run:
    """What one stream did: call latencies (modeled us), programs of prr0 and preemptions
    during the stream, the signals each tenant heard, the arbiter and the framework."""

    fw: juggle.Framework
    latencies: list[float]
    programs_before: int
    programs: int
    preemptions: int
    signals: dict[str, list[str]]

    @property
    def arbiter(self) -> TenantArbiter:
        return self.fw._arbiter  # the one allocator's shell (no public view of it)

    def p(self, q: float) -> float:
        """The nearest-rank ``q`` quantile of the latencies (p99 of 40 calls: the largest)."""
        ordered = sorted(self.latencies)
        return ordered[math.ceil(q * len(ordered)) - 1]


def clock_of(fw: juggle.Framework) -> Callable[[], float]:
    return lambda: float(fw.fabric.clock.now_ns) / 1000.0


def stream(library: dict[str, Any], *, hysteresis_us: float | None, contended: bool) -> Run:
    """The scenario: (``contended``) low's TDES co-module juggled into prr0, then high's 40
    calls to the hardware-only CRC-32, one after the other once the arbiter is quiet."""
    fw = modeled_framework(hysteresis_us)
    clock = clock_of(fw)
    probe = library["probe"]
    probe.CLOCK = clock
    arbiter: TenantArbiter = fw._arbiter  # the one allocator's shell (no public view of it)
    fw.add_tenant("low", priority=0)
    fw.add_tenant("high", priority=2)
    if contended:
        fw.install(MODULES / "tdes").start()
        tdes = fw.get_service("EncryptionService", consumer="low", filter="(algorithm=tdes)")
        fw.juggle(to_hardware=tdes.service_id)
        tdes.load_key(KEY)
        assert fw.regions()[0].service_id == tdes.service_id
    fw.install(library["crchw"]).start()
    crc = fw.get_service("ChecksumService", consumer="high")
    assert arbiter.arbitrates(crc.service_id)
    assert arbiter.quiesce(WAIT_S)
    programs = fw.fabric.statistics().programs
    preemptions = arbiter.statistics().allocator.preemptions
    latencies = []
    for _ in range(CALLS):
        start = clock()
        assert crc.crc32(DATA) == CRC
        latencies.append(probe.ENDS[-1] - start)
        assert arbiter.quiesce(WAIT_S), "the arbiter's jobs never ended"
    return Run(
        fw,
        latencies,
        programs,
        fw.fabric.statistics().programs - programs,
        arbiter.statistics().allocator.preemptions - preemptions,
        {t: [s.kind.value for s in fw.signals(t).drain()] for t in ("low", "high")},
    )


def ready_only_on_change(kinds: list[str]) -> bool:
    """Whether no READY follows a READY (one device per tenant here)."""
    return all(not (a == b == SignalKind.READY) for a, b in pairwise(kinds))


@pytest.fixture(scope="module")
def runs(library: dict[str, Any]) -> Iterator[dict[str, Run]]:
    """The three streams, each once: ``uncontended`` (high alone; the region starts blank, so
    its first call programs it), ``before`` (contended, no hold) and ``after`` (contended, the
    default hold). Only the ``after`` framework is used further (by one test)."""
    made = {
        "uncontended": stream(library, hysteresis_us=None, contended=False),
        "before": stream(library, hysteresis_us=0.0, contended=True),
        "after": stream(library, hysteresis_us=None, contended=True),
    }
    yield made
    for run in made.values():
        run.fw.close()


def test_the_hold_keeps_the_region_for_the_high_priority_stream(runs: dict[str, Run]) -> None:
    """With the default hold (twice the modeled reconfiguration time): one preemption and one
    programming for the whole stream, p99 within 2x the uncontended p99, one WAIT+READY for
    high and one PREEMPT for low; the co-module comes back exactly one hold after high's last
    call (modeled), and low hears READY once."""
    run, uncontended = runs["after"], runs["uncontended"]
    fw, arbiter = run.fw, run.arbiter
    hold = arbiter.hysteresis_for("prr0")
    programmed = fw.fabric.statistics()  # tdes, then crc32: 149,088 B each, 13.4 ms modeled
    assert programmed.programs == 2
    assert hold == pytest.approx(2 * programmed.modeled_reconfiguration_ms * 1000 / 2)
    assert run.preemptions == 1 and run.programs == 1  # the stream's first call only
    assert run.p(0.99) <= 2 * uncontended.p(0.99)
    assert run.p(0.5) == pytest.approx(uncontended.p(0.5))
    assert run.signals == {"low": ["preempt"], "high": ["wait", "ready"]}
    assert (fw.regions()[0].service_id, fw.regions()[0].design) == (None, "crc32")

    # high leaves prr0 unused: one hold later (modeled) the co-module is back
    fw.fabric.clock.advance_ns((hold - 1.0) * 1000)
    arbiter.advance()
    assert arbiter.quiesce(WAIT_S) and fw.regions()[0].design == "crc32"
    fw.fabric.clock.advance_ns(1000)
    arbiter.advance()
    assert arbiter.quiesce(WAIT_S)
    (tdes,) = [s for s in fw.services() if s.module == "tdes"]
    assert (tdes.tier, tdes.region) == ("hardware", "prr0")
    assert fw.fabric.statistics().programs == run.programs_before + 2  # crc32 in, tdes back
    assert [s.kind for s in fw.signals("low").drain()] == ["ready"]
    assert fw.signals("high").drain() == ()
    assert arbiter.statistics().repeated_ready == 0
    crc = fw.get_service("ChecksumService", consumer="high")
    assert crc.crc32(DATA) == CRC  # and high can take it again


def test_without_the_hold_every_call_preempts_and_reprograms_twice(
    runs: dict[str, Run],
) -> None:
    """The "before" figures: hysteresis_us=0 reproduces the thrash of the issue."""
    run, uncontended = runs["before"], runs["uncontended"]
    assert run.preemptions == CALLS and run.programs == 2 * CALLS
    assert run.signals["low"] == ["preempt", "ready"] * CALLS
    assert run.signals["high"] == ["wait", "ready"] * CALLS
    assert all(ready_only_on_change(kinds) for kinds in run.signals.values())
    reconfiguration = run.fw.fabric.statistics().modeled_reconfiguration_ms / (2 * CALLS + 1)
    assert run.p(0.5) > reconfiguration * 1000  # every call waits for a reconfiguration
    assert run.p(0.5) > 40 * uncontended.p(0.5)


def test_the_documented_figures_are_the_modeled_ones(runs: dict[str, Run]) -> None:
    """docs/daemon.md ("Priorities without thrashing") quotes this scenario's figures: they
    are what it models."""
    text = DOC.read_text()
    for label, run in runs.items():
        row = (
            f"| {label} | {run.preemptions} | {run.programs} | {run.p(0.5) / 1000:.2f} | "
            f"{run.p(0.99) / 1000:.2f} |"
        )
        assert row in text, f"docs/daemon.md lacks the row {row!r}"


def test_a_ready_is_never_repeated_to_a_device_that_heard_ready_last(
    library: dict[str, Any],
) -> None:
    """Without a hold, a and b (the same design) take turns on prr0: each call finds the region
    idle with the other's device connected and takes it at once, its own device having been
    disconnected silently. a heard READY for its first call and nothing since: the READY of
    its next take-over is no state change and is not sent (counted instead)."""
    fw = modeled_framework(0.0)
    try:
        fw.add_tenant("a", priority=1)
        fw.add_tenant("b", priority=1)
        fw.install(library["crchw"]).start()
        a = fw.get_service("ChecksumService", consumer="a")
        b = fw.get_service("ChecksumService", consumer="b")
        for _ in range(3):
            assert a.crc32(DATA) == CRC and b.crc32(DATA) == CRC
        assert fw._arbiter.quiesce(WAIT_S)
        assert [s.kind for s in fw.signals("a").drain()] == ["wait", "ready"]
        assert [s.kind for s in fw.signals("b").drain()] == ["ready"]
        assert fw._arbiter.statistics().repeated_ready == 4  # a's and b's second and third
    finally:
        fw.close()


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan"), True, "26"])
def test_a_bad_tenant_hold_is_refused_naming_it(bad: Any) -> None:
    with pytest.raises(juggle.ConfigurationError, match="tenant_hold_ms"):
        juggle.Framework("xupv2p", tenant_hold_ms=bad)
