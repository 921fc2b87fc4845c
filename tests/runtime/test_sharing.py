"""One sharing model (issue 8): a consumer's state is its own on every tier, a shared service's
state is the last state-setting call, and the core is time-multiplexed among virtual devices."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sharing_support import (
    KEYS,
    MODULES,
    Caller,
    encrypt,
    start_tdes,
    tdes_reference,
)

import juggle

PLAIN = b"sixteen bytes!!!"


@pytest.fixture
def fw() -> Iterator[juggle.Framework]:
    framework = juggle.Framework("xupv2p")
    yield framework
    framework.close()


def test_per_consumer_keys_stay_isolated_while_juggling(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    """6 consumers with distinct keys x 8 threads; another thread juggles the service
    software <-> hardware and native <-> hardware 200 times: every ciphertext is made under
    its consumer's own key."""
    sid = start_tdes(fw, tmp_path, per_consumer=True)
    proxies = []
    for i, key in enumerate(KEYS):
        proxy = fw.get_service("EncryptionService", consumer=f"c{i}")
        proxy.load_key(key)
        proxies.append((proxy, key))
    wrong: list[str] = []

    def caller(index: int) -> None:
        proxy, key = proxies[index]
        data = random.randbytes(16)
        got = encrypt(proxy, data)
        if got != tdes_reference(key, data):
            wrong.append(f"c{index}")

    callers = [Caller(lambda i=i: caller(i), threads=8) for i in range(len(KEYS))]

    def some_calls_made(n: int = 6) -> None:
        """Wait until the callers made a few calls on the tier just entered (a loaded machine
        may otherwise juggle again before any caller got a turn)."""
        target = sum(c.calls for c in callers) + n
        deadline = time.monotonic() + 5
        while sum(c.calls for c in callers) < target and time.monotonic() < deadline:
            time.sleep(0.001)

    try:
        for n in range(200):
            soft = "software" if n % 4 < 2 else "native"
            if n % 2 == 0:
                fw.juggle(to_hardware=sid)
            else:
                fw.set_tier(sid, soft)
            if n % 8 in (0, 1, 3):  # every tier gets calls, most juggles stay back to back
                some_calls_made()
    finally:
        for c in callers:
            c.stop()
    assert sum(c.calls for c in callers) > 200
    assert [f for c in callers for f in c.failures] == []
    assert wrong == []
    switches = fw.statistics(sid).per_tier
    assert switches["hardware"].calls > 0 and switches["native"].calls > 0
    assert switches["software"].calls > 0


def test_each_consumer_gets_its_context_on_the_core(fw: juggle.Framework, tmp_path: Path) -> None:
    """In hardware, consumers alternate on one core: each call runs under its own key."""
    sid = start_tdes(fw, tmp_path, per_consumer=True)
    fw.juggle(to_hardware=sid)
    a = fw.get_service("EncryptionService", consumer="a")
    b = fw.get_service("EncryptionService", consumer="b")
    a.load_key(KEYS[0])
    b.load_key(KEYS[3])  # K1 = K2 != K3
    for _ in range(3):
        assert encrypt(a, PLAIN) == tdes_reference(KEYS[0], PLAIN)
        assert encrypt(b, PLAIN) == tdes_reference(KEYS[3], PLAIN)
    c = fw.get_service("EncryptionService", consumer="c")  # nothing of a or b survives for c
    with pytest.raises(juggle.errors.KeyNotLoadedError):
        encrypt(c, PLAIN)
    fw.juggle(to_software=[sid])
    assert encrypt(a, PLAIN) == tdes_reference(KEYS[0], PLAIN)
    assert encrypt(b, PLAIN) == tdes_reference(KEYS[3], PLAIN)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_shared_state_is_the_last_key_loaded_across_juggles(
    fw: juggle.Framework, tmp_path: Path, seed: int
) -> None:
    """per_consumer = false: one state. Two consumers interleave load_key / encrypt across
    juggles between every tier; each ciphertext uses the last key loaded before it, by
    whoever loaded it."""
    rng = random.Random(seed)
    sid = start_tdes(fw, tmp_path, per_consumer=False)
    consumers = [fw.get_service("EncryptionService", consumer=n) for n in ("mail", "music")]
    last = KEYS[0]
    consumers[0].load_key(last)
    for _ in range(120):
        op = rng.random()
        who = rng.choice(consumers)
        if op < 0.3:
            last = rng.choice(KEYS)
            who.load_key(last)
        elif op < 0.45:
            target = rng.choice(["software", "native", "hardware"])
            fw.set_tier(sid, target)
        else:
            data = rng.randbytes(8 * rng.randint(1, 4))
            assert encrypt(who, data) == tdes_reference(last, data)


def test_a_consumer_joining_a_shared_service_in_hardware_gets_its_state(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    sid = start_tdes(fw, tmp_path, per_consumer=False)
    first = fw.get_service("EncryptionService", consumer="first")
    first.load_key(KEYS[1])
    fw.juggle(to_hardware=sid)
    later = fw.get_service("EncryptionService", consumer="later")
    assert encrypt(later, PLAIN) == tdes_reference(KEYS[1], PLAIN)
    fw.unget_service(first)
    fw.juggle(to_software=[sid])
    assert encrypt(later, PLAIN) == tdes_reference(KEYS[1], PLAIN)


def test_core_context_switches_are_counted_and_saved_by_the_driver(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    """The core switches only when another consumer's call comes (not per call)."""
    sid = start_tdes(fw, tmp_path, per_consumer=True)
    fw.juggle(to_hardware=sid)
    a = fw.get_service("EncryptionService", consumer="a")
    b = fw.get_service("EncryptionService", consumer="b")
    a.load_key(KEYS[0])
    b.load_key(KEYS[1])
    core = fw._table.managed(sid).core
    assert core is not None and core.saves_context
    before = core.switches
    for _ in range(5):
        encrypt(a, PLAIN)
    assert core.switches == before + 1
    encrypt(b, PLAIN)
    assert core.switches == before + 2


def test_juggle_overhead_leaves_out_the_configuration_port_transfer(
    fw: juggle.Framework, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``overhead_us`` is the runtime's own work: a slow bitstream transfer is not in it."""
    from juggle.fabric.manager import FpgaManager

    fw.install(MODULES / "tdes").start()
    proxy = fw.get_service("EncryptionService", consumer="a")
    load = FpgaManager.load

    def slow_load(self: FpgaManager, bitstream: object, data: bytes) -> None:
        time.sleep(0.05)
        load(self, bitstream, data)  # type: ignore[arg-type]

    monkeypatch.setattr(FpgaManager, "load", slow_load)
    t0 = time.perf_counter()
    report = fw.juggle(to_hardware=proxy.service_id)
    wall_us = (time.perf_counter() - t0) * 1e6
    assert wall_us >= 50_000
    assert 0 < report.overhead_us < wall_us - 45_000


def test_a_juggle_into_hardware_carries_the_state_onto_the_core_once(
    fw: juggle.Framework, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorded ``load_key`` reaches the new core once (not once by the switch and again
    by the carry), and a freshly programmed core is not reset before it."""
    from juggle.services.crypto.driver import TdesDriver

    calls: list[str] = []
    load_key, restore = TdesDriver.load_key, TdesDriver.restore_context
    monkeypatch.setattr(
        TdesDriver, "load_key", lambda self, key: (calls.append("load_key"), load_key(self, key))
    )
    monkeypatch.setattr(
        TdesDriver, "restore_context", lambda self, d: (calls.append("restore"), restore(self, d))
    )
    sid = start_tdes(fw, tmp_path, per_consumer=False)
    proxy = fw.get_service("EncryptionService", consumer="a")
    proxy.load_key(KEYS[2])
    fw.juggle(to_hardware=sid)
    assert calls == ["load_key"]
    assert encrypt(proxy, PLAIN) == tdes_reference(KEYS[2], PLAIN)


def test_a_core_whose_first_switch_failed_is_reset_before_the_next_consumer() -> None:
    """A switch that fails part-way may have left the first consumer's key in the core: the
    next consumer's switch resets the core even though nobody owned it yet."""
    from juggle.fabric.mmio import MMIO
    from juggle.runtime.hardware import HardwareCore
    from juggle.runtime.proxy import StateRecord

    class Driver:
        def __init__(self, window: MMIO) -> None:
            self.log: list[str] = []

        def load_key(self, key: bytes) -> None:
            self.log.append(f"key {key.hex()}")
            if key == b"\x01":
                raise OSError("bus error after the key words")

        def save_context(self) -> bytes:
            return b"ctx"

        def restore_context(self, data: bytes) -> None:
            self.log.append(f"restore {data!r}")

    class Device:
        def __init__(self, key: bytes) -> None:
            self.context: bytes | None = None
            self.record = StateRecord()
            self.record.record("load_key", (key,), {})

    core = HardwareCore("prr0", Driver, object(), call_timeout_s=1.0)  # type: ignore[arg-type]
    with pytest.raises(OSError):
        core._switch_to(Device(b"\x01"))  # type: ignore[arg-type]
    core._switch_to(Device(b"\x02"))  # type: ignore[arg-type]
    assert core.driver.log == ["key 01", "restore b''", "key 02"]


@pytest.mark.parametrize("per_consumer", [False, True])
def test_the_software_implementation_left_is_taken_up_again_with_the_state_set_since(
    fw: juggle.Framework, tmp_path: Path, per_consumer: bool
) -> None:
    """Back from hardware, a service resumes the software implementation it left (no new one,
    no replay) when the state did not change, and replays onto it what changed meanwhile."""
    sid = start_tdes(fw, tmp_path, per_consumer=per_consumer)
    managed = fw._table.managed(sid)
    mail = fw.get_service("EncryptionService", consumer="mail")
    music = fw.get_service("EncryptionService", consumer="music")
    mail.load_key(KEYS[0])
    music.load_key(KEYS[1])
    last = (
        {"mail": KEYS[0], "music": KEYS[1]}
        if per_consumer
        else dict.fromkeys(("mail", "music"), KEYS[1])
    )
    before = {c: juggle_impl(p) for c, p in (("mail", mail), ("music", music))}
    fw.juggle(to_hardware=sid)
    fw.juggle(to_software=[sid])
    assert {c: juggle_impl(p) for c, p in (("mail", mail), ("music", music))} == before
    fw.juggle(to_hardware=sid)
    mail.load_key(KEYS[2])  # changed while in hardware: carried back
    last["mail"] = KEYS[2]
    if not per_consumer:
        last["music"] = KEYS[2]
    fw.juggle(to_software=[sid])
    for consumer, proxy in (("mail", mail), ("music", music)):
        assert juggle_impl(proxy) is before[consumer]
        assert encrypt(proxy, PLAIN) == tdes_reference(last[consumer], PLAIN)
    fw.juggle(to_hardware=sid)
    fw.unget_service(mail)
    assert ("native", "mail") not in managed.parked  # a consumer that left leaves nothing
    fw.juggle(to_software=[sid])
    assert encrypt(music, PLAIN) == tdes_reference(last["music"], PLAIN)


def juggle_impl(proxy: object) -> object:
    """The implementation serving ``proxy`` now."""
    from juggle.runtime.proxy import binding_of

    return binding_of(proxy).dispatcher.slot.impl  # type: ignore[arg-type]


def test_a_resumed_implementation_continues_from_the_context_the_core_reached(
    fw: juggle.Framework,
) -> None:
    """A decoder's context changes with every call, not only with state-setting calls: the
    software decoder taken up again after hardware continues where the core stopped."""
    from juggle.services.audio import decode_ima_adpcm, encode_ima_adpcm, sine_sweep

    module = fw.install(MODULES / "audio")
    module.start()
    (snap,) = [s for s in fw.services() if s.module == module.name]
    stream = encode_ima_adpcm(sine_sweep(0.05))
    chunks = [stream[i : i + 64] for i in range(0, 6 * 64, 64)]
    decoder = fw.get_service("DecoderService", consumer="player")
    out = [decoder.decode(chunks[0])]
    for chunk in chunks[1:]:
        if fw._table.managed(snap.service_id).tier == "hardware":
            fw.juggle(to_software=[snap.service_id])
        else:
            fw.juggle(to_hardware=snap.service_id)
        out.append(decoder.decode(chunk))
    assert b"".join(out) == decode_ima_adpcm(b"".join(chunks))[0]
