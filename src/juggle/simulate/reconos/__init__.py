"""The ReconOS paper's scenarios (Lübbers & Platzner), run on juggle's hardware threads.

:mod:`.sort` is the sort application of Fig. 4c (bubble-sort threads in software, in a
hardware slot, or both, and a merge thread; :func:`~juggle.simulate.reconos.sort.run_sort`)
and :mod:`.plot` draws its result; :mod:`.ecos` models Table 2's eCos/PowerPC column, every OS
call as a path of stated costs. The hardware-thread library itself is
:mod:`juggle.hwthreads`.
"""
