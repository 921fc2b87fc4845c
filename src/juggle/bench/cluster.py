"""The ``cluster`` benchmark group: what a call through a cluster proxy costs (measured).

A one-node Ray cluster on this machine (``ray.init`` with the board resource
``juggle_board:bench``), the controller without periods, one node agent running a daemon with
a TLS listener on 127.0.0.1 and a software ``math.AddService``; this process connects with
:func:`juggle.cluster.connect` under a tenant certificate. Figures (wall clock, this machine):

- ``cluster_call_us_p50``: median of ``add(1, 2)`` through a cluster proxy: the proxy's
  routing, then the node's daemon over TCP (loopback) with mutual TLS 1.3. Target <= 150 and
  <= 1.2 x ``daemon_tls_call_us_p50``.
- ``cluster_direct_tls_call_us_p50``: the same call through a plain remote client
  (``juggle.daemon.connect(address="tls://...")``) to the same daemon, measured in the same
  run, in blocks of 20 calls alternated with the cluster proxy's, so a change of the machine's
  load hits both (2,000 calls each; 200 with ``quick``).
- ``cluster_call_ratio``: the first over the second (the cluster proxy's own share).

Needs the ``cluster`` extra (ray); ``juggle bench`` skips the group, naming the extra, when
ray is missing. Ray's start takes ~5-10 s and ~0.5 GiB here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["LABELS", "ray_missing", "run"]

LABELS = {
    "cluster_call_us_p50": "measured",
    "cluster_direct_tls_call_us_p50": "measured",
    "cluster_call_ratio": "measured",
}

_MODULE = """
[module]
name = "benchadd"
version = "1.0.0"

[[services]]
interfaces = ["math.AddService"]
per_consumer = true

[services.native]
class = "bench_code.SoftwareAdd"
"""

_CODE = "from juggle.services.arith import SoftwareAdd\n"
_BOARD = "bench"
_BLOCK = 20  # calls a side makes back to back before the other side's turn


def ray_missing() -> str | None:
    """Why the group cannot run here (ray not installed), or None when it can."""
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        return f"ray is not installed ({exc})"
    return None


def _block_us(call: Callable[[], Any], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        call()
        samples.append((time.perf_counter_ns() - t0) / 1000.0)
    return samples


def run(quick: bool) -> dict[str, float]:
    """The group's figures (see the module's text). Raises ``RuntimeError`` when a Ray
    driver is connected already (the bench starts its own one-node cluster)."""
    import ray

    from juggle.cluster import AgentConfig, connect, create_ca, issue, start_agent
    from juggle.cluster.controller import start_controller
    from juggle.daemon import connect as daemon_connect
    from juggle.daemon.tls import TlsClientConfig

    if ray.is_initialized():
        raise RuntimeError("the cluster bench starts its own Ray: disconnect the driver first")
    calls = 200 if quick else 2000
    root = Path(tempfile.mkdtemp(prefix="jcbench"))
    agent: Any = None
    controller: Any = None
    try:
        create_ca(root / "ca")
        issue(root / "ca", _BOARD, "node", root / "node")
        mine = issue(root / "ca", "bench", "tenant", root / "tenant")
        tls = TlsClientConfig(mine.cert, mine.key, mine.ca)
        module = root / "benchadd"
        module.mkdir()
        (module / "juggle.toml").write_text(_MODULE)
        (module / "bench_code.py").write_text(_CODE)
        policy = (
            f'version = 1\nadmin_uids = [{os.getuid()}]\n\n[[tenants]]\nname = "bench"\n'
            'cert_cn = "bench"\n'
        )
        ray.init(
            address="local",  # a cluster of its own, never one found on this machine
            num_cpus=1,
            resources={f"juggle_board:{_BOARD}": 1},
            object_store_memory=80 * 1024 * 1024,
            include_dashboard=False,
            namespace="juggle",
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
        # the handle is kept: an actor that is not detached lives as long as its handle
        controller = start_controller(period_s=None, detached=False)
        agent = start_agent(
            AgentConfig(
                board=_BOARD,
                base=str(root / "board"),
                modules=(str(module),),
                tls_cert=str(root / "node" / f"{_BOARD}.crt"),
                tls_key=str(root / "node" / f"{_BOARD}.key"),
                tls_ca=str(root / "node" / "ca.crt"),
                policy=policy,
                daemon_args=("--log-level", "WARNING"),
            ),
            detached=False,
        )
        with connect(tls=tls, refresh_s=None) as cluster:
            proxy: Any = cluster.get_service("math.AddService")
            node = cluster.directory.node(_BOARD)
            assert node is not None
            with daemon_connect(address=node.address, tls=tls) as direct:
                adder: Any = direct.get_service("math.AddService")
                for _ in range(calls // 5):
                    proxy.add(1, 2)
                    adder.add(1, 2)
                via_cluster: list[float] = []
                plain: list[float] = []
                # short blocks, alternated: each side runs back to back as daemon_tls_call_us_p50
                # does, and a change of the machine's load hits both alike
                for _ in range(calls // _BLOCK):
                    via_cluster += _block_us(lambda: proxy.add(1, 2), _BLOCK)
                    plain += _block_us(lambda: adder.add(1, 2), _BLOCK)
        cluster_us = statistics.median(via_cluster)
        direct_us = statistics.median(plain)
        return {
            "cluster_call_us_p50": round(cluster_us, 2),
            "cluster_direct_tls_call_us_p50": round(direct_us, 2),
            "cluster_call_ratio": round(cluster_us / direct_us, 3),
        }
    finally:
        if agent is not None:
            with contextlib.suppress(Exception):
                ray.get(agent.shutdown.remote(), timeout=30)
        if controller is not None and ray.is_initialized():
            with contextlib.suppress(Exception):
                ray.kill(controller)
        if ray.is_initialized():
            ray.shutdown()
        shutil.rmtree(root, ignore_errors=True)
