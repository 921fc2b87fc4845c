"""A juggle cluster on this machine for the tests: ``ray.cluster_utils.Cluster`` with a head
and three board nodes (``b1`` with two regions, ``b2`` and ``b3`` with one: four regions),
each board's agent running its own daemon on the simulated board with a TLS listener, the
controller without a period of its own (the tests run its periods), a cluster CA with a node
certificate per board and tenant certificates ``c0``..``c3``.

Services on every board: ``tdes``, ``des``, ``aes`` (the shipped modules) and ``tdes2`` (the
TDES module under another name and ``algorithm``), with a bitstream for each region of the
board. Every process started here (Ray's, the daemons) is ended by :meth:`LocalCluster.close`,
which checks that the daemons are gone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import juggle
from juggle.cluster import AgentConfig, create_ca, issue, start_agent, start_controller
from juggle.daemon.tls import TlsClientConfig
from juggle.fabric.bitstream import write_bitstream

ROOT = Path(__file__).resolve().parents[2]
MODULES = ROOT / "examples" / "modules"
BOARDS = {"b1": ("prr0", "prr1"), "b2": ("prr0",), "b3": ("prr0",)}
CONSUMERS = ("c0", "c1", "c2", "c3")
SERVICES = ("tdes", "des", "aes", "tdes2")
#: Ray's object store per node (bytes): small, the cluster moves no data through it
OBJECT_STORE = 80 * 1024 * 1024

SECOND_REGION = """
[[regions]]
name = "prr1"
slices = 2240
flipflops = 4480
mult18 = 20
ram16 = 20
tbuf = 6848
max_bitstream_bytes = 160_000
bitstream_bytes = 149_088
adjacent = []
window_base = 0x4101_0000
window_size = 0x1_0000
"""


def key(module: str) -> str:
    """The cluster key of a test service."""
    return f"{module}/crypto.EncryptionService"


def _module(source: str, name: str, regions: tuple[str, ...], out: Path) -> Path:
    """A copy of shipped module ``source`` named ``name`` (its ``algorithm`` too, unless the
    same) with a bitstream for each of ``regions``."""
    folder = out / name
    shutil.copytree(MODULES / source, folder)
    toml = (folder / "juggle.toml").read_text()
    if name != source:
        toml = toml.replace(f'name = "{source}"', f'name = "{name}"')
        toml = toml.replace(f'algorithm = "{source}"', f'algorithm = "{name}"')
    entries = []
    for region in regions:
        bit = folder / "bitstreams" / f"{source}_{region}.bit"
        if not bit.exists():
            write_bitstream(bit, source, "2vp30ff896", region, 149_088)
        entries.append(f'{region} = "bitstreams/{bit.name}"')
    toml = toml.replace(
        f'bitstreams = {{ prr0 = "bitstreams/{source}_prr0.bit" }}',
        "bitstreams = { " + ", ".join(entries) + " }",
    )
    (folder / "juggle.toml").write_text(toml)
    return folder


def policy_text() -> str:
    """The daemons' policy: this uid (the agents) is admin; one tenant per consumer CN."""
    lines = ["version = 1", f"admin_uids = [{os.getuid()}]", ""]
    for name in CONSUMERS:
        lines += ["[[tenants]]", f'name = "{name}"', f'cert_cn = "{name}"', ""]
    return "\n".join(lines)


class LocalCluster:
    """The running cluster: ``agents`` (board -> actor handle), ``controller``, ``tls``
    (consumer -> its client configuration), ``base`` (the temporary folder)."""

    def __init__(self) -> None:
        import ray
        from ray.cluster_utils import Cluster

        self.base = Path(tempfile.mkdtemp(prefix="jc", dir="/tmp"))
        self.base.chmod(0o755)
        self.pids: set[int] = set()
        self.tls: dict[str, TlsClientConfig] = {}
        self.agents: dict[str, Any] = {}
        self.controller: Any = None
        self.cluster: Any = None
        self._ray = ray
        try:
            self._prepare()
            self.cluster = Cluster(
                initialize_head=True,
                head_node_args={
                    "num_cpus": 1,
                    "object_store_memory": OBJECT_STORE,
                    "include_dashboard": False,
                },
            )
            for board in BOARDS:
                self.cluster.add_node(
                    num_cpus=1,
                    object_store_memory=OBJECT_STORE,
                    resources={f"juggle_board:{board}": 1},
                )
            ray.init(
                address=self.cluster.address,
                namespace="juggle",
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
            self.cluster.wait_for_nodes()
            self.controller = start_controller(period_s=None, detached=False)
            for board, regions in BOARDS.items():
                self.agents[board] = start_agent(self._config(board, regions), wait=False)
            for agent in self.agents.values():
                report = ray.get(agent.ready.remote(60.0), timeout=120)
                self.pids.add(report.daemon_pid)
        except BaseException:
            self.close()
            raise

    def _prepare(self) -> None:
        ca = self.base / "ca"
        create_ca(ca)
        for board in BOARDS:
            issue(ca, board, "node", self.base / "certs" / board)
        for name in CONSUMERS:
            paths = issue(ca, name, "tenant", self.base / "certs" / name)
            self.tls[name] = TlsClientConfig(paths.cert, paths.key, paths.ca)
        source = Path(juggle.__file__).parent / "fabric" / "profiles" / "xupv2p.toml"
        (self.base / "two.toml").write_text(source.read_text() + SECOND_REGION)
        for regions in {r for r in BOARDS.values()}:
            out = self.base / "modules" / "-".join(regions)
            out.mkdir(parents=True)
            for name in SERVICES:
                _module("tdes" if name == "tdes2" else name, name, regions, out)

    def _config(self, board: str, regions: tuple[str, ...]) -> AgentConfig:
        certs = self.base / "certs" / board
        modules = self.base / "modules" / "-".join(regions)
        return AgentConfig(
            board=board,
            base=str(self.base / "boards" / board),
            fabric=str(self.base / "two.toml") if len(regions) > 1 else "xupv2p",
            modules=tuple(str(modules / name) for name in SERVICES),
            tls_cert=str(certs / f"{board}.crt"),
            tls_key=str(certs / f"{board}.key"),
            tls_ca=str(certs / "ca.crt"),
            policy=policy_text(),
            daemon_args=("--workers", "8", "--log-level", "WARNING"),
        )

    def get(self, ref: Any, timeout: float = 60.0) -> Any:
        """``ray.get`` with a bound."""
        return self._ray.get(ref, timeout=timeout)

    def daemon_pid(self, board: str) -> int:
        """The pid of ``board``'s daemon now (remembered, to check it is ended at close)."""
        pid = self.get(self.agents[board].daemon_pid.remote())
        assert pid is not None, f"no daemon runs on {board}"
        self.pids.add(pid)
        return int(pid)

    def close(self) -> None:
        """End every agent's daemon, the actors and Ray's processes; check the daemons are
        gone (AssertionError naming the pids left)."""
        ray = self._ray
        if ray.is_initialized():
            for agent in self.agents.values():
                with contextlib.suppress(Exception):
                    ray.get(agent.shutdown.remote(), timeout=30)
                with contextlib.suppress(Exception):
                    ray.kill(agent, no_restart=True)
            if self.controller is not None:
                with contextlib.suppress(Exception):
                    ray.kill(self.controller, no_restart=True)
            ray.shutdown()
        if self.cluster is not None:
            self.cluster.shutdown()
        left = []
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 0)
                left.append(pid)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.base, ignore_errors=True)
        assert not left, f"daemons left running after the cluster closed: {left}"


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    """Poll ``predicate`` until true (AssertionError naming ``what`` after ``timeout`` s):
    for states another process reaches, where no event can be waited on."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not within {timeout} s"
        time.sleep(0.05)
