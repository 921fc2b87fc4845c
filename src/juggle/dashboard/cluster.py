"""The cluster page: the boards of a juggle cluster, their regions and their load, live.

The page is fed by a *status source*: any callable returning the cluster's status document
(what ``juggle cluster status --json`` prints, :func:`juggle.cluster.directory.status_document`).
A test gives a fixed document; ``juggle cluster dashboard`` gives a
:class:`ControllerSource`, which reads the directory from the cluster controller (a Ray actor)
at every request. :func:`cluster_view` checks the document and adds a summary;
``GET /api/cluster`` serves that view, ``GET /cluster`` the page that polls it every second.

Figures: load and call rates, call counts and software means are *measured* by the boards'
daemons; a hardware mean is *measured* on a real fabric and *modeled* on a simulated one (each
service's own ``labels``); ``fetched_at`` is the wall clock of the dashboard's host when it
read the document (*measured*). Every answer labels its figures as the ``--json`` documents
do: a numeric leaf takes its kind from the nearest enclosing ``labels`` entry for the key
down to it (tests/test_json_labels.py's rule).
"""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from juggle.dashboard.app import LOOPBACK_HOSTS, refuse_foreign_host
from juggle.dashboard.page import BASE_CSS
from juggle.errors import ConfigurationError, JuggleError, ProtocolError

__all__ = [
    "CLUSTER_PAGE",
    "ControllerSource",
    "StatusSource",
    "add_cluster_routes",
    "cluster_view",
    "create_cluster_app",
    "make_cluster_server",
    "serve_cluster",
]

#: A callable returning the cluster's status document (``juggle cluster status --json``);
#: it raises a :class:`~juggle.errors.JuggleError` when it cannot read one.
StatusSource = Callable[[], Mapping[str, Any]]

#: The kind of each figure of ``GET /api/cluster`` (a service's hardware mean is labelled by
#: the service's own ``labels``: measured, or modeled on a simulated board).
VIEW_LABELS: dict[str, Any] = {
    "generation": "measured",  # directory updates counted by the controller
    "period": "measured",  # controller periods run so far
    "fetched_at": "measured",  # the dashboard host's wall clock when it read the document
    "summary": "measured",  # counts and the sum of the live nodes' measured loads
    "nodes": {
        "epoch": "measured",  # daemon starts of the board counted by its agent
        "load_per_s": "measured",
        "services": {
            "calls": "measured",
            "hardware_calls": "measured",
            "calls_per_s": "measured",
            "software_mean_us": "measured",
        },
    },
}
#: The kinds a service's hardware mean can have.
HARDWARE_LABELS = ("measured", "modeled")

#: The operation named by a :class:`ProtocolError` about a malformed status document.
OPERATION = "cluster status"

_NUMBER = (int, float)


def _get(item: Mapping[str, Any], key: str, kinds: tuple[type, ...], where: str) -> Any:
    """``item[key]``, which must be one of ``kinds`` (a bool is no number). Raises
    :class:`ProtocolError` naming the key otherwise."""
    if not isinstance(item, Mapping):
        raise ProtocolError(
            f"the cluster status document's {where} must be an object, got {type(item).__name__}",
            operation=OPERATION,
            value=where,
        )
    value = item.get(key)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
        raise ProtocolError(
            f"the cluster status document's {where}.{key} must be {names}, got {value!r:.80}",
            operation=OPERATION,
            value=f"{where}.{key}",
        )
    return value


def _number(value: Any) -> float | None:
    """A figure as JSON: a finite float, or None (none yet, or not finite)."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _hardware_label(service: Any, where: str) -> str:
    """The kind of ``service``'s hardware mean in a status document (see
    :func:`cluster_view`). Raises :class:`ProtocolError` when it is missing or no kind."""
    labels = service.get("labels") if isinstance(service, Mapping) else None
    if isinstance(labels, Mapping) and "hardware_mean_us" in labels:
        label, field = labels["hardware_mean_us"], f"{where}.labels.hardware_mean_us"
    else:
        label, field = (
            _get(service, "hardware_mean_label", (str,), where),
            f"{where}.hardware_mean_label",
        )
    if label not in HARDWARE_LABELS:
        raise ProtocolError(
            f"the cluster status document's {field} must be measured or modeled, got {label!r:.80}",
            operation=OPERATION,
            value=field,
        )
    return str(label)


def cluster_view(document: Mapping[str, Any], fetched_at: float) -> dict[str, Any]:
    """What the cluster page shows of a status ``document`` read at ``fetched_at`` (wall
    clock, seconds): every node (alive, epoch, address, load, error), its regions and the
    service each holds, its services (tier, region, calls, calls/s, means and the hardware
    mean's kind in its ``labels``); a ``summary`` (nodes, alive nodes, regions, regions
    holding a service, services in hardware, the live nodes' load in calls/s); ``labels``
    saying what kind each figure is. Nodes come sorted by name. A service's hardware mean
    label is its ``labels.hardware_mean_us`` in the document, else its
    ``hardware_mean_label``.

    Raises :class:`ProtocolError` (``operation`` "cluster status", ``value`` the offending
    field) when the document lacks a field or has one of another type; nothing is kept.
    """
    nodes_in = _get(document, "nodes", (list, tuple), "document")
    nodes: list[dict[str, Any]] = []
    for index, node in enumerate(nodes_in):
        where = f"nodes[{index}]"
        alive = _get(node, "alive", (bool,), where)
        regions = [
            {
                "name": _get(r, "name", (str,), f"{where}.regions[{i}]"),
                "state": _get(r, "state", (str,), f"{where}.regions[{i}]"),
                "service": _get(r, "service", (str, type(None)), f"{where}.regions[{i}]"),
            }
            for i, r in enumerate(_get(node, "regions", (list, tuple), where))
        ]
        services = []
        for i, s in enumerate(_get(node, "services", (list, tuple), where)):
            at = f"{where}.services[{i}]"
            label = _hardware_label(s, at)
            services.append(
                {
                    "key": _get(s, "key", (str,), at),
                    "tier": _get(s, "tier", (str,), at),
                    "region": _get(s, "region", (str, type(None)), at),
                    "calls": _get(s, "calls", (int,), at),
                    "hardware_calls": _get(s, "hardware_calls", (int,), at),
                    "calls_per_s": _number(_get(s, "calls_per_s", _NUMBER, at)),
                    "software_mean_us": _number(
                        _get(s, "software_mean_us", (*_NUMBER, type(None)), at)
                    ),
                    "hardware_mean_us": _number(
                        _get(s, "hardware_mean_us", (*_NUMBER, type(None)), at)
                    ),
                    "labels": {"hardware_mean_us": label},
                }
            )
        nodes.append(
            {
                "name": _get(node, "name", (str,), where),
                "alive": alive,
                "epoch": _get(node, "epoch", (int,), where),
                "address": _get(node, "address", (str,), where),
                "load_per_s": _number(_get(node, "load_per_s", _NUMBER, where)),
                "error": _get(node, "error", (str, type(None)), where),
                "regions": regions,
                "services": services,
            }
        )
    nodes.sort(key=lambda n: n["name"])
    live = [n for n in nodes if n["alive"]]
    return {
        "generation": _get(document, "generation", (int,), "document"),
        "period": _get(document, "period", (int,), "document"),
        "fetched_at": fetched_at,
        "summary": {
            "nodes": len(nodes),
            "alive": len(live),
            "regions": sum(len(n["regions"]) for n in nodes),
            "regions_held": sum(1 for n in live for r in n["regions"] if r["service"]),
            "services_in_hardware": len(
                {s["key"] for n in live for s in n["services"] if s["tier"] == "hardware"}
            ),
            "load_per_s": sum(n["load_per_s"] or 0.0 for n in live),
        },
        "nodes": nodes,
        "labels": VIEW_LABELS,
    }


def add_cluster_routes(
    app: FastAPI, source: StatusSource, *, clock: Callable[[], float] = time.time
) -> None:
    """Serve the cluster page on ``app``: ``GET /cluster`` (the page) and ``GET /api/cluster``
    (:func:`cluster_view` of what ``source`` returns, read at ``clock()``). When ``source``
    raises a :class:`~juggle.errors.JuggleError` (no controller answers, a malformed
    document), ``/api/cluster`` answers 503 with ``{"error", "type", ...attributes}``."""

    @app.get("/cluster", response_class=HTMLResponse)
    def cluster_page() -> HTMLResponse:
        return HTMLResponse(CLUSTER_PAGE)

    @app.get("/api/cluster")
    def cluster_api() -> Any:
        try:
            return cluster_view(source(), clock())
        except JuggleError as exc:
            body: dict[str, object] = {"error": str(exc), "type": type(exc).__name__}
            body.update(exc.attributes())
            return JSONResponse(body, status_code=503)


def create_cluster_app(
    source: StatusSource,
    *,
    hosts: frozenset[str] | None = None,
    clock: Callable[[], float] = time.time,
) -> FastAPI:
    """A read-only FastAPI app of the cluster page over ``source`` (see
    :func:`add_cluster_routes`); ``/`` redirects to ``/cluster``. With ``hosts`` (names
    without port), a request whose ``Host`` header names another host is refused with 403
    (DNS rebinding). It changes nothing, so it takes no token."""
    app = FastAPI(title="juggle cluster dashboard", docs_url=None, redoc_url=None)
    app.state.source = source

    @app.middleware("http")
    async def _guard(request: Request, call_next: Any) -> Response:
        refused = refuse_foreign_host(request, hosts)
        if refused is not None:
            return refused
        response: Response = await call_next(request)
        return response

    @app.get("/")
    def root() -> RedirectResponse:
        return RedirectResponse("/cluster")

    add_cluster_routes(app, source, clock=clock)
    return app


def make_cluster_server(
    source: StatusSource, host: str, port: int, *, log_level: str = "info"
) -> uvicorn.Server:
    """A uvicorn server of the cluster page over ``source`` on ``host:port`` (not started);
    requests must name this host unless it listens on every address."""
    hosts = LOOPBACK_HOSTS | {host} if host not in ("0.0.0.0", "::") else None
    app = create_cluster_app(source, hosts=hosts)
    config = uvicorn.Config(
        app, host=host, port=port, log_level=log_level, lifespan="off", access_log=False
    )
    return uvicorn.Server(config)


def serve_cluster(
    source: StatusSource,
    host: str,
    port: int,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the cluster page over ``source`` on ``host:port`` until stopped (Ctrl-C).

    Binds and listens before it calls ``on_ready`` with the page's URL (``port`` 0 announces
    the port it got). Raises :class:`ConfigurationError` naming the port when it cannot bind.
    """
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise ConfigurationError(
            f"the cluster dashboard cannot listen on {host}:{port}: {exc.strerror or exc}",
            value=port,
        ) from None
    with sock:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(128)
        except OSError as exc:
            raise ConfigurationError(
                f"the cluster dashboard cannot listen on {host}:{port}: {exc.strerror or exc}",
                value=port,
            ) from None
        server = make_cluster_server(source, host, port, log_level="warning")
        if on_ready is not None:
            shown = f"[{host}]" if ":" in host else host
            on_ready(f"http://{shown}:{sock.getsockname()[1]}/cluster")
        server.run(sockets=[sock])


class ControllerSource:
    """The status document of the juggle cluster in the Ray cluster at ``address``, read
    from the cluster controller at every call (``ray.get`` bounded by ``timeout_s``).

    Connects to Ray at the first call (unless this process already is), keeps the
    controller's handle and looks it up again after a failure (a restarted controller).
    Raises :class:`ConfigurationError` naming the address when ray is missing, when no Ray
    cluster or no juggle controller answers, or when the controller does not answer within
    ``timeout_s``. :meth:`close` leaves a Ray connection it made.
    """

    def __init__(self, address: str = "auto", *, timeout_s: float = 5.0) -> None:
        if (
            isinstance(timeout_s, bool)
            or not isinstance(timeout_s, int | float)
            or not 0 < timeout_s < math.inf
        ):
            raise ConfigurationError(
                f"timeout_s must be a number > 0, got {timeout_s!r:.80}",
                value=timeout_s if isinstance(timeout_s, int | float) else repr(timeout_s),
            )
        self.address = address
        self.timeout_s = float(timeout_s)
        self._lock = threading.Lock()
        self._actor: Any = None
        self._connected = False

    def __call__(self) -> dict[str, Any]:
        """The status document now (see the class)."""
        try:
            import ray
        except ImportError:
            raise ConfigurationError(
                "the cluster dashboard needs ray: pip install 'juggle[cluster]'", value="ray"
            ) from None
        from juggle.cluster.directory import (
            CONTROLLER_NAME,
            NAMESPACE,
            Directory,
            status_document,
        )

        with self._lock:
            if not ray.is_initialized():
                from juggle.cluster.client import init_ray

                init_ray(self.address)
                self._connected = True
            if self._actor is None:
                try:
                    self._actor = ray.get_actor(CONTROLLER_NAME, namespace=NAMESPACE)
                except ValueError:
                    raise ConfigurationError(
                        f"no juggle cluster controller ({CONTROLLER_NAME!r}) runs in the Ray "
                        f"cluster at {self.address!r}: start one with "
                        "juggle.cluster.start_controller()",
                        value=self.address,
                    ) from None
            try:
                directory = ray.get(self._actor.directory.remote(), timeout=self.timeout_s)
            except ray.exceptions.RayError as exc:
                self._actor = None
                raise ConfigurationError(
                    f"the juggle cluster controller at {self.address!r} did not answer "
                    f"within {self.timeout_s:g} s: {type(exc).__name__}",
                    value=self.address,
                ) from None
        if not isinstance(directory, Directory):
            raise ProtocolError(
                f"the cluster controller answered a {type(directory).__name__}, not a Directory",
                operation=OPERATION,
                value=type(directory).__name__,
            )
        return status_document(directory)

    def close(self) -> None:
        """Leave the Ray connection this source made (none: nothing)."""
        with self._lock:
            self._actor = None
            if self._connected:
                import ray

                if ray.is_initialized():
                    ray.shutdown()
                self._connected = False


CLUSTER_PAGE = (
    """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>juggle cluster</title>
<style>
"""
    + BASE_CSS
    + """#status.error { color: #b00; }
tr.dead td { background: #fbeaea; color: #888; }
tr.dead td.alive { color: #b00; font-weight: bold; }
.bar { display: inline-block; height: .6em; background: #1f77b4; margin-left: .4em;
  vertical-align: middle; }
</style>
</head>
<body>
<h1>juggle cluster</h1>
<div id="status">loading...</div>
<p id="summary"></p>
<h2>nodes <span class="kind">(load: calls/s, measured by each board's daemon)</span></h2>
<table id="nodes"><thead><tr>
<th>node</th><th>alive</th><th>epoch</th><th>address</th><th>load calls/s</th>
<th>regions held</th></tr></thead><tbody></tbody></table>
<h2>regions <span class="kind">(which service each board's region holds)</span></h2>
<table id="regions"><thead><tr>
<th>node</th><th>region</th><th>state</th><th>service</th></tr></thead><tbody></tbody></table>
<h2>services <span class="kind">(calls, calls/s, software mean: measured; hardware mean:
measured, or modeled on a simulated board, as each row says)</span></h2>
<table id="services"><thead><tr>
<th>node</th><th>service</th><th>tier</th><th>region</th><th>calls</th><th>calls/s</th>
<th>software mean &micro;s</th><th>hardware mean &micro;s</th></tr></thead>
<tbody></tbody></table>
<script>
"use strict";
function cell(row, value, cls, numeric) {
  const td = document.createElement("td");
  td.textContent = value === null || value === undefined ? "-" : String(value);
  if (cls) td.className = cls;
  if (numeric) td.classList.add("num");
  row.appendChild(td);
  return td;
}
function fill(id, items, build) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren();
  for (const item of items) {
    const row = document.createElement("tr");
    build(row, item);
    body.appendChild(row);
  }
}
function fixed(value, digits) { return value === null ? "-" : Number(value).toFixed(digits); }
function status(text, bad) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.className = bad ? "error" : "";
}
function show(view) {
  const s = view.summary;
  document.getElementById("summary").textContent =
    "nodes alive: " + s.alive + " of " + s.nodes + "; regions holding a service: " +
    s.regions_held + " of " + s.regions + "; services in hardware: " + s.services_in_hardware +
    "; load: " + fixed(s.load_per_s, 1) + " calls/s (measured)";
  const peak = Math.max(1, ...view.nodes.map(n => n.alive ? n.load_per_s || 0 : 0));
  fill("nodes", view.nodes, (row, n) => {
    row.dataset.node = n.name;
    row.dataset.alive = n.alive;
    if (!n.alive) row.className = "dead";
    cell(row, n.name, "name");
    cell(row, n.alive ? "yes" : "DEAD" + (n.error ? ": " + n.error : ""), "alive");
    cell(row, n.epoch, "epoch", true);
    cell(row, n.address, "address");
    const load = cell(row, n.alive ? fixed(n.load_per_s, 1) : "-", "load", true);
    if (n.alive && n.load_per_s) {
      const bar = document.createElement("span");
      bar.className = "bar";
      bar.style.width = (4 * n.load_per_s / peak).toFixed(2) + "em";
      load.appendChild(bar);
    }
    const held = n.regions.filter(r => r.service).length;
    cell(row, held + " of " + n.regions.length, "held", true);
  });
  const regions = view.nodes.flatMap(n => n.regions.map(r => Object.assign({node: n}, r)));
  fill("regions", regions, (row, r) => {
    row.dataset.node = r.node.name;
    row.dataset.region = r.name;
    if (!r.node.alive) row.className = "dead";
    cell(row, r.node.name); cell(row, r.name);
    cell(row, r.node.alive ? r.state : r.state + " (node dead)", "state");
    cell(row, r.service, "service");
  });
  const services = view.nodes.flatMap(n => n.services.map(s => Object.assign({node: n}, s)));
  fill("services", services, (row, s) => {
    row.dataset.node = s.node.name;
    row.dataset.service = s.key;
    if (!s.node.alive) row.className = "dead";
    cell(row, s.node.name); cell(row, s.key); cell(row, s.tier, "tier"); cell(row, s.region);
    cell(row, s.calls, "calls", true);
    cell(row, fixed(s.calls_per_s, 1), "rate", true);
    cell(row, fixed(s.software_mean_us, 1), "software", true);
    const label = s.hardware_mean_us === null ? "" : " (" + s.labels.hardware_mean_us + ")";
    cell(row, fixed(s.hardware_mean_us, 1) + label, "hardware", true);
  });
  status("period " + view.period + ", generation " + view.generation + "; read " +
    new Date(view.fetched_at * 1000).toLocaleTimeString([], {hour12: false}), false);
}
let refreshing = false;
async function refresh() {
  if (refreshing) return;
  refreshing = true;
  try {
    const response = await fetch("/api/cluster");
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || response.statusText);
    show(body);
  } catch (err) {
    status("cannot read the cluster: " + err.message + " (the tables show the last answer)",
      true);
  } finally {
    refreshing = false;
  }
}
refresh();
setInterval(refresh, 1000);
</script>
</body>
</html>
"""
)
