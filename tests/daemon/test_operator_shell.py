"""Issue 25's acceptance: a real daemon operated only from the shell, ``juggle --connect S``.

A daemon process (``python -m juggle.daemon``) is operated through the ``juggle`` console
script's entry point (:func:`juggle.commands.cli.main`, run in this process with its argv,
stdout and stderr of its own): install a module, list it, juggle it into the fabric, recover
its quarantined region, reload the policy, uninstall it. The fault is the tenant's doing (its
call hits a driver that raises a bus error), made by a client as a tenant's program would;
everything the operator does is a command. Each admin action leaves exactly one audit line in
the daemon's log, and so does the quarantine. A second daemon started with ``--trusted-key``
refuses an unsigned module and installs the same module once it is signed (``juggle module
lock``, ``keygen``, ``sign``).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from daemon_support import MODULES, DaemonProcess, make_base, wait_until

import juggle.commands.cli
from juggle.daemon import audit
from juggle.daemon.server import Daemon

FAULTY_DRIVER = '''"""The TDES driver with a bus error on a block that starts with b"BUSERROR"."""

from juggle.services.crypto import TdesDriver


class BusErrorDriver(TdesDriver):
    def encrypt(self, buf, size):
        if bytes(memoryview(buf)[:8]) == b"BUSERROR":
            raise OSError(5, "bus error (test driver)")
        return super().encrypt(buf, size)
'''

KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")


@dataclass
class Run:
    """One ``juggle`` command line: its exit status and output."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def juggle_cli(*argv: str) -> Run:
    """``juggle ARGV`` through the console script's entry point, in this process."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = ["juggle", *argv]
    code: Any = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                juggle.commands.cli.main()
            except SystemExit as done:
                code = done.code
    finally:
        sys.argv = saved
    return Run(int(code or 0), out.getvalue(), err.getvalue())


def operator(socket: Path, *argv: str) -> Run:
    """``juggle --connect SOCKET ARGV``; asserts it succeeded."""
    run = juggle_cli("--connect", str(socket), *argv)
    assert run.code == 0, (argv, run.stdout, run.stderr)
    return run


def faulty_tdes(where: Path) -> Path:
    """The tdes module whose driver raises a bus error on demand (a fault quarantines its
    region)."""
    target = where / "tdes"
    shutil.copytree(MODULES / "tdes", target)
    (target / "faulty_tdes.py").write_text(FAULTY_DRIVER)
    toml = (target / "juggle.toml").read_text()
    toml = toml.replace('"tdes_module.TdesDriver"', '"faulty_tdes.BusErrorDriver"')
    assert "BusErrorDriver" in toml
    (target / "juggle.toml").write_text(toml)
    target.chmod(0o755)
    return target


def hardware_only_tdes(where: Path) -> Path:
    """The tdes module with its hardware tier alone (``tdes_hw``): the tenant arbiter places
    it for its tenants, and counts each tenant's calls on its device."""
    target = where / "tdes_hw"
    shutil.copytree(MODULES / "tdes", target)
    toml = target / "juggle.toml"
    text = toml.read_text()
    for tier, cls in (("software", "SoftwareTDES"), ("native", "NativeTDES")):
        text = text.replace(f'[services.{tier}]\nclass = "tdes_module.{cls}"\n', "")
    assert "[services.native]" not in text and "[services.software]" not in text
    toml.write_text(text.replace('name = "tdes"', 'name = "tdes_hw"'))
    target.chmod(0o755)
    return target


def policy_text(uid: int, top: str = "", extra: str = "") -> str:
    """This uid is tenant ``ops`` (priority 1) and an admin; ``top`` goes before the tenants
    (top-level keys), ``extra`` after them (more tenants)."""
    return (
        f'version = 1\nadmin_uids = [{uid}]\n{top}\n[[tenants]]\nname = "ops"\n'
        f"uids = [{uid}]\npriority = 1\n{extra}"
    )


def audit_lines(daemon: DaemonProcess) -> list[str]:
    return [line for line in daemon.log.read_text().splitlines() if "audit:" in line]


@pytest.fixture
def base() -> Iterator[Path]:
    path = make_base()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_daemon_is_operated_from_the_shell(base: Path) -> None:
    uid = os.getuid()
    daemon = DaemonProcess(base, policy_text(uid))
    module = faulty_tdes(base)
    hw_only = hardware_only_tdes(base)
    sock = daemon.socket
    try:
        daemon.start()
        # who am I: a table by default
        shown = operator(sock, "whoami").stdout
        assert re.search(r"name\s+│\s+ops", shown) and re.search(r"admin\s+│\s+yes", shown)

        # install, list (a table, then its document)
        installed = operator(sock, "install", str(module)).stdout
        assert "installed" in installed and "tdes" in installed and "active" in installed
        listed = operator(sock, "modules").stdout
        assert re.search(r"│ 1\s+│ tdes\s+│ 1\.0\.0\s+│ active", listed), listed
        (svc,) = operator(sock, "services", "--json").json()
        sid = svc["service_id"]
        assert svc["module"] == "tdes" and svc["tier"] != "hardware"

        # juggle it into the fabric
        juggled = operator(sock, "juggle", "--to-hardware", str(sid)).stdout
        assert "prr0" in juggled and "reconfiguration ms (calibrated)" in juggled
        (prr0,) = operator(sock, "regions", "--json").json()
        assert (prr0["state"], prr0["service_id"]) == ("PROGRAMMED", sid)

        # the tenant's call hits the bus error: served by software, prr0 quarantined
        with daemon.client() as tenant:
            enc = tenant.get_service("EncryptionService")
            enc.load_key(KEY)
            enc.encrypt(bytearray(b"BUSERROR" + bytes(8)), 16)

        def region_state() -> str:
            return str(operator(sock, "regions", "--json").json()[0]["state"])

        assert wait_until(lambda: region_state() == "ERROR", 30.0)  # the supervisor's thread
        assert re.search(r"prr0\s+│\s+ERROR", operator(sock, "regions").stdout)

        # recover it: the service is back in hardware
        recovered = operator(sock, "recover", "prr0").stdout
        assert "recovered" in recovered and re.search(rf"to hardware\s+│\s+{sid}\b", recovered)
        assert region_state() == "PROGRAMMED"

        # reload a policy with a second tenant and a hold of 7 ms
        assert daemon.policy is not None
        daemon.policy.write_text(
            policy_text(uid, "tenant_hold_ms = 7\n", '\n[[tenants]]\nname = "ci"\nuids = [4242]\n')
        )
        reloaded = operator(sock, "reload-policy").stdout
        assert "ops, ci" in reloaded and "7 ms (policy)" in reloaded
        names = [t["name"] for t in operator(sock, "tenants", "--json").json()]
        assert names == ["ops", "ci"]

        # uninstall it
        gone = operator(sock, "uninstall", "tdes").stdout
        assert "uninstalled" in gone and "tdes" in gone
        assert "no modules installed" in operator(sock, "modules").stdout

        # a tenant's calls survive its disconnect (hardware-only: the arbiter places it)
        operator(sock, "install", str(hw_only))
        with daemon.client() as tenant:
            enc = tenant.get_service("EncryptionService")
            enc.load_key(KEY)
            for _ in range(3):
                enc.encrypt(bytearray(16), 16)
        (ops, _) = operator(sock, "tenants", "--json").json()
        assert ops["name"] == "ops" and ops["calls"] == 4  # the key's load, 3 encryptions
        assert ops["devices"][0]["calls"] == 4
        assert re.search(r"│ ops\s+│\s+1 │ native\s+│\s+4 │", operator(sock, "tenants").stdout)
        operator(sock, "uninstall", "tdes_hw")  # its device goes; the tenant's calls stay
        (ops, _) = operator(sock, "tenants", "--json").json()
        assert (ops["calls"], ops["devices"]) == (4, [])
        assert daemon.terminate() == 0
    finally:
        daemon.kill()

    lines = audit_lines(daemon)
    asked = [
        line.split(" asked to ", 1)[1].split(" at ", 1)[0] for line in lines if " asked to " in line
    ]
    assert asked == [
        f"install {str(module)!r}",
        f"juggle to_hardware={sid} to_software=[]",
        "recover 'prr0'",
        "reload the policy",
        "uninstall 'tdes'",
        f"install {str(hw_only)!r}",
        "uninstall 'tdes_hw'",
    ]
    for line in lines:  # who and when
        if " asked to " in line:
            assert f"'ops' (uid {uid}, pid " in line and ": done: " in line, line
        assert re.search(r" at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", line), line
    quarantined = [line for line in lines if "quarantined region 'prr0'" in line]
    assert len(quarantined) == 1 and "bus error (test driver)" in quarantined[0]
    summary = [line for line in daemon.log.read_text().splitlines() if " serving: " in line]
    assert len(summary) == 1
    assert (
        f"fabric xupv2p, backend sim, policy {daemon.policy}, tenants [ops (priority 1, "
        in (summary[0])
    )
    assert f"socket {sock}, TLS off, hold derived" in summary[0]


def test_a_daemon_with_a_trusted_key_refuses_an_unsigned_module(base: Path) -> None:
    key = base / "author.pem"
    made = juggle_cli("module", "keygen", str(key), "--json")
    assert made.code == 0, made.stderr
    public = Path(f"{key}.pub")
    public.chmod(0o644)
    module = faulty_tdes(base)
    daemon = DaemonProcess(base, policy_text(os.getuid()), extra=("--trusted-key", str(public)))
    sock = daemon.socket
    try:
        daemon.start()
        trust = operator(sock, "trust", "--json").json()
        (entry,) = trust["keys"]
        assert trust["required"] is True and entry["source"] == str(public)
        assert "must be signed" in operator(sock, "trust").stdout

        refused = juggle_cli("--connect", str(sock), "install", str(module), "--json")
        assert refused.code == 2, refused.stdout
        assert refused.json()["type"] == "SignatureError"
        assert "unsigned" in refused.json()["error"]
        assert operator(sock, "modules", "--json").json() == []

        for argv in (["lock", str(module)], ["sign", str(module), "--key", str(key)]):
            done = juggle_cli("module", *argv, "--json")
            assert done.code == 0, done.stderr
        signed = operator(sock, "install", str(module), "--json").json()
        assert signed["name"] == "tdes" and signed["state"] == "active"
    finally:
        daemon.kill()
    install_lines = [line for line in audit_lines(daemon) if "asked to install" in line]
    assert len(install_lines) == 2
    assert (
        "refused: SignatureError" in install_lines[0]
        and "done: module 'tdes'" in (install_lines[1])
    )
    fingerprint = entry["fingerprint"]
    assert re.fullmatch(r"[0-9a-f]{16}", fingerprint)
    assert f"trusted keys {fingerprint} ({public})" in daemon.log.read_text()


def test_a_second_daemon_names_the_first_ones_pid(base: Path) -> None:
    first = DaemonProcess(base).start()
    try:
        assert first.proc is not None
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "juggle.daemon",
                "--socket",
                str(first.socket),
                "--state",
                str(first.state),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
            check=False,
        )
        assert done.returncode == 1
        assert f"is in use by another daemon (pid {first.proc.pid})" in done.stderr
        other_state = base / "state2"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "juggle.daemon",
                "--socket",
                str(first.socket),
                "--state",
                str(other_state),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
            check=False,
        )
        assert done.returncode == 1
        assert f"a daemon already listens on '{first.socket}' (pid {first.proc.pid})" in (
            done.stderr
        )
    finally:
        first.kill()


def hardware_only_crc32(where: Path) -> Path:
    """The crc32 example with its hardware tier alone (``crchw``; its bitstream targets prr0,
    as the tdes co-module's does)."""
    target = where / "crchw"
    shutil.copytree(MODULES / "crc32", target)
    toml = target / "juggle.toml"
    text = toml.read_text()
    for tier, cls in (("software", "SoftwareCrc32"), ("native", "NativeCrc32")):
        text = text.replace(f'[services.{tier}]\nclass = "crc32_module.{cls}"\n', "")
    assert "[services.native]" not in text and "[services.software]" not in text
    toml.write_text(text.replace('name = "crc32"', 'name = "crchw"'))
    return target


def test_a_preemption_leaves_an_audit_line(base: Path, caplog: pytest.LogCaptureFixture) -> None:
    """In process: the daemon's framework with tenants ``low`` (priority 0) and ``high``
    (priority 2), hold off. ``low`` uses the tdes co-module a juggle put into prr0; ``high``'s
    call to a hardware-only CRC-32 service takes prr0: ``low`` hears PREEMPT, and the daemon
    logs one audit line naming ``low``."""
    policy = base / "policy.toml"
    policy.write_text(
        'version = 1\ntenant_hold_ms = 0\n\n[[tenants]]\nname = "low"\nuids = [4001]\n'
        'priority = 0\n\n[[tenants]]\nname = "high"\nuids = [4002]\npriority = 2\n'
    )
    daemon = Daemon(base / "s.sock", base / "state", policy_path=policy)
    caplog.set_level(logging.WARNING, logger=audit.AUDIT_LOGGER)
    daemon.prepare()
    try:
        fw = daemon.framework()
        fw.install(MODULES / "tdes").start()
        (sid,) = [s.service_id for s in fw.services()]
        fw.juggle(to_hardware=sid)
        enc = fw.get_service("EncryptionService", consumer="low")
        enc.load_key(KEY)
        enc.encrypt(bytearray(16), 16)
        fw.install(hardware_only_crc32(base)).start()
        crc = fw.get_service("ChecksumService", consumer="high")
        assert crc.crc32(b"123456789") == 0xCBF43926
        assert fw.signals("low").wait_for("preempt", timeout=10.0) is not None

        def audited() -> list[str]:
            return [r.getMessage() for r in caplog.records if "audit:" in r.getMessage()]

        assert wait_until(lambda: len(audited()) == 1, 10.0), audited()
        (line,) = audited()
        assert "preempted tenant 'low' (device tdes, service 1)" in line, line
        totals = {t.name: (t.calls, t.preemptions) for t in fw.tenants()}
        assert totals == {"low": (0, 1), "high": (1, 0)}  # a co-module's calls: not its device's
    finally:
        daemon.framework().close()
        daemon.state.unlock()


def test_the_policys_hold_reaches_the_arbiter_and_a_reload_changes_it(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tenant_hold_ms`` of the policy is the framework's at start (5 ms: 5000 µs in the
    arbiter), a reload applies a new one (0: off) and one without it derives the hold again
    (None); a bad value through :meth:`Framework.set_tenant_hold` changes nothing."""
    import juggle.runtime.juggler as juggler_module
    from juggle.errors import ConfigurationError
    from juggle.runtime.tenancy import TenantArbiter

    made: list[TenantArbiter] = []

    def arbiter(host: Any, **kwargs: Any) -> TenantArbiter:
        made.append(TenantArbiter(host, **kwargs))
        return made[-1]

    monkeypatch.setattr(juggler_module, "TenantArbiter", arbiter)
    policy = base / "policy.toml"
    tenant = '\n[[tenants]]\nname = "low"\nuids = [4001]\n'
    policy.write_text(f"version = 1\ntenant_hold_ms = 5\n{tenant}")
    daemon = Daemon(base / "s.sock", base / "state", policy_path=policy)
    daemon.prepare()
    try:
        (held,) = made
        assert held.statistics().hysteresis_us == 5000.0
        assert "hold 5 ms (policy)" in daemon.summary()
        policy.write_text(f"version = 1\ntenant_hold_ms = 0\n{tenant}")
        assert daemon.reload_policy()["tenant_hold"] == "off (0 ms)"
        assert held.statistics().hysteresis_us == 0.0
        policy.write_text(f"version = 1\n{tenant}")
        daemon.reload_policy()
        assert held.statistics().hysteresis_us is None
        with pytest.raises(ConfigurationError, match="hold_ms"):
            daemon.framework().set_tenant_hold(-1.0)
        assert held.statistics().hysteresis_us is None
        # trusted keys are read at start only: a reload that changes them says so
        assert juggle_cli("module", "keygen", str(base / "k.pem")).code == 0
        policy.write_text(f'version = 1\ntrusted_keys = ["{base}/k.pem.pub"]\n{tenant}')
        assert daemon.reload_policy()["restart_needed"] == ["trusted_keys"]
        assert daemon.trusted_keys() == {"required": False, "keys": []}
    finally:
        daemon.framework().close()
        daemon.state.unlock()


def test_a_trusted_key_file_others_may_write_is_refused(base: Path) -> None:
    """A key file the daemon must not trust (writable by others) stops the start with an
    UnsafePathError naming it; a missing one with a ConfigurationError naming it."""
    from juggle.errors import ConfigurationError, UnsafePathError

    made = juggle_cli("module", "keygen", str(base / "k.pem"), "--json")
    assert made.code == 0, made.stderr
    public = base / "k.pem.pub"
    public.chmod(0o666)
    daemon = Daemon(base / "s.sock", base / "state", trusted_keys=[public])
    with pytest.raises(UnsafePathError, match="k.pem.pub"):
        daemon.prepare()
    daemon.state.unlock()
    missing = Daemon(base / "s.sock", base / "state", trusted_keys=[base / "nope.pub"])
    with pytest.raises(ConfigurationError, match="nope.pub"):
        missing.prepare()
    missing.state.unlock()


def test_a_tenants_calls_stay_when_its_service_stops_under_it(base: Path) -> None:
    """In process: the tenant still holds its proxy when the module is uninstalled; its
    device leaves, its calls stay in its totals."""
    import juggle

    with juggle.Framework() as fw:
        fw.add_tenant("t", priority=1)
        module = fw.install(hardware_only_tdes(base))
        module.start()
        enc = fw.get_service("EncryptionService", consumer="t")
        enc.load_key(KEY)
        enc.encrypt(bytearray(16), 16)
        module.uninstall()
        (t,) = fw.tenants()
        assert (t.calls, t.devices) == (2, ())
