"""Board profiles: built-ins load, every schema violation is a ProfileError naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from juggle.errors import ProfileError, ResourceError, UnknownRegionError
from juggle.fabric import Resources, available_profiles, load_profile
from juggle.fabric.profiles import _builtin_dir

XUP_TEXT = (_builtin_dir() / "xupv2p.toml").read_text()


def test_builtin_profiles_are_listed_and_load() -> None:
    names = available_profiles()
    assert {"xupv2p", "zedboard"} <= set(names)
    for name in names:
        assert load_profile(name).name == name


def test_xupv2p_matches_the_paper() -> None:
    p = load_profile("xupv2p")
    assert p.board.part == "2vp30ff896"
    assert (p.board.cpu_hz, p.board.fabric_hz) == (300_000_000, 100_000_000)
    (prr,) = p.regions
    assert prr.resources == Resources(slices=2240, flipflops=4480, mult18=20, ram16=20)
    assert prr.tbuf == 6848
    assert 150_000 < prr.max_bitstream_bytes <= 170_000
    assert 10.5e6 < p.config_port.throughput_bytes_per_s < 11.7e6
    assert p.region("prr0") is prr


def test_zedboard_carries_the_ker_one_device_index() -> None:
    p = load_profile("zedboard")
    assert p.region_names() == ("prr1", "prr2", "prr3")
    devices = {d.name: d for d in p.devices}
    assert devices["fft1024"].regions == ("prr3",)
    assert devices["qam16"].preempt_us == pytest.approx(47.0)
    # sizes by the profile's stated rule, round(share / 100 x full bitstream), not back-solved
    # from Table 5; T_RCFG = size / PCAP (400 MB/s): 202 / 809 / 1,315 us (paper 231 / 810 /
    # 1,206 us, shown beside by juggle.simulate.ofdm.costs.derive_t_rcfg)
    rule = p.scenario["bitstream_rule"]
    assert rule["full_bitstream_bytes"] == 4_045_564
    for name, us in (("prr1", 202.28), ("prr2", 809.12), ("prr3", 1314.81)):
        size = p.region(name).bitstream_bytes
        share = rule["region_share_pct"][name]
        assert size is not None
        assert size == round(share / 100 * rule["full_bitstream_bytes"])
        assert size <= p.region(name).max_bitstream_bytes
        assert p.config_port.transfer_ps(size) / 1e6 == us


def test_load_by_path_and_scenario_table(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(XUP_TEXT + '\n[scenario]\nbuffer_sizes = [8, 64]\nlabel = "x"\n')
    for ref in (path, str(path)):
        p = load_profile(ref)
        assert p.scenario == {"buffer_sizes": [8, 64], "label": "x"}


def test_unknown_profile_name_is_named() -> None:
    with pytest.raises(ProfileError, match=r"'nosuchboard'.*xupv2p") as caught:
        load_profile("nosuchboard")
    assert caught.value.profile == "nosuchboard"


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="cannot be read"):
        load_profile(tmp_path / "absent.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[board\nname=")
    with pytest.raises(ProfileError, match="not valid TOML"):
        load_profile(bad)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("cpu_hz = 300_000_000", 'cpu_hz = 300_000_000\ncolour = "red"', "colour"),
        ("cycles_per_word = 36", "cycles_per_word = 0", "cycles_per_word"),
        ("adjacent = []", 'adjacent = ["prr9"]', "adjacent 'prr9' is no region"),
        ("adjacent = []", 'adjacent = ["prr0"]', "lists itself"),
        ("bitstream_bytes = 149_088", "bitstream_bytes = 170_000", "exceeds"),
        ("window_size = 0x1_0000", "window_size = 6", "window_size"),
    ],
)
def test_schema_violations_name_file_and_field(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    assert old in XUP_TEXT
    path = tmp_path / "broken.toml"
    path.write_text(XUP_TEXT.replace(old, new))
    with pytest.raises(ProfileError, match=message) as caught:
        load_profile(path)
    assert str(path) in str(caught.value)


def _second_region(name: str, base: str) -> str:
    block = XUP_TEXT[XUP_TEXT.index("[[regions]]") :]
    return block.replace('name = "prr0"', f'name = "{name}"').replace("0x4100_0000", base)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (_second_region("prr0", "0x4200_0000"), "region name 'prr0' appears twice"),
        (_second_region("prr1", "0x4100_8000"), "overlap"),
        (
            '[[devices]]\nname = "d"\nregions = ["prr7"]\nframe_us = 1.0\npreempt_us = 1.0\n',
            "device 'd': region 'prr7' is no region",
        ),
        (
            '[[devices]]\nname = "d"\nregions = ["prr0"]\nframe_us = 1.0\npreempt_us = 1.0\n'
            "speed = 3\n",
            "speed",
        ),
    ],
)
def test_cross_checks(tmp_path: Path, extra: str, message: str) -> None:
    path = tmp_path / "x.toml"
    path.write_text(XUP_TEXT + "\n" + extra)
    with pytest.raises(ProfileError, match=message):
        load_profile(path)


def test_unknown_region_lookup_names_the_known_ones() -> None:
    with pytest.raises(UnknownRegionError, match=r"'prr9'.*prr0"):
        load_profile("xupv2p").region("prr9")


def test_resources_fit_and_shortfall() -> None:
    prr = Resources(slices=2240, flipflops=4480, mult18=20, ram16=20)
    tdes = Resources(slices=1835, flipflops=1527)
    assert tdes.fits_in(prr)
    big = Resources(slices=3008, flipflops=100, mult18=21)
    assert not big.fits_in(prr)
    assert big.shortfall(prr) == {"slices": (3008, 2240), "mult18": (21, 20)}
    assert big.describe_shortfall(prr) == "slices 3008 > 2240, mult18 21 > 20"
    with pytest.raises(ResourceError, match='"ram16" must be an integer >= 0'):
        Resources(ram16=-1)
