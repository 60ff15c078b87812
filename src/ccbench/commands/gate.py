"""ccbench gate: did a new run make any primary metric worse, beyond noise? An exit status for CI."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import click

from ccbench.commands.options import allow_unverified_option, exclude_contended_option, labels_option, workdir_option


def _threshold(text: str | None) -> float | None:
    """The threshold as a fraction of the time-equivalent change: "5%" is 0.05. The percent sign is
    required: a bare 0.05 could mean 5% or 0.05%, and the gate never guesses."""
    from ccbench.basics.errors import CCBenchError

    if text is None:
        return None
    stripped = text.strip()
    if not stripped.endswith("%"):
        raise CCBenchError(
            f"--threshold {text!r}: give a percentage with its sign, e.g. 5% (a bare number could be a fraction "
            "or a percentage)"
        )
    try:
        value = float(stripped[:-1])
    except ValueError:
        raise CCBenchError(f"--threshold {text!r}: not a percentage; give e.g. 5% or 2.5%") from None
    if not 0 <= value < 1000:
        raise CCBenchError(f"--threshold {text!r}: give a percentage between 0% and 1000%, e.g. 5%")
    return value / 100


def _budget(text: str) -> float:
    from ccbench.basics.errors import CCBenchError
    from ccbench.planning.plan import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise CCBenchError(f"--confirm-budget {text}: {str(exc).removeprefix(f'duration {text!r}: ')}") from None


@click.command()
@click.argument("new", nargs=-1, required=True, type=click.Path())
@click.option(
    "--against",
    "against",
    multiple=True,
    required=True,
    metavar="BASELINE|STORE",
    help="Baseline bundles (or directories of them; repeatable), or a history store (a DuckDB file or a "
    "Parquet directory, as in ccbench history; a *.duckdb or DIR/ path not made yet is an empty store: "
    "building the baseline).",
)
@click.option(
    "--threshold",
    metavar="PERCENT",
    help="Fail when a primary metric got significantly worse by more than this, with its % sign (5%, never "
    "0.05), in compare's convention: the time-equivalent change, so 40% means 1.4x the time, or a throughput "
    "down to 1/1.4 (29% lower). Default: significantly worse by more than the comparison's own minimum "
    "detectable effect.",
)
@click.option("--markdown", "markdown_path", type=click.Path(), help="Write a Markdown summary here (for a PR).")
@click.option("--junit", "junit_path", type=click.Path(), help="Write a JUnit XML file here (for a CI page).")
@click.option(
    "--confirm",
    "confirm_plan",
    metavar="PLAN",
    help="On a failure, run PLAN again for the failing workloads only (ccbench run PLAN --only ...), run after "
    "run until each failing case is settled against the baseline by an interval valid however often it is looked "
    "at (the threshold, else the case's MDE, as the target), or --confirm-budget / --confirm-runs end them; report "
    "each as confirmed, not reproduced or unsettled; exit 1 unless every failing case is not reproduced. Against a "
    "history store: one run, judged as the gate judges.",
)
@click.option(
    "--confirm-budget",
    default="10m",
    show_default=True,
    metavar="DURATION",
    help="No further --confirm run starts that would pass this time since the first (e.g. 10m, 1h).",
)
@click.option(
    "--confirm-runs",
    type=click.IntRange(1, 100),
    default=5,
    show_default=True,
    help="The most --confirm runs.",
)
@click.option(
    "--confirm-out",
    type=click.Path(),
    default="results/confirm",
    show_default=True,
    help="Where --confirm writes its bundles.",
)
@workdir_option("The work directory of the --confirm run (as ccbench run's).")
@exclude_contended_option
@labels_option
@allow_unverified_option
def command(
    new,
    against,
    threshold,
    markdown_path,
    junit_path,
    confirm_plan,
    confirm_budget,
    confirm_runs,
    confirm_out,
    workdir,
    exclude_contended,
    labels,
    allow_unverified,
) -> None:
    """Judge the run in NEW (bundles or directories of bundles) against a baseline: exit 0 passed,
    1 failed (a primary metric worse beyond the threshold, a case of the baseline the new run lacks,
    or a new run that did not end; a --confirm run that cannot start leaves its cases failing), 2 bad
    input (a run gated against itself among it; runs of different plans: nothing judged, every case
    of the baseline in no workload of the new run's plan or measured with other parameters), 3 a
    bundle that does not verify. A case that cannot
    be judged (too few executions; against a store, a series with fewer than 3 earlier runs: building
    the baseline) fails nothing, is named, and is <skipped/> in the JUnit file.

    Prints the verdict, each failing, not judged and contended case, and the workloads to run again
    (in the form ccbench run --only takes).
    """
    from ccbench.analysis.samples.load import parse_labels
    from ccbench.analysis.settling import gate, gate_pages
    from ccbench.attestation.onread import check_before_reading, unverified_warning
    from ccbench.basics.errors import CCBenchError
    from ccbench.results import gate as sources
    from ccbench.results import gate_runs

    limit = _threshold(threshold)
    imported = gate_runs.imported_formats(new)
    if confirm_plan:
        _budget(confirm_budget)  # a bad budget fails before anything is judged or run
        if imported:
            raise CCBenchError(
                f"--confirm {confirm_plan}: the new run was imported from {', '.join(imported)}, not made "
                "by ccbench run; measure it again with that tool and import it, or leave --confirm out"
            )
    # a --label that names none of the bundles given is a one-line error, never silently ignored (a
    # new run imported from another tool's files is labelled by its file: checked as given)
    bundles = [*new, *(a for a in against if not sources.is_store(a))]
    label_map = parse_labels(labels, within=None if imported else bundles)
    # only what verifies is judged: the new run, and baseline bundles (a store holds medians already read)
    unverified = check_before_reading([*new, *(a for a in against if not sources.is_store(a))], allow_unverified)
    if unverified:
        click.echo(f"warning: {unverified_warning(unverified)}", err=True)
    rows, what, store = _rows(new, against, label_map, exclude_contended)
    if rows.empty:
        raise CCBenchError(f"nothing to judge: no primary metric of {', '.join(new)} is in {what}")
    notes = list(rows.attrs.get("notes", []))
    notes += ["contended executions left out of both sides (--exclude-contended)"] if exclude_contended else []
    verdict = gate.Verdict(
        gate.judge(rows, limit, store=store),
        what,
        limit,
        gate_runs.interrupted(new),
        notes,
        imported,
        plan=gate_runs.plan_of(new),
    )
    results = verdict.results
    _refuse_other_plans(verdict, gate_runs.plan_of(new))
    click.echo(verdict.headline())
    for r in results:
        if r.failed:
            click.echo(f"  FAIL {r.name}: {r.why}")
    for reason, named in verdict.grouped(verdict.not_judged, lambda r: r.why.removeprefix("not judged: ")):
        click.echo(f"  not judged, {reason}: {named}")
    passing = [r for r in verdict.contended() if not r.failed]  # a failure says its own
    for contention, named in verdict.grouped(passing, lambda r: r.contention):
        click.echo(f"  contended, {contention}: {named}")
    for note in notes:
        click.echo(f"  note: {note}")
    rerun = verdict.rerun(confirm_plan)
    if rerun:
        click.echo(f"rerun: {rerun}")
        if confirm_plan and any(r.status == gate.REGRESSION for r in results):
            limits = (_budget(confirm_budget), confirm_runs)
            _confirm(
                results, confirm_plan, (confirm_out, workdir), against, (label_map, exclude_contended), limit, limits
            )
    more = {"interrupted": verdict.interrupted, "notes": verdict.notes, "imported": imported}
    _write(markdown_path, gate_pages.markdown(results, what, limit, **more))
    _write(junit_path, gate_pages.junit(results, what, limit, **more))
    sys.exit(verdict.exit_code)


def _refuse_other_plans(verdict, plan: str | None) -> None:
    """Nothing judged, and every case of the baseline is in no workload of the new run's plan, was
    measured with other parameters, or its workload is set up otherwise in the new plan: the runs are of different plans, which no gate can judge (bad
    input, exit 2), not a run that lost its cases (a failure, exit 1)."""
    from ccbench.analysis.settling.gate import NOT_IN_PLAN, OTHER_PLAN
    from ccbench.basics.errors import CCBenchError
    from ccbench.results.gate import OTHER_PARAMETERS

    results = verdict.results
    absent = [r for r in results if NOT_IN_PLAN in r.why]
    # measured with other parameters, or not at all where the new plan sets the workload up otherwise
    other = [r for r in results if OTHER_PARAMETERS in r.why or OTHER_PLAN in r.why]
    if verdict.judged or not results or len(absent) + len(other) < len(results):
        return
    parts = [f"{len(absent)} in no workload of its plan"] if absent else []
    if other:
        parts.append(
            f"{len(other)} with other parameters or variants ({other[0].why.partition('(')[2].rpartition(')')[0]})"
        )
    raise CCBenchError(
        f"nothing to judge: the new run{f' (plan {plan})' if plan else ''} measured none of the baseline's "
        f"{len(results)} cases as the baseline did: {', '.join(parts)}; gate a run of the baseline's plan"
    )


def _rows(new, against, labels, exclude_contended):
    """(the rows to judge, what they were judged against in words, whether that is a store)."""
    from ccbench.basics.errors import CCBenchError
    from ccbench.results import gate as sources

    stores = [a for a in against if sources.is_store(a)]
    if stores and len(against) > 1:
        raise CCBenchError("--against: give one history store, or baseline bundles, not both")
    if stores:
        rows = sources.rows_against_store(new, stores[0], labels, exclude_contended)
        return rows, f"the history store {stores[0]}", True
    rows = sources.rows_against_bundles(new, against, labels, exclude_contended)
    return rows, f"the baseline {', '.join(against)}", False


def _confirm(results, plan, where, against, labels, limit, limits) -> None:
    """Run the plan again for the failing workloads (``where``: its out and work directories) until
    each failing case is settled against the same baseline (ccbench.analysis.settling.gate.settle_confirmation,
    an interval valid however often it is looked at: after every run), or ``limits`` (the budget in
    seconds, the most runs) end them; each failing case is then confirmed, not reproduced or
    unsettled. Against a history store: one run, judged as the gate judges (a past run's median
    has no executions to settle on)."""
    from ccbench.analysis.settling import gate
    from ccbench.results import gate as sources

    budget, most = limits
    labels, exclude_contended = labels
    failing = [r for r in results if r.status == gate.REGRESSION]
    if any(sources.is_store(a) for a in against):
        made = _run_once(plan, gate.failing_workloads(failing), where)
        if made:
            rows, _, store = _rows([str(b) for b in made], against, labels, exclude_contended)
            again = {r.key: r for r in gate.judge(rows, limit, store=store)}
            for r in failing:
                repeat = again.get(r.key)
                r.confirmation = gate.CONFIRMED if repeat and repeat.status == gate.REGRESSION else gate.NOT_REPRODUCED
                click.echo(f"  {r.confirmation}: {r.name}")
        return
    baseline = sources.case_logs(against, labels)
    made, open_cases, started, run_s = [], failing, time.monotonic(), 0.0
    stop = f"--confirm-runs {most} (the most confirmation runs)"
    for attempt in range(most):
        if attempt and time.monotonic() - started + run_s > budget:
            stop = f"--confirm-budget ({budget:g} s; another run would pass it)"
            break
        run_started = time.monotonic()
        new_bundles = _run_once(plan, list(dict.fromkeys(r.workload for r in open_cases)), where)
        run_s = time.monotonic() - run_started
        if not new_bundles:
            stop = "a failed confirmation run"
            break
        made += new_bundles
        new = sources.case_logs([str(b) for b in made], labels)
        for r in open_cases:
            case_limit = limit if limit is not None else r.mde_percent / 100
            better, base_logs = baseline.get(r.key, (None, []))
            settled = gate.settle_confirmation(new.get(r.key, (better, []))[1], base_logs, better, case_limit)
            r.confirmation, r.confirmation_why = settled.state, settled.describe()
        open_cases = [r for r in open_cases if r.confirmation == gate.UNSETTLED]
        if not open_cases:
            break
    for r in failing:
        if r.confirmation is None:
            r.confirmation, r.confirmation_why = gate.UNSETTLED, "not measured again"
        cut = f"; stopped by {stop}: stays failing" if r.confirmation == gate.UNSETTLED else ""
        click.echo(f"  {r.confirmation}: {r.name}: {r.confirmation_why}{cut}")


def _run_once(plan, workloads, where) -> list[Path]:
    """One confirmation run of ``plan`` for ``workloads``: the bundles it made (none: it failed, said)."""
    out, workdir = where
    before = set(Path(out).glob("*/manifest.json"))
    command = [sys.executable, "-m", "ccbench", "run", plan, "--only", ",".join(workloads), "--out", out]
    command += ["--workdir", workdir]
    click.echo(f"confirming: {' '.join(command[2:])}")
    done = subprocess.run(command, check=False)
    bundles = sorted(set(Path(out).glob("*/manifest.json")) - before)
    if done.returncode not in (0, 1) or not bundles:
        click.echo(f"confirmation run failed (exit {done.returncode}): every failing case still open stays failing")
        return []
    return [b.parent for b in bundles]


def _write(path, text: str) -> None:
    if path:
        from ccbench.basics.fsutil import write_text_atomic

        write_text_atomic(Path(path), text)
