"""The verdict in one glance: at most two lines per protection layer, each within 100 columns.

Each layer's first line gives its judgement (ccbench.analysis.judgement.semantics) in the one convention:
one figure with its interval where its rows agree in direction and are not heterogeneous ("2.9x
slower [2.6x, 3.3x]"), the range with directions where they do not ("1m randread 340x slower ...
4k randwrite 2.9x faster"), "faster in 90 of 92 benchmarks, 1.30x faster [1.27x, 1.33x]" pooled
across benchmarks of one value each, or "no cost above X% (the smallest it could see)" only where
nothing in the layer is significant; whether the machines behind it differ in CPU; how many
comparisons were significant. The second line, where needed, names the rows left out as
implausible and each workload that shows a difference.

Built from the comparison rows a layer's typical cost is taken from (ccbench.analysis.judgement.verdict), so
the lines never contradict the rows.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from ccbench.analysis import format as fmt

# the one wrapper (ccbench.basics.wrap), imported from here by the verdict's callers
from ccbench.basics.wrap import WIDTH as WIDTH
from ccbench.basics.wrap import fit as fit
from ccbench.basics.wrap import terminal_width as terminal_width


def median_mde(rows: pd.DataFrame) -> float:
    """The median minimum detectable effect (a fraction) of the rows that have one; NaN if none does."""
    if "mde" not in rows:
        return math.nan
    values = rows["mde"].to_numpy(dtype=float)
    values = values[np.isfinite(values)]
    return float(np.median(values)) if len(values) else math.nan


def _short(judgement) -> str:
    """A judgement's words without the rows' names, for a line that must fit."""
    from ccbench.analysis.judgement import semantics

    if judgement.kind == semantics.DISAGREE:
        return f"{fmt.effect(judgement.most)} ... {fmt.effect(judgement.least)} (both directions)"
    if judgement.only_in and not judgement.partial:
        return judgement.phrase(where=False) + f" in {judgement.only_in}"
    if judgement.kind == semantics.NONE_SEEN and not math.isnan(judgement.mde):
        return f"no cost above {fmt.mde(judgement.mde)}"
    return judgement.phrase()


#: how the headline says that the machines differ in a confounding fact (ccbench.analysis.rows.sides)
DIFFER = {
    "CPU model": "CPU models differ",
    "kernel": "kernels differ",
    "vCPUs": "vCPUs differ",
    "tool versions": "tool versions differ",
}


def confounders(item) -> list[tuple[str, str]]:
    """What besides the layer differs between the machines behind a layer's comparisons: (fact,
    "6.8.0-1017-azure vs 6.5.0-1025-azure") from the rows' "confounded by" flags
    (ccbench.analysis.rows.sides); the CPU left out where the CPU note already says it differs."""
    if item.layer == "none":
        return []
    out: list[tuple[str, str]] = []
    for text in item.confounded:
        # "CPU model (a vs b), memory (c vs d) and kernel (e vs f)"
        for fact, values in re.findall(r"(?:^|, | and )([^(),]+?) \(([^()]*(?:\([^()]*\)[^()]*)*)\)", text):
            if fact == "CPU model" and item.cpu_note == "machines differ in CPU":
                continue
            if (fact, values) not in out:
                out.append((fact, values))
    return out


def _differ(fact: str) -> str:
    return DIFFER.get(fact, f"{fact} differs")


def _layer_name(item) -> tuple[str, str]:
    """The layer's name on its headline line with its notes: the CPU note and what else differs
    between the machines ("TEE: TDX (CPU unknown; kernels differ)"), and, for the layer's second
    line, what differs with the values ("kernels differ: 6.8.0-1017-azure vs 6.5.0-1025-azure (not
    the layer's own cost)"). The same at every width: only the wrapping changes."""
    name = "no layer (other machine or run)" if item.layer == "none" else item.layer
    notes = [item.cpu_note] if item.cpu_note else []
    if item.against:
        notes.insert(0, f"against {item.against}")
    found = confounders(item)
    if not found:
        return (f"{name} ({notes[0]})" if notes else name), ""
    with_values = "; ".join(f"{_differ(fact)}: {values}" for fact, values in found)
    brief = f"{name} ({'; '.join([*notes, *dict.fromkeys(_differ(fact) for fact, _ in found)])})"
    return brief, f"{with_values} (not the layer's own cost)"


def _counts(item) -> str:
    """How many of the comparisons the layer's figure rests on (its application metrics) were
    significant, in how many workloads, and how many of them were left out: "6 of 6 significant in 2
    workloads, 4 left out" (the report's chart counts the same rows)."""
    plural = "s" if item.workloads != 1 else ""
    left_out = f", {item.left_out_rows} left out" if getattr(item, "left_out_rows", 0) else ""
    judgement = item.judgement
    supporting = getattr(item, "supporting_significant", 0)
    if judgement is not None and judgement.settled_on and not math.isnan(judgement.typical):
        # the run settled the layer's mean (ccbench.analysis.settling.layer_settle): said as what it is
        from ccbench.analysis.judgement.wording import settled_counts

        also = f"; {supporting} supporting metric{'s' if supporting != 1 else ''} significant" if supporting else ""
        return f"{settled_counts(item.significant, item.comparisons, item.workloads)}{also}{left_out}"
    if judgement is not None and item.significant == 0 and supporting > 0:
        # the figure rests on the application metrics, none of them significant; what is significant
        # is a metric not counted in it (a phase's time, a tier's latency, a round trip): said, so
        # the bound is not read as covering it
        metrics = "metric" if supporting == 1 else "metrics"
        return (
            f"none of {item.comparisons} significant in application metrics; {supporting} supporting {metrics} "
            f"significant (see the table){left_out}"
        )
    if judgement is not None and judgement.partial and not judgement.only_in:
        # its words begin with these counts ("5 of 6 significant: faster, 2.6x to 7.6x (...)"): not said twice
        return f"in {item.workloads} workload{plural}{left_out}"
    return f"{item.significant} of {item.comparisons} significant in {item.workloads} workload{plural}{left_out}"


def layer_lines(item, full: bool = False, width: int | None = WIDTH) -> list[str]:
    """The headline of one LayerVerdict (ccbench.analysis.judgement.verdict): one paragraph with the layer's
    judgement (ccbench.analysis.judgement.semantics) and its counts, and at most one more (``full``: one per
    workload) with what else differs between its machines, its workloads' own words where they
    differ and the rows left out as implausible. The same words at every ``width``: each paragraph
    wrapped to it (ccbench.basics.wrap.fit; None: one line each), never shortened."""
    from ccbench.analysis.judgement import semantics

    name, detail = _layer_name(item)
    if item._per_message_only() and math.isnan(item.typical):
        # per-message comparisons with no application figure to set them against (transport without
        # its timed embedding): no share to give, and no workload it was counted in
        counted = f"{item.significant} of {item.comparisons} per-message comparisons significant"
        return [fit(f"{name}: no application-level cost measured; {counted} (see the table)", width)]
    if item._per_message_only() or item.judgement is None:
        return [fit(f"{name}: {item.typical_text()} of one unit of application work; {_counts(item)}", width)]
    judgement = item.judgement
    if judgement.kind == semantics.LEFT_OUT:
        return [fit(f"{name}: {judgement.phrase()}", width), fit(f"  {item.left_out_text(short=True)}", width)]
    lines = [fit(f"{name}: {judgement.phrase()}; {_counts(item)}", width)]
    parts = item.workload_judgements if len(item.workload_judgements) > 1 else []
    left = item.left_out_text(short=True)
    if full:
        for workload, part in parts:
            # a workload where only some rows differ: its words begin with its counts
            counts = "" if part.partial else f"; {part.significant} of {part.comparisons} significant"
            lines.append(fit(f"  {workload}: {part.phrase()}{counts}", width))
        if detail:
            lines.insert(1, fit(f"  {detail}", width))
        if left:
            lines.append(fit(f"  {left}", width))
        return lines
    second = [detail] if detail else []
    if left:
        second.append(left)
    shows = [(w, j) for w, j in parts if j.holds_significant]
    if len(shows) > 1:
        second.append("; ".join(f"{w}{':' if j.partial else ''} {_short(j)}" for w, j in shows))
    if second:
        lines.append(fit("  " + "; ".join(second), width))
    return lines


def headline(items, full: bool = False, width: int | None = WIDTH) -> list[str]:
    """Every layer's lines, in the verdict's order (``full``: one line per workload), each within
    ``width`` columns (wrapped, never cut; None: unbounded)."""
    return [line for item in items for line in layer_lines(item, full, width)]


def page_points(items) -> list[str]:
    """One point per layer for a page (the report's verdict): its headline's lines unbounded, the
    further ones after its first, so a note on left-out rows is never read as a layer of its own."""
    points = []
    for item in items:
        first, *rest = layer_lines(item, width=None)
        points.append(" — ".join([first, *(line.strip() for line in rest)]))
    return points


def finding_lines(findings, width: int | None = WIDTH, items=()) -> list[str]:
    """One entry per (severity, code) of the lint's findings, in the order of first appearance: the first
    one's words, then "(+N more like it)", wrapped to ``width`` columns (never cut). An implausible
    finding whose rows the verdict's lines above (``items``) already name with their reason says only
    how many rows that is: the reason and the cases are said once."""
    named = {config for item in items for _, _, config in getattr(item, "left_out_parts", [])}
    groups: dict[tuple[str, str], list] = {}
    for finding in findings:
        groups.setdefault((finding.severity, finding.code), []).append(finding)
    out = []
    for (severity, code), found in groups.items():
        tail = f" (+{len(found) - 1} more like it)" if len(found) > 1 else ""
        what = _named_above(found[0], named) or " ".join(found[0].what.split())
        out.append(fit(f"[{severity}] {code}: {what}{tail}", width))
    return out


def _named_above(finding, named: set[str]) -> str:
    """ "vm / no TEE / fscrypt: 20 rows (4 cases, every metric) left out of the verdict, named above
    with why" for an implausible finding whose configuration the verdict's lines name; "" else."""
    evidence = finding.evidence or {}
    if finding.code != "implausible" or len(evidence) != 1 or not set(evidence) <= named:
        return ""
    ((config, held),) = evidence.items()
    cases = [metrics for workload in (held.get("rows") or {}).values() for metrics in workload.values()]
    rows = sum(len(metrics) for metrics in cases)
    return f"{config}: {rows} rows of {len(cases)} case{'s' if len(cases) != 1 else ''} left out of the verdict (its lines above say which and why)"
