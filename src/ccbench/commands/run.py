"""ccbench run: run a plan into a result bundle, then a short summary, the verdict of the variants it
compared and the next commands."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

import click

from ccbench.basics.errors import CCBenchError
from ccbench.commands.options import workdir_option
from ccbench.run.workdir import DEFAULT_WORKDIR


def parse_pin(value: str | None) -> list[int] | None:
    """``--pin``: CPU numbers like 0 or 0,2 or 0-3, each available to this process."""
    if not value:
        return None
    cpus: set[int] = set()
    try:
        for part in value.split(","):
            if "-" in part:
                low, high = part.split("-", 1)
                cpus.update(range(int(low), int(high) + 1))
            else:
                cpus.add(int(part))
    except ValueError:
        raise CCBenchError(f"--pin {value!r}: expected CPU numbers like 0 or 0,2 or 0-3") from None
    available = os.sched_getaffinity(0)
    missing = sorted(cpus - available)
    if missing:
        raise CCBenchError(f"--pin {value!r}: CPU(s) {missing} are not available here (available: {sorted(available)})")
    return sorted(cpus)


def parse_pairs(values: tuple[str, ...], option: str, shape: str = "NAME=VALUE", empty: bool = True) -> dict[str, str]:
    """``NAME=VALUE`` options as a dict; a name given twice with two values is an error (which one
    would win is a guess), and so, unless ``empty``, is an empty VALUE."""
    result: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key or (not value and not empty):
            raise CCBenchError(f"{option} {item!r}: expected {shape}")
        if key in result and result[key] != value:
            raise CCBenchError(f"{option} {key}: given twice ({result[key]!r} and {value!r}); give it once")
        result[key] = value
    return result


@click.command()
@click.argument("plan", required=False, default=None)
@click.option(
    "--out",
    "out",
    type=click.Path(),
    default="results",
    show_default=True,
    help="Directory that receives the result bundle (<out>/<host>-<UTC time>/).",
)
@click.option("--repeat", type=click.IntRange(min=1), help="Override every workload's number of repetitions.")
@click.option(
    "--only",
    "only",
    multiple=True,
    metavar="NAME[,NAME...]",
    help="Run only these workloads (by name; a name defaults to the kind). Repeatable, or comma-separated.",
)
@click.option("--pin", metavar="CPUS", help="Pin each measured process to these CPUs, e.g. 1 or 0,2 or 0-3.")
@workdir_option("ccbench's own work directory (the 'disk' storage variant lives here; loop files and mounts too).")
@click.option(
    "--storage-path",
    "storage_paths",
    multiple=True,
    metavar="VARIANT=DIR",
    help="Use your own prepared directory for a storage variant, e.g. encrypted=/mnt/secure.",
)
@click.option("--notebook", type=click.Path(), help="Run this one notebook instead of a plan.")
@click.option(
    "--param", "params", multiple=True, metavar="K=V", help="Parameter injected into --notebook (repeatable)."
)
@click.option(
    "--resume",
    type=click.Path(),
    metavar="BUNDLE",
    help="Continue an interrupted run in its bundle, skipping executions already recorded.",
)
@click.option(
    "--precision",
    metavar="PERCENT",
    help="After the repetitions, keep running interleaved rounds of all variants until each workload's "
    "primary metric has a 95% interval within this, e.g. 2% (limits: the plan's max_repetitions, "
    "default 30, and max_time).",
)
@click.option(
    "--detect",
    metavar="PERCENT",
    help="After the repetitions, keep running interleaved rounds until a cost of this size, e.g. 2%, would "
    "be detected (the minimum detectable effect of each variant against the first; 80% power at the 5% "
    "level), or a limit is reached (max_repetitions, max_time); the summary says what it reached.",
)
@click.option(
    "--settle",
    metavar="PERCENT",
    help="After the repetitions, keep running rounds of each workload's baseline (its first variant; for a "
    "cipher on a loop file, the same loop file without it, ext4-loop, where the plan runs it) and the "
    "variants not yet settled, until each case's 95% interval against it (built for the round limit) calls a "
    'cost or a gain, or puts every cost of this size, e.g. 5%, or more out ("no cost above 5%"); a case that '
    "cannot settle by the round limit stops too; settled variants leave the rounds. Limits: max_repetitions "
    "(the round limit: 10 unless the plan sets it), max_time, --budget. Decides over --precision and --detect (docs/analysis.md).",
)
@click.option(
    "--settle-by",
    type=click.Choice(["case", "layer"]),
    default=None,
    help="With --settle: stop each variant when every case is settled (case, the default), or when its "
    "layer's headline is (layer: the variant against its pair across all the plan's workloads, its headline "
    "the mean of all their cases' paired costs; those workloads' rounds run together after the others; cases "
    'still open are reported "so far", case claims controlled by e-BH; the loop-file control, ext4-loop, '
    'waits for no round of its own where a cipher is set against it; docs/analysis.md "Settling a layer").',
)
@click.option(
    "--budget",
    metavar="DURATION",
    help="The whole study's time, e.g. 20m or 2h: no --settle round starts that would pass it; the summary "
    "says which cases it cut (as 'budget = \"20m\"' in the plan).",
)
@click.option(
    "--order",
    type=click.Choice(["random", "fixed"]),
    default="random",
    show_default=True,
    help="The order of the variants within each round: drawn from a seed kept in the manifest (random), "
    "or A B A B (fixed). A resumed run keeps its bundle's.",
)
@click.option("--seed", "order_seed", type=click.IntRange(min=0), help="The seed of --order random (default: new).")
@click.option(
    "--no-counters",
    is_flag=True,
    help="Do not record the mechanism counters (page faults, interrupts, bounce buffers...) around each "
    "execution (as 'counters = false' in the plan's [defaults]; docs/mechanisms.md).",
)
def command(
    plan,
    out,
    repeat,
    only,
    pin,
    workdir,
    storage_paths,
    notebook,
    params,
    resume,
    precision,
    detect,
    settle,
    settle_by,
    budget,
    order,
    order_seed,
    no_counters,
) -> None:
    """Run PLAN (a .toml or seed-000 .csv file, or a bundled plan name, which a directory of that name
    never hides; default: quick).

    Each execution runs in its own process; samples are on disk before the next one starts. A
    system check is printed first; each execution is watched for other work on the machine and
    flagged contended when there was too much. Ctrl-C stops after cleaning up and prints how to
    resume. The run ends with a summary per workload and variant, the verdict of the variants it
    compared (the line per layer that 'ccbench compare --summary' opens with, and the lint's
    findings) and the next commands. Exit code: 0 when everything ran, 1 when an execution failed
    or timed out, 2 for bad input, 75 when another run holds the work directory (busy: wait for it or
    pass another --workdir), 130 when interrupted (Ctrl-C, SIGTERM, or SIGHUP when the
    terminal or SSH session that started it goes away: see docs/plan-format.md on keeping a long
    study alive).
    """
    from ccbench.basics.console import console
    from ccbench.bundle import read_bundle
    from ccbench.planning.plan import Plan, bundled_plans, load_plan
    from ccbench.run.progress import RichReporter
    from ccbench.run.runner import Runner
    from ccbench.run.schedule import Order

    if params and not notebook:
        raise CCBenchError("--param only applies to --notebook")
    if notebook and plan:
        raise CCBenchError("give either a PLAN or --notebook, not both")
    if resume:
        bundle = read_bundle(resume, samples=False)
        the_plan = Plan(**bundle.manifest["plan"])
        out = str(Path(resume).parent)
    elif notebook:
        from ccbench.planning.plan import plan_from_dict
        from ccbench.workloads.notebook import ad_hoc_plan

        document = ad_hoc_plan(notebook, parse_pairs(params, "--param"), repeat)
        the_plan = plan_from_dict(document, f"--notebook {notebook}")
    else:
        the_plan = load_plan(plan or "quick")
        if plan and Path(plan).is_dir():
            click.echo(f"plan: the bundled plan {plan!r} ({Path(plan).resolve()} is a directory, not a plan file)")
        elif plan and Path(plan).is_file() and plan in bundled_plans():
            # a file here of a bundled plan's name wins; say so, or a user reads another plan's results
            click.echo(
                f"plan: the file {Path(plan).resolve()}, not the bundled plan {plan!r} "
                f"(that one: ccbench run {bundled_plans()[plan]})"
            )
        the_plan = _with_options(the_plan, only, repeat, precision, detect, settle, budget, settle_by)
    given = [name for name, value in (("--precision", precision), ("--detect", detect), ("--settle", settle)) if value]
    if resume and (given or budget):
        raise CCBenchError(f"{(given or ['--budget'])[0]} cannot change a resumed run (it keeps its plan)")
    if no_counters:
        the_plan = the_plan.without_counters()
    runner = Runner(
        the_plan,
        out=Path(out),
        workdir=Path(workdir),
        pin=parse_pin(pin),
        storage_paths=parse_pairs(storage_paths, "--storage-path", "VARIANT=DIR", empty=False),
        reporter=RichReporter(),
        command_line=["ccbench", *sys.argv[1:]],
        resume=Path(resume) if resume else None,
        order=Order(order, order_seed),
    )
    # bad input is told before the system check or anything else is printed
    runner.check_inputs()
    console.print(f"plan [bold]{the_plan.name}[/bold]: {len(the_plan.workloads)} workload(s)")
    result = runner.run()
    try:
        print_run_summary(result)
        if result.interrupted:
            # as written: a path's brackets are no markup
            console.print(f"interrupted. Resume with: {resume_command(result.bundle, workdir)}", markup=False)
        else:
            print_run_verdict(result.bundle)
    except OSError:
        pass  # a hang-up took the terminal with it; the bundle, cleaned up, waits for --resume
    if result.interrupted:
        sys.exit(130)
    sys.exit(1 if result.failed else 0)


def _with_options(the_plan, only, repeat, precision, detect, settle, budget, settle_by=None):
    """The plan as the command line narrows and sets it (--only, --repeat, --precision, --detect,
    --settle, --budget), each where given."""
    if only:
        the_plan = the_plan.select([name.strip() for item in only for name in item.split(",") if name.strip()])
    if repeat:
        the_plan = the_plan.with_repetitions(repeat)
    if precision:
        the_plan = the_plan.with_precision(precision)
    if detect:
        the_plan = the_plan.with_detect(detect)
    if settle or settle_by:
        the_plan = the_plan.with_settle(settle, settle_by)
    if budget:
        the_plan = the_plan.with_budget(budget)
    return check_settle_by(the_plan)


def check_settle_by(the_plan):
    """The plan once the command line has set its targets; a workload settled by layer with no settle
    target would run its repetitions as if ``settle_by`` were not there: a one-line error."""
    from ccbench.planning.plan import PlanError

    where = f"{the_plan.source}: " if the_plan.source else ""
    for workload in the_plan.workloads:
        if workload.settle_by == "layer" and not workload.settle and not workload.skip_reason:
            raise PlanError(
                f'{where}workload {workload.name}: settle_by = "layer" (its own or [defaults]\') without a settle '
                'target, so nothing would settle: set settle = "5%" beside it, or run with --settle 5%'
            )
    return the_plan


def resume_command(bundle: Path, workdir: str) -> str:
    """The command that finishes an interrupted run: in the work directory it ran in (the resumed run
    cleans up there and finds what the run left there, such as a storage variant's files)."""
    words = ["ccbench", "run", "--resume", str(bundle)]
    if workdir != DEFAULT_WORKDIR:
        words += ["--workdir", workdir]
    return shlex.join(words)


def print_run_summary(result) -> None:
    """Short: one row per workload and variant (its headline metric; per-case detail is in
    ``ccbench show``), skipped variants, then what protects this machine and where the bundle is."""
    from ccbench.basics.console import say, stdout
    from ccbench.observe.interference import contention_summary
    from ccbench.run.summary import machine_lines, not_measured, summarize, summary_table
    from ccbench.workloads import fact_kinds

    rows = summarize(result.samples, per_case=False)
    # facts about the machine, not a measured result: left out here, ``ccbench show`` lists them
    facts = fact_kinds(row["kind"] for row in rows)
    rows = [row for row in rows if row["kind"] not in facts]
    stdout.print(
        summary_table(rows, "summary (measured executions; warmups excluded; per case: ccbench show)", result.outcomes)
    )
    for line in not_measured(result.samples):
        stdout.print(line, markup=False, highlight=False)
    for name, outcome in result.outcomes.items():
        for variant, reason in outcome.skipped_variants.items():
            say(f"{name}: {variant} skipped: {reason}")
        if outcome.precision:
            target = outcome.precision["target"]
            goal = f"an MDE of {target:.1%}" if outcome.precision.get("measure") == "mde" else f"+-{target:.1%}"
            say(
                f"{name}: {outcome.precision['stopped_by']} after {outcome.precision['repetitions']} "
                f"repetitions (target {goal}): {outcome.precision['reason']}"
            )
    settled = {name: outcome.settled for name, outcome in result.outcomes.items() if outcome.settled}
    for line in settled_block(settled):
        say(line)
    for line in machine_lines(result.manifest.get("environment") or {}):
        say(line)
    warning = contention_summary([record.as_json() for record in result.executions])
    if warning:
        say(f"warning: {warning}", key=8, style="yellow")
    say(f"bundle: {result.bundle}")


def settled_block(
    records: dict[str, dict],
    flagged: Callable[[str], set] = lambda name: set(),
    header: Callable[[dict], str] | None = None,
    cases: bool = True,
) -> list[str]:
    """The settled workloads' lines (their settle records, by workload name): each workload settled
    case by case with its own lines (settle_lines), and each layer settled across workloads once:
    its answer, the workloads it spans and what stopped it, then its cases, workload by workload.
    ``flagged(name)``: (variant key, case) of a workload's cases the verdict leaves out as
    implausible; ``header(record)``: a line put before the lines it heads where it changes (compare's
    "settled in BUNDLE (interval, target):"), the lines then indented under it. Without ``cases``
    (compare --summary), only each layer's and each settled variant's line, no line per case."""
    lines: list[str] = []
    said = None
    indent = "  " if header else ""

    def head(record: dict) -> None:
        nonlocal said
        text = header(record) if header else None
        if text and text != said:
            lines.append(text)
            said = text

    # per layer (variant key, pair): each workload that holds it, as (name, record, variant, flagged)
    layers: dict[tuple[str, str], list[tuple[str, dict, dict, set]]] = {}
    for name, record in records.items():
        marked = flagged(name)
        own = {key: v for key, v in (record.get("variants") or {}).items() if not v.get("layer")}
        for key, variant in (record.get("variants") or {}).items():
            if variant.get("layer"):
                pair = variant.get("against") or record["baseline"]
                layers.setdefault((key, pair), []).append((name, record, variant, marked))
        if own or not record.get("variants"):
            head(record)
            lines += [f"{indent}{line}" for line in settle_lines(name, {**record, "variants": own}, marked, cases)]
    for (key, pair), members in layers.items():
        names, held, variants, _ = zip(*members)
        head(held[0])
        stopped = sorted({str(v.get("stopped_by")) for v in variants if v.get("stopped_by") not in (None, "settled")})
        why = f"; stopped: {', '.join(stopped)}" if stopped else ""
        spans = ", ".join(names)
        lines.append(f"{indent}{layer_answer(variants[0], key, f' against {pair}, in {spans}')}{why}")
        for name, _, own_variant, marked in members if cases else ():
            lines += [f"{indent}  {name}: {line}" for line in layer_cases(own_variant, marked, key)]
    return lines


def settle_lines(
    name: str, settle: dict | None, implausible: frozenset | set = frozenset(), cases: bool = True
) -> list[str]:
    """Per case of a settled workload: its answer, and for each variant what stopped it; first,
    which variants the budget cut. ``implausible``: (variant key, case label) of the cases whose rows
    the comparison left out of the verdict (ccbench.analysis.rows.plausibility), said beside them.
    Without ``cases``: the variants' lines only."""
    if not settle:
        return []
    if not settle.get("variants"):
        return [f"{name}: settle: {settle.get('reason', 'no case to settle')}"]
    from ccbench.analysis.statistics.sequential import Settlement

    lines, cut = [], []
    for key, variant in settle["variants"].items():
        why = variant.get("stopped_by")
        lines.append(f"{name} [{key}] against {variant.get('against') or settle['baseline']}: {why}")
        for label, case in variant.get("cases", {}).items() if cases else ():
            known = {k: v for k, v in case.items() if k in Settlement.__dataclass_fields__}
            own = case.get("stopped_by")  # a case's own reason, where it differs from its variant's
            note = f"; {own}" if own and own not in ("settled", why) else ""
            if (key, label) in implausible:
                note += "; implausible, left out of the verdict: see the lint"
            lines.append(f"  {label}: {Settlement(**known).describe()} ({case['rounds']} rounds{note})")
        if why == "budget":
            cut.append(key)
    if cut:
        lines.insert(0, f"{name}: the budget cut {len(cut)} unsettled variant(s): {', '.join(cut)}")
    return lines


def layer_answer(variant: dict, key: str, where: str = "") -> str:
    """The layer's title (``where`` after it), then its answer: "cost: 11x slower [...] (mean of
    ...)", "gain: ...", or the answer's own words where they name its state ("open, so far ...",
    "no cost above 5% ...")."""
    from ccbench.analysis.settling.layer_settle import LayerSettlement

    layer = LayerSettlement.from_record(variant)
    said = layer.describe()
    if layer.state in ("cost", "gain"):
        said = f"{layer.state}: {said}"
    return f"{variant['layer'].get('title') or key}{where}: {said}"


def layer_cases(variant: dict, implausible: frozenset | set, key: str) -> list[str]:
    """Each case of a variant settled by layer, in one workload: "label: called a cost: ... (N rounds)"
    or "label: so far: ..."; a case the comparison left out as implausible says so."""
    from ccbench.analysis.settling.layer_settle import LEFT_OUT, case_effect
    from ccbench.analysis.statistics.sequential import Settlement

    lines, fields = [], Settlement.__dataclass_fields__
    for label, record in (variant.get("cases") or {}).items():
        case = Settlement(**{k: v for k, v in record.items() if k in fields})
        note = "; implausible, left out of the verdict: see the lint" if (key, label) in implausible else ""
        called = record.get("claim") == "called" and case.estimate is not None
        word = f"called a {'cost' if (case.estimate or 0) > 0 else 'gain'}" if called else "so far"
        if record.get("claim") == LEFT_OUT:  # out of the layer's headline too: the lint says why
            word, note = "left out as implausible", "; see the lint"
        lines.append(f"{label}: {word}: {case_effect(case)} ({case.rounds} rounds{note})")
    return lines


def print_run_verdict(bundle: Path) -> None:
    """The verdict per protection layer of the variants this run compared (the same comparison,
    verdict and lint as ``ccbench compare``), then the next command to run. A run with one
    configuration per workload says that there is nothing to compare in it and how to compare it
    with another machine's bundle."""
    from ccbench.basics.console import stdout

    def say(text: str) -> None:
        stdout.print(text, markup=False, highlight=False, soft_wrap=True)

    try:
        from ccbench.analysis.comparison import comparison
        from ccbench.analysis.judgement.headline import finding_lines, headline, terminal_width

        result = comparison([bundle])
    except ImportError as exc:  # ModuleNotFoundError, or a module that would not load
        # a fleet host gets only what its plan needs to run, not the analysis libraries: the
        # controller compares the gathered bundles
        say(
            f"verdict: not computed here ({exc.name or exc} is not installed); compare the bundle where ccbench's "
            f"analysis is installed: ccbench compare {_shell_path(bundle)} --summary"
        )
        return
    except CCBenchError as exc:
        say(f"verdict: not computed: {exc}")
        return
    if result.table.empty:
        say(
            "verdict: nothing to compare in this run (one configuration per workload); "
            f"to compare it with another machine's run: ccbench compare {_shell_path(bundle)} OTHER_BUNDLE --summary"
        )
        return
    shown = _shell_path(bundle)
    say(f"verdict of this run against {result.baseline}:")
    width = terminal_width() - 2
    items = result.verdicts()
    for line in headline(items, width=width):
        say("\n".join(f"  {part}" for part in line.split("\n")))
    # the lint as compare --summary gives it: one line per kind of finding, at most 100 columns
    for line in finding_lines(result.findings(), width, items):
        say("\n".join(f"  {part}" for part in line.split("\n")))
    say(f"next: ccbench compare {shown} --summary")
    say(f"      ccbench compare {shown}   (every case with its 95% interval)")
    say(f"      ccbench report {shown} -o report.html")


def _shell_path(path: Path) -> str:
    """The path as a command line takes it: relative to the current directory when under it, quoted
    where the shell needs it."""
    import shlex

    try:
        shown = str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        shown = str(path)
    return shlex.quote(shown)
