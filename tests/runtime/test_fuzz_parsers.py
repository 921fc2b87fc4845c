"""Hostile input never leaks: arbitrary bytes and text, and structured mutations of valid
input, make the parsers of LDAP filters, versions, juggle.toml, co-module XML, board profiles
and bitstream headers raise only their specific juggle errors (issue 9, item 7).

In the suite each property runs a couple of hundred examples. ``make fuzz`` sets
``JUGGLE_FUZZ_SECONDS``: each property then runs round after round of many more examples
(a fresh random seed each round) until that many seconds have passed, and an example that
takes longer than ``JUGGLE_FUZZ_DEADLINE_MS`` (unbounded work) fails it.
"""

from __future__ import annotations

import enum
import json
import os
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from juggle.errors import (
    BitstreamFormatError,
    BitstreamTooLargeError,
    DescriptorError,
    FilterSyntaxError,
    InputLimitError,
    ProfileError,
    VersionFormatError,
)
from juggle.fabric import build_bitstream, load_profile
from juggle.fabric.bitstream import parse_bitstream
from juggle.limits import DEFAULT_LIMITS, Limits
from juggle.runtime.descriptors import parse_comodule_xml, parse_toml
from juggle.runtime.ldapfilter import Version, parse_filter

FUZZ_SECONDS = float(os.environ.get("JUGGLE_FUZZ_SECONDS") or 0)
FUZZING = FUZZ_SECONDS > 0
SETTINGS = settings(
    max_examples=2000 if FUZZING else 200,
    deadline=(
        timedelta(milliseconds=float(os.environ.get("JUGGLE_FUZZ_DEADLINE_MS") or 5000))
        if FUZZING
        else None
    ),
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)


def run(prop: Callable[[], None]) -> None:
    """Run a ``@given`` property once (the suite) or round after round (``make fuzz``)."""
    if not FUZZING:
        prop()
        return
    start = time.monotonic()
    rounds = 0
    while rounds == 0 or time.monotonic() - start < FUZZ_SECONDS:
        prop()
        rounds += 1
    examples = rounds * (SETTINGS.max_examples or 0)
    name = os.environ.get("PYTEST_CURRENT_TEST", "property").split(" ")[0]
    sys.stderr.write(f"\nfuzz {name}: {rounds} rounds, ~{examples:,} examples, no leak\n")


def _outcome(exc: Exception) -> str:
    """What an example ended in, for ``--hypothesis-show-statistics``: the error class and the
    first words of its reason."""
    reason = str(exc).split(": ", 1)[-1] if ": " in str(exc) else str(exc)
    return f"{type(exc).__name__}: {' '.join(reason.split()[:3])[:40]}"


#: the defaults, and small limits so that every limit is hit often
LIMITS = st.sampled_from(
    [
        DEFAULT_LIMITS,
        Limits(
            max_descriptor_bytes=4096,
            max_depth=4,
            max_number_digits=6,
            max_filter_chars=200,
            max_bitstream_bytes=2048,
        ),
    ]
)
HUGE_DIGITS = ("7" * 41, "7" * 4301, "7" * 20_000)


@st.composite
def mutated(draw: st.DrawFn, seed: bytes, tokens: Sequence[bytes]) -> bytes:
    """``seed`` with a few byte-level edits: flips, inserts, deletes, cuts, repeats of a chunk
    (up to deep nesting) and splices of format-specific tokens."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 8))):
        at = draw(st.integers(0, len(data)))
        end = draw(st.integers(at, min(len(data), at + 32)))
        op = draw(st.sampled_from(["flip", "insert", "token", "replace", "delete", "repeat"]))
        if op == "flip" and at < len(data):
            data[at] ^= draw(st.integers(1, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "token":
            data[at:at] = draw(st.sampled_from(tokens))
        elif op == "replace":
            data[at:end] = draw(st.sampled_from(tokens))
        elif op == "delete":
            del data[at:end]
        elif op == "repeat":
            data[at:at] = data[at:end] * draw(st.integers(1, 1200))
    if draw(st.integers(0, 9)) == 0:
        del data[draw(st.integers(0, len(data))) :]
    return bytes(data)


#: nesting depths: around the limit, and deep enough to exhaust the stack of a recursive parser
#: (under hypothesis the recursion limit is the current depth + 2000 frames)
DEPTHS = st.one_of(
    st.integers(0, 40), st.sampled_from([31, 32, 33, 100, 1000, 1500, 3000]), st.integers(0, 3000)
)


def nested(opening: str, closing: str, inner: str) -> st.SearchStrategy[str]:
    """``opening * n + inner + closing * n`` for n from :data:`DEPTHS`."""
    return DEPTHS.map(lambda n: opening * n + inner + closing * n)


# -- LDAP filters and versions ---------------------------------------------------------------

FILTER_TOKENS = [
    t.encode()
    for t in (
        "(",
        ")",
        "&",
        "|",
        "!",
        "=",
        ">=",
        "<=",
        "~=",
        "*",
        "\\",
        "\\2a",
        "\\c3",
        "\\ff",
        "(a=*)",
        "(&)",
        "(!" * 200,
        ")" * 200,
        "1.2.3.q",
        " ",
        "\u00e9",
        *HUGE_DIGITS,
        f"1.{'2' * 5000}",
    )
]
ATTRIBUTES = st.sampled_from(["a", "A", "version", "size", "objectClass", "service.ranking"])
OPERANDS = st.one_of(
    st.text(max_size=8).map(
        lambda s: "".join(f"\\{ord(c):02x}" if c in "()*\\" else c for c in s if c != "\0")
    ),
    st.sampled_from([*HUGE_DIGITS, "1.10", "-3", "1e400", "1_0", "true", f"{'9' * 41}.0"]),
    st.integers().map(str),
    st.floats().map(repr),
)


@st.composite
def filters(draw: st.DrawFn, depth: int = 0) -> str:
    """A well-formed filter (possibly over a limit) built from the RFC 4515 grammar."""
    if depth < 4 and draw(st.booleans()):
        op = draw(st.sampled_from("&|!"))
        count = 1 if op == "!" else draw(st.integers(0, 3))
        return f"({op}{''.join(draw(filters(depth + 1)) for _ in range(count))})"
    name = draw(ATTRIBUTES)
    op = draw(st.sampled_from(["=", ">=", "<=", "~="]))
    operand = draw(OPERANDS)
    if op == "=" and draw(st.booleans()):
        operand = "*".join([operand, *draw(st.lists(OPERANDS, max_size=3))])
    return f"({name}{op}{operand})"


FILTER_TEXT = st.one_of(
    st.text(),
    st.text(st.sampled_from("()&|!=<>~*\\ a1.")),
    filters(),
    filters()
    .flatmap(lambda f: mutated(f.encode(), FILTER_TOKENS))
    .map(lambda b: b.decode("utf-8", "replace")),
    nested("(&", ")", "(a=1)"),
    nested("(!", ")", "(a>=1.0)"),
)


class Tier(enum.Enum):
    SOFTWARE = "software"


PROPERTY_MAPS: list[dict[str, Any]] = [
    {},
    {"a": "1", "version": "1.10.0", "size": 3, "objectClass": ["x", "y"]},
    {"A": 1 << 200, "size": float("nan"), "version": Version(1, 2, 3, "q")},
    {"a": "9" * 5000 + ".1", "size": "1" * 5000, "version": "2" * 41 + ".0.0"},
    {"a": None, "size": True, "version": Tier.SOFTWARE, "service.ranking": -(10**50)},
    {"a": [b"x", object(), 1.5, "1.2"], "size": float("inf")},
]


@SETTINGS
@given(FILTER_TEXT, LIMITS)
def _filter_property(text: str, limits: Limits) -> None:
    try:
        parsed = parse_filter(text, limits=limits)
    except FilterSyntaxError as exc:
        event(_outcome(exc))
        return
    event("parsed")
    for properties in PROPERTY_MAPS:
        parsed.matches(properties)  # asking never raises
    assert parse_filter(str(parsed), limits=DEFAULT_LIMITS) == parsed


def test_filter_parser_raises_only_filter_syntax_errors() -> None:
    run(_filter_property)


@SETTINGS
@given(
    st.one_of(
        st.text(),
        st.text(st.sampled_from("0123456789.-_aZ ")),
        st.sampled_from(HUGE_DIGITS),
        st.builds(lambda a, b: f"{a}.{b}", st.sampled_from(HUGE_DIGITS), st.integers(0)),
    ),
    LIMITS,
)
def _version_property(text: str, limits: Limits) -> None:
    try:
        version = Version.parse(text, limits=limits)
    except VersionFormatError as exc:
        event(_outcome(exc))
        return
    event("parsed")
    assert Version.parse(str(version), limits=limits) == version


def test_version_parser_raises_only_version_format_errors() -> None:
    run(_version_property)


# -- juggle.toml -----------------------------------------------------------------------------

TOML_ORIGIN = "fuzz/juggle.toml"
DIGEST = "ab" * 32
TOML_SEED = f"""\
[module]
name = "tdes"
version = "1.0.0"

[[services]]
interfaces = ["crypto.EncryptionService"]
ranking = 10
per_consumer = false
properties = {{ algorithm = "tdes", version = "1.0.0", sizes = [8, 16] }}
[services.software]
class = "tdes_module.SoftwareTDES"
[services.hardware]
driver = "tdes_module.TdesDriver"
bitstreams = {{ prr0 = "bitstreams/tdes_prr0.bit" }}
[services.hardware.resources]
slices = 1835
flipflops = 1527

[pins]
"bitstreams/tdes_prr0.bit" = "{DIGEST}"
"""
TOML_TOKENS = [
    t.encode() if isinstance(t, str) else t
    for t in (
        "[",
        "[[",
        "]",
        "{",
        "}",
        "=",
        '"',
        "'''",
        '"""',
        "\n",
        "\\",
        ",",
        ".",
        "#",
        "inf",
        "nan",
        "0x",
        "1e999",
        "1979-05-27T07:32:00Z",
        "\\u00e9",
        "\\ud800",
        b"\xff",
        b"\xc3",
        b"\xed\xa0\x80",
        b"\xef\xbb\xbf",
        b"\x00",
        *HUGE_DIGITS,
        "0x" + "f" * 100,
        "1." + "1" * 5000,
        "[" * 1200,
        "{a=" * 60,
        "\nz = " + "[" * 3000,
        "\nz = " + "7" * 5000 + "\n",  # a whole line: a key holding a number too long
        "\nz = [1, -" + "7" * 4400 + "]\n",
        "\nz = " + "{a=" * 1500,
        "\n[t" + ".t" * 40 + "]\n",
        '\nVersion = "2"\n',
        '\nAlgorithm = "x"\n',
        '\n[pins]\n"../x" = "' + "a" * 64 + '"\n',
        '"/etc/passwd" = "' + "A" * 64 + '"\n',
        '\n[module]\nversion = "' + "9" * 5000 + '.1"\n',
    )
]
TOML_SCALARS = st.one_of(
    st.integers().map(str),
    st.sampled_from(HUGE_DIGITS),
    st.sampled_from(["0x" + "f" * 60, "1." + "1" * 60, "-" + "1" * 4400]),
    st.floats().map(lambda f: repr(f).replace("+", "")),
    st.text(max_size=12).map(json.dumps),
    st.sampled_from(["true", "'lit'", '"""m\nl"""', "1979-05-27", "0o17", "1_000", "-0.0"]),
)
TOML_VALUES = st.recursive(
    TOML_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.lists(st.tuples(st.sampled_from(["a", "B", "b", '"q.r"']), inner), max_size=3).map(
            lambda kv: "{" + ", ".join(f"{k} = {v}" for k, v in dict(kv).items()) + "}"
        ),
    ),
    max_leaves=20,
)
TOML_KEYS = st.one_of(
    st.sampled_from(["ranking", "version", "Version", "slices", "x", '"a/b.py"', "a.b.c"]),
    st.text(st.sampled_from("abcXYZ_-0189"), min_size=1, max_size=8),
)
TOML_HEADERS = st.sampled_from(
    ["[pins]", "[[services]]", "[services.software]", "[module]", "[x.y]", "[services]"]
)
PIN_LINES = st.tuples(
    st.one_of(
        st.sampled_from(["../a", "/a", "a//b", "./a", "a\\\\b", "", "a/..", "ok/file.bit"]),
        st.text(max_size=12),
    ),
    st.one_of(st.just(DIGEST), st.text(st.sampled_from("0123456789abcdefABCDEFg"), max_size=66)),
).map(lambda pin: f"{json.dumps(pin[0])} = {json.dumps(pin[1])}")


@st.composite
def toml_edits(draw: st.DrawFn, seed: str) -> bytes:
    """``seed`` still (mostly) valid TOML: values replaced by generated ones (nested, long
    numbers), keys and tables and pins added."""
    lines = seed.splitlines()
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(lines)))
        kind = draw(st.sampled_from(["value", "deep", "line", "header", "pin"]))
        if kind in ("value", "deep") and at < len(lines) and " = " in lines[at]:
            key = lines[at].split(" = ", 1)[0]
            value = draw(
                TOML_VALUES if kind == "value" else nested("[", "]", "1") | nested("{a=", "}", "1")
            )
            lines[at] = f"{key} = {value}"
        elif kind == "line":
            lines.insert(at, f"{draw(TOML_KEYS)} = {draw(TOML_VALUES)}")
        elif kind == "header":
            lines.insert(at, draw(TOML_HEADERS))
        elif kind == "pin":
            lines.append(draw(PIN_LINES))
    return "\n".join(lines).encode("utf-8", "surrogatepass")


def descriptor_inputs(seed: str, tokens: Sequence[bytes]) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.binary(max_size=512),
        st.text(max_size=256).map(lambda s: s.encode("utf-8", "surrogatepass")),
        mutated(seed.encode(), tokens),
        toml_edits(seed),
    )


@SETTINGS
@given(descriptor_inputs(TOML_SEED, TOML_TOKENS), LIMITS, st.booleans())
def _toml_property(data: bytes, limits: Limits, as_text: bool) -> None:
    source: str | bytes = data
    if as_text:
        source = data.decode("utf-8", "surrogateescape")
    try:
        descriptor = parse_toml(source, TOML_ORIGIN, limits=limits)
    except (DescriptorError, InputLimitError) as exc:
        event(_outcome(exc))
        assert TOML_ORIGIN in str(exc)
        return
    event("parsed")
    for path, digest in descriptor.pins.items():
        assert ".." not in path.split("/") and not path.startswith("/")
        assert len(digest) == 64


def test_toml_descriptor_raises_only_descriptor_or_limit_errors() -> None:
    run(_toml_property)


# -- co-module XML ---------------------------------------------------------------------------

XML_ORIGIN = "fuzz/comodule.xml"
NS = "http://flowsgi.inf.ethz.ch/comodules"
XML_SEED = f"""\
<?xml version="1.0" encoding="UTF-8"?>
<co-module xmlns="{NS}" version="1.2.0" description="math">
 <accelerated-services>
  <accelerated-service interface="math.MulService" ranking="3">
   <java-service>math.MathMulImpl</java-service>
   <native-service>math.FastMul</native-service>
   <fpga-service><driver>math.MathMulDriver</driver><bitstream>mul.bit</bitstream>
    <model>math.Model</model><resources slices="88" flipflops="144"/></fpga-service>
   <service-properties><entry key="version" value="1.0.0"/></service-properties>
  </accelerated-service>
 </accelerated-services>
</co-module>
"""
XML_TOKENS = [
    t.encode() if isinstance(t, str) else t
    for t in (
        "<",
        ">",
        "</",
        "/>",
        '"',
        "&",
        "&amp;",
        "&e;",
        "&#0;",
        "&#x110000;",
        "&#65;",
        "<![CDATA[x]]>",
        "<!-- c -->",
        "<?pi x?>",
        "<!DOCTYPE co-module [<!ENTITY e 'x'>]>",
        '<!DOCTYPE x SYSTEM "http://example.org/x.dtd">',
        "<!ENTITY e SYSTEM 'file:///etc/passwd'>",
        '<?xml version="1.0" encoding="latin-1"?>',
        '<?xml version="1.0" encoding="UTF-16"?>',
        ' encoding="ebcdic-cp-us"',
        ' xmlns:x="urn:x"',
        b"\xff",
        b"\xc3",
        b"\x00",
        b"\xef\xbb\xbf",
        "<a>" * 1200,
        "</a>" * 1200,
        f'ranking="{"9" * 5000}"',
        f'slices="{"9" * 5000}"',
        '<entry key="Version" value="2"/>',
        '<entry key="version" value="2"/>',
        "<entry/>",
        *HUGE_DIGITS,
    )
]
XML_TAGS = st.sampled_from(
    [
        "accelerated-service",
        "java-service",
        "software-service",
        "native-service",
        "fpga-service",
        "driver",
        "bitstream",
        "model",
        "resources",
        "service-properties",
        "entry",
        "x",
    ]
)
#: characters XML 1.0 allows (others make the document not well-formed before anything else)
XML_CHARS = st.characters(
    codec="utf-8", exclude_categories=["Cs", "Cc"], exclude_characters="\ufffe\uffff"
)
#: what attributes and element texts hold: names, numbers (long, signed, not numbers at all)
XML_NUMBERS = st.one_of(
    st.integers(-5, 10**6).map(str),
    st.sampled_from([*HUGE_DIGITS, "", " 3 ", "x", "1.5", "+7", "1_0", "\u0661\u0662", "-1"]),
)
XML_WORDS = st.one_of(
    st.sampled_from(["math.Add", "a.B", "mul.bit", "", " ", "9bad", "x" * 300, "1.0.0"]),
    st.text(XML_CHARS, max_size=10),
    XML_NUMBERS,
)
XML_ATTRS = st.dictionaries(
    st.sampled_from(
        ["interface", "ranking", "key", "value", "slices", "flipflops", "mult18", "version"]
    ),
    XML_WORDS,
    max_size=3,
)
XML_TEXT = st.one_of(
    st.sampled_from(["", "math.Impl", "x.bit", " a.B "]), st.text(XML_CHARS, max_size=8)
)


def attributes(attrs: dict[str, str]) -> str:
    return "".join(f" {k}={quoteattr(v)}" for k, v in attrs.items())


def _element(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.builds(
        lambda tag, attrs, text, kids: (
            f"<{tag}{attributes(attrs)}>{escape(text)}{''.join(kids)}</{tag}>"
        ),
        XML_TAGS,
        XML_ATTRS,
        XML_TEXT,
        st.lists(children, max_size=4),
    )


#: anything in the vocabulary nested anyhow, or an element nested very deep
XML_ELEMENTS = st.recursive(XML_TEXT.map(escape), _element, max_leaves=25) | nested(
    "<x>", "</x>", ""
)


@st.composite
def xml_services(draw: st.DrawFn) -> str:
    """One ``<accelerated-service>`` as Listing 3 has it, every part optional and every value
    generated, sometimes with an element out of place."""

    def text_element(tag: str) -> str:
        return f"<{tag}>{escape(draw(XML_WORDS))}</{tag}>" if draw(st.booleans()) else ""

    def often() -> bool:
        return draw(st.integers(0, 3)) > 0

    parts = [text_element("java-service"), text_element("native-service")]
    if often():
        inner = [text_element("driver"), text_element("bitstream"), text_element("model")]
        if often():
            names = st.sampled_from(["slices", "flipflops", "mult18", "ram16", "tbuf"])
            values = draw(st.dictionaries(names, XML_NUMBERS, min_size=1))
            inner.append(f"<resources{attributes(values)}/>")
        parts.append(f"<fpga-service>{''.join(inner)}</fpga-service>")
    if draw(st.booleans()):
        keys = st.sampled_from(["version", "Version", "k", "K", ""]) | st.text(
            XML_CHARS, max_size=4
        )
        entries = draw(st.lists(st.tuples(keys, XML_WORDS), max_size=4))
        parts.append(
            "<service-properties>"
            + "".join(f"<entry key={quoteattr(k)} value={quoteattr(v)}/>" for k, v in entries)
            + draw(st.sampled_from(["", "<entry/>", "<x/>", '<entry value="1"/>']))
            + "</service-properties>"
        )
    if draw(st.integers(0, 4)) == 0:
        parts.insert(draw(st.integers(0, len(parts))), draw(XML_ELEMENTS))
    attrs = {}
    if draw(st.integers(0, 5)):
        interface = draw(st.sampled_from(["math.MulService", "a.B", ""]))
        attrs["interface"] = interface if often() else draw(XML_WORDS)
    if draw(st.booleans()):
        attrs["ranking"] = draw(XML_NUMBERS)
    return f"<accelerated-service{attributes(attrs)}>{''.join(parts)}</accelerated-service>"


XML_DECLARATIONS = st.sampled_from(
    [
        "",
        "",
        "",
        '<?xml version="1.0"?>',
        '<?xml version="1.0" encoding="utf-8"?>',
        "<?xml version='1.0' encoding='UTF8' standalone='yes'?>",
        '<?xml version="1.0" encoding="ISO-8859-1"?>',
        '<?xml version="1.0" encoding="utf_16"?>',
        '<?xml version="1.1" encoding="nonsense"?>',
    ]
)


@st.composite
def xml_documents(draw: st.DrawFn) -> bytes:
    """A co-module document: generated services, version and description."""
    services = "".join(draw(st.lists(xml_services(), max_size=3)))
    if draw(st.integers(0, 4)) == 0:
        services += draw(XML_ELEMENTS)
    attrs = draw(
        st.dictionaries(
            st.sampled_from(["version", "description"]),
            XML_WORDS | st.builds(lambda a, b: f"{a}.{b}", XML_NUMBERS, XML_NUMBERS),
        )
    )
    text = (
        f"{draw(XML_DECLARATIONS)}<co-module xmlns={quoteattr(NS)}{attributes(attrs)}>"
        f"<accelerated-services>{services}</accelerated-services></co-module>"
    )
    return text.encode("utf-8", "surrogatepass")


@SETTINGS
@given(
    st.one_of(
        st.binary(max_size=512),
        mutated(XML_SEED.encode(), XML_TOKENS),
        xml_documents(),
        xml_documents().flatmap(lambda d: mutated(d, XML_TOKENS)),
    ),
    LIMITS,
    st.booleans(),
)
def _xml_property(data: bytes, limits: Limits, as_text: bool) -> None:
    source: str | bytes = data
    if as_text:
        source = data.decode("utf-8", "surrogateescape")
    try:
        descriptor = parse_comodule_xml(source, XML_ORIGIN, "fuzz", limits=limits)
    except (DescriptorError, InputLimitError) as exc:
        event(_outcome(exc))
        assert XML_ORIGIN in str(exc)
        return
    event("parsed")
    assert descriptor.pins == {} and descriptor.format == "comodule-xml"


def test_xml_descriptor_raises_only_descriptor_or_limit_errors() -> None:
    run(_xml_property)


# -- board profiles --------------------------------------------------------------------------

PROFILE_SEED = (
    Path(__file__).resolve().parents[2] / "src/juggle/fabric/profiles/zedboard.toml"
).read_text()


def test_profile_loader_raises_only_profile_or_limit_errors() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "board.toml"

        @SETTINGS
        @given(descriptor_inputs(PROFILE_SEED, TOML_TOKENS), LIMITS)
        def profile_property(data: bytes, limits: Limits) -> None:
            path.write_bytes(data)
            try:
                load_profile(path, limits=limits)
            except (ProfileError, InputLimitError) as exc:
                event(_outcome(exc))
                assert str(path) in str(exc)
            else:
                event("parsed")

        run(profile_property)


# -- bitstream headers -----------------------------------------------------------------------

BIT_SEED = build_bitstream("tdes", "2vp30ff896", "prr0", 160)
PREAMBLE = BIT_SEED[:13]
BIT_TOKENS = [
    b"\xff\xff",
    b"\x00\x00",
    b"\xff\xff\xff\xff",
    b"a\xff\xff",
    b"e",
    b"e\x00\x00\x00\x00",
    b"e\xff\xff\xff\xff",
    b"a",
    b"b",
    b"z",
    b"\x00",
    b"\x1b[31m",
    b"\x80",
    PREAMBLE,
    b"a\x00\x02x\x00" * 50,
]


@st.composite
def bitstream_headers(draw: st.DrawFn) -> bytes:
    """Headers assembled field by field, mostly well-formed with one thing wrong: the magic,
    a key, a field's length or bytes, the declared payload length."""

    def rarely(strategy: st.SearchStrategy[Any], usual: Any) -> Any:
        return draw(strategy) if draw(st.integers(0, 4)) == 0 else usual

    out = bytearray(rarely(st.sampled_from([PREAMBLE[:-1], b"", PREAMBLE[::-1]]), PREAMBLE))
    keys = rarely(
        st.lists(st.sampled_from([b"a", b"b", b"c", b"d", b"z", b"\x00", b"e"]), max_size=6),
        [b"a", b"b", b"c", b"d"],
    )
    design = rarely(
        st.sampled_from(
            [b";Region=prr0", b"dir/", b"_partial.ncd", b".ncd;x", b"a;Region=", b"C:\\x\\", b";;"]
        ),
        b"tdes_partial.ncd;UserID=0xFFFFFFFF;Region=prr0",
    )
    texts = {b"a": design, b"b": b"2vp30ff896"}
    for key in keys:
        raw = texts.get(key, b"2011/06/14") + b"\0"
        raw = rarely(st.one_of(st.binary(max_size=40), st.text(max_size=20).map(str.encode)), raw)
        length = rarely(st.integers(0, 0xFFFF), len(raw))
        out += key + struct.pack(">H", length) + raw
    payload = draw(st.binary(max_size=64))
    declared = rarely(st.integers(0, 2**32 - 1), len(payload))
    return bytes(out + b"e" + struct.pack(">I", declared) + payload)


@SETTINGS
@given(
    st.one_of(st.binary(max_size=300), mutated(BIT_SEED, BIT_TOKENS), bitstream_headers()),
    LIMITS,
)
def _bitstream_property(data: bytes, limits: Limits) -> None:
    try:
        bitstream = parse_bitstream(data, source="fuzz.bit", limits=limits)
    except BitstreamTooLargeError as exc:
        event(_outcome(exc))
        assert len(data) > limits.max_bitstream_bytes and "fuzz.bit" in str(exc)
        return
    except BitstreamFormatError as exc:
        event(_outcome(exc))
        assert "fuzz.bit" in str(exc)
        return
    event("parsed")
    assert bitstream.size == len(data)
    assert 0 <= bitstream.payload_length <= len(data) - bitstream.header_length + 1
    assert bitstream.design and bitstream.part.isprintable()


def test_bitstream_header_raises_only_bitstream_format_errors() -> None:
    run(_bitstream_property)
