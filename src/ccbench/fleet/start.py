"""The options of a fleet run (``ccbench fleet run``, a study's rounds) and its set-up: a new run
(the inventory and the plan read, the run's directory made) or a resumed one (its fleet.json read
back). The controller (ccbench.fleet.engine) drives the run from there."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ccbench.basics.errors import CCBenchError
from ccbench.basics.fsutil import make_new_dir
from ccbench.fleet import inventory as inventory_module
from ccbench.fleet import settling
from ccbench.fleet import wheelhouse as wheelhouse_module
from ccbench.fleet.records import FleetRun, HostRun, ResumeError, now_iso
from ccbench.model import copied

MODES = ("parallel", "serial", "rounds")
#: the set-up component (scripts/setup.d/NN-NAME.sh) each variant axis needs on a host (a workload
#: kind declares its own: Workload.setup_component); the scripts run there in fleet-host mode (see
#: the playbook's "ccbench:components")
AXIS_COMPONENTS = {"storage": "storage"}


@dataclass
class FleetOptions:
    plan: str | None
    inventory: str | None
    out: str = "results"
    mode: str = "parallel"
    limit: str | None = None
    forks: int = 10
    accept_new_host_keys: bool = False
    resume: str | None = None
    report: bool = True
    #: a results store (ccbench history) to add the gathered bundles to
    history: str | None = None
    #: what every host's ``ccbench run`` gets besides the plan (``--settle 5% --budget 20m``)
    run_args: tuple[str, ...] = ()
    #: rounds mode settling across labels (ccbench.fleet.settling): target, budget_s, max_rounds
    settle: dict | None = None
    poll_s: float = 1.0
    stop_grace_s: float = 120.0
    #: the work directory that owns the run's SSH control directory (a study's): ccbench cleanup --workdir
    workdir: str | None = None
    #: False where the hosts are gone once the run ends (a study's guests): no resume line after a stop
    resumable: bool = True


def new_run(options: FleetOptions) -> FleetRun:
    """A new fleet run: its options checked, the inventory and the plan read, its directory made."""
    from ccbench.planning.plan import load_plan
    from ccbench.workloads import shipped_tools

    if options.mode not in MODES:
        raise CCBenchError(f"--mode {options.mode}: use one of {', '.join(MODES)}")
    if not options.inventory:
        raise CCBenchError("--inventory FILE is required (an Ansible inventory, INI or YAML)")
    inventory = inventory_module.read_inventory(options.inventory, options.limit)
    plan_arg = options.plan or "quick"
    plan = load_plan(plan_arg)  # a broken plan is exit 2 before anything starts
    plan_file = str(Path(plan_arg).resolve()) if Path(plan_arg).is_file() else None
    # a host another one names as its ccbench_peer serves it and runs no plan (fleet/peers.py)
    serving = {h.peer for h in inventory.hosts if h.peer}
    baseline = next(h for h in [inventory.baseline, *inventory.hosts] if h.name not in serving).label
    record = None
    if options.settle:
        labels = {h.label for h in inventory.hosts if h.name not in serving}
        record = settling.new_record(plan, baseline=baseline, labels=labels, **options.settle)
        rounds = list(record["rounds"])
    elif options.mode == "rounds":
        repetitions = max((w.repetitions for w in plan.workloads), default=1)
        rounds = [f"round-{k + 1}" for k in range(max(repetitions, 1))]
    else:
        rounds = ["run"]
    run_id = "fleet-" + datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = Path(options.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        directory = make_new_dir(out, run_id)
    except OSError as exc:
        raise CCBenchError(f"--out {options.out}: cannot create {out / run_id} ({exc.strerror})") from None
    # keyed by each host's own key (its label, or "<label>/<host>" for replicas sharing a label)
    hosts = {
        h.key: {
            **h.public(),
            "setup_components": _components(plan, h.components),
            "tools": sorted(shipped_tools(workload.kind for workload in plan.workloads)),
            "precision": wheelhouse_module.plan_needs_precision(plan),
            "peer_address": inventory.by_name(h.peer).address if h.peer else None,
        }
        for h in inventory.hosts
        if h.name not in serving
    }
    return FleetRun(
        directory=directory.resolve(),
        plan=plan_arg if plan_file is None else plan_file,
        plan_file=plan_file,
        inventory=inventory.path,
        **copied(options, "mode", "forks", "limit", "accept_new_host_keys"),
        run_id=directory.name,
        rounds=rounds,
        hosts=hosts,
        runs={label: {name: HostRun(round=name) for name in rounds} for label in hosts},
        baseline=baseline,
        started_at=now_iso(),
        run_args=list(options.run_args),
        settling=record,
    )


def resume_run(options: FleetOptions) -> FleetRun:
    """The fleet run in ``options.resume`` read back, for ``--resume``."""
    directory = Path(options.resume)
    try:
        document = json.loads((directory / "fleet.json").read_text())
    except (OSError, ValueError):
        raise ResumeError(
            f"--resume {directory}: no readable fleet.json there; pass a directory written by 'ccbench fleet run'"
        ) from None
    if document.get("settling"):
        raise ResumeError(
            f"--resume {directory}: this run settled its cases across labels round by round (--settle with "
            "--mode rounds), which does not resume; its rounds so far are in fleet.json: compare them with "
            f"'ccbench compare {directory}', or start a new run"
        )
    inventory = inventory_module.read_inventory(document["inventory"], document.get("limit"))
    known = {h.key for h in inventory.hosts}
    missing = [label for label in document["hosts"] if label not in known]
    if missing:
        raise ResumeError(
            f"--resume {directory}: the inventory {document['inventory']} no longer has {', '.join(missing)}"
        )
    plan_file = document.get("plan_file")
    if plan_file and not Path(plan_file).is_file():
        raise ResumeError(f"--resume {directory}: the plan file {plan_file} is gone; put it back to resume")
    return FleetRun.from_json(
        directory, document, forks=options.forks, accept_new_host_keys=options.accept_new_host_keys
    )


def _components(plan, components: list[str]) -> list[str]:
    """The set-up components a host gets: those its plan's workloads and variant axes need, and
    its own ccbench_components."""
    from ccbench.workloads import setup_components

    needed = set(components) | setup_components(workload.kind for workload in plan.workloads)
    for workload in plan.workloads:
        needed.update(AXIS_COMPONENTS[axis] for axis in (workload.variants or {}) if axis in AXIS_COMPONENTS)
    return sorted(needed)
