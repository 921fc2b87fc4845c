"""The public names: exported once, sorted, all importable; the contract of ARCHITECTURE.md."""

from __future__ import annotations

import juggle


def test_all_is_sorted_and_importable() -> None:
    assert list(juggle.__all__) == sorted(juggle.__all__)
    for name in juggle.__all__:
        assert hasattr(juggle, name), name


def test_contract_names() -> None:
    fw = juggle.Framework(fabric="xupv2p")
    try:
        for method in (
            "install",
            "get_service",
            "juggle",
            "set_tier",
            "services",
            "regions",
            "statistics",
            "set_foreground",
            "close",
        ):
            assert callable(getattr(fw, method)), method
    finally:
        fw.close()


def test_errors_form_one_tree() -> None:
    import inspect

    from juggle import errors

    classes = [
        c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__
    ]
    assert len(classes) > 30
    for cls in classes:
        assert issubclass(cls, juggle.JuggleError), cls


def test_error_tree_docstring_lists_every_class() -> None:
    import inspect

    from juggle import errors

    doc = errors.__doc__ or ""
    for name, cls in inspect.getmembers(errors, inspect.isclass):
        if cls.__module__ == errors.__name__:
            assert f" {name}" in doc, f"{name} missing from the tree in errors.py's docstring"


def test_runtime_exports_what_its_clients_use() -> None:
    """``juggle.runtime.__all__``: sorted, importable, and the names the daemon and the
    dashboard may import (they import no runtime submodule)."""
    import juggle.runtime

    names = list(juggle.runtime.__all__)
    assert names == sorted(names)
    for name in names:
        assert hasattr(juggle.runtime, name), name
    assert {
        "Framework",
        "FrameworkOptions",
        "JuggleReport",
        "Module",
        "ModuleSnapshot",
        "ModuleState",
        "ProxyInfo",
        "RegionSnapshot",
        "ServiceProxy",
        "ServiceSnapshot",
        "ServiceStatistics",
        "SignalChannel",
        "TenantSignal",
        "TenantSnapshot",
        "Tier",
        "parse_filter",
        "state_setting",
    } <= set(names)
    for name in set(names) & set(juggle.__all__):
        assert getattr(juggle.runtime, name) is getattr(juggle, name), name


def test_framework_keeps_its_public_methods() -> None:
    """The facade's public methods (issue 21: they stay as they were) and the new ones."""
    public = {n for n in dir(juggle.Framework) if not n.startswith("_")}
    assert {
        "add_tenant",
        "close",
        "control",
        "controller",
        "foreground",
        "get_service",
        "history",
        "install",
        "juggle",
        "juggle_count",
        "module",
        "modules",
        "options",
        "proxy_info",
        "reconfiguration_ms_total",
        "recover",
        "regions",
        "register_service",
        "services",
        "set_controller",
        "set_foreground",
        "set_tenant",
        "set_tier",
        "signals",
        "snapshot",
        "start_control_loop",
        "statistics",
        "stop_control_loop",
        "tenants",
        "unget_service",
        "verify_sample",
    } <= public
    assert not public & {"note_fault", "preempt_to_software", "return_to_hardware"}
