"""The ``crypto.EncryptionService`` reference service: DES and Triple-DES at three tiers.

- software: :class:`SoftwareDES`, :class:`SoftwareTDES` (pure Python, :mod:`.des`);
- native: :class:`NativeDES`, :class:`NativeTDES` (pycryptodome);
- hardware: :class:`DesDriver`, :class:`TdesDriver` over an MMIO window, backed on the simulated
  fabric by the core models :class:`~juggle.services.crypto.model.DesCore` and
  :class:`~juggle.services.crypto.model.TdesCore`.

All tiers give identical bytes for the same key and input (ECB, in place, 8-byte blocks).
"""

from juggle.services.crypto.driver import DesDriver, TdesDriver
from juggle.services.crypto.interface import BLOCK_SIZE, EncryptionService
from juggle.services.crypto.model import DesCore, TdesCore
from juggle.services.crypto.native import NativeDES, NativeTDES
from juggle.services.crypto.software import SoftwareDES, SoftwareTDES

__all__ = [
    "BLOCK_SIZE",
    "DesCore",
    "DesDriver",
    "EncryptionService",
    "NativeDES",
    "NativeTDES",
    "SoftwareDES",
    "SoftwareTDES",
    "TdesCore",
    "TdesDriver",
]
