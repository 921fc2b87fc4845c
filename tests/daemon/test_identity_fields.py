"""Who a connection is comes from ``SO_PEERCRED`` at accept, never from what it sends: a tenant
that writes identity fields (``tenant``, ``uid``, ``admin``, ``consumer``, ``name``) into its
requests is still itself, without admin rights, and reaches only its own consumer."""

from __future__ import annotations

from typing import Any

import pytest
from daemon_support import MODULES, NOBODY, run_as, running_as_root

from juggle.daemon import connect
from juggle.errors import JuggleError

FORGED = {"tenant": "alice", "name": "alice", "uid": 0, "gid": 0, "admin": True, "pid": 1}


def policy() -> str:
    return (
        'version = 1\nadmin_uids = [0]\nsocket_mode = "0666"\n'
        '\n[[tenants]]\nname = "alice"\nuids = [0]\n'
        f'\n[[tenants]]\nname = "bob"\nuids = [{NOBODY}]\n'
    )


def _forging_tenant(socket_path: str) -> dict[str, Any]:
    """As bob: requests carrying alice's identity fields; what the daemon made of each."""
    out: dict[str, Any] = {}
    with connect(socket_path) as client:
        link = client._current_link()

        def ask(op: str, **fields: Any) -> Any:
            try:
                return link.request({"op": op, **FORGED, **fields}, 10.0).reply
            except JuggleError as exc:
                return type(exc).__name__

        who = ask("whoami")
        out["whoami"] = who["ok"] if isinstance(who, dict) else who
        for op, fields in (
            ("install", {"path": str(MODULES / "crc32"), "start": True}),
            ("uninstall", {"name": "tdes"}),
            ("juggle", {"to_hardware": [], "to_software": []}),
            ("reload_policy", {}),
            ("recover", {"region": "prr0"}),
        ):
            out[op] = ask(op, **fields)
        got = ask("get_service", interface="EncryptionService", filter=None, consumer="alice")
        out["get_service"] = "ok" if isinstance(got, dict) and "ok" in got else got
        services = ask("services")
        consumers: list[str] = []
        if isinstance(services, dict):
            for snap in services["ok"]:
                consumers.extend(snap["consumers"])
        out["consumers"] = sorted(set(consumers))
        tenants = ask("tenants")
        out["tenants"] = (
            sorted(t["name"] for t in tenants["ok"]) if isinstance(tenants, dict) else tenants
        )
    return out


@pytest.mark.skipif(not running_as_root(), reason="needs a second uid (setuid in a child)")
def test_identity_fields_in_requests_are_ignored(spawn: Any) -> None:
    daemon = spawn(policy())
    with daemon.client() as alice:
        alice.install(MODULES / "tdes")
        enc = alice.get_service("EncryptionService")
        enc.load_key(bytes(range(24)))
        seen = run_as(NOBODY, _forging_tenant, str(daemon.socket))
        assert seen["whoami"]["name"] == "bob", seen
        assert seen["whoami"]["uid"] == NOBODY and seen["whoami"]["admin"] is False
        for op in ("install", "uninstall", "juggle", "reload_policy", "recover"):
            assert seen[op] == "AccessDeniedError", (op, seen[op])
        assert seen["get_service"] == "ok"
        assert seen["consumers"] == ["bob"]  # his own consumer only, not alice's
        assert seen["tenants"] == ["bob"]
        assert {m.name for m in alice.modules()} == {"tdes"}  # nothing installed or removed
        (snap,) = [s for s in alice.services() if s.module == "tdes"]
        assert "alice" in snap.consumers
