"""Sanity of the example modules: descriptors parse, name classes their code defines, the
classes implement the interfaces, and the bitstreams carry the right design, part, region and size.

Module code is imported from its folder under a unique package name, the way the framework
isolates modules, so the math module's ``math`` package does not collide with Python's.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import itertools
import math as stdlib_math
import sys
import tomllib
import types
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from juggle.fabric.bitstream import read_bitstream
from juggle.fabric.sim.catalog import ModelCatalog
from juggle.runtime.descriptors import Descriptor, parse_comodule_xml, parse_toml
from juggle.runtime.interfaces import InterfaceCatalog

WindowFactory = Callable[..., Any]  # the `window` fixture (conftest.py)

MODULES = Path(__file__).resolve().parents[2] / "examples" / "modules"
PART = "2vp30ff896"
PRR = {"slices": 2240, "flipflops": 4480, "mult18": 20, "ram16": 20}  # xupv2p's region
_ids = itertools.count()

EXPECTED = {
    # module: (descriptor, {bitstream file: (design, size)})
    "tdes": ("juggle.toml", {"bitstreams/tdes_prr0.bit": ("tdes", 149_088)}),
    "des": ("juggle.toml", {"bitstreams/des_prr0.bit": ("des", 149_087)}),
    "audio": ("juggle.toml", {"bitstreams/adpcm_prr0.bit": ("adpcm", 138_412)}),
    "aes": ("juggle.toml", {"bitstreams/aes_prr0.bit": ("aes", 149_088)}),
    "math": (
        "comodule.xml",
        {
            "opb_prr_0_adder_partial.bit": ("adder", 123_249),
            "opb_prr_0_multiplier_partial.bit": ("multiplier", 128_222),
        },
    ),
}


def load_descriptor(name: str) -> Descriptor:
    filename, _ = EXPECTED[name]
    path = MODULES / name / filename
    text = path.read_text()
    if filename.endswith(".toml"):
        tomllib.loads(text)  # plain TOML first
        return parse_toml(text, str(path))
    ET.fromstring(text)  # well-formed XML first
    return parse_comodule_xml(text, str(path), name)


class ModuleCode:
    """A module's folder imported as a synthetic package of its own."""

    def __init__(self, folder: Path) -> None:
        self.package = f"_test_juggle_example_{next(_ids)}_{folder.name}"
        package = types.ModuleType(self.package)
        spec = importlib.machinery.ModuleSpec(self.package, None, is_package=True)
        spec.submodule_search_locations = [str(folder)]
        package.__path__ = [str(folder)]
        package.__spec__ = spec
        sys.modules[self.package] = package

    def resolve(self, dotted: str) -> Any:
        module_path, _, attr = dotted.rpartition(".")
        return getattr(importlib.import_module(f"{self.package}.{module_path}"), attr)

    def unload(self) -> None:
        for name in [n for n in sys.modules if n.split(".")[0] == self.package]:
            del sys.modules[name]


@pytest.fixture
def code() -> Iterator[Callable[[str], ModuleCode]]:
    loaded: list[ModuleCode] = []

    def load(name: str) -> ModuleCode:
        loaded.append(ModuleCode(MODULES / name))
        return loaded[-1]

    yield load
    for module in loaded:
        module.unload()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_descriptor_classes_exist_and_implement_the_interface(
    name: str, code: Callable[[str], ModuleCode], window: WindowFactory
) -> None:
    descriptor = load_descriptor(name)
    module = code(name)
    catalog = InterfaceCatalog()
    for service in descriptor.services:
        interfaces = [catalog.resolve(i) for i in service.interfaces]
        for spec in (service.software, service.native):
            if spec is not None:
                impl = module.resolve(spec.class_)()
                assert all(isinstance(impl, i) for i in interfaces), spec.class_
        hardware = service.hardware
        assert hardware is not None, f"{name}: every example has a hardware tier"
        driver_cls = module.resolve(hardware.driver)
        bitstream = read_bitstream(MODULES / name / next(iter(hardware.bitstreams.values())))
        model_cls = ModelCatalog.builtin().resolve(bitstream.design)
        if hardware.model is not None:
            assert module.resolve(hardware.model) is model_cls
        driver = driver_cls(window(model_cls()))
        assert all(isinstance(driver, i) for i in interfaces), hardware.driver
        # resources declared by the descriptor are the model's and fit the region
        assert hardware.resources is not None
        declared = hardware.resources.for_family("xc2vp").as_dict()  # the xupv2p's kinds
        assert declared == model_cls.resources  # type: ignore[attr-defined]
        assert all(declared[k] <= PRR[k] for k in PRR), declared


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bitstreams_match_table_3(name: str) -> None:
    descriptor = load_descriptor(name)
    files = [f for s in descriptor.services if s.hardware for f in s.hardware.bitstreams.values()]
    _, expected = EXPECTED[name]
    assert sorted(files) == sorted(expected)
    for relpath, (design, size) in expected.items():
        path = MODULES / name / relpath
        assert path.stat().st_size == size
        header = read_bitstream(path)
        assert (header.design, header.part, header.region, header.size) == (
            design,
            PART,
            "prr0",
            size,
        )


def test_crypto_modules_properties() -> None:
    for name, algorithm in (("tdes", "tdes"), ("des", "des"), ("aes", "aes")):
        (service,) = load_descriptor(name).services
        assert service.interfaces == ["crypto.EncryptionService"]
        assert service.properties == {"algorithm": algorithm, "version": "1.0.0"}
        assert service.tiers() == ("software", "native", "hardware")
        assert not service.per_consumer


def test_audio_module_is_per_consumer() -> None:
    (service,) = load_descriptor("audio").services
    assert service.interfaces == ["audio.DecoderService"]
    assert service.per_consumer


def test_math_module_is_listing_3_with_two_services(code: Callable[[str], ModuleCode]) -> None:
    descriptor = load_descriptor("math")
    by_interface = {s.interfaces[0]: s for s in descriptor.services}
    assert sorted(by_interface) == ["math.AddService", "math.MulService"]
    add, mul = by_interface["math.AddService"], by_interface["math.MulService"]
    assert add.software is not None and add.software.class_ == "math.MathAddImpl"
    assert add.hardware is not None and add.hardware.driver == "math.MathAddDriver"
    assert mul.software is not None and mul.software.class_ == "math.MathMulImpl"
    assert mul.hardware is not None and mul.hardware.driver == "math.MathMulDriver"
    for service in (add, mul):
        assert service.properties == {"version": "1.0.0", "foo": "bar"}
    module = code("math")
    assert module.resolve("math.MathAddImpl")().add(2**31 - 1, 1) == -(2**31)
    assert module.resolve("math.MathMulImpl")().mul(6, 7) == 42
    assert stdlib_math.sqrt(16) == 4  # Python's math is untouched
    assert "MathAddImpl" not in vars(stdlib_math)


def test_module_demo_stream_decodes(code: Callable[[str], ModuleCode]) -> None:
    module = code("audio")
    stream = module.resolve("audio_module.demo_stream")(0.05)
    assert len(stream) == 200
    pcm = module.resolve("audio_module.SoftwareAdpcmDecoder")().decode(stream)
    assert len(pcm) == 800


def test_build_bitstreams_is_idempotent(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        f"_test_build_bitstreams_{next(_ids)}", MODULES / "build_bitstreams.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.stale() == []  # the committed files are what the script generates
    written = script.build(tmp_path)
    assert len(written) == len(script.BITSTREAMS)
    assert script.build(tmp_path) == []  # second run writes nothing
    (tmp_path / "des/bitstreams/des_prr0.bit").write_bytes(b"corrupt")
    assert script.stale(tmp_path) == [tmp_path / "des/bitstreams/des_prr0.bit"]
