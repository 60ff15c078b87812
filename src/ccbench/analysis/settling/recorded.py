"""What a run's bundle records of its settling (``run --settle``): the workloads it settled, their
declared cases and samples, and each variant's settlements computed again from the samples with the
reason a case stopped; read by compare, the settled rows and a layer's settling."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ccbench.analysis.statistics.sequential import Judged, judged, paired_against, record_limit, settle_all


def settled_workloads(bundle: Any) -> tuple[dict[str, dict[str, Any]], dict[str, Judged], dict[str, list[Any]]]:
    """A bundle's settled workloads (its manifest's ``outcomes.<workload>.settled`` with variants),
    what each workload is judged on (judged, from its declaration), and each settled workload's measured samples
    (ccbench.model.Sample, read in chunks); three empty dicts for a bundle whose run settled nothing."""
    from ccbench.model import Sample

    settled = {
        name: outcome["settled"]
        for name, outcome in (bundle.manifest.get("outcomes") or {}).items()
        if (outcome.get("settled") or {}).get("variants")
    }
    if not settled:
        return {}, {}, {}
    declared = {name: judged(spec) for name, spec in (bundle.manifest.get("declarations") or {}).items()}
    samples: dict[str, list[Sample]] = {name: [] for name in settled}
    for chunk in bundle.sample_chunks():
        for record in chunk:
            if record.get("workload") in samples and not record.get("warmup"):
                samples[record["workload"]].append(Sample(**record))
    return settled, declared, samples


def bundle_settlements(bundle: Any) -> dict[str, dict[str, Any]]:
    """Per workload a bundle's run settled (its manifest's ``outcomes.<workload>.settled``), the
    record recomputed from the bundle's samples with the same rule: the target, the baseline, and
    per variant what stopped it (the run's word) and each case's settlement. ``bundle``: a
    ccbench.bundle.Bundle (its samples are read in chunks)."""
    settled, declared, samples = settled_workloads(bundle)
    found = {}
    for name, record in settled.items():
        keys = [record["baseline"], *record["variants"]]
        against = {k: v["against"] for k, v in record["variants"].items() if v.get("against")}
        costs = paired_against(samples[name], record["baseline"], keys, against, declared.get(name, ()))
        cases = settle_all(costs, record["target"], record_limit(record))
        found[name] = {
            **record,
            "variants": {
                key: {
                    "stopped_by": variant.get("stopped_by"),
                    **({"layer": {"title": variant["layer"].get("title")}} if variant.get("layer") else {}),
                    **({"against": variant["against"]} if variant.get("against") else {}),
                    "cases": {c: {**v.as_dict(), **_case_reason(variant, c)} for c, v in cases[key].items()},
                }
                for key, variant in record["variants"].items()
            },
        }
    return found


def _case_reason(variant: Mapping[str, Any], label: str) -> dict[str, Any]:
    """The run's word on why one case stopped (``stopped_by``; runs before per-case reasons have none)."""
    why = ((variant.get("cases") or {}).get(label) or {}).get("stopped_by")
    return {"stopped_by": why} if why else {}
