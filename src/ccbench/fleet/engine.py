"""`ccbench fleet run`: one plan on every host of an Ansible inventory, gathered into one comparison.

The controller (this module) prepares the wheelhouse, then drives ``ansible-playbook`` with the
shipped playbook and reads its event stream (the ``ccbench_events`` callback: JSON lines) to keep
one progress line per host and each host's outcome. Afterwards it unpacks the fetched bundles
into ``<out>/<fleet-run>/<label>/`` (``unpack_bundle``: safe extraction, sizes and the bundle's
SHA-256 list checked), writes ``fleet.json`` and runs ``ccbench compare`` and
``ccbench report`` over them with the inventory's baseline.

Modes: ``parallel`` (one playbook run over all hosts, ``--forks`` at once, strategy ``free`` so
a slow host holds no one up), ``serial`` (one host after the other), ``rounds`` (repetition k
on every host before repetition k+1: the plan runs once per round with ``--repeat 1``).

Interruption (SIGINT/SIGTERM): the playbook is stopped, then a second playbook run sends SIGINT
to every started remote ``ccbench run`` (it stops cleanly and keeps what it measured) and fetches
the partial bundles; ``--resume FLEETDIR`` continues each host's bundle with ``ccbench run --resume``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ccbench
from ccbench.errors import CCBenchError
from ccbench.fleet import inventory as inventory_module
from ccbench.fleet import wheelhouse as wheelhouse_module

FLEET_FORMAT = 1
PACKAGE_DIR = Path(__file__).resolve().parent
PLAYBOOK = PACKAGE_DIR / "playbook.yml"
MODES = ("parallel", "serial", "rounds")
#: the set-up component (scripts/setup.d/NN-NAME.sh) each workload kind needs on a host; the
#: scripts run there in fleet-host mode (see the playbook's "ccbench:components")
KIND_COMPONENTS = {
    "fio": "core",
    "compression": "storage",
    "ycsb": "ycsb",
    "transport": "transport",
    "microservices": "microservices",
    "notebook": "datascience",
    "pyperformance": "datascience",
    "federated": "federated",
}
#: ... and each variant axis
AXIS_COMPONENTS = {"storage": "storage"}

PHASES = {
    "ccbench:connect": "connect",
    "ccbench:python": "connect",
    "ccbench:install": "install",
    "ccbench:install copy": "install",
    "ccbench:install pip": "install",
    "ccbench:components": "install",
    "ccbench:start": "run",
    "ccbench:run": "run",
    "ccbench:stop": "stop",
    "ccbench:login user": "connect",
    "ccbench:pack": "fetch",
    "ccbench:fetch": "fetch",
}


class ResumeError(CCBenchError):
    """--resume names something that is not a fleet run directory."""


@dataclass
class HostRun:
    """One host's part in one round."""

    round: str
    phase: str = "pending"
    outcome: str = "pending"  # ok, failed, unreachable, interrupted, pending
    reason: str | None = None
    exit_code: int | None = None
    executions_done: int = 0
    executions_total: int = 0
    remote_bundle: str | None = None
    bundle: str | None = None  # relative to the fleet directory
    started: bool = False
    stopped: bool = False  # the remote run was sent SIGINT and has ended
    timings: dict[str, float] = field(default_factory=dict)
    phase_started: dict[str, float] = field(default_factory=dict)
    first_execution_at: str | None = None
    packed: dict | None = None  # what the host's pack reported: archive bytes, files, their bytes
    gathered: dict | None = None  # the checks made while unpacking (see unpack_bundle)
    components: dict | None = None  # per set-up component: status, reason, whether apt was called

    def record(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "phase_started"}


@dataclass
class FleetRun:
    directory: Path
    plan: str
    plan_file: str | None
    inventory: Path
    mode: str
    forks: int
    limit: str | None
    accept_new_host_keys: bool
    run_id: str
    rounds: list[str]
    hosts: dict[str, Any]  # label -> public host record
    runs: dict[str, dict[str, HostRun]]  # label -> round -> HostRun
    baseline: str
    started_at: str
    command_started: float = field(default_factory=time.time)
    wheelhouse: dict[str, Any] = field(default_factory=dict)
    gathering: dict[str, Any] = field(default_factory=dict)
    status: str = "running"
    compare: str | None = None
    report: str | None = None
    analysis_error: str | None = None

    def to_json(self) -> dict:
        return {
            "format": "ccbench-fleet",
            "format_version": FLEET_FORMAT,
            "fleet_run": self.run_id,
            "ccbench_version": ccbench.__version__,
            "ansible_version": ansible_version(),
            "plan": self.plan,
            "plan_file": self.plan_file,
            "inventory": str(self.inventory),
            "mode": self.mode,
            "forks": self.forks,
            "limit": self.limit,
            "accept_new_host_keys": self.accept_new_host_keys,
            "rounds": self.rounds,
            "baseline": self.baseline,
            "started_at": self.started_at,
            "ended_at": _now() if self.status != "running" else None,
            "status": self.status,
            "wheelhouse": self.wheelhouse,
            "gathering": self.gathering,
            "hosts": {
                label: {
                    **self.hosts[label],
                    "outcome": self.outcome(label),
                    "reason": self.reason(label),
                    "bundles": [r.bundle for r in self.runs[label].values() if r.bundle],
                    # the latest set-up result per component (each round checks again)
                    "component_setup": next(
                        (r.components for r in reversed(self.runs[label].values()) if r.components), None
                    ),
                    "rounds": {name: r.record() for name, r in self.runs[label].items()},
                }
                for label in self.hosts
            },
            "compare": self.compare,
            "report": self.report,
            "analysis_error": self.analysis_error,
        }

    def outcome(self, label: str) -> str:
        outcomes = [r.outcome for r in self.runs[label].values()]
        for worst in ("unreachable", "failed", "interrupted", "pending"):
            if worst in outcomes:
                return worst
        return "ok"

    def reason(self, label: str) -> str | None:
        return next((r.reason for r in self.runs[label].values() if r.reason), None)

    def save(self) -> None:
        path = self.directory / "fleet.json"
        temporary = path.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(self.to_json(), indent=2, default=str) + "\n")
        os.replace(temporary, path)


_ansible_version: str | None = None


def ansible_version() -> str | None:
    global _ansible_version
    if _ansible_version is None:
        try:
            from ansible.release import __version__ as version

            _ansible_version = version
        except ImportError:
            _ansible_version = ""
    return _ansible_version or None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _iso_to_epoch(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


# ----------------------------------------------------------------------------------------- options


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
    poll_s: float = 1.0
    stop_grace_s: float = 120.0


class Progress:
    """One line per host: phase, execution i/n, elapsed. Live on a terminal, a line per change
    otherwise (logs, CI)."""

    def __init__(self, fleet: FleetRun, stream=None):
        from ccbench.console import console

        self.fleet = fleet
        self.console = console
        self.live = None
        self.last: dict[str, str] = {}
        if console.is_terminal:
            from rich.live import Live

            self.live = Live(self._render(), console=console, refresh_per_second=4, transient=False)
            self.live.start()

    def line(self, label: str, current: HostRun) -> str:
        elapsed = time.time() - self.fleet.command_started
        counter = (
            f" {current.executions_done}/{current.executions_total}"
            if current.phase == "run" and current.executions_total
            else ""
        )
        state = current.phase if current.outcome == "pending" else current.outcome
        rounds = f" [{current.round}]" if len(self.fleet.rounds) > 1 else ""
        reason = f": {current.reason}" if current.reason and current.outcome != "ok" else ""
        return f"{label}{rounds}: {state}{counter} {elapsed:.0f} s{reason}"

    def _render(self):
        from rich.text import Text

        lines = []
        for label, rounds in self.fleet.runs.items():
            current = self._current(rounds)
            lines.append(self.line(label, current))
        return Text("\n".join(lines))

    @staticmethod
    def _current(rounds: dict[str, HostRun]) -> HostRun:
        active = [r for r in rounds.values() if r.phase != "pending" or r.outcome != "pending"]
        return active[-1] if active else next(iter(rounds.values()))

    def update(self, label: str) -> None:
        if self.live is not None:
            self.live.update(self._render())
            return
        current = self._current(self.fleet.runs[label])
        text = self.line(label, current)
        # without a terminal: a line when what it says changes (the elapsed time aside)
        signature = f"{current.round}|{current.phase if current.outcome == 'pending' else current.outcome}|{current.executions_done}"
        if self.last.get(label) != signature:
            self.last[label] = signature
            self.console.print(text, markup=False, highlight=False)

    def stop(self) -> None:
        if self.live is not None:
            self.live.update(self._render())
            self.live.stop()
            self.live = None


# ----------------------------------------------------------------------------------------- driving


class Interrupted(Exception):
    pass


class Controller:
    def __init__(self, options: FleetOptions, echo: Callable[[str], None]):
        self.options = options
        self.echo = echo
        self.interrupted = False
        self.stopping = False
        self.process: subprocess.Popen | None = None
        self.control_dir: Path | None = None
        self.stop_flag: Path | None = None

    # -- signal handling: the first SIGINT/SIGTERM stops the playbook; stopping remote runs follows
    def _on_signal(self, signum, frame):
        """First signal: ask the running playbook to stop the remote runs and fetch what they
        measured (the flag file its tasks test). Second: interrupt the playbook itself (a
        separate stop playbook then does the same)."""
        first = not self.interrupted
        self.interrupted = True
        if self.stop_flag is not None:
            self.stop_flag.write_text("stop\n")
        process = self.process
        if first or self.stopping or process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGINT)
        except ProcessLookupError:
            pass

    def run(self) -> int:
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            return self._run()
        finally:
            self._close_connections()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _run(self) -> int:
        options = self.options
        fleet = self._resume() if options.resume else self._new()
        self.stop_flag = fleet.directory / ".ansible" / "stop-requested"
        self.stop_flag.parent.mkdir(exist_ok=True)
        self.stop_flag.unlink(missing_ok=True)
        fleet.save()
        self.echo(
            f"fleet run {fleet.run_id}: plan {fleet.plan}, {len(fleet.hosts)} host(s), mode {fleet.mode} -> {fleet.directory}"
        )
        components, left_out = wheelhouse_module.wheelhouse_components(
            sorted({c for h in fleet.hosts.values() for c in h.get("components", [])}),
            sorted({c for h in fleet.hosts.values() for c in h.get("setup_components", [])}),
        )
        for component, reason in left_out.items():
            self.echo(f"{component}: {reason}")
        wheelhouse = wheelhouse_module.build(components, log=self.echo)
        fleet.wheelhouse = {
            "key": wheelhouse.key,
            "python": wheelhouse.python,
            "packages": wheelhouse.pins,
            "cached": not wheelhouse.built,
            "bytes": wheelhouse.tar.stat().st_size,
            "components": components,
            "left_out": left_out,
        }
        fleet.save()
        progress = Progress(fleet)
        try:
            for round_name in fleet.rounds:
                pending = [
                    label
                    for label in fleet.hosts
                    if fleet.runs[label][round_name].outcome != "ok" and not self._given_up(fleet, label, round_name)
                ]
                if not pending:
                    continue
                batches = [[label] for label in pending] if fleet.mode == "serial" else [pending]
                for batch in batches:
                    if self.interrupted:
                        break
                    self._play(fleet, wheelhouse, round_name, batch, "run", progress)
                    if self.interrupted:
                        break
                if self.interrupted:
                    break
            if self.interrupted:
                self.stopping = True
                self.echo("stopping the remote runs (SIGINT: they keep what they measured) and fetching their bundles")
                started = [
                    (label, name)
                    for label, rounds in fleet.runs.items()
                    for name, r in rounds.items()
                    if r.started and not r.stopped and r.outcome not in ("ok", "unreachable")
                ]
                for round_name in sorted({name for _, name in started}, key=fleet.rounds.index):
                    labels = [label for label, name in started if name == round_name]
                    self._play(fleet, wheelhouse, round_name, labels, "stop", progress)
                for rounds in fleet.runs.values():
                    for run in rounds.values():
                        # a definite outcome (ok, failed, unreachable) stays; what was cut short is interrupted
                        if run.started and run.outcome in ("pending", "interrupted"):
                            run.outcome, run.reason = "interrupted", run.reason or "interrupted by the controller"
                for rounds in fleet.runs.values():
                    for run in rounds.values():
                        if run.outcome == "pending" and run.phase != "pending":
                            run.outcome, run.reason = "interrupted", "interrupted by the controller"
        finally:
            progress.stop()
        fleet.status = "interrupted" if self.interrupted else "complete"
        fleet.save()
        if not self.interrupted and options.report:
            self._analyse(fleet)
            fleet.save()
        self._summary(fleet)
        if self.interrupted:
            self.echo(f"interrupted. Resume with:  ccbench fleet run --resume {fleet.directory}")
            return 130
        return 0 if all(fleet.outcome(label) == "ok" for label in fleet.hosts) else 1

    @staticmethod
    def _given_up(fleet: FleetRun, label: str, round_name: str) -> bool:
        """A host unreachable or failed in an earlier round is not tried again in later rounds."""
        index = fleet.rounds.index(round_name)
        return any(fleet.runs[label][name].outcome in ("unreachable", "failed") for name in fleet.rounds[:index])

    # -- set-up of a new run or a resumed one
    def _new(self) -> FleetRun:
        from ccbench.plan import load_plan

        options = self.options
        if options.mode not in MODES:
            raise CCBenchError(f"--mode {options.mode}: use one of {', '.join(MODES)}")
        if not options.inventory:
            raise CCBenchError("--inventory FILE is required (an Ansible inventory, INI or YAML)")
        inventory = inventory_module.read_inventory(options.inventory, options.limit)
        plan_arg = options.plan or "quick"
        plan = load_plan(plan_arg)  # a broken plan is exit 2 before anything starts
        plan_file = str(Path(plan_arg).resolve()) if Path(plan_arg).is_file() else None
        if options.mode == "rounds":
            repetitions = max((w.repetitions for w in plan.workloads), default=1)
            rounds = [f"round-{k + 1}" for k in range(max(repetitions, 1))]
        else:
            rounds = ["run"]
        run_id = "fleet-" + datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        out = Path(options.out)
        directory = out / run_id
        suffix = 2
        while directory.exists():
            directory = out / f"{run_id}-{suffix}"
            suffix += 1
        try:
            directory.mkdir(parents=True)
        except OSError as exc:
            raise CCBenchError(f"--out {options.out}: cannot create {directory} ({exc.strerror})") from None
        hosts = {
            h.label: {**h.public(), "setup_components": self._components(plan, h.components)} for h in inventory.hosts
        }
        return FleetRun(
            directory=directory.resolve(),
            plan=plan_arg if plan_file is None else plan_file,
            plan_file=plan_file,
            inventory=inventory.path,
            mode=options.mode,
            forks=options.forks,
            limit=options.limit,
            accept_new_host_keys=options.accept_new_host_keys,
            run_id=directory.name,
            rounds=rounds,
            hosts=hosts,
            runs={label: {name: HostRun(round=name) for name in rounds} for label in hosts},
            baseline=inventory.baseline.label,
            started_at=_now(),
        )

    def _resume(self) -> FleetRun:
        directory = Path(self.options.resume)
        try:
            document = json.loads((directory / "fleet.json").read_text())
        except (OSError, ValueError):
            raise ResumeError(
                f"--resume {directory}: no readable fleet.json there; pass a directory written by 'ccbench fleet run'"
            ) from None
        inventory = inventory_module.read_inventory(document["inventory"], document.get("limit"))
        known = {h.label for h in inventory.hosts}
        missing = [label for label in document["hosts"] if label not in known]
        if missing:
            raise ResumeError(
                f"--resume {directory}: the inventory {document['inventory']} no longer has {', '.join(missing)}"
            )
        runs = {}
        for label, host in document["hosts"].items():
            runs[label] = {}
            for name in document["rounds"]:
                record = dict(host["rounds"].get(name, {"round": name}))
                run = HostRun(
                    **{k: v for k, v in record.items() if k in HostRun.__dataclass_fields__ and k != "phase_started"}
                )
                if run.outcome != "ok":
                    run.outcome, run.reason, run.phase, run.exit_code = "pending", None, "pending", None
                runs[label][name] = run
        if self.options.accept_new_host_keys:
            document["accept_new_host_keys"] = True
        plan_file = document.get("plan_file")
        if plan_file and not Path(plan_file).is_file():
            raise ResumeError(f"--resume {directory}: the plan file {plan_file} is gone; put it back to resume")
        fleet = FleetRun(
            directory=directory.resolve(),
            plan=document["plan"],
            plan_file=document.get("plan_file"),
            inventory=Path(document["inventory"]),
            mode=document["mode"],
            forks=self.options.forks or document["forks"],
            limit=document.get("limit"),
            accept_new_host_keys=document.get("accept_new_host_keys", False),
            run_id=document["fleet_run"],
            rounds=document["rounds"],
            hosts=document["hosts"],
            runs=runs,
            baseline=document["baseline"],
            started_at=document["started_at"],
        )
        for label in fleet.hosts:
            for key in ("outcome", "reason", "bundles", "rounds", "component_setup"):
                fleet.hosts[label].pop(key, None)
        return fleet

    @staticmethod
    def _components(plan, components: list[str]) -> list[str]:
        """The set-up components a host gets: those its plan's workloads and variant axes need, and
        its own ccbench_components."""
        needed = set(components)
        for workload in plan.workloads:
            if workload.kind in KIND_COMPONENTS:
                needed.add(KIND_COMPONENTS[workload.kind])
            needed.update(AXIS_COMPONENTS[axis] for axis in (workload.variants or {}) if axis in AXIS_COMPONENTS)
        return sorted(needed)

    # -- one ansible-playbook run
    def _ccbench_args(self, fleet: FleetRun, run: HostRun) -> list[str]:
        if run.remote_bundle:
            return ["run", "--resume", run.remote_bundle, "--workdir", "@BASE@/work"]
        plan = "@RUN_DIR@/plan" + Path(fleet.plan_file).suffix if fleet.plan_file else fleet.plan
        args = ["run", plan, "--out", "@RUN_DIR@/out", "--workdir", "@BASE@/work"]
        if fleet.mode == "rounds":
            args += ["--repeat", "1"]
        return args

    def _play(
        self, fleet: FleetRun, wheelhouse, round_name: str, labels: list[str], action: str, progress: Progress
    ) -> None:
        by_name = {fleet.hosts[label]["inventory_hostname"]: label for label in labels}
        hosts_vars = {}
        for name, label in by_name.items():
            run = fleet.runs[label][round_name]
            destination = fleet.directory / ".incoming" / label / round_name / "bundle.tar"
            hosts_vars[name] = {
                "label": label,
                "round": round_name,
                "dest": str(destination),
                "components": fleet.hosts[label].get("setup_components", []),
                "ccbench_args": self._ccbench_args(fleet, run),
            }
            if action == "run":
                run.phase, run.outcome, run.reason = "connect", "pending", None
        extra = {
            "ccbench_fleet": {
                "action": action,
                "run_id": fleet.run_id,
                "hosts": hosts_vars,
                "python": wheelhouse.python,
                "wheelhouse_tar": str(wheelhouse.tar),
                "wheelhouse_key": wheelhouse.key,
                "plan_content": Path(fleet.plan_file).read_text() if fleet.plan_file and action == "run" else "",
                "plan_suffix": Path(fleet.plan_file).suffix if fleet.plan_file else "",
                "stop_flag": str(self.stop_flag),
                "poll_s": self.options.poll_s,
                "max_polls": 1_000_000,
                "stop_grace_s": self.options.stop_grace_s,
            }
        }
        state = fleet.directory / ".ansible"
        state.mkdir(exist_ok=True)
        extra_file = state / f"extra-vars-{action}-{round_name}.json"
        extra_file.write_text(json.dumps(extra))
        argv = [
            inventory_module.ansible_tool("ansible-playbook"),
            "-i",
            str(fleet.inventory),
            "--limit",
            ",".join(by_name),
            "--forks",
            str(max(1, fleet.forks)),
            "-e",
            f"@{extra_file}",
            str(PLAYBOOK),
        ]
        env = self._environment(fleet)
        failures: dict[str, str] = {}
        stderr_path = state / "ansible-stderr.log"
        # the event stream as it came (the callback keeps no variable or secret): a record to read
        # back when a host's outcome puzzles, and the tests' recorded input for the event reducer
        events_path = state / f"events-{action}-{round_name}.jsonl"
        with open(stderr_path, "a") as stderr_log, open(events_path, "a") as events_log:
            stderr_log.write(f"--- {_now()} {action} {round_name} {','.join(by_name)}\n")
            stderr_log.flush()
            offset = stderr_log.tell()
            self.process = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=stderr_log,
                text=True,
                env=env,
                start_new_session=True,
                cwd=str(state),
            )
            try:
                for line in self.process.stdout:
                    event = _parse(line)
                    if event:
                        events_log.write(line if line.endswith("\n") else line + "\n")
                        events_log.flush()
                    if event and event.get("host") in by_name:
                        label = by_name[event["host"]]
                        self._on_event(fleet, fleet.runs[label][round_name], event, action, failures)
                        progress.update(label)
                        fleet.save()
            finally:
                returncode = self.process.wait()
                self.process = None
        if returncode not in (0, 2, 4) and not self.interrupted:
            with open(stderr_path, errors="replace") as handle:
                handle.seek(offset)
                errors = [line for line in handle.read().splitlines() if "ERROR" in line]
            for name in by_name:
                failures.setdefault(
                    name, f"ansible-playbook exited {returncode}: {_one_line(errors[0] if errors else '')}"
                )
        for name, label in by_name.items():
            run = fleet.runs[label][round_name]
            self._collect(fleet, label, run)
            if action == "run" and run.outcome == "pending":
                if self.interrupted:
                    continue
                run.outcome = "failed"
                run.reason = run.reason or failures.get(name) or "the playbook ended before this host finished"
            progress.update(label)
        fleet.save()

    def _environment(self, fleet: FleetRun) -> dict[str, str]:
        env = ansible_environment(
            mode=fleet.mode, accept_new_host_keys=fleet.accept_new_host_keys, control_dir=self._control_dir()
        )
        fleet.gathering = gathering_settings(env)
        return env

    def _control_dir(self) -> Path:
        if self.control_dir is None:
            self.control_dir = Path(tempfile.mkdtemp(prefix="ccbench-ssh-"))
        return self.control_dir

    def _close_connections(self) -> None:
        """End the SSH masters of this run (ControlPersist would keep them a minute)."""
        if self.control_dir is None:
            return
        for socket_path in self.control_dir.iterdir():
            subprocess.run(
                ["ssh", "-o", f"ControlPath={socket_path}", "-O", "exit", "ccbench-fleet"],
                capture_output=True,
                timeout=30,
            )
        shutil.rmtree(self.control_dir, ignore_errors=True)
        self.control_dir = None

    def _on_event(self, fleet: FleetRun, run: HostRun, event: dict, action: str, failures: dict[str, str]) -> None:
        kind, task = event.get("event"), event.get("task", "")
        result = event.get("result") or {}
        phase = PHASES.get(task)
        now = event.get("time") or time.time()
        if kind == "host_task_start" and task == "ccbench:connect":
            # the host is in this phase already (set before the playbook starts): its clock starts here
            run.phase_started["connect"] = now
        if kind == "host_task_start" and phase and not (action == "stop" and phase in ("install", "run")):
            if run.phase != phase:
                previous = run.phase
                if previous in run.phase_started:
                    run.timings[f"{previous}_s"] = round(now - run.phase_started[previous], 3)
                run.phase = phase
                run.phase_started[phase] = now
            return
        if kind == "unreachable":
            run.outcome, run.phase = "unreachable", "unreachable"
            run.reason = _one_line(result.get("msg") or "unreachable")
            return
        if kind == "failed":
            message = result.get("msg") or ""
            if result.get("stderr") and (not message or message == "non-zero return code"):
                message = f"{message}: {_one_line(result['stderr'])}" if message else result["stderr"]
            failures[event["host"]] = f"{task or 'a task'} failed: {_one_line(message)}"
            run.outcome, run.reason = "failed", failures[event["host"]]
            return
        if kind not in ("ok", "retry"):
            return
        stdout = result.get("stdout")
        document = _parse(stdout) if isinstance(stdout, str) else None
        if task == "ccbench:start" and document is not None:
            run.started = True
        if task == "ccbench:components" and kind == "ok" and document is not None:
            run.components = document.get("components")
        if task == "ccbench:stop" and kind == "ok" and document is not None:
            run.stopped = document.get("state") != "running"
            if document.get("exit_code") == 0 and run.outcome == "pending":
                run.outcome = "ok"  # it had finished before the stop request reached it
        if document and task in ("ccbench:start", "ccbench:run", "ccbench:stop", "ccbench:pack"):
            run.executions_done = document.get("executions_done", run.executions_done)
            run.executions_total = document.get("executions_total", run.executions_total)
            run.remote_bundle = document.get("bundle") or run.remote_bundle
            run.first_execution_at = run.first_execution_at or document.get("first_started_at")
            if document.get("state") == "done":
                run.exit_code = document.get("exit_code")
        if task == "ccbench:run" and kind == "ok" and document is not None and document.get("state") != "running":
            code = document.get("exit_code")
            if code == 0:
                run.outcome = "ok"
            elif code == 130:
                run.outcome, run.reason = "interrupted", "the remote run was interrupted"
            elif code is None:
                run.outcome = "failed"
                run.reason = "the remote ccbench run ended without an exit status (killed, or the host restarted)"
            else:
                run.outcome = "failed"
                tail = _one_line(document.get("log_tail") or "")
                run.reason = f"ccbench run exited {code}" + (f": {tail}" if tail else "")
        if kind == "ok" and document is not None and document.get("packed"):
            # packed by the run's last status poll, by the stop, or by the fallback pack task
            run.packed = {k: document.get(k) for k in ("bytes", "files", "file_bytes", "packer")}
            run.timings["pack_s"] = document.get("pack_s")
        if task == "ccbench:fetch" and kind == "ok":
            run.timings["fetch_s"] = round(now - run.phase_started.get("fetch", now), 3)
            if document is not None:
                run.timings["transfer_s"] = document.get("seconds")
        if run.first_execution_at and "first_execution_s" not in run.timings and round_is_first(fleet, run):
            first = _iso_to_epoch(run.first_execution_at)
            if first:
                run.timings["first_execution_s"] = round(first - fleet.command_started, 3)

    def _collect(self, fleet: FleetRun, label: str, run: HostRun) -> None:
        """Unpack a fetched bundle into <fleet>/<label>/[<round>/], checking it on the way."""
        incoming = fleet.directory / ".incoming" / label / run.round / "bundle.tar"
        if not incoming.is_file():
            return
        target = fleet.directory / label / (run.round if len(fleet.rounds) > 1 else "")
        started = time.monotonic()
        try:
            bundle, checks = unpack_bundle(incoming, target, run.packed)
        except GatherError as exc:
            # the archive stays in .incoming/ (nothing measured is thrown away); the host's run failed
            run.outcome, run.reason = "failed", str(exc)
            return
        run.timings["unpack_s"] = round(time.monotonic() - started, 3)
        incoming.unlink()
        run.gathered = checks
        run.bundle = str(bundle.relative_to(fleet.directory))
        if checks.get("attestation") == "mismatch" and run.outcome == "ok":
            run.outcome = "failed"
            run.reason = f"the fetched bundle does not match its attestation.json: {checks['attestation_detail']}"
        summary = probe_summary(bundle)
        if summary:
            fleet.hosts[label]["probe"] = summary

    # -- analysis
    def _analyse(self, fleet: FleetRun) -> None:
        # the baseline's bundles first: compare and report take the first bundle's least-protected
        # configuration as the baseline (per workload, so that prime without a storage variant
        # still finds its baseline; a --baseline label would match several configurations)
        order = sorted(fleet.runs, key=lambda label: label != fleet.baseline)
        bundles = [
            (label, fleet.directory / r.bundle)
            for label in order
            for r in fleet.runs[label].values()
            if r.bundle and r.outcome in ("ok", "failed")
        ]
        labels_present = {label for label, _ in bundles}
        if len(labels_present) < 2:
            fleet.analysis_error = "fewer than two hosts brought back a bundle: nothing to compare"
            return
        args = [str(path) for _, path in bundles]
        for label, path in bundles:
            args += ["--label", f"{path}={label}"]
        env = {**os.environ, "COLUMNS": "200"}
        compare = subprocess.run(
            [sys.executable, "-m", "ccbench", "compare", *args], capture_output=True, text=True, env=env, timeout=1800
        )
        (fleet.directory / "compare.txt").write_text(compare.stdout + compare.stderr)
        fleet.compare = "compare.txt"
        if compare.returncode != 0:
            fleet.analysis_error = f"ccbench compare: {_one_line(compare.stderr)}"
        report = subprocess.run(
            [
                sys.executable,
                "-m",
                "ccbench",
                "report",
                *args,
                "-o",
                str(fleet.directory / "report.html"),
                "--title",
                f"ccbench fleet {fleet.run_id}",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=1800,
        )
        if report.returncode == 0:
            fleet.report = "report.html"
        else:
            fleet.analysis_error = (fleet.analysis_error or "") + f" ccbench report: {_one_line(report.stderr)}"

    def _summary(self, fleet: FleetRun) -> None:
        for label in fleet.hosts:
            bundles = [r.bundle for r in fleet.runs[label].values() if r.bundle]
            reason = fleet.reason(label)
            base = " (baseline)" if label == fleet.baseline else ""
            where = (
                f" -> {fleet.directory / bundles[0]}"
                if len(bundles) == 1
                else (f" -> {len(bundles)} bundles" if bundles else "")
            )
            self.echo(
                f"{label}{base}: {fleet.outcome(label)}{where}"
                + (f" ({reason})" if reason and fleet.outcome(label) != "ok" else "")
            )
        self.echo(f"fleet manifest: {fleet.directory / 'fleet.json'}")
        if fleet.compare:
            self.echo(f"comparison: {fleet.directory / fleet.compare}")
        if fleet.report:
            self.echo(f"report: {fleet.directory / fleet.report}")
        if fleet.analysis_error:
            self.echo(f"analysis: {fleet.analysis_error}")


#: SSH client options for the fleet: connections shared within a run (ControlPersist), no -C
#: (compression costs more CPU than it saves on the links fleets use, and bundles are fetched
#: as one tar), AES-GCM first where both sides have it (the CPU's AES instructions: about 1.5x
#: chacha20's throughput on a fetch here), the rest of OpenSSH's default list after it
SSH_ARGS = "-o ControlMaster=auto -o ControlPersist=60s -o Ciphers=^aes128-gcm@openssh.com,aes256-gcm@openssh.com"


def ansible_environment(*, mode: str, accept_new_host_keys: bool, control_dir: Path) -> dict[str, str]:
    """The environment ansible-playbook runs with (the user's ANSIBLE_SSH_ARGS, ANSIBLE_TIMEOUT,
    ANSIBLE_SSH_TRANSFER_METHOD and interpreter choice win where set)."""
    env = dict(os.environ)
    env.update(
        {
            "ANSIBLE_STDOUT_CALLBACK": "ccbench_events",
            "ANSIBLE_CALLBACK_PLUGINS": str(PACKAGE_DIR / "callback_plugins"),
            "ANSIBLE_LOAD_CALLBACK_PLUGINS": "False",
            "ANSIBLE_HOST_KEY_CHECKING": "True",
            "ANSIBLE_PIPELINING": "True",
            "ANSIBLE_RETRY_FILES_ENABLED": "False",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_INTERPRETER_PYTHON": env.get("ANSIBLE_INTERPRETER_PYTHON", "auto_silent"),
            "ANSIBLE_DEPRECATION_WARNINGS": "False",
            "ANSIBLE_SYSTEM_WARNINGS": "False",
            "ANSIBLE_STRATEGY": "free" if mode != "serial" else "linear",
            "ANSIBLE_SSH_ARGS": env.get("ANSIBLE_SSH_ARGS", SSH_ARGS),
            "ANSIBLE_TIMEOUT": env.get("ANSIBLE_TIMEOUT", "20"),
            # SSH connections are shared within one fleet run only: a master left by another run
            # would skip host key checking and outlive a stopped sshd
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_dir),
        }
    )
    env.pop("ANSIBLE_LOG_PATH", None)  # a log of module arguments is not wanted next to secrets
    if accept_new_host_keys:
        env["ANSIBLE_SSH_EXTRA_ARGS"] = "-o StrictHostKeyChecking=accept-new"
    return env


class GatherError(CCBenchError):
    """A fetched bundle archive that cannot be unpacked safely or does not match what the host packed."""


def unpack_bundle(archive: Path, target: Path, packed: dict | None = None) -> tuple[Path, dict]:
    """Unpack a fetched bundle archive into ``target/<bundle>/`` and check it; return that directory
    and what was checked.

    Refused (GatherError, nothing replaced): members outside one top-level directory, absolute
    paths, ``..``, links, devices; a member whose size on disk differs from its header; a file count
    or byte total other than what the host's ``pack`` reported. Extraction uses tarfile's ``data``
    filter into a staging directory beside the target, which then replaces an earlier copy of the
    same bundle (a resumed host's bundle is a superset of what was fetched before). When the bundle
    has ``attestation.json``, every listed file's size and SHA-256 is compared with it: the result
    is returned (``attestation``: match, mismatch, absent), never raised, so that a stale list
    (a run killed before it could rewrite it) loses no measurement."""
    where = f"the bundle archive {archive}"
    try:
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
            tops = set()
            for member in members:
                parts = Path(member.name).parts
                if member.name.startswith("/") or not parts or ".." in parts:
                    raise GatherError(f"{where}: refused member {member.name!r} (absolute or leaving the bundle)")
                if not (member.isfile() or member.isdir()):
                    raise GatherError(f"{where}: refused member {member.name!r} (a link or special file)")
                tops.add(parts[0])
            if len(tops) != 1:
                raise GatherError(f"{where}: expected one bundle directory, found {sorted(tops) or 'none'}")
            name = tops.pop()
            if name in (".", "") or name.startswith("."):
                raise GatherError(f"{where}: refused bundle directory name {name!r}")
            target.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{name}.unpacking-", dir=target))
            try:
                tar.extractall(staging, filter="data")
                files = [m for m in members if m.isfile()]
                for member in files:
                    size = (staging / member.name).stat().st_size
                    if size != member.size:
                        raise GatherError(
                            f"{where}: {member.name} unpacked to {size} bytes, its header says {member.size}"
                        )
                total = sum(m.size for m in files)
                if packed and packed.get("files") is not None:
                    if (len(files), total) != (packed["files"], packed["file_bytes"]):
                        raise GatherError(
                            f"{where}: {len(files)} files, {total} bytes; the host packed {packed['files']} files, "
                            f"{packed['file_bytes']} bytes: fetch again (ccbench fleet run --resume)"
                        )
                checks = {"files": len(files), "bytes": total, **_check_attestation(staging / name)}
                bundle = target / name
                if bundle.exists():
                    shutil.rmtree(bundle)
                os.replace(staging / name, bundle)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except (tarfile.TarError, EOFError) as exc:
        raise GatherError(f"{where} is damaged ({exc}): fetch again (ccbench fleet run --resume)") from None
    return bundle, checks


def _check_attestation(bundle: Path) -> dict:
    """Sizes and SHA-256s of the files listed in the bundle's attestation.json, against the files
    (files it does not list are not checked: a run killed before rewriting the list adds some)."""
    from ccbench.attestation.digests import sha256_file

    path = bundle / "attestation.json"
    if not path.is_file():
        return {"attestation": "absent"}
    try:
        entries = json.loads(path.read_text()).get("files") or []
    except (OSError, ValueError, AttributeError):
        return {"attestation": "mismatch", "attestation_detail": "attestation.json is not readable JSON"}
    changed, missing = [], []
    for entry in entries:
        file = bundle / str(entry.get("path", ""))
        if not file.is_file() or file.is_symlink():
            missing.append(entry.get("path"))
            continue
        if file.stat().st_size != entry.get("size") or sha256_file(file) != entry.get("sha256"):
            changed.append(entry["path"])
    if changed or missing:
        detail = "; ".join(
            f"{what}: {', '.join(map(str, names[:5]))}{' ...' if len(names) > 5 else ''}"
            for what, names in (("changed", changed), ("missing", missing))
            if names
        )
        return {"attestation": "mismatch", "attestation_detail": detail, "attestation_files": len(entries)}
    return {"attestation": "match", "attestation_files": len(entries)}


def gathering_settings(env: dict[str, str]) -> dict:
    """How bundles travel, as fleet.json records it (the effective values, a user's override included)."""
    return {
        "archive": "one uncompressed tar per bundle, packed on the host (GNU tar), removed after the fetch",
        "fetch": "ccbench_fetch action: the ssh connection's fetch_file, as the login user",
        "transfer_method": env.get("ANSIBLE_SSH_TRANSFER_METHOD") or "smart (sftp, then scp)",
        "ssh_args": env.get("ANSIBLE_SSH_ARGS"),
        "pipelining": env.get("ANSIBLE_PIPELINING"),
        "checks": "archive size, member sizes, file count and bytes as packed, attestation.json SHA-256 list",
    }


def probe_summary(bundle: Path) -> dict | None:
    """The few probe facts fleet.json shows per host (the bundle keeps the whole probe)."""
    try:
        manifest = json.loads((bundle / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    environment = manifest.get("environment") or {}
    cpu, tee = environment.get("cpu") or {}, environment.get("tee") or {}
    return {
        "hostname": environment.get("hostname"),
        "cpu": cpu.get("model"),
        "threads": cpu.get("threads"),
        "memory_bytes": (environment.get("memory") or {}).get("total_bytes"),
        "kernel": (environment.get("kernel") or {}).get("release"),
        "os": (environment.get("os") or {}).get("pretty_name"),
        "virtualization": environment.get("virtualization"),
        "tee": tee.get("technology"),
        "bundle_status": manifest.get("status"),
    }


def round_is_first(fleet: FleetRun, run: HostRun) -> bool:
    return run.round == fleet.rounds[0]


def _parse(line: str | None) -> dict | None:
    if not line:
        return None
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _one_line(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return (lines[-1] if lines else "")[:300]


def run_fleet(options: FleetOptions, echo: Callable[[str], None]) -> int:
    return Controller(options, echo).run()
