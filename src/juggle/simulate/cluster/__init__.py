"""``juggle simulate cluster``: placement policies across a cluster of boards, in virtual
time (:mod:`.model` for the model, :mod:`.trace` for its seeded inputs, :mod:`.scale` for the
issue's 256-board check)."""

from juggle.simulate.cluster.model import (
    POLICIES,
    ClusterConfig,
    PolicyResult,
    run_cluster,
    simulate,
)

__all__ = ["POLICIES", "ClusterConfig", "PolicyResult", "run_cluster", "simulate"]
