"""The ``crc.ChecksumService`` interface of the ``crc32`` co-module.

The descriptor names it ``crc.ChecksumService``; the framework finds it here, in the module's own
code (``crc.py``), before it looks among juggle's reference interfaces.

The service keeps no state between calls: like :func:`zlib.crc32`, the running checksum is the
caller's, passed back in as ``value`` to continue over the next chunk. So the service can move
between tiers at any moment, even in the middle of a long message, and nothing has to follow it.
"""

from __future__ import annotations

__all__ = ["ChecksumService"]


class ChecksumService:
    """CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), the checksum of zlib and PNG."""

    def crc32(self, data: bytes, value: int = 0) -> int:
        """The CRC-32 of ``data`` continuing from ``value`` (the CRC of what came before, 0 at
        the start), exactly as ``zlib.crc32(data, value)``: an int in ``0..0xFFFFFFFF``.

        ``data`` is bytes-like; raises :class:`~juggle.errors.ServiceArgumentError` for any
        other type or for ``value`` outside ``0..0xFFFFFFFF``.
        """
        raise NotImplementedError
