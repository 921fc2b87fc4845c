"""Service proxies: the interception point between a consumer and an implementation.

A consumer holds a proxy built for the service's interface (Juggle 3.1). Each method of the
proxy is a compiled ``TracedMethod`` that checks the caller's arguments against the interface
method's signature, then forwards to the proxy's current *slot* (one implementation at one tier)
and traces the call. A call that does not fit the signature (an unknown keyword, a missing or
surplus argument) raises :class:`~juggle.errors.ServiceArgumentError` naming the method, the
argument and its value; it never reaches an implementation (so never a driver: it is no
hardware fault) and is not counted. On a call without keywords the check is one subtraction and
one comparison in the compiled path (calls with keywords have their names looked up).

Switching tiers replaces the slot in one step: new calls go to the new implementation, calls
already running finish on the old one, and the old slot is retired once its in-flight count is
zero (the slot signals that moment; nobody polls).

The state a service keeps between calls lives in a :class:`StateRecord`: the last call of each
state-setting method (``load_key``). A per-consumer service gives every proxy its own record; a
shared service gives all its proxies one record, so its state is the last state-setting call,
whoever made it. The record's lock serialises state-setting calls with switches, so a switch
never splits a call from the state it records. When a proxy switches, the state is carried to
the new implementation before it becomes visible: by the implementations' own portable context
(``juggle_save_state`` / ``juggle_restore_state``) where both have it, else by replaying the
record.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from juggle.errors import DrainTimeoutError, JuggleError, ModuleCodeError, ServiceUnavailableError
from juggle.runtime import _pydispatch
from juggle.runtime.interfaces import Arguments, MethodSpec, interface_methods, short_name
from juggle.runtime.tracing import Accumulator, dispatch


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


def _implementation_failed(exc: BaseException, impl: object, method: str) -> None:
    """Raise :class:`~juggle.errors.ModuleCodeError` for an implementation's own failure (not
    a :class:`~juggle.errors.JuggleError`): names the module, the class and the method, and
    chains the original exception (installed as the dispatcher's error hook)."""
    cls = type(impl)
    where = cls.__module__
    module = where.split(".", 1)[0]
    if module.startswith("_juggle_module_"):  # a module's namespace: _juggle_module_<n>_<name>
        module = module.split("_", 4)[-1]
    raise ModuleCodeError(
        f"module {module!r}: {cls.__qualname__}.{method}() raised {type(exc).__name__}: {exc}",
        module=module,
    ) from exc


dispatch.set_error_hook(JuggleError, _implementation_failed)
_pydispatch.set_error_hook(JuggleError, _implementation_failed)  # the fallback path too


class StateRecord:
    """The last call of each state-setting method of one service state (one consumer's, or
    the one state of a shared service), with the lock that orders those calls and switches.

    ``version`` grows with every recorded call, so a copy kept elsewhere (a fallback
    implementation) knows when it must be brought up to date.
    """

    __slots__ = ("calls", "lock", "version")

    def __init__(self) -> None:
        self.calls: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        self.lock = threading.RLock()
        self.version = 0

    def record(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Remember the call ``name(*args, **kwargs)`` (it replaces the previous one)."""
        self.calls[name] = (
            tuple(_frozen(a) for a in args),
            {k: _frozen(v) for k, v in kwargs.items()},
        )
        self.version += 1

    def replay(self, impl: object) -> None:
        """Make the recorded calls on ``impl``, oldest method first. Raises what they raise."""
        for name, (args, kwargs) in tuple(self.calls.items()):
            getattr(impl, name)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<StateRecord {sorted(self.calls)} v{self.version}>"


def carry_state(old: object, new: object, record: StateRecord) -> None:
    """Put the state of ``old`` onto ``new``: portable context where both implementations
    have it, else a replay of ``record``. Raises what the implementations raise."""
    if has_context(old) and has_context(new):
        new.juggle_restore_state(old.juggle_save_state())  # type: ignore[attr-defined]
        return
    replay_onto(new, record)


def replay_onto(new: object, record: StateRecord) -> None:
    """Bring ``new`` to the state ``record`` holds. An implementation that replays the record
    itself whenever it takes its core (a hardware virtual device, ``take_record``) is asked to
    do that once, so the calls are not made twice. Raises what the implementation raises."""
    take = getattr(new, "take_record", None)
    if take is not None and take(record):
        return
    record.replay(new)


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
                service_id=self._service_id,
            )

        return gone


#: Drained slots' statistics rows a proxy keeps before folding them (bounds the memory).
FOLD_AFTER = 32


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
        record: StateRecord | None = None,
    ) -> None:
        self.interface = interface
        self.methods = methods
        self.names = tuple(m.name for m in methods)
        self.sample_period = sample_period
        self.record = record if record is not None else StateRecord()
        self.lock = self.record.lock
        self.retired: dict[str, dict[str, Accumulator]] = {}
        #: statistics rows of drained slots not yet folded into ``retired`` (folded when
        #: read, or when :data:`FOLD_AFTER` are waiting): a juggle only takes the rows
        self.unfolded: list[tuple[str, list[Any]]] = []
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

    def switch(self, impl: object, tier: str, *, carry: bool = True) -> Any:
        """Make ``impl`` serve new calls; returns the old slot (still draining).

        The state is carried first (unless ``carry`` is false), while ``impl`` is not yet
        visible; if that raises, nothing has switched.
        """
        with self.lock:
            new_slot = self._slot(impl, tier)
            if carry:
                carry_state(self.dispatcher.slot.impl, impl, self.record)
            old = self.dispatcher.switch(new_slot)
            self.draining.append(old)
            return old

    def retire(self, slot: Any) -> None:
        """Keep a drained slot's statistics for the per-tier totals and let the slot go."""
        rows = slot.stats()
        with self.lock:
            self.unfolded.append((str(slot.tier), rows))
            if len(self.unfolded) >= FOLD_AFTER:
                self._fold()
            if slot in self.draining:
                self.draining.remove(slot)

    def _fold(self) -> None:
        """Fold the kept rows into the per-tier totals (the caller holds the lock)."""
        for tier, rows in self.unfolded:
            per_method = self.retired.setdefault(tier, {})
            for row in rows:
                per_method.setdefault(row[0], Accumulator()).add_row(row)
        self.unfolded.clear()

    def traces(self) -> dict[str, dict[str, Accumulator]]:
        """tier → method → accumulated statistics, live slots included."""
        with self.lock:
            self._fold()
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


def wait_drained(slot: Any, timeout_s: float, service_id: int) -> None:
    """Block until no call runs on ``slot``; :class:`DrainTimeoutError` after ``timeout_s``.

    The slot signals when its last call ends (``on_drained``), so the wait is one blocking
    wait on an event, woken at that moment, not a polling loop.
    """
    if not slot.inflight:
        return
    drained = threading.Event()
    slot.on_drained = drained.set
    try:
        if slot.inflight and not drained.wait(timeout_s) and slot.inflight:
            raise DrainTimeoutError(
                f"{slot.inflight} call(s) still running on the {slot.tier} implementation "
                f"after {timeout_s} s",
                service_id=service_id,
            )
    finally:
        slot.on_drained = None


def _locked(traced: Any, binding: ProxyBinding, spec: MethodSpec) -> Callable[..., Any]:
    """A method that holds the binding's lock (so a switch never splits it from the state it
    records) and records the call when ``spec`` is state-setting."""

    record = binding.record

    def method(self: ServiceProxy, *args: Any, **kwargs: Any) -> Any:
        with record.lock:
            result = traced(self, *args, **kwargs)
            if spec.state_setting:
                record.record(spec.name, args, kwargs)
        return result

    method.__name__ = spec.name
    return method


def argument_check(arguments: Arguments, method: str) -> tuple[Any, ...]:
    """What a ``TracedMethod`` checks a call of ``method`` (``"EncryptionService.encrypt"``)
    against: ``arguments`` laid out for the compiled path, with the function that raises the
    caller's :class:`~juggle.errors.ServiceArgumentError` for a call that does not fit."""

    def reject(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        error = arguments.mismatch(method, args, kwargs)
        if error is not None:
            raise error

    return (
        arguments.params,
        arguments.positional,
        arguments.positional_only,
        arguments.min_positional,
        arguments.max_positional,
        arguments.required_mask,
        arguments.varkw,
        reject,
    )


def build_proxy(
    interface: type,
    interface_name: str,
    service_id: int,
    consumer: str,
    impl: object,
    tier: str,
    *,
    sample_period: int = 8,
    record: StateRecord | None = None,
) -> ServiceProxy:
    """A proxy for ``interface`` serving ``consumer`` from ``impl`` at ``tier``.

    ``record`` is the state the proxy records into (shared among a shared service's proxies);
    by default the proxy gets a record of its own.
    """
    methods = interface_methods(interface)
    binding = ProxyBinding(
        interface_name, methods, impl, tier, sample_period=sample_period, record=record
    )
    serialise = has_context(impl)
    short = short_name(interface_name)
    attrs: dict[str, Any] = {"__slots__": (), "__doc__": interface.__doc__}
    for index, spec in enumerate(methods):
        check = argument_check(spec.arguments, f"{short}.{spec.name}")
        traced = dispatch.TracedMethod(binding.dispatcher, index, check)
        if serialise or spec.state_setting:
            attrs[spec.name] = _locked(traced, binding, spec)
        else:
            attrs[spec.name] = traced
    cls = type(f"{short}Proxy", (ServiceProxy,), attrs)
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
