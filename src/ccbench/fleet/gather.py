"""Gathering: the fetched bundles, checked as they arrive, then compared and reported.

``receive_bundle`` (in ``ccbench.fleet.receive``, which the fetch runs as a process of its own)
unpacks one host's bundle from a tar stream safely and checks it against what the host listed and
against the bundle's own SHA-256 list (``attestation.json``); ``unpack_bundle`` does the same for
an archive file; ``compare_and_report`` runs ``ccbench compare`` and
``ccbench report`` over every host's bundle with the inventory's baseline first.

The two commands run as processes of their own, on purpose: both take the one road of
``ccbench.analysis.comparison``, so nothing is computed differently, but a fleet's bundles can need
minutes and gigabytes (DuckDB, the helper processes, matplotlib), and the controller must write
fleet.json whatever happens to them; a child process is bounded by a timeout and its memory is
returned when it ends. compare.txt is then exactly what the command prints.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ccbench.attestation import digests
from ccbench.attestation.onread import split_verified
from ccbench.basics.errors import CCBenchError
from ccbench.basics.fsutil import write_text_atomic
from ccbench.fleet.receive import GatherError, receive_bundle  # noqa: F401 - GatherError: the name callers know
from ccbench.fleet.records import FleetRun, one_line


def unpack_bundle(archive: Path, target: Path, packed: dict | None = None) -> tuple[Path, dict]:
    """Unpack a fetched bundle archive (a file) into ``target/<bundle>/`` and check it, as
    ``receive_bundle`` does for a stream; return that directory and what was checked."""
    with open(archive, "rb") as stream:
        return receive_bundle(stream, target, packed, where=f"the bundle archive {archive}")


def columnar_on_gathering(bundle: Path) -> dict:
    """The gathered bundle's samples as Parquet, converted here when the host wrote none (a fleet
    host's wheelhouse has no pyarrow): into the controller's columnar cache, keyed by the journal's
    SHA-256 (``ccbench.bundle.columnar.columnar_file``, where compare and report then find it),
    not into the bundle, whose digest list stays exactly what the host wrote. What is returned
    says where the Parquet is and whether the journal it was made from is the journal the host's
    digest list (which any TEE evidence covers) names: ``journal`` match, mismatch or unlisted."""
    from ccbench.bundle.layout import SAMPLES, SAMPLES_PARQUET

    if (bundle / SAMPLES_PARQUET).is_file():
        return {"parquet": "host"}
    if not (bundle / SAMPLES).is_file():
        return {"parquet": "none", "parquet_reason": "no journal"}
    import pyarrow.parquet as pq

    from ccbench.bundle.columnar import META_JOURNAL_SHA256, columnar_file
    from ccbench.bundle.reader import read_bundle

    parquet = columnar_file(read_bundle(bundle, samples=False))
    made_from = (pq.read_schema(parquet).metadata or {}).get(META_JOURNAL_SHA256, b"").decode()
    listed = None
    try:
        entries = json.loads((bundle / digests.ATTESTATION_FILE).read_text()).get("files") or []
        listed = next((e.get("sha256") for e in entries if e.get("path") == SAMPLES), None)
    except (OSError, ValueError, AttributeError):
        pass
    journal = "unlisted" if listed is None else ("match" if listed == made_from else "mismatch")
    return {"parquet": "controller", "parquet_file": str(parquet), "journal_sha256": made_from, "journal": journal}


def gathering_settings(env: dict[str, str]) -> dict:
    """How bundles travel, as fleet.json records it (the effective values, a user's override included)."""
    return {
        "archive": "none: the bundle streams as one tar (GNU tar on the host) through one ssh channel of the "
        "play's connection into the checked unpack; under become or without an ssh connection, one archive file "
        "moved by the connection's fetch_file and removed after",
        "fetch": "ccbench_fetch action, as the login user",
        "transfer_method": env.get("ANSIBLE_SSH_TRANSFER_METHOD") or "smart (sftp, then scp)",
        "ssh_args": env.get("ANSIBLE_SSH_ARGS"),
        "pipelining": env.get("ANSIBLE_PIPELINING"),
        "checks": "each member's name and type before it is written, member sizes, file count and bytes as the "
        "host listed them, attestation.json's SHA-256 list against the digests computed while receiving",
    }


def probe_summary(bundle: Path) -> dict | None:
    """The few probe facts fleet.json shows per host (the bundle keeps the whole probe)."""
    try:
        manifest = json.loads((bundle / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    environment = manifest.get("environment") or {}
    cpu, tee = environment.get("cpu") or {}, environment.get("tee") or {}
    return {
        "hostname": environment.get("hostname"),
        "cpu": cpu.get("model"),
        "threads": cpu.get("threads"),
        "memory_bytes": (environment.get("memory") or {}).get("total_bytes"),
        "kernel": (environment.get("kernel") or {}).get("release"),
        "os": (environment.get("os") or {}).get("pretty_name"),
        "virtualization": environment.get("virtualization"),
        "tee": tee.get("technology"),
        "bundle_status": manifest.get("status"),
    }


def add_to_history(fleet: FleetRun, store_path: str) -> str:
    """Put the gathered bundles into a results store (``ccbench history``), each under its host's
    label; a line saying what was added (or why nothing could be)."""
    from ccbench.results.history import Store, add_bundles

    bundles = {
        str((fleet.directory / r.bundle).resolve()): fleet.label_of(key)
        for key, rounds in fleet.runs.items()
        for r in rounds.values()
        if r.bundle and r.outcome in ("ok", "failed")
    }
    if not bundles:
        return f"history {store_path}: no bundle was gathered, nothing added"
    verified, unverified = split_verified(bundles)
    left_out = f"; left out, unverified: {'; '.join(unverified)}" if unverified else ""
    if not verified:
        return f"history {store_path}: nothing added{left_out}"
    try:
        added, known = add_bundles([str(p) for p in verified], Store(store_path), bundles)
    except CCBenchError as exc:
        return f"history {store_path}: not added: {exc}{left_out}"
    return f"history {store_path}: {added} bundle(s) added, {known} already there{left_out}"


def compare_and_report(fleet: FleetRun) -> None:
    """``ccbench compare`` and ``ccbench report`` over the gathered bundles, the baseline's first
    (their outputs and any failure recorded in ``fleet``)."""
    # the baseline's bundles first: compare and report take the first bundle's least-protected
    # configuration as the baseline (per workload, so that prime without a storage variant
    # still finds its baseline; a --baseline label would match several configurations)
    # replicas (hosts sharing a label) are labelled alike, so they form one configuration
    order = sorted(fleet.runs, key=lambda key: fleet.label_of(key) != fleet.baseline)
    bundles = [
        (fleet.label_of(key), fleet.directory / r.bundle)
        for key in order
        for r in fleet.runs[key].values()
        if r.bundle and r.outcome in ("ok", "failed")
    ]
    # analysis reads only what verifies: a bundle whose files differ from its digest list is left out, and said
    verified, unverified = split_verified(path for _, path in bundles)
    if unverified:
        fleet.analysis_error = "left out, unverified: " + "; ".join(unverified)
    bundles = [(label, path) for label, path in bundles if Path(path) in verified]
    labels_present = {label for label, _ in bundles}
    if len(labels_present) < 2:
        fleet.analysis_error = (
            (fleet.analysis_error or "") + " fewer than two labels brought back a bundle: nothing to compare"
        ).strip()
        return
    args = [str(path) for _, path in bundles]
    for label, path in bundles:
        args += ["--label", f"{path}={label}"]
    env = {**os.environ, "COLUMNS": "200"}
    compare = subprocess.run(
        [sys.executable, "-m", "ccbench", "compare", *args], capture_output=True, text=True, env=env, timeout=1800
    )
    write_text_atomic(fleet.directory / "compare.txt", compare.stdout + compare.stderr)
    fleet.compare = "compare.txt"
    if compare.returncode != 0:
        fleet.analysis_error = ((fleet.analysis_error or "") + f" ccbench compare: {one_line(compare.stderr)}").strip()
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "ccbench",
            "report",
            *args,
            "-o",
            str(fleet.directory / "report.html"),
            "--title",
            f"ccbench fleet {fleet.run_id}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    if report.returncode == 0:
        fleet.report = "report.html"
    else:
        fleet.analysis_error = (fleet.analysis_error or "") + f" ccbench report: {one_line(report.stderr)}"
