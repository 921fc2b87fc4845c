"""The seeded inputs of ``juggle simulate cluster``: each service's per-call costs, and the
call trace with its shifting hot set.

Costs (per service, from the existing models): every service is a block-cipher service like
the Juggle paper's TDES one, moving a buffer whose size is drawn per service (seeded, from
:data:`BUFFER_SIZES`). One call's software time is the TDES model's ``software`` tier (IBM J9
JCE, :func:`juggle.simulate.tdes.model.tier_seconds`), its hardware time the ``hardware-proxied``
tier (proxy, JNI, driver, register sequence at the board profile's ``[bus]`` costs and clocks);
a hop to another board costs ``rtt_us`` plus the buffer there and back at ``link_bytes_per_s``.

Trace: calls arrive at every node as a Poisson process of ``calls_per_s``. Each call picks a
popularity rank from a Zipf law of exponent ``zipf_s`` over the services; with probability
``locality`` the rank is read in the node's own ranking (the cluster ranking shifted by a
per-node offset), otherwise in the cluster's. Every ``hot_shift_s`` seconds both rankings
rotate by ``hot_shift`` places: the hot set moves to services that were cold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from juggle.fabric.profiles import BoardProfile
from juggle.simulate.tdes.model import tier_seconds

__all__ = [
    "BUFFER_SIZES",
    "CallTrace",
    "ServiceCosts",
    "call_costs_us",
    "make_costs",
    "make_trace",
]

BUFFER_SIZES = (256, 512, 1024, 2048, 4096, 8192, 16384)
"""Buffer sizes a service's calls move, bytes (input: an assumption, each service draws one)."""


@dataclass(frozen=True, slots=True)
class ServiceCosts:
    """Per service (index = service id): buffer bytes, software and hardware µs of one call,
    and the µs a hop to another board adds."""

    buffer_bytes: list[int]
    software_us: list[float]
    hardware_us: list[float]
    hop_us: list[float]


@dataclass(frozen=True, slots=True)
class CallTrace:
    """Every call of the run in time order: arrival (s), calling node, service, and two
    uniform draws the router uses to pick remote regions (power of two choices)."""

    times: list[float]
    node: list[int]
    service: list[int]
    pick1: list[float]
    pick2: list[float]

    def __len__(self) -> int:
        return len(self.times)


def call_costs_us(
    board: BoardProfile, size: int, *, rtt_us: float, link_bytes_per_s: float
) -> tuple[float, float, float]:
    """Software, hardware and hop µs of one call moving ``size`` bytes on ``board``."""
    return (
        tier_seconds("software", 1, size, board) * 1e6,
        tier_seconds("hardware-proxied", 1, size, board) * 1e6,
        rtt_us + 2 * size / link_bytes_per_s * 1e6,
    )


def make_costs(
    board: BoardProfile,
    services: int,
    rng: np.random.Generator,
    *,
    rtt_us: float,
    link_bytes_per_s: float,
) -> ServiceCosts:
    """Draw each service's buffer size and derive its costs (see the module docstring)."""
    per_size = {
        size: call_costs_us(board, size, rtt_us=rtt_us, link_bytes_per_s=link_bytes_per_s)
        for size in BUFFER_SIZES
    }
    sizes = [BUFFER_SIZES[i] for i in rng.integers(0, len(BUFFER_SIZES), services).tolist()]
    return ServiceCosts(
        buffer_bytes=sizes,
        software_us=[per_size[s][0] for s in sizes],
        hardware_us=[per_size[s][1] for s in sizes],
        hop_us=[per_size[s][2] for s in sizes],
    )


def make_trace(
    rng: np.random.Generator,
    *,
    nodes: int,
    services: int,
    duration_s: float,
    calls_per_s: float,
    zipf_s: float,
    locality: float,
    hot_shift_s: float,
    hot_shift: int,
) -> CallTrace:
    """Draw the calls of every node over ``duration_s`` (see the module docstring)."""
    count = int(rng.poisson(nodes * calls_per_s * duration_s))
    times = np.sort(rng.uniform(0.0, duration_s, count))
    node = rng.integers(0, nodes, count)
    weights = 1.0 / np.arange(1, services + 1, dtype=np.float64) ** zipf_s
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    rank = np.minimum(np.searchsorted(cdf, rng.random(count), side="right"), services - 1)
    local = rng.random(count) < locality
    order = rng.permutation(services)
    offset = rng.integers(0, services, nodes)
    epoch = np.floor(times / hot_shift_s).astype(np.int64) if math.isfinite(hot_shift_s) else 0
    place = (rank + epoch * hot_shift + np.where(local, offset[node], 0)) % services
    service = order[place]
    return CallTrace(
        times=times.tolist(),
        node=node.tolist(),
        service=service.tolist(),
        pick1=rng.random(count).tolist(),
        pick2=rng.random(count).tolist(),
    )
