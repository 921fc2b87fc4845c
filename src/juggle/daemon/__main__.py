"""``python -m juggle.daemon``: run the juggle daemon (see :mod:`juggle.daemon.command` and
:mod:`juggle.daemon.server`)."""

from __future__ import annotations

import sys

from juggle.daemon.command import default_state_dir, main, tls_config

__all__ = ["default_state_dir", "main", "tls_config"]

if __name__ == "__main__":
    sys.exit(main())
