"""Module integrity: pins, lock, ed25519 signatures and symlink confinement (issue 9, item 4)."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import stat
import tomllib
import zipfile
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from juggle.errors import (
    ConfigurationError,
    InputLimitError,
    IntegrityError,
    ModuleError,
    SignatureError,
)
from juggle.limits import Limits
from juggle.runtime import integrity
from juggle.runtime.integrity import (
    SIGNATURE_FILE,
    fingerprint,
    folder_reader,
    generate_key,
    inside,
    load_public_keys,
    lock_module,
    module_files,
    read_verified,
    sha256_of,
    sign_module,
    unpinned,
    verify_file,
    verify_pins,
    verify_signature,
)

TDES = Path(__file__).resolve().parents[2] / "examples" / "modules" / "tdes"
BIT = "bitstreams/tdes_prr0.bit"


@pytest.fixture
def module(tmp_path: Path) -> Path:
    """A private copy of the tdes example module."""
    folder = tmp_path / "tdes"
    shutil.copytree(TDES, folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return folder


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    """A generated key pair: (private PEM, public PEM)."""
    private = tmp_path / "keys" / "author.pem"
    private.parent.mkdir()
    return private, generate_key(private)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _signed(module: Path, private: Path) -> tuple[bytes, bytes]:
    lock_module(module)
    sign_module(module, private)
    return (module / "juggle.toml").read_bytes(), (module / SIGNATURE_FILE).read_bytes()


def _tamper(path: Path, offset: int = 100) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


# -- digests -----------------------------------------------------------------------------------


def test_sha256_of_path_bytes_and_callable_agree(
    module: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = (module / BIT).read_bytes()
    monkeypatch.setattr(integrity, "_CHUNK", 4096)  # many chunks: the path is streamed
    assert sha256_of(module / BIT) == _sha(data)
    assert sha256_of(data) == _sha(data)
    assert sha256_of(lambda: data) == _sha(data)


def test_sha256_of_refuses_missing_oversized_and_non_regular(tmp_path: Path) -> None:
    with pytest.raises(IntegrityError, match="nope"):
        sha256_of(tmp_path / "nope")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 100)
    with pytest.raises(InputLimitError, match="100 bytes"):
        sha256_of(big, max_bytes=99)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(IntegrityError, match="not a regular file"):
        sha256_of(fifo)


def test_sha256_of_wraps_reader_errors() -> None:
    def broken() -> bytes:
        raise OSError("disk gone")

    with pytest.raises(IntegrityError, match="disk gone") as info:
        sha256_of(broken)
    assert isinstance(info.value.__cause__, OSError)


# -- paths -------------------------------------------------------------------------------------


def test_inside_resolves_module_paths(module: Path) -> None:
    assert inside(module, BIT) == (module / BIT).resolve()
    assert inside(module, "./bitstreams//tdes_prr0.bit") == (module / BIT).resolve()


@pytest.mark.parametrize(
    "relpath",
    ["../tdes/juggle.toml", "bitstreams/../../x", "/etc/passwd", "", ".", "a\\b", "a\x00b"],
)
def test_inside_refuses_escapes_and_bad_paths(module: Path, relpath: str) -> None:
    with pytest.raises(IntegrityError) as info:
        inside(module, relpath)
    assert repr(relpath) in str(info.value)


def test_symlink_to_a_file_outside_is_refused(module: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.bit"
    secret.write_bytes(b"outside")
    (module / "bitstreams" / "evil.bit").symlink_to(secret)
    with pytest.raises(IntegrityError) as info:
        inside(module, "bitstreams/evil.bit")
    assert "bitstreams/evil.bit" in str(info.value)
    assert str(secret) in str(info.value)  # where it points
    with pytest.raises(IntegrityError, match=r"evil\.bit.*outside the module"):
        module_files(module)
    with pytest.raises(IntegrityError, match="evil"):
        lock_module(module)


def test_symlinked_parent_folder_outside_is_refused(module: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.bit").write_bytes(b"x")
    (module / "more").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(IntegrityError) as info:
        inside(module, "more/x.bit")
    assert "'more'" in str(info.value) and str(elsewhere) in str(info.value)
    with pytest.raises(IntegrityError, match="more"):
        module_files(module)


def test_symlinks_inside_the_module_are_followed(module: Path) -> None:
    (module / "alias.bit").symlink_to(Path("bitstreams") / "tdes_prr0.bit")
    (module / "bits").symlink_to("bitstreams", target_is_directory=True)
    (module / ".#lock").symlink_to("user@host.123")  # dangling, inside: an editor lock
    assert inside(module, "alias.bit") == (module / BIT).resolve()
    assert module_files(module) == [
        "alias.bit",
        "bits/tdes_prr0.bit",
        BIT,
        "juggle.toml",
        "resources.json",
        "tdes_module.py",
    ]


def test_symlink_loop_is_refused(module: Path) -> None:
    (module / "bitstreams" / "loop").symlink_to("..", target_is_directory=True)
    with pytest.raises(IntegrityError, match="loop"):
        module_files(module)


def test_module_files_skips_bytecode_and_the_signature(module: Path) -> None:
    (module / "__pycache__").mkdir()
    (module / "__pycache__" / "tdes_module.cpython-311.pyc").write_bytes(b"pyc")
    (module / "stale.pyc").write_bytes(b"pyc")
    (module / SIGNATURE_FILE).write_text("sig\n")
    (module / "bitstreams" / SIGNATURE_FILE).write_text("not the signature\n")
    assert module_files(module) == [
        f"bitstreams/{SIGNATURE_FILE}",
        BIT,
        "juggle.toml",
        "resources.json",
        "tdes_module.py",
    ]


def test_module_files_is_bounded(module: Path) -> None:
    with pytest.raises(InputLimitError, match="max_members"):
        module_files(module, limits=Limits(max_members=3))
    deep = module
    for _ in range(4):
        deep = deep / "d"
    deep.mkdir(parents=True)
    with pytest.raises(InputLimitError, match="max_depth"):
        module_files(module, limits=Limits(max_depth=3))


def test_module_files_refuses_special_files(module: Path) -> None:
    os.mkfifo(module / "pipe")
    with pytest.raises(IntegrityError, match="'pipe'.*not a regular file"):
        module_files(module)


# -- lock and pins -----------------------------------------------------------------------------


def test_lock_writes_pins_that_verify(module: Path) -> None:
    pins = lock_module(module)
    assert pins == {
        BIT: _sha((module / BIT).read_bytes()),
        "resources.json": _sha((module / "resources.json").read_bytes()),
        "tdes_module.py": _sha((module / "tdes_module.py").read_bytes()),
    }
    written = tomllib.loads((module / "juggle.toml").read_text())["pins"]
    assert written == pins
    verify_pins(written, folder_reader(module))
    for rel, digest in pins.items():
        verify_file(inside(module, rel), digest)
        assert read_verified(inside(module, rel), digest) == (module / rel).read_bytes()
    assert unpinned(pins, module_files(module)) == []


def test_lock_keeps_other_content(module: Path) -> None:
    original = (module / "juggle.toml").read_text()
    lock_module(module)
    locked = (module / "juggle.toml").read_text()
    assert locked.startswith(original)  # every other byte kept; pins appended at the end
    assert locked[len(original) :].lstrip("\n").startswith("[pins]\n")
    before = tomllib.loads(original)
    after = tomllib.loads(locked)
    del after["pins"]
    assert after == before
    lock_module(module)  # locking again changes nothing
    assert (module / "juggle.toml").read_text() == locked


def test_lock_replaces_an_existing_pins_table_anywhere(module: Path) -> None:
    text = (module / "juggle.toml").read_text()
    head, sep, tail = text.partition("[[services]]")
    tricky = (
        'notes = """\n[pins]\n"fake" = "1"\n"""\n'
        + head
        + '[pins] # old\n"gone.py" = "00"\n\n# the services\n'
        + sep
        + tail
    )
    (module / "juggle.toml").write_text(tricky)
    pins = lock_module(module)
    locked = (module / "juggle.toml").read_text()
    assert "gone.py" not in locked and "# old" not in locked
    assert "# the services\n[[services]]" in locked  # a comment leading into a table stays
    data = tomllib.loads(locked)
    assert data["pins"] == pins
    assert data["notes"] == '[pins]\n"fake" = "1"\n'  # a [pins] line inside a string stays
    del data["pins"]
    assert data == {k: v for k, v in tomllib.loads(tricky).items() if k != "pins"}


def test_lock_refuses_pins_that_are_not_a_table(module: Path) -> None:
    path = module / "juggle.toml"
    original = 'pins = { "x" = "y" }\n' + path.read_text()
    path.write_text(original)
    with pytest.raises(ModuleError, match=r"\[pins\] table"):
        lock_module(module)
    assert path.read_text() == original  # nothing written


def test_lock_refuses_a_comodule_xml_module(tmp_path: Path) -> None:
    folder = tmp_path / "xmlmod"
    folder.mkdir()
    (folder / "comodule.xml").write_text("<comodule/>")
    with pytest.raises(ModuleError, match=r"juggle\.toml modules.*comodule\.xml") as info:
        lock_module(folder)
    assert not isinstance(info.value, IntegrityError)
    with pytest.raises(ModuleError, match="comodule.xml"):
        sign_module(folder, tmp_path / "k.pem")


def test_tampered_bitstream_names_the_file_and_both_digests(module: Path) -> None:
    pins = lock_module(module)
    _tamper(module / BIT)
    actual = _sha((module / BIT).read_bytes())
    for check in (
        lambda: verify_pins(pins, folder_reader(module)),
        lambda: verify_file(inside(module, BIT), pins[BIT]),
        lambda: read_verified(inside(module, BIT), pins[BIT]),
    ):
        with pytest.raises(IntegrityError) as info:
            check()
        assert str(info.value.path).endswith(BIT)
        message = str(info.value)
        assert "tdes_prr0.bit" in message
        assert pins[BIT] in message and actual in message


def test_verify_pins_reads_a_zip_module(module: Path, tmp_path: Path) -> None:
    pins = lock_module(module)
    archive = tmp_path / "tdes.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for rel in module_files(module):
            out.write(module / rel, f"tdes/{rel}")
        out.writestr("tdes/evil.pyc", b"bytecode")
    with zipfile.ZipFile(archive) as zf:
        verify_pins(pins, lambda rel: zf.read(f"tdes/{rel}"))
        names = [n.removeprefix("tdes/") for n in zf.namelist()]
    assert unpinned(pins, [*names, "bitstreams/"]) == ["evil.pyc"]
    _tamper(module / "tdes_module.py", 10)
    with zipfile.ZipFile(tmp_path / "bad.zip", "w") as out:
        for rel in module_files(module):
            out.write(module / rel, f"tdes/{rel}")
    with (
        zipfile.ZipFile(tmp_path / "bad.zip") as zf,
        pytest.raises(IntegrityError, match="'tdes_module.py'"),
    ):
        verify_pins(pins, lambda rel: zf.read(f"tdes/{rel}"))
    with zipfile.ZipFile(archive) as zf, pytest.raises(IntegrityError, match="'gone.py'"):
        verify_pins({"gone.py": pins[BIT]}, lambda rel: zf.read(f"tdes/{rel}"))


def test_missing_and_malformed_pins(module: Path) -> None:
    good = _sha(b"")
    with pytest.raises(IntegrityError, match="'gone.bit'.*cannot be read") as info:
        verify_pins({"gone.bit": good}, folder_reader(module))
    assert info.value.__cause__ is not None
    with pytest.raises(IntegrityError, match="not a lowercase hex sha256"):
        verify_pins({BIT: good.upper()}, folder_reader(module))
    with pytest.raises(IntegrityError, match=r"'\.\./x'"):
        verify_pins({"../x": good}, folder_reader(module))


# -- keys and signatures -----------------------------------------------------------------------


def test_generate_key_writes_a_private_and_a_public_pem(keys: tuple[Path, Path]) -> None:
    private, public = keys
    assert public == private.with_name("author.pem.pub")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert private.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert public.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    with pytest.raises(ConfigurationError, match="exists already"):
        generate_key(private)


def test_sign_then_verify_with_the_public_key(module: Path, keys: tuple[Path, Path]) -> None:
    private, public = keys
    descriptor, signature = _signed(module, private)
    assert signature.count(b"\n") == 1
    assert len(base64.b64decode(signature)) == 64
    trusted = load_public_keys([public])
    assert verify_signature(descriptor, signature, trusted, "tdes") == fingerprint(trusted[0])
    assert len(fingerprint(trusted[0])) == 16


def test_unsigned_module_is_refused(module: Path, keys: tuple[Path, Path]) -> None:
    lock_module(module)
    trusted = load_public_keys([keys[1]])
    with pytest.raises(SignatureError, match="module tdes is unsigned"):
        verify_signature((module / "juggle.toml").read_bytes(), None, trusted, "tdes")


def test_signed_by_another_key_is_refused(
    module: Path, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    other = tmp_path / "keys" / "other.pem"
    generate_key(other)
    descriptor, signature = _signed(module, other)
    trusted = load_public_keys([keys[1]])
    with pytest.raises(SignatureError, match="signature of tdes matches no trusted key"):
        verify_signature(descriptor, signature, trusted, "tdes")
    assert verify_signature(
        descriptor, signature, [*trusted, *load_public_keys([f"{other}.pub"])], "t"
    )


def test_descriptor_modified_after_signing_is_refused(
    module: Path, keys: tuple[Path, Path]
) -> None:
    private, public = keys
    descriptor, signature = _signed(module, private)
    trusted = load_public_keys([public])
    changed = descriptor.replace(b"ranking = 10", b"ranking = 99")
    assert changed != descriptor
    with pytest.raises(SignatureError, match="matches no trusted key"):
        verify_signature(changed, signature, trusted, "tdes")
    # a tampered file behind a valid signature is caught by the pins the signature covers
    assert verify_signature(descriptor, signature, trusted, "tdes")
    _tamper(module / "tdes_module.py", 10)
    pins = tomllib.loads(descriptor.decode())["pins"]
    with pytest.raises(IntegrityError, match="tdes_module.py"):
        verify_pins(pins, folder_reader(module))


@pytest.mark.parametrize("signature", [b"not base64!\n", base64.b64encode(b"x" * 63), b"A" * 5000])
def test_malformed_signature_file_is_refused(
    module: Path, keys: tuple[Path, Path], signature: bytes
) -> None:
    trusted = load_public_keys([keys[1]])
    with pytest.raises(SignatureError, match="malformed signature file of tdes"):
        verify_signature(b"descriptor", signature, trusted, "tdes")


def test_sign_refuses_an_unpinned_file(module: Path, keys: tuple[Path, Path]) -> None:
    lock_module(module)
    (module / "bitstreams" / "extra.bit").write_bytes(b"new")
    with pytest.raises(SignatureError, match="'bitstreams/extra.bit' is not pinned"):
        sign_module(module, keys[0])
    assert not (module / SIGNATURE_FILE).exists()


def test_sign_refuses_a_module_without_pins(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    fresh = tmp_path / "fresh"
    shutil.copytree(TDES, fresh, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    with pytest.raises(SignatureError, match="'bitstreams/tdes_prr0.bit' is not pinned"):
        sign_module(fresh, keys[0])
    assert not (fresh / SIGNATURE_FILE).exists()


def test_sign_refuses_stale_pins(module: Path, keys: tuple[Path, Path]) -> None:
    lock_module(module)
    _tamper(module / BIT)
    with pytest.raises(IntegrityError, match="tdes_prr0.bit"):
        sign_module(module, keys[0])
    assert not (module / SIGNATURE_FILE).exists()


def test_load_public_keys_accepts_every_form(keys: tuple[Path, Path]) -> None:
    _, public = keys
    key = load_public_keys([public])[0]
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    ssh = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    loaded = load_public_keys([public, str(public), public.read_bytes(), raw, ssh, key])
    assert {fingerprint(k) for k in loaded} == {fingerprint(key)}
    assert fingerprint(key) == hashlib.sha256(raw).hexdigest()[:16]


def test_load_public_keys_errors_name_the_key(keys: tuple[Path, Path], tmp_path: Path) -> None:
    private, _ = keys
    with pytest.raises(ConfigurationError, match="private key"):
        load_public_keys([private])
    with pytest.raises(ConfigurationError, match="missing.pub"):
        load_public_keys([tmp_path / "missing.pub"])
    with pytest.raises(ConfigurationError, match="#0"):
        load_public_keys([b"garbage"])
    x25519 = (
        X25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    with pytest.raises(ConfigurationError, match="not an ed25519"):
        load_public_keys([x25519])
    with pytest.raises(ConfigurationError, match="sequence"):
        load_public_keys(str(private))


def test_sign_refuses_a_key_that_is_not_ed25519(
    module: Path, tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    lock_module(module)
    with pytest.raises(ConfigurationError, match="private key"):
        sign_module(module, keys[1])  # the public key by mistake
    pem = tmp_path / "x.pem"
    pem.write_bytes(
        X25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(ConfigurationError, match="not an ed25519"):
        sign_module(module, pem)
    assert not (module / SIGNATURE_FILE).exists()
