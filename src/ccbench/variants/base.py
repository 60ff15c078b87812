"""Variant axes: protection layers that ccbench sets up (storage) or selects (transport).

A workload declares which axes it honours (``Workload.variant_axes``). For each workload the
runner takes the product of the values listed per axis, sets each combination up once, interleaves
executions across them (A B C A B C ...), and tears them down on success, failure and interruption.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict


class AxisOptions(BaseModel):
    """Options for an axis from the plan's top-level table of the axis's name (e.g. ``[storage]``)."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class PreparedVariant:
    axis: str
    #: the value as the plan wrote it, e.g. "encrypted" or "encrypted:fscrypt"
    value: str
    #: recorded into every sample's ``variant`` object, e.g.
    #: {"storage": "encrypted", "storage_mechanism": "fscrypt", "storage_cipher": "AES-256-XTS"}
    info: dict[str, Any] = field(default_factory=dict)
    #: the directory a storage-bound workload works in
    path: Path | None = None
    #: what the axis made for it and undoes in teardown (for storage, a storage.Mechanism)
    handle: Any = None
    #: what serves it outside the workload's processes, counted as the layer's CPU by the interference
    #: watch: ``layer_threads`` (kernel thread or workqueue names), ``layer_pids`` (daemons)
    serving: dict[str, list] = field(default_factory=dict)


class VariantAxis(ABC):
    axis: ClassVar[str]
    Options: ClassVar[type[AxisOptions]] = AxisOptions
    #: the value used when a workload honours this axis but the plan lists none
    default_value: ClassVar[str]

    def validate(self, value: str) -> None:  # noqa: B027 - optional hook
        """Raise ValueError with a message naming the accepted values if ``value`` is malformed."""

    def skip_reason(self, value: str, options: AxisOptions) -> str | None:
        """Why this value cannot be set up here (e.g. needs root), or None."""
        return None

    @abstractmethod
    def setup(self, value: str, workdir: Path, options: AxisOptions) -> PreparedVariant: ...

    def teardown(self, prepared: PreparedVariant) -> None:  # noqa: B027 - optional hook
        pass
