"""Modeled hardware-side timing of hardware threads (all figures here are *modeled*).

The CPU side of a hardware thread's OS call (the delegate waking up and running the kernel
function) is measured on this machine. What happens in the fabric cannot be measured here, so
it is counted in cycles of a zedboard-like 100 MHz fabric clock (the PLB/DCR buses of the
ReconOS prototypes also ran at 100 MHz):

* an OS call crosses the OSIF: a request handshake plus one DCR transfer per request word, and
  the same on the way back for the result words;
* a memory access is a bus transaction: a single word costs the bus latency; a burst costs one
  setup per ``burst_max_bytes`` block plus one cycle per 64-bit beat;
* a thread's own user-logic work is declared by the thread (``Busy(cycles)``).

The defaults are round figures of that class of system, not measurements of one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from juggle.errors import HwThreadArgumentError


@dataclass(frozen=True, slots=True)
class HwTiming:
    """Cycle costs of the fabric side; ``clock_hz`` converts cycles to time (modeled)."""

    clock_hz: float = 100e6
    osif_handshake_cycles: int = 2
    osif_word_cycles: int = 3
    bus_read_cycles: int = 20
    bus_write_cycles: int = 12
    burst_setup_cycles: int = 20
    burst_bytes_per_beat: int = 8
    burst_max_bytes: int = 128

    def __post_init__(self) -> None:
        """Reject non-positive figures.

        Raises:
            HwThreadArgumentError: a field is zero or negative.
        """
        for field in fields(self):
            value = getattr(self, field.name)
            if value <= 0:
                raise HwThreadArgumentError(
                    f'"{field.name}" must be > 0, got {value!r}', value=value
                )

    def osif_request_cycles(self, words: int) -> int:
        """Cycles for the thread to hand a ``words``-word request to its OSIF."""
        return self.osif_handshake_cycles + words * self.osif_word_cycles

    def osif_response_cycles(self, words: int) -> int:
        """Cycles for the thread to take a ``words``-word result back from its OSIF."""
        return self.osif_handshake_cycles + words * self.osif_word_cycles

    def burst_cycles(self, nbytes: int) -> int:
        """Bus cycles to move ``nbytes`` in bursts (0 bytes cost nothing)."""
        if nbytes <= 0:
            return 0
        bursts = math.ceil(nbytes / self.burst_max_bytes)
        beats = math.ceil(nbytes / self.burst_bytes_per_beat)
        return bursts * self.burst_setup_cycles + beats

    def seconds(self, cycles: float) -> float:
        """Modeled duration of ``cycles`` fabric cycles, in seconds."""
        return cycles / self.clock_hz
