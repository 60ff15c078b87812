"""A certificate authority made for one run, and the certificates it issues.

TLS variants need a server (and for mutual TLS, client) certificate that a client can verify. Each
run makes its own CA with the ``cryptography`` library; the CA's private key lives only in this
process's memory and is never written, so nothing can be signed with it after the run. Nothing is
reused across runs, and no system trust store is touched.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KeyType = Literal["ec-p256", "rsa-3072"]
#: how long the run's certificates are valid: a run, not a deployment
VALID_DAYS = 2
#: clocks of emulated hosts and this machine may differ slightly
BACKDATE = datetime.timedelta(minutes=5)


def new_key(key_type: KeyType):
    if key_type == "ec-p256":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "rsa-3072":
        return rsa.generate_private_key(public_exponent=65537, key_size=3072)
    raise ValueError(f"unknown key type {key_type!r} (ec-p256 or rsa-3072)")


def _signature_hash(key_type: KeyType):
    return hashes.SHA256() if key_type == "ec-p256" else hashes.SHA384()


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _subject_alt_names(names: Sequence[str]) -> list[x509.GeneralName]:
    """An IP address entry for each name that is one (and a DNS entry for every name that is not)."""
    entries: list[x509.GeneralName] = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return entries


def write_key(path: Path, key) -> Path:
    """The private key as unencrypted PEM, readable by its owner only (0600 before any byte lands)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    path.unlink(missing_ok=True)
    with open(path, "xb", opener=lambda p, flags: os.open(p, flags, 0o600)) as handle:
        handle.write(data)
    return path


def write_certificate(path: Path, *certificates: x509.Certificate) -> Path:
    """One or more certificates, PEM, in the order given (leaf first for a chain)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certificates))
    return path


@dataclass
class Issued:
    certificate: x509.Certificate
    key: object
    key_type: KeyType

    def write(self, certificate_path: Path, key_path: Path) -> tuple[Path, Path]:
        return write_certificate(certificate_path, self.certificate), write_key(key_path, self.key)


class RunCA:
    """``RunCA.create()`` makes the CA; ``issue()`` signs server and client certificates with it."""

    def __init__(self, key, certificate: x509.Certificate, key_type: KeyType):
        self._key = key
        self.certificate = certificate
        self.key_type = key_type

    @classmethod
    def create(cls, common_name: str = "ccbench run CA", key_type: KeyType = "ec-p256") -> RunCA:
        key = new_key(key_type)
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(_name(common_name))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, _signature_hash(key_type))
        )
        return cls(key, certificate, key_type)

    def write_certificate(self, path: Path) -> Path:
        """The CA's certificate: what clients (and for mutual TLS, servers) verify against."""
        return write_certificate(path, self.certificate)

    def issue(
        self,
        common_name: str,
        *,
        names: Sequence[str] = (),
        server: bool = True,
        client: bool = False,
        key_type: KeyType | None = None,
    ) -> Issued:
        """A leaf certificate for ``common_name`` with ``names`` (IP addresses or DNS names) as
        subject alternative names, for TLS server and/or client authentication."""
        key_type = key_type or self.key_type
        key = new_key(key_type)
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
            [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        )
        if not usages:
            raise ValueError("a certificate must be for a server, a client or both")
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_encipherment=key_type == "rsa-3072",
                    content_commitment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False)
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(_subject_alt_names(names)), critical=False)
        return Issued(builder.sign(self._key, _signature_hash(self.key_type)), key, key_type)
