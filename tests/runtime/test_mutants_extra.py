"""Promises a planted bug broke unseen in the mutant table of issue 22 (the acceptance run).

* A tenant-arbitrated core that faults is cut off the bus by the runtime in the failing call
  itself, as a juggle-placed one is (tests/runtime/test_promises.py shows that placement): the
  window its driver holds refuses every access at once, naming the runtime's cut, whatever
  the fabric does with the region afterwards.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sharing_support import KEYS, MODULES, encrypt, tdes_reference
from test_shared_faults import HW_ONLY_CODE, HW_ONLY_DESCRIPTOR

import juggle
from juggle.errors import HardwareFaultError, RegionEmptyError

PLAIN = b"sixteen bytes!!!"


def hardware_only(tmp_path: Path) -> Path:
    """The hardware-only TDES module of test_shared_faults (prr0 of xupv2p)."""
    folder = tmp_path / "hwonly"
    folder.mkdir()
    shutil.copy(MODULES / "tdes" / "bitstreams" / "tdes_prr0.bit", folder / "tdes_prr0.bit")
    (folder / "hw_module.py").write_text(HW_ONLY_CODE)
    (folder / "juggle.toml").write_text(HW_ONLY_DESCRIPTOR)
    return folder


def test_an_arbitrated_core_that_faults_is_cut_off_the_bus_in_the_failing_call(
    tmp_path: Path,
) -> None:
    """Tenant A's call meets a driver error: it raises HardwareFaultError, and by the time it
    has, the guarded window of the core's driver raises RegionEmptyError naming the runtime's
    cut on a read and on a write (a window only detached, or the fabric's own window of a
    quarantined region, says something else)."""
    with juggle.Framework("xupv2p", call_timeout_s=0.2, drain_timeout_s=5.0) as fw:
        fw.add_tenant("A")
        module = fw.install(hardware_only(tmp_path))
        module.start()
        (sid,) = module.service_ids
        assert fw._arbiter.arbitrates(sid)  # placed by its tenants' requests, not by juggles
        proxy = fw.get_service("EncryptionService", consumer="A")
        proxy.load_key(KEYS[0])
        assert encrypt(proxy, PLAIN) == tdes_reference(KEYS[0], PLAIN)
        _device, core = fw._arbiter._cores["prr0"]  # the core serving A now
        window = core.window
        assert window.read32(0x3C) == 0x54444553  # the core's ID register answers ("TDES")
        fw.fabric.faults.arm("driver_error")
        with pytest.raises(HardwareFaultError, match="prr0"):
            encrypt(proxy, PLAIN)
        assert fw.fabric.faults.statistics().fired["driver_error"] == 1
        with pytest.raises(RegionEmptyError, match="prr0.*cut off by the runtime"):
            window.read32(0x3C)
        with pytest.raises(RegionEmptyError, match="prr0.*cut off by the runtime"):
            window.write32(0x08, 1)
