"""A pinned bitstream changed on disk after install is never programmed, whoever places the
service: a juggle (the juggle steps check the pin) or the tenant arbiter (its own programming
checks it too). Both paths build a core the same way, so both refuse the same way."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sharing_support import MODULES
from test_shared_faults import HW_ONLY_CODE, HW_ONLY_DESCRIPTOR

import juggle
from juggle.errors import DeviceWaitTimeoutError, IntegrityError
from juggle.runtime.integrity import lock_module

KEY = bytes(range(24))


@pytest.fixture
def pinned(tmp_path: Path) -> Path:
    """The hardware-only TDES module, locked: its files are pinned by sha256."""
    folder = tmp_path / "hwonly"
    folder.mkdir()
    shutil.copy(MODULES / "tdes" / "bitstreams" / "tdes_prr0.bit", folder / "tdes_prr0.bit")
    (folder / "hw_module.py").write_text(HW_ONLY_CODE)
    (folder / "juggle.toml").write_text(HW_ONLY_DESCRIPTOR)
    lock_module(folder)
    return folder


def tamper(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[200] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("placement", ["arbitrated", "juggle-placed"])
def test_a_bitstream_changed_after_install_is_never_programmed(
    pinned: Path, placement: str
) -> None:
    with juggle.Framework("xupv2p", drain_timeout_s=0.5) as fw:
        if placement == "arbitrated":
            fw.add_tenant("A")  # a hardware-only service started among tenants: arbitrated
        module = fw.install(pinned)
        tamper(pinned / "tdes_prr0.bit")
        if placement == "arbitrated":
            module.start()  # placed on a tenant's demand, not now
            proxy = fw.get_service("EncryptionService", consumer="A", filter="(algorithm=hwonly)")
            # the arbiter's programming refuses; the tenant's call waits its bound, unserved
            with pytest.raises(DeviceWaitTimeoutError):
                proxy.load_key(KEY)
        else:
            # a hardware-only service's start puts it into the fabric: the juggle refuses
            with pytest.raises(IntegrityError, match=r"tdes_prr0\.bit.*changed since install"):
                module.start()
        assert fw.fabric.region("prr0").snapshot().state == "EMPTY"
        assert fw.fabric.statistics().programs == 0
