"""Methods: how the numbers were made, as the bundles record it (their plans and execution records),
not as a fixed text."""

from __future__ import annotations

import json

import pandas as pd

from ccbench.analysis import format as fmt
from ccbench.analysis.settling.settled import NOT_CALLED
from ccbench.analysis.statistics.sequential import ALPHA
from ccbench.analysis.statistics.stats import MIN_SAMPLES, NOISY_CV
from ccbench.report.sections import ReportContext, Section, Table

ORDER = 90


def _order(records: list[dict]) -> str:
    """How a workload's measured executions were ordered, from the execution records."""
    keys = [json.dumps(r.get("variant") or {}, sort_keys=True) for r in records if not r.get("warmup")]
    variants = len(set(keys))
    if variants <= 1:
        return "one variant (nothing to interleave)"
    switches = sum(a != b for a, b in zip(keys, keys[1:]))
    # grouped (A A A B B B) switches variants - 1 times; interleaved (A B A B) about every execution
    return "interleaved (A B A B)" if switches > variants - 1 else "in sequence (A A B B)"


def workload_rows(ctx: ReportContext) -> list[dict]:
    labels = (
        ctx.samples.drop_duplicates("bundle").set_index("bundle")["machine"].to_dict() if not ctx.samples.empty else {}
    )
    rows = []
    for bundle in ctx.bundles:
        plan = bundle.manifest.get("plan") or {}
        executions: dict[str, list[dict]] = {}
        for record in bundle.executions:
            executions.setdefault(record.get("workload"), []).append(record)
        for spec in plan.get("workloads") or []:
            records = executions.get(spec.get("name"), [])
            measured = [r for r in records if not r.get("warmup") and r.get("status", "ok") == "ok"]
            variants = spec.get("variants") or {}
            combos = 1
            for values in variants.values():
                combos *= max(1, len(values))
            rows.append(
                {
                    "machine": labels.get(str(bundle.path), bundle.probe.get("hostname") or bundle.path.name),
                    "plan": plan.get("name"),
                    "workload": spec.get("name"),
                    "variants": str(combos),
                    "repetitions planned": str(spec.get("repetitions", "-")),
                    "executions measured": str(len(measured)) if records else "-",
                    "warmups": str(spec.get("warmup", 0)),
                    "cooldown": fmt.number(float(spec.get("cooldown", 0) or 0), "s"),
                    "order": _order(records) if records else ("interleaved (A B A B)" if combos > 1 else "one variant"),
                    "contended executions": str(sum(1 for r in measured if r.get("contended"))) if records else "-",
                }
            )
    return rows


def build(ctx: ReportContext) -> Section | None:
    samples = ctx.samples
    if samples.empty:
        return None
    rows = workload_rows(ctx)
    facts = []
    if rows:
        table = pd.DataFrame(rows)
        several = table[table["variants"] != "1"]
        interleaved = several["order"].str.startswith("interleaved").sum()
        cooldowns = sorted({r["cooldown"] for r in rows})
        repetitions = sorted({int(r["repetitions planned"]) for r in rows if r["repetitions planned"].isdigit()})
        facts.append(
            f"{len(several)} of {len(table)} workload runs had several variants; {interleaved} of those were "
            "interleaved (A B A B) so that drift hit every variant alike."
            if len(several)
            else "No workload had several variants in one run: nothing was interleaved within a bundle."
        )
        facts.append(
            f"Cooldown between executions: {', '.join(cooldowns)} (as planned). Repetitions planned: "
            f"{', '.join(map(str, repetitions)) or '-'}."
        )
    if len(ctx.bundles) > 1:
        facts.append(
            f"The {len(ctx.bundles)} bundles were measured in separate runs: configurations from different "
            "bundles were not interleaved, so drift between those runs is part of their difference."
        )
    facts.append(
        "Each execution ran in its own worker process. Warmup executions are recorded in the bundles and "
        "excluded here. Intervals: Welch's t interval on log values (ratio of geometric means), 95%; validated "
        "by simulation (A/A false-positive rate at most 5%, a 5% slowdown at 1% CV found in over 90% of trials "
        f"at n = 10). Significant = the interval excludes 1{layer_settled_note(ctx.comparison)}. Flags: noisy "
        f"(CV > {NOISY_CV:.0%}), not enough "
        f"samples (n < {MIN_SAMPLES}), contended (other processes' CPU or steal time during the execution). "
        "Forest plots show the time ratio against the baseline with its 95% interval; bar charts (a workload "
        "family's own) show medians with the interquartile range."
    )
    counts = _counts(ctx)
    counts = counts[["config", "samples", "warmup", "measured", "contended"]].astype(
        {"samples": str, "warmup": str, "measured": str, "contended": str}
    )
    tables = []
    if rows:
        tables.append(
            Table(title="what each bundle ran (from its plan and execution records)", frame=pd.DataFrame(rows))
        )
    tables.append(Table(title="samples per configuration", frame=counts))
    return Section(title="Methods", intro=" ".join(facts), tables=tables)


def layer_settled_note(comparison: pd.DataFrame | None) -> str:
    """Where rows of a run settled by layer are present, what significant means for them: a case is
    significant only where e-BH calls it across its layer, so its own interval may exclude 1 without
    it (flag "not called across its layer"); "" otherwise."""
    if comparison is None or "layer_settled" not in comparison or not comparison["layer_settled"].notna().any():
        return ""
    return (
        f"; but in a run settled by layer a case is significant only where called across its layer (e-BH at "
        f"{ALPHA:.0%} over the layer's cases), so its own interval may exclude 1 without it being significant "
        f"(flag: {NOT_CALLED})"
    )


def _counts(ctx: ReportContext) -> pd.DataFrame:
    """Samples, warmups, measured and contended samples per configuration: the engine's exact counts
    (``ctx.samples`` may be a systematic sample of a fleet's samples), else counted in the frame."""
    if ctx.engine is not None:
        counts = ctx.engine.config_counts.copy()
        counts.insert(0, "config", [ctx.engine.configs[c] for c in counts["cfg"]])
        return counts
    counts = (
        ctx.samples.groupby("config", sort=False)
        .agg(samples=("value", "size"), warmup=("warmup", "sum"), contended=("contended", "sum"))
        .reset_index()
    )
    counts["measured"] = counts["samples"] - counts["warmup"]
    return counts
