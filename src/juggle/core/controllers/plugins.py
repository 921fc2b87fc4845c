"""Finding, checking and building controllers: a registry of controller plugins (pluggy).

A registry is a catalogue of policies. Plugins are registered into it (juggle's own from
:mod:`.builtin`, third-party ones found through the ``juggle.controllers`` entry-point
group) and checked on the spot, not at first use: a plugin whose hooks do not match
:class:`~.hookspecs.ControllerSpec`, or whose controller classes lack a proper ``name`` or
``decide(snapshot)``, is refused with a :class:`~juggle.errors.PluginError` that names it,
and the registry stays as it was. :func:`load_controller` then builds a controller by name
with keyword options. Each call of :func:`default_registry` builds a fresh registry; there is
no hidden global one.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence
from importlib import metadata
from types import ModuleType
from typing import Any

import pluggy

from juggle.core.controllers import builtin
from juggle.core.controllers.base import Controller
from juggle.core.controllers.hookspecs import PROJECT, ControllerSpec, hookimpl
from juggle.errors import ControllerError, PluginError

__all__ = [
    "ENTRY_POINT_GROUP",
    "ControllerRegistry",
    "available_controllers",
    "default_registry",
    "load_controller",
]

ENTRY_POINT_GROUP = "juggle.controllers"
"""Entry-point group through which installed packages offer controller plugins."""

_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


class _ClassPlugin:
    """Wraps a controller class named directly by an entry point into a plugin."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    @hookimpl
    def juggle_controllers(self) -> Sequence[type]:
        return [self.cls]

    def __repr__(self) -> str:
        return f"<plugin for {self.cls.__module__}.{self.cls.__qualname__}>"


class ControllerRegistry:
    """Controller plugins by name; validates plugins when they are registered."""

    def __init__(self) -> None:
        self._pm = pluggy.PluginManager(PROJECT)
        self._pm.add_hookspecs(ControllerSpec)
        self._classes: dict[str, tuple[type, str]] = {}

    # -- registering -----------------------------------------------------------------------------

    def register(self, plugin: object, name: str | None = None) -> list[str]:
        """Register ``plugin`` and return the controller names it adds.

        Raises :class:`~juggle.errors.PluginError` naming the plugin when it is already
        registered, its hooks do not match the specification, it provides no controllers, a
        controller class is malformed, or a name is taken. Nothing is registered then.
        """
        label = name or _label(plugin)
        if self._pm.is_registered(plugin) or self._pm.has_plugin(label):
            raise PluginError(f"controller plugin {label!r} is already registered", plugin=label)
        try:
            self._pm.register(plugin, name=label)
        except (pluggy.PluginValidationError, ValueError) as exc:
            raise PluginError(f"controller plugin {label!r} refused: {exc}", plugin=label) from exc
        try:
            self._pm.check_pending()
            classes = self._provided(plugin, label)
            names = self._validate_all(classes, label)
        except (pluggy.PluginValidationError, PluginError) as exc:
            self._pm.unregister(plugin)
            if isinstance(exc, PluginError):
                raise
            raise PluginError(f"controller plugin {label!r} refused: {exc}", plugin=label) from exc
        for cname, cls in zip(names, classes, strict=True):
            self._classes[cname] = (cls, label)
        return names

    def discover(self, group: str = ENTRY_POINT_GROUP) -> list[str]:
        """Register every plugin offered through entry points of ``group``; names added.

        Raises :class:`~juggle.errors.PluginError` naming the entry point when one cannot be
        imported or its plugin is refused.
        """
        added: list[str] = []
        for entry in sorted(metadata.entry_points(group=group), key=lambda e: e.name):
            label = f"{entry.name} ({entry.value})"
            try:
                loaded = entry.load()
            except Exception as exc:
                raise PluginError(
                    f"controller plugin {label!r} cannot be loaded: {exc}", plugin=label
                ) from exc
            if loaded is builtin and self._pm.is_registered(builtin):
                continue
            plugin = _ClassPlugin(loaded) if isinstance(loaded, type) else loaded
            added.extend(self.register(plugin, name=label))
        return added

    def _provided(self, plugin: object, label: str) -> list[type]:
        impls = [
            impl
            for impl in self._pm.hook.juggle_controllers.get_hookimpls()
            if impl.plugin is plugin
        ]
        if not impls:
            raise PluginError(
                f"controller plugin {label!r} implements no juggle_controllers hook", plugin=label
            )
        try:
            provided = impls[0].function()
        except Exception as exc:
            raise PluginError(
                f"controller plugin {label!r}: juggle_controllers() failed: {exc}", plugin=label
            ) from exc
        if isinstance(provided, (str, bytes)) or not isinstance(provided, Sequence):
            raise PluginError(
                f"controller plugin {label!r}: juggle_controllers() must return a sequence of "
                f"classes, got {provided!r}",
                plugin=label,
            )
        return list(provided)

    def _validate_all(self, classes: list[type], label: str) -> list[str]:
        names: list[str] = []
        for cls in classes:
            cname = _validate_class(cls, label)
            if cname in self._classes or cname in names:
                owner = self._classes[cname][1] if cname in self._classes else label
                raise PluginError(
                    f"controller plugin {label!r}: name {cname!r} is already provided by {owner!r}",
                    plugin=label,
                )
            names.append(cname)
        return names

    # -- using -----------------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Registered controller names, sorted."""
        return sorted(self._classes)

    def plugin_of(self, name: str) -> str:
        """The plugin that provides controller ``name``.

        Raises :class:`~juggle.errors.ControllerError` for an unknown name.
        """
        return self._entry(name)[1]

    def create(self, name: str, **options: Any) -> Controller:
        """Build controller ``name`` with keyword ``options``.

        Raises :class:`~juggle.errors.ControllerError` for an unknown name, an option the
        controller does not take, or a controller that refuses its options.
        """
        cls = self._entry(name)[0]
        accepted = _options(cls)
        unknown = sorted(set(options) - accepted) if accepted is not None else []
        if unknown:
            raise ControllerError(
                f"controller {name!r} takes no option {unknown[0]!r} "
                f"(options: {', '.join(sorted(accepted or ())) or 'none'})",
                controller=name,
                value=unknown[0],
            )
        try:
            controller = cls(**options)
        except ControllerError:
            raise
        except (TypeError, ValueError) as exc:
            raise ControllerError(
                f"controller {name!r}: bad options: {exc}", controller=name
            ) from exc
        if not isinstance(controller, Controller):
            raise ControllerError(f"controller {name!r} built {controller!r}, no controller")
        return controller

    def _entry(self, name: str) -> tuple[type, str]:
        try:
            return self._classes[name]
        except KeyError:
            known = ", ".join(self.names()) or "none"
            raise ControllerError(
                f"unknown controller {name!r} (known: {known})", controller=name
            ) from None

    def __repr__(self) -> str:
        return f"<ControllerRegistry {len(self._classes)} controllers: {', '.join(self.names())}>"


def _label(plugin: object) -> str:
    if isinstance(plugin, ModuleType):
        return plugin.__name__
    return getattr(plugin, "__name__", None) or repr(plugin)


def _validate_class(cls: object, label: str) -> str:
    """The controller name of ``cls``; raises PluginError when it is no proper controller."""
    if not isinstance(cls, type):
        raise PluginError(
            f"controller plugin {label!r} provides {cls!r}, not a class", plugin=label
        )
    where = f"controller plugin {label!r}: {cls.__qualname__}"
    cname = getattr(cls, "name", None)
    if not isinstance(cname, str) or not _NAME.match(cname):
        raise PluginError(
            f"{where} needs a name of lower-case words joined by '-', got {cname!r}", plugin=label
        )
    decide = getattr(cls, "decide", None)
    if not callable(decide):
        raise PluginError(f"{where} has no decide(snapshot) method", plugin=label)
    params = list(inspect.signature(decide).parameters.values())[1:]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    required = [p for p in params if p.default is p.empty and p.kind not in variadic]
    if not positional or len(required) != 1 or required[0] is not positional[0]:
        raise PluginError(
            f"{where}.decide must take exactly one argument (the snapshot), got "
            f"decide{inspect.signature(decide)}",
            plugin=label,
        )
    for p in inspect.signature(cls).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.default is p.empty:
            raise PluginError(
                f"{where}: constructor parameter {p.name!r} needs a default "
                "(options are passed by keyword)",
                plugin=label,
            )
    return cname


def _options(cls: type) -> set[str] | None:
    """Keyword options the constructor takes (None: it takes any, via ``**kwargs``)."""
    params = list(inspect.signature(cls).parameters.values())
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def default_registry(*, entry_points: bool = True) -> ControllerRegistry:
    """A fresh registry with the built-in controllers and, by default, installed plugins.

    Raises :class:`~juggle.errors.PluginError` naming an installed plugin that is refused.
    """
    registry = ControllerRegistry()
    registry.register(builtin, name="juggle.builtin")
    if entry_points:
        registry.discover()
    return registry


def available_controllers() -> list[str]:
    """Names of every controller: built-in and installed through entry points, sorted."""
    return default_registry().names()


def load_controller(name: str, **options: Any) -> Controller:
    """Build the controller called ``name`` with keyword ``options``.

    Raises :class:`~juggle.errors.ControllerError` for an unknown name or bad options and
    :class:`~juggle.errors.PluginError` for an installed plugin that is refused.
    """
    return default_registry().create(name, **options)
