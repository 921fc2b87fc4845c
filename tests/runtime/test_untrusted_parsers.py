"""Parsers of input from outside stay bounded and raise only specific juggle errors (issue 9,
items 1, 2 and 7): juggle.toml, co-module XML, LDAP filters and versions, board profiles and
bitstream headers. Each failure names the file (or value), the key and the limit."""

from __future__ import annotations

import builtins
import os
import struct
from pathlib import Path
from typing import Any

import pytest
from defusedxml import DTDForbidden

from juggle.errors import (
    BitstreamFormatError,
    BitstreamTooLargeError,
    DescriptorError,
    FilterSyntaxError,
    InputLimitError,
    MissingBitstreamError,
    ProfileError,
    VersionFormatError,
)
from juggle.fabric import build_bitstream, load_bitstream, load_profile, read_bitstream
from juggle.fabric.bitstream import parse_bitstream
from juggle.limits import DEFAULT_LIMITS, Limits
from juggle.runtime.descriptors import parse_comodule_xml, parse_toml
from juggle.runtime.ldapfilter import Filter, Version, parse_filter

ORIGIN = "mods/tdes/juggle.toml"
XML_ORIGIN = "mods/math/comodule.xml"
DIGEST = "0123456789abcdef" * 4

TOML = """\
[module]
name = "tdes"
version = "1.0.0"

[[services]]
interfaces = ["crypto.EncryptionService"]
ranking = 10
properties = { algorithm = "tdes", version = "1.0.0" }
[services.software]
class = "tdes_module.SoftwareTDES"
[services.hardware]
driver = "tdes_module.TdesDriver"
bitstreams = { prr0 = "bitstreams/tdes_prr0.bit" }
[services.hardware.resources]
slices = 1835
"""

XML = """\
<co-module xmlns="http://flowsgi.inf.ethz.ch/comodules" version="1.2.0">
 <accelerated-services>
  <accelerated-service interface="math.MulService" ranking="3">
   <java-service>math.MathMulImpl</java-service>
   <fpga-service><driver>math.MathMulDriver</driver><bitstream>mul.bit</bitstream>
    <resources slices="88" flipflops="144"/></fpga-service>
   <service-properties><entry key="version" value="1.0.0"/></service-properties>
  </accelerated-service>
 </accelerated-services>
</co-module>
"""

PROFILE = (
    Path(__file__).resolve().parents[2] / "src/juggle/fabric/profiles/xupv2p.toml"
).read_text()


def nested(depth: int) -> str:
    """A TOML value of ``depth`` nested arrays."""
    return "[" * depth + "]" * depth


def no_open(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the file was opened although stat showed it too large")


# -- juggle.toml -----------------------------------------------------------------------------


def test_toml_reads_bytes_and_text_alike() -> None:
    from_bytes = parse_toml(TOML.encode(), ORIGIN)
    assert from_bytes == parse_toml(TOML, ORIGIN)
    assert from_bytes.pins == {}
    assert parse_toml(b"\xef\xbb\xbf" + TOML.encode(), ORIGIN) == from_bytes  # a BOM is fine


def test_toml_size_is_checked_before_parsing() -> None:
    small = Limits(max_descriptor_bytes=len(TOML) - 1)
    for data in (TOML, TOML.encode()):
        with pytest.raises(InputLimitError, match="max_descriptor_bytes") as caught:
            parse_toml(data, ORIGIN, limits=small)
        assert ORIGIN in str(caught.value)
    with pytest.raises(InputLimitError, match=r"2,000,000 bytes.*1,048,576"):
        parse_toml(b"[" * 2_000_000, ORIGIN)  # refused by size, not parsed
    assert parse_toml(TOML, ORIGIN, limits=Limits(max_descriptor_bytes=len(TOML)))


def test_toml_that_is_not_utf8_names_origin_and_byte_offset() -> None:
    data = TOML.encode().replace(b'"tdes"', b'"td\xe9s"', 1)
    offset = data.index(b"\xe9")
    with pytest.raises(DescriptorError, match=f"not valid UTF-8 at byte offset {offset}") as caught:
        parse_toml(data, ORIGIN)
    assert ORIGIN in str(caught.value)
    assert isinstance(caught.value.__cause__, UnicodeDecodeError)
    with pytest.raises(DescriptorError, match=r"not valid UTF-8: character 2 is '\\ud800'"):
        parse_toml("# \ud800", ORIGIN)  # text with a lone surrogate


def test_toml_nested_a_thousand_deep_is_an_input_limit_error() -> None:
    with pytest.raises(InputLimitError, match=r"too deeply.*Limits\.max_depth") as caught:
        parse_toml(TOML + f"extra = {nested(1000)}\n", ORIGIN)
    assert ORIGIN in str(caught.value)
    assert isinstance(caught.value.__cause__, RecursionError)


def test_toml_depth_is_checked_on_the_parsed_tree_and_names_the_key() -> None:
    header = "[" + ".".join(["t"] * 40) + "]\n"  # deep without recursing in the parser
    with pytest.raises(InputLimitError, match=r"key 't(\.t){32}' nests 33 levels") as caught:
        parse_toml(TOML + header, ORIGIN)
    assert ORIGIN in str(caught.value) and "Limits.max_depth" in str(caught.value)
    # TOML's deepest key is services[0].hardware.resources: four levels below the document
    assert parse_toml(TOML, ORIGIN, limits=Limits(max_depth=4))
    with pytest.raises(InputLimitError, match=r"'services\[0\]\.hardware\.resources' nests 4"):
        parse_toml(TOML, ORIGIN, limits=Limits(max_depth=3))


@pytest.mark.parametrize(
    ("number", "cause"),
    [
        ("1" * 5000, ValueError),  # beyond Python's int/str conversion limit
        ("1" * 41, type(None)),  # beyond Limits.max_number_digits only
        ("1." + "1" * 5000, type(None)),  # a float literal
    ],
)
def test_toml_long_number_names_the_key(number: str, cause: type) -> None:
    with pytest.raises(InputLimitError, match=r"'services\[0\]\.ranking'.*40 digits") as caught:
        parse_toml(TOML.replace("ranking = 10", f"ranking = {number}"), ORIGIN)
    assert ORIGIN in str(caught.value) and "Limits.max_number_digits" in str(caught.value)
    assert isinstance(caught.value.__cause__, cause)
    assert parse_toml(TOML.replace("ranking = 10", f"ranking = {'1' * 40}"), ORIGIN)


def test_toml_version_with_a_long_number_names_the_key() -> None:
    text = TOML.replace('version = "1.0.0"\n\n', f'version = "1.{"2" * 50}"\n\n', 1)
    with pytest.raises(InputLimitError, match=r"'module\.version' is '1\.222") as caught:
        parse_toml(text, ORIGIN)
    assert ORIGIN in str(caught.value)


def test_toml_properties_differing_only_in_case_are_named() -> None:
    text = TOML.replace('algorithm = "tdes"', 'algorithm = "tdes", Algorithm = "des"')
    with pytest.raises(DescriptorError, match="'algorithm' and 'Algorithm' differ only in case"):
        parse_toml(text, ORIGIN)


def test_pins_are_parsed() -> None:
    text = TOML + f'\n[pins]\n"bitstreams/tdes_prr0.bit" = "{DIGEST}"\n"a.py" = "{DIGEST}"\n'
    assert parse_toml(text, ORIGIN).pins == {
        "bitstreams/tdes_prr0.bit": DIGEST,
        "a.py": DIGEST,
    }


@pytest.mark.parametrize(
    "path", ["../x.bit", "a/../../x", "/etc/passwd", "a//b", "./a", "a/", "a\\b", ""]
)
def test_pins_refuse_paths_outside_or_not_posix(path: str) -> None:
    key = path.replace("\\", "\\\\")
    with pytest.raises(DescriptorError, match="must be a relative POSIX path") as caught:
        parse_toml(TOML + f'\n[pins]\n"{key}" = "{DIGEST}"\n', ORIGIN)
    assert repr(path) in str(caught.value) and ORIGIN in str(caught.value)


@pytest.mark.parametrize("digest", [DIGEST.upper(), DIGEST[:-1], DIGEST + "0", "g" * 64])
def test_pins_refuse_what_is_no_lowercase_sha256(digest: str) -> None:
    with pytest.raises(DescriptorError, match=r"pins\.a\.py.*pattern") as caught:
        parse_toml(TOML + f'\n[pins]\n"a.py" = "{digest}"\n', ORIGIN)
    assert repr(digest) in str(caught.value)


# -- co-module XML ---------------------------------------------------------------------------


def test_xml_reads_bytes_and_text_alike_and_has_no_pins() -> None:
    from_bytes = parse_comodule_xml(XML.encode(), XML_ORIGIN, "math")
    assert from_bytes == parse_comodule_xml(XML, XML_ORIGIN, "math")
    assert from_bytes.pins == {} and from_bytes.services[0].ranking == 3
    declared = '<?xml version="1.0" encoding="UTF-8"?>\n' + XML
    assert parse_comodule_xml(declared.encode(), XML_ORIGIN, "math") == from_bytes


def test_xml_size_is_checked_before_parsing() -> None:
    with pytest.raises(InputLimitError, match="max_descriptor_bytes") as caught:
        parse_comodule_xml(b"<a>" * 400_000, XML_ORIGIN, "m")
    assert XML_ORIGIN in str(caught.value)


def test_xml_that_is_not_utf8_names_origin_and_byte_offset() -> None:
    data = XML.encode().replace(b"MathMulImpl", b"Math\xffImpl")
    offset = data.index(b"\xff")
    with pytest.raises(DescriptorError, match=f"not valid UTF-8 at byte offset {offset}") as info:
        parse_comodule_xml(data, XML_ORIGIN, "m")
    assert XML_ORIGIN in str(info.value)
    assert isinstance(info.value.__cause__, UnicodeDecodeError)


@pytest.mark.parametrize("encoding", ["ISO-8859-1", "latin-1", "UTF-16", "ebcdic-cp-us"])
def test_xml_declaring_another_encoding_is_refused_naming_it(encoding: str) -> None:
    data = f'<?xml version="1.0" encoding="{encoding}"?>\n{XML}'.encode()
    with pytest.raises(DescriptorError, match=f"declares encoding '{encoding}'") as caught:
        parse_comodule_xml(data, XML_ORIGIN, "m")
    assert XML_ORIGIN in str(caught.value)


@pytest.mark.parametrize(
    "doctype",
    [
        '<!DOCTYPE co-module [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;&a;">]>',  # laughs
        '<!DOCTYPE co-module [<!ENTITY x SYSTEM "file:///etc/passwd">]>',  # XXE
        '<!DOCTYPE co-module SYSTEM "http://example.org/evil.dtd">',
    ],
)
def test_xml_dtds_and_entities_are_refused(doctype: str) -> None:
    with pytest.raises(DescriptorError, match=r"declares a DTD \(<!DOCTYPE co-module>\)") as info:
        parse_comodule_xml(doctype + XML.replace("1.0.0", "&b;"), XML_ORIGIN, "m")
    assert XML_ORIGIN in str(info.value)
    assert isinstance(info.value.__cause__, DTDForbidden)


def test_xml_nested_a_thousand_deep_is_an_input_limit_error() -> None:
    deep = "<x>" * 1000 + "</x>" * 1000
    with pytest.raises(InputLimitError, match=r"<x> nests 33 levels.*Limits\.max_depth") as info:
        parse_comodule_xml(XML.replace("<java-service>", deep + "<java-service>"), XML_ORIGIN, "m")
    assert XML_ORIGIN in str(info.value)
    # the listing nests five elements deep (co-module/services/service/fpga-service/driver)
    assert parse_comodule_xml(XML, XML_ORIGIN, "m", limits=Limits(max_depth=5))
    with pytest.raises(InputLimitError, match="<driver> nests 5 levels"):
        parse_comodule_xml(XML, XML_ORIGIN, "m", limits=Limits(max_depth=4))


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        ('slices="88"', f'slices="{"8" * 5000}"', "attribute 'resources.slices'"),
        ('ranking="3"', f'ranking="{"3" * 41}"', "attribute 'ranking' of 'math.MulService'"),
        ('version="1.2.0"', f'version="{"1" * 4400}.2"', "key 'version'"),
    ],
)
def test_xml_long_numbers_name_the_attribute(old: str, new: str, named: str) -> None:
    with pytest.raises(InputLimitError, match=named) as caught:
        parse_comodule_xml(XML.replace(old, new), XML_ORIGIN, "m")
    assert XML_ORIGIN in str(caught.value) and "Limits.max_number_digits" in str(caught.value)


def test_xml_properties_repeated_or_differing_only_in_case_are_named() -> None:
    twice = XML.replace('value="1.0.0"/>', 'value="1.0.0"/><entry key="version" value="2"/>')
    with pytest.raises(DescriptorError, match="two entries with key 'version'"):
        parse_comodule_xml(twice, XML_ORIGIN, "m")
    cased = XML.replace('value="1.0.0"/>', 'value="1.0.0"/><entry key="Version" value="2"/>')
    with pytest.raises(DescriptorError, match="'version' and 'Version' differ only in case"):
        parse_comodule_xml(cased, XML_ORIGIN, "m")


# -- LDAP filters and versions ---------------------------------------------------------------


def test_filter_length_is_bounded() -> None:
    text = "(a=" + "x" * DEFAULT_LIMITS.max_filter_chars + ")"
    with pytest.raises(FilterSyntaxError, match=r"65,540 characters.*Limits\.max_filter_chars"):
        parse_filter(text)
    with pytest.raises(FilterSyntaxError, match="over the limit of 8"):
        Filter("(a=123456)", limits=Limits(max_filter_chars=8))
    assert parse_filter("(a=1234)", limits=Limits(max_filter_chars=8)).matches({"a": 1234})


def test_filters_nesting_32_deep_still_work() -> None:
    deep = parse_filter("(!" * 32 + "(a=1)" + ")" * 32)
    assert deep.matches({"a": 1}) and not deep.matches({"a": 2})
    with pytest.raises(FilterSyntaxError, match="nest deeper than 100"):
        parse_filter("(&" * 1000 + ")" * 1000)


@pytest.mark.parametrize(
    "operand",
    ["1" * 4300, "1" * 41, f"1.{'2' * 41}", f"{'1' * 4400}.0", f"-{'9' * 30}.{'9' * 30}e5"],
)
def test_filter_numbers_with_too_many_digits_are_syntax_errors(operand: str) -> None:
    with pytest.raises(FilterSyntaxError, match="Limits.max_number_digits") as caught:
        parse_filter(f"(&(objectClass=x)(size>={operand}))")
    assert operand[:40] in str(caught.value)
    assert "attribute 'size'" in str(caught.value)


def test_filter_long_digits_that_are_no_number_are_fine() -> None:
    long = "9" * 100
    assert parse_filter(f"(serial={long}*)").matches({"serial": long + "0"})  # substring
    assert parse_filter(f"(id=x{long})").matches({"id": f"x{long}"})
    # a property value too long for a version compares as a string, it does not raise
    assert parse_filter("(version>=1.0)").matches({"version": "1" * 5000 + ".0"})
    assert not parse_filter("(version<=1.0)").matches({"version": "2" * 5000 + ".0"})


@pytest.mark.parametrize("text", ["1" * 4300, f"1.{'2' * 41}", f"1.2.{'3' * 5000}.q"])
def test_version_with_too_many_digits_is_a_version_format_error(text: str) -> None:
    with pytest.raises(VersionFormatError, match=r"more than 40 digits \(Limits") as caught:
        Version.parse(text)
    assert caught.value.value == text and text[:20] in str(caught.value)
    assert Version.parse("1" * 40 + ".0").major == int("1" * 40)
    with pytest.raises(VersionFormatError, match="more than 3 digits"):
        Version.parse("1.1000", limits=Limits(max_number_digits=3))


# -- board profiles --------------------------------------------------------------------------


def test_profile_size_is_checked_by_stat_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "huge.toml"
    with open(path, "wb") as handle:
        handle.truncate(8 << 30)  # 8 GiB, sparse: reading it would take long
    monkeypatch.setattr(builtins, "open", no_open)
    with pytest.raises(InputLimitError, match=r"8,589,934,592 bytes.*max_descriptor_bytes") as info:
        load_profile(path)
    assert str(path) in str(info.value)


def test_profile_that_is_not_a_file_or_not_utf8_is_named(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="not a regular file") as caught:
        load_profile(tmp_path)
    assert str(tmp_path) in str(caught.value)
    path = tmp_path / "latin1.toml"
    path.write_bytes(
        PROFILE.replace('description = "', 'description = "M\xfcnchen ').encode("latin-1")
    )
    offset = path.read_bytes().index(b"\xfc")
    with pytest.raises(ProfileError, match=f"not valid UTF-8 at byte offset {offset}") as caught:
        load_profile(path)
    assert str(path) in str(caught.value) and caught.value.path == str(path)
    assert isinstance(caught.value.__cause__, UnicodeDecodeError)


def test_profile_nesting_and_numbers_are_bounded(tmp_path: Path) -> None:
    path = tmp_path / "deep.toml"
    path.write_text(PROFILE + f"\n[scenario]\nsizes = {nested(1000)}\n")
    with pytest.raises(InputLimitError, match="too deeply") as caught:
        load_profile(path)
    assert str(path) in str(caught.value)
    path.write_text(PROFILE + f"\n[scenario]\nsizes = {nested(40)}\n")
    with pytest.raises(InputLimitError, match=r"'scenario\.sizes(\[0\]){31}' nests 33"):
        load_profile(path)
    path.write_text(PROFILE.replace("cpu_hz = 300_000_000", f"cpu_hz = {'3' * 5000}"))
    with pytest.raises(InputLimitError, match=r"key 'board\.cpu_hz'.*40 digits") as caught:
        load_profile(path)
    assert str(path) in str(caught.value)
    path.write_text(PROFILE + "\n[scenario]\nsizes = [8, 64]\n")
    assert load_profile(path).scenario == {"sizes": [8, 64]}


# -- bitstreams ------------------------------------------------------------------------------

PART = "2vp30ff896"


def test_bitstream_size_is_checked_by_stat_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.bit"
    path.write_bytes(build_bitstream("tdes", PART, "prr0", 5000))
    small = Limits(max_bitstream_bytes=4999)
    monkeypatch.setattr(builtins, "open", no_open)
    for reader in (read_bitstream, load_bitstream):
        with pytest.raises(BitstreamTooLargeError, match=r"5,000 bytes.*4,999") as caught:
            reader(path, limits=small)
        assert str(path) in str(caught.value) and "Limits.max_bitstream_bytes" in str(caught.value)
    monkeypatch.undo()
    bs, data = load_bitstream(path, limits=Limits(max_bitstream_bytes=5000))
    assert bs.size == len(data) == 5000


def test_bitstream_that_is_no_regular_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BitstreamFormatError, match="not a regular file") as caught:
        read_bitstream(tmp_path)
    assert str(tmp_path) in str(caught.value)
    with pytest.raises(MissingBitstreamError):
        read_bitstream(tmp_path / "gone.bit")
    if os.path.exists("/dev/zero"):  # would read forever
        with pytest.raises(BitstreamFormatError, match="not a regular file"):
            read_bitstream("/dev/zero")


def _field(key: bytes, raw: bytes, length: int | None = None) -> bytes:
    return key + struct.pack(">H", len(raw) if length is None else length) + raw


_HEAD = bytes.fromhex("00090ff00ff00ff00ff0000001")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_field(b"a", b"x.ncd\0") + _field(b"a", b"y.ncd\0"), r"repeats field b'a' \(design\)"),
        (_field(b"a", b"x\x1b[31m.ncd\0"), r"field b'a' \(design\) at byte 13 is not printable"),
        (_field(b"b", b"2vp30\xff\0"), r"field b'b' \(part\) at byte 13 is not printable"),
        (_field(b"a", b"x", length=0xFFFF), r"truncated in field design \(needs 65551 bytes"),
        (b"a\xff", "truncated in field design"),
    ],
)
def test_bitstream_header_fields_are_bounded(body: bytes, message: str) -> None:
    data = _HEAD + body + _field(b"b", b"2vp30ff896\0") + b"e" + struct.pack(">I", 0)
    with pytest.raises(BitstreamFormatError, match=message) as caught:
        parse_bitstream(data, source="evil.bit")
    assert "evil.bit" in str(caught.value)


def test_bitstream_parser_refuses_what_is_not_bytes_or_too_large() -> None:
    with pytest.raises(BitstreamFormatError, match="must be bytes, got str"):
        parse_bitstream("not bytes", source="s.bit")  # type: ignore[arg-type]
    data = build_bitstream("tdes", PART, "prr0", 3000)
    assert parse_bitstream(bytearray(data)).size == 3000
    with pytest.raises(BitstreamTooLargeError, match=r"'s\.bit' is 3,000 bytes.*2,999"):
        parse_bitstream(data, source="s.bit", limits=Limits(max_bitstream_bytes=2999))
