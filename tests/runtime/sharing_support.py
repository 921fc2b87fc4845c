"""Helpers for the sharing and fault tests: module folders, callers that count, keys."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from Crypto.Cipher import DES, DES3

import juggle

ROOT = Path(__file__).resolve().parents[2]
MODULES = ROOT / "examples" / "modules"

#: Six distinct 3-key TDES keys; the fourth has K1 = K2 != K3 (EDE then degenerates to single
#: DES under K3, which every tier must compute, not refuse).
KEYS = (
    bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123"),
    bytes.fromhex("FEDCBA9876543210A1B2C3D4E5F60718293A4B5C6D7E8F90"),
    bytes.fromhex("1F1E1D1C1B1A19180F0E0D0C0B0A09082F2E2D2C2B2A2928"),
    bytes.fromhex("0123456789ABCDEF0123456789ABCDEF456789ABCDEF0123"),
    bytes.fromhex("89ABCDEF0123456723456789ABCDEF010123456789ABCDEF"),
    bytes.fromhex("3132333435363738414243444546474851525354555657FF"),
)


def tdes_reference(key: bytes, data: bytes) -> bytes:
    """TDES-EDE-ECB of ``data`` under ``key`` by pycryptodome. It refuses keys that degenerate
    to single DES, so those are computed as the single DES they are: K1 = K2 gives E(K3),
    K2 = K3 gives E(K1)."""
    k1, k2, k3 = key[:8], key[8:16], key[16:24]
    if k1 == k2:
        return bytes(DES.new(k3, DES.MODE_ECB).encrypt(data))
    if k2 == k3:
        return bytes(DES.new(k1, DES.MODE_ECB).encrypt(data))
    return bytes(DES3.new(key, DES3.MODE_ECB).encrypt(data))


def encrypt(proxy: Any, data: bytes) -> bytes:
    """``data`` encrypted through ``proxy``."""
    buf = bytearray(data)
    assert proxy.encrypt(buf, len(buf)) == len(buf)
    return bytes(buf)


def tdes_module(tmp_path: Path, *, per_consumer: bool, name: str = "tdes") -> Path:
    """A copy of the example tdes co-module, shared or per consumer."""
    target = tmp_path / name
    shutil.copytree(MODULES / "tdes", target)
    toml = target / "juggle.toml"
    text = toml.read_text().replace(
        "per_consumer = false", f"per_consumer = {str(per_consumer).lower()}"
    )
    toml.write_text(text.replace('name = "tdes"', f'name = "{name}"'))
    return target


def start_tdes(fw: juggle.Framework, tmp_path: Path, *, per_consumer: bool) -> int:
    """Install and start the tdes co-module; its service id."""
    module = fw.install(tdes_module(tmp_path, per_consumer=per_consumer))
    module.start()
    (snap,) = [s for s in fw.services() if s.module == module.name]
    return snap.service_id


class Caller:
    """Threads that call ``fn`` until stopped, counting calls and keeping every failure."""

    def __init__(self, fn: Callable[[], None], threads: int = 1) -> None:
        self._fn = fn
        self._stop = threading.Event()
        self.calls = 0
        self.failures: list[BaseException] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._fn()
            except BaseException as exc:
                with self._lock:
                    self.failures.append(exc)
            with self._lock:
                self.calls += 1
            time.sleep(0)  # let other threads (the juggler) have the interpreter too

    def stop(self) -> None:
        """Stop and join the threads (each finishes its call)."""
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
            assert not thread.is_alive(), "a caller thread hung"
