"""Reference services, each with the same signature at every tier.

- :mod:`juggle.services.crypto`: ``crypto.EncryptionService`` (DES, Triple-DES);
- :mod:`juggle.services.arith`: ``math.AddService``, ``math.MulService`` (Juggle Listing 3);
- :mod:`juggle.services.audio`: ``audio.DecoderService`` (IMA ADPCM).

Hardware tiers are drivers over an MMIO window; their cores' register models live next to them
and are what the simulated fabric puts behind a region's window.
"""
