"""The demo: the Juggle paper's scenario (section 6) on the simulated xupv2p board.

A mail application decrypts Triple-DES messages while a music player decodes IMA ADPCM audio.
The window manager moves the focus mail → music → mail; the ``foreground`` controller gives
the single region of the board to the most-called service of the application in focus, so TDES
and the audio decoder are juggled in and out of the fabric while both applications keep
calling. Every message and audio chunk is checked against a reference, and one pass runs the
same data through every tier of both services to show they agree.

Throughput of the software and native tiers is measured (wall clock of this machine); that of
the hardware tier is modeled: bytes over the core + bus time of its calls on the simulated
fabric (:mod:`juggle.throughput`, the definition ``juggle profile`` uses too), with the
measured wall time of the same calls (the Python driver and the simulated core on this
machine) shown beside it. The result says which engine runs the hardware tier: the cores'
Python models, or their Verilog in Verilator (``hardware="rtl"``), and which simulators a run
had to build first.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from Crypto.Cipher import DES3

from juggle.core.controllers import load_controller
from juggle.energy import energy_of
from juggle.errors import ConfigurationError
from juggle.runtime.framework import Framework
from juggle.services.audio import decode_ima_adpcm, encode_ima_adpcm, sine_sweep
from juggle.shipped import example_modules
from juggle.throughput import (
    HardwareTime,
    count_calls,
    hardware_figures,
    payload_bytes,
    throughput_mb_s,
)

MESSAGE_BYTES = 2048
CHUNK_BYTES = 512  # ADPCM bytes per decode call (1024 samples)
MAIL_KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")


def examples_dir() -> Path:
    """The shipped example modules (package data)."""
    return example_modules()


#: the demo's designs: service -> the hardware design its module programs
DESIGNS = {"tdes": "tdes", "adpcm": "adpcm"}

#: what the demo's measured figure beside a hardware call holds
DRIVER_IS = (
    "wall clock of the call on this machine: proxy, runtime (with its check of sampled calls "
    "on the software tier), the Python driver and the simulated core behind it, the other "
    "application running meanwhile; shown beside, not in the hardware time"
)


@dataclass
class _HwCalls:
    """Hardware calls of one kind (a service's method at one size): how many, their modeled
    time (summed) and their measured wall time (summed, ns)."""

    calls: int = 0
    bytes_per_call: int = 0
    time: HardwareTime | None = None
    wall_ns: int = 0


@dataclass
class _Work:
    """Bytes processed per (service, tier), the hardware calls per (service, call), and what
    went wrong."""

    bytes: dict[tuple[str, str], int] = field(default_factory=dict)
    hardware: dict[tuple[str, str], _HwCalls] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    mismatches: int = 0

    def add(self, service: str, tier: str, n: int) -> None:
        self.bytes[(service, tier)] = self.bytes.get((service, tier), 0) + n

    def add_hardware(
        self, service: str, call: str, nbytes: int, time: HardwareTime, wall_ns: int
    ) -> None:
        entry = self.hardware.setdefault((service, call), _HwCalls(bytes_per_call=nbytes))
        entry.calls += 1
        entry.time = time if entry.time is None else entry.time.plus(time)
        entry.wall_ns += wall_ns

    def hardware_time(self, service: str) -> tuple[float, int]:
        """(modeled µs, bytes) of every hardware call of ``service``."""
        us = nbytes = 0.0
        for (name, _), entry in self.hardware.items():
            if name == service and entry.time is not None:
                us += entry.time.us
                nbytes += entry.bytes_per_call * entry.calls
        return us, int(nbytes)


class _Scenario:
    def __init__(
        self,
        seed: int,
        pace: bool,
        hardware: str = "model",
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.rng = random.Random(seed)
        self.builds: list[str] = []
        self._progress = progress
        self.simulator: str | None = None
        self.built_before: dict[str, bool] = {}
        options: dict[str, Any] = {}
        if hardware == "rtl":
            from juggle.fabric.rtl import VerilatorEngine

            engine = VerilatorEngine(progress=self._on_build)
            self.simulator = engine.tool
            options["backend_options"] = {"engine": engine}
        self.fw = Framework("xupv2p", pace=pace, hardware=hardware, **options)
        modules = examples_dir()
        for name in ("tdes", "audio"):
            self.fw.install(modules / name).start()
        self.fw.set_controller(load_controller("foreground"))
        self.mail = self.fw.get_service("EncryptionService", "mail", "(algorithm=tdes)")
        self.music = self.fw.get_service("DecoderService", "music")
        self.mail.load_key(MAIL_KEY)
        self.fw.set_tier(self.mail.service_id, "software")  # Java-like software, as the paper
        self.work = _Work()
        self.messages = [self._message() for _ in range(16)]
        pcm = sine_sweep(seconds=2.0, seed=seed)
        self.adpcm = encode_ima_adpcm(pcm)
        self.lock = threading.Lock()
        if self.simulator is not None:
            self.built_before = self._built(engine)
            self._say(self._engine_line())

    def _on_build(self, message: str) -> None:
        self.builds.append(message)
        self._say(message)

    def _say(self, message: str) -> None:
        if self._progress is not None:
            self._progress(message)

    def _built(self, engine: Any) -> dict[str, bool]:
        """Per demo service whose design runs as RTL here: is its simulator in the cache?"""
        out = {}
        for service, design in DESIGNS.items():
            rtl = self.fw.fabric.rtl_of(design)
            if rtl is not None:
                out[service] = bool(engine.is_built(rtl))
        return out

    def _engine_line(self) -> str:
        parts = []
        for service in DESIGNS:
            if service not in self.built_before:
                parts.append(f"{service} has no RTL here and runs on its Python model")
            elif self.built_before[service]:
                parts.append(f"{service}'s simulator is cached")
            else:
                parts.append(f"{service}'s simulator is built first (10-40 s, cached after)")
        return f"the hardware tier runs the cores' Verilog in {self.simulator}: " + "; ".join(parts)

    def engines(self) -> dict[str, str]:
        """What runs each demo service's hardware tier: ``model``, or ``rtl (Verilator)``."""
        sids = {"tdes": self.mail.service_id, "adpcm": self.music.service_id}
        out = {}
        for service, sid in sids.items():
            engine = self.fw.statistics(sid).engine or "model"
            out[service] = f"rtl ({self.simulator or 'Verilator'})" if engine == "rtl" else engine
        return out

    def call(self, service: str, tier: str, name: str, *args: Any) -> Any:
        """Method ``name`` of ``service``'s proxy with ``args``; a call made in ``tier``
        hardware is counted (modeled core + bus time on its region's window, measured wall
        time)."""
        method = getattr(self.mail if service == "tdes" else self.music, name)
        region = self.region_of(service) if tier == "hardware" else None
        if region is None:
            return method(*args)
        hz = self.fw.fabric.profile.board.fabric_hz
        t0 = time.perf_counter_ns()
        modeled, result = count_calls(self.fw.fabric.window(region), hz, lambda: method(*args))
        wall = time.perf_counter_ns() - t0
        if modeled is not None:
            nbytes = payload_bytes(args)
            kind = f"{name}({nbytes} bytes)" if nbytes else f"{name}()"
            with self.lock:
                self.work.add_hardware(service, kind, nbytes, modeled, wall)
        return result

    def region_of(self, service: str) -> str | None:
        sid = self.mail.service_id if service == "tdes" else self.music.service_id
        return next(s.region for s in self.fw.services() if s.service_id == sid)

    def _message(self) -> tuple[bytes, bytes]:
        plain = self.rng.randbytes(MESSAGE_BYTES)
        return plain, DES3.new(MAIL_KEY, DES3.MODE_ECB).encrypt(plain)

    def tier_of(self, service_id: int) -> str:
        return next(s.tier for s in self.fw.services() if s.service_id == service_id)

    # -- the two applications --------------------------------------------------------------

    def mail_app(self, messages: int) -> None:
        for i in range(messages):
            plain, cipher = self.messages[i % len(self.messages)]
            buf = bytearray(cipher)
            tier = self.tier_of(self.mail.service_id)
            try:
                self.call("tdes", tier, "decrypt", buf, len(buf))
            except Exception as exc:
                self.work.failures.append(f"mail: {exc!r}")
                continue
            with self.lock:
                self.work.add("tdes", tier, len(buf))
                self.work.mismatches += bytes(buf) != plain

    def music_app(self, chunks: int, start: int) -> int:
        decoded = 0
        for i in range(start, start + chunks):
            offset = (i * CHUNK_BYTES) % (len(self.adpcm) - CHUNK_BYTES)
            chunk = self.adpcm[offset : offset + CHUNK_BYTES]
            tier = self.tier_of(self.music.service_id)
            try:
                self.call("adpcm", tier, "reset")
                pcm = self.call("adpcm", tier, "decode", chunk)
            except Exception as exc:
                self.work.failures.append(f"music: {exc!r}")
                continue
            expected, _ = decode_ima_adpcm(chunk)
            with self.lock:
                self.work.add("adpcm", tier, len(chunk))
                self.work.mismatches += pcm != expected
            decoded += 1
        return decoded

    # -- phases ----------------------------------------------------------------------------

    def phase(self, focus: str | None, messages: int, chunks: int, start: int) -> dict[str, Any]:
        juggles = self.fw.set_foreground(focus) if focus else []
        t0 = time.perf_counter()
        mail = threading.Thread(target=self.mail_app, args=(messages,), name="mail")
        music = threading.Thread(target=self.music_app, args=(chunks, start), name="music")
        mail.start()
        music.start()
        mail.join()
        music.join()
        return {
            "focus": focus,
            "juggles": juggles,
            "seconds_measured": time.perf_counter() - t0,
            "tiers": {
                "tdes": self.tier_of(self.mail.service_id),
                "adpcm": self.tier_of(self.music.service_id),
            },
        }

    def cross_tier_check(self) -> bool:
        """Same data through every tier of both services: identical results?"""
        agree = True
        plain = self.rng.randbytes(4096)
        outputs: dict[str, bytes] = {}
        for tier in ("software", "native", "hardware"):
            self.fw.set_tier(self.mail.service_id, tier)
            buf = bytearray(plain)
            self.call("tdes", tier, "encrypt", buf, len(buf))
            self.work.add("tdes", tier, len(buf))
            outputs[tier] = bytes(buf)
        reference = DES3.new(MAIL_KEY, DES3.MODE_ECB).encrypt(plain)
        agree &= all(out == reference for out in outputs.values())
        self.fw.set_tier(self.mail.service_id, "software")  # free the region for the decoder
        chunk = self.adpcm[: CHUNK_BYTES * 4]
        pcm_out: dict[str, bytes] = {}
        for tier in ("software", "hardware"):
            self.fw.set_tier(self.music.service_id, tier)
            self.call("adpcm", tier, "reset")
            pcm_out[tier] = self.call("adpcm", tier, "decode", chunk)
            self.work.add("adpcm", tier, len(chunk))
        agree &= pcm_out["software"] == pcm_out["hardware"] == decode_ima_adpcm(chunk)[0]
        return agree


def _throughput(work: _Work, stats: dict[str, Any], service: str, tier: str) -> float:
    n = work.bytes.get((service, tier), 0)
    per_tier = stats[service].per_tier.get(tier)
    if per_tier is None or per_tier.calls == 0:
        return 0.0
    if tier == "hardware":  # core + bus time on the simulated fabric (juggle.throughput)
        modeled_us, hw_bytes = work.hardware_time(service)
        return throughput_mb_s(hw_bytes, modeled_us)
    seconds = per_tier.mean_us * per_tier.calls / 1e6
    return n / seconds / 1e6 if seconds else 0.0


def run_demo(
    seed: int = 1,
    pace: bool = False,
    hardware: str = "model",
    scale: float = 1.0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the scenario; returns the JSON-ready result (see ``juggle demo --json``).
    ``hardware="rtl"`` runs every hardware call on the cores' Verilog in Verilator, and tells
    ``progress`` (one line of text at a time) that it does so, which simulators are cached
    and each build it makes before the run; ``scale`` (0 < scale <= 1) shortens every phase's
    work in proportion (the story stays the same).

    Raises :class:`~juggle.errors.ConfigurationError` for a bad ``scale`` or ``hardware``, and
    :class:`~juggle.errors.BackendError` when ``hardware="rtl"`` finds no Verilator."""
    if not 0 < scale <= 1:
        raise ConfigurationError(f'"scale" must be in (0, 1], got {scale!r}', value=scale)

    def n(count: int) -> int:
        return max(2, round(count * scale))

    sc = _Scenario(seed, pace, hardware, progress)
    try:
        phases = [
            sc.phase(None, messages=n(4), chunks=n(16), start=0),
            sc.phase("mail", messages=n(48), chunks=n(16), start=16),
            sc.phase("music", messages=n(8), chunks=n(160), start=32),
            sc.phase("mail", messages=n(48), chunks=n(16), start=192),
        ]
        agree = sc.cross_tier_check()
        stats = {
            "tdes": sc.fw.statistics(sc.mail.service_id),
            "adpcm": sc.fw.statistics(sc.music.service_id),
        }
        errors = sum(s.total.errors for s in stats.values())
        return _result(sc, phases, stats, agree, errors)
    finally:
        sc.fw.close()


def _result(
    sc: _Scenario, phases: list[dict[str, Any]], stats: dict[str, Any], agree: bool, errors: int
) -> dict[str, Any]:
    work = sc.work
    services = []
    tiers: dict[str, dict[str, Any]] = {}
    for name in ("tdes", "adpcm"):
        for tier, call_stats in stats[name].per_tier.items():
            if tier == "gone":
                continue
            mb_s = _throughput(work, stats, name, tier)
            figure = _figure_of(tier)
            services.append(
                {
                    "service": name,
                    "tier": tier,
                    "calls": call_stats.calls,
                    "bytes": work.bytes.get((name, tier), 0),
                    "throughput_mb_s": round(mb_s, 4),
                    "figure": figure,
                    "labels": {"calls": "measured", "bytes": "measured", "throughput_mb_s": figure},
                }
            )
            agg = tiers.setdefault(tier, {"calls": 0, "bytes": 0, "seconds": 0.0})
            agg["calls"] += call_stats.calls
            agg["bytes"] += work.bytes.get((name, tier), 0)
            if mb_s:
                agg["seconds"] += work.bytes.get((name, tier), 0) / (mb_s * 1e6)
    tier_out = {
        tier: {
            "calls": agg["calls"],
            "throughput_mb_s": round(agg["bytes"] / agg["seconds"] / 1e6, 4)
            if agg["seconds"]
            else 0.0,
            "figure": _figure_of(tier),
            "labels": {"calls": "measured", "throughput_mb_s": _figure_of(tier)},
        }
        for tier, agg in sorted(tiers.items())
    }
    name_of = {sc.mail.service_id: "tdes", sc.music.service_id: "adpcm"}
    juggles = []
    number = 0
    for phase in phases:
        for report in phase["juggles"]:
            number += 1  # one juggle may take one service out and put another in
            for sid in report.to_software:
                juggles.append(_juggle_row(number, name_of[sid], "to_software", report))
            if report.to_hardware is not None:
                juggles.append(
                    _juggle_row(number, name_of[report.to_hardware], "to_hardware", report)
                )
    story = _story(phases, name_of)
    reports = [r for p in phases for r in p["juggles"]]
    reconfig_s = sum(r.reconfiguration_ms + r.bridge_ms for r in reports) / 1e3
    energy = energy_of(stats, "xupv2p", work.bytes, reconfiguration_s=reconfig_s)
    rtl = sc.fw.fabric.backend == "rtl"
    return {
        "board": "xupv2p (simulated)",
        "hardware": "rtl" if rtl else "model",
        "engine": {
            "hardware_tier": sc.engines(),
            "simulator": sc.simulator,
            "cached_before_run": dict(sc.built_before),
            "built": list(sc.builds),
            "summary": _engine_summary(sc),
        },
        "hardware_calls": _hardware_calls(work),
        "energy_j": energy["energy_j"],
        "energy": energy,
        "story": story,
        "notes": NOTES,
        "tiers": tier_out,
        "services": services,
        "juggles": juggles,
        "phases": [
            {
                "focus": p["focus"],
                "tiers": p["tiers"],
                "seconds_measured": round(p["seconds_measured"], 4),
                "labels": {"seconds_measured": "measured"},
            }
            for p in phases
        ],
        "failed_calls": len(work.failures) + errors,
        "failures": work.failures[:10],
        "mismatches": work.mismatches,
        "results_agree": agree and work.mismatches == 0,
        "labels": {
            "energy_j": "modeled",
            "energy": "modeled",  # its own labels say which figures are inputs and counts
            "hardware_calls": "modeled",  # each row's own labels say which are measured
            "failed_calls": "measured",
            "mismatches": "measured",
        },
        "how": {
            "throughput_mb_s": "software/native measured (wall clock, this machine); "
            "hardware modeled: bytes over the core + bus time of its calls at the simulated "
            "fabric's clock (juggle.throughput, as juggle profile); each row's labels say which",
            "hardware_calls": "modeled_us = core_us + bus_us at the fabric clock; driver_us "
            "measured beside it (wall clock of the call on this machine), not counted",
            "reconfiguration_ms": "calibrated (config port of the simulated xupv2p: "
            "cycles_per_word fitted to Table 3's add and tdes reconfiguration times)",
            "bridge_ms": "input (socket bridge: section 6.1's 3 ms a juggle, 1.5 ms a switch)",
            "overhead_us": "measured (runtime's own work per juggle)",
            "energy_j": "modeled (profile power inputs x board time per tier; see energy)",
            "calls": "measured: calls counted in this run",
            "juggle": "measured: the juggle's number in this run",
        },
    }


def _engine_summary(sc: _Scenario) -> str:
    """One sentence: what runs the hardware tier of each service, and what had to be built."""
    engines = sc.engines()
    on = [s for s, e in engines.items() if e.startswith("rtl")]
    off = [s for s in engines if s not in on]
    parts = []
    if on:
        parts.append(f"{' and '.join(on)} run on their Verilog in {sc.simulator} (engine rtl)")
    if off:
        parts.append(f"{' and '.join(off)} on the cores' Python register models (engine model)")
    line = "; ".join(parts)
    if on:
        built = [s for s in on if not sc.built_before.get(s, True)]
        line += (
            f"; simulators built before the run: {', '.join(built)}"
            if built
            else "; simulators from the cache"
        )
    return line


def _hardware_calls(work: _Work) -> list[dict[str, Any]]:
    """Per hardware call kind of the run: the figures of :func:`juggle.throughput.
    hardware_figures` (modeled core + bus time and throughput per call, the measured wall
    time beside)."""
    rows = []
    for (service, call), entry in sorted(work.hardware.items()):
        if entry.time is None:
            continue
        figures = hardware_figures(
            entry.time.per(entry.calls),
            bytes_per_call=entry.bytes_per_call,
            driver_us=entry.wall_ns / 1000.0 / entry.calls,
            driver_is=DRIVER_IS,
            calls=entry.calls,
        )
        rows.append({"service": service, "call": call, **figures})
    return rows


def _figure_of(tier: str) -> str:
    """How a tier's throughput is obtained: the simulated hardware's is modeled (bus time at
    the board's clock), the software and native tiers' measured (this machine's wall clock)."""
    return "modeled" if tier == "hardware" else "measured"


#: footnotes of the rows a newcomer asks about
NOTES = {
    "native": "tdes native rows come from the cross-tier check at the end, which runs the "
    "same data through every tier (the mail application itself uses software or hardware)",
    "figure": "measured: wall time of the call on this machine; modeled: the core + bus time "
    "of the hardware calls at the board's clock (the Python driver and the simulator's own "
    "wall time are not counted: see the hardware calls, measured beside)",
    "seconds": "seconds (measured): wall time of the phase on this machine, both applications "
    "running at once",
    "overhead": "overhead µs (measured): wall time of the runtime's own work per juggle, "
    "without waiting for running calls or the reconfiguration (calibrated); the applications keep "
    "calling meanwhile and share the interpreter, so this is several times the quiet figure "
    "of juggle bench (juggle_overhead_us_p50)",
    "region": "one region (prr0): a service gets hardware only by taking it from the other",
    "hardware_calls": "modeled µs = core + bus cycles of the call at the board's clock "
    "(juggle.throughput: the figure juggle profile gives a call of the same size); MB/s = "
    "bytes over that; wall µs (measured) = the call on this machine through proxy, runtime, "
    "the Python driver and the simulated core, shown beside and not counted",
}

_WHO = {"mail": "the mail application (TDES)", "music": "the music player (ADPCM)"}


def _story(phases: list[dict[str, Any]], name_of: dict[int, str]) -> list[str]:
    """One narrated line per phase: who has the focus, what the controller did, what runs
    where and why."""
    lines = []
    for n, phase in enumerate(phases, 1):
        tiers = phase["tiers"]
        focus = phase["focus"]
        moves = []
        for report in phase["juggles"]:
            for sid in report.to_software:
                moves.append(f"{name_of[sid]} leaves {report.region} for software")
            if report.to_hardware is not None:
                moves.append(
                    f"{name_of[report.to_hardware]} is programmed into {report.region} "
                    f"({report.reconfiguration_ms:.1f} ms calibrated)"
                )
        who = _WHO.get(focus or "", "no application")
        did = "; ".join(moves) if moves else "no juggle"
        lines.append(
            f"phase {n}: {who} has the focus; the foreground controller: {did}. TDES runs in "
            f"{tiers['tdes']}, ADPCM in {tiers['adpcm']}."
        )
    return lines


def _juggle_row(number: int, service: str, direction: str, report: Any) -> dict[str, Any]:
    return {
        "juggle": number,
        "service": service,
        "direction": direction,
        "region": report.region,
        "reconfiguration_ms": round(report.reconfiguration_ms, 3)
        if direction == "to_hardware"
        else 0.0,
        "bridge_ms": round(report.bridge_ms, 3),
        "overhead_us": round(report.overhead_us, 1),
        "labels": {
            "juggle": "measured",
            "reconfiguration_ms": "calibrated",
            "bridge_ms": "input",
            "overhead_us": "measured",
        },
    }
