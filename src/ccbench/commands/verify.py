"""ccbench verify: check a bundle's digests and attestation evidence."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import click


@click.command()
@click.argument("bundle", type=click.Path(file_okay=False))
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="What the evidence must show (JSON or .toml): allow_debug, measurements, min_tcb "
    "{bootloader, tee, snp, microcode}, max_vmpl, rtmrs, tdx_tcb_statuses, tdx_service_tds (MRSERVICETD values "
    "a TDX 1.5 TD may be bound to), require_revocation_check. "
    "Default: debug off, any measurement, TDX status UpToDate, SEV-SNP without a CRL accepted (and "
    "said: 'revocation not checked').",
)
@click.option(
    "--collateral",
    type=click.Path(file_okay=False),
    default=None,
    help="A directory with what the evidence needs from the vendor: vcek.der or vcek.pem (SEV-SNP, when "
    "the bundle has no certificate table), crl.der or crl.pem (SEV-SNP: AMD's CRL from the KDS, "
    "/vcek/v1/{Milan,Genoa,Turin}/crl, or 'snpguest fetch crl') and tdx_collateral.json (TDX: DCAP "
    "collateral in dcap-qvl's JSON).",
)
@click.option(
    "--require-attestation",
    is_flag=True,
    help="Fail (exit 5) when the bundle carries no real evidence, even if its digests are intact.",
)
@click.option(
    "--at",
    "at_text",
    default=None,
    metavar="TIME",
    help="Check certificate validity and the CRL's freshness at TIME (ISO 8601, e.g. 2026-11-23 or "
    "2026-11-23T10:00:00+00:00, or Unix seconds) instead of now: for a bundle verified after its VCEK "
    "expired. The verdict names the time.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
def command(bundle, policy_file, collateral, require_attestation, at_text, as_json) -> None:
    """Recompute every digest of BUNDLE (a changed, missing or extra file fails, naming it), verify the
    evidence when there is any (SEV-SNP: VCEK signature, AMD's chain, certificate validity, AMD's CRL
    when the collateral has it; TDX: DCAP), apply the policy,
    and print the verdict with the technology, measurement and TCB.

    Exit 0 when all that is present holds (an unattested bundle with intact digests passes unless
    --require-attestation); 3 tampering; 4 evidence that fails or cannot be verified; 5 no real
    evidence with --require-attestation; 2 bad input."""
    from ccbench.attestation.verify import load_policy, verify_bundle
    from ccbench.basics.errors import CCBenchError

    here = Path(bundle)
    if here.is_dir() and not (here / "manifest.json").exists() and not (here / "attestation.json").exists():
        # nothing of a bundle at all: bad input, not tampering (a bundle missing one of the two is checked)
        raise CCBenchError(
            f"{bundle}: neither manifest.json nor attestation.json: not a ccbench bundle (give a bundle directory, "
            "e.g. results/<host>-<time>)"
        )
    at = _unix_time(at_text) if at_text is not None else None
    verdict = verify_bundle(
        bundle,
        policy=load_policy(policy_file),
        collateral=collateral,
        require_attestation=require_attestation,
        at=at,
    )
    origin = _origin(bundle)
    if as_json:
        click.echo(json.dumps({**verdict.__dict__, "origin": origin}, indent=2, default=str))
    else:
        if origin != "measured by ccbench":
            click.echo(f"origin: {origin}")
        if verdict.integrity == "intact":
            click.echo(f"integrity: intact ({verdict.files} files)")
        else:
            click.echo(f"integrity: {verdict.integrity.upper()}: {verdict.reason}")
        if verdict.integrity == "intact":
            line = f"attestation: {verdict.attestation}"
            if verdict.technology:
                line += f" ({verdict.technology})"
            if verdict.attestation == "verified":
                line += f"; root {verdict.root}"
                if verdict.signing_key:
                    line += f"; signed by {verdict.signing_key}"
                line += f"; measurement {verdict.measurement}; TCB {json.dumps(verdict.tcb)}"
            elif verdict.reason:
                line += f": {verdict.reason}"
            click.echo(line)
            if verdict.revocation:
                click.echo(f"revocation: {verdict.revocation}")
            if at is not None and verdict.technology not in (None, "mock"):
                click.echo(f"checked as of: {datetime.fromtimestamp(at, UTC).isoformat()} (--at), not now")
        click.echo(f"verdict: {'OK' if verdict.exit_code == 0 else 'FAILED'} (exit {verdict.exit_code})")
    if verdict.exit_code:
        raise SystemExit(verdict.exit_code)


def _origin(bundle) -> str:
    """Whether ccbench measured the bundle's numbers, or imported them from another tool's files."""
    from ccbench.basics.errors import CCBenchError
    from ccbench.bundle import read_bundle

    try:
        imported = read_bundle(bundle, samples=False).manifest.get("imported")
    except CCBenchError:
        return "unknown (the manifest cannot be read)"
    if not imported:
        return "measured by ccbench"
    sources = imported.get("sources") or []
    return f"imported from {imported.get('format', '?')} results ({len(sources)} file(s)), not measured by ccbench"


def _unix_time(text: str) -> int:
    """--at: Unix seconds or an ISO 8601 date/time (UTC when no zone is given)."""
    if text.strip().isdigit():
        return int(text.strip())
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither an ISO 8601 time (2026-11-23T10:00:00+00:00) nor Unix seconds", param_hint="--at"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())
