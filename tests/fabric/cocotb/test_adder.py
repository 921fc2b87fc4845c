"""cocotb testbench of the adder core (``adder_top``) against its model ``AdderCore``.

Run by ``tests/fabric/test_rtl_cocotb.py`` inside the simulator; every test runs on the bus of
each board profile and on one-cycle transactions (bodies in ``arith_tb``).
"""

from __future__ import annotations

from typing import Any

import arith_tb
import cocotb
from jg_tb import DRIVER_TIMINGS, TIMING_PARAMS

from juggle.services.arith import AdderCore

_ALL = TIMING_PARAMS


@cocotb.test
@cocotb.parametrize(timing=_ALL)
async def known_answers(dut: Any, timing: str) -> None:
    """Edge operands: results and cycles to DONE agree, sums are right."""
    await arith_tb.known_answers(dut, AdderCore, timing)


@cocotb.test
@cocotb.parametrize(timing=_ALL)
async def random_operations(dut: Any, timing: str) -> None:
    """Random operands: results and cycles to DONE agree."""
    await arith_tb.random_operations(dut, AdderCore, timing)


@cocotb.test
@cocotb.parametrize(timing=_ALL)
async def busy_core(dut: Any, timing: str) -> None:
    """Operand writes and START right after START."""
    await arith_tb.busy_core(dut, AdderCore, timing)


@cocotb.test
@cocotb.parametrize(timing=_ALL)
async def register_accesses(dut: Any, timing: str) -> None:
    """Random register traffic, every read compared; unmapped offsets."""
    await arith_tb.register_accesses(dut, AdderCore, timing)


@cocotb.test
@cocotb.parametrize(timing=DRIVER_TIMINGS)
async def drivers(dut: Any, timing: str) -> None:
    """AdderDriver.add over model and RTL at once."""
    await arith_tb.drivers(dut, AdderCore, timing)
