"""Register map shared by the DES/TDES cores and their drivers (byte offsets, 32-bit registers).

=====  ==========  ====  ==================================================================
off    name        dir   meaning
=====  ==========  ====  ==================================================================
0x00   CONTROL     R/W   bit 0 START (write 1 to start a block), bit 1 DECRYPT (0 = encrypt)
0x04   STATUS      R     bit 0 BUSY, bit 1 DONE (result registers hold the last block's result)
0x08   DATA_HI     R/W   input block, bytes 0..3 (big-endian)
0x0C   DATA_LO     R/W   input block, bytes 4..7
0x10   RESULT_HI   R     output block, bytes 0..3
0x14   RESULT_LO   R     output block, bytes 4..7
0x20   KEY1_HI     R/W   key 1, bytes 0..3 (big-endian; reads back what was written)
0x24   KEY1_LO     R/W   key 1, bytes 4..7
0x28   KEY2_HI     R/W   key 2 (TDES only; on the DES core unmapped: reads 0, writes ignored)
0x2C   KEY2_LO     R/W
0x30   KEY3_HI     R/W   key 3 (TDES only)
0x34   KEY3_LO     R/W
0x38   LATENCY     R     core cycles per block (16 for DES, 48 for TDES)
0x3C   ID          R     core identifier: ``ID_DES`` or ``ID_TDES``
=====  ==========  ====  ==================================================================

A block is processed as in the Juggle paper (section 6.2): write DATA_HI/DATA_LO, write CONTROL
with START and the operation, poll STATUS until DONE, read RESULT_HI/RESULT_LO. START while the
core is BUSY is ignored. Unmapped offsets read 0 and ignore writes.

The key registers are readable because a core is time-multiplexed among consumers: the
driver's context save (``save_context``) reads the loaded key back through the window, and its
restore writes another consumer's key in, with register accesses only, so it works on every
backend. In a real design the key registers are readable only through the privileged control
window, which belongs to the runtime (the process that owns the fabric), never to a tenant: a
tenant reaches the core only through the driver's calls, none of which returns a key.
"""

from __future__ import annotations

__all__ = [
    "CONTROL",
    "CTRL_DECRYPT",
    "CTRL_START",
    "DATA_HI",
    "DATA_LO",
    "ID",
    "ID_DES",
    "ID_TDES",
    "KEY_HI",
    "KEY_LO",
    "LATENCY",
    "RESULT_HI",
    "RESULT_LO",
    "STATUS",
    "STATUS_BUSY",
    "STATUS_DONE",
    "WINDOW_SIZE",
]

CONTROL = 0x00
STATUS = 0x04
DATA_HI = 0x08
DATA_LO = 0x0C
RESULT_HI = 0x10
RESULT_LO = 0x14
#: KEYn_HI / KEYn_LO offsets for key n = 1, 2, 3 (index 0, 1, 2).
KEY_HI = (0x20, 0x28, 0x30)
KEY_LO = (0x24, 0x2C, 0x34)
LATENCY = 0x38
ID = 0x3C

CTRL_START = 0x1
CTRL_DECRYPT = 0x2
STATUS_BUSY = 0x1
STATUS_DONE = 0x2

ID_DES = 0x44455331  # "DES1"
ID_TDES = 0x54444553  # "TDES"

WINDOW_SIZE = 0x40
