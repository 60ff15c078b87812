"""Registry of workload kinds. Each entry: kind -> "module:Class" (imported lazily)."""

from __future__ import annotations

import importlib

from ccbench.workloads.base import Workload

REGISTRY: dict[str, str] = {
    "systeminfo": "ccbench.workloads.systeminfo:SystemInfo",
    "command": "ccbench.workloads.command:Command",
    "prime": "ccbench.workloads.prime:Prime",
    "fio": "ccbench.workloads.fio:Fio",
    "compression": "ccbench.workloads.compression:Compression",
    "ycsb": "ccbench.workloads.ycsb:Ycsb",
    "transport": "ccbench.workloads.transport:Transport",
    "notebook": "ccbench.workloads.notebook:Notebook",
    "pyperformance": "ccbench.workloads.pyperformance:Pyperformance",
    "microservices": "ccbench.workloads.microservices:Microservices",
    "federated": "ccbench.workloads.federated:Federated",
}

#: kinds that a plan may name but that this build cannot run yet: kind -> reason
NOT_BUILT: dict[str, str] = {}


def known_kinds() -> list[str]:
    return sorted(set(REGISTRY) | set(NOT_BUILT))


def workload_class(kind: str) -> type[Workload]:
    target = REGISTRY[kind]
    module_name, class_name = target.split(":")
    try:
        return getattr(importlib.import_module(module_name), class_name)
    except ImportError as exc:
        from ccbench.errors import EnvironmentProblem

        raise EnvironmentProblem(
            f"workload kind '{kind}' cannot be loaded ({exc}); run 'bash scripts/setup.sh --all' to install its dependencies"
        ) from None
