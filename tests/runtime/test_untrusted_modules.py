"""Untrusted modules (issue 9): bounded work before trust, one error contract, integrity.

Every case names the specific :class:`~juggle.errors.JuggleError` and the offending value, and
leaves the framework's services, regions and modules as they were."""

from __future__ import annotations

import os
import shutil
import sys
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sharing_support import MODULES, encrypt, tdes_reference

import juggle
from juggle.errors import (
    DuplicateModuleError,
    InputLimitError,
    IntegrityError,
    ModuleCodeError,
    ModuleError,
    PriorityError,
    SignatureError,
    UnknownClassError,
    UnknownServiceError,
)
from juggle.limits import Limits
from juggle.runtime.integrity import generate_key, lock_module, sign_module

KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")
PLAIN = b"sixteen bytes!!!"


@pytest.fixture
def fw() -> Iterator[juggle.Framework]:
    framework = juggle.Framework("xupv2p")
    framework.install(MODULES / "math").start()  # something that must stay as it is
    yield framework
    framework.close()


@contextmanager
def unchanged(fw: juggle.Framework) -> Iterator[None]:
    """The block raises, and services, regions, modules and imported code stay as they were."""
    before = (fw.services(), fw.regions(), fw.modules())
    loaded = {n for n in sys.modules if n.startswith("_juggle_module_")}
    yield
    assert (fw.services(), fw.regions(), fw.modules()) == before
    assert {n for n in sys.modules if n.startswith("_juggle_module_")} == loaded


def tdes_copy(tmp_path: Path, name: str = "tdes") -> Path:
    target = tmp_path / name
    shutil.copytree(MODULES / "tdes", target)
    return target


def with_code(tmp_path: Path, code: str) -> Path:
    """A copy of the tdes module whose code file is ``code``."""
    folder = tdes_copy(tmp_path)
    (folder / "tdes_module.py").write_text(code, encoding="utf-8")
    return folder


# -- module code -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "raised"),
    [
        ("def broken(:\n", "SyntaxError"),
        ("x = 1 / 0\n", "ZeroDivisionError"),
        ("raise RuntimeError('no luck')\n", "RuntimeError"),
        ("import not_a_package_anywhere\n", "ModuleNotFoundError"),
    ],
)
def test_module_code_failing_at_import_is_a_module_code_error(
    fw: juggle.Framework, tmp_path: Path, code: str, raised: str
) -> None:
    folder = with_code(tmp_path, code)
    with unchanged(fw), pytest.raises(ModuleCodeError, match=f"'tdes'.*{raised}") as caught:
        fw.install(folder)
    assert "tdes_module.py" in str(caught.value)
    assert type(caught.value.__cause__).__name__ == raised


def test_an_implementation_failing_to_construct_is_a_module_code_error(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    code = (MODULES / "tdes" / "tdes_module.py").read_text() + (
        "\n\nclass NativeTDES(NativeTDES):\n"
        "    def __init__(self) -> None:\n"
        "        raise OSError('no native library')\n"
    )
    fw.install(with_code(tmp_path, code)).start()
    with unchanged(fw), pytest.raises(ModuleCodeError, match="NativeTDES.*no native library"):
        fw.get_service("EncryptionService", consumer="mail")


def test_an_update_with_broken_code_keeps_the_old_code_serving(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    module = fw.install(tdes_copy(tmp_path))
    module.start()
    proxy = fw.get_service("EncryptionService")
    proxy.load_key(KEY)
    broken = with_code(tmp_path / "v2", "x = [][1]\n")
    with unchanged(fw), pytest.raises(ModuleCodeError, match="IndexError"):
        module.update(broken)
    assert encrypt(proxy, PLAIN) == tdes_reference(KEY, PLAIN)


def test_a_driver_whose_constructor_does_not_take_the_window_is_refused_at_install(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    code = (MODULES / "tdes" / "tdes_module.py").read_text() + (
        "\n\nclass TdesDriver(TdesDriver):\n"
        "    def __init__(self, mmio, clock) -> None:\n"
        "        super().__init__(mmio)\n"
    )
    with unchanged(fw), pytest.raises(UnknownClassError, match="TdesDriver.*MMIO window"):
        fw.install(with_code(tmp_path, code))


# -- arguments -------------------------------------------------------------------------------


def test_a_path_with_a_nul_is_refused(fw: juggle.Framework) -> None:
    with unchanged(fw), pytest.raises(ModuleError, match="NUL"):
        fw.install("examples/modules/tdes\x00/x")


def test_unget_of_something_that_is_not_a_proxy(fw: juggle.Framework) -> None:
    with unchanged(fw), pytest.raises(UnknownServiceError, match="'x'"):
        fw.unget_service("x")  # type: ignore[arg-type]


def test_realtime_must_be_a_bool(fw: juggle.Framework) -> None:
    with unchanged(fw), pytest.raises(PriorityError, match="'no'"):
        fw.add_tenant("alice", realtime="no")  # type: ignore[arg-type]
    assert fw.tenants() == ()


def test_the_same_module_twice_is_refused(fw: juggle.Framework, tmp_path: Path) -> None:
    with unchanged(fw), pytest.raises(DuplicateModuleError, match="'math'.*installed already"):
        fw.install(MODULES / "math")
    fw.install(tdes_copy(tmp_path / "a"))
    with pytest.raises(DuplicateModuleError, match="'tdes' 1.0.0"):
        fw.install(tdes_copy(tmp_path / "b"))  # another folder, same name and version


@pytest.mark.parametrize("cipher", ["tdes", "aes"])
def test_a_strided_buffer_works_on_every_tier(fw: juggle.Framework, cipher: str) -> None:
    from Crypto.Cipher import AES

    fw.install(MODULES / cipher).start()
    proxy = fw.get_service("EncryptionService", filter=f"(algorithm={cipher})")
    key = KEY if cipher == "tdes" else KEY[:16]
    expected = (
        tdes_reference(key, PLAIN)
        if cipher == "tdes"
        else AES.new(key, AES.MODE_ECB).encrypt(PLAIN)
    )
    proxy.load_key(key)
    sid = proxy.service_id
    for tier in ("software", "native", "hardware"):
        fw.set_tier(sid, tier)
        buf = bytearray(2 * len(PLAIN))
        view = memoryview(buf)[::2]
        view[:] = PLAIN
        assert proxy.encrypt(view, len(PLAIN)) == len(PLAIN)
        assert bytes(view) == expected, tier
    assert fw.statistics(sid).fallbacks == 0
    assert all(r.state != "ERROR" for r in fw.regions())


# -- archives and sizes ----------------------------------------------------------------------


def zipped(folder: Path, target: Path, extra: dict[str, bytes] | None = None) -> Path:
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return target


def test_two_descriptors_of_one_name_in_an_archive_are_refused(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    archive = zipped(tdes_copy(tmp_path), tmp_path / "m.zip")
    with zipfile.ZipFile(archive, "a") as z, pytest.warns(UserWarning, match="Duplicate"):
        z.writestr("juggle.toml", '[module]\nname = "evil"\nversion = "6.6.6"\n')
    with unchanged(fw), pytest.raises(ModuleError, match="two members named 'juggle.toml'"):
        fw.install(archive)


def _rss() -> int:
    with open(f"/proc/{os.getpid()}/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_zip_bomb_is_refused_by_its_declared_sizes(fw: juggle.Framework, tmp_path: Path) -> None:
    folder = tdes_copy(tmp_path)
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.suffix != ".bit":
                archive.write(path, path.relative_to(folder).as_posix())
        with archive.open("bitstreams/tdes_prr0.bit", "w", force_zip64=True) as member:
            chunk = bytes(1 << 20)
            for _ in range(600):  # 600 MB of zeros, about 0.6 MB compressed
                member.write(chunk)
    assert bomb.stat().st_size < 2 << 20
    before, t0 = _rss(), time.perf_counter()
    with unchanged(fw), pytest.raises(InputLimitError, match="tdes_prr0.bit.*over the limit"):
        fw.install(bomb)
    assert time.perf_counter() - t0 < 1.0
    assert _rss() - before < 50 << 20


def test_a_zip_with_too_many_members_says_so(tmp_path: Path) -> None:
    folder = tdes_copy(tmp_path)
    archive = zipped(folder, tmp_path / "many.zip", {f"junk/{i}": b"" for i in range(20)})
    with (
        juggle.Framework("xupv2p", limits=Limits(max_members=10)) as fw,
        unchanged(fw),
        pytest.raises(InputLimitError, match=r"2\d members, over the limit of 10"),
    ):
        fw.install(archive)


def test_an_oversized_descriptor_and_bitstream_are_refused_before_reading(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    folder = tdes_copy(tmp_path)
    toml = folder / "juggle.toml"
    original = toml.read_bytes()
    with toml.open("r+b") as file:
        file.truncate(300 << 20)  # sparse: 300 MB declared, nothing to read quickly
    with unchanged(fw), pytest.raises(InputLimitError, match="juggle.toml.*max_descriptor_bytes"):
        fw.install(folder)
    toml.write_bytes(original)
    with (folder / "bitstreams" / "tdes_prr0.bit").open("r+b") as file:
        file.truncate(1 << 30)
    t0 = time.perf_counter()
    with unchanged(fw), pytest.raises(InputLimitError, match="tdes_prr0.bit.*max_bitstream"):
        fw.install(folder)
    assert time.perf_counter() - t0 < 1.0


# -- integrity -------------------------------------------------------------------------------


def test_a_tampered_pinned_bitstream_is_refused_at_install(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    folder = tdes_copy(tmp_path)
    lock_module(folder)
    bit = folder / "bitstreams" / "tdes_prr0.bit"
    data = bytearray(bit.read_bytes())
    data[-1] ^= 0xFF
    bit.write_bytes(bytes(data))
    with unchanged(fw), pytest.raises(IntegrityError, match="tdes_prr0.bit"):
        fw.install(folder)


def test_a_bitstream_changed_after_install_is_refused_at_the_next_juggle(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    folder = tdes_copy(tmp_path)
    lock_module(folder)
    fw.install(folder).start()
    proxy = fw.get_service("EncryptionService")
    proxy.load_key(KEY)
    sid = proxy.service_id
    fw.juggle(to_hardware=sid)  # the pinned file is fine
    fw.juggle(to_software=[sid])
    bit = folder / "bitstreams" / "tdes_prr0.bit"
    data = bytearray(bit.read_bytes())
    data[1000] ^= 0x01
    bit.write_bytes(bytes(data))
    with unchanged(fw), pytest.raises(IntegrityError, match="changed since install"):
        fw.juggle(to_hardware=sid)
    assert encrypt(proxy, PLAIN) == tdes_reference(KEY, PLAIN)  # still from software


def test_a_symlinked_bitstream_leaving_the_module_is_refused(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    folder = tdes_copy(tmp_path)
    outside = tmp_path / "elsewhere.bit"
    bit = folder / "bitstreams" / "tdes_prr0.bit"
    shutil.move(bit, outside)
    bit.symlink_to(outside)
    with unchanged(fw), pytest.raises(IntegrityError, match="tdes_prr0.bit"):
        fw.install(folder)


def test_trusted_keys_refuse_unsigned_modules_and_accept_signed_ones(tmp_path: Path) -> None:
    public = generate_key(tmp_path / "author.pem")
    unsigned = tdes_copy(tmp_path / "u")
    signed = tdes_copy(tmp_path / "s")
    lock_module(signed)
    sign_module(signed, tmp_path / "author.pem")
    with juggle.Framework("xupv2p", trusted_keys=[public]) as fw:
        with unchanged(fw), pytest.raises(SignatureError, match="unsigned"):
            fw.install(unsigned)
        fw.install(signed).start()
        assert [s.module for s in fw.services()] == ["tdes"]
        with unchanged(fw), pytest.raises(SignatureError, match="only juggle.toml"):
            fw.install(MODULES / "math")


# -- isolation between modules ---------------------------------------------------------------

EVIL_MODEL = '''
from juggle.services.crypto.model import TdesCore


class EvilCore(TdesCore):
    """Claims to play the tdes design."""
'''


def test_a_module_cannot_replace_another_modules_core_model(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    models = fw.fabric.models
    builtin = models.resolve("tdes")
    code = (MODULES / "tdes" / "tdes_module.py").read_text() + EVIL_MODEL
    folder = with_code(tmp_path, code)
    toml = folder / "juggle.toml"
    toml.write_text(
        toml.read_text().replace('model = "tdes_module.TdesCore"', 'model = "tdes_module.EvilCore"')
    )
    with unchanged(fw), pytest.raises(juggle.errors.ModelRegistrationError, match="'tdes'"):
        fw.install(folder)
    assert models.resolve("tdes") is builtin


def test_a_modules_own_design_model_is_gone_after_a_failed_install_and_after_uninstall(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    from juggle.fabric.bitstream import write_bitstream

    folder = tdes_copy(tmp_path)
    code = (MODULES / "tdes" / "tdes_module.py").read_text() + EVIL_MODEL
    (folder / "tdes_module.py").write_text(code)
    bit = folder / "bitstreams" / "tdes_prr0.bit"
    write_bitstream(bit, "tdes2", "xc2vp30ff896", "prr0", bit.stat().st_size)
    toml = folder / "juggle.toml"
    text = toml.read_text().replace(
        'model = "tdes_module.TdesCore"', 'model = "tdes_module.EvilCore"'
    )
    toml.write_text(text.replace("slices = 830", "slices = 999999"))  # fails the resource check
    with unchanged(fw), pytest.raises(juggle.errors.ResourceError):
        fw.install(folder)
    assert "tdes2" not in fw.fabric.models
    toml.write_text(text)
    module = fw.install(folder)
    assert "tdes2" in fw.fabric.models
    module.uninstall()
    assert "tdes2" not in fw.fabric.models


def test_a_module_method_failing_at_call_time_is_a_module_code_error(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    code = (MODULES / "tdes" / "tdes_module.py").read_text() + (
        "\n\nclass NativeTDES(NativeTDES):\n"
        "    def encrypt(self, buf, size):\n"
        "        return size // 0\n"
    )
    fw.install(with_code(tmp_path, code)).start()
    proxy = fw.get_service("EncryptionService")
    proxy.load_key(KEY)
    with pytest.raises(ModuleCodeError, match=r"'tdes'.*encrypt\(\) raised ZeroDivisionError"):
        proxy.encrypt(bytearray(8), 8)
    with pytest.raises(juggle.errors.BlockSizeError):  # the runtime's own errors pass as they are
        proxy.decrypt(bytearray(7), 7)


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"verify_sample": -1}, "verify_sample"),
        ({"trace_sample": 3}, "trace_sample"),
        ({"queue_capacity": 0}, "queue_capacity"),
        ({"call_timeout_s": 0}, "call_timeout_s"),
        ({"drain_timeout_s": "x"}, "drain_timeout_s"),
        ({"fabric": 5}, "fabric"),
    ],
)
def test_framework_options_are_configuration_errors(kwargs: dict[str, object], names: str) -> None:
    with pytest.raises(juggle.errors.ConfigurationError, match=names):
        juggle.Framework(**kwargs)  # type: ignore[arg-type]


def test_juggle_and_control_loop_arguments_are_juggle_errors(fw: juggle.Framework) -> None:
    with unchanged(fw), pytest.raises(UnknownServiceError, match="to_software"):
        fw.juggle(to_software=5)  # type: ignore[arg-type]
    with pytest.raises(juggle.errors.ConfigurationError, match="interval_s"):
        fw.start_control_loop(-1)


# -- hostile descriptors through install (the parsers' own cases: test_untrusted_parsers) -----


def _toml_case(tmp_path: Path, edit: str) -> Path:
    folder = tdes_copy(tmp_path)
    toml = folder / "juggle.toml"
    text = toml.read_text()
    if edit == "latin-1":
        toml.write_bytes(text.replace("Triple-DES", "Tr\xefple-DES").encode("latin-1"))
    elif edit == "deep":
        toml.write_text(text + "\nx = " + "[" * 1000 + "]" * 1000 + "\n")
    elif edit == "digits":
        toml.write_text(text.replace('version = "1.0.0"', f'version = "1.{"9" * 4300}"', 1))
    elif edit == "case":
        toml.write_text(text.replace('algorithm = "tdes"', 'algorithm = "tdes", ALGORITHM = "x"'))
    return folder


@pytest.mark.parametrize(
    ("edit", "error", "names"),
    [
        ("latin-1", juggle.errors.DescriptorError, "juggle.toml"),
        ("deep", InputLimitError, "juggle.toml"),
        ("digits", InputLimitError, "version"),
        ("case", juggle.errors.DescriptorError, "ALGORITHM"),
    ],
)
def test_hostile_descriptors_are_refused_at_install(
    fw: juggle.Framework, tmp_path: Path, edit: str, error: type[Exception], names: str
) -> None:
    folder = _toml_case(tmp_path, edit)
    with unchanged(fw), pytest.raises(error, match=names):
        fw.install(folder)


def test_xml_declaring_another_encoding_is_refused_at_install(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    folder = tmp_path / "math2"
    shutil.copytree(MODULES / "math", folder)
    xml = folder / "comodule.xml"
    xml.write_text(
        xml.read_text().replace('<?xml version="1.0"?>', '<?xml version="1.0" encoding="UTF-16"?>')
    )
    with unchanged(fw), pytest.raises(juggle.errors.DescriptorError, match="UTF-16"):
        fw.install(folder)


def test_a_filter_with_a_huge_number_is_a_filter_error(fw: juggle.Framework) -> None:
    with unchanged(fw), pytest.raises(juggle.errors.FilterSyntaxError, match="digits"):
        fw.get_service("AddService", filter=f"(version>={'9' * 4300})")


def test_a_profile_that_is_not_utf8_is_a_profile_error(tmp_path: Path) -> None:
    profile = tmp_path / "board.toml"
    profile.write_bytes(b'[board]\nname = "b\xe9"\n')
    with pytest.raises(juggle.errors.ProfileError, match="board.toml"):
        juggle.Framework(profile)


def test_juggling_a_proxy_instead_of_its_id_says_how(fw: juggle.Framework) -> None:
    add = fw.get_service("AddService")
    with pytest.raises(UnknownServiceError, match=f"use its service_id, {add.service_id}"):
        fw.juggle(to_hardware=add)
