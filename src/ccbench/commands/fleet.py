"""ccbench fleet: run a plan on the hosts of an Ansible inventory; render Kubernetes Jobs."""

from __future__ import annotations

import sys

import click


@click.group()
def command() -> None:
    """Run one plan on many machines (through Ansible) and compare them, or render Kubernetes Jobs
    that run it in confidential containers."""


@command.command("run")
@click.argument("plan", required=False, default=None)
@click.option(
    "-i",
    "--inventory",
    type=click.Path(),
    metavar="PATH",
    help="Ansible inventory: an INI or YAML file, or a directory of them beside group_vars/ and host_vars/. "
    "The baseline is the host with ccbench_baseline, else the first host the inventory lists. Host variables: ccbench_label, ccbench_baseline, ccbench_workdir, "
    "ccbench_components, and Ansible's connection variables. Hosts sharing a ccbench_label are replicas of one "
    "configuration (their bundles in <label>/<host>/).",
)
@click.option(
    "--out",
    default="results",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Directory that receives the fleet run (<out>/<fleet-run>/<label>/<bundle>, fleet.json, report.html).",
)
@click.option(
    "--mode",
    type=click.Choice(["parallel", "serial", "rounds"]),
    default="parallel",
    show_default=True,
    help="parallel: hosts at once; serial: one host after another (VMs sharing a machine); rounds: "
    "repetition k on every host before k+1 (drift hits all alike).",
)
@click.option("--limit", metavar="HOSTS", help="Only these hosts (an Ansible host pattern, e.g. 'web*,db1').")
@click.option(
    "--forks",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Hosts Ansible works on at once (parallel and rounds modes).",
)
@click.option(
    "--accept-new-host-keys",
    is_flag=True,
    help="Trust and remember the SSH host key of a host seen for the first time (host key checking "
    "is on by default; a changed key is always refused).",
)
@click.option(
    "--resume",
    type=click.Path(file_okay=False),
    metavar="FLEETDIR",
    help="Continue an interrupted fleet run: each host's bundle resumes where it stopped.",
)
@click.option("--no-report", is_flag=True, help="Do not run compare and report at the end.")
@click.option(
    "--history",
    "history_store",
    metavar="STORE",
    help="Also add the gathered bundles, under their hosts' labels, to this results store "
    "(ccbench history; a DuckDB file, or a directory ending in '/').",
)
@click.option(
    "--settle",
    metavar="PCT",
    help="With --mode rounds: after every round the controller settles each case (a series "
    "of a variant that run --settle judges: the primary metrics, transport's round trip) of each label against the baseline label with the anytime-valid interval on the per-round "
    "paired values (a cost, a gain, or no cost above PCT), and the next round runs, on every host, only the "
    "workloads with an unsettled case. Other modes: every host runs ccbench run --settle PCT, settling its own "
    "variants against its first (docs/fleet.md).",
)
@click.option(
    "--budget",
    metavar="DURATION",
    help="With --mode rounds --settle: the fleet's wall time, e.g. 20m (no round starts that would pass it). "
    "Other modes: every host runs ccbench run --budget DURATION (each host's own run time).",
)
@click.option(
    "--max-rounds",
    type=int,
    metavar="N",
    help="With --mode rounds --settle: at most N rounds per workload (default: the workload's max_repetitions, "
    "else 30 or its repetitions when more; at least 3, the fewest with a finite interval).",
)
def run(
    plan,
    inventory,
    out,
    mode,
    limit,
    forks,
    accept_new_host_keys,
    resume,
    no_report,
    history_store,
    settle,
    budget,
    max_rounds,
) -> None:
    """Run PLAN (a bundled plan name or a plan file; default quick) on every host of the inventory.

    For each host: ship ccbench (a wheelhouse built from this checkout, cached; hosts need no
    internet), install it once into a venv on the host, set up the components the plan needs
    (and ccbench_components) with the shipped set-up scripts where the host reaches a package
    mirror (otherwise the reason goes into fleet.json and the workloads lacking a tool are
    skipped), run the plan, fetch the bundle as one tar and unpack it, checked, into
    <out>/<fleet-run>/<label>/. Then write fleet.json and compare the hosts against the baseline
    (ccbench_baseline in the inventory) in compare.txt and report.html.

    Exit code: 0 when every host ran the plan, 1 when a host was unreachable or failed (the
    others go on), 2 for bad input (inventory, plan), 130 when interrupted (the remote runs are
    stopped with SIGINT, their partial bundles fetched, and the resume command printed).
    """
    from ccbench.basics.console import console
    from ccbench.basics.errors import CCBenchError
    from ccbench.fleet.engine import run_fleet
    from ccbench.fleet.start import FleetOptions

    if resume and (plan or inventory):
        raise CCBenchError("--resume FLEETDIR continues a fleet run as it was started: give no PLAN or --inventory")
    if not resume and not inventory:
        raise CCBenchError("--inventory FILE is required (an Ansible inventory, INI or YAML)")
    run_args = _run_args(settle, budget, mode, resume) if mode != "rounds" or resume else ()
    across = _settle_across(settle, budget, max_rounds, mode, resume)
    options = FleetOptions(
        run_args=run_args,
        settle=across,
        plan=plan,
        inventory=inventory,
        out=out,
        mode=mode,
        limit=limit,
        forks=forks,
        accept_new_host_keys=accept_new_host_keys,
        resume=resume,
        report=not no_report,
        history=history_store,
    )
    sys.exit(run_fleet(options, lambda text: console.print(text, markup=False, highlight=False)))


def _run_args(settle: str | None, budget: str | None, mode: str, resume: str | None) -> tuple[str, ...]:
    """``--settle`` and ``--budget`` as every host's ``ccbench run`` takes them, checked here (a bad
    value is exit 2 before any host is touched)."""
    from pydantic import ValidationError

    from ccbench.basics.errors import CCBenchError
    from ccbench.planning.plan import PrecisionSettings, parse_duration

    if not (settle or budget):
        return ()
    if resume:
        raise CCBenchError("--resume FLEETDIR continues a fleet run as it was started: give no --settle or --budget")
    args: tuple[str, ...] = ()
    if settle:
        try:
            PrecisionSettings(settle=settle)
        except ValidationError as exc:
            raise CCBenchError(f"--settle {settle}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}") from None
        args += ("--settle", settle)
    if budget:
        try:
            parse_duration(budget)
        except ValueError as exc:
            raise CCBenchError(f"--budget {budget}: {str(exc).removeprefix(f'duration {budget!r}: ')}") from None
        args += ("--budget", budget)
    return args


def _settle_across(
    settle: str | None, budget: str | None, max_rounds: int | None, mode: str, resume: str | None
) -> dict | None:
    """--settle, --budget and --max-rounds for settling across labels in rounds mode (checked here:
    a bad value is exit 2 before any host is touched); None in the other modes."""
    from pydantic import ValidationError

    from ccbench.basics.errors import CCBenchError
    from ccbench.planning.plan import PrecisionSettings, parse_duration

    if max_rounds is not None and (mode != "rounds" or not settle):
        raise CCBenchError("--max-rounds N limits the rounds of --mode rounds --settle: give both, or leave it out")
    if mode != "rounds" or not (settle or budget):
        return None
    if resume:
        raise CCBenchError("--resume FLEETDIR continues a fleet run as it was started: give no --settle or --budget")
    if not settle:
        raise CCBenchError("--budget with --mode rounds bounds the rounds of --settle: give --settle PCT too")
    try:
        target = PrecisionSettings(settle=settle).settle
    except ValidationError as exc:
        raise CCBenchError(f"--settle {settle}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}") from None
    budget_s = None
    if budget:
        try:
            budget_s = parse_duration(budget)
        except ValueError as exc:
            raise CCBenchError(f"--budget {budget}: {str(exc).removeprefix(f'duration {budget!r}: ')}") from None
    return {"target": target, "budget_s": budget_s, "max_rounds": max_rounds}


@command.command("k8s")
@click.argument("plan", required=False, default=None)
@click.option(
    "--image",
    required=True,
    metavar="IMAGE",
    help="Container image with ccbench installed (its entrypoint may be anything).",
)
@click.option(
    "--runtime-class",
    "runtime_classes",
    multiple=True,
    required=True,
    metavar="NAME",
    help="RuntimeClass to run the plan under, e.g. runc, kata-qemu-snp, kata-qemu-tdx (repeatable: one Job each).",
)
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Directory that receives the manifests and GATHERING.md.",
)
@click.option("--namespace", default="ccbench", show_default=True, help="Kubernetes namespace of the Jobs.")
@click.option("--cpu", default="2", show_default=True, help="CPU request = limit (Kata sizes the guest from it).")
@click.option("--memory", default="4Gi", show_default=True, help="Memory request = limit.")
@click.option("--storage", default="5Gi", show_default=True, help="Size of each Job's results volume claim.")
@click.option(
    "--storage-class", default=None, help="StorageClass of the results volume claims (default: the cluster's)."
)
@click.option(
    "--handler",
    "handlers",
    multiple=True,
    metavar="CLASS=HANDLER",
    help="CRI handler of a RuntimeClass when it differs from its name (repeatable).",
)
def k8s(plan, image, runtime_classes, output, namespace, cpu, memory, storage, storage_class, handlers) -> None:
    """Render one Kubernetes Job per runtime class that runs PLAN (default quick) in IMAGE and keeps
    its bundle on a volume, plus the RuntimeClass objects and GATHERING.md (how to copy the bundles
    out and compare them). Rendered only: apply them to a cluster with kubectl apply -f DIR."""
    from pathlib import Path

    from ccbench.basics.console import console
    from ccbench.fleet.k8s import render_plan_jobs

    written = render_plan_jobs(
        plan or "quick",
        image=image,
        runtime_classes=list(runtime_classes),
        out=Path(output),
        namespace_name=namespace,
        cpu=cpu,
        memory=memory,
        storage=storage,
        storage_class=storage_class,
        handlers=dict(h.split("=", 1) for h in handlers if "=" in h),
        bad_handlers=[h for h in handlers if "=" not in h],
    )
    for path in written:
        console.print(str(path), markup=False, highlight=False)
