"""The Framework end to end: modules, proxies across tiers, the juggle primitive, bad input."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from Crypto.Cipher import DES3

import juggle
import juggle.runtime
from juggle.errors import (
    BitstreamTooLargeError,
    BridgeError,
    DescriptorError,
    MissingBitstreamError,
    ModuleStateError,
    PartMismatchError,
    ProgrammingError,
    ResourceError,
    SanityCheckError,
    ServiceArgumentError,
    ServiceUnavailableError,
    TierUnavailableError,
    UnknownClassError,
    UnknownInterfaceError,
    UnknownServiceError,
    WindowAttachError,
)
from juggle.fabric.bitstream import write_bitstream

ROOT = Path(__file__).resolve().parents[2]
MODULES = ROOT / "examples" / "modules"

# Listing 3 of the Juggle paper, with the typo </frace/fpga-service> fixed.
LISTING_3 = """<?xml version="1.0"?>
<co-module xmlns="http://flowsgi.inf.ethz.ch/comodules">
 <accelerated-services>
   <accelerated-service interface="math.AddService">
      <java-service>math.MathAddImpl</java-service>
      <fpga-service>
        <driver>math.MathAddDriver</driver>
        <bitstream>opb_prr_0_adder_partial.bit</bitstream>
      </fpga-service>
      <service-properties>
        <entry key="version" value="1.0.0"/>
        <entry key="foo" value="bar"/>
      </service-properties>
   </accelerated-service>
 </accelerated-services>
</co-module>
"""

TDES_KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")


@pytest.fixture
def fw() -> Iterator[juggle.Framework]:
    framework = juggle.Framework("xupv2p")
    yield framework
    framework.close()


def state(fw: juggle.Framework) -> tuple[object, object]:
    return fw.services(), fw.regions()


def start(fw: juggle.Framework, name: str) -> juggle.Module:
    module = fw.install(MODULES / name)
    module.start()
    return module


# -- the seed's co-module XML ----------------------------------------------------------------


def copy_math(tmp_path: Path, xml: str = LISTING_3) -> Path:
    target = tmp_path / "mathmod"
    shutil.copytree(MODULES / "math", target)
    (target / "comodule.xml").write_text(xml)
    return target


def test_listing3_module_serves_in_software_then_hardware(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    module = fw.install(copy_math(tmp_path))
    module.start()
    import math  # Python's math is untouched by the module's `math` package

    assert hasattr(math, "sqrt") and "MathAddImpl" not in dir(math)
    add = fw.get_service("math.AddService", consumer="calc", filter="(&(version>=1.0)(foo=bar))")
    assert add.add(2, 40) == 42
    assert fw.services()[0].tier == "software"
    report = fw.juggle(to_hardware=add.service_id, to_software=[])
    assert fw.services()[0].tier == "hardware" and fw.services()[0].region == "prr0"
    assert add.add(123, 877) == 1000
    assert add.add(2**31 - 1, 1) == -(2**31)  # 32-bit int like the paper's Java ints
    assert report.reconfiguration_ms == pytest.approx(11.159, rel=0.10)
    assert report.bridge_ms == pytest.approx(3.0, rel=0.2)
    assert report.overhead_us > 0
    regions = fw.regions()
    assert regions[0].module == module.name and regions[0].service_id == add.service_id


def test_unknown_class_in_xml_refused(fw: juggle.Framework, tmp_path: Path) -> None:
    path = copy_math(tmp_path, LISTING_3.replace("math.MathAddImpl", "math.Nope"))
    before = state(fw)
    with pytest.raises(UnknownClassError, match="math.Nope"):
        fw.install(path)
    assert state(fw) == before and fw.modules() == ()


def test_unknown_interface_refused(fw: juggle.Framework, tmp_path: Path) -> None:
    path = copy_math(tmp_path, LISTING_3.replace("math.AddService", "math.SubService"))
    before = state(fw)
    with pytest.raises(UnknownInterfaceError, match="math.SubService"):
        fw.install(path)
    assert state(fw) == before


def test_missing_bitstream_refused_at_install(fw: juggle.Framework, tmp_path: Path) -> None:
    path = copy_math(tmp_path)
    (path / "opb_prr_0_adder_partial.bit").unlink()
    before = state(fw)
    with pytest.raises(MissingBitstreamError, match="opb_prr_0_adder_partial.bit"):
        fw.install(path)
    assert state(fw) == before


def test_bitstream_for_another_part_refused(fw: juggle.Framework, tmp_path: Path) -> None:
    path = copy_math(tmp_path)
    write_bitstream(path / "opb_prr_0_adder_partial.bit", "adder", "7z020clg484", "prr0", 123249)
    before = state(fw)
    with pytest.raises(PartMismatchError, match="7z020"):
        fw.install(path)
    assert state(fw) == before


def test_bitstream_larger_than_region_refused(fw: juggle.Framework, tmp_path: Path) -> None:
    path = copy_math(tmp_path)
    write_bitstream(path / "opb_prr_0_adder_partial.bit", "adder", "2vp30ff896", "prr0", 400_000)
    with pytest.raises(BitstreamTooLargeError, match="400000|400,000"):
        fw.install(path)
    assert fw.modules() == ()


def test_module_too_large_for_region_refused(fw: juggle.Framework, tmp_path: Path) -> None:
    big = LISTING_3.replace(
        "</fpga-service>",
        '<resources slices="5000" flipflops="10" mult18="0" ram16="0"/></fpga-service>',
    )
    path = copy_math(tmp_path, big)
    (path / "resources.json").unlink()  # no synthesis report: the declared figures count
    before = state(fw)
    with pytest.raises(ResourceError, match=r"declared figures.*slices"):
        fw.install(path)
    assert state(fw) == before


def test_bad_descriptor_names_field(fw: juggle.Framework, tmp_path: Path) -> None:
    target = tmp_path / "bad"
    shutil.copytree(MODULES / "tdes", target)
    text = (target / "juggle.toml").read_text().replace("ranking", "rankin", 1)
    (target / "juggle.toml").write_text(text)
    with pytest.raises(DescriptorError, match="rankin"):
        fw.install(target)


# -- crypto across tiers ---------------------------------------------------------------------


def reference_tdes(data: bytes) -> bytes:
    return DES3.new(TDES_KEY, DES3.MODE_ECB).encrypt(data)


def test_sp800_67_vector_same_at_all_tiers_after_one_load_key(fw: juggle.Framework) -> None:
    start(fw, "tdes")
    enc = fw.get_service("EncryptionService", consumer="mail", filter="(algorithm=tdes)")
    plain = b"The qufck brown fox jump"
    expected = bytes.fromhex("A826FD8CE53B855FCCE21C8112256FE668D5C05DD9B6B900")
    enc.load_key(TDES_KEY)
    for tier in ("software", "native", "hardware", "software"):
        fw.set_tier(enc.service_id, tier)  # no second load_key: the proxy carries the key
        buf = bytearray(plain)
        assert enc.encrypt(buf, len(buf)) == len(buf)
        assert bytes(buf) == expected, tier
        assert enc.decrypt(buf, len(buf)) == len(buf)
        assert bytes(buf) == plain, tier
    per_tier = fw.statistics(enc.service_id).per_tier
    assert {"software", "native", "hardware"} <= set(per_tier)
    assert all(per_tier[t].calls >= 2 for t in ("native", "hardware"))


def test_des_fips_vectors_through_proxy(fw: juggle.Framework) -> None:
    start(fw, "des")
    enc = fw.get_service("EncryptionService", consumer="x", filter="(algorithm=des)")
    vectors = [
        ("133457799BBCDFF1", "0123456789ABCDEF", "85E813540F0AB405"),
        ("0123456789ABCDEF", "4E6F772069732074", "3FA40E8A984D4815"),
        ("0101010101010101", "8000000000000000", "95F8A5E5DD31D900"),
    ]
    for tier in ("software", "native", "hardware"):
        fw.set_tier(enc.service_id, tier)
        for key, plain, cipher in vectors:
            enc.load_key(bytes.fromhex(key))
            buf = bytearray.fromhex(plain)
            enc.encrypt(buf, 8)
            assert buf.hex().upper() == cipher, (tier, key)


def test_wrong_length_key_and_size_errors(fw: juggle.Framework) -> None:
    start(fw, "tdes")
    enc = fw.get_service("EncryptionService", consumer="mail")
    before = state(fw)
    with pytest.raises(ServiceArgumentError, match="7"):
        enc.load_key(b"1234567")
    enc.load_key(TDES_KEY)
    with pytest.raises(ServiceArgumentError, match="12"):
        enc.encrypt(bytearray(12), 12)
    assert state(fw) == before


def test_unknown_ids_and_tiers(fw: juggle.Framework) -> None:
    start(fw, "tdes")
    before = state(fw)
    with pytest.raises(UnknownServiceError, match="999"):
        fw.juggle(to_hardware=999)
    with pytest.raises(UnknownServiceError, match="998"):
        fw.juggle(to_hardware=None, to_software=[998])
    sid = fw.services()[0].service_id
    with pytest.raises(TierUnavailableError, match="gpu"):
        fw.set_tier(sid, "gpu")
    with pytest.raises(SanityCheckError):
        fw.juggle(to_hardware=None, to_software=[sid])  # not in hardware
    assert state(fw) == before


def test_region_held_needs_eviction(fw: juggle.Framework) -> None:
    start(fw, "tdes")
    start(fw, "des")
    tdes, des = (s.service_id for s in fw.services())
    fw.juggle(to_hardware=tdes)
    before = state(fw)
    with pytest.raises(SanityCheckError, match="prr0"):
        fw.juggle(to_hardware=des)
    assert state(fw) == before
    report = fw.juggle(to_hardware=des, to_software=[tdes])
    tiers = {s.service_id: s.tier for s in fw.services()}
    assert tiers == {tdes: "native", des: "hardware"}
    assert report.reconfiguration_ms == pytest.approx(13.374, rel=0.10)


#: The error a failing programming step raises (juggle.fabric.faults).
FAILING_STEP_ERRORS: dict[str, type[Exception]] = {
    "bridge_disable": BridgeError,
    "config_write": ProgrammingError,
    "bridge_enable": BridgeError,
    "model_load": WindowAttachError,
}


@pytest.mark.parametrize("step", list(FAILING_STEP_ERRORS))
def test_failed_step_rolls_back(fw: juggle.Framework, step: str) -> None:
    """A swap (TDES out, DES into TDES's region) failing at one programming step is undone
    (runtime/juggling.py): the leaving TDES serves from its region again, the region holding
    TDES's design (left intact when the step failed before the write, else programmed back by
    the undo), and DES stays in software. Nothing is left that nobody serves from."""
    start(fw, "tdes")
    start(fw, "des")
    tdes, des = (s.service_id for s in fw.services())
    enc = fw.get_service("EncryptionService", consumer="mail", filter="(algorithm=tdes)")
    enc.load_key(TDES_KEY)
    fw.juggle(to_hardware=tdes)
    juggles = fw.juggle_count
    fw.fabric.faults.arm(step)
    with pytest.raises(FAILING_STEP_ERRORS[step]):
        fw.juggle(to_hardware=des, to_software=[tdes])
    faults = fw.fabric.faults.statistics()
    assert faults.fired[step] == 1 and faults.armed[step] == 0  # it fired, once
    assert sum(faults.fired.values()) == 1  # and nothing else did
    services = {s.service_id: (s.tier, s.region) for s in fw.services()}
    assert services == {tdes: ("hardware", "prr0"), des: ("native", None)}
    (region,) = fw.regions()
    assert (region.state, region.design, region.service_id) == ("PROGRAMMED", "tdes", tdes)
    assert not fw.fabric.region("prr0").snapshot().quarantined
    assert fw.juggle_count == juggles  # the failed swap is not counted as a juggle
    before = fw.statistics(tdes).per_tier["hardware"].calls
    buf = bytearray(b"12345678" * 3)
    enc.encrypt(buf, 24)  # served by the TDES core, back in its region
    assert bytes(buf) == reference_tdes(b"12345678" * 3)
    assert fw.statistics(tdes).per_tier["hardware"].calls == before + 1
    fw.juggle(to_hardware=des, to_software=[tdes])  # the next swap works
    services = {s.service_id: (s.tier, s.region) for s in fw.services()}
    assert services == {tdes: ("native", None), des: ("hardware", "prr0")}


def test_switching_storm_loses_no_call(fw: juggle.Framework) -> None:
    start(fw, "tdes")
    sid = fw.services()[0].service_id
    proxies = [fw.get_service("EncryptionService", consumer=f"app{i}") for i in range(8)]
    for p in proxies:
        p.load_key(TDES_KEY)
    fw.set_tier(sid, "software")
    plain = bytes(range(64))
    expected = reference_tdes(plain)
    stop = threading.Event()
    failures: list[str] = []
    counts = [0] * 8

    def worker(i: int) -> None:
        p = proxies[i]
        while not stop.is_set():
            buf = bytearray(plain)
            try:
                p.encrypt(buf, len(buf))
            except Exception as exc:  # counted, reported below
                failures.append(repr(exc))
                return
            if bytes(buf) != expected:
                failures.append(f"app{i}: wrong ciphertext")
                return
            counts[i] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    try:
        for i in range(100):
            if i % 2 == 0:
                fw.juggle(to_hardware=sid)
            else:
                fw.juggle(to_hardware=None, to_software=[sid])
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert failures == []
    assert all(c > 0 for c in counts)
    stats = fw.statistics(sid)
    assert stats.total.errors == 0
    assert stats.per_tier["hardware"].calls > 0 and stats.per_tier["software"].calls > 0
    assert len([j for j in fw.history() if j.to_hardware == sid]) == 50


# -- module lifecycle ------------------------------------------------------------------------


def test_lifecycle_and_zip_install(fw: juggle.Framework, tmp_path: Path) -> None:
    archive = tmp_path / "tdes.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in (MODULES / "tdes").rglob("*"):
            if f.is_file() and "__pycache__" not in f.parts:
                zf.write(f, f"tdes/{f.relative_to(MODULES / 'tdes')}")
    module = fw.install(archive)
    package = module.namespace.package
    assert module.state is juggle.ModuleState.INSTALLED
    with pytest.raises(ModuleStateError, match="stop"):
        module.stop()
    module.start()
    enc = fw.get_service("EncryptionService", consumer="mail")
    enc.load_key(TDES_KEY)
    fw.juggle(to_hardware=enc.service_id)
    assert any(m.startswith(package + ".") for m in sys.modules)
    module.stop()
    assert fw.services() == () and all(r.module is None for r in fw.regions())
    with pytest.raises(ServiceUnavailableError):
        enc.encrypt(bytearray(8), 8)
    with pytest.raises(ServiceUnavailableError):
        fw.get_service("EncryptionService")
    module.uninstall()
    assert not any(m == package or m.startswith(package + ".") for m in sys.modules)
    assert fw.modules() == ()


def test_update_under_load_fails_no_call(fw: juggle.Framework) -> None:
    module = start(fw, "tdes")
    enc = fw.get_service("EncryptionService", consumer="mail")
    enc.load_key(TDES_KEY)
    plain = bytes(range(32))
    expected = reference_tdes(plain)
    stop = threading.Event()
    failures: list[str] = []

    def worker() -> None:
        while not stop.is_set():
            buf = bytearray(plain)
            try:
                enc.encrypt(buf, len(buf))
            except Exception as exc:
                failures.append(repr(exc))
                return
            if bytes(buf) != expected:
                failures.append("wrong ciphertext")
                return

    t = threading.Thread(target=worker)
    t.start()
    try:
        old = module.namespace.package
        for _ in range(5):
            module.update()
        assert module.namespace.package != old
        assert old not in sys.modules
    finally:
        stop.set()
        t.join(10)
    assert failures == []
    assert module.state is juggle.ModuleState.ACTIVE


def test_get_service_by_filter_and_ranking(fw: juggle.Framework) -> None:
    start(fw, "tdes")
    start(fw, "des")
    assert fw.get_service("EncryptionService", filter="(algorithm=des)").service_id == (
        fw.services()[1].service_id
    )
    with pytest.raises(ServiceUnavailableError, match="aes"):
        fw.get_service("EncryptionService", filter="(algorithm=aes)")


# -- the facade's records: proxy_info, options, tiers ------------------------------------------


def hardware_only_tdes(tmp_path: Path) -> Path:
    """A copy of the tdes co-module with its hardware tier alone."""
    target = tmp_path / "tdes_hw"
    shutil.copytree(MODULES / "tdes", target)
    toml = target / "juggle.toml"
    text = toml.read_text()
    for tier, cls in (("software", "SoftwareTDES"), ("native", "NativeTDES")):
        text = text.replace(f'[services.{tier}]\nclass = "tdes_module.{cls}"\n', "")
    toml.write_text(text.replace('name = "tdes"', 'name = "tdes_hw"'))
    return target


def test_proxy_info_names_service_methods_and_state(fw: juggle.Framework) -> None:
    start(fw, "tdes")  # shared: one state for every consumer
    start(fw, "audio")  # per consumer: a state each
    mail = fw.get_service("EncryptionService", consumer="mail")
    web = fw.get_service("EncryptionService", consumer="web")
    info = fw.proxy_info(mail)
    assert isinstance(info, juggle.runtime.ProxyInfo)
    assert (info.service_id, info.interface, info.consumer, info.device) == (
        mail.service_id,
        "crypto.EncryptionService",
        "mail",
        None,
    )
    assert info.methods == (("load_key", True), ("encrypt", False), ("decrypt", False))
    assert fw.proxy_info(web).state is info.state  # shared service: one state
    first = fw.proxy_info(fw.get_service("DecoderService", consumer="a"))
    second = fw.proxy_info(fw.get_service("DecoderService", consumer="b"))
    assert first.state is not second.state  # per-consumer service: a state each
    assert first.methods == second.methods and any(s for _, s in first.methods)
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.consumer = "other"  # type: ignore[misc]


def test_proxy_info_refuses_what_is_no_live_proxy(fw: juggle.Framework) -> None:
    module = start(fw, "tdes")
    proxy = fw.get_service("EncryptionService", consumer="mail")
    for bad in (object(), proxy.service_id, None):
        with pytest.raises(UnknownServiceError, match="live proxy"):
            fw.proxy_info(bad)  # type: ignore[arg-type]
    assert fw.unget_service(proxy)
    with pytest.raises(UnknownServiceError, match="live proxy"):
        fw.proxy_info(proxy)  # given back
    again = fw.get_service("EncryptionService", consumer="mail")
    assert fw.proxy_info(again).consumer == "mail"
    module.stop()
    with pytest.raises(UnknownServiceError, match="live proxy"):
        fw.proxy_info(again)  # its service stopped


def test_proxy_info_names_a_tenants_device(fw: juggle.Framework, tmp_path: Path) -> None:
    """A service shared among tenants: the proxy's device is the arbiter's device name."""
    fw.add_tenant("alice")
    module = fw.install(hardware_only_tdes(tmp_path))
    module.start()
    proxy = fw.get_service("EncryptionService", consumer="alice")
    device = fw.proxy_info(proxy).device
    assert device == "tdes"
    (tenant,) = fw.tenants()
    assert [d.device for d in tenant.devices] == [device]


def test_options_are_one_frozen_checked_object() -> None:
    with juggle.Framework("xupv2p", verify_sample=4, trace_sample=16) as fw:
        options = fw.options
        assert isinstance(options, juggle.runtime.FrameworkOptions)
        assert (options.verify_sample, options.trace_sample) == (4, 16)
        assert (fw.verify_sample, fw.trace_sample) == (4, 16)
        with pytest.raises(dataclasses.FrozenInstanceError):
            options.verify_sample = 1  # type: ignore[misc]
        fw.verify_sample = 1  # a live setting: a new options object
        assert fw.options.verify_sample == 1 and options.verify_sample == 4
        with pytest.raises(juggle.ConfigurationError, match='"verify_sample" must be an int'):
            fw.verify_sample = -1
        assert fw.options.verify_sample == 1
    with pytest.raises(juggle.ConfigurationError, match='"trace_sample" must be a power of two'):
        juggle.runtime.FrameworkOptions(trace_sample=3)
    with pytest.raises(juggle.ConfigurationError, match='"call_timeout_s" must be a number > 0'):
        juggle.Framework("xupv2p", call_timeout_s=0)
    rtl = juggle.runtime.FrameworkOptions(hardware="rtl")
    assert rtl.backend == "rtl" and rtl.replace(verify_sample=2).backend == "rtl"


def test_tiers_are_an_enum_that_reads_as_its_value(fw: juggle.Framework) -> None:
    start(fw, "tdes")
    (snap,) = fw.services()
    assert snap.tier is juggle.runtime.Tier.NATIVE and snap.tier == "native"
    assert snap.tiers == tuple(juggle.runtime.Tier)
    report = fw.juggle(to_hardware=snap.service_id)
    assert report.tiers == {snap.service_id: "hardware"}
    assert json.dumps({"tier": fw.services()[0].tier}) == '{"tier": "hardware"}'
    assert f"{fw.statistics(snap.service_id).tier}" == "hardware"


def test_module_resolved_services_are_frozen(fw: juggle.Framework) -> None:
    module = start(fw, "tdes")
    (resolved,) = module.resolved
    assert isinstance(module.resolved, tuple)
    assert set(resolved.classes) == {"software", "native"} and resolved.hardware is not None
    assert resolved.spec.interfaces == ["crypto.EncryptionService"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolved.hardware = None  # type: ignore[misc]
    with pytest.raises(TypeError):
        resolved.classes["hardware"] = object  # type: ignore[index]


def test_a_juggle_runs_its_steps_through_the_core_executor(
    fw: juggle.Framework, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The juggle's plan is carried out as decision-core actions dispatched by
    ``juggle.core.execute.execute`` (leave: Disconnect; enter: Reconfigure, Connect)."""
    from juggle.core import execute as core_execute
    from juggle.runtime import juggling

    start(fw, "tdes")
    start(fw, "des")
    tdes, des = (s.service_id for s in fw.services())
    seen: list[str] = []

    def spy(ops: object, actions: object) -> int:
        listed = list(actions)  # type: ignore[call-overload]
        seen.extend(f"{type(a).__name__} {a.device} {a.region}" for a in listed)
        return core_execute.execute(ops, listed)  # type: ignore[arg-type]

    monkeypatch.setattr(juggling, "execute", spy)
    fw.juggle(to_hardware=tdes)
    assert seen == [f"Reconfigure {tdes} prr0", f"Connect {tdes} prr0"]
    seen.clear()
    fw.juggle(to_hardware=des, to_software=[tdes])
    assert seen == [f"Disconnect {tdes} prr0", f"Reconfigure {des} prr0", f"Connect {des} prr0"]
    assert {s.service_id: s.tier for s in fw.services()} == {tdes: "native", des: "hardware"}


def test_a_juggles_steps_refuse_actions_no_juggle_has(fw: juggle.Framework) -> None:
    from juggle.core.actions import Signal
    from juggle.core.tenants import ProgrammingModel, SignalKind
    from juggle.errors import UnknownActionError
    from juggle.runtime.juggling import JuggleAccount, JuggleSteps

    account = JuggleAccount()
    steps = JuggleSteps(fw.fabric, fw.options, fw._table)
    stray = Signal("<juggle>", "1", SignalKind.READY, ProgrammingModel.NATIVE)
    with pytest.raises(UnknownActionError, match="Disconnect, Reconfigure and Connect"):
        steps.run([stray], account, (), None)
    assert account.steps == [] and account.undo == []


def test_juggle_actions_write_the_plan_and_reuse_what_they_wrote(fw: juggle.Framework) -> None:
    from juggle.core.actions import Connect, Disconnect, Reconfigure
    from juggle.core.placement import JugglePlan
    from juggle.runtime.juggling import MEMO_LIMIT, ActionMemo, juggle_actions

    start(fw, "tdes")
    start(fw, "des")
    tdes, des = (fw._table.managed(s.service_id) for s in fw.services())
    fw.juggle(to_hardware=tdes.service_id)
    plan = JugglePlan(des.service_id, (tdes.service_id,), "prr0", True)
    memo: ActionMemo = {}
    first = juggle_actions(plan, des, [tdes], fw.fabric, memo)
    assert [type(a) for a in first] == [Disconnect, Reconfigure, Connect]
    reconfigure = first[1]
    assert isinstance(reconfigure, Reconfigure)
    assert (reconfigure.region, reconfigure.device, reconfigure.bitstream) == (
        "prr0",
        str(des.service_id),
        "des",
    )
    assert reconfigure.t_rcfg_us > 0  # modeled: the configuration port's transfer
    again = juggle_actions(plan, des, [tdes], fw.fabric, memo)
    assert again == first and all(a is b for a, b in zip(again, first, strict=True))
    for i in range(MEMO_LIMIT):
        memo[("other", i)] = ()
    juggle_actions(plan, des, [tdes], fw.fabric, memo)
    assert len(memo) == 2  # full: started afresh
    out = juggle_actions(JugglePlan(None, (tdes.service_id,), None, False), None, [tdes], fw.fabric)
    assert out == [Disconnect("<juggle>", str(tdes.service_id), "prr0")]
