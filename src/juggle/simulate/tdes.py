"""Triple-DES throughput per tier vs buffer size, in virtual time (Juggle paper, Fig 7).

A caller encrypts buffers of 8 B … 64 KiB through four paths on the simulated ``xupv2p``
board (PowerPC 405 at 300 MHz, TDES core on a 100 MHz bus):

* ``software``: the best Java service (IBM J9 JCE),
* ``native``: C with libdes,
* ``hardware-direct``: C driving the FPGA core itself (Fig 7's baseline),
* ``hardware-proxied``: a Juggle hardware service: Java proxy → JNI driver → core.

Each call costs a fixed overhead plus a cost per 8-byte block. For the hardware paths the
block cost is built from the driver's register sequence (section 6.2: two data writes, one
control write, status polls until DONE, two result reads) with the bus costs of the
``xupv2p`` profile and the core latency of :class:`~juggle.services.crypto.model.TdesCore`;
the proxy's overhead is explicit (:class:`TierCosts`). Each call runs as a SimPy process in
virtual time. Every number is MODELED.

The claim reproduced: from 64 B up the proxied hardware service runs as fast as the hardware
used directly (here: within 10 %), because its static overhead is paid once per call; and it
is close to 20 times faster than the best Java software there.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import simpy

from juggle.errors import ConfigurationError
from juggle.fabric.profiles import BoardProfile, load_profile
from juggle.services.crypto.model import TdesCore

__all__ = ["SIZES", "TIERS", "TierCosts", "run_tdes"]

SIZES = tuple(8 << i for i in range(14))
"""Buffer sizes: 8 B, 16 B, … 64 KiB."""
TIERS = ("software", "native", "hardware-direct", "hardware-proxied")
BLOCK = 8
AS_FAST = 0.9
"""Proxied counts as "as fast as direct" at >= 90 % of its throughput."""


@dataclass(frozen=True, slots=True)
class TierCosts:
    """Modeled CPU costs (PowerPC cycles). Calibration, see ``docs/edge-router.md`` § TDES.

    ``java_block_cycles``: J9 JCE TDES per block, set so that the hardware is ~20x faster
    (section 6.2: "a factor of almost 20"); ``c_block_cycles``: libdes, a third of Java
    (section 6.2: Java is "almost a factor of three slower than the C implementation");
    ``java_call_cycles`` / ``c_call_cycles``: per-call set-up in software;
    ``driver_loop_cycles``: the driver's per-block loop around its register accesses;
    ``c_hw_call_cycles``: a C call into the driver; ``proxy_cycles`` + ``jni_cycles``: the
    Juggle proxy (dispatch, tracing) and the JNI crossing with its ByteBuffer look-up.
    """

    java_block_cycles: int = 6_000
    java_call_cycles: int = 3_000
    c_block_cycles: int = 2_000
    c_call_cycles: int = 300
    driver_loop_cycles: int = 20
    c_hw_call_cycles: int = 30
    proxy_cycles: int = 90
    jni_cycles: int = 120


def run_tdes(
    profile: str | BoardProfile = "xupv2p",
    costs: TierCosts | None = None,
    sizes: Sequence[int] = SIZES,
    calls: int = 4,
    hardware: str = "model",
) -> dict[str, Any]:
    """Throughput (MB/s, modeled) of every tier at every buffer size.

    ``hardware="rtl"`` also derives the hardware paths from the TDES core's Verilog: the bus
    cycles of one block are counted by running the very driver against the RTL in a
    cycle-accurate simulator (:func:`rtl_block_cycles`), and the hardware curves under that
    cost are reported beside the register-sequence model's (``throughput_mb_s_rtl``).

    Raises :class:`~juggle.errors.ConfigurationError` for a size that is not a positive
    multiple of 8 or a non-positive number of calls, and
    :class:`~juggle.errors.ProfileError` for a bad profile.
    """
    if calls <= 0:
        raise ConfigurationError(f'"calls" must be > 0, got {calls!r}', calls)
    for size in sizes:
        if size <= 0 or size % BLOCK:
            raise ConfigurationError(f"buffer size {size!r} is not a positive multiple of 8")
    if hardware not in ("model", "rtl"):
        raise ConfigurationError(f'"hardware" must be model or rtl, got {hardware!r}', hardware)
    board = load_profile(profile) if isinstance(profile, str) else profile
    costs = costs or TierCosts()
    cpu_us = 1e6 / board.board.cpu_hz
    block_bus_us = _block_bus_cycles(board) * 1e6 / board.board.fabric_hz
    per_call_us, per_block_us = _tier_costs(costs, cpu_us, block_bus_us)
    throughput: dict[str, list[float]] = {tier: [] for tier in TIERS}
    for tier in TIERS:
        for size in sizes:
            elapsed = _simulate(per_call_us[tier], per_block_us[tier], size, calls)
            throughput[tier].append(round(size * calls / elapsed, 4))
    direct, proxied = throughput["hardware-direct"], throughput["hardware-proxied"]
    ratio = [round(p / d, 4) for p, d in zip(proxied, direct, strict=True)]
    vs_software = [round(p / s, 2) for p, s in zip(proxied, throughput["software"], strict=True)]
    from_size = next((s for s, r in zip(sizes, ratio, strict=True) if r >= AS_FAST), None)
    doc: dict[str, Any] = {
        "scenario": "tdes",
        "modeled": True,
        "board": board.name,
        "sizes": list(sizes),
        "throughput_mb_s": throughput,
        "proxied_vs_direct": ratio,
        "proxied_vs_software": vs_software,
        "as_fast_threshold": AS_FAST,
        "proxied_as_fast_from": from_size,
        "block_bus_us": round(block_bus_us, 4),
        "costs_cycles": asdict(costs),
    }
    if hardware == "rtl":
        doc.update(_rtl_curves(board, costs, cpu_us, sizes, calls))
    return doc


def _rtl_curves(
    board: BoardProfile, costs: TierCosts, cpu_us: float, sizes: Sequence[int], calls: int
) -> dict[str, Any]:
    """The hardware paths with the block cost the RTL counts (see :func:`rtl_block_cycles`)."""
    cycles = rtl_block_cycles(board)
    block_bus_us = cycles * 1e6 / board.board.fabric_hz
    per_call_us, per_block_us = _tier_costs(costs, cpu_us, block_bus_us)
    curves = {
        tier: [
            round(size * calls / _simulate(per_call_us[tier], per_block_us[tier], size, calls), 4)
            for size in sizes
        ]
        for tier in ("hardware-direct", "hardware-proxied")
    }
    return {
        "hardware": "rtl",
        "throughput_mb_s_rtl": curves,
        "block_bus_cycles": {"model": _block_bus_cycles(board), "rtl": cycles},
        "block_bus_cycles_figure": (
            "modeled: model = the driver's register sequence with TdesCore's latency; rtl = "
            "bus cycles counted while TdesDriver encrypts blocks on the Verilog core"
        ),
    }


def rtl_block_cycles(board: BoardProfile, blocks: int = 16) -> int:
    """Fabric cycles of one 8-byte block through :class:`TdesDriver` on the TDES core's RTL
    (mean over ``blocks``, rounded): every bus access of the driver is a transaction of the
    simulated Verilog, so this counts writes, status polls until the core is DONE, and reads.

    Raises :class:`~juggle.errors.BackendError` when the RTL simulator cannot run.
    """
    from juggle.fabric.rtl import RtlBackend
    from juggle.fabric.sim import ModelCatalog, ModelClock
    from juggle.services.crypto.driver import TdesDriver

    clock = ModelClock()
    backend = RtlBackend(board, clock, ModelCatalog.builtin())
    try:
        region = board.regions[0]
        backend.bridge_ops(region).enable_set(True)
        window = backend.attach(region, "tdes")
        driver = TdesDriver(window)
        driver.load_key(bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123"))
        buf = bytearray(8 * blocks)
        start = clock.now_cycles(board.board.fabric_hz)
        driver.encrypt(buf, len(buf))
        return round((clock.now_cycles(board.board.fabric_hz) - start) / blocks)
    finally:
        backend.close()


def _block_bus_cycles(board: BoardProfile) -> int:
    """Bus cycles for one block: 3 writes, status polls until DONE, 2 result reads.

    The core finishes ``TdesCore.latency`` core cycles (= bus cycles) after START; a poll
    sees DONE when it ends at or after that moment.
    """
    read, write = board.bus.read_cycles, board.bus.write_cycles
    polls = max(1, math.ceil(TdesCore.latency / read)) if read else 1
    return 3 * write + polls * read + 2 * read


def _tier_costs(
    c: TierCosts, cpu_us: float, block_bus_us: float
) -> tuple[dict[str, float], dict[str, float]]:
    per_call = {
        "software": c.java_call_cycles * cpu_us,
        "native": c.c_call_cycles * cpu_us,
        "hardware-direct": c.c_hw_call_cycles * cpu_us,
        "hardware-proxied": (c.proxy_cycles + c.jni_cycles + c.c_hw_call_cycles) * cpu_us,
    }
    hw_block = block_bus_us + c.driver_loop_cycles * cpu_us
    per_block = {
        "software": c.java_block_cycles * cpu_us,
        "native": c.c_block_cycles * cpu_us,
        "hardware-direct": hw_block,
        "hardware-proxied": hw_block,
    }
    return per_call, per_block


def _simulate(call_us: float, block_us: float, size: int, calls: int) -> float:
    """Virtual µs for ``calls`` back-to-back calls of ``size`` bytes (one SimPy process)."""
    env = simpy.Environment()

    def caller() -> Generator[simpy.Event, Any, None]:
        for _ in range(calls):
            yield env.timeout(call_us)
            yield env.timeout((size // BLOCK) * block_us)

    env.process(caller())
    env.run()
    return float(env.now)
