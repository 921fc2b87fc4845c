"""Code of the ``audio`` co-module: the IMA ADPCM decoder in software and on the ADPCM core.

The descriptor names these classes as ``audio_module.<Class>``. :func:`demo_stream` makes a
short ADPCM stream (a sine sweep) for trying the service out.
"""

from juggle.services.audio import (
    AdpcmCore,
    AdpcmDriver,
    SoftwareAdpcmDecoder,
    encode_ima_adpcm,
    sine_sweep,
)

__all__ = ["AdpcmCore", "AdpcmDriver", "SoftwareAdpcmDecoder", "demo_stream"]


def demo_stream(seconds: float = 1.0, rate: int = 8000) -> bytes:
    """A ``seconds``-long IMA ADPCM stream of a 220 Hz to 2 kHz sine sweep at ``rate`` Hz."""
    return encode_ima_adpcm(sine_sweep(seconds, rate=rate))
