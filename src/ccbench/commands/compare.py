"""ccbench compare: ratios with 95% intervals between configurations."""

from __future__ import annotations

import json
import math
import warnings

import click


def _fmt(value, digits=3):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


@click.command()
@click.argument("bundles", nargs=-1, required=True, type=click.Path())
@click.option("--baseline", metavar="LABEL", help="Configuration to compare against (a full label or a unique part of one).")
@click.option("--label", "labels", multiple=True, metavar="BUNDLE=NAME", help="Call a bundle's machine NAME (repeatable).")
@click.option("--noisy-cv", type=float, default=5.0, show_default=True, help="Flag configurations whose CV exceeds this (percent).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per row.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, metavar="N",
              help="Processes to use for reading bundles (default: 2 on a machine with 2 or more CPUs; "
                   "1 = this process only).")
def command(bundles, baseline, labels, noisy_cv, as_json, jobs) -> None:
    """Compare configurations in BUNDLE... (bundles or directories of bundles).

    Per workload, case and metric: the median per configuration, the ratio to the baseline
    (geometric means) with its 95% interval (Welch on log values), the overhead in percent,
    whether it is significant, the CV of each side and the sample counts. Warmups are excluded.
    Flags: "not enough samples" (n < 3), "noisy" (CV above --noisy-cv), "not significant".
    """
    from rich.table import Table

    from ccbench.analysis.compare import compare
    from ccbench.analysis.load import frame_from_bundles, load_bundles, parse_labels
    from ccbench.cli import skip_teardown
    from ccbench.console import console, fmt_number, stdout
    from ccbench.errors import CCBenchError
    from ccbench.helper import Helper

    with warnings.catch_warnings(record=True) as caught, Helper(jobs) as helper:
        warnings.simplefilter("always")
        frame = frame_from_bundles(load_bundles(bundles, samples=False), parse_labels(labels), helper)
    for warning in caught:
        console.print(f"warning: {warning.message}")
    if frame.empty:
        raise CCBenchError("the bundles hold no samples to compare")
    table = compare(frame, baseline, noisy_cv=noisy_cv / 100)
    if table.empty:
        configs = sorted(set(frame["config"]))
        raise CCBenchError(
            f"nothing to compare: the bundles hold one configuration per workload ({'; '.join(configs)}); "
            "give bundles from other machines or runs with several variants"
        )
    skip_teardown()  # nothing left to clean up: output only
    if as_json:
        for row in table.to_dict(orient="records"):
            row["params"] = json.loads(row["params"])
            click.echo(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}))
        return
    out = Table(title=f"baseline: {table['baseline'].iloc[0]}", title_justify="left")
    for column in ("workload", "case", "metric", "config", "median base -> config", "ratio [95% CI]", "overhead",
                   "verdict", "CV %", "n", "flags"):
        out.add_column(column, overflow="fold")
    for row in table.itertuples(index=False):
        interval = f"{_fmt(row.ratio)} [{_fmt(row.ci_low)}, {_fmt(row.ci_high)}]"
        cv = f"{_fmt((row.cv_baseline or 0) * 100, 1)}/{_fmt((row.cv or 0) * 100, 1)}"
        colour = "red" if row.verdict == "slower" else "green" if row.verdict == "faster" else ""
        verdict = f"[{colour}]{row.verdict}[/{colour}]" if colour else ("~" if row.verdict == "not significant" else row.verdict)
        out.add_row(row.workload, row.case, f"{row.metric} ({row.unit})", row.config,
                    f"{fmt_number(row.baseline_median)} -> {fmt_number(row.median)}", interval,
                    f"{row.overhead_percent:+.1f}%", verdict, cv, f"{row.n_baseline}/{row.n}", ", ".join(row.flags))
    stdout.print(out)
