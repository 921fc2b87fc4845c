"""A client process of the daemon tests: ``python daemon_worker.py MODE SOCKET [ARGS]``.

Modes (each prints one JSON document on stdout):

- ``encrypt SOCKET SEED THREADS``: THREADS threads, each with its own proxy and its own TDES
  key, encrypt random buffers (8 B .. 24 KiB, so both the inline and the shared-memory path
  run) and compare every result with pycryptodome's; once every thread has a checked result
  it prints ``calling``, and the threads go on until stdin closes.
- ``hold SOCKET [ALGORITHM]``: take the service of ALGORITHM (``tdes`` unless given, or
  ``des``), load a key, print ``ready``, then encrypt 64 KiB buffers until killed.
- ``probe SOCKET``: connect and report the identity, or the error class the daemon refused with.
- ``realtime SOCKET``: three DES calls on the hardware-only DES service, checked.
- ``tenant SOCKET``: the isolation checks of a tenant that is not the first one (see
  test_daemon.py::test_tenant_isolation).
"""

from __future__ import annotations

import contextlib
import json
import random
import sys
import threading
from typing import Any

from Crypto.Cipher import DES, DES3

from juggle.daemon import connect


def tdes_key(rng: random.Random) -> bytes:
    """A random 3-key TDES key pycryptodome accepts (no degenerate halves)."""
    while True:
        key = DES3.adjust_key_parity(bytes(rng.getrandbits(8) for _ in range(24)))
        try:
            DES3.new(key, DES3.MODE_ECB)
            return key
        except ValueError:
            continue


def encrypt_mode(socket: str, seed: int, threads: int) -> dict[str, Any]:
    """Encrypt on ``threads`` threads until stdin closes (see the module docstring); each
    thread's calls, mismatches and first errors."""
    client = connect(socket)
    results: list[dict[str, Any]] = []
    lock = threading.Lock()
    checked = threading.Barrier(threads + 1)  # every thread has one checked result, and main
    stop = threading.Event()

    def run(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        key = tdes_key(rng)
        reference = DES3.new(key, DES3.MODE_ECB)
        proxy = client.get_service("EncryptionService")
        proxy.load_key(key)
        calls = mismatches = 0
        errors: list[str] = []
        announced = False
        while not stop.is_set():
            if calls == 1 and not announced:
                announced = True
                with contextlib.suppress(threading.BrokenBarrierError):
                    checked.wait(60)
            size = 8 * rng.choice((1, 2, 16, 64, 512, 1024, 3072))
            data = rng.randbytes(size)
            buf = bytearray(data)
            try:
                proxy.encrypt(buf, size)
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            calls += 1
            if bytes(buf) != reference.encrypt(data):
                mismatches += 1
        with lock:
            results.append({"calls": calls, "mismatches": mismatches, "errors": errors[:5]})

    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    try:
        checked.wait(60)
    except threading.BrokenBarrierError:
        stop.set()  # a thread never got a result: its errors are in the report
    else:
        print("calling", flush=True)
        sys.stdin.read()  # until the test closes it
        stop.set()
    for t in pool:
        t.join()
    client.close()
    return {"threads": results}


def hold_mode(socket: str, algorithm: str = "tdes") -> None:
    client = connect(socket)
    proxy = client.get_service("EncryptionService", filter=f"(algorithm={algorithm})")
    key = tdes_key(random.Random(7))
    proxy.load_key(key[:8] if algorithm == "des" else key)
    buf = bytearray(64 << 10)
    print("ready", flush=True)
    while True:
        proxy.encrypt(buf, len(buf))


def probe_mode(socket: str) -> dict[str, Any]:
    try:
        client = connect(socket)
    except Exception as exc:
        return {"error": type(exc).__name__, "message": str(exc)}
    identity = client.identity
    client.close()
    return {"identity": identity}


def _error_of(fn: Any) -> str | None:
    try:
        fn()
    except Exception as exc:
        return type(exc).__name__
    return None


def tenant_mode(socket: str) -> dict[str, Any]:
    client = connect(socket)
    out: dict[str, Any] = {"identity": client.identity}
    (service,) = client.services()
    sid = service.service_id
    out["service_consumers"] = list(service.consumers)
    out["tenants"] = [t.name for t in client.tenants()]
    stats = client.statistics(sid)
    out["stats_consumers"] = sorted(stats.per_consumer)
    out["stats_calls"] = stats.total.calls
    proxy = client.get_service("EncryptionService")
    out["encrypt_without_key"] = _error_of(lambda: proxy.encrypt(bytearray(16), 16))
    key = tdes_key(random.Random(99))
    proxy.load_key(key)
    data = bytes(range(32))
    buf = bytearray(data)
    proxy.encrypt(buf, len(buf))
    out["own_key_ok"] = bytes(buf) == DES3.new(key, DES3.MODE_ECB).encrypt(data)
    stats = client.statistics(sid)
    out["stats_consumers_after"] = sorted(stats.per_consumer)
    out["stats_calls_after"] = stats.total.calls
    out["juggle"] = _error_of(lambda: client.juggle(to_hardware=sid))
    out["set_tier"] = _error_of(lambda: client.set_tier(sid, "software"))
    out["install"] = _error_of(lambda: client.install("/nonexistent"))
    out["reload_policy"] = _error_of(client.reload_policy)
    channel = client.signals()
    out["signals_tenant"] = channel.tenant
    out["unread_signals"] = len(channel.drain())
    out["services_quota"] = [
        _error_of(lambda: client.get_service("EncryptionService")) for _ in range(2)
    ]
    quota = [_error_of(lambda: proxy.encrypt(bytearray(8), 8)) for _ in range(60)]
    out["quota_errors"] = sorted({e for e in quota if e})
    client.close()
    return out


def realtime_mode(socket: str) -> dict[str, Any]:
    """A real-time tenant's calls on the hardware-only DES service, checked (each holds the
    region while it runs)."""
    client = connect(socket)
    identity = client.identity
    proxy = client.get_service("EncryptionService", filter="(algorithm=des)")
    key = bytes.fromhex("133457799BBCDFF1")
    proxy.load_key(key)
    right = 0
    for _ in range(3):
        data = random.randbytes(64)
        buf = bytearray(data)
        proxy.encrypt(buf, len(buf))
        right += bytes(buf) == DES.new(key, DES.MODE_ECB).encrypt(data)
    client.close()
    return {"identity": identity, "right": right}


def main(argv: list[str]) -> int:
    mode, socket = argv[0], argv[1]
    if mode == "encrypt":
        result = encrypt_mode(socket, int(argv[2]), int(argv[3]))
    elif mode == "hold":
        hold_mode(socket, *argv[2:3])
        return 0
    elif mode == "probe":
        result = probe_mode(socket)
    elif mode == "tenant":
        result = tenant_mode(socket)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
