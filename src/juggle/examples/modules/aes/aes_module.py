"""Code of the ``aes`` co-module: AES-128 at three tiers, from juggle's reference service.

The descriptor names these classes as ``aes_module.<Class>``; the module adds nothing to them,
it packages them with the AES core's bitstream (ThumbPod's 11-cycle core, design ``"aes"``).
"""

from juggle.services.crypto import AesDriver, NativeAES, SoftwareAES
from juggle.services.crypto.aes_hw import AesCore

__all__ = ["AesCore", "AesDriver", "NativeAES", "SoftwareAES"]
