"""A policy reload changes a registered tenant's priority, class and model in the running
daemon (``Framework.set_tenant``), with no restart."""

from __future__ import annotations

import os
from typing import Any


def _policy(alice: str) -> str:
    me = os.getuid()
    return (
        f'version = 1\nadmin_uids = [{me}]\nsocket_mode = "0600"\n'
        f'\n[[tenants]]\nname = "alice"\nuids = [{me}]\n{alice}'
        f'\n[[tenants]]\nname = "carol"\nuids = [{me + 4242}]\npriority = 1\n'
    )


def test_a_reload_gives_a_registered_tenant_its_new_priority_and_model(spawn: Any) -> None:
    daemon = spawn(_policy("priority = 0\n"))
    with daemon.client() as admin:
        before = {t.name: (t.priority, t.realtime, t.model) for t in admin.tenants()}
        assert before == {"alice": (0, False, "native"), "carol": (1, False, "native")}
        assert daemon.policy is not None
        daemon.policy.write_text(_policy('priority = 2\nmodel = "aware"\n'))
        summary = admin.reload_policy()
    assert summary["changed"] == ["alice"] and "restart_needed" not in summary
    with daemon.client() as admin:  # a new connection: alice's identity changed
        after = {t.name: (t.priority, t.realtime, t.model) for t in admin.tenants()}
    assert after == {"alice": (2, False, "aware"), "carol": (1, False, "native")}
    daemon.policy.write_text(_policy("realtime = true\n"))
    with daemon.client() as admin:
        assert admin.reload_policy()["changed"] == ["alice"]
        (alice,) = [t for t in admin.tenants() if t.name == "alice"]
    assert alice.realtime and alice.model == "native"
