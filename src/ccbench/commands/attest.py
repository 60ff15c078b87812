"""ccbench attest: bind a bundle's digests into TEE evidence from this machine."""

from __future__ import annotations

from pathlib import Path

import click

from ccbench.basics.errors import CCBenchError


@click.command()
@click.argument("bundle", type=click.Path(file_okay=False))
@click.option(
    "--nonce",
    metavar="HEX",
    default=None,
    help="A fresh value from whoever will verify (hex, up to 64 bytes), bound into the evidence with the "
    "digest, so the evidence cannot have been made before they asked.",
)
def command(bundle, nonce) -> None:
    """Recompute the digest list of BUNDLE (every file: manifest, samples, executions, raw/) into
    attestation.json and, on a confidential VM (SEV-SNP or TDX guest with configfs-tsm), ask the TEE
    for evidence whose report data is SHA-512 of a label, that digest and NONCE; the evidence and its
    certificates are stored under BUNDLE/attestation/. Without a TEE the bundle is marked unattested
    with the reason and this exits 4. Verify with 'ccbench verify BUNDLE'."""
    from ccbench.attestation import AttestationError, finish_bundle

    path = Path(bundle)
    if not (path / "manifest.json").is_file():
        raise CCBenchError(f"{bundle}: not a bundle (no manifest.json)")
    nonce_bytes = None
    if nonce is not None:
        try:
            nonce_bytes = bytes.fromhex(nonce)
        except ValueError:
            raise CCBenchError(f"--nonce {nonce!r}: not hexadecimal") from None
        if not 1 <= len(nonce_bytes) <= 64:
            raise CCBenchError(f"--nonce: {len(nonce_bytes)} bytes; give 1 to 64 bytes of hex")
    try:
        document = finish_bundle(path, nonce=nonce_bytes)
    except AttestationError as exc:
        raise CCBenchError(str(exc)) from None
    files = len(document["files"])
    if document["status"] == "attested":
        ev = document["evidence"]
        mock = " (MOCK evidence: tests only)" if ev.get("mock") else ""
        click.echo(
            f"attested {bundle}: {files} files, digest {document['digest']}, {ev['technology']} evidence "
            f"from {ev['provider']}{mock}"
        )
        return
    click.echo(
        f"unattested {bundle}: {document['reason']}; the digest list of {files} files was written "
        f"(integrity can be checked, origin cannot)",
        err=True,
    )
    raise SystemExit(4)
