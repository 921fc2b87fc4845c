"""Shared pieces of the RTL suites: one Verilator engine per test run, model/RTL window pairs.

The simulators are built once (in the user's build cache, ``$XDG_CACHE_HOME/juggle/rtl``), so
only a fresh machine pays for the builds. Without Verilator the RTL tests skip, naming what is
missing.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from juggle.errors import BackendError
from juggle.fabric import BoardProfile, ModelCatalog, ModelClock, load_profile
from juggle.fabric.mmio import MMIO
from juggle.fabric.rtl import BUILTIN_RTL, RtlBackend, RtlCatalog, RtlWindow, VerilatorEngine
from juggle.fabric.sim import SimBackend, SimWindow

DESIGNS = tuple(BUILTIN_RTL)


@functools.cache
def _engine() -> VerilatorEngine | str:
    try:
        return VerilatorEngine(progress=None)
    except BackendError as exc:
        return f"Verilator is not usable here ({exc})"


def engine() -> VerilatorEngine:
    """The shared engine; skips the test when Verilator cannot run."""
    found = _engine()
    if isinstance(found, str):
        pytest.skip(found)
    return found


@functools.cache
def _built() -> dict[str, Path]:
    eng = engine()
    catalog = RtlCatalog.builtin()
    with ThreadPoolExecutor(max_workers=2) as pool:  # two cores: two builds at a time
        paths = pool.map(lambda d: eng.build(catalog.get(d)), DESIGNS)
        return dict(zip(DESIGNS, paths, strict=True))


def built() -> dict[str, Path]:
    """Every reference design's simulator, built (or found in the cache) once per run."""
    return _built()


class Pair:
    """``design`` twice on board ``profile``: its Python model (``sim``) and its RTL (``rtl``).

    Each has its own backend and modeled clock, and an open bridge.
    """

    def __init__(self, design: str, profile: str | BoardProfile = "xupv2p") -> None:
        built()
        self.profile = profile if isinstance(profile, BoardProfile) else load_profile(profile)
        self.region = self.profile.regions[0]
        self.hz = self.profile.board.fabric_hz
        self.sim_clock, self.rtl_clock = ModelClock(), ModelClock()
        self.sim_backend = SimBackend(self.profile, self.sim_clock, ModelCatalog.builtin())
        self.rtl_backend = RtlBackend(
            self.profile, self.rtl_clock, ModelCatalog.builtin(), engine=engine()
        )
        for backend in (self.sim_backend, self.rtl_backend):
            backend.bridge_ops(self.region).enable_set(True)
        sim = self.sim_backend.attach(self.region, design)
        rtl = self.rtl_backend.attach(self.region, design)
        assert isinstance(sim, SimWindow) and isinstance(rtl, RtlWindow)
        self.sim: MMIO = sim
        self.rtl: RtlWindow = rtl

    def cycles(self) -> tuple[int, int]:
        """Modeled time so far on each side, in fabric cycles: (model, RTL)."""
        return self.sim_clock.now_cycles(self.hz), self.rtl_clock.now_cycles(self.hz)

    def close(self) -> None:
        self.sim_backend.close()
        self.rtl_backend.close()

    def __enter__(self) -> Pair:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
