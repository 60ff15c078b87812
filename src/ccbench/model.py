"""The data contracts: a Sample (one measured number), and what the runner and its worker
process hand each other (the job, the result, the execution record), with their statuses."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import Enum
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

Better = Literal["lower", "higher"]


def copied(source: Any, *names: str) -> dict[str, Any]:
    """{name: source.name}: the fields one record takes from another under the same names (an
    execution's repetition and warmup into its job, record and samples; a job's into the workload's
    context), written once as names rather than as a run of ``name=source.name`` keywords."""
    return {name: getattr(source, name) for name in names}


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class ExecutionKey(NamedTuple):
    """An execution's key, ``<workload>|<variant key>|<rep|warmup>|<n>`` in the bundle: what
    ``ccbench run --resume`` matches and what each sample names in ``execution``."""

    workload: str
    #: ``axis=value,...`` sorted by axis, or ``-`` without variants
    variant: str
    warmup: bool
    repetition: int

    def __str__(self) -> str:
        return f"{self.workload}|{self.variant}|{'warmup' if self.warmup else 'rep'}|{self.repetition}"

    @classmethod
    def parse(cls, text: str) -> ExecutionKey:
        workload, variant, phase, repetition = text.rsplit("|", 3)
        return cls(workload, variant, phase == "warmup", int(repetition))


class ExecutionStatus(str, Enum):
    """How one execution ended (executions.jsonl ``status``); str-valued, so JSON reads the same."""

    OK = "ok"
    FAILED = "failed"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"

    def __str__(self) -> str:
        return self.value


class OutcomeStatus(str, Enum):
    """How one workload ended (manifest ``outcomes.<name>.status``)."""

    PENDING = "pending"
    RUNNING = "running"
    OK = "ok"
    PARTIAL = "partial"
    FAILED = "failed"
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"

    def __str__(self) -> str:
        return self.value


class Measurement(BaseModel):
    """What a workload returns for one metric of one execution; the runner turns it into a Sample."""

    model_config = ConfigDict(extra="forbid")

    metric: str
    unit: str
    value: float
    #: Whether lower or higher values are better; None when the metric has no direction (a fact).
    better: Better | None = "lower"
    #: which case of a workload's matrix this is (e.g. {"bs": "4k", "rw": "randread"} for fio,
    #: {"cell": 3} for a notebook cell); merged into the sample's params
    case: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)


class Sample(BaseModel):
    """One line of samples.jsonl (format documented in docs/bundle-format.md)."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    workload: str
    kind: str
    params: dict[str, Any]
    variant: dict[str, Any]
    metric: str
    unit: str
    value: float
    better: Better | None = "lower"
    repetition: int
    warmup: bool
    timestamp: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: the key of the execution that measured it (``<workload>|<variant>|<rep|warmup>|<n>``); format 2
    execution: str | None = None
    #: that execution's raw directory relative to the bundle, e.g. ``raw/fio/storage-disk/rep-0``; format 2
    raw: str | None = None
    #: whether the machine was busy with other work while it was measured (see ccbench.observe.interference)
    contended: bool = False


class WorkerJob(BaseModel):
    """What the runner asks of one worker process (raw/<...>/job.json); read by ccbench.run.worker."""

    # schemas are built on first use: a worker process builds only the two models it uses
    model_config = ConfigDict(extra="forbid", defer_build=True)

    #: the workload's kind (a key of ccbench.workloads.REGISTRY)
    kind: str
    #: the workload's name in the plan
    name: str
    #: its validated parameters, as JSON values
    params: dict[str, Any]
    #: the directory it works in (the storage variant's directory, or a scratch directory)
    workdir: str
    #: where the tools' own output of this execution goes (inside the bundle)
    raw_dir: str
    #: 0-based repetition (warmups count separately)
    repetition: int
    #: whether this is a warmup execution
    warmup: bool
    #: the parts of the workload to run (its Workload.selectable case keys), None for all of them
    parts: list[dict[str, str]] | None = None
    #: the variant info recorded on every sample (e.g. storage mechanism and cipher)
    variant: dict[str, Any]
    #: seconds before the runner ends the worker's process tree; None for none
    timeout: float | None = None
    #: the environment probe document
    environment: dict[str, Any] = Field(default_factory=dict)
    #: CPUs the worker pins itself to, or None
    pin: list[int] | None = None
    #: read by the supervisor, not the worker: the processes the workload started for its executions
    #: (their CPU is the execution's own), the protection layer's daemons and kernel threads (the
    #: layer's CPU; ccbench.observe.interference), and whether to record the mechanism counters (ccbench.observe.counters)
    servers: list[int] = Field(default_factory=list)
    layer_pids: list[int] = Field(default_factory=list)
    layer_threads: list[str] = Field(default_factory=list)
    counters: bool = True


class WorkerResult(BaseModel):
    """What a worker process hands back (raw/<...>/result.json, written atomically)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    #: ``ok`` or ``failed`` (timeouts and deaths are decided by the runner, which sees no result)
    status: ExecutionStatus
    #: the measurements of an ok execution
    measurements: list[Measurement] = Field(default_factory=list)
    #: why it failed, one line
    error: str | None = None
    #: the Python traceback of an unexpected failure (a bug or an environment problem)
    traceback: str | None = None
    #: a failed execution whose failure would repeat (workloads.base.RepeatingFailure): the runner
    #: skips the remaining executions of its variant combination
    repeats: bool = False


class ExecutionRecord(BaseModel):
    """One line of executions.jsonl: one execution attempt and how it ended."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    #: ``<workload>|<variant>|<rep|warmup>|<n>``; ``ccbench run --resume`` skips keys already done
    key: str
    #: the workload's name in the plan
    workload: str
    #: the variant values of this execution, axis -> value as the plan wrote it (e.g. storage -> "encrypted:fscrypt")
    variant: dict[str, str]
    #: 0-based repetition (warmups count separately)
    repetition: int
    #: whether this was a warmup execution
    warmup: bool
    #: how it ended
    status: ExecutionStatus
    #: UTC ISO-8601 time it started
    started_at: str
    #: wall seconds from starting the worker to its end
    elapsed_s: float
    #: how many samples it appended
    samples: int = 0
    #: its raw directory under raw/ (relative to raw/, as in format 1)
    raw: str
    #: why it did not end ok
    error: str | None = None
    #: the last lines of the worker's log when it did not end ok
    stderr_tail: str | None = None
    #: what else ran on the machine during the measured interval (ccbench.observe.interference); absent when not monitored
    interference: dict[str, Any] | None = None
    #: whether that interference exceeded the thresholds
    contended: bool = False
    #: which thresholds were exceeded, one line each
    contended_reasons: list[str] = Field(default_factory=list)
    #: the mechanism counters' changes over the execution, name -> value (ccbench.observe.counters); absent when off
    counters: dict[str, float] | None = None
    #: the counters this machine cannot read, name -> why
    counters_missing: dict[str, str] | None = None

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)
