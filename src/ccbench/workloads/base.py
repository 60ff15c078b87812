"""The workload interface. Adding a workload = one module here + one line in workloads/__init__.py.

Life cycle, driven by the runner (see runner.py):

* ``requirements()``   in the runner, before anything runs: a skip reason with an install hint, or None.
* ``prepare(ctx)``     in the runner, once per variant combination (not timed): generate data etc.
* ``run(ctx)``         in a fresh worker process per execution (own process group, optional CPU
                       pinning, killed as a whole on timeout); returns Measurements.
* ``cleanup(ctx)``     in the runner, once per variant combination, after the last execution.

A workload also declares what it needs, so that the generic layers (runner, fleet, wheelhouse)
never name a kind: its set-up component, whether the fleet ships that component's Python extra,
the programs built here that the fleet ships (``shipped_tools``),
the before-run checks it asks for, and how to undo what a killed run of it left
(``cleanup_stale``).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from ccbench.model import Measurement


class WorkloadParams(BaseModel):
    """Base for every workload's typed parameters: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


class WorkloadFailed(Exception):
    """Raised by a workload when an execution failed in an expected way (the message is recorded)."""


class RepeatingFailure(WorkloadFailed):
    """Raised when an execution failed in the workload's own code and would fail the same way again
    (an exception in a notebook cell, a command that does not exist; never a timeout). The runner
    records the execution as failed and skips the remaining executions of the same variant
    combination, warmups included, with this message as the reason."""


@dataclass
class CommandResult:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    user_s: float
    sys_s: float
    max_rss_kib: int

    def failure(self) -> str:
        """One line saying how the command failed, with the end of its output."""
        output = tail(self.stderr, 5, 800) or tail(self.stdout, 5, 800)
        if not output:
            return f"{shlex.join(self.argv)} exited with {self.returncode} (no output on stderr or stdout)"
        return f"{shlex.join(self.argv)} exited with {self.returncode}: {output}"


def selected(parts: list[dict[str, str]] | None, key: str, values: Sequence[Any]) -> list[Any]:
    """The values of one selectable case key (Workload.selectable) that an execution's parts name,
    in the workload's order; all of them when it runs the whole workload (parts None)."""
    if parts is None:
        return list(values)
    wanted = {part.get(key) for part in parts}
    chosen = [value for value in values if str(value) in wanted]
    if not chosen:
        raise WorkloadFailed(
            f"none of the parts asked for ({parts}) is one of this workload's {key} values "
            "(a ccbench bug: run the plan without settle, and report it)"
        )
    return chosen


def tail(text: str, lines: int = 20, chars: int = 4000) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])[-chars:]


@dataclass
class PrepareContext:
    """Handed to prepare() and cleanup(), in the runner process."""

    workload_name: str
    workdir: Path
    raw_dir: Path
    variant: dict[str, Any]
    #: the environment probe document (see probe/)
    environment: dict[str, Any] = field(default_factory=dict)
    #: what serves each of the variants' protection layers (PreparedVariant.serving), set by the runner
    layer: list[dict[str, list]] = field(default_factory=list)
    #: pids of the processes the workload started for its executions outside the worker (register_servers)
    servers: list[int] = field(default_factory=list)

    def register_servers(self, pids: Iterable[int | None]) -> None:
        """Say which processes this prepare started to serve the executions (servers, in network
        namespaces or not): their trees' CPU is the executions' own, not other processes' work, in
        the interference watch (ccbench.observe.interference)."""
        self.servers += [pid for pid in pids if pid and pid not in self.servers]

    def companions(self) -> dict[str, list]:
        """The WorkerJob fields that hand the servers and the layer's workers to the watch."""
        fields: dict[str, list] = {"servers": list(self.servers), "layer_pids": [], "layer_threads": []}
        for serving in self.layer:
            for key in ("layer_pids", "layer_threads"):
                fields[key] += [value for value in serving.get(key, []) if value not in fields[key]]
        return fields


@dataclass
class ExecutionContext:
    """Handed to run(), in the worker process, once per execution."""

    workload_name: str
    #: the directory the workload works in: the storage variant's directory when it has one
    workdir: Path
    #: where this execution keeps tools' own output (inside the bundle's raw/)
    raw_dir: Path
    repetition: int
    warmup: bool
    variant: dict[str, Any]
    timeout: float | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    #: the parts to run, each a case by the workload's ``selectable`` keys; None: all of them
    parts: list[dict[str, str]] | None = None

    def run_command(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        log_name: str | None = None,
        input_text: str | None = None,
        check: bool = True,
    ) -> CommandResult:
        """Run a command, keep its stdout/stderr under raw_dir, and measure it with wait4 rusage.

        The command runs in the worker's process group, so the runner's timeout ends it too.
        """
        argv = [str(a) for a in argv]
        log_name = log_name or Path(argv[0]).name
        self.raw_dir.mkdir(parents=True, exist_ok=True)
        out_path = self.raw_dir / f"{log_name}.stdout"
        err_path = self.raw_dir / f"{log_name}.stderr"
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            start = time.perf_counter()
            proc = subprocess.Popen(
                argv,
                cwd=str(cwd or self.workdir),
                env=full_env,
                stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )
            if input_text is not None:
                assert proc.stdin is not None
                proc.stdin.write(input_text.encode())
                proc.stdin.close()
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - start
            proc.returncode = os.waitstatus_to_exitcode(status)
        stdout = out_path.read_text(errors="replace")
        stderr = err_path.read_text(errors="replace")
        result = CommandResult(
            argv=argv,
            returncode=proc.returncode,
            stdout=stdout,
            stderr=stderr,
            wall_s=wall,
            user_s=usage.ru_utime,
            sys_s=usage.ru_stime,
            max_rss_kib=usage.ru_maxrss,
        )
        if check and proc.returncode != 0:
            raise WorkloadFailed(result.failure())
        return result


#: the before-run check (ccbench.probe.syscheck) of whether the TLS library's AES runs at full speed
TLS_AES_CHECK = "tls-aes"
#: the lint's bounce-buffer check (ccbench.probe.lint.small_swiotlb): asked by kinds that move data through
#: devices (disk or network DMA), which a SEV or TDX guest bounces through swiotlb
DEVICE_IO_CHECK = "device-io"


def missing_tools(*names: str) -> list[str]:
    """The commands among ``names`` that are not on PATH."""
    return [name for name in names if shutil.which(name) is None]


def size_bytes(size: str) -> int:
    """Bytes in a size like 64M, 2G, 512k or 4096 (powers of 1024)."""
    number, unit = re.fullmatch(r"(\d+)([KkMmGg]?)", size).groups()
    return int(number) * {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}[unit.lower()]


@dataclass(frozen=True)
class MetricCase:
    """One metric, optionally narrowed to the samples whose case (params) holds these values."""

    metric: str
    case: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "case": dict(self.case)}


@dataclass(frozen=True)
class Floor:
    """A physical floor measured in the same run: ``measured`` against ``floor`` (a handshake
    against the X25519 operations it needs, throughput against the AEAD ceiling of one core)."""

    measured: MetricCase
    floor: str
    what: str

    def as_dict(self) -> dict[str, Any]:
        return {"measured": self.measured.as_dict(), "floor": self.floor, "what": self.what}


@dataclass(frozen=True)
class MessageCosts:
    """Per-message costs set against one unit of application work measured on the same machine.

    A request costs ``per_request`` (its value under the protection minus the unprotected one); a
    request that opens its connection also costs ``per_connection`` (minus the unprotected one,
    none where the unprotected transport has no handshake). Both as a share of ``application``."""

    application: MetricCase
    #: what one unit of application work is, for the verdict's sentence ("one MiniLM-L6-v2 embedding")
    application_text: str
    per_request: MetricCase
    per_connection: MetricCase
    floors: tuple[Floor, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "application": self.application.as_dict(),
            "application_text": self.application_text,
            "per_request": self.per_request.as_dict(),
            "per_connection": self.per_connection.as_dict(),
            "floors": [floor.as_dict() for floor in self.floors],
        }


class Workload(ABC):
    #: the plan's ``kind``
    kind: ClassVar[str]
    #: one line for ``ccbench plans`` / docs
    description: ClassVar[str] = ""
    Params: ClassVar[type[WorkloadParams]] = WorkloadParams
    #: the variant axes this workload honours ("storage": runs in the variant's directory,
    #: "transport": measures the variant's transport). Others in the plan defaults are ignored.
    variant_axes: ClassVar[frozenset[str]] = frozenset()
    #: parameters that describe a matrix of cases (e.g. fio block sizes): left out of each
    #: sample's params, since each Measurement names its own case in ``Measurement.case``.
    matrix_params: ClassVar[frozenset[str]] = frozenset()
    #: the set-up component (scripts/setup.d/NN-NAME.sh) that installs this kind's tools; the fleet
    #: runs it on every host whose plan has this kind
    setup_component: ClassVar[str | None] = None
    #: whether the fleet's wheelhouse carries that component's Python extra whenever a plan needs
    #: this kind (not for extras of gigabytes or with an environment of their own: those go in only
    #: when a host names the component in ccbench_components)
    ships_python_extra: ClassVar[bool] = False
    #: the before-run checks this kind asks for (e.g. TLS_AES_CHECK)
    system_checks: ClassVar[tuple[str, ...]] = ()
    #: the metrics that are this kind's application-level result (a notebook's wall time, an
    #: inference's time, a request's latency at a rate): the verdict takes a protection layer's
    #: typical cost from these alone, while the others (per-cell times, pipe round trips, handshake
    #: microseconds) stay in the tables and charts. Every kind declares it (empty where it measures
    #: no application result); each run's manifest records it, so analysis needs no workload code.
    primary_metrics: ClassVar[tuple[str, ...]] = ()
    #: for a kind that measures per-message costs of a transport protection beside one unit of real
    #: application work (see MessageCosts): how the verdict turns them into the share of that work
    #: the protection adds, and which floors measured in the same run they are held against
    message_costs: ClassVar[MessageCosts | None] = None
    #: the case keys that name a part of an execution that can run alone (fio: a job, by its block
    #: size and pattern): rounds that settle cases run only the parts whose cases are still open
    #: (ExecutionContext.parts; ccbench.run.settle). Empty: every execution runs all of the workload.
    selectable: ClassVar[tuple[str, ...]] = ()

    def __init__(self, name: str, params: WorkloadParams):
        self.name = name
        self.params = params

    @classmethod
    def checks_for(cls, variants: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
        """The before-run checks of this kind with these variant axes: its own, and the TLS AES check
        whenever it measures transport variants."""
        return cls.system_checks + ((TLS_AES_CHECK,) if "transport" in variants else ())

    @classmethod
    def cleanup_stale(cls, workdir: Path) -> list[str]:
        """Undo what a killed run of this kind left under workdir (servers, files); say each thing
        undone. Called before a run and by ``ccbench cleanup``, with the workdir lock held (nothing
        there belongs to a live run), and only when ``workdir/<kind>`` exists: keep there what a
        killed run could leave (or a record of it)."""
        return []

    @classmethod
    def shipped_tools(cls) -> dict[str, Path | str]:
        """Programs built from this checkout that the fleet ships to hosts and study guests beside
        ccbench (they have no source checkout to build them in): each name with this machine's file,
        or why there is none. The wheelhouse carries each with its SHA-256, checked on arrival, and
        installs it as ``<venv>/libexec/ccbench/<name>``, where the workload must look for it."""
        return {}

    def requirements(self) -> str | None:
        """Return why this workload cannot run here (with an install hint), or None."""
        return None

    def peer_services(self) -> list[list[str]]:
        """What a serving host runs for this workload when a fleet host names it as its ``ccbench_peer``:
        argvs that listen until stopped (the fleet bounds them in time). None for most kinds."""
        return []

    def prepare(self, ctx: PrepareContext) -> None:  # noqa: B027 - optional hook
        pass

    @abstractmethod
    def run(self, ctx: ExecutionContext) -> list[Measurement]: ...

    def cleanup(self, ctx: PrepareContext) -> None:  # noqa: B027 - optional hook
        pass

    def sample_params(self, measurement: Measurement) -> dict[str, Any]:
        """The params recorded on a sample: the workload's, less matrix params, plus the case."""
        params = {k: v for k, v in self.params.model_dump(mode="json").items() if k not in self.matrix_params}
        params.update(measurement.case)
        return params
