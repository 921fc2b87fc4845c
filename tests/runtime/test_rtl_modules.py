"""A module's own Verilog runs under ``hardware="rtl"`` (issue 23 item 1).

The module is the scaffold's (``juggle module new rtlxor rtlt.XorService``: data XOR a 32-bit
mask, a register model, a bitstream) with a Verilog top of this suite's own
(``hdl_fixture/rtlxor_top.v``) copied in as ``hdl/rtlxor/rtlxor_top.v``. That the module's
Verilog, not its register model, serves the calls is shown with a broken copy of it: the
consumer gets the wrong bytes when verification is off, which the model would never give.

The simulators are built once per machine (Verilator, cached by the sources' hash under
``$XDG_CACHE_HOME/juggle/rtl``); without Verilator those tests skip, naming why.
"""

from __future__ import annotations

import functools
import logging
import shutil
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import juggle
from juggle.errors import (
    BackendError,
    ConfigurationError,
    DescriptorError,
    InputLimitError,
    IntegrityError,
    ModelRegistrationError,
    WindowAttachError,
)
from juggle.fabric.rtl import BUILTIN_RTL, HDL_ROOT, RtlWindow, VerilatorEngine
from juggle.fabric.rtl.catalog import BUSES
from juggle.limits import Limits
from juggle.runtime.descriptors import SCHEMA_BUSES, descriptor_schema, parse_toml
from juggle.runtime.integrity import lock_module
from juggle.runtime.modules import ModuleSource
from juggle.runtime.rtlsources import module_rtl
from juggle.scaffold import new_module

FIXTURE = Path(__file__).resolve().parent / "hdl_fixture" / "rtlxor_top.v"
DESIGN = "rtlxor"
INTERFACE = "rtlt.XorService"
GOOD = FIXTURE.read_text(encoding="utf-8")
#: the broken core: bit 0 of every word flipped on top of the XOR with the mask
BROKEN = GOOD.replace("bus_wdata ^ mask;  // DATAPATH", "bus_wdata ^ mask ^ 32'h1;  // BROKEN")
MASK = 0x0A0B0C0D
DATA = bytes(range(1, 13))


def _expected(data: bytes, mask: int = MASK, flip: int = 0) -> bytes:
    key = mask.to_bytes(4, "little")
    out = bytearray(b ^ key[i % 4] for i, b in enumerate(data))
    for i in range(0, len(out), 4):
        out[i] ^= flip
    return bytes(out)


@functools.cache
def _verilator_missing() -> str | None:
    try:
        VerilatorEngine(progress=None)
    except BackendError as exc:
        return f"Verilator is not usable here ({exc})"
    return None


def _verilator() -> None:
    """Skip, naming why, where Verilator cannot build simulators."""
    missing = _verilator_missing()
    if missing is not None:
        pytest.skip(missing)


def _module(where: Path, verilog: str | None = GOOD, *, rtl_table: str = "") -> Path:
    """The scaffold's rtlxor module in ``where`` with ``verilog`` as its
    ``hdl/rtlxor/rtlxor_top.v`` (None: no Verilog), ``rtl_table`` appended to its
    ``[services.hardware]`` (a ``[services.hardware.rtl]`` table)."""
    where.mkdir(parents=True, exist_ok=True)
    folder = new_module(DESIGN, INTERFACE, target_dir=where)
    shutil.rmtree(folder / "hdl", ignore_errors=True)  # only this suite's Verilog
    descriptor = folder / "juggle.toml"
    text = descriptor.read_text(encoding="utf-8")
    if "[services.hardware.rtl]" in text:  # a scaffold that writes its own table: drop it
        head, _, tail = text.partition("[services.hardware.rtl]")
        rest = tail.split("\n[", 1)
        text = head + ("[" + rest[1] if len(rest) > 1 else "")
    descriptor.write_text(text + rtl_table, encoding="utf-8")
    if verilog is not None:
        (folder / "hdl" / DESIGN).mkdir(parents=True)
        (folder / "hdl" / DESIGN / f"{DESIGN}_top.v").write_text(verilog, encoding="utf-8")
    return folder


def _zipped(folder: Path, archive: Path) -> Path:
    with zipfile.ZipFile(archive, "w") as out:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                out.write(path, path.relative_to(folder.parent).as_posix())
    return archive


@pytest.fixture
def rtl_fw() -> Iterator[juggle.Framework]:
    _verilator()
    fw = juggle.Framework(
        "xupv2p", hardware="rtl", verify_sample=0, backend_options={"progress": None}
    )
    yield fw
    fw.close()


def _serve(fw: juggle.Framework, module: Path | str) -> tuple[int, Any]:
    """Install and start ``module``, put its service into hardware; (service id, proxy)."""
    installed = fw.install(module)
    installed.start()
    sid = installed.service_ids[0]
    proxy = fw.get_service(INTERFACE)
    proxy.set_mask(MASK)
    fw.set_tier(sid, "hardware")
    return sid, proxy


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Until ``condition()`` holds (the fault supervisor works in its own thread)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.01)


# -- the module's own Verilog runs ---------------------------------------------------------------


def test_the_modules_own_verilog_serves_the_calls(rtl_fw: juggle.Framework, tmp_path: Path) -> None:
    module = _module(tmp_path)
    sid, proxy = _serve(rtl_fw, module)
    assert isinstance(rtl_fw.fabric.window("prr0"), RtlWindow)
    assert proxy.xor(DATA) == _expected(DATA)
    stats = rtl_fw.statistics(sid)
    assert stats.engine == "rtl" and stats.per_tier["hardware"].calls == 1
    entry = rtl_fw.fabric.rtl_of(DESIGN)
    assert entry is not None and entry.top == "rtlxor_top" and entry.bus == "regbus"
    assert entry.sources == ((module / "hdl" / DESIGN / "rtlxor_top.v").resolve(),)


def test_a_broken_verilog_core_gives_wrong_results_when_verification_is_off(
    rtl_fw: juggle.Framework, tmp_path: Path
) -> None:
    sid, proxy = _serve(rtl_fw, _module(tmp_path, BROKEN))
    assert proxy.xor(DATA) == _expected(DATA, flip=1) != _expected(DATA)
    assert rtl_fw.statistics(sid).tier == "hardware" and rtl_fw.regions()[0].state == "PROGRAMMED"


def test_a_broken_verilog_core_is_caught_when_every_call_is_verified(tmp_path: Path) -> None:
    _verilator()
    with juggle.Framework(
        "xupv2p", hardware="rtl", verify_sample=1, backend_options={"progress": None}
    ) as fw:
        sid, proxy = _serve(fw, _module(tmp_path, BROKEN))
        assert proxy.xor(DATA) == _expected(DATA)  # the software result, not the core's
        _wait_for(lambda: fw.regions()[0].state == "ERROR")
        assert fw.regions()[0].state == "ERROR" and fw.statistics(sid).mismatches == 1
        assert fw.statistics(sid).tier == "software"
        assert proxy.xor(DATA) == _expected(DATA)


def test_an_archive_modules_verilog_is_extracted_and_runs(
    rtl_fw: juggle.Framework, tmp_path: Path
) -> None:
    archive = _zipped(_module(tmp_path / "src", BROKEN), tmp_path / "rtlxor.zip")
    shutil.rmtree(tmp_path / "src")  # the archive alone
    sid, proxy = _serve(rtl_fw, archive)
    assert proxy.xor(DATA) == _expected(DATA, flip=1)  # the archive's own (broken) Verilog
    entry = rtl_fw.fabric.rtl_of(DESIGN)
    assert entry is not None and entry.sources[0].read_text(encoding="utf-8") == BROKEN
    assert rtl_fw.statistics(sid).engine == "rtl"


def test_verilog_that_does_not_build_is_a_contained_fault_naming_the_file(
    rtl_fw: juggle.Framework, tmp_path: Path
) -> None:
    bad = GOOD.replace("endmodule", "endmodul")
    module = _module(tmp_path, bad)
    installed = rtl_fw.install(module)
    installed.start()
    sid = installed.service_ids[0]
    proxy = rtl_fw.get_service(INTERFACE)
    proxy.set_mask(MASK)
    with pytest.raises(WindowAttachError, match="rtlxor_top.v") as caught:
        rtl_fw.set_tier(sid, "hardware")
    assert caught.value.design == DESIGN
    assert rtl_fw.statistics(sid).tier == "software"  # still serving, from software
    assert proxy.xor(DATA) == _expected(DATA)


# -- which engine runs a design, and strict ---------------------------------------------------


def test_a_design_without_rtl_runs_on_its_model_and_says_so(
    rtl_fw: juggle.Framework, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="juggle"):
        installed = rtl_fw.install(_module(tmp_path, None))
    warned = [r.getMessage() for r in caplog.records if "has no RTL" in r.getMessage()]
    assert len(warned) == 1 and "design rtlxor" in warned[0]
    hardware = installed.resolved[0].hardware
    assert hardware is not None and hardware.engines == {DESIGN: "model"}
    installed.start()
    sid = installed.service_ids[0]
    proxy = rtl_fw.get_service(INTERFACE)
    proxy.set_mask(MASK)
    rtl_fw.set_tier(sid, "hardware")
    assert proxy.xor(DATA) == _expected(DATA)
    assert rtl_fw.statistics(sid).engine == "model"
    assert not isinstance(rtl_fw.fabric.window("prr0"), RtlWindow)


def test_engine_on_the_model_fabric_and_without_hardware(tmp_path: Path) -> None:
    with juggle.Framework("xupv2p") as fw:
        installed = fw.install(_module(tmp_path))  # Verilog, but the fabric runs models
        installed.start()
        assert fw.statistics(installed.service_ids[0]).engine == "model"
        assert fw.fabric.rtl_of(DESIGN) is None and not fw.fabric.simulates_rtl

        class Add:
            def add(self, a: int, b: int) -> int:
                return a + b

        plain = fw.register_service("math.AddService", Add())
        assert fw.statistics(plain).engine is None


def test_strict_refuses_a_design_without_rtl_and_changes_nothing(tmp_path: Path) -> None:
    with juggle.Framework("xupv2p", hardware="rtl", strict=True) as fw:
        before = fw.fabric.models.designs()
        with pytest.raises(ConfigurationError, match="design 'rtlxor'") as caught:
            fw.install(_module(tmp_path, None))
        assert "module 'rtlxor'" in str(caught.value) and caught.value.value == DESIGN
        assert fw.modules() == () and fw.fabric.models.designs() == before
        assert fw.fabric.engine_of(DESIGN) == "model"
        fw.install(_module(tmp_path / "with", GOOD))  # with its Verilog: accepted
        assert fw.fabric.engine_of(DESIGN) == "rtl"


def test_strict_must_be_a_bool() -> None:
    with pytest.raises(ConfigurationError, match='"strict"'):
        juggle.Framework("xupv2p", strict="yes")  # type: ignore[arg-type]


# -- the catalog entry lives as long as the module's code ---------------------------------------


def test_uninstall_and_update_release_the_catalog_entry(tmp_path: Path) -> None:
    with juggle.Framework("xupv2p", hardware="rtl") as fw:
        module = _module(tmp_path)
        installed = fw.install(module)
        assert fw.fabric.rtl_of(DESIGN) is not None and fw.fabric.engine_of(DESIGN) == "rtl"
        shutil.rmtree(module / "hdl")  # the next version ships no Verilog
        installed.update()
        assert fw.fabric.rtl_of(DESIGN) is None and fw.fabric.engine_of(DESIGN) == "model"
        (module / "hdl" / DESIGN).mkdir(parents=True)
        (module / "hdl" / DESIGN / "rtlxor_top.v").write_text(GOOD, encoding="utf-8")
        installed.update()  # and the one after again does
        assert fw.fabric.rtl_of(DESIGN) is not None
        installed.uninstall()
        assert fw.fabric.rtl_of(DESIGN) is None and fw.fabric.engine_of(DESIGN) == "model"


def test_a_failed_install_leaves_no_catalog_entry(tmp_path: Path) -> None:
    module = _module(tmp_path)
    text = (module / "juggle.toml").read_text(encoding="utf-8")
    # a second service whose class does not exist: resolved after the first one's RTL
    second = text[text.index("[[services]]") :].replace(
        "rtlxor_module.SoftwareXor", "rtlxor_module.NoSuchClass"
    )
    (module / "juggle.toml").write_text(text + "\n" + second, encoding="utf-8")
    with juggle.Framework("xupv2p", hardware="rtl") as fw:
        with pytest.raises(juggle.JuggleError):
            fw.install(module)
        assert fw.fabric.rtl_of(DESIGN) is None and fw.modules() == ()


def test_add_rtl_layers_over_builtin_rtl_and_gives_it_back(tmp_path: Path) -> None:
    with juggle.Framework("xupv2p", hardware="rtl") as fw:
        fabric = fw.fabric
        builtin = fabric.rtl_of("adder")
        assert builtin is not None and fabric.rtl_owner("adder") is None
        mine = tmp_path / "adder_top.v"
        mine.write_text(GOOD.replace("rtlxor_top", "adder_top"), encoding="utf-8")
        fabric.add_rtl("adder", [mine], "adder_top", owner="module-a")
        assert fabric.rtl_of("adder").sources == (mine.resolve(),)  # type: ignore[union-attr]
        with pytest.raises(ModelRegistrationError, match="module-a"):
            fabric.add_rtl("adder", [mine], "adder_top", owner="module-b")
        # an update of module-a takes its entry over; a failed update gives it back
        fabric.add_rtl("adder", [mine], "adder_top", owner="module-a2", replacing="module-a")
        assert fabric.release_rtl("module-a2") == ("adder",)
        assert fabric.rtl_owner("adder") == "module-a"
        assert fabric.release_rtl("module-a") == ("adder",)
        assert fabric.rtl_of("adder") == builtin and fabric.rtl_owner("adder") is None
        assert fabric.release_rtl("module-a") == ()
    with juggle.Framework("xupv2p") as fw, pytest.raises(juggle.JuggleError, match="runs no RTL"):
        fw.fabric.add_rtl("adder", [mine], "adder_top", owner="module-a")


# -- the descriptor's [services.hardware.rtl] ----------------------------------------------------


def _descriptor(rtl: str) -> str:
    return f"""
[module]
name = "m"
[[services]]
interfaces = ["a.B"]
[services.hardware]
driver = "d.D"
bitstreams = {{ prr0 = "b.bit" }}
[services.hardware.rtl]
{rtl}
"""


def test_the_rtl_table_parses_with_defaults() -> None:
    spec = parse_toml(_descriptor('bus = "axi4-lite"'), "t").services[0].hardware
    assert spec is not None and spec.rtl is not None
    assert (spec.rtl.top, spec.rtl.sources, spec.rtl.bus) == (None, None, "axi4-lite")
    named = parse_toml(_descriptor('top = "x_top"\nsources = ["hdl/x/a.v"]'), "t").services[0]
    assert named.hardware is not None and named.hardware.rtl is not None
    assert named.hardware.rtl.bus == "regbus" and named.hardware.rtl.sources == ["hdl/x/a.v"]


@pytest.mark.parametrize(
    ("rtl", "named"),
    [
        ('bus = "wishbone"', "wishbone"),
        ('sources = ["/etc/passwd.v"]', "/etc/passwd.v"),
        ('sources = ["hdl/../../x.v"]', "hdl/../../x.v"),
        ('sources = ["hdl/x/a.sv"]', "hdl/x/a.sv"),
        ('sources = ["hdl/a.v", "hdl/a.v"]', "hdl/a.v"),
        ("sources = []", "sources"),
        ('top = "1bad"', "1bad"),
        ('colour = "red"', "colour"),
    ],
)
def test_a_bad_rtl_table_is_refused_naming_the_value(rtl: str, named: str) -> None:
    with pytest.raises(DescriptorError, match="invalid descriptor t") as caught:
        parse_toml(_descriptor(rtl), "t")
    assert named in str(caught.value)


def test_resolution_order_table_then_hdl_folder_then_builtin(tmp_path: Path) -> None:
    module = _module(tmp_path)
    (module / "rtl").mkdir()
    (module / "rtl" / "core.v").write_text(GOOD.replace("rtlxor_top", "core"), encoding="utf-8")
    source = ModuleSource.open(module)
    folder = module_rtl(source, None, DESIGN)
    assert folder is not None and folder.origin == "module"
    assert (folder.files, folder.top, folder.bus) == (
        ("hdl/rtlxor/rtlxor_top.v",),
        "rtlxor_top",
        "regbus",
    )
    table = parse_toml(
        _descriptor('top = "core"\nsources = ["rtl/core.v"]\nbus = "axi4-lite"'), "t"
    ).services[0]
    assert table.hardware is not None
    found = module_rtl(source, table.hardware.rtl, DESIGN)
    assert found is not None and (found.files, found.top, found.bus) == (
        ("rtl/core.v",),
        "core",
        "axi4-lite",
    )
    defaults = parse_toml(_descriptor('bus = "axi4-lite"'), "t").services[0].hardware
    assert defaults is not None
    found = module_rtl(source, defaults.rtl, DESIGN)  # the table's defaults: the hdl folder
    assert found is not None and found.files == ("hdl/rtlxor/rtlxor_top.v",)
    builtin = module_rtl(source, None, "tdes")
    assert builtin is not None and builtin.origin == "builtin" and builtin.top == "tdes_top"
    sources, _ = BUILTIN_RTL["tdes"]
    assert builtin.paths(source) == tuple(HDL_ROOT / s for s in sources)
    assert module_rtl(source, None, "no_such_design") is None


def test_rtl_sources_the_module_lacks_or_that_leave_it_are_refused(tmp_path: Path) -> None:
    module = _module(tmp_path, None)
    source = ModuleSource.open(module)
    missing = parse_toml(_descriptor('sources = ["hdl/rtlxor/gone.v"]'), "t").services[0]
    assert missing.hardware is not None
    with pytest.raises(DescriptorError, match="gone.v"):
        module_rtl(source, missing.hardware.rtl, DESIGN)
    empty = parse_toml(_descriptor('bus = "regbus"'), "t").services[0]
    assert empty.hardware is not None
    with pytest.raises(DescriptorError, match="hdl/rtlxor"):
        module_rtl(source, empty.hardware.rtl, DESIGN)  # no sources, no hdl/rtlxor/*.v
    outside = tmp_path / "outside.v"
    outside.write_text(GOOD, encoding="utf-8")
    (module / "hdl").mkdir()
    (module / "hdl" / "link.v").symlink_to(outside)
    linked = parse_toml(_descriptor('sources = ["hdl/link.v"]'), "t").services[0]
    assert linked.hardware is not None
    with pytest.raises(IntegrityError, match="link.v"):
        module_rtl(source, linked.hardware.rtl, DESIGN)


def test_install_refuses_a_table_naming_a_missing_file_and_changes_nothing(
    tmp_path: Path,
) -> None:
    module = _module(
        tmp_path, rtl_table='\n[services.hardware.rtl]\nsources = ["hdl/rtlxor/gone.v"]\n'
    )
    with juggle.Framework("xupv2p", hardware="rtl") as fw:
        with pytest.raises(DescriptorError, match="gone.v"):
            fw.install(module)
        assert fw.modules() == () and fw.fabric.rtl_of(DESIGN) is None


def test_verilog_over_the_source_limit_is_refused_naming_it(tmp_path: Path) -> None:
    module = _module(tmp_path / "folder")
    small = Limits(max_source_bytes=len(GOOD.encode()) - 1)
    with pytest.raises(InputLimitError, match="rtlxor_top.v"):
        module_rtl(ModuleSource.open(module, small), None, DESIGN)
    archive = _zipped(module, tmp_path / "rtlxor.zip")
    zipped = ModuleSource.open(archive, small)
    found = module_rtl(zipped, None, DESIGN)  # an archive's members are read when extracted
    assert found is not None
    with pytest.raises(InputLimitError, match="rtlxor_top.v"):
        found.paths(zipped, tmp_path / "cache")
    extracted = found.paths(ModuleSource.open(archive), tmp_path / "cache")
    assert [p.read_text(encoding="utf-8") for p in extracted] == [GOOD]
    assert extracted[0].relative_to(tmp_path / "cache").parts[1:] == ("hdl", DESIGN, "rtlxor_top.v")


def test_a_pinned_verilog_file_changed_after_install_is_refused_at_program(
    tmp_path: Path,
) -> None:
    module = _module(tmp_path)
    lock_module(module)
    with juggle.Framework("xupv2p", hardware="rtl") as fw:
        installed = fw.install(module)
        installed.start()
        sid = installed.service_ids[0]
        (module / "hdl" / DESIGN / "rtlxor_top.v").write_text(BROKEN, encoding="utf-8")
        with pytest.raises(IntegrityError, match="rtlxor_top.v"):
            fw.set_tier(sid, "hardware")
        assert fw.regions()[0].state == "EMPTY" and fw.statistics(sid).tier == "software"


def test_the_schema_lists_the_buses_the_rtl_backend_drives() -> None:
    rtl = descriptor_schema()["$defs"]["RtlSpec"]["properties"]
    assert tuple(rtl["bus"]["enum"]) == SCHEMA_BUSES == BUSES
