"""juggle.cluster on a local Ray cluster (issue 24, items 2 and 4; the placement and node-loss
acceptance lines): a head and three board nodes (four regions), each board's daemon run by its
agent, the controller's periods run by the tests (``step``), four tenants calling over TLS.

Timing: no sleep synchronises anything. Periods are run explicitly; callers are threads
counted under a condition; a killed daemon's replacement is awaited through the agent's own
wait (``wait_alive``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="the cluster tests need the cluster extra: juggle[cluster]")

from cluster_support import CONSUMERS, LocalCluster, key

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the label walk's rules
from Crypto.Cipher import DES3

from juggle.cluster import ClusterClient, Directory, connect
from juggle.errors import DaemonUnavailableError
from labels_support import (  # type: ignore[import-not-found, unused-ignore]
    paper_values_not_input,
    unlabeled,
)

INTERFACE = "crypto.EncryptionService"
WAIT_S = 60.0


def tdes_key(seed: int) -> bytes:
    """A valid 3-key TDES key (odd parity, the three keys distinct), distinct per seed."""
    raw = bytes((seed * 37 + i * 11) % 256 for i in range(24))
    return DES3.adjust_key_parity(raw)


def tdes(key_bytes: bytes, data: bytes) -> bytes:
    return bytes(DES3.new(key_bytes, DES3.MODE_ECB).encrypt(data))


def step(lc: LocalCluster) -> Directory:
    """Run one controller period; the directory after it (no placement may have failed)."""
    report = lc.get(lc.controller.step.remote(), timeout=120)
    assert not report.errors, report.errors
    directory: Directory = lc.get(lc.controller.directory.remote())
    return directory


def in_hardware(directory: Directory) -> set[str]:
    return {s.key for n in directory.nodes if n.alive for s in n.services if s.in_hardware}


def reset(lc: LocalCluster) -> None:
    """Every board's daemon up (restarts allowed), its regions emptied, a new rate window
    everywhere."""
    for agent in lc.agents.values():
        lc.get(agent.set_restart.remote(True))
        lc.get(agent.wait_alive.remote(1, WAIT_S), WAIT_S + 30)
        report = lc.get(agent.report.remote(False))
        held = [(r.service, False) for r in report.regions if r.service is not None]
        assert lc.get(agent.place.remote(held)) == []
        lc.get(agent.report.remote(True))


def keyed(client: ClusterClient, module: str, seed: int, **kw: Any) -> Any:
    proxy: Any = client.get_service(INTERFACE, f"(algorithm={module})", **kw)
    proxy.load_key(tdes_key(seed) if module.startswith("tdes") else _other_key(module, seed))
    proxy.test_key = tdes_key(seed)
    return proxy


def _other_key(module: str, seed: int) -> bytes:
    return bytes((seed + i) % 256 for i in range(8 if module == "des" else 16))


def calls(proxies: Iterable[Any], n: int) -> None:
    """``n`` encryptions on each proxy; TDES results checked against pycryptodome."""
    for proxy in proxies:
        for i in range(n):
            plain = bytes((i + j) % 256 for j in range(16))
            buf = bytearray(plain)
            proxy.encrypt(buf, 16)
            if proxy.key.startswith("tdes"):
                assert bytes(buf) == tdes(proxy.test_key, plain), (proxy, i)


def served(lc: LocalCluster, keys: Iterable[str]) -> tuple[int, int]:
    """(hardware calls, all calls) of services ``keys`` summed over every board, as each
    agent samples its daemon now (service-wide counts, which releasing a proxy keeps)."""
    wanted = set(keys)
    hw = total = 0
    for agent in lc.agents.values():
        for svc in lc.get(agent.report.remote(False)).services:
            if svc.key in wanted:
                hw += svc.hardware_calls
                total += svc.calls
    return hw, total


def test_hot_services_reach_hardware_and_follow_the_hot_set(local_cluster: LocalCluster) -> None:
    """Two hot services, four regions on three boards: after the controller's first period
    >= 95 % of the calls are served from hardware; when the hot set changes, the new hot
    services are in hardware within three periods (and then serve >= 95 % again)."""
    lc = local_cluster
    reset(lc)
    clients = {c: connect(tls=lc.tls[c], refresh_s=None) for c in CONSUMERS}
    try:
        first = {"c0": "tdes", "c1": "tdes", "c2": "des", "c3": "des"}
        proxies = {c: [keyed(clients[c], m, i)] for i, (c, m) in enumerate(first.items())}
        cold = keyed(clients["c0"], "aes", 9)
        everything = [p for mine in proxies.values() for p in mine]
        calls(everything, 60)  # on the boards' software tiers: nothing is in hardware yet
        calls([cold], 3)
        assert in_hardware(step(lc)) >= {key("tdes"), key("des")}
        for client in clients.values():
            client.refresh()
        measured = [key("tdes"), key("des"), key("aes")]
        hw0, total0 = served(lc, measured)
        calls(everything, 100)
        calls([cold], 3)
        hw1, total1 = served(lc, measured)
        assert total1 - total0 >= 403
        assert (hw1 - hw0) / (total1 - total0) >= 0.95, (hw1 - hw0, total1 - total0)
        after = step(lc)
        assert all(p.node in after.hardware_nodes(str(p.key)) for p in everything)

        # the hot set changes: aes and tdes2 are called, tdes and des no more
        second = {"c0": "aes", "c1": "aes", "c2": "tdes2", "c3": "tdes2"}
        fresh = {c: [keyed(clients[c], m, 20 + i)] for i, (c, m) in enumerate(second.items())}
        hot = [p for mine in fresh.values() for p in mine]
        periods = 0
        while periods < 3:
            calls(hot, 60)
            periods += 1
            if in_hardware(step(lc)) >= {key("aes"), key("tdes2")}:
                break
        assert in_hardware(lc.get(lc.controller.directory.remote())) >= {
            key("aes"),
            key("tdes2"),
        }, f"the new hot services are not in hardware after {periods} periods"
        for client in clients.values():
            client.refresh()
        hw0, total0 = served(lc, [key("aes"), key("tdes2")])
        calls(hot, 100)
        hw1, total1 = served(lc, [key("aes"), key("tdes2")])
        assert (hw1 - hw0) / (total1 - total0) >= 0.95, (hw1 - hw0, total1 - total0)
    finally:
        for client in clients.values():
            client.close()


class Caller:
    """A consumer's thread: encrypts fresh plaintexts through its proxy and checks each
    result against pycryptodome, counting calls, wrong results and failures."""

    def __init__(self, proxy: Any, key_bytes: bytes, index: int) -> None:
        self.proxy, self.key, self.index = proxy, key_bytes, index
        self.calls = self.wrong = 0
        self.failures: list[BaseException] = []
        self._cond = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        n = 0
        while True:
            with self._cond:
                if self._stop:
                    return
            n += 1
            plain = n.to_bytes(8, "big") + self.index.to_bytes(8, "big")
            buf = bytearray(plain)
            try:
                self.proxy.encrypt(buf, 16)
                if bytes(buf) != tdes(self.key, plain):
                    self.wrong += 1
            except BaseException as exc:
                self.failures.append(exc)
            with self._cond:
                self.calls += 1
                self._cond.notify_all()

    def more(self, n: int) -> None:
        """Wait until it made ``n`` more calls."""
        with self._cond:
            target = self.calls + n
            assert self._cond.wait_for(lambda: self.calls >= target or self._stop, WAIT_S), (
                f"consumer {self.index} made no {n} calls in {WAIT_S} s"
            )

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), "a caller hung"


def test_a_board_whose_daemon_is_killed_loses_no_call(local_cluster: LocalCluster) -> None:
    """SIGKILL of the daemon serving TDES in hardware while four tenants with distinct keys
    call it: no wrong result, no failed (idempotent) call, each tenant's key replayed on its
    new node; a non-idempotent call that may have run raises DaemonUnavailableError once;
    TDES is back in hardware on another board within three periods; the board rejoins when
    its agent starts its daemon again."""
    lc = local_cluster
    reset(lc)
    clients = {c: connect(tls=lc.tls[c], refresh_s=None) for c in CONSUMERS}
    callers: list[Caller] = []
    try:
        keys = {c: tdes_key(100 + i) for i, c in enumerate(CONSUMERS)}
        proxies = {c: keyed(clients[c], "tdes", 100 + i) for i, c in enumerate(CONSUMERS)}
        once = keyed(clients["c0"], "tdes", 100, idempotent=())
        calls([*proxies.values(), once], 30)
        directory = step(lc)
        (board,) = directory.hardware_nodes(key("tdes"))
        for client in clients.values():
            client.refresh()
        calls([*proxies.values(), once], 1)
        assert {p.node for p in [*proxies.values(), once]} == {board}
        lost = directory.node(board)
        assert lost is not None
        lc.get(lc.agents[board].set_restart.remote(False))
        pid = lc.daemon_pid(board)

        callers = [Caller(proxies[c], keys[c], i) for i, c in enumerate(CONSUMERS)]
        for caller in callers:
            caller.more(20)
        os.kill(pid, signal.SIGKILL)
        for caller in callers:
            caller.more(50)  # every consumer goes on calling after the kill
        moved = {c: p.node for c, p in proxies.items()}
        assert board not in moved.values(), moved
        for c, proxy in proxies.items():
            assert proxy.replays >= 1, f"{c}'s key was not replayed on {proxy.node}"
            stats = clients[c].statistics(proxy)[str(moved[c])]
            assert stats.per_method["load_key"].calls >= 1, (c, stats.per_method)

        # a call that is not idempotent and may have run raises, once; the next one moves
        with pytest.raises(DaemonUnavailableError):
            calls([once], 1)
        calls([once], 5)
        assert once.node != board

        # the controller re-places TDES on the boards left
        periods = 0
        while periods < 3:
            periods += 1
            directory = step(lc)
            if directory.hardware_nodes(key("tdes")):
                break
        elsewhere = directory.hardware_nodes(key("tdes"))
        assert elsewhere and board not in elsewhere, (periods, elsewhere)
        dead = directory.node(board)
        assert dead is not None and not dead.alive
        for client in clients.values():
            client.refresh()
        for caller in callers:
            caller.more(30)
        assert {p.node for p in proxies.values()} <= set(elsewhere)

        # the board rejoins once its agent starts its daemon again
        lc.get(lc.agents[board].set_restart.remote(True))
        back = lc.get(lc.agents[board].wait_alive.remote(lost.epoch + 1, WAIT_S), WAIT_S + 30)
        assert back.alive and back.epoch == lost.epoch + 1
        lc.daemon_pid(board)
        directory = step(lc)
        rejoined = directory.node(board)
        assert rejoined is not None and rejoined.alive and rejoined.epoch == lost.epoch + 1
        assert {s.key for s in rejoined.services} >= {key("tdes"), key("des")}
        for caller in callers:
            caller.stop()
        assert [c.wrong for c in callers] == [0, 0, 0, 0]
        assert [c.failures for c in callers] == [[], [], [], []]
        assert all(c.calls >= 100 for c in callers)
    finally:
        for caller in callers:
            caller.stop()
        for client in clients.values():
            client.close()


def test_status_and_snapshots_show_the_boards_and_what_their_regions_hold(
    local_cluster: LocalCluster,
) -> None:
    """`juggle cluster status --json` lists every board, its regions and the service each
    holds, as the directory does; a tenant's cluster snapshots cover every board; an unknown
    service or a bad filter is refused at get_service."""
    from typer.testing import CliRunner

    from juggle.commands.cli import app
    from juggle.errors import FilterSyntaxError, ServiceUnavailableError

    lc = local_cluster
    reset(lc)
    with connect(tls=lc.tls["c1"], refresh_s=None) as client:
        proxy = keyed(client, "des", 3)
        calls([proxy], 20)
        placed = step(lc)
        assert key("des") in in_hardware(placed)
        result = CliRunner().invoke(
            app, ["cluster", "status", "--address", lc.cluster.address, "--json"]
        )
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        # the label walk's rules (tests/test_json_labels.py lists this command as walked here)
        assert unlabeled(doc) == [] and paper_values_not_input(doc) == []
        assert [n["name"] for n in doc["nodes"]] == ["b1", "b2", "b3"]
        holders = {
            (n["name"], r["name"]) for n in doc["nodes"] for r in n["regions"] if r["service"]
        }
        expected = {
            (n.name, r.name) for n in placed.nodes for r in n.regions if r.service == key("des")
        }
        assert expected and expected <= holders
        assert sum(len(n["regions"]) for n in doc["nodes"]) == 4
        assert doc["labels"]["nodes"]["load_per_s"] == "measured"

        assert {node for node, _ in client.regions()} == {"b1", "b2", "b3"}
        assert len([s for node, s in client.services() if s.module == "des"]) == 3
        with pytest.raises(ServiceUnavailableError, match="algorithm=nope"):
            client.get_service(INTERFACE, "(algorithm=nope)")
        with pytest.raises(FilterSyntaxError):
            client.get_service(INTERFACE, "(algorithm=")


def test_a_ray_task_calls_through_the_cluster(local_cluster: LocalCluster) -> None:
    """A Ray task (another process, on a board node) connects with its tenant certificate
    and gets TDES results that pycryptodome agrees with."""
    import ray

    lc = local_cluster
    tls = lc.tls["c3"]
    secret = tdes_key(77)

    @ray.remote(num_cpus=0)
    def encrypt_in_task(blocks: list[bytes]) -> list[bytes]:
        from juggle.cluster import connect as cluster_connect

        with cluster_connect(tls=tls, refresh_s=None) as cluster:
            enc: Any = cluster.get_service(INTERFACE, "(algorithm=tdes)")
            enc.load_key(secret)
            out = []
            for block in blocks:
                buf = bytearray(block)
                enc.encrypt(buf, len(buf))
                out.append(bytes(buf))
            return out

    blocks = [bytes([i]) * 16 for i in range(8)]
    got = lc.get(encrypt_in_task.remote(blocks), timeout=120)
    assert got == [tdes(secret, b) for b in blocks]


def test_a_tenants_certificate_reaches_only_its_own_on_every_node(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    """On every board's daemon: tenant c1's certificate sees none of c0's consumers,
    statistics, tenants or signals, cannot use c0's key and does not change it; c0's
    certificate from another CA,
    and an expired one from the cluster's CA, are refused in the handshake."""
    import datetime

    from juggle.cluster import create_ca, issue
    from juggle.daemon import connect as daemon_connect
    from juggle.daemon.tls import TlsClientConfig
    from juggle.errors import AccessDeniedError, ServiceStateError

    lc = local_cluster
    owner, other = CONSUMERS[0], CONSUMERS[1]
    create_ca(tmp_path / "rogue-ca")
    rogue = issue(tmp_path / "rogue-ca", owner, "tenant", tmp_path / "rogue")
    long_ago = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=30)
    expired = issue(
        lc.base / "ca", owner, "tenant", tmp_path / "expired", days=1, not_before=long_ago
    )
    refused = {
        "wrong CA": TlsClientConfig(rogue.cert, rogue.key, lc.tls[owner].ca),
        "expired": TlsClientConfig(expired.cert, expired.key, lc.tls[owner].ca),
    }
    with connect(tls=lc.tls[owner], refresh_s=None) as client:
        nodes = [n for n in client.directory.nodes if n.alive]
    assert sorted(n.name for n in nodes) == ["b1", "b2", "b3"]
    secret = tdes_key(41)
    for node in nodes:
        with daemon_connect(address=node.address, tls=lc.tls[owner]) as mine:
            enc = mine.get_service(INTERFACE, filter="(algorithm=tdes)")
            enc.load_key(secret)
            buf = bytearray(b"c0's own secret.")
            enc.encrypt(buf, len(buf))
            assert bytes(buf) == tdes(secret, b"c0's own secret."), node.name
            (snap,) = [s for s in mine.services() if s.module == "tdes"]
            with daemon_connect(address=node.address, tls=lc.tls[other]) as theirs:
                assert [t.name for t in theirs.tenants()] == [other], node.name
                assert all(owner not in s.consumers for s in theirs.services()), node.name
                assert owner not in theirs.statistics(snap.service_id).per_consumer, node.name
                assert theirs.signals().tenant == other, node.name
                proxy = theirs.get_service(INTERFACE, filter="(algorithm=tdes)")
                data = bytes(range(16))
                probe = bytearray(data)
                try:  # c1 has no key here (refused), or its own from an earlier test
                    proxy.encrypt(probe, len(probe))
                except ServiceStateError:
                    pass
                else:
                    assert bytes(probe) != tdes(secret, data), f"{node.name}: c0's key used"
                proxy.load_key(tdes_key(42))  # c1's own key leaves c0's alone
            again = bytearray(data)
            enc.encrypt(again, len(again))
            assert bytes(again) == tdes(secret, data), node.name
        for why, tls in refused.items():
            with pytest.raises(AccessDeniedError):  # in the handshake: before any request
                daemon_connect(address=node.address, tls=tls).close()
                pytest.fail(f"{node.name}: a {why} certificate was let in")
