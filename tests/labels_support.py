"""THE RULE of ``tests/test_json_labels.py`` as one walk: every numeric leaf of a ``--json``
document with the label the rule gives it (used by the label test and the golden outputs)."""

from __future__ import annotations

from typing import Any

KINDS = {"measured", "modeled", "input", "calibrated"}


def figure_labels(doc: Any) -> list[tuple[str, int | float, Any]]:
    """``(path, value, label)`` for every numeric leaf (int or float, not a bool) of ``doc``:
    the label is the entry of the nearest enclosing ``labels`` dict for the next key down to
    the leaf, followed key by key where it is a dict; ``labels`` and ``how`` are not figures;
    list items take their list's label. None when nothing labels the leaf."""
    out: list[tuple[str, int | float, Any]] = []

    def walk(node: Any, path: str, label: Any) -> None:
        if isinstance(node, dict):
            own = node.get("labels") if isinstance(node.get("labels"), dict) else None
            for key, child in node.items():
                if key in ("labels", "how"):
                    continue
                if own is not None and key in own:
                    sub = own[key]
                elif isinstance(label, dict):
                    sub = label.get(key)
                else:
                    sub = label
                walk(child, f"{path}.{key}" if path else str(key), sub)
        elif isinstance(node, list):
            for i, child in enumerate(node):
                walk(child, f"{path}[{i}]", label)
        elif isinstance(node, int | float) and not isinstance(node, bool):
            out.append((path, node, label))

    walk(doc, "", None)
    return out


def unlabeled(doc: Any) -> list[str]:
    """Paths of the numeric leaves of ``doc`` that THE RULE leaves without a kind."""
    return [
        f"{path} (label {label!r})"
        for path, _, label in figure_labels(doc)
        if not (isinstance(label, str) and label in KINDS)
    ]
