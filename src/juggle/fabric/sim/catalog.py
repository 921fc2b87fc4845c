"""The model catalog: which register model the simulator puts behind a design's window.

Like a theatre's casting list: a bitstream names a design (``"tdes"``), the catalog names the
:class:`~juggle.fabric.sim.model.RegisterModel` that plays it. Entries are classes, checked when
registered, or ``"module:Class"`` paths imported on first use (the built-in cores live in
``juggle.services`` and may be absent). Each catalog is its own object: no global registry.
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Mapping

from juggle.errors import ModelRegistrationError, UnknownDesignError
from juggle.fabric.sim.model import RegisterModel

__all__ = ["BUILTIN_MODELS", "ModelCatalog"]

BUILTIN_MODELS: Mapping[str, str] = {
    "des": "juggle.services.crypto.model:DesCore",
    "tdes": "juggle.services.crypto.model:TdesCore",
    "adder": "juggle.services.arith:AdderCore",
    "multiplier": "juggle.services.arith:MultiplierCore",
    "adpcm": "juggle.services.audio:AdpcmCore",
    "aes": "juggle.services.crypto.aes_hw:AesCore",
}

_PATH_RE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


class ModelCatalog:
    """Design name -> register model class.

    Raises :class:`~juggle.errors.ModelRegistrationError` when an entry is malformed and
    :class:`~juggle.errors.UnknownDesignError` when a design has no usable model.
    """

    def __init__(self, models: Mapping[str, type[RegisterModel] | str] | None = None) -> None:
        self._entries: dict[str, type[RegisterModel] | str] = {}
        self._owners: dict[str, str] = {}  # design → the module that claimed it
        # design → (owner, model) an update's claim took over: given back if the new owner is
        # released while the old one is still installed (a failed update), dropped with the old
        self._replaced: dict[str, tuple[str, type[RegisterModel] | str]] = {}
        self._lock = threading.Lock()
        for design, model in (models or {}).items():
            self.register(design, model)

    @classmethod
    def builtin(cls) -> ModelCatalog:
        """A new catalog holding juggle's reference cores (resolved lazily)."""
        return cls(BUILTIN_MODELS)

    def register(self, design: str, model: type[RegisterModel] | str) -> None:
        """Make ``model`` play ``design`` (replacing any earlier entry).

        Raises :class:`~juggle.errors.ModelRegistrationError` for an empty design name, a
        class that is not a ``RegisterModel`` with a positive, 4-byte multiple
        ``window_size``, or a path not of the form ``"module:Class"``.
        """
        if not isinstance(design, str) or not design:
            raise ModelRegistrationError(f'"design" must be a non-empty string, got {design!r}')
        if isinstance(model, str):
            if not _PATH_RE.fullmatch(model):
                raise ModelRegistrationError(
                    f'model path for {design!r} must be "module:Class", got {model!r}',
                    design=design,
                    value=model,
                )
        else:
            _validate(design, model)
        with self._lock:
            self._owners.pop(design, None)
            self._replaced.pop(design, None)
            self._entries[design] = model

    def claim(
        self,
        design: str,
        model: type[RegisterModel],
        owner: str,
        *,
        replacing: str | None = None,
    ) -> bool:
        """Let ``owner`` (a module) provide ``model`` for ``design``; returns whether an entry
        was added (False: the design's model is that very class already, built in or owned).

        A module cannot replace another module's model, nor a built-in one with a different
        class; ``replacing`` names an owner whose entries may be taken over (the same module
        being updated). Raises :class:`~juggle.errors.ModelRegistrationError` naming the
        design and its current provider, and as :meth:`register` for a malformed model.
        """
        _validate(design, model)
        with self._lock:
            entry = self._entries.get(design)
            current = self._owners.get(design)
        if entry is not None and current is None:  # built in, or registered by hand
            if self.resolve(design) is model:
                return False
            raise ModelRegistrationError(
                f"design {design!r} has a model already ({_name(entry)}); a module cannot "
                f"replace it with {model.__name__}",
                design=design,
            )
        if entry is not None and current not in (owner, replacing):
            if entry is model:
                return False
            raise ModelRegistrationError(
                f"design {design!r} is played by {_name(entry)} of {current}; {owner} cannot "
                f"replace it with {model.__name__}",
                design=design,
            )
        with self._lock:
            if entry is not None and current is not None and current != owner:
                self._replaced[design] = (current, entry)
            self._entries[design] = model
            self._owners[design] = owner
        return True

    def release(self, owner: str) -> tuple[str, ...]:
        """Forget every model ``owner`` claimed; returns their designs. A design ``owner``
        took over from another module (``claim(replacing=...)``) goes back to that module, so a
        failed update leaves the installed version's models as they were."""
        with self._lock:
            designs = tuple(d for d, o in self._owners.items() if o == owner)
            for design in designs:
                back = self._replaced.pop(design, None)
                if back is not None:
                    self._owners[design], self._entries[design] = back
                else:
                    del self._owners[design]
                    del self._entries[design]
            for design, (old, _) in list(self._replaced.items()):
                if old == owner:  # the update succeeded and the old version is gone
                    del self._replaced[design]
        return designs

    def unregister(self, design: str) -> None:
        """Forget ``design``. Raises :class:`~juggle.errors.UnknownDesignError` if unknown."""
        with self._lock:
            self._owners.pop(design, None)
            self._replaced.pop(design, None)
            if self._entries.pop(design, None) is None:
                raise UnknownDesignError(f"model catalog has no design {design!r}", design=design)

    def designs(self) -> tuple[str, ...]:
        """Registered design names, sorted (lazy entries included, resolvable or not)."""
        with self._lock:
            return tuple(sorted(self._entries))

    def __contains__(self, design: object) -> bool:
        return design in self._entries

    def resolve(self, design: str) -> type[RegisterModel]:
        """The model class for ``design``, importing a lazy entry on first use.

        Raises :class:`~juggle.errors.UnknownDesignError` if the design is unknown or its
        module cannot be imported, :class:`~juggle.errors.ModelRegistrationError` if the
        imported object is not a valid model.
        """
        with self._lock:
            entry = self._entries.get(design)
        if entry is None:
            known = ", ".join(self.designs()) or "none"
            raise UnknownDesignError(
                f"no register model for design {design!r} (models: {known})", design=design
            )
        if not isinstance(entry, str):
            return entry
        model = _import(design, entry)
        _validate(design, model)
        with self._lock:
            if self._entries.get(design) == entry:
                self._entries[design] = model
        return model

    def create(self, design: str) -> RegisterModel:
        """A fresh, reset instance of ``design``'s model (raises like :meth:`resolve`)."""
        instance = self.resolve(design)()
        instance.reset()
        return instance

    def __repr__(self) -> str:
        with self._lock:
            lazy = sum(isinstance(e, str) for e in self._entries.values())
            return f"<ModelCatalog {len(self._entries)} designs, {lazy} not yet imported>"


def _name(entry: type[RegisterModel] | str) -> str:
    return entry if isinstance(entry, str) else f"{entry.__module__}.{entry.__qualname__}"


def _import(design: str, path: str) -> type[RegisterModel]:
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownDesignError(
            f"model {path!r} for design {design!r} cannot be imported: {exc}", design=design
        ) from exc
    model = getattr(module, attr, None)
    if model is None:
        raise UnknownDesignError(
            f"model {path!r} for design {design!r}: {module_name} has no {attr!r}", design=design
        )
    return model  # type: ignore[no-any-return]


def _validate(design: str, model: object) -> None:
    if not (isinstance(model, type) and issubclass(model, RegisterModel)):
        raise ModelRegistrationError(
            f"model for {design!r} must be a RegisterModel subclass, got {model!r}", design=design
        )
    size = model.window_size
    if not isinstance(size, int) or size <= 0 or size % 4:
        raise ModelRegistrationError(
            f"{model.__name__}.window_size must be a positive multiple of 4, got {size!r}",
            design=design,
            value=size,
        )
