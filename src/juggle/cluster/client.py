"""The cluster client: proxies whose calls go straight to the chosen board's daemon.

::

    from juggle.cluster import connect
    from juggle.daemon.tls import TlsClientConfig

    cluster = connect("auto", tls=TlsClientConfig("alice.crt", "alice.key", "ca.crt"))
    enc = cluster.get_service("crypto.EncryptionService", "(algorithm=tdes)")
    enc.load_key(key)                  # recorded: replayed on every node the proxy moves to
    enc.encrypt(buf, len(buf))         # one TLS round trip to one board's daemon
    enc.node                           # the board serving it now

Ray is the control plane only: the client reads the directory from the cluster controller
(``juggle_cluster_controller``) at connect and every ``refresh_s`` s in a background thread;
calls never go through Ray. Where a proxy's calls go, for its service (the service ``key``,
``<module>/<interface>``, fixed at the first bind):

1. a live node whose region serves the service in hardware (several: spread over them, each
   proxy keeping its node by rendezvous hashing, this client's own proxies counted first);
2. else the least-loaded live node (its calls/s in the directory, plus this client's proxies
   there) that offers the service: its software or native tier.

A proxy moves when the directory says its node is gone (dead, a new daemon epoch) or when its
service reached hardware on another node while its node serves it from software; a proxy
on a hardware node stays there while it does. Moving acquires the service on the new node
and replays the proxy's state-setting calls (``load_key``...), recorded as the daemon client
records them for its reconnects: the consumer's state follows it.

Faults: a call that finds its node's daemon gone (connection refused or dropped, no reply
within ``call_timeout``) marks that node down in this client until the directory shows a
later epoch of it. An *idempotent* call is then made again on another node (within
``move_timeout_s``); any other call that may have run raises
:class:`~juggle.errors.DaemonUnavailableError`, once: the next call moves. Idempotent are the
interface's state-setting methods (setting the same state twice is setting it once), the
methods of :data:`IDEMPOTENT` for known interfaces (the ciphers: a call over TLS copies its
buffer, so running it again on the same input gives the same bytes), or instead those named
by ``get_service(..., idempotent=...)``.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import os
import socket
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from juggle.cluster.directory import (
    CONTROLLER_NAME,
    NAMESPACE,
    Directory,
    NodeReport,
    ServiceReport,
)
from juggle.daemon.client import Client, RemoteProxy
from juggle.daemon.client import connect as daemon_connect
from juggle.daemon.spin import DEFAULT_SPIN_US
from juggle.daemon.tls import TlsClientConfig
from juggle.errors import (
    ConfigurationError,
    DaemonUnavailableError,
    JuggleError,
    ServiceUnavailableError,
)
from juggle.runtime import RegionSnapshot, ServiceSnapshot, ServiceStatistics, parse_filter

__all__ = ["IDEMPOTENT", "ClusterClient", "ClusterProxy", "connect", "init_ray"]

#: Methods known to be idempotent, by interface (see the module's text).
IDEMPOTENT: Mapping[str, frozenset[str]] = {
    "crypto.EncryptionService": frozenset({"load_key", "encrypt", "decrypt"}),
    "math.AddService": frozenset({"add"}),
}
#: Errors that say a node's daemon cannot be reached (the node is marked down).
_UNREACHABLE = (DaemonUnavailableError, ConnectionError, TimeoutError)
_tokens = itertools.count(1)


def _score(token: str, node: str) -> bytes:
    return hashlib.blake2b(f"{token}\0{node}".encode(), digest_size=8).digest()


def _matches(svc: ServiceReport, interface: str, wanted: Any) -> bool:
    if interface not in svc.interfaces and interface != svc.interface:
        short = {i.rsplit(".", 1)[-1] for i in (*svc.interfaces, svc.interface)}
        if interface not in short:
            return False
    return wanted is None or bool(wanted.matches(svc.properties))


class ClusterProxy:
    """A proxy of one service of the cluster; its methods are the interface's. ``node`` is
    the board serving it now, ``key`` the service's cluster-wide name, ``moves`` every
    ``(from, to)`` node change, ``replays`` how many times its state was replayed on a new
    node, ``retries`` how many idempotent calls were made again elsewhere."""

    methods: tuple[str, ...] = ()

    def __init__(
        self,
        client: ClusterClient,
        interface: str,
        filter: str | None,
        idempotent: Iterable[str] | None,
    ) -> None:
        self._client = client
        self.interface = interface
        self._filter_text = filter
        self._filter = parse_filter(filter) if filter is not None else None
        self._idempotent_given = None if idempotent is None else frozenset(idempotent)
        self._idempotent = self._idempotent_given or frozenset()
        self._token = f"{os.getpid()}:{id(client)}:{next(_tokens)}"
        self._lock = threading.RLock()
        self._remote: RemoteProxy | None = None
        self._stale = False
        self._released = False
        self._setters: frozenset[str] = frozenset()
        self._methods: tuple[str, ...] = ()
        self._record: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        self.key: str | None = None
        self.node: str | None = None
        self.epoch = 0
        self.moves: list[tuple[str | None, str]] = []
        self.replays = 0
        self.retries = 0

    # -- where calls go -----------------------------------------------------------------------

    def _bind(self, deadline: float) -> RemoteProxy:
        """The remote proxy to call: the current one, or one acquired on the best node now
        (the recorded state replayed). Raises :class:`ServiceUnavailableError` when no node
        offers the service, :class:`DaemonUnavailableError` when none could be reached by
        ``deadline``."""
        client = self._client
        with self._lock:
            remote = self._remote
            if remote is not None and not self._stale:
                return remote
            if self._released:
                raise ServiceUnavailableError(
                    f"cluster proxy of {self.interface} was released", interface=self.interface
                )
            refreshed = False
            delay = 0.02
            last: BaseException | None = None
            while True:
                choice = client._choose(self)
                if choice is None:
                    if not refreshed:
                        refreshed = True
                        client._try_refresh()
                        continue
                    if last is None and self.key is None:
                        raise ServiceUnavailableError(
                            f"no live node of the cluster offers {self.interface}"
                            + (f" matching {self._filter_text}" if self._filter_text else ""),
                            interface=self.interface,
                        )
                    if time.monotonic() + delay > deadline:
                        raise DaemonUnavailableError(
                            f"no node of the cluster could serve {self.interface} within the "
                            f"move timeout ({last})"
                        )
                    time.sleep(delay)  # a back-off while the cluster re-places: not a sync
                    delay = min(delay * 2, 0.2)
                    client._try_refresh()
                    continue
                node, svc = choice
                try:
                    remote = self._acquire(node, svc)
                except (*_UNREACHABLE, ServiceUnavailableError) as exc:
                    last = exc
                    client._mark_down(node.name, node.epoch)
                    if isinstance(exc, ServiceUnavailableError):
                        client._try_refresh()
                    if time.monotonic() > deadline:
                        raise DaemonUnavailableError(
                            f"no node of the cluster could serve {self.interface} within the "
                            f"move timeout (last: {node.name}: {exc})"
                        ) from None
                    continue
                old, self._remote = self._remote, remote
                if old is not None:
                    client._release(old)
                previous = self.node
                self.key, self.node, self.epoch = svc.key, node.name, node.epoch
                self._stale = False
                if previous != node.name:
                    self.moves.append((previous, node.name))
                client._assign(previous, node.name)
                return remote

    def _acquire(self, node: NodeReport, svc: ServiceReport) -> RemoteProxy:
        daemon = self._client._daemon(node)
        pinned = f"(service.id={svc.service_id})"
        wanted = pinned if self._filter is None else f"(&{self._filter}{pinned})"
        remote: RemoteProxy = daemon.get_service(self.interface, filter=wanted)
        self._setters = frozenset(remote._setters)
        self._methods = tuple(remote.methods)
        if self._idempotent_given is None:
            self._idempotent = IDEMPOTENT.get(remote.interface, frozenset())
        if self._record:
            for name, (args, kwargs) in self._record.items():
                remote._call(name, args, kwargs)
            self.replays += 1
        return remote

    def _consider(self, directory: Directory) -> None:
        """Mark this proxy to move at its next call if ``directory`` says it should."""
        node_name, key = self.node, self.key
        if node_name is None or key is None or self._stale:
            return
        node = directory.node(node_name)
        if node is None or not node.alive or node.epoch != self.epoch:
            self._stale = True
            return
        here = next((s for s in node.services if s.key == key), None)
        if here is None:
            self._stale = True
            return
        if not here.in_hardware and directory.hardware_nodes(key):
            self._stale = True

    # -- calls --------------------------------------------------------------------------------

    def _call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        remote = self._remote
        if remote is None or self._stale:
            remote = self._bind(time.monotonic() + self._client.move_timeout_s)
        try:
            result = remote._call(name, args, kwargs)
        except _UNREACHABLE as exc:
            return self._failed(remote, name, args, kwargs, exc)
        if name in self._setters:
            self._remember(name, args, kwargs)
        return result

    def _remember(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        with self._lock:
            self._record[name] = (
                tuple(bytes(a) if isinstance(a, bytearray | memoryview) else a for a in args),
                dict(kwargs),
            )

    def _drop(self, remote: RemoteProxy) -> None:
        with self._lock:
            if self._remote is remote:
                self._client._mark_down(self.node, self.epoch)
                self._remote = None

    def _failed(
        self,
        remote: RemoteProxy,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        exc: BaseException,
    ) -> Any:
        self._drop(remote)
        if name not in self._idempotent and name not in self._setters:
            raise exc  # it may have run: at most once; the next call moves
        deadline = time.monotonic() + self._client.move_timeout_s
        while True:
            remote = self._bind(deadline)
            self.retries += 1
            try:
                result = remote._call(name, args, kwargs)
            except _UNREACHABLE as again:
                self._drop(remote)
                if time.monotonic() > deadline:
                    raise again
                continue
            if name in self._setters:
                self._remember(name, args, kwargs)
            return result

    def release(self) -> None:
        """Give the proxy back on its node; its further calls raise."""
        with self._lock:
            self._released = True
            remote, self._remote = self._remote, None
            node, self.node = self.node, None
        if remote is not None:
            self._client._release(remote)
        self._client._assign(node, None)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.key or self.interface} on {self.node}>"


def _method(name: str) -> Callable[..., Any]:
    def method(self: ClusterProxy, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, args, kwargs)

    method.__name__ = name
    method.__qualname__ = f"ClusterProxy.{name}"
    return method


_RESERVED = frozenset(dir(ClusterProxy)) | {"interface", "key", "node", "epoch", "moves"}


def _proxy_class(interface: str, methods: Iterable[str]) -> type[ClusterProxy]:
    names = tuple(m for m in methods if m.isidentifier() and not m.startswith("_"))
    attrs: dict[str, Any] = {n: _method(n) for n in names if n not in _RESERVED}
    attrs["methods"] = names
    short = interface.rsplit(".", 1)[-1]
    return type(f"{short}ClusterProxy", (ClusterProxy,), attrs)


class ClusterClient:
    """A client of the whole cluster (see :func:`connect` and the module's text).

    ``directory``: returns the controller's directory (a Ray call under :func:`connect`);
    ``tls``: this client's certificate (None: nodes are reached through their Unix sockets,
    on the same host only)."""

    def __init__(
        self,
        directory: Callable[[], Directory],
        tls: TlsClientConfig | None,
        *,
        refresh_s: float | None = 0.5,
        call_timeout: float | None = 10.0,
        move_timeout_s: float = 10.0,
        connect_timeout: float = 5.0,
        spin_us: float = DEFAULT_SPIN_US,
    ) -> None:
        for name, value in (("move_timeout_s", move_timeout_s), ("refresh_s", refresh_s)):
            if value is not None and not 0 < value <= 3600:
                raise ConfigurationError(
                    f'"{name}" must be in (0, 3600] s, got {value!r}', value=value
                )
        self._source = directory
        self.tls = tls
        self.refresh_s = refresh_s
        self.call_timeout = call_timeout
        self.move_timeout_s = move_timeout_s
        self.connect_timeout = connect_timeout
        self.spin_us = spin_us
        self._lock = threading.RLock()
        self._daemons: dict[str, tuple[int, str, Client]] = {}
        self._down: dict[str, int] = {}
        self._assigned: Counter[str] = Counter()
        self._proxies: weakref.WeakSet[ClusterProxy] = weakref.WeakSet()
        self._classes: dict[tuple[str, tuple[str, ...]], type[ClusterProxy]] = {}
        self._closed = threading.Event()
        self._directory = Directory()
        self.refresh()
        self._thread: threading.Thread | None = None
        if refresh_s is not None:
            self._thread = threading.Thread(
                target=self._refresher, name="juggle-cluster-client", daemon=True
            )
            self._thread.start()

    # -- the directory ------------------------------------------------------------------------

    @property
    def directory(self) -> Directory:
        """The directory as this client last read it."""
        return self._directory

    def refresh(self) -> Directory:
        """Read the directory now; proxies that should move (their node gone, their service
        in hardware elsewhere) move at their next call. Returns it."""
        directory = self._source()
        with self._lock:
            self._directory = directory
            for node in directory.nodes:
                down = self._down.get(node.name)
                if down is not None and node.alive and node.epoch > down:
                    del self._down[node.name]
            proxies = list(self._proxies)
        for proxy in proxies:
            proxy._consider(directory)
        return directory

    def _try_refresh(self) -> None:
        """:meth:`refresh`, going on with the directory at hand when the controller cannot
        be reached (the nodes may well be)."""
        with contextlib.suppress(Exception):
            self.refresh()

    def _refresher(self) -> None:
        assert self.refresh_s is not None
        while not self._closed.wait(self.refresh_s):
            with contextlib.suppress(Exception):
                self.refresh()

    def _usable(self, node: NodeReport) -> bool:
        down = self._down.get(node.name)
        return node.alive and (down is None or node.epoch > down)

    def _mark_down(self, node: str | None, epoch: int) -> None:
        if node is None:
            return
        with self._lock:
            self._down[node] = max(epoch, self._down.get(node, 0))
            entry = self._daemons.pop(node, None)
        if entry is not None:
            with contextlib.suppress(Exception):
                entry[2].close()

    def _assign(self, old: str | None, new: str | None) -> None:
        with self._lock:
            if old is not None and self._assigned[old] > 0:
                self._assigned[old] -= 1
            if new is not None:
                self._assigned[new] += 1

    def _choose(self, proxy: ClusterProxy) -> tuple[NodeReport, ServiceReport] | None:
        """The node ``proxy``'s calls should go to now, with its service there (None: no
        usable node offers it)."""
        with self._lock:
            directory = self._directory
            offers: list[tuple[NodeReport, ServiceReport]] = []
            for node in directory.nodes:
                if not self._usable(node):
                    continue
                for svc in node.services:
                    if proxy.key is not None:
                        if svc.key == proxy.key:
                            offers.append((node, svc))
                    elif _matches(svc, proxy.interface, proxy._filter):
                        offers.append((node, svc))
            if not offers:
                return None
            if proxy.key is None:
                keys = sorted({s.key for _, s in offers})
                in_hw = [k for k in keys if any(s.in_hardware for _, s in offers if s.key == k)]
                key = (in_hw or keys)[0]
                offers = [(n, s) for n, s in offers if s.key == key]
            assigned = self._assigned
            current = proxy.node
            hardware = [(n, s) for n, s in offers if s.in_hardware]
            if hardware:

                def hw_rank(item: tuple[NodeReport, ServiceReport]) -> tuple[int, bytes]:
                    name = item[0].name
                    mine = assigned[name] - (1 if name == current else 0)
                    return (mine, _score(proxy._token, name))

                return min(hardware, key=hw_rank)

            def sw_rank(item: tuple[NodeReport, ServiceReport]) -> tuple[float, bytes]:
                name = item[0].name
                mine = assigned[name] - (1 if name == current else 0)
                return (item[0].load_per_s + mine, _score(proxy._token, name))

            return min(offers, key=sw_rank)

    def _daemon(self, node: NodeReport) -> Client:
        """This client's connection to ``node``'s daemon (made when missing)."""
        with self._lock:
            entry = self._daemons.get(node.name)
            if (
                entry is not None
                and entry[0] == node.epoch
                and entry[1] == node.address
                and entry[2].connected
            ):
                return entry[2]
            if entry is not None:
                del self._daemons[node.name]
        if entry is not None:
            with contextlib.suppress(Exception):
                entry[2].close()
        if node.address.startswith("unix:"):
            client = daemon_connect(
                node.address[len("unix:") :],
                timeout=self.connect_timeout,
                call_timeout=self.call_timeout,
                spin_us=self.spin_us,
            )
        else:
            client = daemon_connect(
                address=node.address,
                tls=self.tls,
                timeout=self.connect_timeout,
                call_timeout=self.call_timeout,
                spin_us=self.spin_us,
            )
        with self._lock:
            self._daemons[node.name] = (node.epoch, node.address, client)
        return client

    def _release(self, remote: RemoteProxy) -> None:
        with contextlib.suppress(JuggleError, OSError):
            remote._client.unget_service(remote)

    def _daemons_up(self) -> list[tuple[str, Client]]:
        out = []
        for node in self._directory.nodes:
            if not self._usable(node):
                continue
            try:
                out.append((node.name, self._daemon(node)))
            except _UNREACHABLE:
                self._mark_down(node.name, node.epoch)
        return out

    # -- services -----------------------------------------------------------------------------

    def get_service(
        self,
        interface: str,
        filter: str | None = None,
        *,
        idempotent: Iterable[str] | None = None,
    ) -> Any:
        """A cluster proxy of the best service for ``interface`` matching ``filter`` (see
        the module's text for which node serves it); ``idempotent``: the methods that may be
        made again on another node when their node fails (None: :data:`IDEMPOTENT`'s for the
        interface; the state-setting methods always are). Raises
        :class:`ServiceUnavailableError` when no live node offers one,
        :class:`~juggle.errors.FilterSyntaxError` for a bad filter, what the daemon raises
        (:class:`~juggle.errors.AccessDeniedError`, ...)."""
        proxy = ClusterProxy(self, interface, filter, idempotent)
        proxy._bind(time.monotonic() + self.move_timeout_s)
        methods = proxy._methods
        key = (interface, methods)
        cls = self._classes.get(key)
        if cls is None:
            cls = self._classes[key] = _proxy_class(interface, methods)
        proxy.__class__ = cls
        with self._lock:
            self._proxies.add(proxy)
        return proxy

    def unget_service(self, proxy: ClusterProxy) -> None:
        """Give ``proxy`` back; its further calls raise."""
        proxy.release()

    def nodes(self) -> tuple[NodeReport, ...]:
        """Every board the directory knows, alive or not."""
        return self._directory.nodes

    def services(self) -> tuple[tuple[str, ServiceSnapshot], ...]:
        """``(node, snapshot)`` of every service on every live node, as each daemon shows
        them to this client's tenant."""
        out: list[tuple[str, ServiceSnapshot]] = []
        for name, daemon in self._daemons_up():
            with contextlib.suppress(*_UNREACHABLE):
                out += [(name, s) for s in daemon.services()]
        return tuple(out)

    def regions(self) -> tuple[tuple[str, RegionSnapshot], ...]:
        """``(node, snapshot)`` of every region of every live node."""
        out: list[tuple[str, RegionSnapshot]] = []
        for name, daemon in self._daemons_up():
            with contextlib.suppress(*_UNREACHABLE):
                out += [(name, r) for r in daemon.regions()]
        return tuple(out)

    def statistics(self, service: ClusterProxy | str) -> dict[str, ServiceStatistics]:
        """Call statistics of a service (a cluster proxy, or a service key) on every live
        node that has it, by node: this tenant's own calls (every consumer's for an admin).
        Raises :class:`ServiceUnavailableError` for a proxy never bound or an unknown key."""
        key = service.key if isinstance(service, ClusterProxy) else service
        if key is None:
            raise ServiceUnavailableError("the proxy serves no service", interface=None)
        out: dict[str, ServiceStatistics] = {}
        found = False
        for node in self._directory.nodes:
            svc = next((s for s in node.services if s.key == key), None)
            if svc is None or not self._usable(node):
                continue
            found = True
            try:
                out[node.name] = self._daemon(node).statistics(svc.service_id)
            except _UNREACHABLE:
                self._mark_down(node.name, node.epoch)
        if not found:
            raise ServiceUnavailableError(
                f"no live node of the cluster has service {key!r}", interface=key
            )
        return out

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Close every connection to the nodes and stop reading the directory."""
        self._closed.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(10)
        with self._lock:
            daemons, self._daemons = self._daemons, {}
        for _, _, client in daemons.values():
            with contextlib.suppress(Exception):
                client.close()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        alive = sum(1 for n in self._directory.nodes if n.alive)
        return f"<juggle ClusterClient {alive}/{len(self._directory.nodes)} nodes alive>"


def init_ray(address: str, *, timeout: float = 5.0) -> None:
    """Connect this process to the Ray cluster at ``address`` (namespace ``juggle``). An
    address ``HOST:PORT`` is probed first (TCP, ``timeout`` s), since Ray itself waits
    minutes for a cluster that is not there. Raises :class:`ConfigurationError` naming the
    address when nothing answers."""
    import ray

    host, sep, port = address.rpartition(":")
    if sep and "://" not in address and port.isdigit():
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
        except OSError as exc:
            raise ConfigurationError(
                f"no Ray cluster answers at {address!r}: {exc}", value=address
            ) from None
    try:
        ray.init(
            address=address,
            namespace=NAMESPACE,
            logging_level=logging.WARNING,
            log_to_driver=False,
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ConfigurationError(
            f"no Ray cluster answers at {address!r}: {exc}", value=address
        ) from None


def connect(
    address: str | None = None,
    *,
    tls: TlsClientConfig | None = None,
    refresh_s: float | None = 0.5,
    call_timeout: float | None = 10.0,
    move_timeout_s: float = 10.0,
    spin_us: float = DEFAULT_SPIN_US,
) -> ClusterClient:
    """Connect to the juggle cluster of the Ray cluster at ``address`` (default ``"auto"``;
    an already connected driver or task uses its own connection): read the directory from
    the controller; calls go to the boards' daemons over TLS with ``tls`` (this tenant's
    certificate; None: through the nodes' Unix sockets, same host only).

    ``refresh_s``: how often the directory is read again (None: only by
    :meth:`ClusterClient.refresh`); ``call_timeout``: a call's bound on its node (a node that
    does not answer in time counts as down); ``move_timeout_s``: how long a proxy looks for
    another node. Raises :class:`ConfigurationError` when no controller runs (naming the
    address), ``ImportError`` naming the extra when ray is missing."""
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError(
            "juggle.cluster.connect needs ray: install the extra, pip install 'juggle[cluster]'"
        ) from exc
    if not ray.is_initialized():
        init_ray(address or "auto")
    try:
        controller = ray.get_actor(CONTROLLER_NAME, namespace=NAMESPACE)
    except ValueError:
        raise ConfigurationError(
            f"no juggle cluster controller ({CONTROLLER_NAME!r} in namespace {NAMESPACE!r}) "
            f"runs in the Ray cluster at {address or 'auto'}: start one with "
            "juggle.cluster.start_controller()",
            value=address or "auto",
        ) from None

    def directory() -> Directory:
        ref: Any = controller.directory.remote()
        result: Any = ray.get(ref, timeout=30)
        assert isinstance(result, Directory)
        return result

    return ClusterClient(
        directory,
        tls,
        refresh_s=refresh_s,
        call_timeout=call_timeout,
        move_timeout_s=move_timeout_s,
        spin_us=spin_us,
    )
