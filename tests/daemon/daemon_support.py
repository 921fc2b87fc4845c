"""Helpers of the daemon tests: real daemon processes on temporary sockets, client processes.

Socket directories live in short ``/tmp/jd*`` directories of mode 0755, so clients of another
uid (``nobody``) can reach the socket file and be judged by the daemon rather than by file
permissions.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from juggle.daemon import Client, connect

ROOT = Path(__file__).resolve().parents[2]
MODULES = ROOT / "examples" / "modules"
WORKER = Path(__file__).with_name("daemon_worker.py")
NOBODY = 65534
START_TIMEOUT_S = 20.0


class DaemonProcess:
    """``python -m juggle.daemon`` on ``base/s.sock`` with state in ``base/state``."""

    def __init__(
        self,
        base: Path,
        policy: str | None = None,
        state: Path | None = None,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.base = base
        self.extra = extra
        self.socket = base / "s.sock"
        self.state = state or base / "state"
        self.policy: Path | None = None
        if policy is not None:
            self.policy = base / "policy.toml"
            self.policy.write_text(policy)
        self.log = base / "daemon.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *, with_policy: bool = True) -> DaemonProcess:
        cmd = [
            sys.executable,
            "-m",
            "juggle.daemon",
            "--socket",
            str(self.socket),
            "--state",
            str(self.state),
            "--workers",
            "16",
            *self.extra,
        ]
        if self.policy is not None and with_policy:
            cmd += ["--policy", str(self.policy)]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=log, cwd="/")
        self.wait_ready()
        return self

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        assert self.proc is not None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}:\n{self.logs()}")
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(str(self.socket))
                return
            except OSError:
                time.sleep(0.02)
            finally:
                probe.close()
        raise AssertionError(f"daemon not listening after {START_TIMEOUT_S} s:\n{self.logs()}")

    def logs(self) -> str:
        try:
            return self.log.read_text()[-4000:]
        except OSError:
            return ""

    def client(self, **kwargs: Any) -> Client:
        return connect(self.socket, **kwargs)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self, timeout: float = 20.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def make_base() -> Path:
    base = Path(tempfile.mkdtemp(prefix="jd", dir="/tmp"))
    base.chmod(0o755)
    return base


def worker(
    *args: str, uid: int | None = None, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """Run daemon_worker.py with ``args`` (as ``uid`` when given); its completed process."""
    extra: dict[str, Any] = {}
    if uid is not None:
        extra = {"user": uid, "group": uid, "extra_groups": []}
    return subprocess.run(
        [sys.executable, str(WORKER), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd="/",
        check=False,
        **extra,
    )


def worker_json(*args: str, uid: int | None = None, timeout: float = 60.0) -> Any:
    done = worker(*args, uid=uid, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def start_worker(*args: str, uid: int | None = None) -> subprocess.Popen[str]:
    extra: dict[str, Any] = {}
    if uid is not None:
        extra = {"user": uid, "group": uid, "extra_groups": []}
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd="/",
        **extra,
    )


def run_as(uid: int, fn: Any, *args: Any, timeout: float = 60.0) -> Any:
    """``fn(*args)`` in a forked child that dropped to ``uid`` (and group ``uid``, no
    supplementary groups) first; its JSON-able result. The child runs code imported already:
    the interpreter's files may be out of reach of ``uid``."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        status = 0
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            result: Any = {"result": fn(*args)}
        except BaseException as exc:
            result = {"crash": f"{type(exc).__name__}: {exc}"}
            status = 1
        try:
            os.write(write_end, json.dumps(result).encode())
        finally:
            os._exit(status)
    os.close(write_end)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            ready, _, _ = select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                raise AssertionError(f"child as uid {uid} did not finish in {timeout} s")
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    report = json.loads(b"".join(chunks) or b"{}")
    assert "result" in report, report
    return report["result"]


def running_as_root() -> bool:
    return os.geteuid() == 0


def wait_until(predicate: Any, timeout: float, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if predicate():
                return True
        time.sleep(interval)
    return False


def free_port() -> int:
    """A TCP port of 127.0.0.1 nobody listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
