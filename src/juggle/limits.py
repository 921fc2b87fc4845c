"""Limits on untrusted input, in one place.

Modules, descriptors, bitstreams, board profiles and filters arrive from outside. Every reader
checks its input against a :class:`Limits` *before* reading or parsing further (files by
``stat``, archive members by their declared sizes and compression ratio, text by length, parsers
by nesting depth and number size) and raises :class:`~juggle.errors.InputLimitError` naming the
value and the limit. ``DEFAULT_LIMITS`` applies unless a :class:`~juggle.runtime.framework.
Framework` is given its own (``Framework(limits=Limits(max_bitstream_bytes=...))``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from juggle.errors import InputLimitError

__all__ = ["DEFAULT_LIMITS", "Limits", "check_size"]

_MiB = 1 << 20


@dataclass(frozen=True, slots=True)
class Limits:
    """Upper bounds on what juggle reads from untrusted sources (bytes unless stated)."""

    #: a bitstream file (the largest part here, an xc7z020, takes ~4 MB for the whole device)
    max_bitstream_bytes: int = 64 * _MiB
    #: a module descriptor (``juggle.toml`` or co-module XML) and a board profile
    max_descriptor_bytes: int = 1 * _MiB
    #: one source file of module code (read by ``validate`` without running it)
    max_source_bytes: int = 4 * _MiB
    #: a module archive on disk
    max_archive_bytes: int = 256 * _MiB
    #: the sum of an archive's declared uncompressed member sizes
    max_unpacked_bytes: int = 512 * _MiB
    #: members of one archive
    max_members: int = 10_000
    #: declared uncompressed size / compressed size of one archive member
    max_compression_ratio: int = 200
    #: nesting of tables, arrays, XML elements and filter expressions
    max_depth: int = 32
    #: digits of one number in a descriptor, filter or version string
    max_number_digits: int = 40
    #: characters of an LDAP filter string
    max_filter_chars: int = 64 * 1024

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputLimitError(
                    f'Limits: "{f.name}" must be a positive int, got {value!r}', value=value
                )


DEFAULT_LIMITS = Limits()


def check_size(what: str, size: int, limit: int, name: str) -> None:
    """Raise :class:`InputLimitError` if ``size`` exceeds ``limit`` (``name``: the limit's
    field, so the message says how to raise it)."""
    if size > limit:
        raise InputLimitError(
            f"{what} is {size:,} bytes, over the limit of {limit:,} (Limits.{name})", path=what
        )
