"""Registry of workload kinds. Each entry: kind -> "module:Class" (imported lazily)."""

from __future__ import annotations

import importlib

from ccbench.workloads.base import Workload

REGISTRY: dict[str, str] = {
    "systeminfo": "ccbench.workloads.systeminfo:SystemInfo",
    "command": "ccbench.workloads.command:Command",
    "prime": "ccbench.workloads.prime:Prime",
    "fio": "ccbench.workloads.fio:Fio",
    # issue 4 (storage): compression, ycsb
    # issue 5 (data science): notebook, pyperformance
    # issue 6 (transport): transport
}

#: kinds that a plan may name but that this build cannot run yet: kind -> reason
NOT_BUILT: dict[str, str] = {}


def known_kinds() -> list[str]:
    return sorted(set(REGISTRY) | set(NOT_BUILT))


def workload_class(kind: str) -> type[Workload]:
    target = REGISTRY[kind]
    module_name, class_name = target.split(":")
    return getattr(importlib.import_module(module_name), class_name)
