"""The ``hls.GcdService`` interface of the ``gcd`` co-module.

The descriptor names it ``hls.GcdService``; the framework finds it here, in the module's own
code (``hls.py``), before it looks among juggle's reference interfaces.

The service keeps no state between calls, so it can move between tiers at any moment and
nothing has to follow it.
"""

from __future__ import annotations

__all__ = ["GcdService"]


class GcdService:
    """The greatest common divisor of two unsigned 32-bit numbers."""

    def gcd(self, a: int, b: int) -> int:
        """``math.gcd(a, b)`` for ``a`` and ``b`` in ``0..0xFFFFFFFF``: an int in that range
        (``gcd(0, 0)`` is 0, ``gcd(n, 0)`` is ``n``).

        Raises :class:`~juggle.errors.ServiceArgumentError` naming the argument and its value
        when one is not an int or is outside ``0..0xFFFFFFFF``.
        """
        raise NotImplementedError
