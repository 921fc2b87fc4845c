"""Test bodies shared by the DES and Triple-DES testbenches (``test_des``, ``test_tdes``): one
register map, one key or three, 16 or 48 cycles per block.

Known answers: FIPS 81's example, the classic worked example and SP 800-17 variable-plaintext
vectors for DES; SP 800-67's example with three distinct keys for TDES, and the DES vectors on
the TDES core with K1 = K2 = K3 (EDE then is single DES). Random keys and blocks are checked
against pycryptodome, an implementation independent of both the RTL and the model.
"""

from __future__ import annotations

from typing import Any

from Crypto.Cipher import DES as PyDES
from Crypto.Cipher import DES3 as PyDES3
from jg_tb import (
    TIMINGS,
    Bench,
    PairMMIO,
    on_driver,
    random_accesses,
    rng,
    unmapped_accesses,
    words,
)

from juggle.services.crypto import registers as r
from juggle.services.crypto.driver import DesDriver, TdesDriver
from juggle.services.crypto.model import DesCore, TdesCore

#: (key, plaintext, ciphertext), hex
DES_VECTORS = (
    ("0123456789abcdef", "4e6f772069732074", "3fa40e8a984d4815"),  # FIPS 81: "Now is t"
    ("133457799bbcdff1", "0123456789abcdef", "85e813540f0ab405"),  # the worked example
    ("0101010101010101", "8000000000000000", "95f8a5e5dd31d900"),  # SP 800-17 VPT
    ("0101010101010101", "4000000000000000", "dd7f121ca5015619"),
    ("0101010101010101", "0000000000000001", "166b40b44aba4bd6"),
)
#: SP 800-67 (rev. 1) example: keys K1 K2 K3, three blocks of "The qufck brown fox jump"
TDES_VECTORS = (
    (
        "0123456789abcdef23456789abcdef01456789abcdef0123",
        b"The qufck brown fox jump".hex(),
        "a826fd8ce53b855fcce21c8112256fe668d5c05dd9b6b900",
    ),
)

Core = type[DesCore] | type[TdesCore]


def reference(key: bytes, block: bytes, decrypt: bool) -> bytes:
    """pycryptodome's DES or EDE of one block (a key of one DES key thrice is DES)."""
    if len(key) == 8 or key[:8] == key[8:16] == key[16:24]:
        cipher: Any = PyDES.new(key[:8], PyDES.MODE_ECB)
    else:
        cipher = PyDES3.new(key, PyDES3.MODE_ECB)
    out: bytes = cipher.decrypt(block) if decrypt else cipher.encrypt(block)
    return out


async def bench(dut: Any, core: Core, timing: str) -> Bench:
    """A started bench of ``core`` on bus ``timing``."""
    b = Bench(dut, core(), TIMINGS[timing])
    await b.start()
    assert await b.read(r.ID, "ID") == core.core_id
    assert await b.read(r.LATENCY, "LATENCY") == core.latency
    return b


async def load_key(b: Bench, key: bytes) -> None:
    """Write the key registers (8 bytes per key register) on both sides."""
    for index, word in enumerate(words(key)):
        await b.write((r.KEY_HI if index % 2 == 0 else r.KEY_LO)[index // 2], word)


async def block(b: Bench, core: Core, data: bytes, decrypt: bool) -> bytes:
    """One block as the driver runs it, compared on both sides; returns the result block."""
    hi, lo = words(data)
    await b.write(r.DATA_HI, hi)
    await b.write(r.DATA_LO, lo)
    control = r.CTRL_START | (r.CTRL_DECRYPT if decrypt else 0)
    await b.operation(r.CONTROL, control, core.latency)
    out_hi = await b.read(r.RESULT_HI, "RESULT_HI")
    out_lo = await b.read(r.RESULT_LO, "RESULT_LO")
    return out_hi.to_bytes(4, "big") + out_lo.to_bytes(4, "big")


async def known_answers(dut: Any, core: Core, timing: str) -> None:
    """The standard vectors, encrypted and decrypted."""
    b = await bench(dut, core, timing)
    vectors = list(DES_VECTORS)
    if core is TdesCore:
        vectors = [(k * 3, p, c) for k, p, c in vectors] + list(TDES_VECTORS)
    for key, plain, cipher in vectors:
        await load_key(b, bytes.fromhex(key))
        for i in range(0, len(plain), 16):
            p, c = bytes.fromhex(plain[i : i + 16]), bytes.fromhex(cipher[i : i + 16])
            got = await block(b, core, p, decrypt=False)
            assert got == c, f"{b.where()}: E({key}, {p.hex()}) = {got.hex()}, not {c.hex()}"
            got = await block(b, core, c, decrypt=True)
            assert got == p, f"{b.where()}: D({key}, {c.hex()}) = {got.hex()}, not {p.hex()}"


async def random_blocks(dut: Any, core: Core, timing: str, count: int) -> None:
    """Random keys and blocks both ways, against pycryptodome; CONTROL and DATA read back."""
    b = await bench(dut, core, timing)
    rnd = rng(core.design, timing)
    for n in range(count):
        key = rnd.randbytes(8 * core.key_count)
        if core is TdesCore and n % 3 == 0:
            key = key[:16] + key[:8]  # keying option 2: K3 = K1
        await load_key(b, key)
        data, decrypt = rnd.randbytes(8), rnd.random() < 0.5
        got = await block(b, core, data, decrypt)
        assert got == reference(key, data, decrypt), f"{b.where()}: key {key.hex()}"
        for offset in (r.CONTROL, r.DATA_HI, r.DATA_LO, *r.KEY_HI, *r.KEY_LO):
            await b.read(offset)


async def busy_core(dut: Any, core: Core, timing: str) -> None:
    """While a block runs, new data and key words and a second START leave it alone; the
    second START begins a block only if the first had finished."""
    b = await bench(dut, core, timing)
    rnd = rng(core.design, "busy", timing)
    for _ in range(6):
        key, data = rnd.randbytes(8 * core.key_count), rnd.randbytes(8)
        await load_key(b, key)
        hi, lo = words(data)
        await b.write(r.DATA_HI, hi)
        await b.write(r.DATA_LO, lo)
        await b.write(r.CONTROL, r.CTRL_START)
        first = b.cycle
        data2, key_hi = rnd.randbytes(8), rnd.getrandbits(32)
        await b.write(r.DATA_HI, words(data2)[0])
        await b.write(r.KEY_HI[0], key_hi)
        await b.write(r.CONTROL, r.CTRL_START | r.CTRL_DECRYPT)
        second = b.cycle
        await b.read(r.STATUS)
        await b.idle(core.latency)
        assert await b.read(r.STATUS) == 2
        if second - first >= core.latency:
            key2 = key_hi.to_bytes(4, "big") + key[4:]
            want = reference(key2, data2[:4] + data[4:], decrypt=True)
        else:
            want = reference(key, data, decrypt=False)
        got = (await b.read(r.RESULT_HI)).to_bytes(4, "big")
        got += (await b.read(r.RESULT_LO)).to_bytes(4, "big")
        assert got == want, f"{b.where()}: START while busy"


async def register_accesses(dut: Any, core: Core, timing: str, steps: int) -> None:
    """Random register traffic (reads compared), then the bus's unmapped offsets."""
    b = await bench(dut, core, timing)
    rnd = rng(core.design, "registers", timing)
    statuses = await random_accesses(b, r.CONTROL, steps, rnd)
    assert 2 in statuses, "DONE was never read"
    if core.latency > b.timing.read_cycles:
        assert 1 in statuses, "BUSY was never read"
    await unmapped_accesses(b, rnd)


async def drivers(dut: Any, core: Core, timing: str) -> None:
    """juggle's real driver, unchanged, over both sides at once: multi-block buffers."""
    b = await bench(dut, core, timing)
    mmio = PairMMIO(b, r.WINDOW_SIZE)
    driver = DesDriver(mmio) if core is DesCore else TdesDriver(mmio)
    rnd = rng(core.design, "driver", timing)
    for _ in range(2):
        key = rnd.randbytes(8 * core.key_count)
        plain = rnd.randbytes(24)
        buf = bytearray(plain)

        def run(key: bytes = key, buf: bytearray = buf) -> None:
            driver.load_key(key)
            driver.encrypt(buf, len(buf))

        await on_driver(run)
        want = b"".join(reference(key, plain[i : i + 8], False) for i in range(0, 24, 8))
        assert bytes(buf) == want, f"{b.where()}: driver encrypt"

        def back(buf: bytearray = buf) -> None:
            driver.decrypt(buf, len(buf))

        await on_driver(back)
        assert bytes(buf) == plain, f"{b.where()}: driver decrypt"
