"""The cluster tests share one local Ray cluster (see cluster_support.py); it is started once
per module and every process it started is ended afterwards."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_support import LocalCluster


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[LocalCluster]:
    """A head and three board nodes, each board's daemon up; closed (and checked) after."""
    cluster = LocalCluster()
    try:
        yield cluster
    finally:
        cluster.close()
