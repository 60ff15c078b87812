"""ccbench gate: did a new run make any primary metric worse, beyond noise? An exit status for CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

from ccbench.commands.options import allow_unverified_option, labels_option


def _threshold(text: str | None) -> float | None:
    from ccbench.errors import CCBenchError

    if text is None:
        return None
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise CCBenchError(f"--threshold {text!r}: not a percentage; give e.g. 5% or 2.5") from None
    if not 0 <= value < 1000:
        raise CCBenchError(f"--threshold {text!r}: give a percentage between 0 and 1000, e.g. 5%")
    return value / 100


@click.command()
@click.argument("new", nargs=-1, required=True, type=click.Path())
@click.option(
    "--against",
    "against",
    multiple=True,
    required=True,
    metavar="BASELINE|STORE",
    help="Baseline bundles (or directories of them; repeatable), or a history store (a DuckDB file or a "
    "Parquet directory, as in ccbench history).",
)
@click.option(
    "--threshold",
    metavar="PERCENT",
    help="Fail when a primary metric got significantly worse by more than this, e.g. 5%. "
    "Default: significantly worse by more than the comparison's own minimum detectable effect.",
)
@click.option("--markdown", "markdown_path", type=click.Path(), help="Write a Markdown summary here (for a PR).")
@click.option("--junit", "junit_path", type=click.Path(), help="Write a JUnit XML file here (for a CI page).")
@click.option(
    "--confirm",
    "confirm_plan",
    metavar="PLAN",
    help="On a failure, run PLAN again for the failing workloads only (ccbench run PLAN --only ...) and "
    "report each failing case as confirmed or not reproduced; exit 1 only for confirmed ones.",
)
@click.option(
    "--confirm-out",
    type=click.Path(),
    default="results/confirm",
    show_default=True,
    help="Where --confirm writes its bundle.",
)
@click.option(
    "--workdir",
    type=click.Path(),
    default=".ccbench/work",
    show_default=True,
    help="The work directory of the --confirm run (as ccbench run's).",
)
@labels_option
@allow_unverified_option
def command(
    new, against, threshold, markdown_path, junit_path, confirm_plan, confirm_out, workdir, labels, allow_unverified
) -> None:
    """Judge the run in NEW (bundles or directories of bundles) against a baseline: exit 1 when a
    primary metric got worse beyond the threshold, 0 otherwise, 2 on bad input.

    Prints each failing case and the workloads to run again (in the form ccbench run --only takes).
    """
    from ccbench.analysis import gate
    from ccbench.analysis.load import parse_labels
    from ccbench.attestation.onread import check_before_reading, unverified_warning
    from ccbench.errors import CCBenchError
    from ccbench.results import gate as sources

    limit = _threshold(threshold)
    label_map = parse_labels(labels)
    # only what verifies is judged: the new run, and baseline bundles (a store holds medians already read)
    unverified = check_before_reading([*new, *(a for a in against if not sources.is_store(a))], allow_unverified)
    if unverified:
        click.echo(f"warning: {unverified_warning(unverified)}", err=True)
    rows, what = _rows(new, against, label_map)
    if rows.empty:
        raise CCBenchError(f"nothing to judge: no primary metric of {', '.join(new)} is in {what}")
    results = gate.judge(rows, limit)
    failing = gate.failing_workloads(results)
    if failing:
        only = ",".join(failing)
        click.echo(f"{sum(r.failed for r in results)} of {len(results)} primary metric cases got worse against {what}:")
        for r in results:
            if r.failed:
                click.echo(f"  FAIL {r.name}: {r.why}")
        click.echo(f"rerun: ccbench run {confirm_plan or 'PLAN'} --only {only}")
        if confirm_plan:
            _confirm(results, confirm_plan, only, (confirm_out, workdir), against, label_map, limit)
    else:
        click.echo(f"passed: none of {len(results)} primary metric cases got worse against {what}")
    _write(markdown_path, gate.markdown(results, what, limit))
    _write(junit_path, gate.junit(results, what))
    if any(r.failed for r in results):
        sys.exit(1)


def _rows(new, against, labels):
    from ccbench.errors import CCBenchError
    from ccbench.results import gate as sources

    stores = [a for a in against if sources.is_store(a)]
    if stores and len(against) > 1:
        raise CCBenchError("--against: give one history store, or baseline bundles, not both")
    if stores:
        return sources.rows_against_store(new, stores[0], labels), f"the history store {stores[0]}"
    return sources.rows_against_bundles(new, against, labels), f"the baseline {', '.join(against)}"


def _confirm(results, plan, only, where, against, labels, limit) -> None:
    """Run the plan again for the failing workloads only (``where``: its out and work directories),
    judge that run against the same baseline, and mark each failing case confirmed (it fails again)
    or not reproduced."""
    from ccbench.analysis import gate

    out, workdir = where
    before = set(Path(out).glob("*/manifest.json"))
    command = [sys.executable, "-m", "ccbench", "run", plan, "--only", only, "--out", out, "--workdir", workdir]
    click.echo(f"confirming: {' '.join(command[2:])}")
    done = subprocess.run(command, check=False)
    bundles = sorted(set(Path(out).glob("*/manifest.json")) - before)
    if done.returncode not in (0, 1) or not bundles:
        click.echo(f"confirmation run failed (exit {done.returncode}): every failing case stays failing")
        return
    rows, _ = _rows([str(b.parent) for b in bundles], against, labels)
    again = {r.key: r for r in gate.judge(rows, limit)}
    for r in results:
        if r.status == gate.REGRESSION:
            repeat = again.get(r.key)
            r.confirmation = (
                gate.CONFIRMED if repeat is not None and repeat.status == gate.REGRESSION else gate.NOT_REPRODUCED
            )
            click.echo(f"  {r.confirmation}: {r.name}")


def _write(path, text: str) -> None:
    if path:
        from ccbench.fsutil import write_text_atomic

        write_text_atomic(Path(path), text)
