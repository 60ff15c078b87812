"""ccbench compare: ratios with 95% intervals between configurations, and the verdict per layer."""

from __future__ import annotations

import json
import math
import warnings

import click

from ccbench.commands.options import (
    allow_unverified_option,
    baseline_option,
    exclude_contended_option,
    jobs_option,
    labels_option,
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
@click.option("--summary", is_flag=True, help="Print only the verdict per protection layer (the report's first table).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per row (with --summary: one per layer).")
@jobs_option("reading bundles")
@allow_unverified_option
def command(bundles, baseline, labels, noisy_cv, exclude_contended, summary, as_json, jobs, allow_unverified) -> None:
    """Compare configurations in BUNDLE... (bundles or directories of bundles).

    Per workload, case and metric: the median per configuration, the ratio to the baseline
    (geometric means) with its 95% interval (Welch on log values), the overhead in percent,
    whether it is significant, the protection layer that differs, the CV of each side, the sample
    counts and how many of them came from contended executions. Warmups are excluded. Flags: "not
    enough samples" (n < 3), "noisy" (CV above --noisy-cv), "not significant", "contended",
    "confounded by <what>" (the machines of the two sides differ in CPU model, vCPUs, memory, SMT or
    kernel). The table opens with the verdict per protection layer (--summary prints only that) and
    the lint's findings (docs/trust.md, Lint); with --json each finding is one more object
    ({"finding": code, ...}) after the rows or layers.
    """
    from ccbench.analysis.compare import compare
    from ccbench.analysis.verdict import verdicts
    from ccbench.cli import skip_teardown
    from ccbench.lint import bundle_machines, lint_comparison

    # the verdict (printed unless --json alone) reads the engine's bounded per-sample frame: its
    # application shares need a per-message workload's samples (every sample up to the engine's
    # budget, a systematic sample beyond); --json alone needs none
    with_verdict = summary or not as_json
    samples, loaded = _load(bundles, labels, jobs, frame=with_verdict, allow_unverified=allow_unverified)
    machines, device_io = bundle_machines(loaded)
    table = compare(samples, baseline, noisy_cv=noisy_cv / 100, exclude_contended=exclude_contended, machines=machines)
    _check_something_compared(table, samples, exclude_contended)
    skip_teardown()  # nothing left to clean up: output only
    layers = verdicts(table, samples.sample) if with_verdict else []
    findings = lint_comparison(samples.sample if with_verdict else _lint_rows(samples), table, machines, device_io)
    if as_json and summary:
        _print_verdict_json(layers)
    elif as_json:
        _print_rows_json(table, samples.sources)
    else:
        excluded = " (contended executions excluded)" if exclude_contended else ""
        _print_verdict(table, samples.executions, layers, excluded)
        _print_findings(findings)
        if not summary:
            _print_comparison(table, excluded)
    if as_json:
        for finding in findings:
            record = finding.to_dict()
            click.echo(_json_line({"finding": record.pop("code"), **record}))


def _lint_rows(samples):
    """What the lint reads of the samples without a per-sample frame: one row of facts per
    configuration and bundle (the machines compared) and every sample of the metrics its cipher-speed
    check reads (throughputs and the AEAD ceiling)."""
    import numpy as np
    import pandas as pd

    from ccbench.lint import THROUGHPUT, TRANSPORT_CEILING

    rows = samples.measured_frame(lambda group: group[3] in (THROUGHPUT, TRANSPORT_CEILING))
    facts = samples.facts.drop(columns=["first", "first_quiet"]).assign(metric=None, value=np.nan, warmup=False)
    return pd.concat([rows, facts], ignore_index=True)


def _load(bundles, labels, jobs, frame: bool = True, allow_unverified: bool = False):
    """The samples of the bundles as the engine's SampleSet (ccbench.analysis.engine), and the
    bundles (their probes and plans); the bundles' warnings printed, no samples an error."""
    from ccbench.analysis.engine import sample_set
    from ccbench.analysis.load import load_bundles, parse_labels
    from ccbench.attestation.onread import check_before_reading, unverified_warning
    from ccbench.console import console
    from ccbench.errors import CCBenchError
    from ccbench.helper import Helper

    unverified = check_before_reading(bundles, allow_unverified)
    if unverified:
        console.print(f"warning: {unverified_warning(unverified)}", markup=False)
    with warnings.catch_warnings(record=True) as caught, Helper(jobs) as helper:
        warnings.simplefilter("always")
        loaded = load_bundles(bundles, samples=False)
        samples = sample_set(loaded, parse_labels(labels), helper, frame=frame)
    for warning in caught:
        console.print(f"warning: {warning.message}")
    if samples.empty:
        raise CCBenchError("the bundles hold no samples to compare")
    return samples, loaded


def _check_something_compared(table, samples, exclude_contended: bool) -> None:
    """An empty comparison is an error that says why: everything left out as contended, or one
    configuration per workload."""
    from ccbench.errors import CCBenchError

    counts = samples.counts()
    contended = int(counts["contended"].sum())
    if table.empty and exclude_contended and contended:
        raise CCBenchError(
            f"--exclude-contended: {contended} of {int(counts['measured'].sum())} measured samples came from "
            "contended executions "
            "and what is left holds nothing to compare; run again on a quiet machine, or compare without the option "
            "(the contended rows are then flagged)"
        )
    if table.empty:
        configs = sorted(set(samples.facts["config"]))
        raise CCBenchError(
            f"nothing to compare: the bundles hold one configuration per workload ({'; '.join(configs)}); "
            "give bundles from other machines or runs with several variants"
        )


def _json_line(record: dict) -> str:
    return json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in record.items()})


def _print_verdict_json(layers) -> None:
    """--summary --json: one object per protection layer."""
    for item in layers:
        record = {k: v for k, v in item.__dict__.items()}
        record["overhead_percent"] = item.overhead
        click.echo(_json_line(record))


def _print_rows_json(table, raw) -> None:
    """--json: one object per comparison row, with the raw directories of both sides' samples."""
    sources = _sources(raw)
    for row in table.to_dict(orient="records"):
        key = (row["workload"], row["params"], row["metric"])
        row["params"] = json.loads(row["params"])
        if sources:
            row["raw_baseline"] = sources.get(key + (row["baseline"],), [])
            row["raw"] = sources.get(key + (row["config"],), [])
        click.echo(_json_line(row))


def _print_verdict(table, executions, layers, excluded: str) -> None:
    """The verdict per protection layer as a table, then each layer's sentence."""
    from rich.table import Table

    from ccbench.analysis.verdict import contended_executions, verdict_table
    from ccbench.console import stdout

    contended, executions = contended_executions(executions)
    verdict = Table(
        title=f"verdict per protection layer against {table['baseline'].iloc[0]}{excluded}; "
        f"{contended} of {executions} executions contended",
        title_justify="left",
    )
    frame_text = verdict_table(layers)
    for column in frame_text.columns:
        verdict.add_column(column, overflow="fold")
    for row in frame_text.itertuples(index=False):
        verdict.add_row(*row)
    stdout.print(verdict)
    for item in layers:
        stdout.print(f"- {item.sentence()}")


def _print_findings(findings) -> None:
    """The lint's findings on the compared machines (docs/trust.md, Lint), after the verdict."""
    from ccbench.console import stdout
    from ccbench.lint import format_findings

    if findings:
        stdout.print(f"lint: {len(findings)} finding{'s' if len(findings) != 1 else ''} (docs/trust.md, Lint)")
        stdout.print(format_findings(findings), markup=False, highlight=False)
    else:
        stdout.print("lint: no findings (docs/trust.md, Lint)")


def _print_comparison(table, excluded: str) -> None:
    """The comparison table, each verdict coloured (slower red, faster green; "~" not significant)."""
    from rich.table import Table

    from ccbench.analysis import format as fmt
    from ccbench.console import stdout

    out = Table(title=f"baseline: {table['baseline'].iloc[0]}{excluded}", title_justify="left")
    cells = fmt.comparison_table(table)
    for column in cells.columns:
        out.add_column(column, overflow="fold")
    for row, verdict_word in zip(cells.itertuples(index=False), table["verdict"]):
        values = list(row)
        colour = "red" if verdict_word == "slower" else "green" if verdict_word == "faster" else ""
        index = list(cells.columns).index("verdict")
        values[index] = (
            f"[{colour}]{verdict_word}[/{colour}]"
            if colour
            else ("~" if verdict_word == "not significant" else verdict_word)
        )
        out.add_row(*values)
    stdout.print(out)


def _sources(raw) -> dict:
    """{(workload, params, metric, config): the raw directories (bundle-relative) of its samples} for
    bundles of format 2, so that a number in --json leads to the tool's own output in one hop.
    ``raw``: the SampleSet's distinct measured (workload, params, metric, config, raw)."""
    if raw.empty:
        return {}
    grouped = raw.groupby(["workload", "params", "metric", "config"], sort=False)["raw"].unique()
    return {key: sorted(values) for key, values in grouped.items()}
