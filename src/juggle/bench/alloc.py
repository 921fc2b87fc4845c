"""Decision latency of the allocator core alone: request in, solution out (issue 3, item 10).

Only :meth:`Allocator.request` is timed, with ``time.perf_counter_ns``, one call at a time.
Everything that keeps the workload going between two timed calls (completing stops and
reconfigurations through a :class:`~juggle.core.loopback.LoopbackShell`, starting, finishing,
releasing devices) is untimed. Two workloads:

* ``alloc_p50_us`` / ``alloc_p99_us``: the zedboard's 3 regions and 4 devices, one real-time
  and three general-purpose tenants churning at random, so every solution path occurs.
* ``alloc_p99_us_64r_1000q``: 64 regions, half busy with real-time tasks and half with
  preemptible general-purpose ones, 1,000 requests kept on the wait list; timed requests are
  real-time preemptions (a full scan) and general-purpose requests that end on the wait list.

All figures are measured wall clock on this machine, in microseconds.
"""

from __future__ import annotations

import random
import time

from juggle.core.allocator import Allocator
from juggle.core.loopback import LoopbackShell
from juggle.core.regionfsm import RegionPhase
from juggle.core.taskindex import DeviceSpec, RegionSpec, TaskDescriptor, TaskIndex
from juggle.core.tenants import DeviceState
from juggle.fabric.profiles import load_profile

__all__ = ["run"]

_HOLD = RegionPhase.HOLD
_IDLE = RegionPhase.IDLE
_BUSY = RegionPhase.BUSY


def run(quick: bool = False) -> dict[str, float]:
    """Measure both workloads; ``quick`` uses fewer iterations (for smoke tests).

    Returns ``alloc_p50_us``, ``alloc_p99_us`` and ``alloc_p99_us_64r_1000q`` (measured µs),
    plus the number of timed samples of each workload.
    """
    n3 = 3_000 if quick else 30_000
    n64 = 1_000 if quick else 10_000
    small = _percentiles(_three_regions(n3, seed=3))
    large = _percentiles(_sixty_four_regions(n64, queued=1_000, seed=64))
    return {
        "alloc_p50_us": small[0],
        "alloc_p99_us": small[1],
        "alloc_p50_us_64r_1000q": large[0],
        "alloc_p99_us_64r_1000q": large[1],
        "alloc_samples": n3,
        "alloc_samples_64r_1000q": n64,
    }


def _percentiles(samples_ns: list[int]) -> tuple[float, float]:
    ordered = sorted(samples_ns)
    n = len(ordered)
    return ordered[n // 2] / 1000.0, ordered[min(n - 1, int(n * 0.99))] / 1000.0


# -- 3 regions: random churn ---------------------------------------------------------------


def _three_regions(iterations: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    alloc = Allocator(TaskIndex.from_profile(load_profile("zedboard")), hold_us=100.0)
    tenants = [("rt", True), ("gp1", False), ("gp2", False), ("gp3", False)]
    for name, realtime in tenants:
        alloc.add_tenant(name, realtime=realtime)
    shell = LoopbackShell(alloc)
    pairs = [(t, d.name) for t, _ in tenants for d in alloc.index.devices]
    samples: list[int] = []
    clock = time.perf_counter_ns
    now = 0.0
    while len(samples) < iterations:
        now += 10.0
        shell.execute(alloc.advance(now))
        for _ in range(2):
            if shell.connected:
                holders = list(shell.connected.values())
                _churn(alloc, shell, *holders[rng.randrange(len(holders))], now, rng)
        tenant, device = pairs[rng.randrange(len(pairs))]
        state = alloc.device_state(tenant, device)
        if state is DeviceState.DISCONNECTED:
            t0 = clock()
            solution = alloc.request(tenant, device, now)
            samples.append(clock() - t0)
            shell.run(solution)
        elif state is DeviceState.WAITING:
            shell.execute(alloc.release(tenant, device, now))
        shell.settle(now)
    return samples


def _churn(
    alloc: Allocator, shell: LoopbackShell, tenant: str, device: str, now: float, rng: random.Random
) -> None:
    region = alloc.connected_region(tenant, device)
    assert region is not None
    state = alloc.region_state(region)
    if state in (_HOLD, _IDLE):
        if rng.random() < 0.45:
            shell.execute(alloc.start(tenant, device, now))
        else:
            shell.execute(alloc.release(tenant, device, now))
    elif state is _BUSY:
        shell.execute(alloc.finish(tenant, device, now))


# -- 64 regions, 1,000 queued requests ---------------------------------------------------


def _wide_index(regions: int, groups: int) -> TaskIndex:
    """``regions`` regions of growing size; ``any`` fits all, ``g<k>`` fits group k only."""
    specs = [RegionSpec(f"r{i}", 100 + 10 * i) for i in range(regions)]
    devices = [DeviceSpec("any", 50.0, 20.0, 64)]
    devices += [DeviceSpec(f"g{k}", 50.0, 20.0, 64) for k in range(groups)]
    tasks = [TaskDescriptor("any", r.name, f"any@{r.name}", 4096, 100.0) for r in specs]
    per = regions // groups
    for k in range(groups):
        for r in specs[k * per : (k + 1) * per]:
            tasks.append(TaskDescriptor(f"g{k}", r.name, f"g{k}@{r.name}", 4096, 100.0))
    return TaskIndex(specs, devices, tasks)


def _sixty_four_regions(iterations: int, queued: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    regions, groups = 64, 8
    alloc = Allocator(_wide_index(regions, groups), hold_us=1e15)
    shell = LoopbackShell(alloc)
    now = 0.0
    # half the regions run real-time tasks (never preempted), half general-purpose ones
    for i in range(regions):
        name = f"occ{i}"
        alloc.add_tenant(name, realtime=i % 2 == 0)
        shell.run(alloc.request(name, "any", now))
        shell.settle(now)
        shell.execute(alloc.start(name, "any", now))
    devices = ["any"] + [f"g{k}" for k in range(groups)]
    waiting = 0
    gp = 0
    while waiting < queued:
        gp += 1
        alloc.add_tenant(f"gp{gp}")
        for device in devices:
            if waiting < queued:
                shell.run(alloc.request(f"gp{gp}", device, now))
                waiting += 1
    probes = [f"probe{k}" for k in range(8)]
    for name in probes:
        alloc.add_tenant(name)
    hunters = [f"rtx{k}" for k in range(4)]
    for name in hunters:
        alloc.add_tenant(name, realtime=True)
    samples: list[int] = []
    clock = time.perf_counter_ns
    while len(samples) < iterations:
        now += 1.0
        if rng.random() < 0.5:
            hunter = hunters[rng.randrange(len(hunters))]
            t0 = clock()
            solution = alloc.request(hunter, "any", now)
            samples.append(clock() - t0)
            shell.run(solution)
            shell.settle(now)
            # give the region back: a waiter takes it and starts, the victim stays queued
            shell.execute(alloc.release(hunter, "any", now))
            _start_held(alloc, shell, now)
            _trim(alloc, shell, queued, now)
        else:
            probe = probes[rng.randrange(len(probes))]
            device = devices[rng.randrange(len(devices))]
            t0 = clock()
            solution = alloc.request(probe, device, now)
            samples.append(clock() - t0)
            shell.run(solution)
            shell.execute(alloc.release(probe, device, now))
    return samples


def _start_held(alloc: Allocator, shell: LoopbackShell, now: float) -> None:
    shell.settle(now)
    for region, (tenant, device) in list(shell.connected.items()):
        if alloc.region_state(region) is _HOLD:
            shell.execute(alloc.start(tenant, device, now))


def _trim(alloc: Allocator, shell: LoopbackShell, queued: int, now: float) -> None:
    """Withdraw the newest waiters beyond ``queued`` (preempted work joins the queue)."""
    if alloc.waiting_count <= queued:
        return
    for entry in alloc.waiting()[queued:]:
        shell.execute(alloc.release(entry.tenant, entry.device, now))
