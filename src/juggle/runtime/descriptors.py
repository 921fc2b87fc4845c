"""Module descriptors: ``juggle.toml`` (validated with pydantic) and the seed's co-module XML.

A descriptor says what a module offers: for each service its interface names, properties,
ranking and the implementation at each tier — a software class, a native class, a hardware
driver with a bitstream per region and the resources the design uses (Juggle 3.1, Listing 3).
Class names are resolved inside the module's own code namespace, never against Python's
global modules. The JSON schema of ``juggle.toml`` is :func:`descriptor_schema`.
"""

from __future__ import annotations

import json
import tomllib
import xml.etree.ElementTree as ET
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from juggle.errors import DescriptorError

COMODULE_NS = "http://flowsgi.inf.ethz.ch/comodules"
DESCRIPTOR_NAMES = ("juggle.toml", "comodule.xml")

PropertyValue = str | int | float | bool | list[str] | list[int] | list[float]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ModuleInfo(_Strict):
    """``[module]``: identity of the module."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]*$", description="module name")
    version: str = Field(default="0.0.0", pattern=r"^\d+(\.\d+){0,2}([.\-][\w\-]+)?$")
    description: str = ""


class ImplementationSpec(_Strict):
    """A software or native implementation: a class constructed with no arguments."""

    class_: str = Field(alias="class", pattern=r"^[A-Za-z_][\w.]*$")


class ResourcesSpec(_Strict):
    """Fabric resources a hardware module uses (Juggle Table 2)."""

    slices: int = Field(default=0, ge=0)
    flipflops: int = Field(default=0, ge=0)
    mult18: int = Field(default=0, ge=0)
    ram16: int = Field(default=0, ge=0)


class HardwareSpec(_Strict):
    """The hardware tier: a driver class over an MMIO window and a bitstream per region."""

    driver: str = Field(pattern=r"^[A-Za-z_][\w.]*$")
    bitstreams: dict[str, str] = Field(min_length=1, description="region name -> bitstream file")
    model: str | None = Field(
        default=None, description="register model class for the simulated fabric (optional)"
    )
    resources: ResourcesSpec | None = None


class ServiceSpec(_Strict):
    """``[[services]]``: one service the module registers when it starts."""

    interfaces: list[str] = Field(min_length=1)
    ranking: int = 0
    per_consumer: bool = False
    properties: dict[str, PropertyValue] = Field(default_factory=dict)
    software: ImplementationSpec | None = None
    native: ImplementationSpec | None = None
    hardware: HardwareSpec | None = None

    @field_validator("interfaces")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name or not all(part.isidentifier() for part in name.split(".")):
                raise ValueError(f"interface name {name!r} is not a dotted identifier")
        return value

    def tiers(self) -> tuple[str, ...]:
        """Tiers this service offers, in order software, native, hardware."""
        return tuple(
            t
            for t, spec in (
                ("software", self.software),
                ("native", self.native),
                ("hardware", self.hardware),
            )
            if spec is not None
        )


class Descriptor(_Strict):
    """A whole module descriptor."""

    module: ModuleInfo
    services: list[ServiceSpec] = Field(min_length=1)
    format: Literal["toml", "comodule-xml"] = Field(default="toml", exclude=True)


def descriptor_schema() -> dict[str, Any]:
    """The JSON schema of ``juggle.toml``."""
    return Descriptor.model_json_schema(by_alias=True)


def descriptor_schema_json() -> str:
    """:func:`descriptor_schema` as indented JSON text."""
    return json.dumps(descriptor_schema(), indent=2, sort_keys=True) + "\n"


def _invalid(origin: str, exc: ValidationError) -> DescriptorError:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
        f" (got {err.get('input')!r})"
        for err in exc.errors()
    )
    return DescriptorError(f"invalid descriptor {origin}: {problems}", subject=origin)


def parse_toml(text: str, origin: str) -> Descriptor:
    """Validate a ``juggle.toml`` text; :class:`DescriptorError` names ``origin`` and the field."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DescriptorError(f"{origin} is not valid TOML: {exc}", subject=origin) from exc
    try:
        return Descriptor.model_validate(data)
    except ValidationError as exc:
        raise _invalid(origin, exc) from exc


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _child(elem: ET.Element, name: str) -> ET.Element | None:
    for child in elem:
        if _local(child.tag) == name:
            return child
    return None


def _text(elem: ET.Element | None) -> str | None:
    if elem is None or elem.text is None:
        return None
    return elem.text.strip() or None


def _xml_service(elem: ET.Element, origin: str) -> dict[str, Any]:
    interface = elem.get("interface")
    if not interface:
        raise DescriptorError(
            f"{origin}: <accelerated-service> without an interface attribute", subject=origin
        )
    service: dict[str, Any] = {"interfaces": [interface]}
    software = _text(_child(elem, "java-service")) or _text(_child(elem, "software-service"))
    if software:
        service["software"] = {"class": software}
    native = _text(_child(elem, "native-service"))
    if native:
        service["native"] = {"class": native}
    fpga = _child(elem, "fpga-service")
    if fpga is not None:
        bitstream = _text(_child(fpga, "bitstream"))
        hardware: dict[str, Any] = {
            "driver": _text(_child(fpga, "driver")),
            # Listing 3 names one bitstream and no region: it targets the board's first PRR,
            # resolved from the bitstream header at install time ("*").
            "bitstreams": {"*": bitstream} if bitstream else {},
        }
        resources = _child(fpga, "resources")
        if resources is not None:
            try:
                hardware["resources"] = {k: int(v) for k, v in resources.attrib.items()}
            except ValueError as exc:
                raise DescriptorError(f"{origin}: bad <resources>: {exc}", subject=origin) from exc
        model = _text(_child(fpga, "model"))
        if model:
            hardware["model"] = model
        service["hardware"] = hardware
    props = _child(elem, "service-properties")
    if props is not None:
        entries: dict[str, Any] = {}
        for entry in props:
            if _local(entry.tag) != "entry" or entry.get("key") is None:
                raise DescriptorError(
                    f"{origin}: <service-properties> holds <{_local(entry.tag)}>, "
                    "expected <entry key=... value=...>",
                    subject=origin,
                )
            entries[str(entry.get("key"))] = entry.get("value", "")
        service["properties"] = entries
    ranking = elem.get("ranking")
    if ranking is not None:
        service["ranking"] = ranking
    return service


def parse_comodule_xml(text: str, origin: str, module_name: str) -> Descriptor:
    """Read the seed's co-module XML (Juggle Listing 3) as a descriptor named ``module_name``."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise DescriptorError(f"{origin} is not well-formed XML: {exc}", subject=origin) from exc
    if _local(root.tag) != "co-module":
        raise DescriptorError(
            f"{origin}: root element is <{_local(root.tag)}>, expected <co-module>",
            subject=origin,
        )
    services_elem = _child(root, "accelerated-services")
    elems = [] if services_elem is None else list(services_elem)
    services = [_xml_service(e, origin) for e in elems if _local(e.tag) == "accelerated-service"]
    data = {
        "module": {
            "name": module_name,
            "version": root.get("version", "0.0.0"),
            "description": root.get("description", ""),
        },
        "services": services,
        "format": "comodule-xml",
    }
    try:
        return Descriptor.model_validate(data)
    except ValidationError as exc:
        raise _invalid(origin, exc) from exc
