"""The contract a controller plugin fulfils (pluggy hook specifications).

A plugin is any object (usually a module) with a function marked ``@hookimpl`` named
``juggle_controllers`` that returns the controller classes it provides. Contracts live here,
implementations elsewhere: juggle's own controllers in :mod:`.builtin`, third-party ones in
their own packages, found through the ``juggle.controllers`` entry-point group::

    # mypackage/policies.py
    from juggle.core.controllers import hookimpl

    class Greedy:
        name = "greedy"
        def decide(self, snapshot): ...

    @hookimpl
    def juggle_controllers():
        return [Greedy]

    # pyproject.toml of mypackage
    [project.entry-points."juggle.controllers"]
    greedy = "mypackage.policies"

An entry point may also name a controller class directly; it is then wrapped as a plugin.
"""

from __future__ import annotations

from collections.abc import Sequence

import pluggy

__all__ = ["PROJECT", "ControllerSpec", "hookimpl", "hookspec"]

PROJECT = "juggle"
"""The pluggy project name; markers of other projects are ignored."""

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class ControllerSpec:
    """Hook specifications for controller plugins."""

    @hookspec
    def juggle_controllers(self) -> Sequence[type]:  # type: ignore[empty-body]
        """Return the controller classes this plugin provides.

        Each class has a ``name`` (lower-case words joined by ``-``), a ``decide(self,
        snapshot)`` method returning a sequence of :class:`~.base.JuggleAction`, and a
        constructor whose parameters all have defaults (options are passed by keyword).
        """
