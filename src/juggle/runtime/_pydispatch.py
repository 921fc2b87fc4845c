"""Pure-Python twin of the compiled ``_dispatch`` module (same API, same semantics).

Used where the C extension could not be built. Slower: each traced call costs a few hundred
nanoseconds more, which is what the compiled path exists to avoid.
"""

from __future__ import annotations

import array
import threading
import time
import types
from collections.abc import Callable
from typing import Any

SUB_BITS = 3
SUBS = 1 << SUB_BITS
LINEAR = 16
OCTAVES = 44
NBUCKETS = LINEAR + (OCTAVES - 4) * SUBS
EXACT_CALLS = 1024

_lock = threading.Lock()


def now_ns() -> int:
    """Monotonic clock in ns."""
    return time.perf_counter_ns()


def tick_ratio() -> float:
    """ns per duration tick: here ticks are ns."""
    return 1.0


def _bucket_of(v: int) -> int:
    if v < LINEAR:
        return v
    e = v.bit_length() - 1
    if e >= OCTAVES:
        return NBUCKETS - 1
    return LINEAR + (e - 4) * SUBS + ((v >> (e - SUB_BITS)) & (SUBS - 1))


class _MethodStats:
    __slots__ = ("calls", "errors", "hist", "max_ticks", "timed", "total_ticks")

    def __init__(self) -> None:
        self.calls = 0
        self.timed = 0
        self.errors = 0
        self.total_ticks = 0
        self.max_ticks = 0
        self.hist = array.array("Q", bytes(8 * NBUCKETS))


class Slot:
    """One implementation at one tier, with call counters."""

    def __init__(
        self, impl: object, names: tuple[str, ...], tier: object = None, sample_period: int = 8
    ) -> None:
        if sample_period < 1 or sample_period & (sample_period - 1):
            raise ValueError(f"sample_period must be a power of two >= 1, got {sample_period}")
        self.impl = impl
        self.tier = tier
        self.names = tuple(names)
        self.methods = [getattr(impl, name) for name in names]
        self._mask = sample_period - 1
        self._stats = [_MethodStats() for _ in names]
        self._inflight = 0
        self.on_drained: Any = None

    @property
    def inflight(self) -> int:
        return self._inflight

    def stats(self) -> list[tuple[str, int, int, int, int, int, bytes]]:
        return [
            (n, s.calls, s.timed, s.errors, s.total_ticks, s.max_ticks, s.hist.tobytes())
            for n, s in zip(self.names, self._stats, strict=True)
        ]

    def __repr__(self) -> str:
        return f"<Slot tier={self.tier!r} impl={self.impl!r} inflight={self._inflight}>"


class Dispatcher:
    """Holds the current slot of one proxy; switch() is atomic for new calls."""

    def __init__(self, slot: Slot) -> None:
        self.slot = slot

    def switch(self, slot: Slot) -> Slot:
        old, self.slot = self.slot, slot
        return old


_hook: tuple[type[BaseException], Callable[[BaseException, object, str], object]] | None = None


def set_error_hook(
    passthrough: type[BaseException], hook: Callable[[BaseException, object, str], object]
) -> None:
    """An exception an implementation raises that is not a ``passthrough`` is handed to
    ``hook(exc, impl, method name)``, which raises what the caller gets instead."""
    global _hook
    _hook = (passthrough, hook)


#: ``(params, positional, positional_only, min_positional, max_positional, required_mask,
#: varkw, reject)``: the interface's signature a TracedMethod checks calls against (see
#: :class:`juggle.runtime.interfaces.Arguments`; min -1: no call without keywords fits, max -1:
#: any number), and ``reject(args, kwargs)``, which raises the caller's error.
Reject = Callable[[tuple[Any, ...], dict[str, Any]], None]
Check = tuple[tuple[str, ...], int, int, int, int, int, bool, Reject]


class TracedMethod:
    """A proxy method: checks the caller's arguments against the interface's signature
    (``check``), then forwards to the dispatcher's current slot and traces the call."""

    def __init__(self, dispatcher: Dispatcher, index: int, check: Check | None = None) -> None:
        if not 0 <= index < len(dispatcher.slot.names):
            raise IndexError(f"method index {index} out of range")
        self._dispatcher = dispatcher
        self.index = index
        self._range = (0, -1)
        self._reject: Reject | None = None
        if check is not None:
            _, _, _, low, high, _, _, reject = check
            if not callable(reject):
                raise ValueError("check: reject not callable")
            self._range = (low, high)
            self._reject = reject

    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        return self if obj is None else types.MethodType(self, obj)

    def __call__(self, proxy: object, *args: Any, **kwargs: Any) -> Any:
        reject = self._reject
        if reject is not None:
            low, high = self._range
            if kwargs or not (0 <= low <= len(args) and (high < 0 or len(args) <= high)):
                reject(args, kwargs)  # raises the caller's error, or returns: the call fits
        slot = self._dispatcher.slot
        st = slot._stats[self.index]
        with _lock:
            slot._inflight += 1
            n = st.calls
            st.calls += 1
        timed = n < EXACT_CALLS or (n & slot._mask) == 0
        t0 = time.perf_counter_ns() if timed else 0
        ok = False
        try:
            result = slot.methods[self.index](*args, **kwargs)
            ok = True
            return result
        except Exception as exc:
            if _hook is not None and not isinstance(exc, _hook[0]):
                _hook[1](exc, slot.impl, slot.names[self.index])
            raise
        finally:
            with _lock:
                if timed:
                    dt = time.perf_counter_ns() - t0
                    st.timed += 1
                    st.total_ticks += dt
                    st.max_ticks = max(st.max_ticks, dt)
                    st.hist[_bucket_of(dt)] += 1
                slot._inflight -= 1
                drained = slot._inflight == 0 and slot.on_drained is not None
                if not ok:
                    st.errors += 1
            if drained:
                slot.on_drained()
