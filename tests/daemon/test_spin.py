"""Spin-then-park (juggle.daemon.spin): the bounded poll the client and the daemon's reader
threads make before blocking on their socket (issue 11: the call round trip)."""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from daemon_support import MODULES

from juggle.daemon import connect
from juggle.daemon.server import Daemon
from juggle.daemon.spin import MAX_BACKOFF, Spinner, check_spin_us
from juggle.errors import SpinLimitError
from juggle.services.crypto.software import SoftwareTDES

KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


@pytest.mark.parametrize("value", [-1, 1000.5, 5000, math.nan, math.inf, True, "50", None])
def test_spin_bounds_outside_0_to_1000_us_are_refused(value: Any) -> None:
    with pytest.raises(SpinLimitError) as caught:
        check_spin_us(value)
    assert caught.value.value is value
    assert repr(value)[:10] in str(caught.value)


def test_client_and_daemon_refuse_a_bad_bound_before_doing_anything(tmp_path: Any) -> None:
    with pytest.raises(SpinLimitError, match="5000"):
        connect(tmp_path / "nobody.sock", spin_us=5000)  # refused before connecting
    with pytest.raises(SpinLimitError, match="-3"):
        Daemon(tmp_path / "s.sock", tmp_path / "state", spin_us=-3)
    assert not (tmp_path / "state").exists()
    cmd = [sys.executable, "-m", "juggle.daemon", "--socket", str(tmp_path / "s.sock")]
    cmd += ["--state", str(tmp_path / "state"), "--spin-us", "2000"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "2000" in done.stderr and "spin" in done.stderr
    assert not (tmp_path / "s.sock").exists()


def test_a_spin_sees_data_at_once_and_gives_up_after_its_bound(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    spinner = Spinner(a.fileno(), 1000)  # 1 ms, the most
    b.send(b"x")
    t0 = time.perf_counter()
    assert spinner.spin() is True
    assert time.perf_counter() - t0 < 0.001
    assert a.recv(10) == b"x"
    t0 = time.perf_counter()
    assert spinner.spin() is False  # nothing comes: it stops after its bound
    took = time.perf_counter() - t0
    assert 0.001 <= took < 0.5, took
    spinner._skip = 0  # (it would skip the next wait: backing off, see below)
    t0 = time.perf_counter()
    assert spinner.spin(limit_ns=100_000) is False  # a caller's smaller limit wins
    assert time.perf_counter() - t0 < 0.0009
    assert (spinner.spins, spinner.hits) == (3, 1)


def test_spins_that_see_nothing_back_off_and_a_hit_resets_that(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    spinner = Spinner(a.fileno(), 100)
    skipped = 0
    for _ in range(600):  # a peer that never answers in time: spins get rare
        before = spinner.spins
        spinner.spin()
        skipped += spinner.spins == before
    assert spinner.hits == 0
    assert spinner.spins < 20, spinner.spins  # 1 + 1 + 2 + 4 ... skipped in between
    assert skipped > 580
    # a wait skipped while backing off blocks at once, even with data there
    b.send(b"x")
    skipped = 0
    while not spinner.spin():
        skipped += 1
        assert skipped <= MAX_BACKOFF
    assert skipped > 0  # backing off: it blocked without looking, data or not
    assert spinner.hits == 1  # then the backoff ran out: it spun again and saw the data
    a.recv(10)
    spins = spinner.spins
    b.send(b"y")
    assert spinner.spin() is True  # a hit: no skipping after it
    assert spinner.spins == spins + 1


def test_a_bound_of_zero_never_spins(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    spinner = Spinner(a.fileno(), 0)
    b.send(b"x")
    assert spinner.spin() is False
    assert spinner.spins == 0


def test_a_spinning_thread_lets_other_threads_run(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """Every poll releases the GIL: a thread of the daemon that has work runs while a
    reader thread spins (with a long switch interval, it would otherwise wait the spin out)."""
    a, _ = pair
    ticks = 0
    stop = threading.Event()
    started = threading.Event()

    def other() -> None:
        nonlocal ticks
        started.set()
        while not stop.is_set():
            ticks += 1
            time.sleep(0)  # gives the GIL back at once, so the spinner gets it back too

    old = sys.getswitchinterval()
    sys.setswitchinterval(1.0)  # no forced switches: only released GILs let others run
    thread = threading.Thread(target=other)
    try:
        thread.start()
        started.wait(5)
        during = spins = 0
        while during == 0 and spins < 300:  # whole spins of 1 ms (fresh: no backoff)
            before = ticks
            assert Spinner(a.fileno(), 1000).spin() is False
            during += ticks - before
            spins += 1
    finally:
        stop.set()
        sys.setswitchinterval(old)
        thread.join(5)
    assert during > 0, spins  # within 0.3 s, far less than a forced switch's 1 s


def _software_tdes(data: bytes) -> bytes:
    cipher = SoftwareTDES()
    cipher.load_key(KEY)
    buf = bytearray(data)
    cipher.encrypt(buf, len(buf))
    return bytes(buf)


def test_calls_slower_than_the_spin_still_return(spawn: Any) -> None:
    """Spinning on both sides: calls whose reply comes long after the spin gave up (software
    Triple-DES, milliseconds) return their results, as do quick ones in between."""
    daemon = spawn(extra=("--spin-us", "50"))
    with daemon.client(spin_us=50) as client:
        client.install(MODULES / "tdes")
        (snap,) = client.services()
        client.set_tier(snap.service_id, "software")
        enc = client.get_service("EncryptionService")
        enc.load_key(KEY)
        link = client._link
        assert link is not None and link._spinner is not None
        for size in (4096, 64, 2048, 512):
            data = os.urandom(size)
            buf = bytearray(data)
            t0 = time.perf_counter()
            assert enc.encrypt(buf, size) == size
            assert time.perf_counter() - t0 > 100e-6  # the reply came after the spin
            assert bytes(buf) == _software_tdes(data)
            for _ in range(20):
                assert client.ping() < 5.0
        assert link._spinner.spins > 0


def test_without_spinning_on_either_side_calls_work(spawn: Any) -> None:
    daemon = spawn(extra=("--spin-us", "0"))
    with daemon.client(spin_us=0) as client:
        client.install(MODULES / "tdes")
        enc = client.get_service("EncryptionService")
        enc.load_key(KEY)
        link = client._link
        assert link is not None and link._spinner is None
        for size in (8, 64 << 10):  # inline and through shared memory
            data = os.urandom(size)
            buf = bytearray(data)
            assert enc.encrypt(buf, size) == size
            assert bytes(buf) == _software_tdes(data)
        for _ in range(50):
            client.ping()
