"""math.AddService / math.MulService: Java int semantics at both tiers, cores and drivers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from juggle.errors import OperandRangeError, ServiceArgumentError
from juggle.runtime.interfaces import interface_methods
from juggle.services import arith
from juggle.services.arith import (
    AdderCore,
    AdderDriver,
    AddService,
    MulService,
    MultiplierCore,
    MultiplierDriver,
    SoftwareAdd,
    SoftwareMul,
    to_int32,
)

WindowFactory = Callable[..., Any]  # the `window` fixture (conftest.py)

ints = st.integers(min_value=-(2**31), max_value=2**31 - 1)


def java_int(value: int) -> int:
    """Reference: the low 32 bits as two's complement, computed another way."""
    return int.from_bytes((value % 2**32).to_bytes(4, "big"), "big", signed=True)


def test_interfaces() -> None:
    assert [m.name for m in interface_methods(AddService)] == ["add"]
    assert [m.name for m in interface_methods(MulService)] == ["mul"]


@pytest.mark.parametrize(
    ("a", "b", "total", "product"),
    [
        (2, 3, 5, 6),
        (2**31 - 1, 1, -(2**31), 2**31 - 1),
        (-(2**31), -1, 2**31 - 1, -(2**31)),  # Integer.MIN_VALUE * -1 == MIN_VALUE in Java
        (65536, 65536, 131072, 0),
        (123456789, 987654321, 1111111110, -67153019),
        (-7, 3, -4, -21),
    ],
)
def test_java_int_semantics(
    a: int, b: int, total: int, product: int, window: WindowFactory
) -> None:
    adders = [SoftwareAdd(), AdderDriver(window(AdderCore()))]
    muls = [SoftwareMul(), MultiplierDriver(window(MultiplierCore()))]
    assert [s.add(a, b) for s in adders] == [total, total]
    assert [s.mul(a, b) for s in muls] == [product, product]


# `window` only hands out the adapter class, so sharing it across examples is safe
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(a=ints, b=ints)
def test_tiers_agree(a: int, b: int, window: WindowFactory) -> None:
    assert SoftwareAdd().add(a, b) == AdderDriver(window(AdderCore())).add(a, b)
    assert SoftwareAdd().add(a, b) == java_int(a + b)
    assert SoftwareMul().mul(a, b) == MultiplierDriver(window(MultiplierCore())).mul(a, b)
    assert SoftwareMul().mul(a, b) == java_int(a * b)


@pytest.mark.parametrize("bad", [2**31, -(2**31) - 1, 2**40])
def test_operand_out_of_range(bad: int, window: WindowFactory) -> None:
    for service in (SoftwareAdd(), AdderDriver(window(AdderCore()))):
        with pytest.raises(OperandRangeError, match=f'"b" must be a 32-bit int.*got {bad}'):
            service.add(1, bad)
    win = window(MultiplierCore())
    with pytest.raises(OperandRangeError, match='"a"'):
        MultiplierDriver(win).mul(bad, 1)
    assert win.writes == 0  # rejected before touching the core


@pytest.mark.parametrize("bad", [1.5, "3", True, None])
def test_operand_not_an_int(bad: object) -> None:
    with pytest.raises(OperandRangeError, match="must be an int") as info:
        SoftwareMul().mul(bad, 2)  # type: ignore[arg-type]
    assert isinstance(info.value, ServiceArgumentError)


def test_to_int32() -> None:
    assert to_int32(2**32 + 5) == 5
    assert to_int32(0xFFFFFFFF) == -1
    assert to_int32(-1) == -1


@pytest.mark.parametrize(
    ("core", "latency", "resources"),
    [
        (AdderCore, 1, {"slices": 138, "flipflops": 161, "mult18": 0, "ram16": 0}),
        (MultiplierCore, 4, {"slices": 304, "flipflops": 260, "mult18": 1, "ram16": 0}),
    ],
)
def test_core_timing_and_resources(
    core: type[AdderCore], latency: int, resources: dict[str, int]
) -> None:
    model = core()
    assert model.resources == resources
    assert model.read(arith.LATENCY, 0) == latency
    model.write(arith.OPERAND_A, 0xFFFFFFFF, 10)  # -1
    model.write(arith.OPERAND_B, 7, 10)
    model.write(arith.CONTROL, arith.CTRL_START, 10)
    if latency > 1:
        assert model.read(arith.STATUS, 10 + latency - 1) == arith.STATUS_BUSY
        assert model.read(arith.RESULT, 10 + latency - 1) == 0
    assert model.read(arith.STATUS, 10 + latency) == arith.STATUS_DONE
    expected = 6 if core is AdderCore else -7
    assert to_int32(model.read(arith.RESULT, 10 + latency)) == expected
    assert model.read(arith.OPERAND_A, 20) == 0xFFFFFFFF


def test_catalog_paths_and_designs() -> None:
    assert (AdderCore.design, MultiplierCore.design) == ("adder", "multiplier")
    assert AdderCore().read(arith.ID, 0) != MultiplierCore().read(arith.ID, 0)
