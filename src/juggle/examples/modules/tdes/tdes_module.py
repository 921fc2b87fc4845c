"""Code of the ``tdes`` co-module: Triple-DES at three tiers, from juggle's reference service.

The descriptor names these classes as ``tdes_module.<Class>``; the module adds nothing to them,
it packages them with the TDES core's bitstream.
"""

from juggle.services.crypto import NativeTDES, SoftwareTDES, TdesDriver
from juggle.services.crypto.model import TdesCore

__all__ = ["NativeTDES", "SoftwareTDES", "TdesCore", "TdesDriver"]
