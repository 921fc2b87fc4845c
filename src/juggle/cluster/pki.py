"""The cluster's PKI: one CA, the node certificates of the daemons, the tenants' certificates.

A cluster's daemons listen for remote clients over mutual TLS (``juggle daemon --tls``, see
:mod:`juggle.daemon.tls`). Every certificate is ECDSA P-256, signed by the cluster CA:

- :func:`create_ca` makes the CA (``ca.crt``, ``ca.key``) in a new private folder;
- :func:`issue` signs a ``node`` certificate (a daemon's: subject CN the node name, OU
  ``node``, SANs ``localhost``, ``127.0.0.1`` and the given hosts; server and client use) or a
  ``tenant`` certificate (subject CN the tenant name, OU ``tenant``; client use), written with
  a copy of the CA certificate into an output folder.

Key files are created mode 0600 (never over an existing file, never through a symbolic
link), folders made here mode 0700. ``juggle cluster ca|issue`` is the command line.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from juggle.daemon.tls import CertificateError

__all__ = ["CA_CERT", "CA_KEY", "CertPaths", "create_ca", "issue"]

#: File names of the CA in its folder.
CA_CERT = "ca.crt"
CA_KEY = "ca.key"
#: Names a certificate may carry as its CN (a tenant's must be a policy tenant name).
_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
#: Certificates are valid from this long before they are made (clocks differ a little).
_SKEW = datetime.timedelta(minutes=5)
Kind = Literal["node", "tenant"]


@dataclass(frozen=True, slots=True)
class CertPaths:
    """Where a certificate (``cert``), its private key (``key``) and the CA certificate
    that signed it (``ca``) are: PEM files."""

    cert: Path
    key: Path
    ca: Path


def _private_dir(directory: Path) -> None:
    """Make ``directory`` (mode 0700) unless it exists. Raises :class:`CertificateError`."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise CertificateError(
            f"cannot create folder {str(directory)!r}: {exc.strerror or exc}", path=str(directory)
        ) from None


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to new file ``path`` with ``mode`` (no existing file, no link followed).
    Raises :class:`CertificateError`; nothing is left then."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, mode)
    except FileExistsError:
        raise CertificateError(
            f"{str(path)!r} exists already; not overwritten", path=str(path)
        ) from None
    except OSError as exc:
        raise CertificateError(
            f"cannot write {str(path)!r}: {exc.strerror or exc}", path=str(path)
        ) from None
    try:
        os.fchmod(fd, mode)  # whatever the umask
        os.write(fd, data)
        os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise CertificateError(f"cannot write {str(path)!r}: {exc}", path=str(path)) from None
    os.close(fd)


def _check_name(name: str, what: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise CertificateError(
            f"{what} name {name!r} must match [A-Za-z0-9_.@-]{{1,64}}", value=str(name)
        )


def _check_days(days: int) -> None:
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 36500:
        raise CertificateError(f"days {days!r} outside 1..36500", value=str(days))


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def create_ca(
    directory: str | Path, *, name: str = "juggle cluster CA", days: int = 3650
) -> CertPaths:
    """Make the cluster CA in ``directory`` (created mode 0700 if missing): ``ca.crt`` and
    ``ca.key`` (mode 0600), subject CN ``name``, valid ``days`` days; their paths (``ca`` is
    the certificate too). Raises :class:`CertificateError` when ``directory`` holds a CA
    already (nothing is overwritten), for ``days`` outside 1..36500, or a file it cannot
    write."""
    directory = Path(directory)
    _check_days(days)
    if not isinstance(name, str) or not 1 <= len(name) <= 64 or not name.isprintable():
        raise CertificateError(f"CA name {name!r} must be 1..64 printable characters", value=name)
    cert_path, key_path = directory / CA_CERT, directory / CA_KEY
    for path in (cert_path, key_path):
        if path.exists() or path.is_symlink():
            raise CertificateError(
                f"{str(directory)!r} holds a CA already ({path.name}); not overwritten",
                path=str(path),
            )
    _private_dir(directory)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _SKEW)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_new(key_path, _key_pem(key), 0o600)
    try:
        _write_new(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    except CertificateError:
        key_path.unlink(missing_ok=True)
        raise
    return CertPaths(cert_path, key_path, cert_path)


def _load_ca(ca_dir: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey, bytes]:
    cert_path, key_path = ca_dir / CA_CERT, ca_dir / CA_KEY
    try:
        cert_pem = cert_path.read_bytes()
        key_pem = key_path.read_bytes()
    except OSError as exc:
        raise CertificateError(
            f"no CA in {str(ca_dir)!r}: {exc.strerror or exc} ({exc.filename})", path=str(ca_dir)
        ) from None
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise CertificateError(
            f"the CA in {str(ca_dir)!r} is unreadable: {exc}", path=str(ca_dir)
        ) from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertificateError(f"the CA key in {str(ca_dir)!r} is not ECDSA", path=str(key_path))
    return cert, key, cert_pem


def _san(hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    seen: set[str] = set()
    for host in ("localhost", "127.0.0.1", *hosts):
        if not isinstance(host, str) or not host:
            raise CertificateError(f"host {host!r} is no host name or address", value=None)
        if host in seen:
            continue
        seen.add(host)
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            if not re.match(r"^[A-Za-z0-9*]([A-Za-z0-9.-]{0,252})$", host):
                raise CertificateError(
                    f"host {host!r} is no host name or address", value=host
                ) from None
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def issue(
    ca_dir: str | Path,
    name: str,
    kind: Kind,
    out_dir: str | Path,
    *,
    days: int = 365,
    hosts: Iterable[str] = (),
    not_before: datetime.datetime | None = None,
) -> CertPaths:
    """Sign a ``kind`` certificate for ``name`` with the CA in ``ca_dir``; write
    ``NAME.crt``, ``NAME.key`` (mode 0600) and ``ca.crt`` (a copy of the CA's, unless there)
    into ``out_dir`` (created mode 0700 if missing); their paths.

    ``node``: subject CN ``name``, OU ``node``, SANs ``localhost``, ``127.0.0.1`` and
    ``hosts`` (names or addresses), for TLS servers and clients. ``tenant``: subject CN
    ``name`` (the policy's ``cert_cn``), OU ``tenant``, for TLS clients. Valid ``days`` days
    from ``not_before`` (default: now). Raises :class:`CertificateError` for another kind, a
    bad name, host or ``days``, a missing or unreadable CA, or files that exist already."""
    ca_dir, out_dir = Path(ca_dir), Path(out_dir)
    if kind not in ("node", "tenant"):
        raise CertificateError(f"certificate kind {kind!r} is not node or tenant", value=kind)
    _check_name(name, kind)
    _check_days(days)
    san = _san(hosts) if kind == "node" else None
    ca_cert, ca_key, ca_pem = _load_ca(ca_dir)
    cert_path, key_path = out_dir / f"{name}.crt", out_dir / f"{name}.key"
    for path in (cert_path, key_path):
        if path.exists() or path.is_symlink():
            raise CertificateError(f"{str(path)!r} exists already; not overwritten", path=str(path))
    start = (not_before or datetime.datetime.now(datetime.UTC)) - _SKEW
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key()
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if kind == "node":
        usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, kind),
                    x509.NameAttribute(NameOID.COMMON_NAME, name),
                ]
            )
        )
        .issuer_name(ca_cert.subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + _SKEW + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if san is not None:
        builder = builder.add_extension(san, critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _private_dir(out_dir)
    _write_new(key_path, _key_pem(key), 0o600)
    try:
        _write_new(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    except CertificateError:
        key_path.unlink(missing_ok=True)
        raise
    ca_copy = out_dir / CA_CERT
    if ca_copy.resolve() != (ca_dir / CA_CERT).resolve():
        if not ca_copy.exists():
            _write_new(ca_copy, ca_pem, 0o644)
        elif ca_copy.read_bytes() != ca_pem:
            raise CertificateError(
                f"{str(ca_copy)!r} is another CA's certificate; {name}.crt and {name}.key "
                "were written, but check the folder",
                path=str(ca_copy),
            )
    return CertPaths(cert_path, key_path, ca_copy)
