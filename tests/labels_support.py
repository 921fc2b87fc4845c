"""THE RULE of ``tests/test_json_labels.py`` as one walk: every numeric leaf of a ``--json``
document with the label the rule gives it (used by the label test and the golden outputs)."""

from __future__ import annotations

from typing import Any

from juggle.simulate.fidelity import paper_rows

__all__ = [
    "KINDS",
    "figure_labels",
    "paper_rows",
    "paper_values_not_input",
    "provenance_violations",
    "unlabeled",
]

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


def provenance_violations(doc: Any) -> list[str]:
    """THE PROVENANCE RULE: each ``paper_comparison`` row's label follows from how its figure
    is produced, and the figure carries that label where it stands in ``doc`` (``of``).

    An echoed value (``echoed``) is *input*; a figure with a fitted parameter in it (a
    non-empty ``fitted``, each naming what it was ``fitted_to``) is *calibrated*, never
    *modeled*; a figure with neither is *modeled*. The row's own ``ours`` and ``error_pct``
    take the row's label. Returns one line per broken row (empty: all hold)."""
    at = {path: label for path, _, label in figure_labels(doc)}
    out: list[str] = []
    for row in paper_rows(doc):
        name, label, fitted = row.get("figure"), row.get("label"), row.get("fitted")
        if not isinstance(fitted, list) or not all(
            isinstance(f, dict) and f.get("parameter") and f.get("fitted_to") for f in fitted
        ):
            out.append(f"{name}: 'fitted' must list parameters with what they were fitted_to")
            continue
        want = "input" if row.get("echoed") else "calibrated" if fitted else "modeled"
        if label != want:
            out.append(f"{name}: labeled {label!r}, produced as {want!r} (fitted: {fitted})")
        own = row.get("labels", {})
        if own.get("ours") != label or own.get("error_pct") != label or own.get("paper") != "input":
            out.append(f"{name}: the row's labels {own} disagree with its label {label!r}")
        of = str(row.get("of"))
        if at.get(of) != label:
            out.append(f"{name}: {of} is labeled {at.get(of)!r}, not {label!r}")
    return out


def paper_values_not_input(doc: Any) -> list[str]:
    """A value copied from a paper is *input* wherever it stands: every numeric leaf under a
    key named ``paper`` or ``paper_*`` (a paper column; ``paper_comparison`` is the list of
    rows, not a value) whose label is anything else. Returns one line per such leaf."""
    out: list[str] = []
    for path, _, label in figure_labels(doc):
        keys = [k.split("[", 1)[0] for k in path.split(".")]
        copied = any(
            k == "paper" or (k.startswith("paper_") and k != "paper_comparison") for k in keys
        )
        if copied and not (isinstance(label, str) and label.startswith("input")):
            out.append(f"{path}: a paper value labeled {label!r}")
    return out
