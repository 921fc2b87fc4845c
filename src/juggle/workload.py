"""A background workload that drives calls, so statistics, focus and controllers have
something to see (``workload on`` in the shell, ``juggle dashboard --workload demo``).

For every running service whose interface it knows, a thread calls it as an application would:
an ``EncryptionService`` is encrypted with by consumer ``mail`` (a key loaded once, 2 KiB
messages), a ``DecoderService`` decodes ADPCM chunks for consumer ``music``, an ``AddService``
adds for consumer ``calc``. Calls go through ordinary proxies, so the runtime traces them and
a juggle moves them like any other. Each result is checked; a wrong or failed call is counted,
never raised.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from juggle.errors import JuggleError
from juggle.runtime.framework import Framework

__all__ = ["Workload", "WorkloadStatus"]

_KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")


@dataclass(frozen=True, slots=True)
class WorkloadStatus:
    """What the workload did so far: calls per consumer, failed and wrong calls."""

    running: bool
    calls: dict[str, int] = field(default_factory=dict)
    failed: int = 0
    wrong: int = 0


def _encrypt_loop(proxy: Any, rng: random.Random) -> Callable[[], bool]:
    proxy.load_key(_KEY)

    def call() -> bool:
        data = rng.randbytes(2048)
        buf = bytearray(data)
        proxy.encrypt(buf, len(buf))
        proxy.decrypt(buf, len(buf))
        return bytes(buf) == data

    return call


def _decode_loop(proxy: Any, rng: random.Random) -> Callable[[], bool]:
    from juggle.services.audio import decode_ima_adpcm, encode_ima_adpcm, sine_sweep

    adpcm = encode_ima_adpcm(sine_sweep(seconds=0.5, seed=rng.randrange(1 << 16)))

    def call() -> bool:
        offset = rng.randrange(0, len(adpcm) - 512)
        chunk = adpcm[offset : offset + 512]
        proxy.reset()
        return bool(proxy.decode(chunk) == decode_ima_adpcm(chunk)[0])

    return call


def _add_loop(proxy: Any, rng: random.Random) -> Callable[[], bool]:
    def call() -> bool:
        a, b = rng.randrange(-(1 << 30), 1 << 30), rng.randrange(-(1 << 30), 1 << 30)
        return bool(proxy.add(a, b) == a + b)

    return call


#: short interface name -> (consumer, loop factory)
_APPS: dict[str, tuple[str, Callable[[Any, random.Random], Callable[[], bool]]]] = {
    "EncryptionService": ("mail", _encrypt_loop),
    "DecoderService": ("music", _decode_loop),
    "AddService": ("calc", _add_loop),
}


class Workload:
    """Threads calling the known services of ``fw`` until :meth:`stop` (see module doc)."""

    def __init__(self, fw: Framework, *, seed: int = 1, pause_s: float = 0.002) -> None:
        self._fw = fw
        self._seed = seed
        self._pause_s = pause_s
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._calls: dict[str, int] = {}
        self._failed = 0
        self._wrong = 0

    @property
    def running(self) -> bool:
        """Whether the workload's threads run."""
        return bool(self._threads)

    def start(self) -> list[str]:
        """Start one caller per known running service; returns their consumer names (empty:
        none of the services is one the workload knows). Starting twice changes nothing."""
        if self._threads:
            return sorted(self._calls)
        self._stop.clear()
        started = []
        rng = random.Random(self._seed)
        for snap in self._fw.services():
            app = _APPS.get(snap.interface.rpartition(".")[2])
            if app is None:
                continue
            consumer, factory = app
            if consumer in started:
                continue
            proxy = self._fw.get_service(snap.interface, consumer=consumer)
            call = factory(proxy, random.Random(rng.randrange(1 << 30)))
            thread = threading.Thread(
                target=self._run, args=(consumer, call), name=f"workload-{consumer}", daemon=True
            )
            self._calls.setdefault(consumer, 0)
            started.append(consumer)
            self._threads.append(thread)
        for thread in self._threads:
            thread.start()
        return started

    def _run(self, consumer: str, call: Callable[[], bool]) -> None:
        while not self._stop.is_set():
            try:
                ok = call()
            except JuggleError:
                with self._lock:
                    self._failed += 1
                if self._stop.wait(0.05):  # a stopped service, a closed framework: back off
                    return
                continue
            with self._lock:
                self._calls[consumer] += 1
                self._wrong += not ok
            self._stop.wait(self._pause_s)

    def stop(self) -> None:
        """Stop the callers and wait for them (their proxies stay with the framework)."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads.clear()

    def status(self) -> WorkloadStatus:
        """A snapshot of what the workload did."""
        with self._lock:
            return WorkloadStatus(self.running, dict(self._calls), self._failed, self._wrong)
