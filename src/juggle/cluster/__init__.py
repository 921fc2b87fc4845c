"""The juggle cluster: boards in a Ray cluster, each running a daemon (see docs/cluster.md)."""
