"""The juggle-overhead benchmark runs pinned to one CPU and gives the others back after."""

from __future__ import annotations

import os

import pytest

from juggle.bench.sharing import one_cpu


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_one_cpu_pins_the_body_and_restores_the_set() -> None:
    before = os.sched_getaffinity(0)
    with one_cpu():
        assert os.sched_getaffinity(0) == {min(before)}
    assert os.sched_getaffinity(0) == before


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_one_cpu_restores_the_set_when_the_body_raises() -> None:
    before = os.sched_getaffinity(0)
    with pytest.raises(ZeroDivisionError), one_cpu():
        _ = 1 // 0
    assert os.sched_getaffinity(0) == before
