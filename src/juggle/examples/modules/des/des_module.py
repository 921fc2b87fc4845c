"""Code of the ``des`` co-module: DES at three tiers, from juggle's reference service.

The descriptor names these classes as ``des_module.<Class>``; the module adds nothing to them,
it packages them with the DES core's bitstream.
"""

from juggle.services.crypto import DesDriver, NativeDES, SoftwareDES

__all__ = ["DesDriver", "NativeDES", "SoftwareDES"]
