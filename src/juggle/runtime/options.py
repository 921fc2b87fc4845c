"""The Framework's options: one frozen object, checked once, read by every part.

:class:`FrameworkOptions` gathers what ``juggle.Framework(...)`` takes besides the fabric, the
way ``juggle.limits.Limits`` gathers input bounds: a frozen value, validated when it is made,
so every part of the runtime reads settled values and none checks them again. Making one with
a bad value raises :class:`~juggle.errors.ConfigurationError` quoting the argument and the
value (``'"call_timeout_s" must be a number > 0, got 0'``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from juggle.errors import ConfigurationError, scalar
from juggle.fabric.fabric import Fabric, open_fabric
from juggle.limits import DEFAULT_LIMITS, Limits
from juggle.runtime.hardware import (
    DEFAULT_CALL_TIMEOUT_S,
    DEFAULT_VERIFY_SAMPLE,
    DEFAULT_VERIFY_WARMUP,
)
from juggle.runtime.integrity import load_public_keys

__all__ = [
    "BOUNDED_LOG",
    "DEFAULT_HISTORY_CAPACITY",
    "HARDWARE_KINDS",
    "FrameworkOptions",
    "positive_int",
    "positive_number",
]

#: what executes hardware calls on a simulated board: the cores' Python register models, or
#: their Verilog in a cycle-accurate simulator (the ``rtl`` backend)
HARDWARE_KINDS = ("model", "rtl")

#: juggle reports kept by default (``Framework(history_capacity=...)``)
DEFAULT_HISTORY_CAPACITY = 1_000
#: entries kept of each diagnostic log (controller errors, contained faults)
BOUNDED_LOG = 100


def positive_int(name: str, value: object, minimum: int = 1) -> None:
    """Raise :class:`ConfigurationError` unless ``value`` is an int >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(
            f'"{name}" must be an int >= {minimum}, got {value!r:.80}', value=scalar(value)
        )


def positive_number(name: str, value: object) -> None:
    """Raise :class:`ConfigurationError` unless ``value`` is a number > 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigurationError(
            f'"{name}" must be a number > 0, got {value!r:.80}', value=scalar(value)
        )


@dataclass(frozen=True, slots=True)
class FrameworkOptions:
    """How a Framework runs (see :class:`~juggle.runtime.framework.Framework` for each).

    ``backend``, ``hardware``, ``pace`` and ``backend_options`` say how a board profile is
    opened (``hardware="rtl"`` runs on the simulated board and sets ``backend`` to ``"rtl"``);
    ``trace_sample`` (a power of two) times one call in N; ``drain_timeout_s`` bounds a wait
    for running calls; ``queue_capacity`` is what a controller's queue occupancy is a share of;
    ``call_timeout_s`` bounds a hardware call's polling of a core without progress;
    ``limits`` bound untrusted input; ``history_capacity`` is the juggle reports kept;
    ``trusted_keys`` (as :func:`~juggle.runtime.integrity.load_public_keys` takes them; kept
    as a tuple of loaded public keys; None: modules need no signature) are the keys a module
    must be signed by. ``strict`` (on a fabric that runs RTL, ``hardware="rtl"``) refuses at
    install a design that has no RTL, module's or juggle's, instead of running it on its
    register model. ``tenant_hold_ms`` is how long a region stays with the tenant that just got
    it (Ker-ONE's Hold state; docs/daemon.md "Priorities without thrashing"): None derives it
    from the region's modeled reconfiguration time (twice it), 0 turns the hold off.

    Verification: the first ``verify_warmup`` calls on a region just programmed or recovered
    are all checked against the software tier, then one in 2, 4, 8 … down to one call in
    ``verify_sample`` (default 16; property ``juggle.verify`` overrides it per service;
    1 checks every call, 0 none, warm-up included). After a mismatch the service's next region
    warms up longer (twice, then four times … as long). A core turning to garbage outside a
    warm-up hands out at most ``verify_sample - 1`` wrong results (docs/verification.md).

    Raises :class:`~juggle.errors.ConfigurationError` naming the first bad value.
    """

    backend: str = "sim"
    hardware: str = "model"
    pace: bool = False
    trace_sample: int = 8
    drain_timeout_s: float = 30.0
    queue_capacity: int = 8
    verify_sample: int = DEFAULT_VERIFY_SAMPLE
    verify_warmup: int = DEFAULT_VERIFY_WARMUP
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    limits: Limits = DEFAULT_LIMITS
    history_capacity: int = DEFAULT_HISTORY_CAPACITY
    trusted_keys: Sequence[Any] | None = None
    strict: bool = False
    tenant_hold_ms: float | None = None
    backend_options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        positive_int("verify_sample", self.verify_sample, minimum=0)
        positive_int("verify_warmup", self.verify_warmup, minimum=0)
        positive_number("call_timeout_s", self.call_timeout_s)
        positive_number("drain_timeout_s", self.drain_timeout_s)
        positive_int("history_capacity", self.history_capacity)
        positive_int("queue_capacity", self.queue_capacity)
        positive_int("trace_sample", self.trace_sample)
        if self.trace_sample & (self.trace_sample - 1):
            raise ConfigurationError(
                f'"trace_sample" must be a power of two >= 1, got {self.trace_sample!r}',
                value=self.trace_sample,
            )
        if not isinstance(self.limits, Limits):
            raise ConfigurationError(
                f'"limits" must be a juggle.limits.Limits, got {type(self.limits).__name__}'
            )
        if self.trusted_keys is not None:  # loaded once, kept as a tuple of key objects
            keys = tuple(load_public_keys(self.trusted_keys))
            object.__setattr__(self, "trusted_keys", keys)
        if not isinstance(self.strict, bool):
            raise ConfigurationError(
                f'"strict" must be True or False, got {self.strict!r:.80}',
                value=scalar(self.strict),
            )
        if self.tenant_hold_ms is not None and (
            isinstance(self.tenant_hold_ms, bool)
            or not isinstance(self.tenant_hold_ms, int | float)
            or not 0 <= self.tenant_hold_ms < float("inf")
        ):
            raise ConfigurationError(
                f'"tenant_hold_ms" must be None or a finite number of ms >= 0, '
                f"got {self.tenant_hold_ms!r:.80}",
                value=scalar(self.tenant_hold_ms),
            )
        self._check_hardware()
        options = MappingProxyType(dict(self.backend_options))
        object.__setattr__(self, "backend_options", options)

    def _check_hardware(self) -> None:
        if self.hardware not in HARDWARE_KINDS:
            raise ConfigurationError(
                f'"hardware" must be one of {", ".join(HARDWARE_KINDS)}, got {self.hardware!r:.80}',
                value=self.hardware,
            )
        if self.hardware == "rtl":
            if self.backend not in ("sim", "rtl"):
                raise ConfigurationError(
                    f'hardware="rtl" runs on the simulated board, not backend {self.backend!r}',
                    value=self.backend,
                )
            object.__setattr__(self, "backend", "rtl")

    def open_fabric(self, fabric: object) -> Fabric:
        """``fabric`` opened as these options say (``backend``, ``pace``, ``backend_options``)
        when it is a board profile name or path; an opened :class:`Fabric` as it is. Raises
        :class:`~juggle.errors.ConfigurationError` for anything else, and what
        :func:`~juggle.fabric.fabric.open_fabric` raises."""
        if isinstance(fabric, Fabric):
            return fabric
        if not isinstance(fabric, str | Path):
            raise ConfigurationError(
                f'"fabric" must be a profile name, a path or a Fabric, got {fabric!r:.80}'
            )
        return open_fabric(fabric, backend=self.backend, pace=self.pace, **self.backend_options)

    def replace(self, **changes: Any) -> FrameworkOptions:
        """A copy with ``changes``, checked as a new one is. Raises
        :class:`~juggle.errors.ConfigurationError` (self is unchanged)."""
        return dataclasses.replace(self, **changes)
