"""Service proxies: the interception point between a consumer and an implementation.

A consumer holds a proxy built for the service's interface (Juggle 3.1). Each method of the
proxy is a compiled ``TracedMethod`` that forwards to the proxy's current *slot* (one
implementation at one tier) and traces the call. Switching tiers replaces the slot in one step:
new calls go to the new implementation, calls already running finish on the old one, and the old
slot is retired once its in-flight count is zero. State set through state-setting methods
(``load_key``) is recorded and replayed onto the new implementation before it becomes visible;
an implementation that can save and restore its own context (``juggle_save_state`` /
``juggle_restore_state``) has it carried over instead, with calls serialised so the context
never moves while a call is using it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from juggle.errors import DrainTimeoutError, ServiceUnavailableError
from juggle.runtime.interfaces import MethodSpec, interface_methods, short_name
from juggle.runtime.tracing import Accumulator, dispatch

TIERS: tuple[str, ...] = ("software", "native", "hardware")


def has_context(impl: object) -> bool:
    """True when ``impl`` saves and restores its own state across a switch."""
    return callable(getattr(impl, "juggle_save_state", None)) and callable(
        getattr(impl, "juggle_restore_state", None)
    )


def _frozen(value: Any) -> Any:
    """A copy of a recorded argument that later mutation by the caller cannot change."""
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return value


class ServiceProxy:
    """What a consumer holds. Its methods are those of the service interface.

    ``service_id`` names the service in the framework; ``consumer`` the application holding it.
    """

    __slots__ = ("__weakref__", "_binding", "consumer", "interface", "service_id")

    service_id: int
    interface: str
    consumer: str
    _binding: ProxyBinding

    def __repr__(self) -> str:
        slot = self._binding.dispatcher.slot
        return (
            f"<{type(self).__name__} service {self.service_id} for {self.consumer!r}: "
            f"tier={slot.tier} inflight={slot.inflight}>"
        )


class _Gone:
    """Stands in for an implementation whose service has been unregistered."""

    def __init__(self, names: tuple[str, ...], service_id: int, interface: str) -> None:
        self._names = names
        self._service_id = service_id
        self._interface = interface

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_") or name not in self._names:
            raise AttributeError(name)

        def gone(*args: Any, **kwargs: Any) -> Any:
            raise ServiceUnavailableError(
                f"service {self._service_id} ({self._interface}) has been unregistered",
                subject=self._service_id,
            )

        return gone


class ProxyBinding:
    """Live state behind one proxy: dispatcher, recorded state, retired statistics."""

    def __init__(
        self,
        interface: str,
        methods: tuple[MethodSpec, ...],
        impl: object,
        tier: str,
        *,
        sample_period: int = 8,
    ) -> None:
        self.interface = interface
        self.methods = methods
        self.names = tuple(m.name for m in methods)
        self.sample_period = sample_period
        self.lock = threading.RLock()
        self.state: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        self.retired: dict[str, dict[str, Accumulator]] = {}
        self.draining: list[Any] = []
        self.dispatcher = dispatch.Dispatcher(self._slot(impl, tier))

    def _slot(self, impl: object, tier: str) -> Any:
        return dispatch.Slot(impl, self.names, tier, self.sample_period)

    @property
    def tier(self) -> str:
        """Tier new calls go to."""
        return str(self.dispatcher.slot.tier)

    @property
    def impl(self) -> object:
        """Implementation new calls go to."""
        return self.dispatcher.slot.impl

    def record(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Remember the last successful call of state-setting method ``name``."""
        self.state[name] = (
            tuple(_frozen(a) for a in args),
            {k: _frozen(v) for k, v in kwargs.items()},
        )

    def carry_state(self, old: object, new: object) -> None:
        """Put the service state of ``old`` onto ``new`` (context transfer or replay)."""
        if has_context(old) and has_context(new):
            new.juggle_restore_state(old.juggle_save_state())  # type: ignore[attr-defined]
            return
        for name, (args, kwargs) in self.state.items():
            getattr(new, name)(*args, **kwargs)

    def switch(self, impl: object, tier: str, *, carry: bool = True) -> Any:
        """Make ``impl`` serve new calls; returns the old slot (still draining).

        The state is carried first (unless ``carry`` is false), while ``impl`` is not yet
        visible; if that raises, nothing has switched.
        """
        with self.lock:
            new_slot = self._slot(impl, tier)
            if carry:
                self.carry_state(self.dispatcher.slot.impl, impl)
            old = self.dispatcher.switch(new_slot)
            self.draining.append(old)
            return old

    def retire(self, slot: Any) -> None:
        """Fold a drained slot's statistics into the per-tier totals."""
        with self.lock:
            per_method = self.retired.setdefault(str(slot.tier), {})
            for row in slot.stats():
                per_method.setdefault(row[0], Accumulator()).add_row(row)
            if slot in self.draining:
                self.draining.remove(slot)

    def traces(self) -> dict[str, dict[str, Accumulator]]:
        """tier → method → accumulated statistics, live slots included."""
        with self.lock:
            out: dict[str, dict[str, Accumulator]] = {}
            for tier, per_method in self.retired.items():
                target = out.setdefault(tier, {})
                for name, acc in per_method.items():
                    target.setdefault(name, Accumulator()).add(acc)
            for slot in [*self.draining, self.dispatcher.slot]:
                target = out.setdefault(str(slot.tier), {})
                for row in slot.stats():
                    target.setdefault(row[0], Accumulator()).add_row(row)
            return out

    def inflight(self) -> int:
        """Calls running now, on any slot of this proxy."""
        return sum(s.inflight for s in [*self.draining, self.dispatcher.slot])


def wait_drained(slot: Any, timeout_s: float, subject: object) -> None:
    """Block until no call runs on ``slot``; :class:`DrainTimeoutError` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    delay = 1e-5
    while slot.inflight:
        if time.monotonic() > deadline:
            raise DrainTimeoutError(
                f"{slot.inflight} call(s) still running on the {slot.tier} implementation "
                f"after {timeout_s} s",
                subject=subject,
            )
        time.sleep(delay)
        delay = min(delay * 2, 1e-3)


def _locked(traced: Any, binding: ProxyBinding, spec: MethodSpec) -> Callable[..., Any]:
    """A method that holds the binding's lock (so a switch never splits it from the state it
    records) and records the call when ``spec`` is state-setting."""

    def method(self: ServiceProxy, *args: Any, **kwargs: Any) -> Any:
        with binding.lock:
            result = traced(self, *args, **kwargs)
            if spec.state_setting:
                binding.record(spec.name, args, kwargs)
        return result

    method.__name__ = spec.name
    return method


def build_proxy(
    interface: type,
    interface_name: str,
    service_id: int,
    consumer: str,
    impl: object,
    tier: str,
    *,
    sample_period: int = 8,
) -> ServiceProxy:
    """A proxy for ``interface`` serving ``consumer`` from ``impl`` at ``tier``."""
    methods = interface_methods(interface)
    binding = ProxyBinding(interface_name, methods, impl, tier, sample_period=sample_period)
    serialise = has_context(impl)
    attrs: dict[str, Any] = {"__slots__": (), "__doc__": interface.__doc__}
    for index, spec in enumerate(methods):
        traced = dispatch.TracedMethod(binding.dispatcher, index)
        if serialise or spec.state_setting:
            attrs[spec.name] = _locked(traced, binding, spec)
        else:
            attrs[spec.name] = traced
    cls = type(f"{short_name(interface_name)}Proxy", (ServiceProxy,), attrs)
    proxy: ServiceProxy = cls()
    proxy.service_id = service_id
    proxy.interface = interface_name
    proxy.consumer = consumer
    proxy._binding = binding
    return proxy


def binding_of(proxy: ServiceProxy) -> ProxyBinding:
    """The live binding of ``proxy`` (framework use)."""
    return proxy._binding


def make_gone(binding: ProxyBinding, service_id: int) -> object:
    """An implementation whose every method raises ServiceUnavailableError."""
    return _Gone(binding.names, service_id, binding.interface)
