"""The cluster PKI (juggle.cluster.pki) and ``juggle cluster ca|issue``: ECDSA P-256
certificates signed by the cluster CA, tenant and node subjects, key files 0600 in 0700
folders, nothing ever overwritten, bad input refused with CertificateError naming it."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from typer.testing import CliRunner

from juggle.cluster.pki import CertPaths, create_ca, issue
from juggle.commands.cli import app
from juggle.daemon.tls import CertificateError


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_create_ca(tmp_path: Path) -> None:
    paths = create_ca(tmp_path / "ca", name="test CA")
    assert paths == CertPaths(
        tmp_path / "ca/ca.crt", tmp_path / "ca/ca.key", tmp_path / "ca/ca.crt"
    )
    assert mode(tmp_path / "ca") == 0o700 and mode(paths.key) == 0o600
    cert = load(paths.cert)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "test CA"
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    public = cert.public_key()
    assert isinstance(public, ec.EllipticCurvePublicKey) and public.curve.name == "secp256r1"
    cert.verify_directly_issued_by(cert)  # self-signed


def test_a_ca_is_never_overwritten(tmp_path: Path) -> None:
    paths = create_ca(tmp_path / "ca")
    key = paths.key.read_bytes()
    with pytest.raises(CertificateError, match="holds a CA already") as caught:
        create_ca(tmp_path / "ca")
    assert caught.value.path == str(paths.cert)
    assert paths.key.read_bytes() == key


def test_tenant_certificate(tmp_path: Path) -> None:
    ca = create_ca(tmp_path / "ca")
    paths = issue(tmp_path / "ca", "alice", "tenant", tmp_path / "alice")
    assert mode(tmp_path / "alice") == 0o700 and mode(paths.key) == 0o600
    assert paths.ca.read_bytes() == ca.cert.read_bytes()
    cert = load(paths.cert)
    cert.verify_directly_issued_by(load(ca.cert))
    subject = cert.subject
    assert subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    assert subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)[0].value == "tenant"
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_node_certificate_names_its_hosts(tmp_path: Path) -> None:
    create_ca(tmp_path / "ca")
    paths = issue(
        tmp_path / "ca", "board1", "node", tmp_path / "n", hosts=("10.1.2.3", "board1.lab")
    )
    cert = load(paths.cert)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost", "board1.lab"]
    assert [str(a) for a in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1", "10.1.2.3"]
    ou = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)[0].value
    assert ou == "node"
    usages = list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    assert ExtendedKeyUsageOID.SERVER_AUTH in usages


@pytest.mark.parametrize(
    ("kwargs", "value"),
    [
        ({"kind": "root"}, "root"),
        ({"name": "al ice"}, "al ice"),
        ({"name": ""}, ""),
        ({"kind": "node", "hosts": ("bad host!",)}, "bad host!"),
        ({"days": 0}, "0"),
    ],
)
def test_bad_requests_write_nothing(tmp_path: Path, kwargs: dict[str, object], value: str) -> None:
    create_ca(tmp_path / "ca")
    args: dict[str, object] = {"name": "alice", "kind": "tenant", **kwargs}
    with pytest.raises(CertificateError) as caught:
        issue(tmp_path / "ca", out_dir=tmp_path / "out", **args)  # type: ignore[arg-type]
    assert caught.value.value == value
    assert not (tmp_path / "out").exists()


def test_issued_files_are_never_overwritten(tmp_path: Path) -> None:
    create_ca(tmp_path / "ca")
    paths = issue(tmp_path / "ca", "alice", "tenant", tmp_path / "alice")
    key = paths.key.read_bytes()
    with pytest.raises(CertificateError, match="exists already"):
        issue(tmp_path / "ca", "alice", "tenant", tmp_path / "alice")
    assert paths.key.read_bytes() == key


def test_a_missing_ca_is_named(tmp_path: Path) -> None:
    with pytest.raises(CertificateError, match="no CA") as caught:
        issue(tmp_path / "nowhere", "alice", "tenant", tmp_path / "alice")
    assert caught.value.path == str(tmp_path / "nowhere")


def test_cli_ca_and_issue_json(tmp_path: Path) -> None:
    runner = CliRunner()
    done = runner.invoke(app, ["cluster", "ca", str(tmp_path / "ca"), "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["key"] == str(tmp_path / "ca/ca.key")
    args = ["cluster", "issue", "--ca", str(tmp_path / "ca"), "n1", "--kind", "node"]
    args += ["--host", "10.0.0.7", "--out", str(tmp_path / "n1"), "--json"]
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert (doc["name"], doc["kind"]) == ("n1", "node")
    assert mode(Path(doc["key"])) == 0o600
    san = load(Path(doc["cert"])).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert "10.0.0.7" in [str(a) for a in san.value.get_values_for_type(x509.IPAddress)]
    args = ["cluster", "issue", "--ca", str(tmp_path / "ca"), "bob", "--kind", "admin"]
    done = runner.invoke(app, [*args, "--out", str(tmp_path / "bob"), "--json"])
    assert done.exit_code == 2
    assert json.loads(done.stdout)["type"] == "CertificateError"
    args = ["cluster", "issue", "--ca", str(tmp_path / "ca"), "bob", "--kind", "tenant"]
    done = runner.invoke(app, [*args, "--host", "h", "--out", str(tmp_path / "bob")])
    assert done.exit_code == 2 and "--host is for node" in done.output
