"""Descriptors: juggle.toml validation, the published JSON schema, the co-module XML reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from juggle.errors import DescriptorError
from juggle.runtime.descriptors import (
    descriptor_schema_json,
    parse_comodule_xml,
    parse_toml,
)

SCHEMA = Path(__file__).resolve().parents[2] / "src" / "juggle" / "schemas"

GOOD = """
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
flipflops = 1527
"""


def test_published_schema_is_current() -> None:
    published = (SCHEMA / "juggle-module.schema.json").read_text()
    assert published == descriptor_schema_json(), "regenerate with `juggle module schema`"


def test_good_toml() -> None:
    d = parse_toml(GOOD, "x/juggle.toml")
    service = d.services[0]
    assert d.module.name == "tdes" and service.ranking == 10
    assert service.tiers() == ("software", "hardware")
    assert service.hardware is not None and service.hardware.resources is not None
    assert service.hardware.resources.slices == 1835


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (('name = "tdes"', 'name = "Bad Name"'), "module.name"),
        (("ranking = 10", 'ranking = "high"'), "ranking"),
        (("slices = 1835", "slices = -1"), "slices"),
        (('interfaces = ["crypto.EncryptionService"]', "interfaces = []"), "interfaces"),
        (('interfaces = ["crypto.EncryptionService"]', 'interfaces = ["9bad"]'), "9bad"),
        (("[services.software]", "[services.sofware]"), "sofware"),
        (('class = "tdes_module.SoftwareTDES"', 'class = ""'), "class"),
    ],
)
def test_bad_toml_names_the_field(edit: tuple[str, str], named: str) -> None:
    with pytest.raises(DescriptorError, match=named) as info:
        parse_toml(GOOD.replace(*edit), "x/juggle.toml")
    assert "x/juggle.toml" in str(info.value)


def test_not_toml() -> None:
    with pytest.raises(DescriptorError, match="not valid TOML"):
        parse_toml("[module", "y.toml")


def test_xml_listing_typo_is_not_well_formed() -> None:
    bad = (
        '<co-module xmlns="http://flowsgi.inf.ethz.ch/comodules"><accelerated-services>'
        '<accelerated-service interface="math.AddService"><fpga-service><driver>a.B</driver>'
        "</frace/fpga-service></accelerated-service></accelerated-services></co-module>"
    )
    with pytest.raises(DescriptorError, match="well-formed"):
        parse_comodule_xml(bad, "m.xml", "m")


def test_xml_reads_services_properties_and_extensions() -> None:
    text = """<co-module xmlns="http://flowsgi.inf.ethz.ch/comodules"><accelerated-services>
      <accelerated-service interface="math.MulService">
        <java-service>math.MathMulImpl</java-service>
        <native-service>math.FastMul</native-service>
        <fpga-service><driver>math.MathMulDriver</driver><bitstream>mul.bit</bitstream>
          <resources slices="88" flipflops="144" mult18="1" ram16="0"/></fpga-service>
        <service-properties><entry key="version" value="1.0.0"/></service-properties>
      </accelerated-service></accelerated-services></co-module>"""
    d = parse_comodule_xml(text, "m.xml", "math")
    s = d.services[0]
    assert d.format == "comodule-xml"
    assert s.tiers() == ("software", "native", "hardware")
    assert s.properties == {"version": "1.0.0"}
    assert s.hardware is not None and s.hardware.bitstreams == {"*": "mul.bit"}
    assert s.hardware.resources is not None and s.hardware.resources.mult18 == 1


def test_xml_wrong_root() -> None:
    with pytest.raises(DescriptorError, match="co-module"):
        parse_comodule_xml("<bundle/>", "m.xml", "m")
