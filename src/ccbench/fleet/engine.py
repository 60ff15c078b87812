"""`ccbench fleet run`: one plan on every host of an Ansible inventory, gathered into one comparison.

The controller's life cycle (this module): a new run or a resumed one (``start``, which holds the
options too), the wheelhouse, one ``ansible-playbook`` run per round and batch with the shipped
playbook (``ansible_env``: it and its environment), whose event stream (the ``ccbench_events``
callback: JSON lines) ``events.advance`` turns into each host's state and one progress line per
host; then each fetched bundle unpacked into ``<out>/<fleet-run>/<label>/`` and checked as it
streams in (``gather.receive_bundle``, run by the fetch), ``fleet.json`` written (``records``), and
``ccbench compare`` and ``ccbench report`` run over the bundles with the inventory's baseline.

Modes: ``parallel`` (one playbook run over all hosts, ``--forks`` at once, strategy ``free`` so
a slow host holds no one up), ``serial`` (one host after the other), ``rounds`` (repetition k
on every host before repetition k+1: the plan runs once per round with ``--repeat 1``).

Interruption (SIGINT, SIGTERM, or SIGHUP from a dropped session): the playbook is stopped, then a second playbook run sends SIGINT
to every started remote ``ccbench run`` (it stops cleanly and keeps what it measured) and fetches
the partial bundles; ``--resume FLEETDIR`` continues each host's bundle with ``ccbench run --resume``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ccbench.basics.errors import CCBenchError
from ccbench.basics.stopping import catch_stop_signals, restore_signals
from ccbench.fleet import events, gather, peers, settling, sshcontrol
from ccbench.fleet import inventory as inventory_module
from ccbench.fleet import wheelhouse as wheelhouse_module
from ccbench.fleet.ansible_env import PLAYBOOK, ansible_environment
from ccbench.fleet.gather import gathering_settings, probe_summary
from ccbench.fleet.hostprogress import Progress
from ccbench.fleet.records import FleetRun, HostRun, now_iso, one_line
from ccbench.fleet.start import FleetOptions, new_run, resume_run


class Controller:
    def __init__(self, options: FleetOptions, echo: Callable[[str], None]):
        self.options = options
        self.echo = echo
        self.interrupted = False
        self.stopping = False
        self.process: subprocess.Popen | None = None
        self.control_dir: Path | None = None
        self.stop_flag: Path | None = None

    # -- signal handling: the first SIGINT/SIGTERM/SIGHUP stops the playbook; stopping remote runs follows
    def _on_signal(self, signum, frame):
        """First signal: ask the running playbook to stop the remote runs and fetch what they
        measured (the flag file its tasks test). Second: interrupt the playbook itself (a
        separate stop playbook then does the same)."""
        first = not self.interrupted
        self.interrupted = True
        if self.stop_flag is not None:
            self.stop_flag.write_text("stop\n")
        if first:
            # said at once (the stop and the fetch take seconds, more under emulation); written to the
            # descriptor, not through a Python stream the interrupted code may be in the middle of using
            with contextlib.suppress(OSError):
                os.write(
                    2, b"interrupted: stopping the runs (each keeps what it measured) and fetching their bundles\n"
                )
        process = self.process
        if first or self.stopping or process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGINT)
        except ProcessLookupError:
            pass

    def run(self) -> int:
        previous = catch_stop_signals(self._on_signal)
        try:
            return self._run()
        finally:
            self._close_connections()
            restore_signals(previous)

    def _run(self) -> int:
        fleet = resume_run(self.options) if self.options.resume else new_run(self.options)
        self.stop_flag = fleet.directory / ".ansible" / "stop-requested"
        self.stop_flag.parent.mkdir(exist_ok=True)
        self.stop_flag.unlink(missing_ok=True)
        fleet.save()
        self.echo(
            f"fleet run {fleet.run_id}: plan {fleet.plan}, {len(fleet.hosts)} host(s), mode {fleet.mode}, "
            f"baseline {fleet.baseline} -> {fleet.directory}"
        )
        wheelhouse = self._wheelhouse(fleet)
        progress = Progress(fleet)
        try:
            # hosts named as a ccbench_peer serve for the rounds, and stop serving however they end
            with peers.serving(self, fleet, wheelhouse):
                self._play_rounds(fleet, wheelhouse, progress)
                if self.interrupted:
                    self._stop_remote_runs(fleet, wheelhouse, progress)
        finally:
            progress.stop()
        return self._finish(fleet)

    def _wheelhouse(self, fleet: FleetRun):
        """The wheels every host installs from (built once, cached by content), recorded in fleet.json."""
        components, left_out = wheelhouse_module.wheelhouse_components(
            sorted({c for h in fleet.hosts.values() for c in h.get("components", [])}),
            sorted({c for h in fleet.hosts.values() for c in h.get("setup_components", [])}),
        )
        for component, reason in left_out.items():
            self.echo(f"{component}: {reason}")
        # scipy only for plans with a precision or detect target (a fleet.json of an older version,
        # resumed, has no such field: it gets scipy, as it did then)
        from ccbench.workloads import shipped_tools

        precision = any(h.get("precision", True) for h in fleet.hosts.values())
        wanted = {t for h in fleet.hosts.values() for t in h.get("tools", [])}
        tools = {}
        for name, found in sorted(shipped_tools().items()):
            if name not in wanted:
                continue
            if isinstance(found, Path):
                tools[name] = found
            else:  # not built here: the hosts' workloads name it as missing, with their own reason
                left_out[name] = f"not shipped to the hosts: {found}"
                self.echo(f"{name}: {left_out[name]}")
        wheelhouse = wheelhouse_module.build(components, precision=precision, log=self.echo, tools=tools)
        fleet.wheelhouse = {
            "key": wheelhouse.key,
            "python": wheelhouse.python,
            "packages": wheelhouse.pins,
            "cached": not wheelhouse.built,
            "bytes": wheelhouse.tar.stat().st_size,
            "components": components,
            "tools": wheelhouse.tools,
            "left_out": left_out,
        }
        fleet.save()
        return wheelhouse

    def _play_rounds(self, fleet: FleetRun, wheelhouse, progress: Progress) -> None:
        """Each round on every host not done yet: all at once, or one host after the other (serial).
        Settling across labels looks after each round and appends the next one, or ends them."""
        try:
            self._each_round(fleet, wheelhouse, progress)
        finally:
            settling.close(fleet, self.interrupted)
            fleet.save()

    def _each_round(self, fleet: FleetRun, wheelhouse, progress: Progress) -> None:
        for round_name in fleet.rounds:
            pending = [
                label
                for label in fleet.hosts
                if fleet.runs[label][round_name].outcome != "ok" and not self._given_up(fleet, label, round_name)
            ]
            batches = [[label] for label in pending] if fleet.mode == "serial" else [pending] if pending else []
            for batch in batches:
                if self.interrupted:
                    return
                self._play(fleet, wheelhouse, round_name, batch, "run", progress)
            if self.interrupted:
                return
            if fleet.settling and not settling.after_round(fleet, round_name, self.echo):
                return

    def _stop_remote_runs(self, fleet: FleetRun, wheelhouse, progress: Progress) -> None:
        """After an interruption: SIGINT to every remote run still going, its bundle fetched, and
        what was cut short recorded as interrupted."""
        self.stopping = True
        started = [
            (label, name)
            for label, rounds in fleet.runs.items()
            for name, r in rounds.items()
            if r.started and not r.stopped and r.outcome not in ("ok", "unreachable")
        ]
        if started:  # said only when some run is still going (the interrupted play stops and fetches the rest)
            self.echo("stopping the remote runs (SIGINT: they keep what they measured) and fetching their bundles")
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

    def _finish(self, fleet: FleetRun) -> int:
        """Record how the run ended, compare and report, print the summary; the exit status."""
        fleet.status = "interrupted" if self.interrupted else "complete"
        fleet.save()
        if not self.interrupted and self.options.report:
            gather.compare_and_report(fleet)
            fleet.save()
        if not self.interrupted and self.options.history:
            self.echo(gather.add_to_history(fleet, self.options.history))
        self._summary(fleet)
        if self.interrupted:
            if fleet.settling:
                self.echo(
                    f"interrupted. A run settling across labels does not resume; compare: ccbench compare {fleet.directory}"
                )
            elif not self.options.resumable:
                self.echo(f"interrupted: the runs are stopped and what they measured is in {fleet.directory}")
            else:
                self.echo(
                    f"interrupted. Resume with: {shlex.join(['ccbench', 'fleet', 'run', '--resume', str(fleet.directory)])}"
                )
            return 130
        return 0 if all(fleet.outcome(label) == "ok" for label in fleet.hosts) else 1

    @staticmethod
    def _given_up(fleet: FleetRun, label: str, round_name: str) -> bool:
        """A host unreachable or failed in an earlier round is not tried again in later rounds."""
        index = fleet.rounds.index(round_name)
        return any(fleet.runs[label][name].outcome in ("unreachable", "failed") for name in fleet.rounds[:index])

    # -- one ansible-playbook run
    def _ccbench_args(self, fleet: FleetRun, run: HostRun) -> list[str]:
        if run.remote_bundle:
            return ["run", "--resume", run.remote_bundle, "--workdir", "@BASE@/work"]
        plan = "@RUN_DIR@/plan" + Path(fleet.plan_file).suffix if fleet.plan_file else fleet.plan
        args = ["run", plan, "--out", "@RUN_DIR@/out", "--workdir", "@BASE@/work", *fleet.run_args]
        if fleet.mode == "rounds":
            args += ["--repeat", "1", *settling.only_args(fleet, run.round)]
        return args

    def _play(
        self, fleet: FleetRun, wheelhouse, round_name: str, labels: list[str], action: str, progress: Progress
    ) -> None:
        """One ansible-playbook run of ``action`` (run or stop) for ``labels`` in one round: its
        events turned into each host's state as they come, then what it fetched gathered."""
        by_name = {fleet.hosts[label]["inventory_hostname"]: label for label in labels}
        if action == "run":
            for label in labels:
                run = fleet.runs[label][round_name]
                run.phase, run.outcome, run.reason = "connect", "pending", None
        state = fleet.directory / ".ansible"
        state.mkdir(exist_ok=True)
        extra_file = state / f"extra-vars-{action}-{round_name}.json"
        extra_file.write_text(json.dumps(self._extra_vars(fleet, wheelhouse, round_name, by_name, action)))
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
        failures = self._stream(fleet, argv, state, round_name, by_name, action, progress)
        for name, label in by_name.items():
            run = fleet.runs[label][round_name]
            self._collect(fleet, label, run)
            if action == "run" and run.outcome == "pending" and not self.interrupted:
                run.outcome = "failed"
                run.reason = run.reason or failures.get(name) or "the playbook ended before this host finished"
            progress.update(label)
        fleet.save()

    def _extra_vars(self, fleet: FleetRun, wheelhouse, round_name: str, by_name: dict[str, str], action: str) -> dict:
        """What the playbook is told: per host its label, round, where its bundle goes, its set-up
        components and its ccbench command; the wheelhouse, the plan, the stop flag."""
        hosts_vars = {
            name: {
                "label": label,
                "round": round_name,
                "dest": str(fleet.directory / ".incoming" / label / round_name / "received.json"),
                "target": str(fleet.directory / label / (round_name if len(fleet.rounds) > 1 else "")),
                "components": fleet.hosts[label].get("setup_components", []),
                "ccbench_args": self._ccbench_args(fleet, fleet.runs[label][round_name]),
                "peer_address": fleet.hosts[label].get("peer_address") or "",
            }
            for name, label in by_name.items()
        }
        return {
            "ccbench_fleet": {
                "action": action,
                "run_id": fleet.run_id,
                "hosts": hosts_vars,
                **wheelhouse.play_vars(),
                "controller_python": sys.executable,
                "plan_content": Path(fleet.plan_file).read_text() if fleet.plan_file and action == "run" else "",
                "plan_suffix": Path(fleet.plan_file).suffix if fleet.plan_file else "",
                "stop_flag": str(self.stop_flag),
                "poll_s": self.options.poll_s,
                "max_polls": 1_000_000,
                "stop_grace_s": self.options.stop_grace_s,
            }
        }

    def _stream(
        self,
        fleet: FleetRun,
        argv: list[str],
        state: Path,
        round_name: str,
        by_name: dict[str, str],
        action: str,
        progress: Progress,
    ) -> dict[str, str]:
        """Run the playbook, applying each event to its host's round as it comes (fleet.json saved
        after each); return the failure message per inventory hostname."""
        failures: dict[str, str] = {}
        stderr_path = state / "ansible-stderr.log"
        # the event stream as it came (the callback keeps no variable or secret): a record to read
        # back when a host's outcome puzzles, and the tests' recorded input for the event reducer
        events_path = state / f"events-{action}-{round_name}.jsonl"
        with open(stderr_path, "a") as stderr_log, open(events_path, "a") as events_log:
            stderr_log.write(f"--- {now_iso()} {action} {round_name} {','.join(by_name)}\n")
            stderr_log.flush()
            offset = stderr_log.tell()
            self.process = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=stderr_log,
                text=True,
                env=self._environment(fleet),
                start_new_session=True,
                cwd=str(state),
            )
            try:
                for line in self.process.stdout:
                    event = events.parse_event(line)
                    if event is None:
                        continue
                    events_log.write(line if line.endswith("\n") else line + "\n")
                    events_log.flush()
                    if event.get("host") in by_name:
                        label = by_name[event["host"]]
                        self._apply(fleet, label, round_name, event, action, failures)
                        progress.update(label)
                        fleet.save()
            finally:
                returncode = self.process.wait()
                self.process = None
        if returncode not in (0, 2, 4) and not self.interrupted:
            with open(stderr_path, errors="replace") as handle:
                handle.seek(offset)
                errors = [
                    inventory_module.redact_secrets(line) for line in handle.read().splitlines() if "ERROR" in line
                ]
            for name in by_name:
                failures.setdefault(
                    name, f"ansible-playbook exited {returncode}: {one_line(errors[0] if errors else '')}"
                )
        return failures

    def _apply(
        self, fleet: FleetRun, label: str, round_name: str, event: dict, action: str, failures: dict[str, str]
    ) -> None:
        run = fleet.runs[label][round_name]
        context = events.Context(
            action=action,
            command_started=fleet.command_started,
            first_round=fleet.is_first_round(run),
            now=time.time(),
        )
        fleet.runs[label][round_name], failure = events.advance(run, event, context)
        if failure is not None:
            failures[event["host"]] = failure

    def _environment(self, fleet: FleetRun) -> dict[str, str]:
        env = ansible_environment(
            mode=fleet.mode, accept_new_host_keys=fleet.accept_new_host_keys, control_dir=self._control_dir()
        )
        fleet.gathering = gathering_settings(env)
        return env

    def _control_dir(self) -> Path:
        if self.control_dir is None:
            self.control_dir = sshcontrol.make_control_dir(self.options.workdir)
        return self.control_dir

    def _close_connections(self) -> None:
        """End the SSH masters of this run (ControlPersist would keep them a minute)."""
        if self.control_dir is None:
            return
        sshcontrol.close_control_dir(self.control_dir)
        self.control_dir = None

    def _collect(self, fleet: FleetRun, label: str, run: HostRun) -> None:
        """Take in a bundle the fetch received into <fleet>/<label>/[<round>/], checked on the way
        (``gather.receive_bundle``: the fetch writes what it checked to .incoming/)."""
        incoming = fleet.directory / ".incoming" / label / run.round / "received.json"
        if not incoming.is_file():
            return
        try:
            received = json.loads(incoming.read_text())
            bundle = Path(received["bundle"])
            checks = received["checks"]
            run.bundle = str(bundle.relative_to(fleet.directory))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            run.outcome, run.reason = "failed", f"the fetch's record {incoming} is not readable ({exc})"
            return
        incoming.unlink()
        run.gathered = {**checks, **self._columnar(bundle)}
        if checks.get("attestation") == "mismatch" and run.outcome == "ok":
            run.outcome = "failed"
            run.reason = f"the fetched bundle does not match its attestation.json: {checks['attestation_detail']}"
        summary = probe_summary(bundle)
        if summary:
            fleet.hosts[label]["probe"] = summary

    @staticmethod
    def _columnar(bundle: Path) -> dict:
        """The journal converted to Parquet on the controller (gather.columnar_on_gathering); a
        failure is recorded, never the host's: the journal holds every sample and the analysis
        converts it itself."""
        started = time.monotonic()
        try:
            result = gather.columnar_on_gathering(bundle)
        except (ImportError, OSError, CCBenchError) as exc:
            return {"parquet": "failed", "parquet_reason": one_line(str(exc))}
        except Exception as exc:  # noqa: BLE001 - pyarrow's own errors: the bundle is gathered all the same
            return {"parquet": "failed", "parquet_reason": one_line(f"{type(exc).__name__}: {exc}")}
        if result.get("parquet") == "controller":
            result["parquet_s"] = round(time.monotonic() - started, 3)
        return result

    def _summary(self, fleet: FleetRun) -> None:
        compared = len({fleet.label_of(label) for label in fleet.hosts}) > 1  # one label: no baseline to name
        for label in fleet.hosts:
            bundles = [r.bundle for r in fleet.runs[label].values() if r.bundle]
            reason = fleet.reason(label)
            base = " (baseline)" if compared and fleet.label_of(label) == fleet.baseline else ""
            where = (
                f" -> {fleet.directory / bundles[0]}"
                if len(bundles) == 1
                else (f" -> {len(bundles)} bundles" if bundles else "")
            )
            self.echo(
                f"{label}{base}: {fleet.outcome(label)}{where}"
                + (f" ({reason})" if reason and fleet.outcome(label) != "ok" else "")
            )
        for line in settling.summary_lines(fleet):
            self.echo(line)
        self.echo(f"fleet manifest: {fleet.directory / 'fleet.json'}")
        if fleet.compare:
            self.echo(f"comparison: {fleet.directory / fleet.compare}")
        if fleet.report:
            self.echo(f"report: {fleet.directory / fleet.report}")
        if fleet.analysis_error:
            self.echo(f"analysis: {fleet.analysis_error}")


def run_fleet(options: FleetOptions, echo: Callable[[str], None]) -> int:
    return Controller(options, echo).run()
