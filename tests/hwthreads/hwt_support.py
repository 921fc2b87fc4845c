"""Shared helpers of the hardware-thread tests: bounded waits only, never bare sleeps."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

TIMEOUT = 5.0  # bound on every wait in these tests


def wait_until(predicate: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    """Poll ``predicate`` until true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not reached within {timeout} s")
        time.sleep(0.0005)


class Worker:
    """A daemon thread running ``fn``; ``result()`` joins (bounded) and re-raises."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self._value = fn()
        except BaseException as exc:
            self._error = exc

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self, timeout: float = TIMEOUT) -> Any:
        self._thread.join(timeout)
        if self._thread.is_alive():
            pytest.fail(f"worker still running after {timeout} s")
        if self._error is not None:
            raise self._error
        return self._value
