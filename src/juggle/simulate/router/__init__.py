"""The reconfigurable multi-service edge router (Kachris & Vassiliadis, SBCCI 2007) in
virtual time.

:mod:`.model` is the router on the simulated ``virtex4-router`` board (FIFOs, pools of
processors and co-processors from :mod:`.units`, the reconfigurable part of :mod:`.reconfig`);
:mod:`.traffic` generates its seeded packet traces; :mod:`.experiments` reruns the paper's
Table 4 and Figs 3-4 (:func:`~juggle.simulate.router.experiments.run_edge_router`) and
:mod:`.plot` draws them.
"""
