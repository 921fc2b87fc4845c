"""The example modules juggle ships as package data (``juggle/examples/modules``).

Read with :mod:`importlib.resources`, so they are found in a source checkout, an editable
install and a plain ``pip install`` alike, from any working directory.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from juggle.errors import UnknownModuleError

__all__ = ["example_module", "example_modules"]


def example_modules() -> Path:
    """The folder holding the shipped example modules.

    Raises :class:`~juggle.errors.UnknownModuleError` when the installation lacks them.
    """
    folder = Path(str(resources.files("juggle").joinpath("examples", "modules")))
    if not folder.is_dir():
        raise UnknownModuleError(
            f"the example modules are missing from this installation ({folder}); reinstall "
            "juggle (pip install juggle)",
            path=str(folder),
        )
    return folder


def example_module(name: str) -> Path:
    """The shipped example module ``name`` (``tdes``, ``aes``, ``math``, ...).

    Raises :class:`~juggle.errors.UnknownModuleError` naming the module and the ones there are.
    """
    folder = example_modules()
    module = folder / name
    if not name or "/" in name or not module.is_dir():
        known = ", ".join(sorted(p.name for p in folder.iterdir() if p.is_dir()))
        raise UnknownModuleError(f"no example module {name!r} (examples: {known})", module=name)
    return module
