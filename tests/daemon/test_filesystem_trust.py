"""The daemon trusts nothing it finds in the filesystem (issue 19, item 4).

Real daemon processes (run as root by the suite) face what another uid (65534, ``nobody``)
planted: a state directory, a lock file that is a symbolic link or a hard link, a manifest or
policy of another owner, FIFOs in place of the policy and the dashboard token, a socket folder
of its own in which it swaps the socket for a symbolic link at the worst moment. Each is refused
with an error naming the path (or, for the socket, never followed), and nothing outside the
state directory changes. A client facing a daemon of the wrong uid refuses before sending a
byte; crash leftovers under ``STATE/modules/`` are removed at start.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_support import (
    MODULES,
    NOBODY,
    DaemonProcess,
    free_port,
    make_base,
    run_as,
    running_as_root,
    wait_until,
)

from juggle.daemon import DaemonIdentityError, PolicyError, UnsafePathError, connect
from juggle.daemon.client import DAEMON_UID_ENV
from juggle.daemon.protocol import PROTOCOL_VERSION, frame, pack
from juggle.daemon.safefs import (
    check_private_dir,
    open_regular_nofollow,
    read_regular_file,
    replace_file,
)
from juggle.errors import DashboardError

pytestmark = pytest.mark.skipif(
    not running_as_root(), reason="needs root: files and processes of another uid (65534)"
)

SECRET = b"root's secret: nobody may change or read this\n"


@pytest.fixture
def base() -> Iterator[Path]:
    folder = make_base()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _sentinel(base: Path) -> Path:
    """A root file of mode 0600 outside the state directory (what an attack aims at)."""
    path = base / "sentinel"
    path.write_bytes(SECRET)
    path.chmod(0o600)
    return path


def _snapshot(base: Path, skip: tuple[Path, ...]) -> dict[str, tuple[Any, ...]]:
    """Kind, mode, owner, size, mtime and content hash of every entry under ``base`` (but
    ``skip`` and what is under them; a folder's entries, not its size or mtime), not following
    symbolic links."""
    seen: dict[str, tuple[Any, ...]] = {}
    for root, dirs, files in os.walk(base):
        for name in sorted(dirs + files):
            path = Path(root) / name
            if any(path == s or s in path.parents for s in skip):
                continue
            info = path.lstat()
            digest = ""
            if stat.S_ISREG(info.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            elif stat.S_ISLNK(info.st_mode):
                digest = os.readlink(path)
            seen[str(path.relative_to(base))] = (
                stat.S_IFMT(info.st_mode),
                stat.S_IMODE(info.st_mode),
                info.st_uid,
                info.st_gid,
                None if stat.S_ISDIR(info.st_mode) else info.st_size,
                None if stat.S_ISDIR(info.st_mode) else info.st_mtime_ns,
                digest,
            )
    return seen


def _refused(daemon: DaemonProcess, within_s: float = 15.0) -> str:
    """Start ``daemon``, which must exit with status 1 (not hang) within ``within_s``; its
    log."""
    began = time.monotonic()
    try:
        with pytest.raises(AssertionError, match="daemon exited with 1"):
            daemon.start()
    finally:
        daemon.kill()
    assert time.monotonic() - began < within_s
    return daemon.logs()


def _private_state(base: Path) -> Path:
    state = base / "state"
    state.mkdir(mode=0o700)
    (state / "modules").mkdir(mode=0o700)
    return state


# -- the state directory -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "owner", "mode"),
    [
        ("state", NOBODY, 0o700),  # planted by another uid
        ("state", 0, 0o777),  # anyone may write into it
        ("state", 0, 0o770),  # the group may
        ("state/modules", NOBODY, 0o700),
        ("state/modules", 0, 0o777),
    ],
)
def test_a_state_directory_not_the_daemons_own_is_refused(
    base: Path, where: str, owner: int, mode: int
) -> None:
    state = _private_state(base)
    planted = base / where
    os.chown(planted, owner, owner)
    planted.chmod(mode)
    sentinel = _sentinel(base)
    before = _snapshot(base, (state,))
    inside = _snapshot(state, ())
    log = _refused(DaemonProcess(base, state=state))
    assert str(planted) in log
    assert f"owner uid {owner}, mode {mode:04o}" in log
    assert "Traceback" not in log
    assert _snapshot(base, (state, base / "daemon.log")) == before
    assert _snapshot(state, ()) == inside  # no lock file made, nothing written
    assert sentinel.read_bytes() == SECRET


def test_a_state_directory_that_is_a_symlink_of_another_uid_is_not_followed(base: Path) -> None:
    target = base / "roots-private"  # root's own 0700 folder: fine as a folder, not as a lure
    target.mkdir(mode=0o700)
    link = base / "state"
    link.symlink_to(target)
    os.lchown(link, NOBODY, NOBODY)
    before = _snapshot(base, (base / "daemon.log",))
    log = _refused(DaemonProcess(base, state=link))
    assert str(link) in log and f"owner uid {NOBODY}" in log
    assert _snapshot(base, (base / "daemon.log",)) == before
    assert list(target.iterdir()) == []  # no lock, no modules/ made in it


def test_a_lock_file_that_is_a_symlink_is_refused_and_its_target_untouched(base: Path) -> None:
    state = _private_state(base)
    sentinel = _sentinel(base)
    (state / "daemon.lock").symlink_to(sentinel)
    before = _snapshot(base, (base / "daemon.log",))
    log = _refused(DaemonProcess(base, state=state))
    assert str(state / "daemon.lock") in log and "symbolic link" in log
    assert _snapshot(base, (base / "daemon.log",)) == before
    assert sentinel.read_bytes() == SECRET
    assert stat.S_IMODE(sentinel.stat().st_mode) == 0o600


def test_a_lock_file_hard_linked_to_a_file_outside_is_refused(base: Path) -> None:
    state = _private_state(base)
    sentinel = _sentinel(base)
    os.link(sentinel, state / "daemon.lock")
    before = _snapshot(base, (base / "daemon.log",))
    log = _refused(DaemonProcess(base, state=state))
    assert str(state / "daemon.lock") in log and "hard links" in log
    assert _snapshot(base, (base / "daemon.log",)) == before
    assert sentinel.read_bytes() == SECRET


def test_a_manifest_planted_by_another_uid_is_refused(base: Path) -> None:
    state = _private_state(base)
    shutil.copytree(MODULES / "tdes", state / "modules" / "evil")
    manifest = state / "modules.json"
    manifest.write_text(json.dumps([{"path": "evil", "name": None, "started": True}]))
    os.chown(manifest, NOBODY, NOBODY)
    manifest.chmod(0o600)
    sentinel = _sentinel(base)
    before = _snapshot(base, (base / "daemon.log", state / "daemon.lock"))
    log = _refused(DaemonProcess(base, state=state))
    assert str(manifest) in log and f"owner uid {NOBODY}" in log
    assert "reinstalled" not in log  # nothing it names was installed
    assert _snapshot(base, (base / "daemon.log", state / "daemon.lock")) == before
    assert sentinel.read_bytes() == SECRET


def test_a_policy_planted_by_another_uid_is_refused(base: Path) -> None:
    state = _private_state(base)
    policy = state / "policy.toml"  # it would make its author an admin
    policy.write_text(f"version = 1\nadmin_uids = [{NOBODY}]\n")
    os.chown(policy, NOBODY, NOBODY)
    policy.chmod(0o644)
    sentinel = _sentinel(base)
    before = _snapshot(base, (base / "daemon.log", state / "daemon.lock"))
    log = _refused(DaemonProcess(base, state=state))
    assert str(policy) in log and f"owner uid {NOBODY}" in log
    assert _snapshot(base, (base / "daemon.log", state / "daemon.lock")) == before
    assert sentinel.read_bytes() == SECRET


def test_a_fifo_as_the_policy_is_refused_at_start_without_hanging(base: Path) -> None:
    state = _private_state(base)
    os.mkfifo(state / "policy.toml", 0o600)
    sentinel = _sentinel(base)
    before = _snapshot(base, (base / "daemon.log", state / "daemon.lock"))
    log = _refused(DaemonProcess(base, state=state))
    assert str(state / "policy.toml") in log and "FIFO" in log
    assert _snapshot(base, (base / "daemon.log", state / "daemon.lock")) == before
    assert sentinel.read_bytes() == SECRET


def test_a_fifo_as_the_policy_fails_a_reload_promptly_and_the_daemon_serves_on(
    base: Path,
) -> None:
    daemon = DaemonProcess(base).start()
    try:
        os.mkfifo(daemon.state / "policy.toml", 0o600)
        with daemon.client(call_timeout=15.0) as admin:
            with pytest.raises(PolicyError, match="FIFO") as refused:
                admin.reload_policy()
            assert str(daemon.state / "policy.toml") in str(refused.value)
            assert admin.ping() >= 0  # the daemon is not stuck in an open()
            assert admin.services() == ()
    finally:
        daemon.kill()


def test_a_fifo_as_the_dashboard_token_is_refused_without_hanging(base: Path) -> None:
    state = _private_state(base)
    os.mkfifo(state / "dashboard-token", 0o600)
    sentinel = _sentinel(base)
    before = _snapshot(base, (base / "daemon.log", state / "daemon.lock"))
    daemon = DaemonProcess(base, state=state, extra=("--dashboard", str(free_port())))
    log = _refused(daemon)
    assert str(state / "dashboard-token") in log and "FIFO" in log
    assert _snapshot(base, (base / "daemon.log", state / "daemon.lock")) == before
    assert sentinel.read_bytes() == SECRET


def test_crash_leftovers_under_modules_are_removed_at_start(base: Path) -> None:
    daemon = DaemonProcess(base).start()
    try:
        with daemon.client() as admin:
            admin.install(MODULES / "tdes")
    finally:
        daemon.kill()  # SIGKILL: no shutdown
    copies = daemon.state / "modules"
    (kept,) = [p.name for p in copies.iterdir()]
    # What a SIGKILL during the next install leaves: a copy not in modules.json, and a
    # temporary file of the manifest's atomic write.
    shutil.copytree(MODULES / "tdes", copies / "tdes-2")
    (daemon.state / ".modules.json.x1y2.tmp").write_text("[]")
    restarted = DaemonProcess(base, state=daemon.state).start()
    try:
        assert sorted(p.name for p in copies.iterdir()) == [kept]
        assert not (daemon.state / ".modules.json.x1y2.tmp").exists()
        assert "crash leftovers" in restarted.logs()
        with restarted.client() as admin:
            assert [m.name for m in admin.modules()] == ["tdes"]
    finally:
        restarted.kill()


# -- the socket --------------------------------------------------------------------------------

_LAUNCHER = r"""
import os, socket, sys

folder, sentinel, report = sys.argv[1:4]
real_bind = socket.socket.bind
fired = []


def attack():
    # As uid 65534, the owner of the socket folder, at the worst moment (the socket was just
    # bound, its mode and group not set yet): every name in the folder becomes a symbolic link
    # to the sentinel, every folder is moved away and replaced by one of the attacker's own
    # holding such links.
    pid = os.fork()
    if pid == 0:
        done = []
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            for name in sorted(os.listdir(folder)):
                path = os.path.join(folder, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    os.rename(path, path + ".moved")
                    os.mkdir(path)
                    for inner in ("sock", "s.sock"):
                        os.symlink(sentinel, os.path.join(path, inner))
                    done.append("folder " + name)
                elif name != "s.sock":
                    os.rename(path, path + ".moved")
                    os.symlink(sentinel, path)
                    done.append("file " + name)
            final = os.path.join(folder, "s.sock")
            if os.path.lexists(final):
                os.unlink(final)
            os.symlink(sentinel, final)
            done.append("socket path")
        except BaseException as exc:
            done.append("failed: %r" % (exc,))
        with open(report, "a") as out:
            out.write("\n".join(done) + "\n")
        os._exit(0)
    os.waitpid(pid, 0)


def bind(self, address):
    real_bind(self, address)
    if self.family == socket.AF_UNIX and isinstance(address, str) and not fired:
        fired.append(address)
        attack()


socket.socket.bind = bind
sys.argv = [sys.argv[0]] + sys.argv[4:]
from juggle.daemon.__main__ import main

sys.exit(main())
"""


class _AttackedDaemon(DaemonProcess):
    """The daemon, its socket in ``folder``, attacked by uid 65534 right after it binds."""

    def __init__(self, base: Path, folder: Path, sentinel: Path, policy: str) -> None:
        super().__init__(base, policy)
        self.socket = folder / "s.sock"
        self.folder = folder
        self.sentinel = sentinel
        self.report = base / "attack.txt"  # written by the attacker (uid 65534)
        self.report.touch(mode=0o600)
        os.chown(self.report, NOBODY, NOBODY)
        self.launcher = base / "launch.py"
        self.launcher.write_text(_LAUNCHER)

    def start(self, *, with_policy: bool = True) -> DaemonProcess:
        assert self.policy is not None
        cmd = [
            sys.executable,
            str(self.launcher),
            str(self.folder),
            str(self.sentinel),
            str(self.report),
            "--socket",
            str(self.socket),
            "--state",
            str(self.state),
            "--policy",
            str(self.policy),
        ]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=log, cwd="/")
        self.wait_ready()
        return self


def _tenant_folder(base: Path) -> Path:
    folder = base / "run"
    folder.mkdir(mode=0o755)
    os.chown(folder, NOBODY, NOBODY)
    return folder


def test_a_socket_swapped_for_a_symlink_right_after_bind_is_never_followed(base: Path) -> None:
    folder = _tenant_folder(base)
    sentinel = _sentinel(base)
    policy = f'version = 1\nadmin_uids = [0]\nsocket_mode = "0666"\nsocket_group = {NOBODY}\n'
    daemon = _AttackedDaemon(base, folder, sentinel, policy)
    before = _snapshot(base, (folder, daemon.state, daemon.log, daemon.report))
    try:
        try:
            daemon.start()
            trouble = ""
        except AssertionError as exc:  # judged after what matters most: the sentinel
            trouble = str(exc)
        assert sentinel.read_bytes() == SECRET
        info = sentinel.stat()
        assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) == (0o600, 0, 0)
        assert _snapshot(base, (folder, daemon.state, daemon.log, daemon.report)) == before
        report = daemon.report.read_text()
        assert "failed" not in report, report
        assert "socket path" in report and "folder .juggle-bind-" in report  # it did swap
        assert not trouble, trouble
        sock = daemon.socket.lstat()  # the daemon's socket replaced the planted link
        assert stat.S_ISSOCK(sock.st_mode)
        assert (stat.S_IMODE(sock.st_mode), sock.st_uid, sock.st_gid) == (0o666, 0, NOBODY)
        with daemon.client() as admin:
            assert admin.admin
    finally:
        daemon.kill()


def test_a_symlink_planted_at_the_socket_path_is_refused_and_not_followed(base: Path) -> None:
    folder = _tenant_folder(base)
    sentinel = _sentinel(base)
    daemon = DaemonProcess(base, 'version = 1\nadmin_uids = [0]\nsocket_mode = "0666"\n')
    daemon.socket = folder / "s.sock"
    os.symlink(sentinel, daemon.socket)
    os.lchown(daemon.socket, NOBODY, NOBODY)
    before = _snapshot(base, (daemon.state, daemon.log))
    log = _refused(daemon)
    assert str(daemon.socket) in log and "symbolic link" in log
    assert _snapshot(base, (daemon.state, daemon.log)) == before
    assert sentinel.read_bytes() == SECRET


# -- the client checks who the daemon is ----------------------------------------------------------


def _fake_daemon(path: str) -> int:
    """As uid 65534: listen on ``path``, greet one client as the daemon would, and count
    every byte it sends until it closes."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    server.settimeout(30)
    conn, _ = server.accept()
    conn.settimeout(30)
    hello = {
        "name": "bob",
        "tenant": "bob",
        "admin": False,
        "uid": 0,
        "gid": 0,
        "pid": 1,
        "daemon_pid": os.getpid(),
        "max_frame": 1 << 20,
        "protocol": PROTOCOL_VERSION,
    }
    received = 0
    try:
        conn.sendall(frame(pack({"v": PROTOCOL_VERSION, "id": 0, "hello": hello})))
        while True:
            data = conn.recv(1 << 16)
            if not data:
                break
            received += len(data)
    except OSError:
        pass
    conn.close()
    server.close()
    return received


def _against_fake(folder: Path, use: Any) -> tuple[Any, int]:
    """Run the fake daemon (uid 65534) on ``folder/s.sock``, then ``use(path)`` once it
    listens; what ``use`` returned (or raised) and the bytes the fake received."""
    path = folder / "s.sock"
    result: dict[str, Any] = {}

    def fake() -> None:
        result["received"] = run_as(NOBODY, _fake_daemon, str(path))

    thread = threading.Thread(target=fake)
    thread.start()
    try:
        assert wait_until(path.exists, 20.0), "the fake daemon did not listen"
        try:
            outcome: Any = use(path)
        except Exception as exc:
            outcome = exc
    finally:
        thread.join(40)
    assert not thread.is_alive()
    return outcome, int(result["received"])


def _send_a_key(path: Path, **kwargs: Any) -> None:
    client = connect(path, timeout=10.0, call_timeout=0.5, **kwargs)
    try:
        client.ping()  # what bob's load_key would have sent, had he got this far
    finally:
        client.close()


def test_a_client_refuses_a_daemon_of_the_wrong_uid_before_sending_a_byte(base: Path) -> None:
    folder = base / "pub"  # root's folder, writable by anyone (like /tmp)
    folder.mkdir()
    folder.chmod(0o777)
    outcome, received = _against_fake(folder, _send_a_key)
    assert isinstance(outcome, DaemonIdentityError), outcome
    assert received == 0
    text = str(outcome)
    assert f"uid {NOBODY}" in text and "expected daemon uid 0" in text and "pid " in text
    assert outcome.path == str(folder / "s.sock") and outcome.uid == NOBODY


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_a_set_daemon_uid_is_checked_even_in_a_folder_of_the_fake(
    base: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _tenant_folder(base)  # by default its owner (the fake's uid) would be trusted
    if how == "argument":
        outcome, received = _against_fake(folder, lambda p: _send_a_key(p, daemon_uid=0))
    else:
        monkeypatch.setenv(DAEMON_UID_ENV, "root")
        outcome, received = _against_fake(folder, _send_a_key)
    assert isinstance(outcome, DaemonIdentityError), outcome
    assert received == 0 and f"uid {NOBODY}" in str(outcome)


def test_the_cli_daemon_uid_option_is_checked(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from juggle.commands.cli import app

    monkeypatch.setenv(DAEMON_UID_ENV, "")  # the option sets it; restored afterwards
    folder = _tenant_folder(base)

    def run_cli(path: Path) -> Any:
        done = CliRunner().invoke(app, ["--daemon-uid", "0", "--connect", str(path), "services"])
        return done.exception

    outcome, received = _against_fake(folder, run_cli)
    assert isinstance(outcome, DaemonIdentityError), outcome
    assert received == 0


def test_the_fake_receives_what_a_client_trusting_it_sends(base: Path) -> None:
    """The control of the two tests above: the fake does count what reaches it."""
    folder = _tenant_folder(base)  # its owner is trusted by default
    outcome, received = _against_fake(folder, _send_a_key)
    assert not isinstance(outcome, DaemonIdentityError), outcome
    assert received > 0


def test_a_bad_daemon_uid_is_refused_naming_it() -> None:
    with pytest.raises(DaemonIdentityError, match="no-such-user-here") as refused:
        connect("/nonexistent/s.sock", daemon_uid="no-such-user-here")
    assert refused.value.value == "no-such-user-here"


# -- the primitives ------------------------------------------------------------------------------


def test_read_regular_file_bounds_what_it_reads_not_what_stat_says(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    path.chmod(0o600)
    assert read_regular_file(path, 10) == b"x" * 10
    with pytest.raises(UnsafePathError, match="over 9 bytes"):
        read_regular_file(path, 9)
    # /proc files say st_size 0 and hold more: the bound still holds
    with pytest.raises(UnsafePathError, match="over 4 bytes"):
        read_regular_file("/proc/self/status", 4, owner=0, forbid=0)


def test_open_regular_nofollow_judges_the_opened_descriptor(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(UnsafePathError, match="FIFO"):
        open_regular_nofollow(fifo)  # no writer: a blocking open would hang here
    link = tmp_path / "link"
    link.symlink_to(fifo)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        open_regular_nofollow(link)
    other = tmp_path / "other"
    other.write_text("x")
    os.chown(other, NOBODY, NOBODY)
    with pytest.raises(UnsafePathError, match=f"owner uid {NOBODY}"):
        open_regular_nofollow(other)
    with pytest.raises(DashboardError):
        open_regular_nofollow(other, error=DashboardError)
    with pytest.raises(UnsafePathError, match="mode 0700"):
        check_private_dir(tmp_path, owner=NOBODY)
    tmp_path.chmod(0o1777)
    with pytest.raises(UnsafePathError, match="mode 1777"):
        check_private_dir(tmp_path)
    tmp_path.chmod(0o700)


def test_replace_file_replaces_a_planted_link_not_its_target(tmp_path: Path) -> None:
    """The daemon's atomic write (modules.json, policy.toml) never writes through a symbolic
    link planted at the path: the link is replaced, its target stays as it was; the new file
    has the mode asked for (given through the descriptor, whatever the umask) and no
    temporary file is left."""
    target = tmp_path / "outside"
    target.write_bytes(b"not yours")
    path = tmp_path / "modules.json"
    path.symlink_to(target)
    old = os.umask(0)
    try:
        replace_file(path, b"[]", 0o600)
    finally:
        os.umask(old)
    assert target.read_bytes() == b"not yours"
    info = path.lstat()
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    assert path.read_bytes() == b"[]"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["modules.json", "outside"]


def test_replace_file_that_fails_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    """A write that fails (here its rename: a folder stands at the path) leaves what was
    there and no ``.NAME.*.tmp`` behind."""
    path = tmp_path / "policy.toml"
    path.mkdir()  # os.replace of a file over a folder fails
    with pytest.raises(OSError):
        replace_file(path, b"version = 1\n", 0o600)
    assert path.is_dir()
    assert [p.name for p in tmp_path.iterdir()] == ["policy.toml"]
