"""ccbench history: a results store over time, and the change points in its series."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ccbench.commands.options import allow_unverified_option, labels_option

STORE_HELP = (
    "The results store: a DuckDB file (default ~/.local/share/ccbench/history.duckdb), or a directory "
    "(a path ending in '/') of Parquet files partitioned by date and machine label."
)


def _store(path):
    from ccbench.results.history import Store, default_store

    return Store(path if path else default_store())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def command() -> None:
    """The cost over time: put bundles into a store (add), see each series with the change points
    Apache Otava finds in it (show), or as an HTML page (report)."""


@command.command()
@click.argument("bundles", metavar="BUNDLE...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--store", "store_path", default=None, help=STORE_HELP)
@labels_option
@allow_unverified_option
def add(bundles, store_path, labels, allow_unverified) -> None:
    """Add each finished bundle's run medians (one point per configuration, workload, case and metric)
    to the store, all at once or not at all, each under its absolute path. A bundle already in it (by
    the digest of its content) adds nothing; a bundle named that is still running is refused, and one
    found under a directory whose run has not ended (interrupted) is left out, as is one without a
    measured sample (every execution failed): each named with why; a bundle that does not verify is
    refused (--allow-unverified reads it, said)."""
    from ccbench.analysis.samples.load import parse_labels
    from ccbench.attestation.onread import check_before_reading, unverified_warning
    from ccbench.results.history import add_bundles

    unverified = check_before_reading(bundles, allow_unverified, finished_only=True)
    if unverified:
        click.echo(f"warning: {unverified_warning(unverified)}", err=True)

    store = _store(store_path)
    left_out: list[str] = []
    added, skipped = add_bundles(bundles, store, parse_labels(labels, within=bundles), left_out)
    if added or skipped:
        left = f", {len(left_out)} left out" if left_out else ""
        click.echo(f"{store.path}: {added} bundle(s) added, {skipped} already there{left}")
    else:
        # only runs left out (a night whose run was interrupted): no count that reads as if one were added
        click.echo(f"{store.path}: nothing added; {len(left_out)} left out")
    for line in left_out:
        click.echo(f"  left out {line}")


def _filters(function):
    for option in (
        click.option("--store", "store_path", default=None, help=STORE_HELP),
        click.option("--label", default=None, help="Only this machine label."),
        click.option("--workload", default=None, help="Only this workload."),
        click.option("--metric", default=None, help="Only this metric."),
    ):
        function = option(function)
    return function


@command.command()
@_filters
@click.option("--json", "as_json", is_flag=True, help="One JSON object per series.")
def show(store_path, label, workload, metric, as_json) -> None:
    """First the configurations and the series of each plan (a series is one machine label, plan,
    configuration, workload with its parameters, case and metric: runs of another plan or other
    parameters never join it). Per configuration one line (its series, its runs, how many moved),
    then one line per series that moved with each change point, found over every run in the store:
    its size in compare's convention (a throughput's drop from 0.104 to 0.0724 MB/s is "43.6% slower"),
    its 95% interval and what changed between the runs around it (kernel, ccbench version, CPU microcode, TEE, plan, and every field of the CC
    provenance); the series that did not move are counted, not listed (--json lists every series).
    Times in the unit that needs no exponent (12.3 µs). Contended runs are counted but left out of the
    detection."""
    from ccbench.results.history import history
    from ccbench.results.history_show import series_json, show_lines

    series, reason = history(_store(store_path), label, workload, metric)
    if as_json:
        for s in series:
            click.echo(json.dumps({**series_json(s), "change_points_not_computed": reason}, default=str))
        return
    for line in show_lines(series, reason):
        click.echo(line)


@command.command()
@_filters
@click.option("-o", "--output", "out", required=True, type=click.Path(path_type=Path), help="The HTML file.")
def report(store_path, label, workload, metric, out) -> None:
    """One offline HTML page: what moved first, in history show's lines (a line per configuration, a
    line per series that moved with its change points), then a series picker grouped by configuration
    (series of one run counted, listed on request) and an interactive chart of the chosen series."""
    from ccbench.basics.errors import CCBenchError
    from ccbench.basics.fsutil import write_text_atomic
    from ccbench.results.history import history
    from ccbench.results.history_report import render

    store = _store(store_path)
    series, reason = history(store, label, workload, metric)
    if not out.parent.exists():
        raise CCBenchError(f"-o {out}: the directory {out.parent} does not exist")
    write_text_atomic(out, render(series, reason, store.path))
    click.echo(f"{out}: {len(series)} series, {sum(len(s.change_points) for s in series)} change point(s)")
