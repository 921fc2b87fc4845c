"""Service interfaces: the contract every implementation tier honours.

An interface is a plain class whose public methods are the contract (Juggle Listing 5). Methods
that set state an implementation keeps between calls (a loaded key) are marked with
:func:`state_setting`; a proxy records their last call and replays it onto a new
implementation when it switches tiers, so ``load_key`` → switch → ``encrypt`` stays right.

Interfaces are found by name (``"crypto.EncryptionService"``) in an :class:`InterfaceCatalog`:
first in the installing module's own code, then in the catalog, which knows juggle's reference
interfaces and whatever the application registers.

The signature of each interface method is the contract for its arguments too: a proxy checks
every call against the method's :class:`Arguments` (taken once, when the interface is read)
before the call reaches an implementation, so a caller's mistake (an unknown keyword, a missing
or extra argument) is the caller's :class:`~juggle.errors.ServiceArgumentError`, not the
module's failure or a hardware fault. Only arity and names are checked; values are the
implementations' own business.
"""

from __future__ import annotations

import importlib
import inspect
import reprlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from juggle.errors import ServiceArgumentError, UnknownInterfaceError

F = TypeVar("F", bound=Callable[..., Any])

_STATE_ATTR = "__juggle_state_setting__"


def state_setting(fn: F) -> F:
    """Mark an interface method as setting state that must follow the service across tiers."""
    setattr(fn, _STATE_ATTR, True)
    return fn


#: Shortens argument values quoted in error messages (a buffer is not printed whole).
_quote = reprlib.Repr()
_quote.maxstring = _quote.maxother = 40
_quote.maxlevel = 2


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@dataclass(frozen=True, slots=True)
class Arguments:
    """What one interface method accepts: its signature without ``self``, precomputed so that
    a proxy checks a call's arity and keyword names in a few comparisons.

    ``params`` are the named parameters, the ``positional`` ones first (of which the first
    ``positional_only`` cannot be given by keyword), then the keyword-only ones; ``required``
    says which of them have no default; ``varargs`` / ``varkw`` whether the method takes
    ``*args`` / ``**kwargs``. The default accepts anything.
    """

    params: tuple[str, ...] = ()
    positional: int = 0
    positional_only: int = 0
    required: tuple[bool, ...] = ()
    varargs: bool = True
    varkw: bool = True

    @classmethod
    def of(cls, function: Callable[..., Any]) -> Arguments:
        """The arguments of the method ``function`` (its first positional parameter, ``self``,
        left out). A function whose signature cannot be read accepts anything."""
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):
            return cls()
        parameters = list(signature.parameters.values())
        positional_kinds = (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        )
        if parameters and parameters[0].kind in positional_kinds:
            parameters = parameters[1:]  # self
        params: list[str] = []
        required: list[bool] = []
        positional = positional_only = 0
        varargs = varkw = False
        for kind in (*positional_kinds, inspect.Parameter.KEYWORD_ONLY):
            for p in parameters:
                if p.kind is not kind:
                    continue
                params.append(p.name)
                required.append(p.default is inspect.Parameter.empty)
                if kind is inspect.Parameter.POSITIONAL_ONLY:
                    positional_only += 1
                if kind is not inspect.Parameter.KEYWORD_ONLY:
                    positional += 1
        for p in parameters:
            varargs = varargs or p.kind is inspect.Parameter.VAR_POSITIONAL
            varkw = varkw or p.kind is inspect.Parameter.VAR_KEYWORD
        return cls(tuple(params), positional, positional_only, tuple(required), varargs, varkw)

    @property
    def min_positional(self) -> int:
        """The fewest positional arguments a call without keywords needs (-1: such a call
        always lacks a required keyword-only argument)."""
        need = 0
        for index, req in enumerate(self.required):
            if req:
                if index >= self.positional:
                    return -1
                need = index + 1
        return need

    @property
    def max_positional(self) -> int:
        """The most positional arguments a call may pass (-1: any number, ``*args``)."""
        return -1 if self.varargs else self.positional

    @property
    def required_mask(self) -> int:
        """``required`` as bits (bit ``i``: ``params[i]`` has no default)."""
        return sum(1 << i for i, req in enumerate(self.required) if req)

    def mismatch(
        self, method: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> ServiceArgumentError | None:
        """The error a call ``method(*args, **kwargs)`` is, or None when it fits.

        ``method`` names the method in the message and in the error's ``method``
        (``"EncryptionService.encrypt"``); the error's ``argument`` is the keyword or parameter
        name at fault, or for surplus positional arguments the 1-based position of the first
        one.
        """
        n = len(args)
        if not self.varargs and n > self.positional:
            lo = sum(self.required[: self.positional])
            count = _plural(self.positional, "argument")
            if lo != self.positional:
                count = f"{lo} to {count}"
            return ServiceArgumentError(
                f"{method}() takes {count}, {n} given (the {_ordinal(self.positional + 1)} is "
                f"{_quote.repr(args[self.positional])}; {self.describe()})",
                method=method,
                argument=self.positional + 1,
            )
        given = min(n, self.positional)  # parameters filled by position
        for key, value in kwargs.items():
            try:
                index = self.params.index(key)
            except ValueError:
                index = -1
            if index < self.positional_only:
                if self.varkw:
                    continue
                what = (
                    f"positional-only argument {key!r} as a keyword"
                    if index >= 0
                    else f"an unexpected keyword argument {key!r}"
                )
                return ServiceArgumentError(
                    f"{method}() got {what} (={_quote.repr(value)})", method=method, argument=key
                )
            if index < given:
                return ServiceArgumentError(
                    f"{method}() got multiple values for argument {key!r} (positional "
                    f"{_quote.repr(args[index])}, keyword {_quote.repr(value)})",
                    method=method,
                    argument=key,
                )
        missing = [
            name
            for index, (name, req) in enumerate(zip(self.params, self.required, strict=True))
            if req and index >= given and name not in kwargs
        ]
        if missing:
            word = "argument" if len(missing) == 1 else "arguments"
            given_kw = f" and keyword {', '.join(map(repr, kwargs))}" if kwargs else ""
            return ServiceArgumentError(
                f"{method}() missing {word} {', '.join(map(repr, missing))} "
                f"({_plural(n, 'positional argument')}{given_kw} given; {self.describe()})",
                method=method,
                argument=missing[0],
            )
        return None

    def describe(self) -> str:
        """``it takes buf, size`` / ``it takes x, *, scale=...`` (for messages)."""
        parts = []
        for index, name in enumerate(self.params):
            if index == self.positional_only and index:
                parts.append("/")
            if index == self.positional and not self.varargs:
                parts.append("*")
            parts.append(name if self.required[index] else f"{name}=...")
            if index + 1 == self.positional and self.varargs:
                parts.append("*args")
        if self.positional_only == len(self.params) and self.positional_only:
            parts.append("/")
        if self.varargs and not self.positional:
            parts.insert(0, "*args")
        if self.varkw:
            parts.append("**kwargs")
        return f"it takes {', '.join(parts)}" if parts else "it takes no arguments"


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """One method of a service interface: its name, whether it sets state, what it accepts."""

    name: str
    state_setting: bool
    arguments: Arguments = Arguments()


def interface_methods(interface: type) -> tuple[MethodSpec, ...]:
    """The public methods of ``interface`` in definition order (inherited ones included)."""
    seen: dict[str, MethodSpec] = {}
    for klass in reversed(interface.__mro__):
        if klass is object:
            continue
        for name, member in vars(klass).items():
            if name.startswith("_") or not inspect.isfunction(member):
                continue
            seen[name] = MethodSpec(
                name, bool(getattr(member, _STATE_ATTR, False)), Arguments.of(member)
            )
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
                f"interface {name!r} must be a class, got {interface!r}", interface=name
            )
        self._known[name] = interface

    def resolve(self, name: str) -> type:
        """The interface class called ``name``; :class:`UnknownInterfaceError` if none."""
        found = self._known.get(name)
        if found is not None:
            return found
        target = self._lazy.get(name)
        if target is None:
            raise UnknownInterfaceError(f"unknown service interface {name!r}", interface=name)
        module_name, _, attr = target.partition(":")
        interface = getattr(importlib.import_module(module_name), attr)
        if not isinstance(interface, type):
            raise UnknownInterfaceError(f"{target!r} is not a class", interface=name)
        self._known[name] = interface
        return interface

    def __contains__(self, name: object) -> bool:
        return name in self._known or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(set(self._known) | set(self._lazy)))


def short_name(name: str) -> str:
    """``"crypto.EncryptionService"`` → ``"EncryptionService"``."""
    return name.rsplit(".", 1)[-1]
