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
