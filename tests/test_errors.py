"""The exception tree: the drawing in juggle.errors is the class hierarchy, every error class
lives in juggle.errors, and every attribute is typed, keyword-only and survives a rebuild."""

from __future__ import annotations

import ast
import inspect
import pickle
import re
from pathlib import Path

import pytest

from juggle import errors
from juggle.errors import JuggleError

SRC = Path(errors.__file__).resolve().parent

#: one line of the drawing: the tree prefix, the class, its other bases, its attributes
LINE = re.compile(
    r"^(?P<prefix>(?:[│ ]   )*)(?:[├└]── )?(?P<name>\w+)"
    r"(?: \((?P<extra>[\w, ]+)\))?(?:  \[(?P<attrs>[\w, ]+)\])?$"
)


def error_classes() -> dict[str, type[JuggleError]]:
    return {
        name: obj
        for name, obj in vars(errors).items()
        if isinstance(obj, type) and issubclass(obj, JuggleError)
    }


def drawing() -> list[tuple[str, str | None, list[str], list[str] | None]]:
    """(class, drawn parent, drawn extra bases, drawn attributes or None) per drawn line."""
    doc = errors.__doc__ or ""
    lines = doc.split("::\n\n", 1)[1].splitlines()
    rows: list[tuple[str, str | None, list[str], list[str] | None]] = []
    stack: list[str] = []
    for raw in lines:
        if not raw.strip():
            break
        text = raw[4:]  # the docstring's literal block is indented by four
        found = LINE.match(text)
        assert found, f"drawing line does not parse: {raw!r}"
        depth = len(found["prefix"]) // 4 + (0 if text.startswith(found["name"]) else 1)
        del stack[depth:]
        parent = stack[-1] if stack else None
        extra = [b.strip() for b in found["extra"].split(",")] if found["extra"] else []
        attrs = [a.strip() for a in found["attrs"].split(",")] if found["attrs"] else None
        rows.append((found["name"], parent, extra, attrs))
        stack.append(found["name"])
    return rows


def test_the_drawing_is_the_class_hierarchy() -> None:
    rows = drawing()
    classes = error_classes()
    drawn = [name for name, _, _, _ in rows]
    assert sorted(drawn) == sorted(set(drawn)), "a class is drawn twice"
    assert set(drawn) == set(classes), set(classes) ^ set(drawn)
    for name, parent, extra, attrs in rows:
        cls = classes[name]
        if cls is JuggleError:
            assert parent is None and not extra
            continue
        first, *others = cls.__bases__
        assert parent == first.__name__, f"{name} is drawn under {parent}, its parent is {first}"
        assert extra == [b.__name__ for b in others], (name, extra, others)
        keywords = list(cls.attribute_types())
        if attrs is None:
            assert issubclass(first, JuggleError)
            assert keywords == list(first.attribute_types()), (
                f"{name} takes {keywords}; the drawing shows none, so those of {first.__name__}"
            )
        else:
            assert attrs == keywords, f"{name} is drawn with {attrs}, takes {keywords}"
            assert attrs != list(first.attribute_types()), f"{name}: brackets repeat the parent"


def test_every_error_class_of_juggle_is_in_the_tree() -> None:
    """No module of juggle defines an error class outside juggle.errors (the daemon's errors
    included)."""
    names = set(error_classes())
    strays = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = {
                    b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
                }
                if bases & names:
                    strays.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}")
    assert strays == []
    assert not (SRC / "daemon" / "errors.py").exists()


#: a sample value of each attribute type
SAMPLE: dict[type, object] = {str: "prr1", int: 7, float: 2.5}


@pytest.mark.parametrize("name", sorted(error_classes()))
def test_attributes_are_typed_keywords_that_survive_a_rebuild(name: str) -> None:
    cls = error_classes()[name]
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert params[0].name == "message" and params[0].kind is params[0].POSITIONAL_OR_KEYWORD
    for param in params[1:]:
        assert param.kind is param.KEYWORD_ONLY, (name, param)
    types = cls.attribute_types()
    assert [p.name for p in params[1:]] == list(types)
    assert "subject" not in types
    given = {}
    for attr, allowed in types.items():
        assert set(allowed) <= {str, int, float, type(None)}, (name, attr, allowed)
        if attr != "remote_type":
            assert type(None) in allowed and cls("m").attributes()[attr] is None, (name, attr)
        given[attr] = SAMPLE[next(t for t in allowed if t is not type(None))]
    error = cls("what went wrong", **given)
    assert str(error) == "what went wrong"
    assert error.attributes() == given
    for attr, value in given.items():
        assert getattr(error, attr) == value
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is cls and again.attributes() == given and str(again) == str(error)
    rebuilt = cls(str(error), **error.attributes())
    assert rebuilt.attributes() == given
