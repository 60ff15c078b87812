"""ccbench compare: ratios with 95% intervals between configurations, and the verdict per layer."""

from __future__ import annotations

import json
import math
import warnings

import click

from ccbench.commands.compare_text import (
    _print_breakdowns,
    _print_comparison,
    _print_findings,
    _print_settled,
    _print_verdict,
)
from ccbench.commands.options import (
    allow_unverified_option,
    baseline_option,
    exclude_contended_option,
    jobs_option,
    labels_option,
    pairs_option,
)


@click.command()
@click.argument("bundles", nargs=-1, required=True, type=click.Path())
@baseline_option
@labels_option
@click.option(
    "--noisy-cv",
    type=float,
    default=5.0,
    show_default=True,
    help="Flag configurations whose CV exceeds this (percent).",
)
@exclude_contended_option
@click.option(
    "--summary",
    is_flag=True,
    help="Print only the verdict per protection layer (at most two lines each), the lint's findings, "
    "one line per kind of finding, and for a run that settled its cases each layer's or settled variant's "
    "line (no line per case).",
)
@click.option(
    "--details",
    is_flag=True,
    help="Also the verdict's wide table, every metric (supporting ones too) and the table's wide columns "
    "(layer, MDE, CV, n, machines, contended, flags).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per row (with --summary: one per layer).")
@pairs_option
@click.option(
    "--twin",
    "twins",
    multiple=True,
    metavar="MECHANISM=LABEL",
    help="A mechanism twin: the machine (or configuration) LABEL is the baseline with MECHANISM forced on "
    "(bounce-buffers, idle, ...); twins booted with swiotlb=force or idle=poll are recognised without it (repeatable).",
)
@jobs_option("reading bundles")
@allow_unverified_option
def command(
    bundles,
    baseline,
    labels,
    noisy_cv,
    exclude_contended,
    summary,
    details,
    as_json,
    pairs,
    twins,
    jobs,
    allow_unverified,
) -> None:
    """Compare configurations in BUNDLE... (bundles or directories of bundles; a fleet run's directory
    is read as the fleet compares it: its bundles labelled by their hosts' ccbench_label, the
    baseline label's first).

    Per workload, case and metric: the median per configuration, the ratio to the baseline
    (geometric means) with its 95% interval (Welch on log values), the effect in words ("2.9x
    slower [2.6x, 3.3x]", "1.31x faster", "4.2% slower"), whether it is significant, the protection
    layer that differs, the CV of each side, the sample counts and how many came from contended
    executions. Warmups are excluded. Flags: "not enough samples" (n < 3), "noisy" (CV above
    --noisy-cv), "not significant", "not called across its layer" (a run settled by layer: its own
    interval excludes 1, but e-BH did not call it across its layer, so it is not significant),
    "contended", "confounded by <what>" (the machines of the two
    sides differ in CPU model, vCPUs, memory, SMT or kernel), "implausible" (numbers that cannot be
    what they claim: throughput and latency against Little's law, direct I/O the kernel served
    buffered, faster than tmpfs; the reason is the row's ``implausible`` field, docs/analysis.md
    "Implausible rows"; such rows are left out of the verdict and named). Each row carries the
    smallest cost it could detect (MDE: 80% power at the 5% level).

    The output opens with the verdict per protection layer (docs/analysis.md, Verdict semantics):
    one figure only where a layer's rows agree in direction and are not heterogeneous, else the
    range with directions; "no cost above X%" only where nothing is significant; then one line
    per workload, each layer's sentence, the lint's findings (docs/trust.md, Lint), a breakdown
    by mechanism for the rows where a mechanism was measured or a twin given, and the table: one
    row per case and primary metric, grouped by workload (--details: every metric and column, and
    the verdict's wide table). --summary prints only the verdict's lines (at most two a layer),
    one line per kind of finding and, of the settled cases below, each header and each layer's or
    settled variant's line (no line per case). A bundle whose run settled its cases (run --settle)
    adds each case's answer, recomputed from its samples with the run's interval (the repeated interval for
    its round limit, or anytime-valid where its record names no limit), and those
    cases' rows use that interval on the paired rounds instead of Welch's (the row's "interval" and
    "settled"), so the verdict says what the run said; a fleet run that settled its cases across labels
    (fleet run --mode rounds --settle) likewise for its cross-label rows, recomputed from its bundles. With --json each row is one object ({"finding": code, ...}
    after the rows); with --summary --json one object per layer, with its words.

    Without --baseline or --pair, each machine with a TEE is compared with a machine without one of
    the same CPU model (else vendor) where one exists, the rest with the first bundle's least
    protected configuration.
    """
    from ccbench.analysis.rows.breakdown import for_comparison, parse_twins
    from ccbench.basics.console import skip_teardown

    named_twins = parse_twins(twins)  # a bad --twin fails before any bundle is read
    # the verdict (printed unless --json alone) reads the engine's bounded per-sample frame: its
    # application shares need a per-message workload's samples (every sample up to the engine's
    # budget, a systematic sample beyond); --json alone needs none
    with_verdict = summary or not as_json
    if pairs and baseline:
        from ccbench.basics.errors import CCBenchError

        raise CCBenchError("--pair and --baseline: give one (--pair names a baseline per machine)")
    result = _compare(
        bundles, labels, jobs, baseline, with_verdict, noisy_cv / 100, exclude_contended, allow_unverified, pairs
    )
    result.require_rows()
    skip_teardown()  # nothing left to clean up: output only
    table = result.table
    layers = result.verdicts() if with_verdict else []
    findings = result.findings(per_sample=with_verdict)
    parts, twin_findings = for_comparison(result.engine, table, result.machines, named_twins)
    findings += twin_findings
    shares = _wakeup_shares(table, result.engine) if not summary else []
    if as_json and summary:
        _print_verdict_json(layers)
    elif as_json:
        _print_rows_json(table, result.engine, parts, shares)
    else:
        excluded = " (contended executions excluded)" if exclude_contended else ""
        _print_verdict(
            table, result.engine.executions, layers, excluded, details, summary, result.uncompared(), result.machines
        )
        if not summary:
            _print_breakdowns(table, parts)
            _print_wakeup_shares(table, shares)
        _print_findings(findings, summary, layers)
        _print_settled(result.bundles, result.implausible_settled(), cases=not summary)
        if not summary:
            _print_comparison(table, excluded, details, result.engine.sample)
    if as_json:
        for finding in findings:
            record = finding.to_dict()
            click.echo(_json_line({"finding": record.pop("code"), **record}))


def _compare(
    bundles,
    labels,
    jobs,
    baseline,
    frame: bool,
    noisy_cv: float,
    exclude_contended: bool,
    allow_unverified: bool,
    pairs=(),
):
    """The comparison of the bundles (ccbench.analysis.comparison), only of bundles that verify (or
    with --allow-unverified, said); their warnings printed, no samples an error."""
    from ccbench.analysis.comparison import comparison
    from ccbench.analysis.samples.load import parse_labels
    from ccbench.analysis.settling.fleet_settle import fleet_paths
    from ccbench.attestation.onread import check_before_reading, unverified_warning
    from ccbench.basics.console import console, say, warn
    from ccbench.basics.errors import CCBenchError
    from ccbench.basics.helper import Helper

    # a fleet directory: its bundles, the baseline label's first and labelled by their hosts' labels, as the
    # fleet's own compare reads them
    bundles, fleet_labels = fleet_paths(bundles)
    unverified = check_before_reading(bundles, allow_unverified)
    if unverified:
        say(f"warning: {unverified_warning(unverified)}", console)
    given_labels = {**fleet_labels, **parse_labels(labels, within=bundles)}
    with warnings.catch_warnings(record=True) as caught, Helper(jobs) as helper:
        warnings.simplefilter("always")
        result = comparison(
            bundles,
            given_labels,
            baseline,
            helper=helper,
            frame=frame,
            noisy_cv=noisy_cv,
            exclude_contended=exclude_contended,
            pairs=pairs,
        )
    for warning in caught:
        warn(warning.message)  # one plain line each, once: the settled section may read the bundle again
    if result.engine.empty:
        raise CCBenchError("the bundles hold no samples to compare")
    return result


def _json_line(record: dict) -> str:
    """One JSON object; a NaN or infinity at any depth (a workload's missing MDE) is null, never the
    invalid token NaN."""
    return json.dumps(_finite(record), allow_nan=False)


def _finite(value):
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _is_nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _print_verdict_json(layers) -> None:
    """--summary --json: one object per protection layer."""
    for item in layers:
        click.echo(_json_line(verdict_record(item)))


def verdict_record(item) -> dict:
    """One layer of ``--summary --json``: its fields, its headline lines, and the judgement's words
    beside its numbers (ccbench.analysis.judgement.semantics)."""
    from ccbench.analysis import format as fmt
    from ccbench.analysis.judgement import semantics
    from ccbench.analysis.judgement.headline import layer_lines
    from ccbench.analysis.judgement.verdict_table import detection_floor

    record = {k: v for k, v in item.__dict__.items()}
    record["overhead_percent"] = item.overhead
    record["headline"] = layer_lines(item, width=None)
    # the judgement in the one convention's words (ccbench.analysis.judgement.semantics), beside the numbers
    judgement = record.pop("judgement")
    record["workload_judgements"] = [
        {"workload": w, "kind": j.kind, "words": j.phrase(), **_numbers(j)} for w, j in item.workload_judgements
    ]
    record["words"] = item.words()
    # ``mde`` is a fraction (1.80: a case would need +180%, 2.8x, to show): each case's detection floor,
    # never the layer's bound, which is the judgement's (``judgement.mde``, said in ``words``)
    record["detection_floor"] = detection_floor(item)
    bound = judgement is not None and judgement.kind == semantics.NONE_SEEN and not _is_nan(judgement.mde)
    record["no_cost_above"] = fmt.mde(judgement.mde) if bound else None
    record["distinguishable"] = item.distinguishable
    record["judgement"] = {"kind": judgement.kind, **_numbers(judgement)} if judgement is not None else None
    return record


def _numbers(judgement) -> dict:
    from dataclasses import asdict

    return {k: (None if _is_nan(v) else v) for k, v in asdict(judgement).items() if k != "kind"}


def _wakeup_shares(table, engine) -> list[dict]:
    """Per row: the share of its executions' time their cross-vCPU wake-ups take on each side, or what
    is missing (ccbench.analysis.rows.wakeups)."""
    from ccbench.analysis.rows import wakeups

    if table.empty:
        return []
    executions = {str(bundle.path): bundle.executions for bundle in engine.bundles}
    frame = engine.measured_frame(wakeups.wanted)
    return wakeups.wakeup_shares(table, frame, engine.facts, executions, engine.machine_ids)


def _print_wakeup_shares(table, shares) -> None:
    """One line per workload and pair of sides with a wake-up share; else one line saying what is missing."""
    from ccbench.analysis.rows import wakeups
    from ccbench.basics.console import say

    lines = wakeups.share_lines(table, shares)
    if lines:
        say("cross-vCPU wake-ups per execution (IPIs counted / IPIs per wake-up x the wake-up case's latency):")
        for line in lines:
            say(line)
    elif (missing := wakeups.missing_text(table, shares)) is not None:
        say(missing)


def _print_rows_json(table, engine, parts, shares=None) -> None:
    """--json: one object per comparison row, with the raw directories of both sides' samples and the
    row's breakdown by mechanism (empty where none applies). A list of directories is written as JSON
    once and spliced into every row that has it (they are the object's last fields): a fleet's
    thousands of series share the executions that measured them."""
    from ccbench.analysis.format import row_effect
    from ccbench.analysis.rows.compare import records
    from ccbench.analysis.samples.series import raw_sources

    sources = raw_sources(engine)
    written: dict[int, str] = {}

    def text(directories: list[str]) -> str:
        found = written.get(id(directories))
        if found is None:
            found = written[id(directories)] = json.dumps(directories)
        return found

    none: list[str] = []
    echo = click.echo
    rows = records(table)
    # _json_line's NaN -> null, looked for only in the columns that hold a missing value somewhere
    nan_columns = [name for name in table.columns if table[name].isna().any()]
    for index, (row, breakdown) in enumerate(zip(rows, parts, strict=True)):
        for name in nan_columns:
            if _is_nan(row[name]):
                row[name] = None
        row["breakdown"] = breakdown
        row["wakeups"] = shares[index] if shares else {}
        row["effect"] = row_effect(row)  # the one convention's words beside the ratio
        key = (row["workload"], row["params"], row["metric"])
        row["params"] = json.loads(row["params"])
        line = json.dumps(row)
        if sources:
            baseline = text(sources.get((*key, row["baseline"]), none))
            line = f'{line[:-1]}, "raw_baseline": {baseline}, "raw": {text(sources.get((*key, row["config"]), none))}}}'
        echo(line)
