"""Proxies: forwarding, tracing, lossless switching, state carry-over — compiled and pure."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from juggle.errors import DrainTimeoutError, ModuleCodeError, ServiceUnavailableError
from juggle.runtime import _pydispatch, proxy, tracing
from juggle.runtime.interfaces import state_setting
from juggle.runtime.proxy import binding_of, build_proxy, make_gone, wait_drained


class Counter:
    """A toy interface: a value that can be set and read, and a slow call."""

    @state_setting
    def set_base(self, base: int) -> None: ...

    def add(self, x: int, *, scale: int = 1) -> int: ...

    def slow(self, gate: threading.Event, started: threading.Event) -> str: ...

    def fail(self) -> None: ...


class Impl:
    def __init__(self, name: str) -> None:
        self.name = name
        self.base = 0

    def set_base(self, base: int) -> None:
        if base < 0:
            raise ValueError(f"base must be >= 0, got {base}")
        self.base = base

    def add(self, x: int, *, scale: int = 1) -> int:
        return self.base + x * scale

    def slow(self, gate: threading.Event, started: threading.Event) -> str:
        started.set()
        assert gate.wait(5)
        return self.name

    def fail(self) -> None:
        raise RuntimeError(f"{self.name} fails")


class ContextImpl(Impl):
    """Keeps its own context and hands it over on a switch."""

    def juggle_save_state(self) -> int:
        return self.base * 10

    def juggle_restore_state(self, state: int) -> None:
        self.base = state // 10


@pytest.fixture(params=["compiled", "python"])
def flavour(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "compiled":
        if not tracing.COMPILED:
            pytest.fail("the compiled dispatch path did not build")
    else:
        monkeypatch.setattr(proxy, "dispatch", _pydispatch)
    yield request.param


def make(impl: object, tier: str = "software") -> Any:
    return build_proxy(Counter, "test.Counter", 7, "app", impl, tier)


def test_forwards_args_kwargs_and_results(flavour: str) -> None:
    p = make(Impl("a"))
    assert p.add(2) == 2
    assert p.add(2, scale=3) == 6
    assert p.service_id == 7 and p.consumer == "app" and p.interface == "test.Counter"
    bound = p.add
    assert bound(5) == 5
    assert "tier=software" in repr(p)


def test_counts_calls_errors_and_durations(flavour: str) -> None:
    p = make(Impl("a"))
    for i in range(100):
        p.add(i)
    with pytest.raises(ModuleCodeError, match="fail.*RuntimeError: a fails") as e:
        p.fail()  # an implementation's own failure: one error type, the original chained
    assert isinstance(e.value.__cause__, RuntimeError)
    traces = binding_of(p).traces()["software"]
    ratio = tracing.ns_per_tick()
    add = traces["add"].snapshot(ratio)
    assert add.calls == 100 and add.timed == 100 and add.errors == 0
    assert 0 < add.p50_us <= add.p99_us <= add.max_us * 1.13 + 1e-3
    assert traces["fail"].snapshot(ratio).errors == 1


def test_switch_is_atomic_and_running_calls_finish_on_old(flavour: str) -> None:
    old, new = Impl("old"), Impl("new")
    p = make(old)
    gate, started = threading.Event(), threading.Event()
    result: list[str] = []
    t = threading.Thread(target=lambda: result.append(p.slow(gate, started)))
    t.start()
    assert started.wait(5)
    slot = binding_of(p).switch(new, "hardware")
    assert slot.inflight == 1  # the running call still holds the old slot
    other = threading.Event()
    other.set()
    assert p.slow(other, threading.Event()) == "new"  # new calls go to the new impl
    with pytest.raises(DrainTimeoutError):
        wait_drained(slot, 0.05, 7)
    gate.set()
    t.join(5)
    wait_drained(slot, 5, 7)
    assert result == ["old"]
    binding_of(p).retire(slot)
    traces = binding_of(p).traces()
    assert traces["software"]["slow"].calls == 1 and traces["hardware"]["slow"].calls == 1


def test_state_setting_calls_replayed_on_switch(flavour: str) -> None:
    p = make(Impl("a"))
    p.set_base(40)
    with pytest.raises(ModuleCodeError, match="ValueError"):
        p.set_base(-1)  # failed calls are not recorded
    new = Impl("b")
    binding_of(p).switch(new, "native")
    assert new.base == 40
    assert p.add(2) == 42


def test_own_context_transferred_instead_of_replay(flavour: str) -> None:
    old = ContextImpl("a")
    p = make(old)
    p.set_base(3)
    old.base = 9  # internal progress the proxy never saw
    new = ContextImpl("b")
    binding_of(p).switch(new, "hardware")
    assert new.base == 9


def test_failed_state_carry_leaves_proxy_on_old(flavour: str) -> None:
    p = make(Impl("a"))
    p.set_base(5)

    class Broken(Impl):
        def set_base(self, base: int) -> None:
            raise OSError("device gone")

    with pytest.raises(OSError):
        binding_of(p).switch(Broken("b"), "hardware")
    assert binding_of(p).tier == "software"
    assert p.add(1) == 6


def test_gone_proxy_raises_specific_error(flavour: str) -> None:
    p = make(Impl("a"))
    binding = binding_of(p)
    binding.switch(make_gone(binding, 7), "gone", carry=False)
    with pytest.raises(ServiceUnavailableError, match="service 7"):
        p.add(1)


def test_concurrent_calls_and_switches_lose_nothing(flavour: str) -> None:
    impls = [Impl("a"), Impl("b")]
    p = make(impls[0])
    p.set_base(1)
    errors: list[BaseException] = []
    stop = threading.Event()

    def worker() -> None:
        try:
            while not stop.is_set():
                assert p.add(1) == 2
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(200):
        old = binding_of(p).switch(impls[(i + 1) % 2], "software" if i % 2 else "hardware")
        wait_drained(old, 5, 7)
        binding_of(p).retire(old)
    stop.set()
    for t in threads:
        t.join(5)
    assert not errors
    calls = sum(acc.calls for per in binding_of(p).traces().values() for acc in per.values())
    assert calls > 0 and binding_of(p).inflight() == 0
