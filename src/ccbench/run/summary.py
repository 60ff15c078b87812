"""The summary of samples that ``ccbench run`` prints at its end and ``ccbench show`` prints for a
bundle: one table formatter for both, the statistics from ccbench.analysis.statistics.stats."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ccbench.basics.cases import case_text

if TYPE_CHECKING:
    from rich.table import Table

    from ccbench.model import Sample


def _variant_label(variant: dict[str, Any]) -> str:
    from ccbench.variants import AXES

    label = ",".join(f"{k}={v}" for k, v in sorted(variant.items()) if k in AXES) or "-"
    # "storage=encrypted (fscrypt)": the mechanism the run chose, the name compare and the report use
    mechanism = variant.get("storage_mechanism")
    if mechanism == "user-path":
        # a --storage-path directory: named with what it was found to be, as compare names it
        # ("storage=tmpfs (own path, plain)"), never by ccbench's word for how it was given
        from ccbench.analysis.samples.load import storage_label

        return label.replace(f"storage={variant.get('storage')}", f"storage={storage_label(variant)}", 1)
    if mechanism and mechanism not in ("none", variant.get("storage")):
        label += f" ({mechanism})"
    return label


#: a count of the figures an execution could not give (mechanisms), each with its reason in the
#: sample's metadata: no measurement, so no table row; ``not_measured`` says each in words
MISSING_FIGURES = "missing_figures"


def not_measured(samples: Iterable[Sample | Mapping[str, Any]]) -> list[str]:
    """One "not measured: <figure> (<reason>)" line per figure the executions could not give, in
    order, each once (every repetition says the same)."""
    lines: dict[str, None] = {}
    for sample in samples:
        fields = sample if isinstance(sample, Mapping) else vars(sample)
        if fields["metric"] != MISSING_FIGURES or fields["warmup"]:
            continue
        for missing in (fields.get("metadata") or {}).get("missing") or []:
            if isinstance(missing, Mapping):
                lines[f"not measured: {missing.get('figure')} ({missing.get('why')})"] = None
    return list(lines)


def summarize(samples: Iterable[Sample | Mapping[str, Any]], *, per_case: bool = True) -> list[dict[str, Any]]:
    """Per workload, variant and (with per_case) case: the first metric's median, its coefficient
    of variation in percent, and the counts. Without per_case, one row per workload and variant:
    the headline (the first metric and case the workload reported) and how many cases it measured.

    ``samples``: a run's ccbench.model.Sample objects, or a bundle's journal lines as plain dicts
    (``ccbench show`` builds no object per sample); both are read as their fields."""
    from ccbench.analysis.statistics.stats import coefficient_of_variation

    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    cases: dict[tuple[str, str], set[str]] = {}
    for sample in samples:
        fields = sample if isinstance(sample, Mapping) else vars(sample)
        if fields["warmup"] or fields["metric"] == MISSING_FIGURES:
            continue
        variant = _variant_label(fields["variant"])
        label = case_text((fields.get("metadata") or {}).get("case") or {})
        cases.setdefault((fields["workload"], variant), set()).add(label)
        groups.setdefault((fields["workload"], variant, label if per_case else ""), []).append(fields)
    rows = []
    for (workload, variant, _), items in groups.items():
        headline = items[0]
        key = (headline["metric"], json.dumps(headline["params"], sort_keys=True))
        chosen = [s for s in items if (s["metric"], json.dumps(s["params"], sort_keys=True)) == key]
        values = [float(s["value"]) for s in chosen]
        cv = coefficient_of_variation(values)
        rows.append(
            {
                "workload": workload,
                "kind": headline["kind"],
                "variant": variant,
                "unit": headline["unit"],
                "case": case_text((headline.get("metadata") or {}).get("case") or {}),
                "metric": headline["metric"],
                "median": statistics.median(values),
                "cv_percent": cv * 100 if cv is not None else None,
                "n": len(values),
                "samples": len(items),
                "cases": len(cases[(workload, variant)]),
                "contended": sum(1 for s in chosen if s.get("contended")),
            }
        )
    return rows


def summary_table(rows: list[dict[str, Any]], title: str, outcomes: dict[str, Any] | None = None) -> Table:
    """The summary as a table; with outcomes (workload -> Outcome), a status column and a row for
    each workload that has no samples, with its reason."""
    from rich.table import Table

    from ccbench.analysis.format import number

    columns = [
        "workload",
        *(["status"] if outcomes is not None else []),
        "variant",
        "case",
        "metric",
        "median",
        "CV %",
        "n",
    ]
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, justify="right" if column in ("median", "CV %", "n") else "left")

    def cells(row: dict[str, Any]) -> list[str]:
        more = row.get("cases", 1) - 1
        # the run's closing summary shows each workload's first case: the others are said to be cut
        case = row["case"] + (
            f" (+{more} more case{'s' if more != 1 else ''}, not shown)" if more > 0 and outcomes is not None else ""
        )
        cv = f"{row['cv_percent']:.1f}" if row["cv_percent"] is not None else "-"
        n = str(row["n"]) + (f" ({row['contended']} contended)" if row.get("contended") else "")
        return [row["variant"], case, row["metric"], number(row["median"], row["unit"]), cv, n]

    if outcomes is None:
        for row in rows:
            table.add_row(row["workload"], *cells(row))
        return table
    for name, outcome in outcomes.items():
        mine = [r for r in rows if r["workload"] == name]
        status = outcome.status.value + (f" ({outcome.executions_failed} failed)" if outcome.executions_failed else "")
        if not mine:
            table.add_row(name, status, "-", "-", outcome.reason or "-", "-", "-", "-")
        for row in mine:
            table.add_row(name, status, *cells(row))
            name, status = "", ""
    return table


def machine_lines(environment: dict[str, Any]) -> list[str]:
    """Two lines on what protects this machine: the TEE verdict and the storage protection of the
    work directory (from the probe document)."""
    tee = environment.get("tee") or {}
    storage = environment.get("storage") or {}
    evidence = tee.get("evidence") or []
    verdict = tee.get("technology", "unknown")
    lines = [
        f"TEE: {verdict}" + (f" ({len(evidence)} piece(s) of evidence; 'ccbench env' lists them)" if evidence else "")
    ]
    detail = ", ".join(f"{k}={v}" for k, v in storage.items() if k in ("fstype", "source", "cipher") and v)
    lines.append(
        f"storage at {storage.get('path', '-')}: {storage.get('protection', 'unknown')}"
        + (f" ({detail})" if detail else "")
    )
    return lines
