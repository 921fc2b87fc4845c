"""Promises of the runtime that a planted bug once broke unseen (issue 22, item 1).

Each test here fails when its promise breaks:

* the call-timeout guard ends a hung core's call within ``call_timeout_s`` even when the driver
  itself would poll for seconds (no poll cap of its own);
* a quarantined core is cut off the bus: the window its driver holds refuses every access at
  once, before the fabric has even marked the region;
* each archive limit (compression ratio, unpacked total) trips on an archive built to trip that
  limit alone, and the same archive installs under a looser limit;
* ``install`` of a pinned module whose code was tampered with is refused before any of that
  code runs.
"""

from __future__ import annotations

import os
import shutil
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sharing_support import KEYS, MODULES, encrypt, tdes_reference

import juggle
from juggle.errors import InputLimitError, IntegrityError, RegionEmptyError
from juggle.limits import Limits
from juggle.runtime.integrity import lock_module

PLAIN = b"sixteen bytes!!!"
#: The call timeout of the guard tests.
CALL_TIMEOUT_S = 0.2
#: What a hung call may take beyond the timeout: the guard looks at the clock every 64 reads
#: (microseconds each on the simulated window), then the call is quarantined and served again
#: by the software twin (one 16-byte TDES, milliseconds). 0.5 s is that work many times over,
#: room for a loaded 2-core machine; without the guard the driver polls for GIVE_UP_S (5 s).
MARGIN_S = 0.5

#: A driver with no poll cap: only a clock of its own, GIVE_UP_S, ends its wait for DONE, so
#: nothing but the runtime's guard can end a hang sooner. It keeps the window it was given.
POLLING_CODE = '''
"""The tdes co-module with a driver that polls a busy core for up to GIVE_UP_S seconds."""
import time

from juggle.services.crypto import NativeTDES, SoftwareTDES, TdesDriver
from juggle.services.crypto import registers as r
from juggle.services.crypto.model import TdesCore

GIVE_UP_S = 5.0


class PollingDriver(TdesDriver):
    def __init__(self, mmio):
        super().__init__(mmio)
        self.held = mmio  # the window the runtime gave this driver

    def encrypt(self, buf, size):
        mmio = self.held
        mmio.write32(r.DATA_HI, 0)
        mmio.write32(r.DATA_LO, 0)
        mmio.write32(r.CONTROL, r.CTRL_START)
        deadline = time.monotonic() + GIVE_UP_S
        while not mmio.read32(r.STATUS) & r.STATUS_DONE:  # no cap on the number of polls
            if time.monotonic() > deadline:
                raise RuntimeError(f"core not DONE after {GIVE_UP_S} s of polling")
        return super().encrypt(buf, size)
'''


def polling_module(tmp_path: Path) -> Path:
    """A copy of the tdes co-module (software and hardware tiers) whose driver is
    ``PollingDriver``."""
    folder = tmp_path / "polling"
    folder.mkdir()
    (folder / "bitstreams").mkdir()
    shutil.copy(MODULES / "tdes" / "bitstreams" / "tdes_prr0.bit", folder / "bitstreams")
    (folder / "polling_module.py").write_text(POLLING_CODE)
    toml = (MODULES / "tdes" / "juggle.toml").read_text()
    toml = toml.replace('name = "tdes"', 'name = "polling"').replace(
        "tdes_module.", "polling_module."
    )
    toml = toml.replace("polling_module.TdesDriver", "polling_module.PollingDriver")
    toml = toml.replace('[services.native]\nclass = "polling_module.NativeTDES"\n', "")
    assert "PollingDriver" in toml and "NativeTDES" not in toml
    (folder / "juggle.toml").write_text(toml)
    return folder


@pytest.fixture
def fw() -> Iterator[juggle.Framework]:
    framework = juggle.Framework("xupv2p", call_timeout_s=CALL_TIMEOUT_S, drain_timeout_s=2.0)
    yield framework
    framework.close()


def in_hardware(fw: juggle.Framework, tmp_path: Path) -> tuple[int, Any]:
    """The polling module started and juggled into hardware; its service id and a proxy with
    a key loaded (one call made, so the core holds the proxy's context)."""
    module = fw.install(polling_module(tmp_path))
    module.start()
    sid = fw.services()[0].service_id
    proxy = fw.get_service("EncryptionService", consumer="app")
    proxy.load_key(KEYS[0])
    fw.juggle(to_hardware=sid)
    assert fw.services()[0].tier == "hardware"
    assert encrypt(proxy, PLAIN) == tdes_reference(KEYS[0], PLAIN)
    return sid, proxy


def test_a_hung_core_is_cut_short_by_the_call_timeout(fw: juggle.Framework, tmp_path: Path) -> None:
    """A core that never finishes: the call ends (served by software, correct) within the call
    timeout plus the margin, although the driver would poll for 5 s; the fault names the
    guard's CoreTimeoutError."""
    sid, proxy = in_hardware(fw, tmp_path)
    fw.fabric.faults.arm("core_hang")
    started = time.monotonic()
    result = encrypt(proxy, PLAIN)
    took = time.monotonic() - started
    assert result == tdes_reference(KEYS[0], PLAIN)
    assert fw.fabric.faults.statistics().fired["core_hang"] == 1
    assert took < CALL_TIMEOUT_S + MARGIN_S, f"a hung call took {took:.2f} s"
    assert fw.statistics(sid).fallbacks == 1
    deadline = time.monotonic() + 10
    while not fw.faults:
        assert time.monotonic() < deadline, "the fault was never recorded"
        time.sleep(0.01)
    assert "CoreTimeoutError" in fw.faults[0], fw.faults


def test_a_quarantined_core_is_cut_off_the_bus_at_once(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    """After a call faults, the window the driver held refuses every access with
    RegionEmptyError, while the fabric still has the region PROGRAMMED with its bridge open
    (the supervisor that marks it is held back): the runtime's own guard cut it off."""
    sid, proxy = in_hardware(fw, tmp_path)
    managed = fw._table.managed(sid)
    assert managed.core is not None
    driver = managed.core.driver
    window = driver.held
    assert window.read32(0x3C) == 0x54444553  # the core's ID register answers ("TDES")
    with fw._juggler.lock:  # the fault supervisor waits: the fabric keeps the region as it is
        fw.fabric.faults.arm("driver_error")
        assert encrypt(proxy, PLAIN) == tdes_reference(KEYS[0], PLAIN)  # served by software
        assert fw.fabric.faults.statistics().fired["driver_error"] == 1
        assert fw.fabric.regions()[0].state == "PROGRAMMED"  # the fabric was not told yet
        fw.fabric.window("prr0").read32(0x3C)  # the fabric's window itself still answers
        with pytest.raises(RegionEmptyError, match="prr0.*cut off by the runtime"):
            window.read32(0x3C)
        with pytest.raises(RegionEmptyError, match="prr0.*cut off by the runtime"):
            window.write32(0x08, 1)
    deadline = time.monotonic() + 10
    while fw.regions()[0].state != "ERROR":
        assert time.monotonic() < deadline, "the region was never quarantined"
        time.sleep(0.01)
    with pytest.raises(RegionEmptyError, match="cut off by the runtime"):
        window.read32(0x3C)
    assert encrypt(proxy, PLAIN) == tdes_reference(KEYS[0], PLAIN)


# -- archive limits ------------------------------------------------------------------------------


def zip_module(path: Path, extra: dict[str, tuple[bytes, int]]) -> Path:
    """The tdes co-module as a zip at ``path``, plus ``extra`` files (name -> (data,
    compression))."""
    with zipfile.ZipFile(path, "w") as archive:
        for file in sorted((MODULES / "tdes").rglob("*")):
            if file.is_file():
                rel = file.relative_to(MODULES / "tdes").as_posix()
                archive.write(file, rel, compress_type=zipfile.ZIP_DEFLATED)
        for name, (data, method) in extra.items():
            archive.writestr(name, data, compress_type=method)
    return path


def members(path: Path) -> list[zipfile.ZipInfo]:
    with zipfile.ZipFile(path) as archive:
        return archive.infolist()


def installs(path: Path, limits: Limits) -> bool:
    """Whether ``path`` installs and starts under ``limits``."""
    with juggle.Framework("xupv2p", limits=limits) as fw:
        fw.install(path).start()
        return len(fw.services()) == 1


def test_the_compression_ratio_limit_trips_alone(tmp_path: Path) -> None:
    """A 2 MiB run of zeros deflates about 1000-fold: over the ratio limit (200), while every
    member is under the size limit and the total under the unpacked limit."""
    bomb = zip_module(tmp_path / "bomb.zip", {"zeros.bin": (bytes(2 << 20), zipfile.ZIP_DEFLATED)})
    limits = Limits()
    infos = members(bomb)
    assert max(i.file_size for i in infos) < limits.max_bitstream_bytes
    assert sum(i.file_size for i in infos) < limits.max_unpacked_bytes
    assert len(infos) < limits.max_members
    (zeros,) = [i for i in infos if i.filename == "zeros.bin"]
    assert zeros.file_size / zeros.compress_size > limits.max_compression_ratio
    with juggle.Framework("xupv2p") as fw:
        with pytest.raises(InputLimitError, match=r"zeros\.bin.*Limits\.max_compression_ratio"):
            fw.install(bomb)
        assert fw.modules() == () and fw.services() == ()
    assert installs(bomb, Limits(max_compression_ratio=100_000))  # that limit alone stopped it


def test_the_unpacked_total_limit_trips_alone(tmp_path: Path) -> None:
    """Members each under the per-file limit and barely compressible (stored), whose sum is
    over the unpacked limit."""
    noise = os.urandom(120_000)
    archive = zip_module(tmp_path / "big.zip", {"noise.bin": (noise, zipfile.ZIP_STORED)})
    infos = members(archive)
    total = sum(i.file_size for i in infos)
    biggest = max(i.file_size for i in infos)
    limits = Limits(max_unpacked_bytes=total - 1, max_bitstream_bytes=biggest)
    ratio_bound = limits.max_compression_ratio / 10  # every member far from the ratio limit
    assert all(i.file_size <= i.compress_size * ratio_bound for i in infos)
    assert len(infos) < limits.max_members
    with juggle.Framework("xupv2p", limits=limits) as fw:
        with pytest.raises(InputLimitError, match=r"unpacked.*Limits\.max_unpacked_bytes"):
            fw.install(archive)
        assert fw.modules() == () and fw.services() == ()
    assert installs(archive, Limits(max_unpacked_bytes=total, max_bitstream_bytes=biggest))


# -- pins at install -----------------------------------------------------------------------------


def tampered_module(tmp_path: Path, marker: Path, *, pinned: bool) -> Path:
    """A copy of the tdes co-module (locked when ``pinned``) whose ``tdes_module.py`` then
    gains code that writes ``marker`` when it is imported."""
    folder = tmp_path / "tdes"
    shutil.copytree(MODULES / "tdes", folder)
    if pinned:
        pins = lock_module(folder)
        assert "tdes_module.py" in pins
    code = folder / "tdes_module.py"
    code.write_text(
        code.read_text() + f"\nimport pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
    )
    return folder


def test_a_tampered_pinned_module_is_refused_before_its_code_runs(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    folder = tampered_module(tmp_path / "pinned", marker, pinned=True)
    with juggle.Framework("xupv2p") as fw:
        with pytest.raises(IntegrityError, match=r"tdes_module\.py"):
            fw.install(folder)
        assert fw.modules() == () and fw.services() == ()
    assert not marker.exists(), "the tampered code ran"


def test_the_tampered_code_does_run_when_nothing_pins_it(tmp_path: Path) -> None:
    """The counterpart: the marker mechanism works, so its absence above means something."""
    marker = tmp_path / "marker"
    folder = tampered_module(tmp_path / "unpinned", marker, pinned=False)
    with juggle.Framework("xupv2p") as fw:
        fw.install(folder).start()
    assert marker.read_text() == "ran"
