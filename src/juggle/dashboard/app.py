"""The live web view of a Framework: a JSON API, Prometheus metrics and a small HTML page.

The dashboard is a window onto a running :class:`Framework`, not a second owner of it: every
``GET`` reads the framework's frozen snapshots and every ``POST`` is one call of its public
API (juggle, set_tier, set_foreground). A :class:`~juggle.errors.JuggleError` becomes a JSON
error ``{"error": message, "type": class name, ...}`` (plus the error's typed attributes, such
as ``"service_id"``) with a status telling whose
fault it is (404 unknown id in the path, 400 bad request, 409 the fabric's state refuses).
Figures carry their kind: call durations are measured, fabric times are modeled.

Besides the framework's snapshots it serves the tenants (``GET /api/tenants``), the WAIT /
READY / PREEMPT signals told to them with their times (``GET /api/tenants/events``) and the
charts' samples of the last ten minutes kept by the server (``GET /api/history``, see
:mod:`juggle.dashboard.history`), so a page opened late draws what came before. The demo
controls (the workload switch) exist only when asked for (``demo_controls``: ``juggle
dashboard``, which owns its framework), never on the daemon's dashboard.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import math
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, cast

import uvicorn
from fastapi import FastAPI, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict

from juggle.core.controllers import load_controller
from juggle.dashboard.history import LiveHistory
from juggle.dashboard.metrics import metrics_registry
from juggle.dashboard.page import PAGE
from juggle.dashboard.tenants import TENANT_KINDS, region_holders, tenant_rows
from juggle.errors import (
    ConfigurationError,
    FilterSyntaxError,
    JuggleError,
    ServiceArgumentError,
    TierUnavailableError,
    UnknownModuleError,
    UnknownRegionError,
    UnknownServiceError,
)
from juggle.fabric.resources import Resources
from juggle.runtime import Framework, JuggleReport
from juggle.shipped import example_module
from juggle.workload import Workload

__all__ = ["create_app", "make_server", "serve", "to_json"]

#: The kind of each figure of a juggle report (ARCHITECTURE principle 5).
#: The kind of each figure of a juggle report: the reconfiguration time comes from the board's
#: configuration port model, whose rate is fitted to the paper's reconfiguration times
#: (xupv2p: Table 3) or copied from a datasheet; the bridge time is the profile's input.
REPORT_KINDS = {
    "reconfiguration_ms": "calibrated",
    "bridge_ms": "input",
    "overhead_us": "measured",
}

#: Seconds between moves of the focus in ``juggle dashboard --workload demo``.
DEMO_FOCUS_S = 5.0

#: The kind of each figure of a live sample (``GET /api/live``, ``GET /api/history``): the
#: host's monotonic clock and the calls counted by the runtime's tracing.
LIVE_KINDS = {"time_s": "measured", "services.*.calls": "measured", "juggles": "measured"}
#: The kind of each figure of a tenant signal (``GET /api/tenants/events``): the arbiter's
#: monotonic clock and the host's wall clock when the dashboard heard the signal.
EVENT_KINDS = {"at_us": "measured", "time": "measured"}

_UNKNOWN = (UnknownServiceError, UnknownModuleError, UnknownRegionError)
_BAD_REQUEST = (TierUnavailableError, ServiceArgumentError, ConfigurationError, FilterSyntaxError)


# -- request bodies --------------------------------------------------------------------------


class JuggleRequest(BaseModel):
    """Body of ``POST /api/juggle``: the service to put in hardware and those to take out."""

    model_config = ConfigDict(strict=True, extra="forbid")

    to_hardware: int | None = None
    to_software: list[int] = []


class TierRequest(BaseModel):
    """Body of ``POST /api/services/{id}/tier``."""

    model_config = ConfigDict(strict=True, extra="forbid")

    tier: str


class WorkloadRequest(BaseModel):
    """Body of ``POST /api/workload``: start (true) or stop (false) the background calls."""

    model_config = ConfigDict(strict=True, extra="forbid")

    on: bool


class ForegroundRequest(BaseModel):
    """Body of ``POST /api/foreground``: the application in focus (null: none)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    app: str | None


# -- snapshots to JSON -----------------------------------------------------------------------


def to_json(value: object) -> Any:
    """``value`` (frozen snapshots, mappings, sequences, enums, numbers) as plain JSON data.

    Dataclasses become objects of their fields; non-finite floats become null; anything else
    unknown becomes its ``str``.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Resources):  # kind -> count in its family's kinds
        return value.as_dict()
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_json(v) for v in value]
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, bool | int | str):
        return value
    return str(value)


def _report(report: JuggleReport) -> dict[str, Any]:
    out: dict[str, Any] = to_json(report)
    out["kinds"] = dict(REPORT_KINDS)
    return out


class FocusRotation:
    """Moves the focus among applications every ``every_s`` seconds, in a thread, as a user
    switching windows would: each move runs ``framework``'s controller (the ``foreground``
    one juggles the focused application's service into the fabric). Failed juggles land in
    the framework's ``controller_errors``; a closed framework ends the rotation."""

    def __init__(self, framework: Framework, every_s: float) -> None:
        if isinstance(every_s, bool) or not isinstance(every_s, int | float) or not every_s > 0:
            raise ConfigurationError(
                f'"focus_every_s" must be a number > 0, got {every_s!r:.80}', value=every_s
            )
        self.framework = framework
        self.every_s = float(every_s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Whether the rotation's thread runs."""
        return self._thread is not None

    def start(self, apps: list[str]) -> None:
        """Rotate over ``apps`` (in this order, from the first); nothing when empty or when
        already rotating."""
        if self._thread is not None or not apps:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, args=(list(apps),), name="dashboard-focus", daemon=True
        )
        self._thread.start()

    def _run(self, apps: list[str]) -> None:
        turn = 0
        while True:
            try:
                self.framework.set_foreground(apps[turn % len(apps)])
            except JuggleError:  # the framework closed under us
                return
            turn += 1
            if self._stop.wait(self.every_s):
                return

    def stop(self) -> None:
        """Stop rotating and wait for the thread (the focus stays where it is)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


def live_sample(framework: Framework, time_s: float | None = None) -> dict[str, Any]:
    """One sample of what the page's charts draw, read through ``framework``'s public API.

    ``time_s`` is the time of the sample (default: the host's monotonic clock now); each
    service carries its tier and the calls it served so far per tier (a client derives
    calls/s from two samples); each region its holder, as
    :func:`~juggle.dashboard.tenants.region_holders` gives it (a juggle-placed service and
    its module, or a tenant and its device, and a label naming it). ``kinds`` labels the
    figures.
    """
    services = []
    for snap in framework.services():
        with contextlib.suppress(UnknownServiceError):  # unregistered since the listing
            stats = framework.statistics(snap.service_id)
            services.append(
                {
                    "service_id": snap.service_id,
                    "interface": snap.interface,
                    "tier": snap.tier,
                    "calls": {tier: c.calls for tier, c in stats.per_tier.items()},
                }
            )
    controller = framework.controller
    return {
        "time_s": time.monotonic() if time_s is None else time_s,
        "services": services,
        "regions": region_holders(framework),
        "juggles": framework.juggle_count,
        "foreground": framework.foreground,
        "controller": None if controller is None else controller.name,
        "kinds": dict(LIVE_KINDS),
    }


def _error(exc: JuggleError, status: int) -> JSONResponse:
    body: dict[str, object] = {"error": str(exc), "type": type(exc).__name__}
    body.update(exc.attributes())
    return JSONResponse(body, status_code=status)


def _status(exc: JuggleError, *, id_in_path: bool) -> int:
    """404 for an unknown id named in the URL, 400 for a bad request, 409 for a refusal."""
    if isinstance(exc, _UNKNOWN):
        return 404 if id_in_path else 400
    if isinstance(exc, _BAD_REQUEST):
        return 400
    return 409


# -- the app ---------------------------------------------------------------------------------


#: the names a loopback dashboard answers to (a page of another site resolving its own name to
#: 127.0.0.1, DNS rebinding, is refused by its Host header)
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def _host_only(value: str) -> str:
    """``host`` of a Host header or an Origin's authority (``[::1]:8321`` -> ``[::1]``)."""
    value = value.split("://", 1)[-1].split("/", 1)[0]
    if value.startswith("["):
        return value.split("]", 1)[0] + "]"
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def refuse_foreign_host(request: Request, hosts: frozenset[str] | None) -> Response | None:
    """The 403 answer to a request whose ``Host`` header names none of ``hosts`` (names without
    port; DNS rebinding), or None when it may go on (always, with ``hosts`` None)."""
    if hosts is None:
        return None
    host = _host_only(request.headers.get("host", ""))
    if host in hosts:
        return None
    return JSONResponse(
        {"error": f"Host {host!r} is not this dashboard's", "type": "Forbidden"},
        status_code=403,
    )


def create_app(
    framework: Framework,
    *,
    token: str | None = None,
    hosts: frozenset[str] | None = None,
    focus_every_s: float | None = None,
    demo_controls: bool = False,
    history: LiveHistory | None = None,
) -> FastAPI:
    """A FastAPI app serving ``framework``'s snapshots and commands (the caller owns it).

    With ``token``, a state-changing request (POST) needs ``Authorization: Bearer <token>``
    (401 without it) and, when the browser sends one, an ``Origin`` of an allowed host (403
    otherwise); reads need no token. With ``hosts`` (names without port), a request whose
    ``Host`` header names another host is refused with 403. Without either (an app embedded in
    a program, or a test client) nothing is checked.

    With ``demo_controls`` (a dashboard that owns its framework, as ``juggle dashboard``),
    the workload switch (``GET``/``POST /api/workload``) starts and stops background calls to
    the services the :class:`~juggle.workload.Workload` knows; with ``focus_every_s`` it also
    moves the focus among the workload's applications every that many seconds while it runs
    (see :class:`FocusRotation`), so a controller such as ``foreground`` juggles. Without
    (the default: the daemon's dashboard), there is no workload switch (404) and the page
    shows no demo controls.

    ``history`` keeps the charts' samples of the last minutes on the server (default: a
    :class:`~juggle.dashboard.history.LiveHistory` sampling every second for ten minutes);
    it samples while the app runs (its lifespan: uvicorn, or a ``TestClient`` used as a
    context manager) and serves ``GET /api/history`` and ``GET /api/tenants/events``.
    """
    keeper = LiveHistory(framework, live_sample) if history is None else history

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        keeper.start()
        try:
            yield
        finally:
            keeper.stop()

    app = FastAPI(title="juggle dashboard", docs_url=None, redoc_url=None, lifespan=lifespan)
    registry = metrics_registry(framework)
    app.state.framework = framework
    app.state.metrics_registry = registry
    app.state.history = keeper

    @app.middleware("http")
    async def _guard(request: Request, call_next: Any) -> Response:
        refused = refuse_foreign_host(request, hosts)
        if refused is not None:
            return refused
        if token is not None and request.method not in ("GET", "HEAD", "OPTIONS"):
            origin = request.headers.get("origin")
            allowed = hosts if hosts is not None else LOOPBACK_HOSTS
            if origin is not None and _host_only(origin) not in allowed:
                return JSONResponse(
                    {"error": f"Origin {origin!r} may not change state", "type": "Forbidden"},
                    status_code=403,
                )
            given = request.headers.get("authorization", "")
            if not secrets.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return JSONResponse(
                    {
                        "error": "a state-changing request needs the admin token",
                        "type": "Unauthorized",
                    },
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
        response: Response = await call_next(request)
        return response

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', 'invalid')} "
            f"(got {e.get('input')!r})"
            for e in exc.errors()
        )
        body = {
            "error": problems,
            "type": "ValidationError",
            "detail": jsonable_encoder(exc.errors()),
        }
        return JSONResponse(body, status_code=422)

    @app.get("/", response_class=HTMLResponse)
    def page() -> HTMLResponse:
        return HTMLResponse(PAGE)

    @app.get("/api/services")
    def services() -> Any:
        return to_json(framework.services())

    @app.get("/api/regions")
    def regions() -> Any:
        return to_json(framework.regions())

    @app.get("/api/modules")
    def modules() -> Any:
        return to_json(framework.modules())

    @app.get("/api/snapshot")
    def snapshot() -> Any:
        return to_json(framework.snapshot())

    @app.get("/api/live")
    def live() -> Any:
        """Calls per service and tier so far, tiers and region holders: the charts' sample."""
        return to_json(live_sample(framework))

    @app.get("/api/view")
    def view() -> Any:
        """What the page shows: demo controls or not, and the history's period and span."""
        return {
            "demo_controls": demo_controls,
            "history": {"period_s": keeper.period_s, "span_s": keeper.span_s},
        }

    @app.get("/api/history")
    def history_samples(after: float | None = None) -> Any:
        """The samples the server kept (the last ``span_s`` seconds), oldest first; with
        ``?after=T``, those taken after ``time_s`` T only."""
        return {
            "period_s": keeper.period_s,
            "span_s": keeper.span_s,
            "samples": to_json(keeper.samples(after)),
            "kinds": dict(LIVE_KINDS),
        }

    @app.get("/api/tenants")
    def tenants() -> Any:
        """Each tenant: priority, model, calls, waits, preemptions, unread signals, devices."""
        return {"tenants": to_json(tenant_rows(framework)), "kinds": dict(TENANT_KINDS)}

    @app.get("/api/tenants/events")
    def tenant_events(limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> Any:
        """The last ``limit`` WAIT / READY / PREEMPT signals told to tenants, oldest first,
        each with the wall-clock ``time`` it was told."""
        return {"events": to_json(keeper.events(limit)), "kinds": dict(EVENT_KINDS)}

    workload = Workload(framework) if demo_controls else None
    app.state.workload = workload
    focus = None if focus_every_s is None else FocusRotation(framework, focus_every_s)
    if workload is None:
        focus = None  # no workload switch: nothing would start the rotation
    app.state.focus = focus

    if workload is not None:
        calls = workload

        @app.get("/api/workload")
        def workload_status() -> Any:
            return to_json(calls.status())

        @app.post("/api/workload")
        def workload_switch(body: WorkloadRequest) -> Any:
            if body.on:
                apps = calls.start()
                if focus is not None:
                    focus.start(apps)
            else:
                if focus is not None:
                    focus.stop()
                calls.stop()
            return to_json(calls.status())

    @app.get("/api/juggles")
    def juggles(
        response: Response,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> Any:
        """A page of the juggle history, oldest first: the ``limit`` reports before the newest
        ``offset`` ones, each with its ``number`` (1: the first juggle) and ``seen_at``, the
        wall-clock time of the first history sample that saw it (null when none did).
        ``X-Juggle-Count`` holds the juggles made in all, ``X-Juggle-Kept`` how many the
        bounded history still holds."""
        for _ in range(3):  # a juggle between the two reads shifts the numbers: read again
            count = framework.juggle_count
            kept = framework.history()
            if framework.juggle_count == count:
                break
        first = count - len(kept) + 1
        seen = keeper.juggle_times()
        end = max(0, len(kept) - offset)
        response.headers["X-Juggle-Count"] = str(count)
        response.headers["X-Juggle-Kept"] = str(len(kept))
        out = []
        for index in range(max(0, end - limit), end):
            row = _report(kept[index])
            row["number"] = first + index
            row["seen_at"] = seen.get(first + index)
            row["kinds"]["seen_at"] = "measured"
            out.append(row)
        return out

    @app.get("/api/services/{service_id}/statistics")
    def statistics(
        service_id: int,
        consumer: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
    ) -> Any:
        """The service's measured statistics; with ``?consumer=NAME``, those of that
        consumer's calls only (:meth:`Framework.statistics` with ``consumer``: zero for a
        consumer that holds no proxy of it)."""
        try:
            stats = framework.statistics(service_id, consumer=consumer)
        except JuggleError as exc:
            return _error(exc, _status(exc, id_in_path=True))
        out: dict[str, Any] = to_json(stats)
        out["kind"] = "measured"
        return out

    @app.post("/api/juggle")
    def juggle(body: JuggleRequest) -> Any:
        try:
            report = framework.juggle(to_hardware=body.to_hardware, to_software=body.to_software)
        except JuggleError as exc:
            return _error(exc, _status(exc, id_in_path=False))
        return _report(report)

    @app.post("/api/services/{service_id}/tier")
    def tier(service_id: int, body: TierRequest) -> Any:
        try:
            report = framework.set_tier(service_id, body.tier)
        except JuggleError as exc:
            return _error(exc, _status(exc, id_in_path=True))
        return _report(report)

    @app.post("/api/foreground")
    def foreground(body: ForegroundRequest) -> Any:
        errors: list[str] = []
        try:
            reports = framework.set_foreground(body.app, errors)
        except JuggleError as exc:
            return _error(exc, _status(exc, id_in_path=False))
        return {
            "foreground": framework.foreground,
            "controller": None if framework.controller is None else framework.controller.name,
            "juggles": [_report(r) for r in reports],
            "controller_errors": errors,
        }

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app


# -- serving ---------------------------------------------------------------------------------


def make_server(
    framework: Framework,
    host: str,
    port: int,
    *,
    log_level: str = "info",
    token: str | None = None,
    access_log: bool = False,
    focus_every_s: float | None = None,
    demo_controls: bool = False,
    history: LiveHistory | None = None,
) -> uvicorn.Server:
    """A uvicorn server of the dashboard of ``framework`` on ``host:port`` (not started);
    POSTs need ``token`` when given, and requests must name this host (see
    :func:`create_app`). ``access_log`` logs a line per request (off by default: the page
    polls several endpoints every second); ``focus_every_s``, ``demo_controls`` and
    ``history`` go to :func:`create_app`. The history samples while the server serves."""
    hosts = LOOPBACK_HOSTS | {host} if host not in ("0.0.0.0", "::") else None
    app = create_app(
        framework,
        token=token,
        hosts=hosts,
        focus_every_s=focus_every_s,
        demo_controls=demo_controls,
        history=history,
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        lifespan="on",
        access_log=access_log,
    )
    return uvicorn.Server(config)


def serve(
    host: str,
    port: int,
    modules: list[Path],
    on_ready: Callable[[str], None] | None = None,
    *,
    workload: bool = False,
    access_log: bool = False,
) -> None:
    """Serve a dashboard on ``host:port`` over a Framework on the simulated ``xupv2p``.

    Installs and starts each of ``modules`` first (none and ``workload``: the demo's two
    applications under the foreground controller, the focus moving between them every
    :data:`DEMO_FOCUS_S` seconds while the workload runs); starts the background calls when
    ``workload``; logs each request only with ``access_log``. Binds ``host:port`` before it
    calls ``on_ready`` with the URL, so ``port`` 0 announces the port it got. Blocks until the
    server is stopped (Ctrl-C), then closes the framework. Raises what
    :meth:`Framework.install` and :meth:`Module.start <juggle.runtime.Module.start>`
    raise for a bad module (a :class:`~juggle.errors.JuggleError`), before listening.
    """
    framework = Framework(fabric="xupv2p")
    try:
        for path in modules:
            framework.install(path).start()
        if workload and not modules:  # the demo's two applications
            framework.install(example_module("tdes")).start()
            framework.install(example_module("audio")).start()
            framework.set_controller(load_controller("foreground"))
        token = secrets.token_urlsafe(24)
        server = make_server(
            framework,
            host,
            port,
            token=token,
            access_log=access_log,
            focus_every_s=DEMO_FOCUS_S if framework.controller is not None else None,
            demo_controls=True,
        )
        state = cast(FastAPI, server.config.app).state
        calls: Workload = state.workload
        focus: FocusRotation | None = state.focus
        if workload:
            apps = calls.start()
            if focus is not None:
                focus.start(apps)
        try:
            # bind and listen first, then announce: the URL names the port bound (``port`` 0
            # picks one) and a client that connects at once waits in the backlog
            with server.config.bind_socket() as sock:
                sock.listen(server.config.backlog)
                if on_ready is not None:
                    on_ready(f"http://{host}:{sock.getsockname()[1]}/#token={token}")
                server.run(sockets=[sock])
        finally:
            if focus is not None:
                focus.stop()
            calls.stop()
    finally:
        framework.close()
