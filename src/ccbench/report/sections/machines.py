"""The machines side by side: what each bundle ran on, and which protections were active."""

from __future__ import annotations

import pandas as pd

from ccbench.analysis.samples.load import TEE_NAMES
from ccbench.report.sections import ReportContext, Section, Table

ORDER = 10


def _attestation(path, checked: bool = False) -> str:
    """attested+verified / attested-unverified (and why) / unattested (and why), from the bundle's
    digest list and evidence as `ccbench verify` checks them (default policy, no collateral), the
    large files' digests those the check on reading remembered (hashing a 10M-sample bundle's
    journal again took seconds and would say the same); ``checked``: the check on reading found its
    files as its digest list says, so only the evidence is checked here."""
    from ccbench.attestation.verify import verify_bundle
    from ccbench.basics.errors import CCBenchError

    try:
        return verify_bundle(path, remembered=True, files_checked=checked).summary()
    except (CCBenchError, OSError) as exc:
        return f"not checked: {exc}"


def _provenance_rows(bundle) -> dict[str, str]:
    """What decides a confidential machine's performance (probe and evidence), one row each."""
    from ccbench.attestation.provenance import bundle_provenance, describe

    provenance = bundle_provenance(bundle.path, bundle.probe)
    rows = {"machine id": bundle.probe.get("machine_id") or "unknown"}
    rows.update({f"provenance: {name}": text for name, text in describe(provenance)})
    return rows


def _cloud_launch_rows(probe: dict) -> dict[str, str]:
    """A cloud instance's launch facts as ccbench's cloud launcher recorded them in the guest
    (``machine_launch``; the provider's own CC flag as its API returned it: a fact, not evidence)."""
    launch = probe.get("machine_launch") or {}
    if launch.get("launcher") != "ccbench cloud":
        return {}
    says = launch.get("cloud_says") or {}
    return {
        "cloud launch": " ".join(str(launch.get(k) or "-") for k in ("provider", "region", "zone")),
        "instance type": str(launch.get("instance_type") or "-"),
        "image": str(launch.get("image") or "-"),
        "CC flag as returned": "; ".join(f"{k}={v}" for k, v in says.items()) or "none returned",
    }


def build(ctx: ReportContext) -> Section | None:
    if not ctx.bundles:
        return None
    machines = (
        ctx.samples.drop_duplicates("bundle").set_index("bundle")["machine"].to_dict() if not ctx.samples.empty else {}
    )
    columns = {}
    for bundle in ctx.bundles:
        probe = bundle.probe
        cpu = probe.get("cpu", {})
        memory = (probe.get("memory") or {}).get("total_bytes")
        tee = probe.get("tee", {})
        storage = probe.get("storage", {})
        label = machines.get(str(bundle.path), probe.get("hostname", bundle.path.name))
        key = f"{label} ({bundle.path.name})"
        evidence = "; ".join(f"{e['source']}: {e['signal']}" for e in tee.get("evidence", [])[:4])
        columns[key] = {
            "host": probe.get("hostname"),
            "CPU": cpu.get("model"),
            "cores / threads": f"{cpu.get('cores') or '-'} / {cpu.get('threads') or '-'}",
            "memory": f"{memory / 2**30:.1f} GiB" if memory else "unknown",
            "kernel": (probe.get("kernel") or {}).get("release"),
            "OS": (probe.get("os") or {}).get("pretty_name"),
            "virtualization": f"{probe.get('virtualization') or '-'}"
            + (f" ({probe['cloud']})" if probe.get("cloud") else ""),
            "TEE": TEE_NAMES.get(tee.get("technology"), tee.get("technology")),
            "TEE evidence": evidence or "-",
            "storage protection (work dir)": f"{storage.get('protection')} ({storage.get('fstype', '?')} on {storage.get('source', '?')})",
            "plan": (bundle.manifest.get("plan") or {}).get("name"),
            "started": bundle.manifest.get("started_at"),
            "status": bundle.manifest.get("status"),
            "attestation": _attestation(bundle.path, str(bundle.path) in ctx.verified_on_read),
            **_cloud_launch_rows(probe),
            **_provenance_rows(bundle),
        }
    frame = pd.DataFrame(columns)
    frame.index.name = "fact"
    if frame.shape[1] < 2:
        return Section(
            title="Machines",
            intro="What the bundle ran on, from its environment probe.",
            tables=[Table(title="the machine", frame=frame.reset_index())],
        )
    return Section(
        title="Machines",
        intro="What each bundle ran on, from its environment probe: first the facts in which the machines differ "
        "(a cell unlike the first machine's highlighted), then the facts they share, once.",
        tables=side_by_side(frame),
    )


def side_by_side(frame: pd.DataFrame) -> list[Table]:
    """The facts (rows) of several machines (columns): those that differ between them, the cells
    unlike the first machine's highlighted, then those every machine shares, one value each."""
    text = frame.astype(object).where(frame.notna(), "-").astype(str)
    same = text.nunique(axis=1) <= 1
    tables = []
    differ = text[~same]
    if not differ.empty:
        marks = differ.ne(differ.iloc[:, 0], axis=0)
        marks.insert(0, "fact", False)
        tables.append(
            Table(
                title=f"what differs between the {frame.shape[1]} machines ({len(differ)} of {len(text)} facts)",
                frame=differ.reset_index(),
                highlight=marks.reset_index(drop=True),
            )
        )
    shared = text[same]
    if not shared.empty:
        tables.append(
            Table(
                title=f"the same on every machine ({len(shared)} facts)",
                frame=pd.DataFrame({"fact": shared.index, "value": shared.iloc[:, 0].to_numpy()}),
            )
        )
    return tables
