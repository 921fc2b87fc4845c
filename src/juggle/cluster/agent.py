"""The node agent: one per board, pinned to the board's host, owner of the board's daemon.

:class:`NodeAgent` runs as a Ray actor asking for the board's custom resource
(``{"juggle_board:<name>": 1}``, which only that host offers), so Ray places it on the board's
host and restarts it there. It

* starts the board's ``juggle daemon`` (its own state directory and Unix socket on the host, a
  TLS listener for remote clients when certificates are given) and installs the configured
  modules the first time (the daemon keeps them in its state directory after that);
* supervises it: a daemon that exits (crash, SIGKILL) is reported dead at once and started
  again (after ``restart_delay_s``, doubling while it keeps dying, up to 10 s), each start one
  ``epoch`` more;
* samples it every ``sample_s`` over its Unix socket as the daemon's admin (services, regions,
  statistics) and pushes a :class:`~juggle.cluster.directory.NodeReport` to the controller
  whenever what it says changed (pushed, not polled: the controller never asks a board);
* runs the controller's placements on the board (:meth:`NodeAgent.place`: juggles through
  its admin client).

The class is plain Python (testable without Ray); :func:`start_agent` makes it an actor.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from juggle.cluster.directory import (
    CONTROLLER_NAME,
    NAMESPACE,
    SOFTWARE_TIERS,
    NodeReport,
    RegionReport,
    ServiceReport,
    agent_name,
    board_resource,
    service_key,
)
from juggle.errors import ConfigurationError, DaemonUnavailableError, JuggleError

__all__ = ["AgentConfig", "NodeAgent", "start_agent"]

logger = logging.getLogger("juggle.cluster.agent")

#: Longest pause between two starts of a daemon that keeps dying.
MAX_RESTART_DELAY_S = 10.0
#: A daemon that ran this long resets the restart delay.
HEALTHY_RUN_S = 30.0
#: An unchanged report is pushed again after this long (a restarted controller learns it).
HEARTBEAT_S = 5.0
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """How one board's agent runs its daemon.

    ``base``: a folder on the board's host for the daemon's state (``base/state``), socket
    (``base/daemon.sock``) and log (``base/daemon.log``); ``fabric``: board profile name or
    path; ``modules``: module folders installed at the first start; ``tls_cert``/``tls_key``/
    ``tls_ca``: the node's certificate, key and the cluster CA (all three or none: without
    them the daemon has no TLS listener and clients on the same host use its Unix socket);
    ``tls_listen``: HOST:PORT of the listener (port 0: any free port); ``policy``: the
    daemon's tenant policy (TOML text; it must make the agent's uid an admin); ``sample_s``:
    how often the daemon is sampled; ``restart``: start a daemon that died again;
    ``daemon_args``: more daemon options (``--workers 8``...)."""

    board: str
    base: str
    fabric: str = "xupv2p"
    modules: tuple[str, ...] = ()
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    tls_listen: str = "127.0.0.1:0"
    policy: str | None = None
    sample_s: float = 0.2
    restart: bool = True
    restart_delay_s: float = 0.2
    start_timeout_s: float = 30.0
    daemon_args: tuple[str, ...] = ()

    def check(self) -> AgentConfig:
        """This config, checked; raises :class:`ConfigurationError` naming the value."""
        if not self.board or any(c.isspace() or c == ":" for c in self.board):
            raise ConfigurationError(
                f"board name {self.board!r} must be non-empty, without spaces or ':'",
                value=self.board,
            )
        tls = (self.tls_cert, self.tls_key, self.tls_ca)
        if any(t is not None for t in tls) and not all(t is not None for t in tls):
            raise ConfigurationError(
                "tls_cert, tls_key and tls_ca are given together or not at all",
                value=str(tls),
            )
        for name in ("sample_s", "restart_delay_s", "start_timeout_s"):
            value = getattr(self, name)
            if not 0 < value <= 3600:
                raise ConfigurationError(
                    f'"{name}" must be in (0, 3600] s, got {value!r}', value=value
                )
        return self

    @property
    def socket(self) -> Path:
        """The daemon's Unix socket."""
        return Path(self.base) / "daemon.sock"

    @property
    def state(self) -> Path:
        """The daemon's state directory."""
        return Path(self.base) / "state"


def _module_name(folder: str) -> str:
    with open(Path(folder) / "juggle.toml", "rb") as f:
        return str(tomllib.load(f)["module"]["name"])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class NodeAgent:
    """Starts, supervises and samples one board's daemon; see the module's text.

    Raises :class:`ConfigurationError` for a bad :class:`AgentConfig`."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config.check()
        self._cv = threading.Condition()
        self._proc: subprocess.Popen[bytes] | None = None
        self._admin: Any = None  # juggle.daemon.Client of the running daemon
        self._epoch = 0
        self._alive = False
        self._address = f"unix:{config.socket}"
        self._error: str | None = None
        self._stopping = False
        self._restart: bool = True  # the first start always happens
        self._restart_after_death = config.restart
        self._delay = config.restart_delay_s
        self._started_at = 0.0
        self._boundary: dict[str, int] = {}
        self._boundary_t = time.monotonic()
        self._last: NodeReport = self._dead_report()
        self._pushed: NodeReport | None = None
        self._controller: Any = None
        self._sample_lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._supervise, name=f"juggle-agent-{config.board}", daemon=True
        )
        self._thread.start()

    # -- the daemon ---------------------------------------------------------------------------

    def _command(self) -> list[str]:
        c = self.config
        cmd = [
            sys.executable,
            "-m",
            "juggle.daemon",
            "--socket",
            str(c.socket),
            "--state",
            str(c.state),
            "--fabric",
            c.fabric,
            *c.daemon_args,
        ]
        if c.policy is not None:
            cmd += ["--policy", str(Path(c.base) / "policy.toml")]
        if c.tls_cert is not None:
            assert c.tls_key is not None and c.tls_ca is not None
            cmd += [
                "--tls",
                c.tls_listen,
                "--tls-cert",
                c.tls_cert,
                "--tls-key",
                c.tls_key,
                "--tls-ca",
                c.tls_ca,
            ]
        return cmd

    def _start_daemon(self) -> None:
        from juggle.daemon import connect

        c = self.config
        base = Path(c.base)
        base.mkdir(parents=True, exist_ok=True)
        base.chmod(0o755)
        if c.policy is not None:
            policy = base / "policy.toml"
            fd = os.open(policy, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(c.policy)
        address_file = c.state / "tls-address"
        with contextlib.suppress(FileNotFoundError):
            address_file.unlink()
        log = open(base / "daemon.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            proc = subprocess.Popen(
                self._command(),
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                cwd="/",
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()
        deadline = time.monotonic() + c.start_timeout_s
        admin = None
        try:
            while admin is None:
                if proc.poll() is not None:
                    raise DaemonUnavailableError(
                        f"the daemon of board {c.board!r} exited with {proc.returncode} at "
                        f"start (log: {base / 'daemon.log'})",
                        path=str(c.socket),
                    )
                if time.monotonic() > deadline:
                    raise DaemonUnavailableError(
                        f"the daemon of board {c.board!r} did not listen within "
                        f"{c.start_timeout_s} s",
                        path=str(c.socket),
                    )
                try:
                    admin = connect(c.socket, timeout=2.0, call_timeout=30.0)
                except (DaemonUnavailableError, OSError):
                    time.sleep(0.02)
            installed = {m.name for m in admin.modules()}
            for folder in c.modules:
                if _module_name(folder) not in installed:
                    admin.install(folder)
            address = f"unix:{c.socket}"
            if c.tls_cert is not None:
                while not address_file.exists():
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise DaemonUnavailableError(
                            f"the daemon of board {c.board!r} wrote no {address_file}",
                            path=str(address_file),
                        )
                    time.sleep(0.02)
                text = address_file.read_text().strip()
                address = text if text.startswith("tls://") else f"tls://{text}"
        except BaseException:
            if admin is not None:
                admin.close()
            with contextlib.suppress(OSError):
                proc.kill()
            proc.wait(10)
            raise
        with self._cv:
            self._proc = proc
            self._admin = admin
            self._epoch += 1
            self._alive = True
            self._address = address
            self._error = None
            self._started_at = time.monotonic()
            self._boundary = {}
            self._boundary_t = time.monotonic()
            self._cv.notify_all()
        logger.info(
            "board %s: daemon %d up (epoch %d) at %s", c.board, proc.pid, self._epoch, address
        )

    def _on_death(self, proc: subprocess.Popen[bytes]) -> None:
        with self._cv:
            admin, self._admin = self._admin, None
            self._proc = None
            self._alive = False
            self._error = f"daemon {proc.pid} exited with {proc.returncode}"
            self._restart = self._restart_after_death
            lived = time.monotonic() - self._started_at
            self._delay = (
                self.config.restart_delay_s
                if lived > HEALTHY_RUN_S
                else min(self._delay * 2, MAX_RESTART_DELAY_S)
            )
            self._cv.notify_all()
        if admin is not None:
            with contextlib.suppress(Exception):
                admin.close()
        logger.warning("board %s: %s", self.config.board, self._error)
        self._publish(self._dead_report())

    def _supervise(self) -> None:
        first = True
        while True:
            with self._cv:
                while not self._stopping and self._proc is None and not self._restart:
                    self._cv.wait()
                if self._stopping:
                    return
                proc = self._proc
                delay = 0.0 if first else self._delay
            if proc is None:
                if delay > 0:
                    with self._cv:
                        self._cv.wait_for(lambda: self._stopping, delay)
                        if self._stopping:
                            return
                first = False
                try:
                    self._start_daemon()
                except Exception as exc:
                    with self._cv:
                        self._error = f"{type(exc).__name__}: {exc}"
                        self._delay = min(self._delay * 2, MAX_RESTART_DELAY_S)
                        self._cv.notify_all()
                    logger.error("board %s: %s", self.config.board, self._error)
                    self._publish(self._dead_report())
                    continue
                self._sample()
                continue
            try:
                proc.wait(timeout=self.config.sample_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(JuggleError, OSError):
                    self._sample()
                continue
            with self._cv:
                if self._stopping:
                    return
            self._on_death(proc)

    # -- reports ------------------------------------------------------------------------------

    def _dead_report(self) -> NodeReport:
        return NodeReport(
            name=self.config.board,
            alive=False,
            epoch=self._epoch,
            address=self._address,
            sampled_at=time.time(),
            error=self._error,
        )

    def _sample(self, *, boundary: bool = False) -> NodeReport:
        """Sample the daemon now (its services, regions and statistics), push the report if it
        changed; ``boundary`` starts a new rate window (the controller's period)."""
        with self._sample_lock:
            with self._cv:
                admin, alive, epoch = self._admin, self._alive, self._epoch
                proc = self._proc
            if admin is None or not alive:
                report = self._dead_report()
                self._publish(report)
                return report
            try:
                services = admin.services()
                regions = admin.regions()
                stats = {s.service_id: admin.statistics(s.service_id) for s in services}
            except (DaemonUnavailableError, OSError):
                report = self._dead_report()
                self._publish(report)
                return report
            now = time.monotonic()
            span = max(now - self._boundary_t, 1e-3)
            keys: dict[int, str] = {}
            out: list[ServiceReport] = []
            counts: dict[str, int] = {}
            for s in services:
                key = service_key(s.module, s.interface, s.service_id)
                keys[s.service_id] = key
                st = stats[s.service_id]
                sw_calls = 0
                sw_time = 0.0
                for tier in SOFTWARE_TIERS:
                    cs = st.per_tier.get(tier)
                    if cs is not None and cs.timed:
                        sw_calls += cs.timed
                        sw_time += cs.mean_us * cs.timed
                hw = st.per_tier.get("hardware")
                hw_calls = hw.calls if hw is not None else 0
                label = "measured"
                hw_mean: float | None = None
                if st.hardware_modeled_mean_us is not None:
                    hw_mean, label = float(st.hardware_modeled_mean_us), "modeled"
                elif hw is not None and hw.timed:
                    hw_mean = hw.mean_us
                calls = st.total.calls
                counts[key] = calls
                out.append(
                    ServiceReport(
                        key=key,
                        service_id=s.service_id,
                        interface=s.interface,
                        interfaces=tuple(s.interfaces),
                        module=s.module,
                        properties=dict(s.properties),
                        tier=str(s.tier),
                        tiers=tuple(str(t) for t in s.tiers),
                        region=s.region,
                        calls=calls,
                        hardware_calls=hw_calls,
                        calls_per_s=round(max(0, calls - self._boundary.get(key, 0)) / span, 3),
                        software_mean_us=(sw_time / sw_calls) if sw_calls else None,
                        hardware_mean_us=hw_mean,
                        hardware_label=label,
                    )
                )
            if boundary:
                self._boundary = counts
                self._boundary_t = now
            report = NodeReport(
                name=self.config.board,
                alive=True,
                epoch=epoch,
                address=self._address,
                regions=tuple(
                    RegionReport(
                        r.name,
                        str(r.state),
                        keys.get(r.service_id) if r.service_id is not None else None,
                    )
                    for r in regions
                ),
                services=tuple(out),
                load_per_s=round(sum(s.calls_per_s for s in out), 3),
                sampled_at=time.time(),
                daemon_pid=proc.pid if proc is not None else None,
            )
            self._publish(report)
            return report

    def _publish(self, report: NodeReport) -> None:
        self._last = report
        pushed = self._pushed
        if report.same_state(pushed) and (
            pushed is not None and report.sampled_at - pushed.sampled_at < HEARTBEAT_S
        ):
            return
        controller = self._controller_handle()
        if controller is None:
            return
        try:
            controller.push.remote(report)
            self._pushed = report
        except Exception:  # the controller went away: look it up again next time
            self._controller = None

    def _controller_handle(self) -> Any:
        if self._controller is None:
            try:
                import ray

                if ray.is_initialized():
                    self._controller = ray.get_actor(CONTROLLER_NAME, namespace=NAMESPACE)
            except (ImportError, ValueError):
                return None
        return self._controller

    # -- what the controller and operators call ------------------------------------------------

    def ready(self, timeout: float = 60.0) -> NodeReport:
        """Wait until the daemon is up (at most ``timeout`` s); its report. Raises
        :class:`DaemonUnavailableError` naming the last start error when it is not."""
        with self._cv:
            if not self._cv.wait_for(lambda: self._alive or self._stopping, timeout):
                raise DaemonUnavailableError(
                    f"board {self.config.board!r}: no daemon after {timeout} s ({self._error})",
                    path=str(self.config.socket),
                )
        return self._sample()

    def report(self, boundary: bool = False) -> NodeReport:
        """Sample the daemon now and push the report if it changed; the report.
        ``boundary``: a new rate window starts (the controller passes it at each period)."""
        return self._sample(boundary=boundary)

    def last(self) -> NodeReport:
        """The newest report, without sampling."""
        return self._last

    def place(self, placements: Sequence[tuple[str, bool]]) -> list[str]:
        """Run placements on this board, in order: ``(service key, True)`` puts the service
        into a free region, ``(key, False)`` takes it out of the fabric. Returns one message
        per placement that failed (the others ran); the new report is pushed."""
        with self._cv:
            admin = self._admin
        errors: list[str] = []
        if admin is None:
            return [f"board {self.config.board!r}: no daemon running"]
        try:
            ids = {
                service_key(s.module, s.interface, s.service_id): s.service_id
                for s in admin.services()
            }
        except JuggleError as exc:
            return [f"board {self.config.board!r}: {type(exc).__name__}: {exc}"]
        for key, to_hardware in placements:
            sid = ids.get(key)
            if sid is None:
                errors.append(f"board {self.config.board!r} has no service {key!r}")
                continue
            try:
                if to_hardware:
                    admin.juggle(to_hardware=sid)
                else:
                    admin.juggle(to_software=[sid])
            except JuggleError as exc:
                errors.append(f"{key} on {self.config.board}: {type(exc).__name__}: {exc}")
        with contextlib.suppress(JuggleError, OSError):
            self._sample()
        return errors

    def daemon_pid(self) -> int | None:
        """The pid of the running daemon (None: none runs)."""
        with self._cv:
            return self._proc.pid if self._proc is not None else None

    def set_restart(self, restart: bool) -> None:
        """Whether a daemon that died is started again (``True`` also starts one now if none
        runs)."""
        with self._cv:
            self._restart_after_death = restart
            self._restart = restart
            if restart:
                self._delay = self.config.restart_delay_s
            self._cv.notify_all()

    def wait_alive(self, min_epoch: int = 1, timeout: float = 60.0) -> NodeReport:
        """Wait until a daemon of at least ``min_epoch`` is up (at most ``timeout`` s); its
        report. Raises :class:`DaemonUnavailableError` when it is not."""
        with self._cv:
            ok = self._cv.wait_for(
                lambda: self._stopping or (self._alive and self._epoch >= min_epoch), timeout
            )
        if not ok:
            raise DaemonUnavailableError(
                f"board {self.config.board!r}: no daemon of epoch >= {min_epoch} after "
                f"{timeout} s ({self._error})",
                path=str(self.config.socket),
            )
        return self._sample()

    def shutdown(self, timeout: float = 20.0) -> int | None:
        """Stop supervising, stop the daemon (SIGTERM, SIGKILL after ``timeout`` s); its exit
        status (None: none ran)."""
        with self._cv:
            self._stopping = True
            proc, self._proc = self._proc, None
            admin, self._admin = self._admin, None
            self._alive = False
            self._cv.notify_all()
        if admin is not None:
            with contextlib.suppress(Exception):
                admin.close()
        status = None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                status = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                status = proc.wait(10)
        self._thread.join(timeout)
        self._publish(self._dead_report())
        return status


def start_agent(
    config: AgentConfig,
    *,
    wait: bool = True,
    timeout: float = 60.0,
    detached: bool = True,
) -> Any:
    """Start ``config.board``'s agent as a Ray actor on the host offering the board's
    resource (``juggle_board:<board>``), named ``juggle_agent:<board>`` in namespace
    ``juggle`` (an agent of that name already running is returned instead); with ``wait``,
    until its daemon is up. Returns the actor handle. Needs ``ray`` (the ``cluster`` extra)
    and a connected driver (``ray.init``)."""
    import ray

    config.check()
    actor: Any = ray.remote(NodeAgent)
    actor = actor.options(
        name=agent_name(config.board),
        namespace=NAMESPACE,
        get_if_exists=True,
        lifetime="detached" if detached else None,
        num_cpus=0,
        resources={board_resource(config.board): 1},
        max_concurrency=8,
        max_restarts=-1,
    )
    handle: Any = actor.remote(config)
    if wait:
        ray.get(handle.ready.remote(timeout), timeout=timeout + 30)
    return handle
