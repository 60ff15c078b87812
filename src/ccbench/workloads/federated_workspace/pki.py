"""Make the per-run PKI of a TLS federation: a CA, the aggregator's and each collaborator's certificate.

Uses the ``cryptography`` library (installed with OpenFL). RSA-3072 keys, as OpenFL's own
``fx workspace certify`` makes. Files are laid out where OpenFL's Plan looks for them:
``cert/cert_chain.crt``, ``cert/server/agg_<address>.{crt,key}``, ``cert/client/col_<name>.{crt,key}``.
Prints a JSON object with the time spent (seconds) and the key type.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import json
import time
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KEY_BITS = 3072


def new_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)


def write(path: Path, key, cert) -> None:
    """Write <path>.crt (and <path>.key); names may contain dots (agg_127.0.0.1)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{path}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        key_path = Path(f"{path}.key")
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
            )
        )
        key_path.chmod(0o600)


def sign(subject_cn: str, key, ca_key, ca_name, *, sans: list, usages: list, ca: bool = False):
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject_cn)]))
        .issuer_name(ca_name or x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject_cn)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if ca:
        builder = builder.add_extension(
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
    return builder.sign(ca_key, hashes.SHA384())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the workspace's cert/ directory")
    parser.add_argument("--aggregator", required=True, help="the aggregator's address (IP or name)")
    parser.add_argument("--collaborators", required=True, help="comma-separated collaborator names")
    args = parser.parse_args()
    start = time.perf_counter()
    out = Path(args.out)
    ca_key = new_key()
    ca_cert = sign("ccbench federation CA", ca_key, ca_key, None, sans=[], usages=[], ca=True)
    write(out / "cert_chain", None, ca_cert)
    try:
        agg_sans = [x509.IPAddress(ipaddress.ip_address(args.aggregator)), x509.DNSName(args.aggregator)]
    except ValueError:
        agg_sans = [x509.DNSName(args.aggregator)]
    agg_key = new_key()
    write(
        out / "server" / f"agg_{args.aggregator.lower()}",
        agg_key,
        sign(
            args.aggregator,
            agg_key,
            ca_key,
            ca_cert.subject,
            sans=agg_sans,
            usages=[ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
        ),
    )
    for name in filter(None, args.collaborators.split(",")):
        key = new_key()
        write(
            out / "client" / f"col_{name}",
            key,
            sign(
                name, key, ca_key, ca_cert.subject, sans=[x509.DNSName(name)], usages=[ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
        )
    print(json.dumps({"seconds": time.perf_counter() - start, "key": f"RSA-{KEY_BITS}", "signature": "sha384"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
