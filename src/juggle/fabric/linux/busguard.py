"""Register access that survives a bus error: 32-bit MMIO through a SIGBUS guard.

On a board, a load or store to a register window whose slot is decoupled, held in reset or not
programmed can end in a bus error, which Linux delivers to the accessing thread as a
synchronous ``SIGBUS`` (the same signal a process gets for touching a page of a file mapping
that lies past the end of the file, mmap(2)). Python's own ``mmap`` has no answer to it: the
default action kills the process, and fault containment (ARCHITECTURE principle 8) never runs.

:class:`GuardedMap` maps ``length`` bytes of a file or device (``MAP_SHARED``, read/write) and
does every aligned 32-bit access in the C extension :mod:`juggle.fabric.linux._busguard`: a
per-thread ``sigsetjmp`` buffer armed for the one volatile access, and a process-wide
``SIGBUS`` handler that jumps back to it. A bus error during an access raises
:class:`~juggle.errors.BusFaultError` (a :class:`~juggle.errors.FabricError`, so the runtime
treats it as a hardware fault: the call is served by software and the region goes to ERROR);
the process lives and the map stays usable (the next access succeeds once the cause is gone).
A ``SIGBUS`` that does not come from a guarded access still does what it did before
(faulthandler's report, then the default action).

What the guard cannot do: a bus that never answers (an AXI slave that stalls) hangs the CPU
before any signal, and an asynchronous abort (an arm64 SError) is not delivered to the access
that caused it; keeping a slot's window untouched while the slot is isolated or unloaded (the
shell's gate) is what prevents those. The guard turns the synchronous bus errors a board does
report (an external abort on the access, a decode error) from a crash into a contained fault.

The mapping length is exactly ``length`` (for a UIO map: its ``size``; ``uio_mmap_physical``
refuses a longer mapping, Documentation/driver-api/uio-howto.rst); ``offset`` is the file offset
of the mapping (map N of ``/dev/uioN`` is at ``N * PAGESIZE``, uio-howto.rst "mmap()").

Without the extension (a platform without a C compiler or without POSIX signals),
:data:`GUARDED` is False and accesses go through a plain ``mmap``: same API, no guard.
"""

from __future__ import annotations

import mmap
import operator
import os
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Protocol

from juggle.errors import BackendError, BusFaultError, RegionEmptyError, WindowAccessError

__all__ = ["GUARDED", "BusFaultError", "GuardedMap"]

_MASK32 = 0xFFFFFFFF


class _Map(Protocol):
    """What :class:`GuardedMap` needs of the C ``Map`` (or of :class:`_PlainMap`)."""

    @property
    def closed(self) -> bool: ...

    def read32(self, off: int, /) -> int: ...

    def write32(self, off: int, value: int, /) -> None: ...

    def close(self) -> None: ...


class _NeverRaised(Exception):
    """Stands for ``_busguard.BusFault`` when the extension is absent."""


class _PlainMap:
    """Unguarded twin of ``_busguard.Map`` (same errors: IndexError for a bad offset,
    OverflowError for a bad value, ValueError once closed)."""

    def __init__(self, fd: int, length: int, offset: int = 0) -> None:
        self._mm = mmap.mmap(fd, length, mmap.MAP_SHARED, offset=offset)
        self._words = memoryview(self._mm).cast("I")
        self._length = length

    @property
    def closed(self) -> bool:
        return self._mm.closed

    def _index(self, off: int) -> int:
        if operator.index(off) & 3 or not 0 <= off <= self._length - 4:
            raise IndexError("offset out of range or not aligned")
        if self._mm.closed:
            raise ValueError("map is closed")
        return off >> 2

    def read32(self, off: int, /) -> int:
        return int(self._words[self._index(off)])

    def write32(self, off: int, value: int, /) -> None:
        index = self._index(off)
        if not 0 <= operator.index(value) <= _MASK32:
            raise OverflowError("value is not in 0..0xFFFFFFFF")
        self._words[index] = value

    def close(self) -> None:
        if not self._mm.closed:
            self._words.release()
            self._mm.close()


try:
    from juggle.fabric.linux import _busguard

    _MapClass: Callable[[int, int, int], _Map] = _busguard.Map
    _Fault: type[Exception] = _busguard.BusFault
    GUARDED = True
except ImportError:  # pragma: no cover - the extension is built wherever juggle is tested
    _MapClass = _PlainMap
    _Fault = _NeverRaised
    GUARDED = False


class GuardedMap:
    """``length`` bytes of ``path`` mapped at file ``offset``; aligned 32-bit reads and writes
    under a SIGBUS guard (implements ``MMIO`` with ``size == length``).

    ``label`` names the map in errors (e.g. the window of region ``rp0``); the path by default.

    Raises :class:`~juggle.errors.WindowAccessError` for a ``length`` or ``offset`` that cannot
    be mapped and :class:`~juggle.errors.BackendError` when the file cannot be opened or mapped.
    Accesses raise :class:`~juggle.errors.WindowAccessError` for a bad offset or value,
    :class:`~juggle.errors.BusFaultError` on a bus error and
    :class:`~juggle.errors.RegionEmptyError` after :meth:`close`.
    """

    __slots__ = ("_map", "_read", "_write", "label", "length", "offset", "path")

    def __init__(
        self, path: str | Path, length: int, *, offset: int = 0, label: str | None = None
    ) -> None:
        self.path = str(path)
        self.label = label if label is not None else self.path
        if type(length) is not int or length < 4 or length % 4:
            raise WindowAccessError(
                f'{self.label}: "length" must be a positive multiple of 4, got {length!r}',
                value=length,
            )
        if type(offset) is not int or offset < 0 or offset % mmap.PAGESIZE:
            raise WindowAccessError(
                f'{self.label}: "offset" must be a non-negative multiple of the page size '
                f"({mmap.PAGESIZE:#x}), got {offset!r}",
                offset=offset,
            )
        self.length = length
        self.offset = offset
        try:
            fd = os.open(self.path, os.O_RDWR | getattr(os, "O_SYNC", 0))
        except OSError as exc:
            raise BackendError(f"cannot open {self.path!r}: {exc}", path=self.path) from exc
        try:
            self._map: _Map = _MapClass(fd, length, offset)
        except (OSError, ValueError) as exc:
            raise BackendError(
                f"cannot mmap {length:#x} bytes of {self.path!r} at offset {offset:#x}: {exc}",
                path=self.path,
            ) from exc
        finally:
            os.close(fd)
        self._read = self._map.read32
        self._write = self._map.write32

    @property
    def size(self) -> int:
        """Size of the mapping in bytes (``length``)."""
        return self.length

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._map.closed

    @property
    def guarded(self) -> bool:
        """True when accesses run under the SIGBUS guard (the C extension is present)."""
        return GUARDED

    def read32(self, off: int) -> int:
        """The 32-bit word at byte offset ``off`` (4-byte aligned, inside the map)."""
        try:
            return self._read(off)
        except _Fault as exc:
            raise self._fault("read", off, exc) from None
        except (IndexError, TypeError, ValueError) as exc:
            raise self._refused(off, exc) from None

    def write32(self, off: int, value: int) -> None:
        """Store the 32-bit word ``value`` at byte offset ``off``."""
        try:
            self._write(off, value)
        except _Fault as exc:
            raise self._fault("write", off, exc) from None
        except OverflowError:
            raise WindowAccessError(
                f'{self.label}: "value" must be in 0..0xFFFFFFFF, got {value!r}',
                offset=off,
                value=value,
            ) from None
        except (IndexError, TypeError, ValueError) as exc:
            if isinstance(exc, TypeError) and type(off) is int:
                raise WindowAccessError(
                    f'{self.label}: "value" must be an int, got {value!r}', offset=off, value=value
                ) from None
            raise self._refused(off, exc) from None

    def _fault(self, op: str, off: int, exc: Exception) -> BusFaultError:
        addr = exc.args[1] if len(exc.args) > 1 else None
        where = f" (address {addr:#x})" if isinstance(addr, int) else ""
        return BusFaultError(
            f"{self.label}: bus error (SIGBUS) on a 32-bit {op} at offset {off:#x} of "
            f"{self.path}{where}",
            path=self.path,
            offset=off,
        )

    def _refused(self, off: object, exc: Exception) -> WindowAccessError | RegionEmptyError:
        if isinstance(exc, ValueError) and type(off) is int and self._map.closed:
            return RegionEmptyError(
                f"{self.label}: the map of {self.path} is closed", path=self.path
            )
        if type(off) is not int:
            why = "is not an int"
        elif off & 3:
            why = "is not 4-byte aligned"
        else:
            why = f"is outside 0..{self.length - 4:#x}"
        shown = f"{off:#x}" if type(off) is int else repr(off)
        return WindowAccessError(
            f"{self.label}: offset {shown} {why}",
            path=self.path,
            offset=off if type(off) is int else None,
        )

    def close(self) -> None:
        """Unmap (idempotent); later accesses raise RegionEmptyError."""
        self._map.close()

    def __enter__(self) -> GuardedMap:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._map.closed else "open"
        guard = "guarded" if GUARDED else "unguarded"
        return f"<GuardedMap {self.label} {self.length:#x} bytes, {guard}, {state}>"
