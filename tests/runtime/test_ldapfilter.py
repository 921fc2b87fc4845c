"""LDAP filters (RFC 4515 as OSGi reads them) and OSGi versions."""

from __future__ import annotations

import enum
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juggle.errors import FilterSyntaxError, JuggleError, PropertyError, VersionFormatError
from juggle.runtime.ldapfilter import Filter, Properties, Version, parse_filter


def match(text: str, **properties: Any) -> bool:
    return parse_filter(text).matches(properties)


# -- operators -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(name=tdes)", True),
        ("(name=TDES)", False),  # equality of strings is exact
        ("(name=aes)", False),
        ("(name>=tdes)", True),
        ("(name>=tdf)", False),
        ("(name<=tdes)", True),
        ("(name<=tdd)", False),
        ("(name~=T DES)", True),  # approximate: case and white space ignored
        ("(name~= t d e s )", True),
        ("(name~=aes)", False),
        ("(name=*)", True),
        ("(other=*)", False),
        ("(name=t*)", True),
        ("(name=*s)", True),
        ("(name=*de*)", True),
        ("(name=t*e*s)", True),
        ("(name=t*x*s)", False),
        ("(name=tdes*)", True),
        ("(name=*tdes)", True),
        ("(name=tde*des)", False),  # initial and final may not overlap
        ("(name=t**s)", True),
        ("(name=*d*d*)", False),  # each piece needs its own occurrence, in order
        ("(name=*e*d*)", False),
        ("(name=*d*e*)", True),
    ],
)
def test_each_operator_on_a_string(text: str, expected: bool) -> None:
    assert match(text, name="tdes") is expected


def test_and_or_not() -> None:
    props = {"a": "1", "b": "2"}
    assert parse_filter("(&(a=1)(b=2))").matches(props)
    assert not parse_filter("(&(a=1)(b=3))").matches(props)
    assert parse_filter("(|(a=9)(b=2))").matches(props)
    assert not parse_filter("(|(a=9)(b=9))").matches(props)
    assert parse_filter("(!(a=9))").matches(props)
    assert not parse_filter("(!(a=1))").matches(props)


def test_empty_and_is_true_and_empty_or_is_false() -> None:
    assert parse_filter("(&)").matches({})
    assert not parse_filter("(|)").matches({})


def test_deep_nesting() -> None:
    text = "(&(|(!(a=1))(&(b=2)(|(c=3)(d=*))))(e>=5))"
    assert parse_filter(text).matches({"a": "1", "b": "2", "d": "x", "e": 7})
    assert not parse_filter(text).matches({"a": "1", "b": "2", "e": 7})
    assert not parse_filter(text).matches({"a": "2", "e": 4})


def test_missing_attribute_never_matches_a_comparison() -> None:
    for text in ("(x=1)", "(x>=1)", "(x<=1)", "(x~=1)", "(x=1*)"):
        assert not match(text, y="1")
    assert match("(!(x=1))", y="1")


def test_none_values_count_as_absent() -> None:
    assert not match("(x=*)", x=None)
    assert not match("(x=None)", x=None)


def test_white_space_between_parts_is_ignored_but_kept_in_values() -> None:
    f = parse_filter("  ( & ( a =x y) \n (b=2) )  ")
    assert f.matches({"a": "x y", "b": "2"})
    assert not f.matches({"a": "xy", "b": "2"})
    assert str(f) == "(&(a=x y)(b=2))"
    assert match("(a= 1)", a=" 1")
    assert not match("(a= x)", a="x")


# -- attribute names, lists, coercion -------------------------------------------------------


def test_attribute_names_are_case_insensitive() -> None:
    assert match("(OBJECTCLASS=Enc)", objectClass="Enc")
    assert match("(objectclass=*)", ObjectClass="Enc")
    assert Properties({"objectClass": "Enc"})["OBJECTclass"] == "Enc"
    assert parse_filter("(Service.Ranking>=1)").matches(Properties({"service.ranking": 3}))


def test_a_list_matches_when_any_element_does() -> None:
    for container in (list, tuple, set, frozenset):
        props = {"objectClass": container(["Crypto", "EncryptionService"])}
        assert parse_filter("(objectClass=EncryptionService)").matches(props)
        assert parse_filter("(objectClass=Enc*)").matches(props)
        assert not parse_filter("(objectClass=Sort)").matches(props)
    assert match("(sizes>=64)", sizes=[8, 16, 128])
    assert not match("(sizes>=256)", sizes=[8, 16, 128])
    assert match("(sizes=*)", sizes=[])


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("(n=10)", 10, True),
        ("(n= 10 )", 10, True),  # numbers are read with surrounding space trimmed
        ("(n=010)", 10, True),
        ("(n>=9)", 10, True),  # numeric, not lexicographic ("10" < "9")
        ("(n<=9)", 10, False),
        ("(n>=10.5)", 10, False),  # an int property still compares with a decimal operand
        ("(n<=10.5)", 10, True),
        ("(n=ten)", 10, False),
        ("(n~=10)", 10, True),
        ("(n=10*)", 10, False),  # substrings only apply to strings
        ("(x=2.5)", 2.5, True),
        ("(x>=2.25)", 2.5, True),
        ("(x<=2)", 2.5, False),
        ("(x=2)", 2.0, True),
        ("(x=abc)", 2.0, False),
        ("(b=true)", True, True),
        ("(b=TRUE)", True, True),
        ("(b= false )", False, True),
        ("(b=false)", True, False),
        ("(b=yes)", True, False),
        ("(b=1)", True, False),  # a bool is not an int here
        ("(s=10)", "10", True),
        ("(s>=9)", "10", False),  # plain strings compare as strings
    ],
)
def test_the_operand_is_coerced_to_the_property_type(text: str, value: Any, expected: bool) -> None:
    assert parse_filter(text).matches({text[1]: value}) is expected


class Tier(enum.Enum):
    SOFTWARE = "software"
    HARDWARE = "hardware"


def test_enum_members_match_by_name_or_value() -> None:
    assert match("(tier=HARDWARE)", tier=Tier.HARDWARE)
    assert match("(tier=hardware)", tier=Tier.HARDWARE)
    assert match("(tier~=Hard ware)", tier=Tier.HARDWARE)
    assert not match("(tier=software)", tier=Tier.HARDWARE)
    assert not match("(tier>=a)", tier=Tier.HARDWARE)


def test_unknown_types_do_not_match() -> None:
    assert not match("(x=1)", x=object())
    assert match("(x=*)", x=object())


# -- versions --------------------------------------------------------------------------------


def test_version_parse_and_str() -> None:
    assert Version.parse("1") == Version(1, 0, 0)
    assert Version.parse(" 1.2 ") == Version(1, 2)
    assert Version.parse("1.2.3.beta-1") == Version(1, 2, 3, "beta-1")
    assert str(Version.parse("1.2")) == "1.2.0"
    assert str(Version(1, 2, 3, "q")) == "1.2.3.q"
    assert Version.parse(Version(2)) == Version(2)


def test_version_ordering() -> None:
    ordered = ["0.9", "1", "1.0.0.alpha", "1.0.0.beta", "1.2", "1.9", "1.10", "2.0.1", "10"]
    versions = [Version.parse(text) for text in ordered]
    assert sorted(reversed(versions)) == versions
    assert Version.parse("1.10") > Version.parse("1.9")


@pytest.mark.parametrize("text", ["", "a", "1.", "1..2", "-1", "1.2.3.4.5", "1.2.3.q!", "1.x"])
def test_bad_versions_are_rejected(text: str) -> None:
    with pytest.raises(VersionFormatError, match="version"):
        Version.parse(text)


def test_bad_version_fields_are_rejected() -> None:
    with pytest.raises(VersionFormatError, match='"minor"'):
        Version(1, -1)
    with pytest.raises(VersionFormatError, match='"major"'):
        Version(True)
    with pytest.raises(VersionFormatError, match='"qualifier"'):
        Version(1, 0, 0, "no spaces")


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("(v>=1.9)", "1.10.0", True),  # as strings "1.10.0" < "1.9"
        ("(v<=1.9)", "1.10.0", False),
        ("(v=1.0)", "1.0.0", True),
        ("(v=1)", "1.0", True),
        ("(v>=2)", "10.0", True),
        ("(v>=1.2)", "1.2", True),
        ("(v>=1.3)", "1.2.9", False),
        ("(v=01)", "1", False),  # neither has a dot: plain strings
        ("(v>=1.9.beta)", "1.10", False),  # operand not dotted numeric: string comparison
        ("(v~=1.0)", "1.0.0", False),  # approximate is a string comparison
        ("(v>=1.9)", Version(1, 10), True),
        ("(v=1.10)", Version(1, 10), True),
        ("(v>=1.10.0.b)", Version(1, 10, 0, "a"), False),
        ("(v<=2)", Version(1, 99), True),
        ("(v=junk)", Version(1), False),
        ("(v>=1.5)", ["1.2", "1.10"], True),
    ],
)
def test_versions_compare_as_versions(text: str, value: Any, expected: bool) -> None:
    assert parse_filter(text).matches({"v": value}) is expected


# -- escapes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("(a=\\2a)", "*"),
        ("(a=\\28x\\29)", "(x)"),
        ("(a=\\5c)", "\\"),
        ("(a=\\*)", "*"),
        ("(a=\\(\\))", "()"),
        ("(a=\\\\)", "\\"),
        ("(a=caf\\c3\\a9)", "café"),  # consecutive hex escapes form UTF-8
        ("(a=\\q)", "q"),  # OSGi: a backslash keeps any other character
        ("(a=\\2)", "2"),  # one hex digit is not a hex escape
    ],
)
def test_escapes(text: str, value: str) -> None:
    assert parse_filter(text).matches({"a": value})
    assert not parse_filter(text).matches({"a": value + "x"})


def test_escaped_star_is_a_literal_not_a_wildcard() -> None:
    assert match("(a=x\\*y)", a="x*y")
    assert not match("(a=x\\*y)", a="xzy")
    assert match("(a=x\\2a*)", a="x*anything")
    assert not match("(a=x\\2a*)", a="xanything")


# -- syntax errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "position", "problem"),
    [
        ("", 0, "empty"),
        ("   ", 3, "empty"),
        ("a=1", 0, "expected '('"),
        ("(a=1", 4, "missing ')'"),
        ("(a=1))", 5, "after the end"),
        ("(a=1)(b=2)", 5, "after the end"),
        ("(&a=1)", 2, "expected '(' or ')'"),
        ("(&(a=1)", 7, "expected ')'"),
        ("(!(a=1)(b=2))", 7, "exactly one"),
        ("(!)", 2, "exactly one"),
        ("(=1)", 1, "missing attribute name"),
        ("( =1)", 2, "missing attribute name"),
        ("(a b=1)", 2, "not allowed in an attribute name"),
        ("(a*=1)", 2, "not allowed in an attribute name"),
        ("(a)", 2, "expected '=', '>=', '<=' or '~='"),
        ("(a>1)", 2, "expected '=', '>=', '<=' or '~='"),
        ("(a<1)", 2, "expected '='"),
        ("(a~1)", 2, "expected '='"),
        ("(a>=1*)", 5, "'*' in a '>=' value"),
        ("(a~=*)", 4, "'*' in a '~=' value"),
        ("(a=(b)", 3, "'(' in a value"),
        ("(a=x\\", 4, "escapes nothing"),
        ("(a=\\ff)", 3, "not valid UTF-8"),
        ("(a=ok\\c3)", 5, "not valid UTF-8"),
    ],
)
def test_syntax_errors_name_the_text_and_position(text: str, position: int, problem: str) -> None:
    with pytest.raises(FilterSyntaxError) as caught:
        parse_filter(text)
    message = str(caught.value)
    assert f"at position {position}:" in message
    assert problem in message
    assert repr(text) in message
    assert caught.value.filter == text


def test_too_deep_nesting_is_a_syntax_error_not_a_crash() -> None:
    text = "(!" * 500 + "(a=1)" + ")" * 500
    with pytest.raises(FilterSyntaxError, match="nest deeper"):
        parse_filter(text)
    odd = parse_filter("(!" * 51 + "(a=1)" + ")" * 51)
    assert odd.matches({"a": "2"}) and not odd.matches({"a": "1"})


def test_non_string_filter_is_rejected() -> None:
    with pytest.raises(FilterSyntaxError, match='"filter" must be a string'):
        parse_filter(42)  # type: ignore[arg-type]


def test_syntax_error_is_part_of_the_tree() -> None:
    with pytest.raises(JuggleError):
        parse_filter("(")
    with pytest.raises(ValueError):
        parse_filter("(")


# -- normal form, identity, cache ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        (" (  & (a=1) ( b >=2) ) ", "(&(a=1)(b>=2))"),
        ("(b>= 2 )", "(b>= 2 )"),  # white space inside a value is kept
        ("(a=x**y***)", "(a=x*y*)"),
        ("(a=**)", "(a=*)"),
        ("(a=\\2a\\28\\29\\5c)", "(a=\\*\\(\\)\\\\)"),
        ("(a=\\c3\\a9)", "(a=é)"),
        ("(|(objectClass=X)(!(v~=1)))", "(|(objectClass=X)(!(v~=1)))"),
    ],
)
def test_normal_form(text: str, normal: str) -> None:
    assert str(parse_filter(text)) == normal
    assert str(parse_filter(normal)) == normal


def test_filters_compare_by_normal_form_and_are_cached() -> None:
    assert parse_filter("( a=1)") == parse_filter("(a=1)")
    assert hash(parse_filter(" ( a =1) ")) == hash(Filter("(a=1)"))
    assert parse_filter("(a=1)") != parse_filter("(a=2)")
    assert parse_filter("(a=1)") is parse_filter("(a=1)")
    assert repr(parse_filter("(a=1)")) == "Filter('(a=1)')"


def test_properties_reject_keys_differing_only_in_case() -> None:
    with pytest.raises(PropertyError, match="only in case"):
        Properties({"Tier": "a", "tier": "b"})
    with pytest.raises(PropertyError, match="non-empty strings"):
        Properties({1: "a"})  # type: ignore[dict-item]
    props = Properties({"Tier": "hw"})
    assert "TIER" in props and list(props) == ["Tier"] and len(props) == 1
    with pytest.raises(KeyError):
        props["other"]


# -- properties (hypothesis) -----------------------------------------------------------------

NAMES = st.sampled_from(["a", "B", "tier", "Version", "objectClass"])
VALUE_CHARS = st.characters(codec="utf-8", exclude_categories=["Cs"])
VALUES = st.text(VALUE_CHARS, max_size=6)
DOTTED = re.compile(r"\d+(\.\d+)*")  # two such strings may be equal as versions


def escape(value: str) -> str:
    """RFC 4515 style, to exercise the other escaping than the normal form's."""
    return "".join(f"\\{ord(c):02x}" if c in "*()\\" else c for c in value)


@st.composite
def filters(draw: st.DrawFn, depth: int = 0) -> str:
    if depth < 3 and draw(st.booleans()):
        op = draw(st.sampled_from("&|!"))
        count = 1 if op == "!" else draw(st.integers(0, 3))
        children = [draw(filters(depth + 1)) for _ in range(count)]
        space = draw(st.sampled_from(["", " ", "\n "]))
        return f"({space}{op}{space.join(children)}{space})"
    name = draw(NAMES)
    kind = draw(st.sampled_from(["=", ">=", "<=", "~=", "present", "substring"]))
    if kind == "present":
        return f"({name}=*)"
    if kind == "substring":
        pieces = draw(st.lists(VALUES, min_size=2, max_size=4))
        return f"({name}={'*'.join(escape(p) for p in pieces)})"
    return f"({name}{kind}{escape(draw(VALUES))})"


PROPERTY_VALUES = st.one_of(
    VALUES,
    st.integers(-5, 5),
    st.booleans(),
    st.sampled_from(["1.9", "1.10.0", "2", Version(1, 2)]),
    st.lists(VALUES, max_size=3),
)
PROPERTY_MAPS = st.dictionaries(st.sampled_from(["a", "b", "tier", "version"]), PROPERTY_VALUES)


@settings(max_examples=150, deadline=None)
@given(filters(), st.lists(PROPERTY_MAPS, min_size=1, max_size=4))
def test_normal_form_round_trips_to_an_equivalent_filter(
    text: str, samples: list[dict[str, Any]]
) -> None:
    first = Filter(text)
    again = Filter(str(first))
    assert str(again) == str(first)
    for properties in samples:
        assert again.matches(properties) is first.matches(properties)


@settings(max_examples=150, deadline=None)
@given(VALUES, VALUES)
def test_equality_and_substring_match_exactly_what_they_should(value: str, other: str) -> None:
    assert parse_filter(f"(k={escape(value)})").matches({"k": value})
    assert parse_filter(f"(k={escape(value)}*)").matches({"k": value + other})
    assert parse_filter(f"(k=*{escape(value)}*)").matches({"k": other + value + other})
    if value != other and not (DOTTED.fullmatch(value) and DOTTED.fullmatch(other)):
        assert not parse_filter(f"(k={escape(value)})").matches({"k": other})


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from("()&|!=<>~*\\ ab1"), max_size=14))
def test_arbitrary_text_either_parses_or_raises_filter_syntax_error(text: str) -> None:
    try:
        parsed = parse_filter(text)
    except FilterSyntaxError as exc:
        assert "at position" in str(exc)
    else:
        assert parse_filter(str(parsed)) == parsed
