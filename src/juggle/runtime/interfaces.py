"""Service interfaces: the contract every implementation tier honours.

An interface is a plain class whose public methods are the contract (Juggle Listing 5). Methods
that set state an implementation keeps between calls (a loaded key) are marked with
:func:`state_setting`; a proxy records their last call and replays it onto a new
implementation when it switches tiers, so ``load_key`` → switch → ``encrypt`` stays right.

Interfaces are found by name (``"crypto.EncryptionService"``) in an :class:`InterfaceCatalog`:
first in the installing module's own code, then in the catalog, which knows juggle's reference
interfaces and whatever the application registers.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from juggle.errors import UnknownInterfaceError

F = TypeVar("F", bound=Callable[..., Any])

_STATE_ATTR = "__juggle_state_setting__"


def state_setting(fn: F) -> F:
    """Mark an interface method as setting state that must follow the service across tiers."""
    setattr(fn, _STATE_ATTR, True)
    return fn


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """One method of a service interface."""

    name: str
    state_setting: bool


def interface_methods(interface: type) -> tuple[MethodSpec, ...]:
    """The public methods of ``interface`` in definition order (inherited ones included)."""
    seen: dict[str, MethodSpec] = {}
    for klass in reversed(interface.__mro__):
        if klass is object:
            continue
        for name, member in vars(klass).items():
            if name.startswith("_") or not inspect.isfunction(member):
                continue
            seen[name] = MethodSpec(name, bool(getattr(member, _STATE_ATTR, False)))
    return tuple(seen.values())


#: Reference interfaces shipped with juggle: descriptor name -> "module:attribute".
BUILTIN_INTERFACES: dict[str, str] = {
    "crypto.EncryptionService": "juggle.services.crypto:EncryptionService",
    "math.AddService": "juggle.services.arith:AddService",
    "math.MulService": "juggle.services.arith:MulService",
    "audio.DecoderService": "juggle.services.audio:DecoderService",
}


class InterfaceCatalog:
    """Known service interfaces by name; one per framework, no global state."""

    def __init__(self) -> None:
        self._known: dict[str, type] = {}
        self._lazy: dict[str, str] = dict(BUILTIN_INTERFACES)

    def register(self, name: str, interface: type) -> None:
        """Make ``interface`` resolvable as ``name``."""
        if not inspect.isclass(interface):
            raise UnknownInterfaceError(
                f"interface {name!r} must be a class, got {interface!r}", subject=name
            )
        self._known[name] = interface

    def resolve(self, name: str) -> type:
        """The interface class called ``name``; :class:`UnknownInterfaceError` if none."""
        found = self._known.get(name)
        if found is not None:
            return found
        target = self._lazy.get(name)
        if target is None:
            raise UnknownInterfaceError(f"unknown service interface {name!r}", subject=name)
        module_name, _, attr = target.partition(":")
        interface = getattr(importlib.import_module(module_name), attr)
        if not isinstance(interface, type):
            raise UnknownInterfaceError(f"{target!r} is not a class", subject=name)
        self._known[name] = interface
        return interface

    def __contains__(self, name: object) -> bool:
        return name in self._known or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(set(self._known) | set(self._lazy)))


def short_name(name: str) -> str:
    """``"crypto.EncryptionService"`` → ``"EncryptionService"``."""
    return name.rsplit(".", 1)[-1]
