"""The records of one fleet run: each host's part per round (``HostRun``), the whole run
(``FleetRun``) and ``fleet.json``, the document both are saved as and resumed from.

Nothing here starts a process or reads the network: the controller (``engine``) changes these
records as the playbook's events arrive (``events``) and saves them after each change.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ccbench.basics.errors import CCBenchError
from ccbench.basics.fsutil import write_json_atomic
from ccbench.basics.version import __version__

FLEET_FORMAT = 1
#: outcomes from worst to best-but-unfinished: a host's overall outcome is the worst of its rounds
_WORST_FIRST = ("unreachable", "failed", "interrupted", "pending")
#: what fleet.json adds per host beyond its public record (recomputed, so dropped when resuming)
_DERIVED_HOST_KEYS = ("outcome", "reason", "bundles", "rounds", "component_setup")


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
    gathered: dict | None = None  # the checks made while unpacking (see gather.unpack_bundle)
    components: dict | None = None  # per set-up component: status, reason, whether apt was called

    def record(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "phase_started"}

    @classmethod
    def resumed(cls, record: dict) -> HostRun:
        """The round as a resumed run starts it: kept when it ended ok, to be run again otherwise
        (its remote bundle kept, so the host continues it rather than starting over)."""
        run = cls(**{k: v for k, v in record.items() if k in cls.__dataclass_fields__ and k != "phase_started"})
        if run.outcome != "ok":
            run.outcome, run.reason, run.phase, run.exit_code = "pending", None, "pending", None
        return run


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
    hosts: dict[str, Any]  # host key (its label; "<label>/<host>" for replicas) -> public host record
    runs: dict[str, dict[str, HostRun]]  # host key -> round -> HostRun
    baseline: str
    started_at: str
    command_started: float = field(default_factory=time.time)
    wheelhouse: dict[str, Any] = field(default_factory=dict)
    gathering: dict[str, Any] = field(default_factory=dict)
    status: str = "running"
    compare: str | None = None
    report: str | None = None
    analysis_error: str | None = None
    #: what every host's ``ccbench run`` gets besides the plan (``--settle 5% --budget 20m``)
    run_args: list[str] = field(default_factory=list)
    #: rounds mode settling each case across labels (ccbench.fleet.settling): its parameters, the
    #: workloads each round ran, each case's answer and what stopped it; None otherwise
    settling: dict[str, Any] | None = None

    def to_json(self) -> dict:
        return {
            "format": "ccbench-fleet",
            "format_version": FLEET_FORMAT,
            "fleet_run": self.run_id,
            "ccbench_version": __version__,
            "ansible_version": ansible_version(),
            "plan": self.plan,
            "plan_file": self.plan_file,
            "inventory": str(self.inventory),
            "mode": self.mode,
            "run_args": self.run_args,
            "forks": self.forks,
            "limit": self.limit,
            "accept_new_host_keys": self.accept_new_host_keys,
            "rounds": self.rounds,
            "baseline": self.baseline,
            "started_at": self.started_at,
            "ended_at": now_iso() if self.status != "running" else None,
            "status": self.status,
            "wheelhouse": self.wheelhouse,
            "gathering": self.gathering,
            "hosts": {label: self._host_json(label) for label in self.hosts},
            "compare": self.compare,
            "report": self.report,
            "analysis_error": self.analysis_error,
            "settling": self.settling,
        }

    def _host_json(self, label: str) -> dict:
        rounds = self.runs[label]
        return {
            **self.hosts[label],
            "outcome": self.outcome(label),
            "reason": self.reason(label),
            "bundles": [r.bundle for r in rounds.values() if r.bundle],
            # the latest set-up result per component (each round checks again)
            "component_setup": next((r.components for r in reversed(rounds.values()) if r.components), None),
            "rounds": {name: r.record() for name, r in rounds.items()},
        }

    @classmethod
    def from_json(cls, directory: Path, document: dict, *, forks: int | None, accept_new_host_keys: bool) -> FleetRun:
        """A run read back from its fleet.json for --resume (the rounds that ended ok are kept)."""
        runs = {
            label: {name: HostRun.resumed(host["rounds"].get(name, {"round": name})) for name in document["rounds"]}
            for label, host in document["hosts"].items()
        }
        hosts = {
            label: {k: v for k, v in host.items() if k not in _DERIVED_HOST_KEYS}
            for label, host in document["hosts"].items()
        }
        return cls(
            directory=directory.resolve(),
            plan=document["plan"],
            plan_file=document.get("plan_file"),
            inventory=Path(document["inventory"]),
            mode=document["mode"],
            forks=forks or document["forks"],
            limit=document.get("limit"),
            accept_new_host_keys=accept_new_host_keys or document.get("accept_new_host_keys", False),
            run_id=document["fleet_run"],
            rounds=document["rounds"],
            hosts=hosts,
            runs=runs,
            baseline=document["baseline"],
            started_at=document["started_at"],
            run_args=list(document.get("run_args") or []),
            settling=document.get("settling"),
        )

    def label_of(self, key: str) -> str:
        """The configuration a host's runs belong to: its ccbench_label (replicas share one)."""
        return self.hosts[key].get("label") or key

    def outcome(self, label: str) -> str:
        outcomes = [r.outcome for r in self.runs[label].values()]
        return next((worst for worst in _WORST_FIRST if worst in outcomes), "ok")

    def reason(self, label: str) -> str | None:
        return next((r.reason for r in self.runs[label].values() if r.reason), None)

    def is_first_round(self, run: HostRun) -> bool:
        return run.round == self.rounds[0]

    def save(self) -> None:
        write_json_atomic(self.directory / "fleet.json", self.to_json())


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


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def iso_to_epoch(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def one_line(text: str) -> str:
    """The last non-empty line of ``text``, at most 300 characters (a reason for a summary line)."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return (lines[-1] if lines else "")[:300]
