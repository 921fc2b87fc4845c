"""The shared-memory window to a Verilator simulator (SharedMemorySim).

Register accesses pass through a memfd mapping instead of a pipe round trip. It must give
exactly what the register model gives, over many accesses and with several simulators at once;
a simulator that dies must be a WindowAccessError naming its status (and its last words), one
that is frozen a CoreTimeoutError within the access timeout; nothing may be left behind (no file
in /dev/shm, no descriptor or mapping after close, no simulator after its owner died).
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rtl_support import Pair, built, engine

from juggle.errors import CoreTimeoutError, WindowAccessError
from juggle.fabric.rtl import RtlCatalog, SharedMemorySim
from juggle.fabric.rtl.process import PROTOCOL


@pytest.fixture(scope="module", autouse=True)
def _simulators() -> None:
    built()


def _adder(timeout: float = 5.0) -> SharedMemorySim:
    exe = built()["adder"]
    return SharedMemorySim([str(exe), "3", "2", "16"], label="adder", region="r", timeout=timeout)


def _maps() -> str:
    return Path("/proc/self/maps").read_text()


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"  # a zombie no one reaped yet


def test_values_and_cycles_equal_the_model_with_two_simulators_interleaved() -> None:
    """20,000 random accesses, alternating between two windows (two mappings, two sequence
    counters): every read equal to the model's, every clock equal after every access."""
    rnd = random.Random("shm")
    with Pair("adder") as adder, Pair("multiplier") as multiplier:
        pairs = (adder, multiplier)
        for step in range(20_000):
            pair = pairs[step % 2]
            offset = rnd.randrange(0, 0x20, 4)
            if rnd.random() < 0.5:
                got, want = pair.rtl.read32(offset), pair.sim.read32(offset)
                assert got == want, f"step {step}: read {offset:#x}: {got:#x} != {want:#x}"
            else:
                value = rnd.getrandbits(32)
                pair.rtl.write32(offset, value)
                pair.sim.write32(offset, value)
            model, rtl = pair.cycles()
            assert model == rtl, f"step {step}: clocks differ"
        for pair in pairs:
            assert pair.rtl.simulator.transactions > 9_000
            assert isinstance(pair.rtl.simulator, SharedMemorySim)


def test_a_killed_simulator_names_its_status() -> None:
    sim = _adder()
    try:
        sim.write(0x4, 1)
        os.kill(sim.pid, signal.SIGKILL)
        with pytest.raises(WindowAccessError, match="killed by signal 9") as caught:
            sim.read(0x4)
        assert caught.value.region == "r"
        with pytest.raises(WindowAccessError, match="killed by signal 9"):  # and stays dead
            sim.write(0x4, 2)
        assert not sim.alive
    finally:
        sim.close()


def test_a_simulator_that_exits_names_its_status_and_last_words() -> None:
    sim = _adder()
    try:
        sim._transact(9, 0, 0)  # an operation the harness does not know: it exits with 2
    except WindowAccessError as exc:
        assert "exited with status 2" in str(exc) and "unknown request (9)" in str(exc)
    else:
        pytest.fail("the harness answered an unknown request")
    finally:
        sim.close()


def test_a_frozen_simulator_times_out() -> None:
    sim = _adder(timeout=0.3)
    try:
        assert sim.read(0x8)[1] == 3
        sim.hang()  # SIGSTOP, as the core_hang fault
        started = time.monotonic()
        with pytest.raises(CoreTimeoutError, match="did not answer") as caught:
            sim.read(0x8)
        assert time.monotonic() - started < 5.0  # the access timeout, not the default
        assert caught.value.region == "r"
        assert not sim.alive and _gone(sim.pid)
        with pytest.raises(CoreTimeoutError):
            sim.write(0x8, 1)
    finally:
        sim.close()


def test_nothing_is_left_behind() -> None:
    shm_before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    fds, maps = _fds(), _maps().count("juggle-rtl")
    sim = _adder()
    child_fds = {
        os.readlink(f"/proc/{sim.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{sim.pid}/fd")
    }
    assert not any("juggle-rtl" in target for target in child_fds)  # mapped, fd closed
    assert "juggle-rtl" in Path(f"/proc/{sim.pid}/maps").read_text()
    assert _maps().count("juggle-rtl") == maps + 1
    assert _fds() - fds  # the pipes and the stderr file, while it runs
    if os.path.isdir("/dev/shm"):
        assert set(os.listdir("/dev/shm")) == shm_before  # a memfd has no name there
    sim.write(0x4, 5)
    pid = sim.pid
    sim.close()
    sim.close()  # idempotent
    assert _fds() == fds
    assert _maps().count("juggle-rtl") == maps
    assert _gone(pid)
    with pytest.raises(WindowAccessError, match="stopped"):
        sim.read(0x4)


def test_a_simulator_ends_with_its_owner(tmp_path: Path) -> None:
    """The owner dies without closing: the harness sees its standard input end and exits."""
    exe = built()["adder"]
    script = (
        "import sys\n"
        "from juggle.fabric.rtl import SharedMemorySim\n"
        f"sim = SharedMemorySim([{str(exe)!r}, '1', '1', '16'], label='orphan')\n"
        "print(sim.pid, flush=True)\n"
        "sys.stdin.readline()\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None
        pid = int(owner.stdout.readline())
        exited = os.pidfd_open(pid)  # readable once the harness has exited
        assert not _gone(pid)
    finally:
        owner.kill()
        owner.wait()
    try:
        assert select.select([exited], [], [], 10.0)[0], "the orphaned harness still runs"
    finally:
        os.close(exited)
    assert _gone(pid)


def test_the_harness_refuses_bad_arguments() -> None:
    exe = str(built()["adder"])
    for argv in (
        [exe],
        [exe, "1", "1", "16"],
        [exe, "0", "1", "16", "3"],
        [exe, "1", "1", "x", "3"],
    ):
        proc = subprocess.run(argv, capture_output=True, timeout=30, check=False)
        assert proc.returncode == 2, argv
        assert b"usage" in proc.stderr or b"error: bad" in proc.stderr, proc.stderr
    assert PROTOCOL == 2
    assert RtlCatalog.builtin().get("adder").bus == "regbus"
    assert engine().process is SharedMemorySim
