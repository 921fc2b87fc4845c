"""A bus error is a hardware fault, not a crash (issue 20, item 5).

Every SIGBUS here is real: a file is mapped and then truncated under the mapping, so the next
access to the page lies past the end of the file and the kernel raises SIGBUS in the accessing
thread (mmap(2), "SIGBUS"), as a decoupled or unprogrammed slot's register window does on a
board. :class:`GuardedMap` turns it into :class:`BusFaultError`; the runtime's fault
containment turns that into a software fallback and a region in ERROR.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from Crypto.Cipher import DES3
from linux_support import Caller

import juggle
from juggle.errors import (
    BackendError,
    BusFaultError,
    FabricError,
    RegionEmptyError,
    WindowAccessError,
)
from juggle.fabric.linux import busguard
from juggle.fabric.linux.busguard import GuardedMap
from juggle.fabric.mmio import MMIO
from juggle.fabric.profiles import RegionProfile
from juggle.fabric.sim.backend import SimBackend

PAGE = 4096
ROOT = Path(__file__).resolve().parents[3]
KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")
PLAIN = b"sixteen bytes!!!"
CIPHER = DES3.new(KEY, DES3.MODE_ECB).encrypt(PLAIN)


def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    """Poll ``condition`` until it holds; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        time.sleep(0.005)


@pytest.fixture
def backing(tmp_path: Path) -> Path:
    """A one-page file of zeros to map."""
    path = tmp_path / "regs"
    path.write_bytes(bytes(PAGE))
    return path


def test_the_guard_is_compiled_in_and_installed_by_a_map(backing: Path) -> None:
    # without the C extension a bus error on a board kills the process: on Linux it must be there
    assert busguard.GUARDED, "juggle.fabric.linux._busguard was not built (see setup.py)"
    from juggle.fabric.linux import _busguard

    with GuardedMap(backing, PAGE):
        assert _busguard.installed()  # the SIGBUS handler is the current one


def test_reads_and_writes_go_to_the_mapped_file(backing: Path) -> None:
    with GuardedMap(backing, PAGE) as regs:
        assert regs.size == PAGE and regs.guarded and not regs.closed
        regs.write32(8, 0xDEADBEEF)
        regs.write32(PAGE - 4, 0x01020304)
        assert regs.read32(8) == 0xDEADBEEF
        assert regs.read32(PAGE - 4) == 0x01020304
        data = backing.read_bytes()
        assert int.from_bytes(data[8:12], sys.byteorder) == 0xDEADBEEF
        assert int.from_bytes(data[PAGE - 4 :], sys.byteorder) == 0x01020304
        # the file written behind the map's back is what the next read sees (MAP_SHARED)
        with backing.open("r+b") as f:
            f.seek(16)
            f.write((0xCAFE).to_bytes(4, sys.byteorder))
        assert regs.read32(16) == 0xCAFE


def test_a_map_at_a_page_offset_maps_that_page(tmp_path: Path) -> None:
    # map N of /dev/uioN is at file offset N * PAGESIZE (uio-howto.rst)
    path = tmp_path / "two"
    path.write_bytes(bytes(PAGE) + (7).to_bytes(4, sys.byteorder) + bytes(PAGE - 4))
    with GuardedMap(path, 64, offset=PAGE) as regs:
        assert regs.size == 64
        assert regs.read32(0) == 7
        with pytest.raises(WindowAccessError, match=r"offset 0x40 is outside 0\.\.0x3c"):
            regs.read32(64)


@pytest.mark.parametrize(
    ("off", "match"),
    [
        (2, r"offset 0x2 is not 4-byte aligned"),
        (-4, r"offset -0x4 is outside 0\.\.0xffc"),
        (PAGE, r"offset 0x1000 is outside 0\.\.0xffc"),
        (1 << 70, r"offset 0x400000000000000000 is outside 0\.\.0xffc"),
        ("8", r"offset '8' is not an int"),
        (8.0, r"offset 8\.0 is not an int"),
    ],
)
def test_bad_offsets_are_refused_naming_the_offset(backing: Path, off: Any, match: str) -> None:
    with GuardedMap(backing, PAGE, label="window 'rp0'") as regs:
        with pytest.raises(WindowAccessError, match=r"window 'rp0': " + match) as err:
            regs.read32(off)
        assert err.value.offset == (off if type(off) is int else None)
        with pytest.raises(WindowAccessError, match=match):
            regs.write32(off, 1)
        assert backing.read_bytes() == bytes(PAGE)  # nothing written


@pytest.mark.parametrize("value", [-1, 1 << 32, 1 << 80, "1", 1.0])
def test_bad_values_are_refused_naming_the_value(backing: Path, value: Any) -> None:
    with GuardedMap(backing, PAGE) as regs:
        with pytest.raises(WindowAccessError, match=r'"value" must be') as err:
            regs.write32(0, value)
        assert (err.value.offset, err.value.value) == (0, value)
    assert backing.read_bytes() == bytes(PAGE)


def test_bad_lengths_offsets_and_paths_are_refused(backing: Path, tmp_path: Path) -> None:
    for length in (0, 6, -4, "4096"):
        with pytest.raises(WindowAccessError, match=rf'"length" .* got {length!r}'):
            GuardedMap(backing, length)  # type: ignore[arg-type]
    for offset in (100, -PAGE):
        with pytest.raises(WindowAccessError, match=rf'"offset" .* got {offset}'):
            GuardedMap(backing, PAGE, offset=offset)
    with pytest.raises(BackendError, match="cannot open .*nothing") as err:
        GuardedMap(tmp_path / "nothing", PAGE)
    assert err.value.path == str(tmp_path / "nothing")
    with pytest.raises(BackendError, match="cannot open .*Is a directory"):
        GuardedMap(tmp_path, PAGE)
    with pytest.raises(BackendError, match=r"cannot mmap 0x1000 bytes of '/dev/null'"):
        GuardedMap("/dev/null", PAGE)  # opens, but has no mmap (ENODEV)


def test_a_closed_map_raises_region_empty(backing: Path) -> None:
    regs = GuardedMap(backing, PAGE)
    regs.close()
    regs.close()  # idempotent
    assert regs.closed and "closed" in repr(regs)
    with pytest.raises(RegionEmptyError, match="closed"):
        regs.read32(0)
    with pytest.raises(RegionEmptyError, match="closed"):
        regs.write32(0, 1)
    with pytest.raises(WindowAccessError):  # a bad offset is still named as such
        regs.read32(3)


def test_a_real_sigbus_raises_bus_fault_and_the_map_recovers(backing: Path) -> None:
    regs = GuardedMap(backing, PAGE, label="window 'rp0'")
    try:
        regs.write32(0x20, 0x12345678)
        os.truncate(backing, 0)  # the page now lies past the end of the file
        with pytest.raises(
            BusFaultError,
            match=r"window 'rp0': bus error \(SIGBUS\) on a "
            r"32-bit read at offset 0x20 of .*regs",
        ) as err:
            regs.read32(0x20)
        assert (err.value.path, err.value.offset) == (str(backing), 0x20)
        assert isinstance(err.value, FabricError)
        with pytest.raises(BusFaultError, match="32-bit write at offset 0x24"):
            regs.write32(0x24, 1)
        for _ in range(100):  # again and again: the guard re-arms every time
            with pytest.raises(BusFaultError):
                regs.read32(0x20)
        os.truncate(backing, PAGE)  # the fault is gone: the next access works
        assert regs.read32(0x20) == 0  # the page came back as zeros
        regs.write32(0x20, 0xA5A5A5A5)
        assert regs.read32(0x20) == 0xA5A5A5A5
        assert int.from_bytes(backing.read_bytes()[0x20:0x24], sys.byteorder) == 0xA5A5A5A5
    finally:
        regs.close()


def test_threads_fault_and_access_at_once(tmp_path: Path) -> None:
    """One thread's accesses all fault while three others read and write a healthy map: each
    gets its own outcome, every time (the guard is armed per thread)."""
    bad_path, good_path = tmp_path / "bad", tmp_path / "good"
    bad_path.write_bytes(bytes(PAGE))
    good_path.write_bytes(bytes(PAGE))
    bad, good = GuardedMap(bad_path, PAGE), GuardedMap(good_path, PAGE)
    os.truncate(bad_path, 0)
    rounds = 3000
    start = threading.Barrier(4)
    faults: list[int] = []
    wrong: list[str] = []

    def faulty() -> None:
        start.wait()
        n = 0
        for i in range(rounds):
            try:
                bad.read32(4 * (i % 1024)) if i % 2 else bad.write32(4 * (i % 1024), i)
            except BusFaultError:
                n += 1
        faults.append(n)

    def healthy(slot: int) -> None:
        start.wait()
        off = 4 * slot
        for i in range(rounds):
            try:
                good.write32(off, i)
                if good.read32(off) != i:
                    wrong.append(f"thread {slot}: read back wrong at round {i}")
            except Exception as exc:  # any exception here is a failure of the guard
                wrong.append(f"thread {slot}: {exc!r}")

    threads = [threading.Thread(target=faulty)]
    threads += [threading.Thread(target=healthy, args=(s,)) for s in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert faults == [rounds]
    assert wrong == []
    bad.close()
    good.close()


UNGUARDED_FAULT = """
import mmap, os, sys
path = sys.argv[1]
with open(path, "r+b") as f:
    plain = mmap.mmap(f.fileno(), 4096)
os.truncate(path, 0)
print("unguarded read", flush=True)
plain[0]  # SIGBUS outside a guarded access
print("still alive", flush=True)
"""

SCENARIOS = {
    # the guard is installed, then a plain mmap access faults
    "plain": """
        from juggle.fabric.linux.busguard import GuardedMap
        GuardedMap(sys.argv[2], 4096).close()
    """,
    # faulthandler owned SIGBUS first: it still reports the crash
    "faulthandler_first": """
        import faulthandler
        faulthandler.enable()
        from juggle.fabric.linux.busguard import GuardedMap
        GuardedMap(sys.argv[2], 4096).close()
    """,
    # faulthandler took SIGBUS over after the guard: a new map takes it back (a guarded fault
    # is contained), and the crash still ends by SIGBUS, not in a loop between the two
    "faulthandler_after": """
        import faulthandler
        from juggle.errors import BusFaultError
        from juggle.fabric.linux import _busguard
        from juggle.fabric.linux.busguard import GuardedMap
        GuardedMap(sys.argv[2], 4096).close()
        faulthandler.enable()
        assert not _busguard.installed()
        regs = GuardedMap(sys.argv[2], 4096)
        assert _busguard.installed()
        os.truncate(sys.argv[2], 0)
        try:
            regs.read32(0)
        except BusFaultError:
            print("guarded fault contained", flush=True)
    """,
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_sigbus_outside_a_guarded_access_still_kills(tmp_path: Path, scenario: str) -> None:
    victim, other = tmp_path / "victim", tmp_path / "other"
    victim.write_bytes(bytes(PAGE))
    other.write_bytes(bytes(PAGE))
    script = "import os, sys\n" + textwrap.dedent(SCENARIOS[scenario]) + UNGUARDED_FAULT
    proc = subprocess.run(
        [sys.executable, "-c", script, str(victim), str(other)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == -signal.SIGBUS, (proc.returncode, proc.stdout, proc.stderr)
    assert "unguarded read" in proc.stdout and "still alive" not in proc.stdout
    if scenario.startswith("faulthandler"):
        assert "Bus error" in proc.stderr  # faulthandler's report still happens
    if scenario == "faulthandler_after":
        assert "guarded fault contained" in proc.stdout


def test_a_sigbus_sent_by_kill_still_kills(tmp_path: Path) -> None:
    regs = tmp_path / "regs"
    regs.write_bytes(bytes(PAGE))
    script = textwrap.dedent(
        """
        import os, signal, sys
        from juggle.fabric.linux.busguard import GuardedMap
        GuardedMap(sys.argv[1], 4096).read32(0)
        os.kill(os.getpid(), signal.SIGBUS)
        print("still alive", flush=True)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(regs)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == -signal.SIGBUS, (proc.returncode, proc.stdout, proc.stderr)
    assert "still alive" not in proc.stdout


# -- containment end to end ----------------------------------------------------------------


class BusWindow:
    """A core's register window behind a real bus: every access first goes through a
    :class:`GuardedMap` over a file (the bus), then to the simulated core. Truncating the file
    makes the bus raise SIGBUS, as a decoupled slot's window does on a board."""

    def __init__(self, inner: MMIO, bus: GuardedMap) -> None:
        self.inner = inner
        self.bus = bus
        self.faults = 0

    @property
    def size(self) -> int:
        return self.inner.size

    def _touch(self) -> None:
        try:
            self.bus.read32(0)
        except BusFaultError:
            self.faults += 1
            raise

    def read32(self, offset: int) -> int:
        self._touch()
        return self.inner.read32(offset)

    def write32(self, offset: int, value: int) -> None:
        self._touch()
        self.inner.write32(offset, value)


@pytest.fixture
def bus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, list[BusWindow]]]:
    """Every window the simulated backend attaches sits behind one bus file's guarded map."""
    path = tmp_path / "bus"
    path.write_bytes(bytes(PAGE))
    mapped = GuardedMap(path, PAGE, label="bus")
    windows: list[BusWindow] = []
    attach = SimBackend.attach

    def attach_on_bus(self: SimBackend, region: RegionProfile, design: str) -> MMIO:
        window = BusWindow(attach(self, region, design), mapped)
        windows.append(window)
        return window

    monkeypatch.setattr(SimBackend, "attach", attach_on_bus)
    yield path, windows
    mapped.close()


def software_only_tdes(tmp_path: Path) -> Path:
    """The example tdes co-module without its native tier: software and hardware."""
    import shutil

    target = tmp_path / "tdes_sw_hw"
    shutil.copytree(ROOT / "examples" / "modules" / "tdes", target)
    toml = target / "juggle.toml"
    text = toml.read_text()
    text = text.replace('[services.native]\nclass = "tdes_module.NativeTDES"\n', "")
    assert "[services.native]" not in text
    toml.write_text(text)
    return target


def encrypt_caller(proxy: Any) -> Caller:
    """A :class:`Caller` of ``encrypt`` on PLAIN, each result checked against CIPHER."""

    def call(_: int) -> str | None:
        buf = bytearray(PLAIN)
        proxy.encrypt(buf, len(buf))
        return None if bytes(buf) == CIPHER else bytes(buf).hex()

    return Caller(call)


def test_a_sigbus_during_calls_is_contained_and_recovered(
    tmp_path: Path, bus: tuple[Path, list[BusWindow]]
) -> None:
    bus_path, windows = bus
    with juggle.Framework("xupv2p", drain_timeout_s=0.5, call_timeout_s=2.0) as fw:
        module = fw.install(software_only_tdes(tmp_path))
        module.start()
        (service,) = fw.services()
        sid = service.service_id
        proxy = fw.get_service("crypto.EncryptionService", consumer="app")
        proxy.load_key(KEY)
        fw.juggle(to_hardware=sid)
        assert fw.services()[0].tier == "hardware"
        caller = encrypt_caller(proxy)
        caller.start()
        try:
            wait_for(lambda: caller.calls >= 20)
            os.truncate(bus_path, 0)  # the bus now raises SIGBUS on every access
            # the failing call marks the region ERROR; the move to software follows on the
            # framework's fault thread
            wait_for(
                lambda: fw.regions()[0].state == "ERROR" and fw.services()[0].tier == "software"
            )
            assert windows[0].faults >= 1  # a real SIGBUS was taken, and the process lives
            served = caller.calls
            wait_for(lambda: caller.calls >= served + 20)  # software serves the calls
        finally:
            caller.stop.set()
            caller.join(30)
        assert not caller.is_alive()
        assert caller.failures == []
        assert any("BusFaultError" in f and "SIGBUS" in f for f in fw.faults), fw.faults
        region = fw.regions()[0]
        assert region.state == "ERROR" and region.service_id is None

        os.truncate(bus_path, PAGE)  # the fault is gone
        fw.recover(region.name)
        assert fw.services()[0].tier == "hardware"
        assert fw.regions()[0].state == "PROGRAMMED"
        buf = bytearray(PLAIN)
        proxy.encrypt(buf, len(buf))
        assert bytes(buf) == CIPHER
        assert windows[-1].faults == 0 and len(windows) == 2  # a fresh core, no fault


def test_bench_reports_the_guarded_access_measured() -> None:
    from juggle.bench import TARGETS, run_bench

    result = run_bench(quick=True, only=["linux"])
    assert result["uio_access_ns_p50"] > 0
    assert result["uio_access_guarded"] is True
    assert result["labels"]["uio_access_ns_p50"] == "measured"
    assert TARGETS["uio_access_ns_p50"] == ("<=", 500.0)
    assert "uio_access_ns_p50" in result["targets_met"]
    assert set(result["group_seconds"]) == {"linux"}
