"""Which protection layer a comparison row measures: the layer that differs between its configuration
and its baseline (TEE, storage encryption, in-memory storage, transport), "combined" where several
do, "other machine or run" where none does, and their labels."""

from __future__ import annotations

import pandas as pd

from ccbench.analysis.labels import storage_kind
from ccbench.analysis.rows.baselines import UNPROTECTED


def layer_labels(frame: pd.DataFrame, pairs) -> dict[tuple[str, str], str]:
    """{(baseline, config): the protection layer that differs}, e.g. "TEE: SEV-SNP", "storage encryption:
    fscrypt", "in-memory storage: tmpfs", "TLS", "secure channel"; "combined: ..." when more than one
    differs, or when a protection and the machine or run differ (not the TEE) and that machine also
    measured the baseline's protections ("combined: TLS + other machine or run": two runs of one
    plan; the row mixes the runs' difference, measured on its own row, into the layer's), and "none"
    when only the machine or run does (an A/A comparison). A layer measured within a TEE machine,
    where another machine's TEE differs, names it: "TLS on SEV-SNP". A protection measured only
    across machines (seed 000's encrypted disk on one VM, none on its twin) stays that protection's,
    with the caveat the verdict gives any cross-machine layer."""
    from ccbench.analysis.samples.load import TEE_NAMES

    facts = frame.drop_duplicates("config").set_index("config")[["machine", "tee", "storage", "transport"]]
    facts = facts.astype(object).where(facts.notna(), None)

    def protections(row) -> tuple:
        return row["tee"], row["storage"] or "disk", row["transport"] or "plain"

    own = {(m, *protections({"tee": t, "storage": s, "transport": x})) for m, t, s, x in facts.itertuples(index=False)}
    tees = set(facts["tee"].fillna("none"))
    labels = {}
    for base, config in set(pairs):
        a, b = facts.loc[base], facts.loc[config]
        parts = []
        if a["tee"] != b["tee"]:
            parts.append(
                f"TEE: {TEE_NAMES.get(b['tee'], b['tee'])}"
                if b["tee"] not in ("none", None)
                else f"TEE removed: {TEE_NAMES.get(a['tee'], a['tee'])}"
            )
        storage_a, storage_b = a["storage"] or "disk", b["storage"] or "disk"
        if storage_a != storage_b and a["storage"] is not None and b["storage"] is not None:
            parts.append(storage_layer(storage_b) if storage_b not in UNPROTECTED else f"storage removed: {storage_a}")
        elif (
            a["storage"] is None
            and b["storage"] is not None
            and storage_b not in UNPROTECTED
            and a["machine"] != b["machine"]
        ):
            # another machine whose storage nothing states, against one that encrypts its disk: the row holds
            # the disk's cost too, never the TEE's alone
            parts.append(storage_layer(storage_b))
        transport_a, transport_b = a["transport"] or "plain", b["transport"] or "plain"
        if transport_a != transport_b and a["transport"] is not None and b["transport"] is not None:
            parts.append(
                transport_layer(transport_b) if transport_b not in UNPROTECTED else f"transport removed: {transport_a}"
            )
        if parts and a["tee"] == b["tee"] and a["machine"] != b["machine"] and (b["machine"], *protections(a)) in own:
            # the row's machine or run differs too, and it measured the baseline's protections itself
            # (another run of the same plan): the row mixes the run's difference into the layer's
            parts.append(OTHER_MACHINE)
        if not parts:
            labels[(base, config)] = "none"
        else:
            labels[(base, config)] = (parts[0] if len(parts) == 1 else "combined: " + " + ".join(parts)) + (
                # measured inside a TEE where another machine's TEE differs: which one it was measured in
                f" on {TEE_NAMES.get(b['tee'], b['tee'])}"
                if a["machine"] == b["machine"] and b["tee"] not in ("none", None) and len(tees) > 1
                else ""
            )
    return labels


#: the part of a combined layer that is another machine or run with the same TEE
OTHER_MACHINE = "other machine or run"


def storage_layer(storage: str) -> str:
    """The layer a storage label adds, by what it is (ccbench.analysis.labels.storage_kind): "in-memory
    storage: tmpfs", "loop file, no cipher: ext4-loop", "storage encryption: luks2", and for a
    ``--storage-path`` directory what it was found to be, whatever its name ("own path, no protection:
    tmpfs (own path, plain)")."""
    return f"{storage_kind(storage)}: {storage}"


def transport_layer(transport: str) -> str:
    return {"tls": "TLS", "securechannel": "secure channel"}.get(transport, f"transport: {transport}")
