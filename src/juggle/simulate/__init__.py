"""The virtual-time shell: the seed papers' experiments rerun on simulated boards.

Each paper's scenario is a package of its own: :mod:`.tdes` (Juggle's Figs 7 and 8),
:mod:`.router` (the edge router's Table 4 and Figs 3-4), :mod:`.ofdm` (Ker-ONE's OFDM
experiment) and :mod:`.reconos` (ReconOS's sort application and OS-call model);
:mod:`.thumbpod` is ThumbPod's Fig 3 in one module. :mod:`.plot_files` checks and writes the
figures they draw. The commands that run them are :mod:`juggle.commands.simulate`.
"""
