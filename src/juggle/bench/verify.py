"""Verification bench: what checking hardware results against software costs a caller.

One :class:`~juggle.runtime.framework.Framework` on the embedded simulated board (``xupv2p``,
``pace=False``) with the example ``tdes`` co-module in hardware, one consumer and a key loaded,
first driven past the warm-up and the thinning-out after it (400 calls), so the figures are the
steady state. Then rounds of the same loop of 16-byte ``encrypt`` calls through the proxy run
with ``verify_sample`` set to 0 (off), to the default (one call in 16) and to 1 (every call), each
setting taking the first turn in turn; a round is a multiple of 16 calls, so the default checks
one call in 16. The same core, proxy and objects serve every setting (separate frameworks differ
among themselves by more than the check costs), and the best of many short rounds of each is
kept (a round is short, about 2 ms, so on a busy machine many fall between two preemptions), so
a background hiccup does not land on one side only. The measuring thread is pinned to
one CPU for the run, as in the ``sharing`` group. All figures are measured (wall clock here).

* ``hardware_call_us_verify_off`` / ``..._verify_default`` / ``..._verify_every_call``: the mean
  time of one call through the proxy (µs); on the simulator most of it is the Python register
  model of the core, so a board's hardware call is faster and the ratios below higher;
* ``verify_cost_ratio``: default over off, what verification at the default rate costs a caller
  on average (a checked call also runs the software tier, here pycryptodome, and compares);
* ``verify_cost_ratio_every_call``: every call checked over off;
* ``verify_added_us_per_call``: default minus off (µs per call, on average; it can come out
  slightly negative when the difference is below the noise).
"""

from __future__ import annotations

import time
from typing import Any

from juggle.bench.proxy import _tdes_module
from juggle.bench.sharing import one_cpu
from juggle.runtime.framework import Framework
from juggle.runtime.hardware import DEFAULT_VERIFY_SAMPLE

__all__ = ["run"]

KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")
#: calls made before timing: past the default warm-up (32) and its thinning out (to call 128)
SETTLE_CALLS = 400
#: the settings compared: name -> verify_sample
SETTINGS: dict[str, int] = {"off": 0, "default": DEFAULT_VERIFY_SAMPLE, "every_call": 1}


def _loop(proxy: Any, n: int) -> int:
    """``n`` encrypt calls of 16 bytes; the wall time in ns."""
    buf = bytearray(16)
    t = time.perf_counter_ns()
    for _ in range(n):
        proxy.encrypt(buf, 16)
    return time.perf_counter_ns() - t


def run(quick: bool = False) -> dict[str, float]:
    """The verification figures (see the module docstring)."""
    n = 2 * DEFAULT_VERIFY_SAMPLE  # short rounds: one fits between two preemptions
    rounds = 60 if quick else 400
    best = dict.fromkeys(SETTINGS, float("inf"))
    order = list(SETTINGS)
    with one_cpu(), Framework("xupv2p", pace=False) as fw:
        module = fw.install(_tdes_module())
        module.start()
        proxy = fw.get_service("crypto.EncryptionService", consumer="bench")
        proxy.load_key(KEY)
        fw.juggle(to_hardware=proxy.service_id)
        _loop(proxy, SETTLE_CALLS)
        for i in range(rounds):
            for name in order[i % 3 :] + order[: i % 3]:  # each setting goes first in turn
                fw.verify_sample = SETTINGS[name]
                best[name] = min(best[name], _loop(proxy, n))
    us = {name: ns / n / 1e3 for name, ns in best.items()}
    return {
        "hardware_call_us_verify_off": us["off"],
        "hardware_call_us_verify_default": us["default"],
        "hardware_call_us_verify_every_call": us["every_call"],
        "verify_cost_ratio": us["default"] / us["off"],
        "verify_cost_ratio_every_call": us["every_call"] / us["off"],
        "verify_added_us_per_call": us["default"] - us["off"],
    }
