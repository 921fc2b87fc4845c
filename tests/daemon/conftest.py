"""Fixtures of the daemon tests: real daemon processes on temporary sockets (see
daemon_support.py)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_support import MODULES, DaemonProcess, make_base


@pytest.fixture
def spawn() -> Iterator[Any]:
    """Start daemons (``spawn(policy=None, extra=(more daemon arguments,))``); every one is
    killed and removed afterwards."""
    started: list[DaemonProcess] = []
    bases: list[Path] = []

    def start(
        policy: str | None = None, base: Path | None = None, extra: tuple[str, ...] = ()
    ) -> DaemonProcess:
        if base is None:
            base = make_base()
            bases.append(base)
        daemon = DaemonProcess(base, policy, extra=extra)
        started.append(daemon)
        return daemon.start()

    yield start
    for daemon in started:
        daemon.kill()
    for base in bases:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def shared_daemon() -> Iterator[DaemonProcess]:
    """One daemon without a policy (the test's uid is admin) with the tdes module installed."""
    base = make_base()
    daemon = DaemonProcess(base).start()
    with daemon.client() as admin:
        admin.install(MODULES / "tdes")
    yield daemon
    daemon.kill()
    shutil.rmtree(base, ignore_errors=True)
