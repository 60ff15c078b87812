"""The lint's findings, right after the verdict: the known traps seen in the compared machines
(confounded comparisons, different clock sources, a debug TEE, small or full bounce buffers, 4K
against 2M pages, encryption far below its cipher's speed), each with its evidence and source
(docs/trust.md, Lint)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ccbench.analysis.judgement.lint import bundle_machines, lint_comparison
from ccbench.analysis.samples.load import own_path_variants
from ccbench.analysis.samples.series import tail_series
from ccbench.report.sections import ReportContext, Section, Table

ORDER = 6


def _value(key: str, value: Any) -> Any:
    """Sizes in bytes as MiB or GiB, the way a reader compares machines; a list of records (a
    finding's failed executions) as "(key=value, ...)" each, never a Python repr."""
    if isinstance(value, list) and value and all(isinstance(one, dict) for one in value):
        return " ".join(
            "(" + ", ".join(f"{k}={_value(k, v)}" for k, v in one.items() if v is not None) + ")" for one in value
        )
    if isinstance(value, int | float) and not isinstance(value, bool) and ("bytes" in key or key == "memory"):
        return f"{value / 2**30:.1f} GiB" if value >= 2**30 else f"{value / 2**20:.0f} MiB"
    return value


def evidence_text(evidence: dict[str, Any]) -> str:
    """ "plain: CPU model=Ice Lake, vCPUs=2; tdx: ..." (the values seen, per machine)."""
    parts = []
    for machine, values in evidence.items():
        if isinstance(values, dict):
            shown = ", ".join(f"{key}={_value(key, value)}" for key, value in values.items() if value is not None)
            parts.append(f"{machine}: {shown or 'nothing recorded'}")
        elif isinstance(values, list):
            parts.append(f"{machine}: {_value(machine, values)}")
        else:
            parts.append(f"{machine}: {values}")
    return "; ".join(parts)


def build(ctx: ReportContext) -> Section | None:
    if ctx.samples is None or ctx.samples.empty:
        return None
    machines, device_io = bundle_machines(ctx.bundles)
    executions = {str(bundle.path): bundle.executions for bundle in ctx.bundles}
    tails = tail_series(ctx.engine) if ctx.engine is not None else None
    own_paths = own_path_variants(ctx.bundles, ctx.samples)
    findings = lint_comparison(
        ctx.samples, ctx.comparison, machines, device_io, executions=executions, tails=tails, own_paths=own_paths
    )
    intro = (
        "Known traps checked on the machines behind this comparison (docs/trust.md, section Lint): machines that "
        "differ in more than the layer compared (their kernels a confound beside the TEE), different clock "
        "sources, a debug TEE, small bounce buffers under I/O in a SEV or TDX guest and a bounce pool that filled "
        "during an execution, 4K against 2M guest pages, encryption far below its cipher's speed measured in "
        "the same run, percentiles that rest on few operations, and a --storage-path directory that is not what "
        "its variant's name says. "
    )
    if not findings:
        return Section(title="Lint: known traps", intro=intro + "None was found.")
    table = pd.DataFrame(
        [
            {
                "severity": f.severity,
                "finding": f.code,
                "what": f.what,
                "evidence": evidence_text(f.evidence),
                "what to do": f.advice,
                "source": f.source,
            }
            for f in findings
        ]
    )
    return Section(
        title="Lint: known traps",
        intro=intro + f"{len(findings)} finding{'s' if len(findings) != 1 else ''}; a high one means a number above "
        "is not what it claims.",
        tables=[Table("findings", table)],
    )
