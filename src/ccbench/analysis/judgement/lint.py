"""The known traps of a comparison (docs/trust.md, "Lint"): machines that differ in more than the
layer, 4K vs 2M pages, encryption far below its cipher's speed measured in the same run, and each
bundle's own machine findings (ccbench.probe.lint), and rows whose numbers cannot be what they claim
(ccbench.analysis.rows.plausibility). Pure functions over probe documents (read
through ccbench.probe.facts), a plan's needs and the comparison's rows; each returns Findings, never
raises on odd input and never changes anything. Shown by ``compare`` (a flag on the rows, a findings
list in --json and --summary) and the report (a block after the verdict).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ccbench.analysis.judgement.lint_cipher import slow_cipher
from ccbench.analysis.judgement.lint_run import (
    clock_sources,
    execution_findings,
    few_tail_operations,
    misnamed_storage_paths,
    tool_versions,
)
from ccbench.analysis.rows import plausibility
from ccbench.analysis.rows.sides import Difference, Side, config_sides, confounded_by, differences, distinct_rows
from ccbench.probe.facts import machine_facts, page_sizes
from ccbench.probe.lint import HIGH, INFO, MEDIUM, Finding, lint_machine, make_finding
from ccbench.workloads import plan_device_io

#: said of machines whose kernels differ: a guest kernel alone moves a TEE's costs (its exits, bounce
#: buffers, idle and page acceptance are kernel code), so the kernel stands beside the TEE as a cause
KERNEL_CONFOUND = "; the kernels differ, a confound beside {}: a kernel alone moves a guest's costs"


def _two_megabyte(pages: dict[str, Any]) -> bool | None:
    """Whether the guest can back memory with 2M pages (THP always/madvise, or reserved huge pages)."""
    thp, huge = pages["thp"], pages["hugepages_total"]
    if thp is None and huge is None:
        return None
    return thp in ("always", "madvise") or (isinstance(huge, int) and huge > 0)


def small_pages(baseline: Side, other: Side) -> list[Finding]:
    """Guest memory on 4K pages on one side where the other has 2M pages (or another base page size)."""
    evidence = {label: page_sizes(probe) for label, probe in [*baseline, *other]}
    sides = [[_two_megabyte(evidence[label]) for label, _ in side] for side in (baseline, other)]
    base_sizes = {v["page_size"] for v in evidence.values() if v["page_size"]}
    if any(v is None for side in sides for v in side) and len(base_sizes) < 2:
        return []
    small = [label for label, _ in [*baseline, *other] if _two_megabyte(evidence[label]) is False]
    large = [label for label, _ in [*baseline, *other] if _two_megabyte(evidence[label]) is True]
    if not (small and large) and len(base_sizes) < 2:
        return []
    what = (
        f"guest memory on 4K pages on {', '.join(small)} where {', '.join(large)} can use 2M pages (THP or "
        "reserved huge pages): a memory-bound difference between them may be the page size, not the layer"
        if small and large
        else f"the machines use different base page sizes ({', '.join(map(str, sorted(base_sizes)))} bytes)"
    )
    return [
        make_finding(
            "small-pages",
            MEDIUM,
            what,
            evidence,
            "give both machines the same THP setting (/sys/kernel/mm/transparent_hugepage/enabled) and huge pages",
        )
    ]


def unchecked(baseline: Side, other: Side, unknown: dict[str, list[str]]) -> list[Finding]:
    if not unknown:
        return []
    labels = sorted({label for names in unknown.values() for label in names})
    facts = ", ".join(f"{fact} ({', '.join(names)})" for fact, names in unknown.items())
    # an imported bundle knows what its source states, nothing more: not a bundle from an old ccbench
    imported = all(probe.get("imported") for label, probe in [*baseline, *other] if label in labels)
    why = (
        "the imported results do not state it"
        if imported
        else "not recorded (a bundle from before the provenance block, or the machine did not say)"
    )
    return [
        make_finding(
            "unchecked",
            INFO,
            f"could not check whether the compared machines differ in {facts}: {why}",
            {label: machine_facts(probe) for label, probe in [*baseline, *other] if label in labels},
            "state what the source leaves out, or measure with ccbench so the probe records it"
            if imported
            else "measure again with this ccbench so the probe records the machine's provenance",
        )
    ]


def _confounded(baseline: Side, other: Side, found: list[Difference], layers: list[str]) -> Finding:
    a, b = ", ".join(label for label, _ in baseline), ", ".join(label for label, _ in other)
    measured = " and ".join(layers) if layers else "the difference"
    beside = "the TEE" if any(layer.startswith("TEE") for layer in layers) else (measured if layers else "the layer")
    kernel = KERNEL_CONFOUND.format(beside) if any(d.fact == "kernel" for d in found) else ""
    return make_finding(
        "confounded",
        HIGH,
        f"{measured} measured between {a} and {b} is confounded by {confounded_by(found)}: the number is not the "
        f"layer's own cost{kernel}",
        {label: machine_facts(probe) for label, probe in [*baseline, *other]},
        "compare machines that differ only in the layer (same CPU model, size, SMT and kernel), or read the "
        "difference as the machines' together",
    )


def lint_pairs(frame: Any, table: Any, machines: Mapping[str, Mapping[str, Any]]) -> list[Finding]:
    """The findings on each pair of machine sets the comparison puts against each other (each pair
    once, with every layer measured between them)."""
    if table is None or table.empty:
        return []
    sides = config_sides(frame, machines)
    pairs: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[Side, Side, list[str]]] = {}
    for base, config, layer in distinct_rows(table, ["baseline", "config", "layer"])[
        ["baseline", "config", "layer"]
    ].itertuples(index=False):
        baseline, other = sides.get(base, []), sides.get(config, [])
        key = (tuple(label for label, _ in baseline), tuple(label for label, _ in other))
        if baseline and other and key[0] != key[1]:
            layers = pairs.setdefault(key, (baseline, other, []))[2]
            if layer != "none" and layer not in layers:
                layers.append(layer)
    findings: list[Finding] = []
    for baseline, other, layers in pairs.values():
        found, unknown = differences(baseline, other)
        if found:
            findings.append(_confounded(baseline, other, found, layers))
        findings += small_pages(baseline, other) + unchecked(baseline, other, unknown) + clock_sources(baseline, other)
        findings += tool_versions(baseline, other)
    return findings


# ---- encryption far below the cipher's own speed measured in the same run -------------------------
#
# The time a protection adds per byte (1/protected - 1/unprotected throughput, same case, same
# machine) is the time its cipher would need if the cipher were all it added: the "implied cipher
# speed". Far beoservices' open-loop rates, or plans that differ), those cases have no row and the verdict rests
# on the others: said, never silently dropped.


def _param_values(cases: Iterable[str]) -> dict[str, list[Any]]:
    values: dict[str, list[Any]] = {}
    for text in cases:
        try:
            params = json.loads(text)
        except (TypeError, ValueError):
            continue
        for key, value in (params if isinstance(params, dict) else {}).items():
            if value not in values.setdefault(key, []):
                values[key].append(value)
    return values


def _shown(values: list[Any]) -> str:
    ordered = sorted(
        values, key=lambda v: (not isinstance(v, int | float), v if isinstance(v, int | float) else str(v))
    )
    return ", ".join(map(str, ordered[:6])) + (", ..." if len(ordered) > 6 else "")


def _differing(mine: Iterable[str], theirs: Iterable[str]) -> tuple[str, str]:
    """The params whose values differ between two sets of cases: with both sides' values, and with
    the baseline's alone (what to set on the other side)."""
    ours, base = _param_values(mine), _param_values(theirs)
    keys = [key for key, values in ours.items() if sorted(map(str, values)) != sorted(map(str, base.get(key, [])))]
    both = "; ".join(f"{key} {_shown(ours[key])} against {_shown(base.get(key, [])) or 'none'}" for key in keys[:2])
    theirs_only = "; ".join(f"{key} {_shown(base[key])}" for key in keys[:2] if base.get(key))
    return both or "other params", theirs_only


def _case_label(case: str, params: str) -> str:
    """A case as the table names it, else its params (``mode=open rate=626``)."""
    if case and case not in ("None", "nan"):
        return case
    try:
        values = json.loads(params)
    except (TypeError, ValueError):
        return params
    return " ".join(f"{k}={v}" for k, v in values.items()) if isinstance(values, dict) else params


def unpaired(series: Any, table: Any) -> list[Finding]:
    """One finding per configuration and workload that measured cases of a metric its baseline
    measured too, but at params the baseline did not: series with no row, left out of the
    comparison and the verdict. ``series``: the distinct (workload, params, case, metric, config)
    measured (ccbench.analysis.samples.series.measured_series); ``table``: the rows."""
    if series is None or getattr(series, "empty", True) or table is None or table.empty:
        return []
    measured: dict[tuple[str, str], dict[str, set[str]]] = {}
    named: dict[tuple[str, str], str] = {}  # (workload, params): the case's name
    columns = [series[c].astype(str).tolist() for c in ("workload", "params", "case", "metric", "config")]
    for workload, params, case, metric, config in zip(*columns, strict=True):
        measured.setdefault((workload, config), {}).setdefault(metric, set()).add(params)
        named.setdefault((workload, params), case)
    pairs = list(dict.fromkeys(zip(*(table[c].astype(str).tolist() for c in ("workload", "config", "baseline")))))
    # a configuration none of whose cases paired has no row: set it against its workload's one baseline
    bases: dict[str, set[str]] = {}
    seen: dict[str, set[str]] = {}
    for workload, config, baseline in pairs:
        bases.setdefault(workload, set()).add(baseline)
        seen.setdefault(workload, set()).update((config, baseline))
    pairs += [(w, c, *bases[w]) for w, c in measured if len(bases.get(w, ())) == 1 and c not in seen[w]]
    findings = []
    for workload, config, baseline in pairs:
        mine, base = measured.get((workload, config), {}), measured.get((workload, baseline), {})
        extra = {p for m, cases in mine.items() if m in base for p in cases - base[m]}
        if not extra:
            continue
        missing = {p for m, cases in base.items() if m in mine for p in cases - mine[m]}
        labels = sorted({_case_label(named[(workload, p)], p) for p in extra})
        differ, wanted = _differing(extra, missing)
        findings.append(
            make_finding(
                "unpaired",
                MEDIUM,
                f"{config}: {len(labels)} case{'s' if len(labels) != 1 else ''} of {workload} with no counterpart "
                f"in {baseline} ({differ}): not compared, not in the verdict",
                {
                    "config": config,
                    "baseline": baseline,
                    "workload": workload,
                    "cases": labels,
                    "baseline cases": sorted({_case_label(named[(workload, p)], p) for p in missing}),
                },
                "measure the same cases on both sides: where a workload calibrates a parameter per run "
                "(microservices' open-loop rates) set it in the plan"
                + (f" to the baseline's values ({wanted})" if wanted else "")
                + " and run again (docs/microservices.md)",
            )
        )
    return findings


# ---- everything, for compare and the report -------------------------------------------------------


def lint_comparison(
    frame: Any,
    table: Any,
    machines: Mapping[str, Mapping[str, Any]],
    device_io: Mapping[str, bool | None] | None = None,
    series: Any = None,
    executions: Mapping[str, list] | None = None,
    tails: Any = None,
    own_paths: Mapping[str, list] | None = None,
) -> list[Finding]:
    """Every finding on the bundles of a comparison: each machine's own (``device_io`` per bundle:
    whether its plan moves data through devices), each cross-machine pair's, the cipher speeds,
    (with ``series``, the distinct cases each configuration measured) the cases left unpaired,
    (with ``executions``, {bundle: its execution records}) a bounce pool that filled, failed
    executions, (with ``tails``, samples.series.tail_series) percentile rows on few operations, and (with
    ``own_paths``, samples.load.own_path_variants) ``--storage-path`` directories not what their names say."""
    device_io = device_io or {}
    labels = {}
    if frame is not None and not frame.empty:
        labels = dict(distinct_rows(frame, ["bundle"])[["bundle", "machine"]].itertuples(index=False))
    findings: list[Finding] = []
    for bundle, probe in machines.items():
        name = str(labels.get(bundle) or (probe or {}).get("hostname") or bundle)
        findings += lint_machine(probe, device_io.get(bundle), name)
    findings += lint_pairs(frame, table, machines) + slow_cipher(frame) + plausibility.findings(table)
    findings += unpaired(series, table) + execution_findings(executions or {}, machines, labels)
    findings += few_tail_operations(tails, table) + misnamed_storage_paths(own_paths or {}, labels)
    unique = {}
    for finding in findings:
        unique.setdefault((finding.code, finding.what), finding)
    order = {HIGH: 0, MEDIUM: 1, INFO: 2}
    return sorted(unique.values(), key=lambda f: order.get(f.severity, 3))


def bundle_machines(bundles: Iterable[Any]) -> tuple[dict[str, dict[str, Any]], dict[str, bool | None]]:
    """({bundle path: probe}, {bundle path: whether its plan moves data through devices}) of loaded
    ccbench.bundle.Bundle objects, keyed as the frame's ``bundle`` column."""
    probes, device_io = {}, {}
    for bundle in bundles:
        key = str(bundle.path)
        probes[key] = bundle.probe
        device_io[key] = plan_device_io((bundle.manifest or {}).get("plan"))
    return probes, device_io
