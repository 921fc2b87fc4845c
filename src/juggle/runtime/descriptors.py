"""Module descriptors: ``juggle.toml`` (validated with pydantic) and the seed's co-module XML.

A descriptor says what a module offers: for each service its interface names, properties,
ranking and the implementation at each tier — a software class, a native class, a hardware
driver with a bitstream per region and the resources the design uses (Juggle 3.1, Listing 3),
and where the module's own Verilog of the design is (``[services.hardware.rtl]``); the
workload ``juggle profile`` runs on it (``[services.profile]``, :class:`ProfileSpec`). The
``[module]`` table may name the board the module was made for (``board``), which
``juggle module validate`` then checks against by default.
Class names are resolved inside the module's own code namespace, never against Python's
global modules. The JSON schema of ``juggle.toml`` is :func:`descriptor_schema`.

Descriptors come from outside: both readers take the file's bytes, check their length against
:class:`~juggle.limits.Limits` first, decode strict UTF-8 and bound nesting and number size
(:class:`~juggle.errors.InputLimitError` naming the file and key). The XML reader is
``defusedxml`` and refuses DTDs, entities and any declared encoding but UTF-8.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Annotated, Any, Final, Literal

from defusedxml import (
    DefusedXmlException,
    DTDForbidden,
    EntitiesForbidden,
)
from defusedxml.ElementTree import DefusedXMLParser
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from juggle.errors import DescriptorError, InputLimitError
from juggle.fabric.profiles import decode_untrusted, load_untrusted_toml, shown
from juggle.fabric.resources import LUT_KINDS, SLICE_KINDS, Resources, kinds_of
from juggle.limits import DEFAULT_LIMITS, Limits

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
    board: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][\w.\-]*$",
        description="the board profile the module was made for (its bitstreams' board); "
        "`juggle module validate` checks against it unless --fabric says otherwise",
    )


#: the argument generators of a :class:`ProfileSpec`
ArgumentKind = Literal["bytes", "buffer", "size", "int32", "uint32"]

#: the largest buffer a profile workload may ask for, in bytes
MAX_PROFILE_SIZE = 1 << 20


class ProfileSpec(_Strict):
    """``[services.profile]``: the workload ``juggle profile`` runs on the service when
    juggle has no built-in one for its interface.

    Every call is ``method(*args)``, one argument per entry of ``args``: ``bytes`` (random
    bytes), ``buffer`` (a random bytearray the call may change in place: its bytes after the
    call are compared too), ``size`` (the length of the call's buffers), ``int32`` (a random
    signed 32-bit int), ``uint32`` (a random int in ``0..2**32-1``). ``sizes`` are the buffer
    lengths of the checked calls (each size gets the profile's number of random calls); the
    timed call uses the first.
    """

    method: str = Field(pattern=r"^[A-Za-z_]\w*$", description="the method profiled")
    args: list[ArgumentKind] = Field(
        default_factory=list, max_length=16, description="one generator per argument"
    )
    sizes: list[Annotated[int, Field(ge=1, le=MAX_PROFILE_SIZE)]] = Field(
        default_factory=lambda: [64],
        min_length=1,
        max_length=16,
        description="buffer lengths in bytes of the checked calls; the timed call uses the first",
    )


class ImplementationSpec(_Strict):
    """A software or native implementation: a class constructed with no arguments."""

    class_: str = Field(alias="class", pattern=r"^[A-Za-z_][\w.]*$")


class ResourcesSpec(_Strict):
    """Fabric resources a hardware module uses (Juggle Table 2), in a family's own kinds.

    ``slices``/``flipflops``/``mult18``/``ram16`` count them on a slice-counted family
    (Virtex-II Pro, Virtex-4); ``lut``/``ff``/``dsp``/``bram`` (36 Kb tiles) and, on
    UltraScale+, ``uram`` on a LUT-counted one (7-series, UltraScale+); see
    :mod:`juggle.fabric.resources`. A table may hold both sets, one per kind of board the
    module targets; :meth:`for_family` picks the set the target region is counted in.
    """

    slices: int | None = Field(default=None, ge=0)
    flipflops: int | None = Field(default=None, ge=0)
    mult18: int | None = Field(default=None, ge=0)
    ram16: int | None = Field(default=None, ge=0)
    lut: int | None = Field(default=None, ge=0)
    ff: int | None = Field(default=None, ge=0)
    dsp: int | None = Field(default=None, ge=0)
    bram: int | None = Field(default=None, ge=0)
    uram: int | None = Field(default=None, ge=0)

    def for_family(self, family: str) -> Resources:
        """The declared figures as :class:`Resources` of ``family`` (a ``synth_xilinx`` family
        name, e.g. the region's ``resources.family``). When the table declares only the other
        system's kinds, those are returned as declared, so that the fit check refuses them with
        a :class:`~juggle.errors.ResourceError` naming both families. Raises ``ResourceError``
        for a kind the family does not count (``uram`` on 7-series)."""
        declared = {k: v for k, v in self.model_dump().items() if v is not None}
        old = {k: v for k, v in declared.items() if k in SLICE_KINDS}
        new = {k: v for k, v in declared.items() if k in LUT_KINDS}
        mine = old if kinds_of(family) == SLICE_KINDS else new
        if mine or not declared:
            return Resources(family=family, **mine)
        return Resources(**(old or new))


def _module_path(path: str) -> str:
    parts = path.split("/")
    if (
        not path
        or path.startswith("/")
        or "\\" in path
        or "\0" in path
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise ValueError(
            f"path {shown(path)} must be a relative POSIX path inside the module "
            "(no leading '/', no '..', '.' or empty parts, no backslash)"
        )
    return path


def _verilog_path(path: str) -> str:
    _module_path(path)
    if not path.endswith(".v"):
        raise ValueError(f"RTL source {shown(path)} must be a Verilog file (.v)")
    return path


#: a file of the module, relative to its root: ``bitstreams/tdes_prr0.bit``
ModulePath = Annotated[str, AfterValidator(_module_path)]
#: a Verilog file of the module, relative to its root: ``hdl/gcd/gcd_top.v``
VerilogPath = Annotated[str, AfterValidator(_verilog_path)]

#: the most Verilog files one ``[services.hardware.rtl]`` table may name
MAX_RTL_SOURCES = 256
#: the buses the JSON schema lists: :data:`juggle.fabric.rtl.catalog.BUSES` (which the
#: descriptor is checked against; a test keeps the two equal), without importing the RTL
#: package whenever a descriptor is read
SCHEMA_BUSES = ("regbus", "axi4-lite")


class RtlSpec(_Strict):
    """``[services.hardware.rtl]``: the module's own Verilog of the designs its bitstreams name.

    ``top`` is the top module (default ``<design>_top``); ``sources`` the module-relative
    ``.v`` files in compile order (default: every ``hdl/<design>/*.v`` of the module, sorted);
    ``bus`` the bus the top's ports speak, one of :data:`juggle.fabric.rtl.catalog.BUSES`
    (default ``"regbus"``, juggle's register bus). Without the table, a module folder with
    ``hdl/<design>/*.v`` runs that Verilog with these defaults (see
    :func:`juggle.runtime.rtlsources.module_rtl`).
    """

    top: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_$]*$",
        description="top module (default: <design>_top)",
    )
    sources: list[VerilogPath] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_RTL_SOURCES,
        description="Verilog files relative to the module root, in compile order "
        "(default: every hdl/<design>/*.v, sorted)",
    )
    bus: str = Field(
        default="regbus",
        description="the bus the top speaks",
        json_schema_extra={"enum": list(SCHEMA_BUSES)},
    )

    @field_validator("bus")
    @classmethod
    def _known_bus(cls, value: str) -> str:
        from juggle.fabric.rtl.catalog import BUSES

        if value not in BUSES:
            raise ValueError(f"unknown bus {shown(value)} (buses: {', '.join(BUSES)})")
        return value

    @field_validator("sources")
    @classmethod
    def _distinct(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(set(value)) != len(value):
            twice = next(v for i, v in enumerate(value) if v in value[:i])
            raise ValueError(f"RTL source {shown(twice)} is named twice")
        return value


class HardwareSpec(_Strict):
    """The hardware tier: a driver class over an MMIO window and a bitstream per region, the
    design's resources and, optionally, where the module's own Verilog of it is (``rtl``)."""

    driver: str = Field(pattern=r"^[A-Za-z_][\w.]*$")
    bitstreams: dict[str, str] = Field(min_length=1, description="region name -> bitstream file")
    model: str | None = Field(
        default=None, description="register model class for the simulated fabric (optional)"
    )
    resources: ResourcesSpec | None = None
    rtl: RtlSpec | None = None


class ServiceSpec(_Strict):
    """``[[services]]``: one service the module registers when it starts."""

    interfaces: list[str] = Field(min_length=1)
    ranking: int = 0
    per_consumer: bool = False
    properties: dict[str, PropertyValue] = Field(default_factory=dict)
    software: ImplementationSpec | None = None
    native: ImplementationSpec | None = None
    hardware: HardwareSpec | None = None
    profile: ProfileSpec | None = None

    @field_validator("interfaces")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name or not all(part.isidentifier() for part in name.split(".")):
                raise ValueError(f"interface name {name!r} is not a dotted identifier")
        return value

    @field_validator("properties")
    @classmethod
    def _distinct_ignoring_case(cls, value: dict[str, PropertyValue]) -> dict[str, PropertyValue]:
        # the registry matches property names ignoring case, so these two would be one
        seen: dict[str, str] = {}
        for name in value:
            first = seen.setdefault(name.lower(), name)
            if first != name:
                raise ValueError(
                    f"properties {shown(first)} and {shown(name)} differ only in case "
                    "(property names match ignoring case)"
                )
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


def _pin_path(path: str) -> str:
    try:
        return _module_path(path)
    except ValueError as exc:
        raise ValueError(f"pin {exc}") from None


#: a file of the module, relative to its root: ``bitstreams/tdes_prr0.bit``
PinPath = Annotated[str, AfterValidator(_pin_path)]
#: a SHA-256 digest as 64 lowercase hex digits
Sha256Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class Descriptor(_Strict):
    """A whole module descriptor."""

    module: ModuleInfo
    services: list[ServiceSpec] = Field(min_length=1)
    pins: dict[PinPath, Sha256Hex] = Field(
        default_factory=dict,
        description="[pins]: file path relative to the module root -> the lowercase hex "
        "SHA-256 of its bytes, checked when the module is installed",
    )
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
    return DescriptorError(f"invalid descriptor {origin}: {problems}", path=origin)


_VERSION_NUMBERS: Final = re.compile(r"\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def _check_version(version: object, origin: str, key: str, limits: Limits) -> None:
    """Refuse a version string whose major, minor or micro has too many digits."""
    if not isinstance(version, str):
        return
    match = _VERSION_NUMBERS.match(version)
    if match is not None and any(len(g or "") > limits.max_number_digits for g in match.groups()):
        raise InputLimitError(
            f"{origin}: key {key!r} is {shown(version)}, a version with a number of more than "
            f"{limits.max_number_digits} digits (Limits.max_number_digits)",
            path=origin,
            value=key,
        )


def parse_toml(data: str | bytes, origin: str, *, limits: Limits = DEFAULT_LIMITS) -> Descriptor:
    """Validate a ``juggle.toml`` (its bytes, or text); every error names ``origin``.

    Raises :class:`InputLimitError` naming the limit for more than
    ``limits.max_descriptor_bytes``, nesting deeper than ``limits.max_depth`` or a number of
    more than ``limits.max_number_digits`` digits (naming the key), and
    :class:`DescriptorError` for bytes that are not UTF-8 (naming the offset), bad TOML or a
    schema violation (naming the field and value).
    """
    text = decode_untrusted(data, origin, limits=limits, error=DescriptorError)
    table = load_untrusted_toml(text, origin, limits=limits, error=DescriptorError)
    module = table.get("module")
    if isinstance(module, dict):
        _check_version(module.get("version"), origin, "module.version", limits)
    try:
        return Descriptor.model_validate(table)
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


def _xml_int(value: str, origin: str, key: str, limits: Limits) -> int:
    if sum(c.isdigit() for c in value) > limits.max_number_digits:
        raise InputLimitError(
            f"{origin}: attribute {key!r} is {shown(value)}, a number of more than "
            f"{limits.max_number_digits} digits (Limits.max_number_digits)",
            path=origin,
            value=key,
        )
    try:
        return int(value)
    except ValueError as exc:
        raise DescriptorError(
            f"{origin}: bad <resources>: {key!r} must be an integer, got {shown(value)}",
            path=origin,
        ) from exc


def _xml_service(elem: ET.Element, origin: str, limits: Limits) -> dict[str, Any]:
    interface = elem.get("interface")
    if not interface:
        raise DescriptorError(
            f"{origin}: <accelerated-service> without an interface attribute", path=origin
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
            hardware["resources"] = {
                key: _xml_int(value, origin, f"resources.{key}", limits)
                for key, value in resources.attrib.items()
            }
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
                    path=origin,
                )
            key = str(entry.get("key"))
            if key in entries:
                raise DescriptorError(
                    f"{origin}: <service-properties> of {shown(interface)} has two entries "
                    f"with key {shown(key)}",
                    path=origin,
                )
            entries[key] = entry.get("value", "")
        service["properties"] = entries
    ranking = elem.get("ranking")
    if ranking is not None:
        if sum(c.isdigit() for c in ranking) > limits.max_number_digits:
            raise InputLimitError(
                f"{origin}: attribute 'ranking' of {shown(interface)} is {shown(ranking)}, a "
                f"number of more than {limits.max_number_digits} digits "
                "(Limits.max_number_digits)",
                path=origin,
                value="ranking",
            )
        service["ranking"] = ranking
    return service


_UTF8_NAMES: Final = frozenset({"utf-8", "utf8"})


class _DepthBoundTarget:
    """An ElementTree parser target that builds the tree and refuses an element as it opens
    when it nests deeper than ``limit`` (counted as it goes, no recursion)."""

    def __init__(self, origin: str, limit: int) -> None:
        self._builder = ET.TreeBuilder()
        self._origin, self._limit, self._depth = origin, limit, 0

    def start(self, tag: str, attrs: dict[str, str]) -> ET.Element:
        self._depth += 1
        if self._depth > self._limit:
            raise InputLimitError(
                f"{self._origin}: element <{_local(tag)[:80]}> nests {self._depth} "
                f"levels deep, over the limit of {self._limit} (Limits.max_depth)",
                path=self._origin,
                value=_local(tag),
            )
        return self._builder.start(tag, attrs)

    def end(self, tag: str) -> ET.Element:
        self._depth -= 1
        return self._builder.end(tag)

    def data(self, text: str) -> None:
        self._builder.data(text)

    def close(self) -> ET.Element:
        return self._builder.close()


def _refuse_other_encodings(origin: str, encoding: str | None) -> None:
    """From pyexpat's ``XmlDeclHandler``: only UTF-8 may be declared (the bytes were decoded
    as UTF-8 already)."""
    if encoding is not None and encoding.strip().lower().replace("_", "-") not in _UTF8_NAMES:
        raise DescriptorError(
            f"{origin} declares encoding {shown(encoding)}; descriptors must be UTF-8", path=origin
        )


def _parse_xml(text: str, origin: str, limits: Limits) -> ET.Element:
    target = _DepthBoundTarget(origin, limits.max_depth)
    parser = DefusedXMLParser(
        target=target, forbid_dtd=True, forbid_entities=True, forbid_external=True
    )
    parser.parser.XmlDeclHandler = lambda _version, encoding, _standalone: _refuse_other_encodings(
        origin, encoding
    )
    try:
        parser.feed(text)  # text, so expat reads UTF-8 whatever the declaration says
        root: ET.Element = parser.close()
    except ET.ParseError as exc:
        raise DescriptorError(f"{origin} is not well-formed XML: {exc}", path=origin) from exc
    except DefusedXmlException as exc:
        raise DescriptorError(f"{origin} {_refusal(exc)}", path=origin) from exc
    return root


def _refusal(exc: Exception) -> str:
    """What defusedxml refused, in words (DTDs, entities, external references)."""
    name = getattr(exc, "name", None)
    sysid = getattr(exc, "sysid", None)
    if isinstance(exc, DTDForbidden):
        what = f"a DTD (<!DOCTYPE {str(name)[:80]}>)"
    elif isinstance(exc, EntitiesForbidden):
        what = f"an entity {shown(str(name))}"
    else:
        what = f"an external reference {shown(str(sysid))}"
    return f"declares {what}; DTDs, entities and external references are refused"


def parse_comodule_xml(
    data: str | bytes, origin: str, module_name: str, *, limits: Limits = DEFAULT_LIMITS
) -> Descriptor:
    """Read the seed's co-module XML (Juggle Listing 3) as a descriptor named ``module_name``.

    ``data`` is the file's bytes (or text). Raises :class:`InputLimitError` naming ``origin``
    and the limit for more than ``limits.max_descriptor_bytes``, elements nesting deeper than
    ``limits.max_depth`` or a number of more than ``limits.max_number_digits`` digits, and
    :class:`DescriptorError` naming ``origin`` for bytes that are not UTF-8, a declared
    encoding other than UTF-8, a DTD or entity, XML that is not well-formed, or a schema
    violation. XML descriptors have no ``pins``.
    """
    text = decode_untrusted(data, origin, limits=limits, error=DescriptorError)
    root = _parse_xml(text, origin, limits)
    if _local(root.tag) != "co-module":
        raise DescriptorError(
            f"{origin}: root element is <{_local(root.tag)}>, expected <co-module>", path=origin
        )
    services_elem = _child(root, "accelerated-services")
    elems = [] if services_elem is None else list(services_elem)
    services = [
        _xml_service(e, origin, limits) for e in elems if _local(e.tag) == "accelerated-service"
    ]
    _check_version(root.get("version"), origin, "version", limits)
    table = {
        "module": {
            "name": module_name,
            "version": root.get("version", "0.0.0"),
            "description": root.get("description", ""),
        },
        "services": services,
        "format": "comodule-xml",
    }
    try:
        return Descriptor.model_validate(table)
    except ValidationError as exc:
        raise _invalid(origin, exc) from exc
