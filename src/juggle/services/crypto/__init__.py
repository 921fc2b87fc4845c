"""The ``crypto.EncryptionService`` reference service: DES and Triple-DES at three tiers.

- software: :class:`SoftwareDES`, :class:`SoftwareTDES` (pure Python, :mod:`.des`);
- native: :class:`NativeDES`, :class:`NativeTDES` (pycryptodome);
- hardware: :class:`DesDriver`, :class:`TdesDriver` over an MMIO window, backed on the simulated
  fabric by the core models :class:`~juggle.services.crypto.model.DesCore` and
  :class:`~juggle.services.crypto.model.TdesCore`.

AES-128 (``algorithm = "aes"``, 16-byte key and blocks) is the same service at three tiers:
:class:`SoftwareAES` (:mod:`.aes`), :class:`NativeAES` (:mod:`.aes_native`) and
:class:`AesDriver` over ThumbPod's 11-cycle core, modeled by :class:`AesCore` (:mod:`.aes_hw`).

All tiers give identical bytes for the same key and input (ECB, in place; 8-byte blocks for
DES/TDES, 16 for AES-128).
"""

from juggle.services.crypto.aes import SoftwareAES
from juggle.services.crypto.aes_hw import AesCore, AesDriver
from juggle.services.crypto.aes_native import NativeAES
from juggle.services.crypto.driver import DesDriver, TdesDriver
from juggle.services.crypto.interface import BLOCK_SIZE, EncryptionService
from juggle.services.crypto.model import DesCore, TdesCore
from juggle.services.crypto.native import NativeDES, NativeTDES
from juggle.services.crypto.software import SoftwareDES, SoftwareTDES

__all__ = [
    "BLOCK_SIZE",
    "AesCore",
    "AesDriver",
    "DesCore",
    "DesDriver",
    "EncryptionService",
    "NativeAES",
    "NativeDES",
    "NativeTDES",
    "SoftwareAES",
    "SoftwareDES",
    "SoftwareTDES",
    "TdesCore",
    "TdesDriver",
]
