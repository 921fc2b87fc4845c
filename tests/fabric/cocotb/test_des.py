"""cocotb testbench of the DES core (``des_top``) against its model ``DesCore``.

Run by ``tests/fabric/test_rtl_cocotb.py`` inside the simulator; every test runs on the bus of
each board profile and on one-cycle transactions (bodies in ``cipher_tb``).
"""

from __future__ import annotations

from typing import Any

import cipher_tb
import cocotb
from jg_tb import DRIVER_TIMINGS, TIMING_PARAMS

from juggle.services.crypto.model import DesCore

CORE = DesCore


@cocotb.test
@cocotb.parametrize(timing=TIMING_PARAMS)
async def known_answers(dut: Any, timing: str) -> None:
    """FIPS 81 / SP 800-17 vectors both ways: results and cycles to DONE agree."""
    await cipher_tb.known_answers(dut, CORE, timing)


@cocotb.test
@cocotb.parametrize(timing=TIMING_PARAMS)
async def random_blocks(dut: Any, timing: str) -> None:
    """Random keys and blocks against pycryptodome: results and cycles to DONE agree."""
    await cipher_tb.random_blocks(dut, CORE, timing, 12)


@cocotb.test
@cocotb.parametrize(timing=TIMING_PARAMS)
async def busy_core(dut: Any, timing: str) -> None:
    """Data and key writes and START while a block runs."""
    await cipher_tb.busy_core(dut, CORE, timing)


@cocotb.test
@cocotb.parametrize(timing=TIMING_PARAMS)
async def register_accesses(dut: Any, timing: str) -> None:
    """Random register traffic, every read compared; unmapped offsets."""
    await cipher_tb.register_accesses(dut, CORE, timing, 1000)


@cocotb.test
@cocotb.parametrize(timing=DRIVER_TIMINGS)
async def drivers(dut: Any, timing: str) -> None:
    """DesDriver over model and RTL at once."""
    await cipher_tb.drivers(dut, CORE, timing)
