"""Benchmarks of the daemon (for ``juggle bench``): what a call through it costs.

Every figure is measured (wall clock of this machine), with a real daemon process started on a
temporary socket and this process as its client:

- ``daemon_call_us_p50``: median round trip of a no-op-ish call through the daemon
  (``math.AddService.add(1, 2)`` on its software tier): the client's encoding, the socket both
  ways, the connection's reader thread in the daemon (a lone caller's call runs there) and the
  in-process proxy call. Target <= 50.
- ``daemon_tls_call_us_p50``: the same call as ``daemon_call_us_p50`` by a remote client over
  TCP (loopback) with mutual TLS 1.3 (:mod:`juggle.daemon.tls`) to the same daemon: TCP instead
  of the Unix socket, and each frame sealed and unsealed both ways. Target <= 150.
- ``daemon_ping_us_p50``: median round trip of a protocol ``ping`` (answered by the
  connection's reader thread, no proxy): the floor under every call.
- ``daemon_socket_floor_us_p50``: median round trip of 32 bytes through a Unix socket pair
  to a child process that echoes them, measured in the same run: what two wake-ups of two
  processes cost on this machine now (from ~7 µs when the other CPU is busy anyway to ~80 µs
  when it must be woken first). Both daemon and client spin briefly before blocking (see
  :mod:`juggle.daemon.spin`), so a call can go under it; without spinning it cannot.
- ``daemon_transparency_64k``: throughput of native TDES on 64 KiB buffers through the daemon
  (shared memory) divided by the same calls in process. Target >= 0.9.
- ``daemon_transparency_64k_socket``: the same with the buffers carried in the frames instead
  of shared memory (the fallback path).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from juggle.daemon.tls import TlsClientConfig

__all__ = ["daemon_bench"]

_MODULE = """
[module]
name = "{name}"
version = "1.0.0"

[[services]]
interfaces = ["{interface}"]
per_consumer = true

[services.native]
class = "bench_code.{cls}"
"""

_CODE = """
from juggle.services.arith import SoftwareAdd
from juggle.services.crypto import NativeTDES
"""

_ECHO = """
import socket, sys
s = socket.socket(fileno=int(sys.argv[1]))
while True:
    d = s.recv(64)
    if not d:
        break
    s.sendall(d)
"""

_KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")


def _module(root: Path, name: str, interface: str, cls: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "juggle.toml").write_text(_MODULE.format(name=name, interface=interface, cls=cls))
    (folder / "bench_code.py").write_text(_CODE)
    return folder


def _pki(root: Path) -> TlsClientConfig:
    """A cluster CA, the daemon's node certificate and an admin's client certificate under
    ``root``, and the policy (``root/policy.toml``: this uid and CN ``bench`` are admins); the
    client's TLS configuration."""
    from juggle.cluster.pki import create_ca, issue

    create_ca(root / "ca")
    issue(root / "ca", "node", "node", root / "node")
    mine = issue(root / "ca", "bench", "tenant", root / "bench")
    (root / "policy.toml").write_text(
        f'version = 1\nadmin_uids = [{os.getuid()}]\nadmin_cns = ["bench"]\n'
    )
    return TlsClientConfig(mine.cert, mine.key, mine.ca)


def _wait_for(path: Path, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the daemon exited with {proc.returncode}")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
            return
        except OSError:
            time.sleep(0.02)
        finally:
            probe.close()
    raise RuntimeError(f"the daemon did not listen on {path} within {timeout} s")


def _median_us(fn: object, n: int) -> float:
    call = fn  # a zero-argument callable
    samples = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        call()  # type: ignore[operator]
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples) / 1000.0


def _socket_floor_us(n: int) -> float:
    """Median round trip (µs) of 32 bytes through a Unix socket pair to an echoing child."""
    ours, theirs = socket.socketpair()
    echo = subprocess.Popen(
        [sys.executable, "-c", _ECHO, str(theirs.fileno())], pass_fds=(theirs.fileno(),)
    )
    theirs.close()
    message = b"x" * 32

    def once() -> None:
        ours.sendall(message)
        got = 0
        while got < len(message):
            chunk = ours.recv(64)
            if not chunk:
                raise RuntimeError("the echo process ended")
            got += len(chunk)

    try:
        for _ in range(n // 10):
            once()
        return _median_us(once, n)
    finally:
        ours.close()
        try:
            echo.wait(10)
        except subprocess.TimeoutExpired:
            echo.kill()
            echo.wait()


def _seconds(encrypt: object, buf: bytearray, n: int) -> float:
    """Seconds of ``n`` calls ``encrypt(buf, len(buf))``."""
    t0 = time.perf_counter()
    for _ in range(n):
        encrypt(buf, len(buf))  # type: ignore[operator]
    return time.perf_counter() - t0


def _ratios(
    local: object, remotes: list[object], buf: bytearray, n: int, runs: int = 5
) -> list[float]:
    """Throughput of each of ``remotes`` over ``local``'s: best of ``runs`` runs of ``n``
    calls each, the runs interleaved so that a change of the machine's load hits all of them
    alike (short runs, many of them: each side's best is likelier a run with a CPU to itself,
    as a call of native TDES on 64 KiB takes ~8 ms alone and twice that sharing a CPU)."""
    best = [float("inf")] * (1 + len(remotes))
    for _ in range(runs):
        for i, encrypt in enumerate([local, *remotes]):
            best[i] = min(best[i], _seconds(encrypt, buf, n))
    return [best[0] / b for b in best[1:]]


def daemon_bench(quick: bool = False, spin_us: float | None = None) -> dict[str, float]:
    """Start a daemon on a temporary socket, measure, stop it; the figures (see module doc).
    ``quick`` makes fewer calls (a smoke run). ``spin_us``: the spin bound of the daemon and
    its clients (default: theirs, :data:`~juggle.daemon.spin.DEFAULT_SPIN_US`; 0: none)."""
    import juggle
    from juggle.daemon.client import connect
    from juggle.daemon.spin import DEFAULT_SPIN_US, check_spin_us

    spin = DEFAULT_SPIN_US if spin_us is None else check_spin_us(spin_us)

    calls, blocks, runs = (300, 5, 3) if quick else (5000, 12, 15)
    root = Path(tempfile.mkdtemp(prefix="jdbench"))
    proc: subprocess.Popen[bytes] | None = None
    try:
        add = _module(root, "benchadd", "math.AddService", "SoftwareAdd")
        tdes = _module(root, "benchtdes", "crypto.EncryptionService", "NativeTDES")
        sock = root / "d.sock"
        tls = _pki(root)
        proc = subprocess.Popen(
            [sys.executable, "-m", "juggle.daemon", "--socket", str(sock), "--state",
             str(root / "state"), "--log-level", "WARNING", "--spin-us", str(spin),
             "--policy", str(root / "policy.toml"), "--tls", "127.0.0.1:0",
             "--tls-cert", str(root / "node" / "node.crt"),
             "--tls-key", str(root / "node" / "node.key"), "--tls-ca", str(tls.ca)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait_for(sock, proc)
        buf = bytearray(os.urandom(64 << 10))
        with (
            connect(sock, spin_us=spin) as client,
            connect(sock, shm_threshold=1 << 30, spin_us=spin) as inline,  # buffers in frames
            juggle.Framework("xupv2p") as fw,
        ):
            client.install(add)
            client.install(tdes)
            adder = client.get_service("math.AddService")
            for _ in range(calls // 10):
                adder.add(1, 2)  # warm up (connections, pool threads, caches)
            call_us = _median_us(lambda: adder.add(1, 2), calls)
            address = (root / "state" / "tls-address").read_text().strip()
            with connect(address=f"tls://{address}", tls=tls, spin_us=spin) as remote:
                remote_adder = remote.get_service("math.AddService")
                for _ in range(calls // 10):
                    remote_adder.add(1, 2)
                tls_call_us = _median_us(lambda: remote_adder.add(1, 2), calls)
            ping_us = _median_us(client.ping, calls)
            floor_us = _socket_floor_us(calls)
            fw.install(tdes).start()
            proxies = [
                fw.get_service("EncryptionService", consumer="bench"),
                client.get_service("EncryptionService"),
                inline.get_service("EncryptionService"),
            ]
            for proxy in proxies:
                proxy.load_key(_KEY)
            shm_ratio, socket_ratio = _ratios(
                proxies[0].encrypt, [p.encrypt for p in proxies[1:]], buf, blocks, runs
            )
        return {
            "daemon_call_us_p50": call_us,
            "daemon_tls_call_us_p50": tls_call_us,
            "daemon_ping_us_p50": ping_us,
            "daemon_socket_floor_us_p50": floor_us,
            "daemon_transparency_64k": shm_ratio,
            "daemon_transparency_64k_socket": socket_ratio,
        }
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        with contextlib.suppress(OSError):
            shutil.rmtree(root)


if __name__ == "__main__":  # python -m juggle.daemon.bench [--quick] [--spin-us N]
    _spin = float(sys.argv[sys.argv.index("--spin-us") + 1]) if "--spin-us" in sys.argv else None
    for key, value in daemon_bench("--quick" in sys.argv, _spin).items():
        print(f"{key:34} {value:10.3f}")
