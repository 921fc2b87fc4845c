"""The juggle daemon: one process owns the fabric; clients in their own processes.

``python -m juggle.daemon --socket PATH --state DIR`` (or ``juggle daemon``) runs it; a client
connects with :func:`connect` and uses services as in process::

    from juggle.daemon import connect
    client = connect("/run/juggle/juggle.sock")
    enc = client.get_service("EncryptionService")
    enc.load_key(key)
    enc.encrypt(buf, len(buf))          # in place, as in process

Identity comes from the kernel (``SO_PEERCRED``) and a tenant policy (TOML); see
``docs/daemon.md``. Remote clients connect over mutual TLS
(``connect(address="tls://HOST:PORT", tls=TlsClientConfig(cert, key, ca))``), known by their
certificate's CN.
"""

from juggle.daemon.client import (
    DEFAULT_SHM_THRESHOLD,
    Client,
    RemoteProxy,
    RemoteSignalChannel,
    SharedBuffer,
    connect,
)
from juggle.daemon.paths import default_socket_path
from juggle.daemon.server import Daemon
from juggle.daemon.tls import CertificateError, TlsClientConfig, TlsServerConfig
from juggle.errors import (
    AccessDeniedError,
    DaemonError,
    DaemonIdentityError,
    DaemonShuttingDownError,
    DaemonUnavailableError,
    LimitExceededError,
    PolicyError,
    ProtocolError,
    QuotaExceededError,
    RemoteError,
    UnsafePathError,
)

__all__ = [
    "DEFAULT_SHM_THRESHOLD",
    "AccessDeniedError",
    "CertificateError",
    "Client",
    "Daemon",
    "DaemonError",
    "DaemonIdentityError",
    "DaemonShuttingDownError",
    "DaemonUnavailableError",
    "LimitExceededError",
    "PolicyError",
    "ProtocolError",
    "QuotaExceededError",
    "RemoteError",
    "RemoteProxy",
    "RemoteSignalChannel",
    "SharedBuffer",
    "TlsClientConfig",
    "TlsServerConfig",
    "UnsafePathError",
    "connect",
    "default_socket_path",
]
