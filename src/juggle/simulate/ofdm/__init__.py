"""Ker-ONE's OFDM experiment (paper 6.1) in virtual time.

:mod:`.experiment` runs it (:func:`~juggle.simulate.ofdm.experiment.run_ofdm`); :mod:`.shell`
is the virtual-time shell that carries out the allocator's actions in SimPy; :mod:`.costs`
holds Ker-ONE's allocation costs (Table 4, Eq. 5-8, T_RCFG from bitstream sizes); :mod:`.dsp`
the software tier of the four accelerators; :mod:`.plot` draws the allocation timeline.
"""
