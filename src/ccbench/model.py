"""The Sample: one measured number with everything needed to interpret it on its own."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Better = Literal["lower", "higher"]


def utc_now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


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

    model_config = ConfigDict(extra="allow")

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
