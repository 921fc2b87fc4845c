"""OSGi / RFC 4515 LDAP filters over service properties, and OSGi versions.

A filter is a boolean question asked of a property map, written in prefix form:
``(&(objectClass=EncryptionService)(|(tier=hardware)(version>=1.2)))``. It is parsed once into
a tree of small closures (:class:`Filter`), so asking it of many services is cheap.

Semantics follow OSGi (Core, "Filter Syntax"):

* ``(&F...)``, ``(|F...)``, ``(!F)``; ``(&)`` is true and ``(|)`` false (RFC 4526);
* ``(a=v)``, ``(a>=v)``, ``(a<=v)``, ``(a~=v)`` (approximate: case and white space ignored),
  ``(a=*)`` (presence) and substrings ``(a=ini*any*fin)``;
* attribute names are case-insensitive; white space around parentheses and around attribute
  names is ignored, white space inside a value is kept;
* the filter's string is coerced to the type of the property value (``int``, ``float``,
  ``bool``, ``str``, :class:`Version`, enum members by name or value); a list, tuple or set
  matches when any element matches; a value that does not coerce does not match;
* a string property and an operand that both read as dotted numeric versions (``1.10``,
  ``2.0.1``; at least one of them with a dot) compare as versions: ``"1.10.0" >= "1.9"``;
* escapes: RFC 4515 ``\\2a`` (two hex digits; consecutive ones form UTF-8) and OSGi's ``\\*``,
  ``\\(``, ``\\)``, ``\\\\`` (a backslash before any other character keeps that character).

Filters and versions may come from outside, so they are bounded by :class:`~juggle.limits.Limits`:
a filter has at most ``max_filter_chars`` characters and nests at most 100 levels; a value
compared as a number or version, and each number of a version, has at most
``max_number_digits`` digits (:class:`FilterSyntaxError`, :class:`VersionFormatError` naming the
value). A property *value* with more digits is not refused: it just never reads as a version.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, NoReturn

from juggle.errors import FilterSyntaxError, PropertyError, VersionFormatError
from juggle.limits import DEFAULT_LIMITS, Limits

__all__ = ["Filter", "Properties", "Version", "parse_filter"]

_Matcher = Callable[[Mapping[str, Any]], bool]

_MAX_DEPTH: Final = 100
_MISSING: Final = object()
_NAME_STOP: Final = frozenset("=<>~()")
_COLLECTIONS: Final = (list, tuple, set, frozenset)

# -- versions --------------------------------------------------------------------------------

_VERSION_RE: Final = re.compile(r"(\d+)(?:\.(\d+)(?:\.(\d+)(?:\.([A-Za-z0-9_-]+))?)?)?")
_QUALIFIER_RE: Final = re.compile(r"[A-Za-z0-9_-]*")
_DOTTED_RE: Final = re.compile(r"\d+(?:\.\d+){0,2}")
#: what ``int()`` or ``float()`` might read (a superset: only used to count digits)
_NUMBER_RE: Final = re.compile(r"[+-]?[\d_]*(?:\.[\d_]*)?(?:[eE][+-]?[\d_]+)?")
_DIGIT_RE: Final = re.compile(r"\d")
_SHOWN_CHARS: Final = 80


def _shown(value: str) -> str:
    """``repr(value)`` for a message, cut after 80 characters with the length noted."""
    if len(value) <= _SHOWN_CHARS:
        return repr(value)
    return f"{value[:_SHOWN_CHARS]!r}... ({len(value):,} characters)"


@dataclass(frozen=True, order=True, slots=True)
class Version:
    """An OSGi version ``major.minor.micro.qualifier``, ordered field by field.

    The qualifier compares as a string, and no qualifier sorts first, so ``1.0.0 < 1.0.0.beta``.
    Raises :class:`VersionFormatError` for a negative or non-int number or a bad qualifier.
    """

    major: int = 0
    minor: int = 0
    micro: int = 0
    qualifier: str = ""

    def __post_init__(self) -> None:
        for name in ("major", "minor", "micro"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise VersionFormatError(
                    f'"{name}" must be an int >= 0, got {value!r}', value=value
                )
        if not isinstance(self.qualifier, str) or not _QUALIFIER_RE.fullmatch(self.qualifier):
            raise VersionFormatError(
                f'"qualifier" must be letters, digits, "_" or "-", got {self.qualifier!r}',
                value=self.qualifier,
            )

    @classmethod
    def parse(cls, text: str | Version, *, limits: Limits = DEFAULT_LIMITS) -> Version:
        """Read ``"1"``, ``"1.2"``, ``"1.2.3"`` or ``"1.2.3.qualifier"`` (white space around ok).

        Raises :class:`VersionFormatError` naming the text when it is not a version or one of
        its numbers has more than ``limits.max_number_digits`` digits.
        """
        if isinstance(text, Version):
            return text
        match = _VERSION_RE.fullmatch(text.strip()) if isinstance(text, str) else None
        if match is None:
            shown = _shown(text) if isinstance(text, str) else repr(text)
            raise VersionFormatError(
                f'"version" must read major[.minor[.micro[.qualifier]]], got {shown}', value=text
            )
        major, minor, micro, qualifier = match.groups()
        if any(len(number or "") > limits.max_number_digits for number in (major, minor, micro)):
            raise VersionFormatError(
                f'"version" {_shown(text)} has a number of more than '
                f"{limits.max_number_digits} digits (Limits.max_number_digits)",
                value=text,
            )
        return cls(int(major), int(minor or 0), int(micro or 0), qualifier or "")

    def __str__(self) -> str:
        base = f"{self.major}.{self.minor}.{self.micro}"
        return f"{base}.{self.qualifier}" if self.qualifier else base


def _try_version(text: str) -> Version | None:
    try:
        return Version.parse(text)
    except VersionFormatError:
        return None


@functools.lru_cache(maxsize=2048)
def _dotted(text: str) -> tuple[Version | None, bool]:
    """``(version, has_dot)`` when ``text`` is a dotted numeric version, else ``(None, False)``
    (also for a property value whose numbers are too long to read: it compares as a string)."""
    if not _DOTTED_RE.fullmatch(text):
        return None, False
    try:
        return Version.parse(text), "." in text
    except VersionFormatError:
        return None, False


def _number_digits(text: str) -> int:
    """Digits an operand has if it reads as a number or a dotted version, else 0."""
    stripped = text.strip()
    counted = 0
    version = _VERSION_RE.fullmatch(stripped)
    if version is not None:
        counted = max(len(number or "") for number in version.groups()[:3])
    if _NUMBER_RE.fullmatch(stripped):
        counted = max(counted, len(_DIGIT_RE.findall(stripped)))
    return counted


# -- property maps ---------------------------------------------------------------------------


class Properties(Mapping[str, Any]):
    """An immutable property map whose keys compare case-insensitively, as OSGi's do.

    ``props["objectclass"]`` finds the ``objectClass`` entry; iteration yields keys as written.
    Raises :class:`PropertyError` for a key that is not a non-empty string or for two keys
    that differ only in case.
    """

    __slots__ = ("_data", "_folded")

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = {}
        self._folded: dict[str, Any] = {}
        for key, value in (data or {}).items():
            if not isinstance(key, str) or not key:
                raise PropertyError(
                    f"property keys must be non-empty strings, got {key!r}", key=key
                )
            folded = key.lower()
            if folded in self._folded:
                raise PropertyError(
                    f"property key {key!r} differs from another only in case", key=key
                )
            self._data[key] = value
            self._folded[folded] = value

    def __getitem__(self, key: str) -> Any:
        try:
            return self._data[key]
        except KeyError:
            if isinstance(key, str) and key.lower() in self._folded:
                return self._folded[key.lower()]
            raise

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._folded

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Properties({self._data!r})"


def _lookup(properties: Mapping[str, Any], name: str, folded: str) -> Any:
    """The value of attribute ``name`` in ``properties``, ignoring case, or ``_MISSING``."""
    if type(properties) is Properties:
        return properties._folded.get(folded, _MISSING)
    value = properties.get(name, _MISSING)
    if value is _MISSING:
        for key, candidate in properties.items():
            if isinstance(key, str) and key.lower() == folded:
                return candidate
    return value


# -- comparisons -----------------------------------------------------------------------------


class _Op(enum.Enum):
    EQ = "="
    GE = ">="
    LE = "<="
    APPROX = "~="


def _approx(text: str) -> str:
    return "".join(text.split()).casefold()


def _as_number(text: str, kind: type[int] | type[float]) -> int | float | None:
    try:
        return kind(text.strip())
    except ValueError:
        return None


class _Operand:
    """A filter's value, pre-coerced at parse time to every type a property may have."""

    __slots__ = ("approx", "as_bool", "as_float", "as_int", "as_version", "dotted", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.approx = _approx(text)
        self.as_int = _as_number(text, int)
        self.as_float = _as_number(text, float)
        word = text.strip().lower()
        self.as_bool = True if word == "true" else False if word == "false" else None
        self.as_version = _try_version(text)
        self.dotted = _dotted(text)


def _ordered(left: Any, op: _Op, right: Any) -> bool:
    if op is _Op.GE:
        return bool(left >= right)
    if op is _Op.LE:
        return bool(left <= right)
    return bool(left == right)


def _compare_str(value: str, op: _Op, operand: _Operand) -> bool:
    if op is _Op.APPROX:
        return _approx(value) == operand.approx
    theirs, their_dot = operand.dotted
    if theirs is not None and not (op is _Op.EQ and value == operand.text):
        mine, my_dot = _dotted(value)
        if mine is not None and (my_dot or their_dot):
            return _ordered(mine, op, theirs)
    return _ordered(value, op, operand.text)


def _compare(value: Any, op: _Op, operand: _Operand) -> bool:
    """Whether property ``value`` satisfies ``value op operand`` after coercing the operand."""
    if isinstance(value, str):
        return _compare_str(value, op, operand)
    if isinstance(value, _COLLECTIONS):
        for item in value:  # noqa: SIM110 - loops run ~3x faster than any(<genexpr>)
            if _compare(item, op, operand):
                return True
        return False
    if isinstance(value, bool):  # OSGi: every operator is equality for booleans
        return operand.as_bool is not None and value is operand.as_bool
    if isinstance(value, int):
        number = operand.as_int if operand.as_int is not None else operand.as_float
        return number is not None and _ordered(value, op, number)
    if isinstance(value, float):
        return operand.as_float is not None and _ordered(value, op, operand.as_float)
    if isinstance(value, Version):
        return operand.as_version is not None and _ordered(value, op, operand.as_version)
    if isinstance(value, enum.Enum):
        names = (value.name, str(value.value))
        if op is _Op.APPROX:
            return operand.approx in {_approx(name) for name in names}
        return op is _Op.EQ and operand.text in names
    return False


def _substring(value: Any, initial: str, middle: tuple[str, ...], final: str) -> bool:
    """Whether string ``value`` reads ``initial*middle[0]*...*final``."""
    if isinstance(value, _COLLECTIONS):
        for item in value:  # noqa: SIM110
            if _substring(item, initial, middle, final):
                return True
        return False
    if not isinstance(value, str) or not value.startswith(initial):
        return False
    start, end = len(initial), len(value) - len(final)
    if end < start or not value.endswith(final):
        return False
    for piece in middle:
        found = value.find(piece, start, end)
        if found < 0:
            return False
        start = found + len(piece)
    return True


# -- matchers (the compiled closure tree) ----------------------------------------------------


def _all_of(children: list[_Matcher]) -> _Matcher:
    def match(properties: Mapping[str, Any]) -> bool:
        for child in children:  # noqa: SIM110
            if not child(properties):
                return False
        return True

    return match


def _any_of(children: list[_Matcher]) -> _Matcher:
    def match(properties: Mapping[str, Any]) -> bool:
        for child in children:  # noqa: SIM110
            if child(properties):
                return True
        return False

    return match


def _none_of(child: _Matcher) -> _Matcher:
    def match(properties: Mapping[str, Any]) -> bool:
        return not child(properties)

    return match


def _present(name: str) -> _Matcher:
    folded = name.lower()

    def match(properties: Mapping[str, Any]) -> bool:
        value = _lookup(properties, name, folded)
        return value is not _MISSING and value is not None

    return match


def _comparison(name: str, op: _Op, operand: _Operand) -> _Matcher:
    folded = name.lower()

    def match(properties: Mapping[str, Any]) -> bool:
        value = _lookup(properties, name, folded)
        return value is not _MISSING and value is not None and _compare(value, op, operand)

    return match


def _substrings(name: str, initial: str, middle: tuple[str, ...], final: str) -> _Matcher:
    folded = name.lower()

    def match(properties: Mapping[str, Any]) -> bool:
        return _substring(_lookup(properties, name, folded), initial, middle, final)

    return match


def _escape(value: str) -> str:
    """The normalized spelling of a value: OSGi backslash escapes for ``\\ * ( )``."""
    return value.replace("\\", "\\\\").replace("*", "\\*").replace("(", "\\(").replace(")", "\\)")


# -- the filter and its parser ---------------------------------------------------------------


class Filter:
    """A parsed LDAP filter: ``matches(properties)`` answers it, ``str()`` gives its normal form.

    The normal form has no white space between parts, attribute names as written, ``**``
    collapsed and values escaped OSGi-style; parsing it gives an equal filter. Filters are
    equal when their normal forms are. ``Filter(text)`` parses like :func:`parse_filter`
    (without the cache) and raises :class:`FilterSyntaxError`.
    """

    __slots__ = ("_matcher", "_text")

    def __init__(self, text: str, *, limits: Limits = DEFAULT_LIMITS) -> None:
        self._text, self._matcher = _Parser(text, limits).parse()

    def matches(self, properties: Mapping[str, Any]) -> bool:
        """Whether the property map satisfies the filter (names compared ignoring case)."""
        return self._matcher(properties)

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Filter({self._text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Filter) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)


def parse_filter(text: str, *, limits: Limits = DEFAULT_LIMITS) -> Filter:
    """Parse an RFC 4515 / OSGi filter string, reusing recent results (filters are immutable).

    Raises :class:`FilterSyntaxError` naming the text and the position of the problem, also
    for a filter of more than ``limits.max_filter_chars`` characters, nesting more than 100
    levels, or comparing with a number of more than ``limits.max_number_digits`` digits.
    """
    if not isinstance(text, str):
        raise FilterSyntaxError(f'"filter" must be a string, got {text!r}', filter=text)
    _check_length(text, limits)
    return _parse_cached(text, limits)


@functools.lru_cache(maxsize=1024)
def _parse_cached(text: str, limits: Limits) -> Filter:
    return Filter(text, limits=limits)


def _check_length(text: str, limits: Limits) -> None:
    if len(text) > limits.max_filter_chars:
        raise FilterSyntaxError(
            f"filter {_shown(text)} is {len(text):,} characters, over the limit of "
            f"{limits.max_filter_chars:,} (Limits.max_filter_chars)",
            filter=text,
        )


_Parsed = tuple[str, _Matcher]


class _Parser:
    """Recursive descent over one filter string; each rule returns (normal form, matcher)."""

    def __init__(self, text: str, limits: Limits) -> None:
        if not isinstance(text, str):
            raise FilterSyntaxError(f'"filter" must be a string, got {text!r}', filter=text)
        _check_length(text, limits)
        self.text = text
        self.pos = 0
        self.limits = limits

    def fail(self, problem: str, position: int | None = None) -> NoReturn:
        where = self.pos if position is None else position
        raise FilterSyntaxError(
            f"filter {_shown(self.text)} is invalid at position {where}: {problem}",
            filter=self.text,
        )

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def expect(self, char: str) -> None:
        found = self.peek()
        if found != char:
            self.fail(f"expected {char!r}, found {found!r}" if found else f"expected {char!r}")
        self.pos += 1

    def parse(self) -> _Parsed:
        self.skip_space()
        if not self.peek():
            self.fail("the filter is empty")
        try:
            parsed = self.filter(0)
        except RecursionError:  # only when called with little stack left: _MAX_DEPTH is small
            self.fail("the filter nests too deeply to parse here")
        self.skip_space()
        if self.pos < len(self.text):
            self.fail(f"unexpected {self.peek()!r} after the end of the filter")
        return parsed

    def filter(self, depth: int) -> _Parsed:
        if depth > _MAX_DEPTH:
            self.fail(f"filters nest deeper than {_MAX_DEPTH} levels")
        self.expect("(")
        self.skip_space()
        kind = self.peek()
        if kind in ("&", "|", "!"):
            self.pos += 1
            parsed = self.composite(kind, depth)
        else:
            parsed = self.item()
        self.expect(")")
        return parsed

    def composite(self, kind: str, depth: int) -> _Parsed:
        starts: list[int] = []
        children: list[_Parsed] = []
        self.skip_space()
        while self.peek() == "(":
            starts.append(self.pos)
            children.append(self.filter(depth + 1))
            self.skip_space()
        if self.peek() not in (")", ""):
            self.fail(f"expected '(' or ')' in a {kind!r} list, found {self.peek()!r}")
        text = f"({kind}{''.join(child[0] for child in children)})"
        matchers = [child[1] for child in children]
        if kind == "&":
            return text, _all_of(matchers)
        if kind == "|":
            return text, _any_of(matchers)
        if len(children) != 1:
            self.fail("'!' takes exactly one filter", starts[1] if children else self.pos)
        return text, _none_of(matchers[0])

    def attribute(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in _NAME_STOP:
            self.pos += 1
        name = self.text[start : self.pos].rstrip()
        for offset, char in enumerate(name):
            if char.isspace() or char in "*\\":
                self.fail(f"{char!r} is not allowed in an attribute name", start + offset)
        if not name:
            self.fail("missing attribute name", start)
        return name

    def operator(self, name: str) -> _Op:
        for op in (_Op.GE, _Op.LE, _Op.APPROX, _Op.EQ):
            if self.text.startswith(op.value, self.pos):
                self.pos += len(op.value)
                return op
        self.fail(f"expected '=', '>=', '<=' or '~=' after attribute {name!r}")

    def item(self) -> _Parsed:
        name = self.attribute()
        op = self.operator(name)
        start = self.pos
        pieces = self.value(op)
        if len(pieces) == 1:
            digits = _number_digits(pieces[0])
            if digits > self.limits.max_number_digits:
                self.fail(
                    f"attribute {_shown(name)} is compared with {_shown(pieces[0])}, a number "
                    f"of {digits:,} digits, over the limit of {self.limits.max_number_digits} "
                    "(Limits.max_number_digits)",
                    start,
                )
            text = f"({name}{op.value}{_escape(pieces[0])})"
            return text, _comparison(name, op, _Operand(pieces[0]))
        initial, final = pieces[0], pieces[-1]
        middle = tuple(piece for piece in pieces[1:-1] if piece)
        if not (initial or final or middle):  # '(a=*)', and '(a=**)' read the same
            return f"({name}=*)", _present(name)
        text = f"({name}={'*'.join(_escape(p) for p in (initial, *middle, final))})"
        return text, _substrings(name, initial, middle, final)

    def value(self, op: _Op) -> list[str]:
        """Read a value up to the closing ')'; ``*`` splits it into substring pieces."""
        pieces: list[str] = []
        current: list[str] = []
        pending = bytearray()
        pending_start = 0
        while True:
            char = self.peek()
            if char == "\\" and self._hex_escape():
                if not pending:
                    pending_start = self.pos
                pending.append(int(self.text[self.pos + 1 : self.pos + 3], 16))
                self.pos += 3
                continue
            if pending:
                current.append(self._decode(pending, pending_start))
                pending.clear()
            if char == "":
                self.fail("missing ')' at the end of the filter")
            if char == ")":
                break
            if char == "(":
                self.fail("'(' in a value must be escaped as '\\(' or '\\28'")
            if char == "*":
                if op is not _Op.EQ:
                    self.fail(f"'*' in a {op.value!r} value must be escaped as '\\*' or '\\2a'")
                pieces.append("".join(current))
                current.clear()
            elif char == "\\":
                if self.pos + 1 >= len(self.text):
                    self.fail("'\\' at the end of the filter escapes nothing")
                self.pos += 1
                current.append(self.text[self.pos])
            else:
                current.append(char)
            self.pos += 1
        pieces.append("".join(current))
        return pieces

    def _hex_escape(self) -> bool:
        digits = self.text[self.pos + 1 : self.pos + 3]
        return len(digits) == 2 and all(c in "0123456789abcdefABCDEF" for c in digits)

    def _decode(self, data: bytearray, start: int) -> str:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            self.fail("escaped bytes are not valid UTF-8", start)
