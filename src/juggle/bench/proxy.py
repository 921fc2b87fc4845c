"""Proxy benchmarks: what tracing and switching cost a caller, as ratios measured in one run.

``proxy_overhead_ratio`` is the time of a traced proxy call of a no-op method over the time of
the same call made directly on the implementation (tracing and in-flight tracking on, default
trace sampling: every call counted, one call in 8 timed once a method has made 1024 calls).
``proxy_overhead_ratio_every_call`` is the same with a trace sample of 1 (``build_proxy(...,
sample_period=1)``, ``Framework(trace_sample=1)``): every call timed into the histogram.
``transparency_64`` / ``transparency_1k`` are the throughput of native TDES through a
framework proxy over calling the same implementation directly, for 64-byte and 1-KiB buffers
(ThumbPod's acceleration transparency; Juggle Fig 7). All figures are measured (wall clock).
Direct and proxied runs are interleaved and the best of many rounds is kept, so a background
hiccup does not land on one side only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from juggle.runtime.proxy import build_proxy
from juggle.shipped import example_module


class NoopService:
    """A one-method interface for measuring the bare call path."""

    def noop(self) -> None: ...


class NoopImpl:
    """Does nothing, as fast as Python can."""

    def noop(self) -> None:
        return None


def _loop_noop(target: Any, n: int) -> int:
    t = time.perf_counter_ns()
    for _ in range(n):
        target.noop()
    return time.perf_counter_ns() - t


def best_ratio(
    direct: Callable[[], int], proxied: Callable[[], int], rounds: int
) -> tuple[float, float, float]:
    """(proxied/direct, best direct ns, best proxied ns) over interleaved ``rounds``."""
    best_d = best_p = float("inf")
    for _ in range(rounds):
        best_d = min(best_d, direct())
        best_p = min(best_p, proxied())
    return best_p / best_d, best_d, best_p


def proxy_overhead(quick: bool = False) -> dict[str, float]:
    """``proxy_overhead_ratio`` (default sampling), ``proxy_overhead_ratio_every_call`` (trace
    sample 1) and the per-call times behind them (ns, measured).

    Direct, default-sampled and every-call runs are interleaved in each round; the best of
    each over all rounds is kept.
    """
    impl = NoopImpl()
    sampled = build_proxy(NoopService, "bench.NoopService", 0, "bench", impl, "software")
    every = build_proxy(
        NoopService, "bench.NoopService", 0, "bench", impl, "software", sample_period=1
    )
    n = 20_000 if quick else 200_000
    rounds = 8 if quick else 30
    best_d = best_s = best_e = float("inf")
    for _ in range(rounds):
        best_d = min(best_d, _loop_noop(impl, n))
        best_s = min(best_s, _loop_noop(sampled, n))
        best_e = min(best_e, _loop_noop(every, n))
    return {
        "proxy_overhead_ratio": best_s / best_d,
        "proxy_overhead_ratio_every_call": best_e / best_d,
        "direct_call_ns": best_d / n,
        "proxy_call_ns": best_s / n,
        "proxy_call_every_call_ns": best_e / n,
    }


def _tdes_module() -> Path:
    return example_module("tdes")


def transparency(quick: bool = False) -> dict[str, float]:
    """Throughput of native TDES via a framework proxy over direct calls (64 B and 1 KiB)."""
    from juggle.runtime.framework import Framework

    key = bytes(range(1, 25))
    out: dict[str, float] = {}
    with Framework("xupv2p") as fw:
        module = fw.install(_tdes_module())
        module.start()
        proxy = fw.get_service("crypto.EncryptionService", consumer="bench")
        fw.set_tier(proxy.service_id, "native")
        proxy.load_key(key)
        direct = binding_impl(proxy)
        for label, size, n in (("64", 64, 300), ("1k", 1024, 60)):
            buf = bytearray(size)

            def run(target: Any, buf: bytearray = buf, size: int = size, n: int = n) -> int:
                t = time.perf_counter_ns()
                for _ in range(n):
                    target.encrypt(buf, size)
                return time.perf_counter_ns() - t

            ratio, d, p = best_ratio(lambda: run(direct), lambda: run(proxy), 5 if quick else 15)
            out[f"transparency_{label}"] = 1.0 / ratio
            out[f"tdes_native_direct_mb_s_{label}"] = size * n / d * 1e3
            out[f"tdes_native_proxy_mb_s_{label}"] = size * n / p * 1e3
    return out


def binding_impl(proxy: Any) -> Any:
    """The implementation a proxy currently calls (to call it directly)."""
    from juggle.runtime.proxy import binding_of

    return binding_of(proxy).impl


def run(quick: bool = False) -> dict[str, float]:
    """All proxy figures."""
    return {**proxy_overhead(quick), **transparency(quick)}
