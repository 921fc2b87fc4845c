"""The Juggle paper's Triple-DES figures in virtual time.

:mod:`.model` computes Fig 7 (throughput per tier against the buffer size,
:func:`~juggle.simulate.tdes.model.run_tdes`) and Fig 8 (energy per implementation,
:func:`~juggle.simulate.tdes.model.run_tdes_energy`); :mod:`.plot` draws Fig 7.
"""
