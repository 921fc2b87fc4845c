"""Code of the ``math`` co-module (Juggle Listing 3): adder and multiplier services.

Inside the module this package is ``math``, so the descriptor's ``math.MathAddImpl`` resolves
here and not to Python's :mod:`math` (the module's code lives in a namespace of its own).
"""

from juggle.services.arith import AdderDriver, MultiplierDriver, SoftwareAdd, SoftwareMul

__all__ = ["MathAddDriver", "MathAddImpl", "MathMulDriver", "MathMulImpl"]


class MathAddImpl(SoftwareAdd):
    """``math.AddService`` in software: Java int addition."""


class MathAddDriver(AdderDriver):
    """``math.AddService`` on the adder core (constructed with the region's MMIO window)."""


class MathMulImpl(SoftwareMul):
    """``math.MulService`` in software: Java int multiplication."""


class MathMulDriver(MultiplierDriver):
    """``math.MulService`` on the multiplier core (constructed with the region's MMIO window)."""
