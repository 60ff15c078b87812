"""Registry of workload kinds. Each entry: kind -> "module:Class" (imported lazily).

A workload module imports with ccbench's core dependencies alone (optional ones inside its
methods); still, each question below imports only the kinds it must, and a kind that cannot be
imported here answers nothing instead of breaking a command that does not need it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ccbench.workloads.base import DEVICE_IO_CHECK, Workload

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
    "network": "ccbench.workloads.network:Network",
    "mechanisms": "ccbench.workloads.mechanisms:Mechanisms",
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
        from ccbench.basics.errors import EnvironmentProblem

        raise EnvironmentProblem(
            f"workload kind '{kind}' cannot be loaded ({exc}); run 'bash scripts/setup.sh --all' to install its dependencies"
        ) from None


def _loadable(kinds: Iterable[str]) -> list[type[Workload]]:
    """The classes of those kinds that import here, in the order given."""
    from ccbench.basics.errors import EnvironmentProblem

    classes = []
    for kind in dict.fromkeys(kinds):
        if kind not in REGISTRY:
            continue
        try:
            classes.append(workload_class(kind))
        except EnvironmentProblem:
            continue
    return classes


def setup_components(kinds: Iterable[str]) -> set[str]:
    """The set-up components that these kinds' tools need."""
    return {cls.setup_component for cls in _loadable(kinds) if cls.setup_component}


def shipped_python_extras() -> set[str]:
    """The set-up components whose Python extra the fleet ships whenever a plan needs one of their kinds."""
    return {cls.setup_component for cls in _loadable(REGISTRY) if cls.ships_python_extra and cls.setup_component}


def shipped_tools(kinds: Iterable[str] | None = None) -> dict[str, Path | str]:
    """The programs the fleet ships for these kinds (every registered kind when None): each name with
    this machine's file, or why there is none (Workload.shipped_tools)."""
    tools: dict[str, Path | str] = {}
    for cls in _loadable(REGISTRY if kinds is None else kinds):
        tools.update(cls.shipped_tools())
    return tools


def system_checks(workloads: Iterable[tuple[str, Iterable[str]]]) -> set[str]:
    """The before-run checks asked for by these (kind, variant axes) pairs."""
    checks: set[str] = set()
    for kind, axes in workloads:
        for cls in _loadable([kind]):
            checks.update(cls.checks_for({axis: () for axis in axes}))
    return checks


def plan_device_io(plan: Mapping[str, Any] | None) -> bool | None:
    """Whether a plan (as a manifest records it: ``Plan.model_dump(mode="json")``) has a workload that
    moves data through devices (a kind declaring the DEVICE_IO_CHECK: the bounce-buffer check of
    ccbench.probe.lint applies); None when the plan is not recorded."""
    if not isinstance(plan, Mapping) or not isinstance(plan.get("workloads"), list):
        return None
    pairs = [
        (item.get("kind"), (item.get("variants") or {}).keys())
        for item in plan["workloads"]
        if isinstance(item, Mapping) and item.get("kind") and not crosses_no_device(item["kind"], item.get("params"))
    ]
    return DEVICE_IO_CHECK in system_checks(pairs)


def crosses_no_device(kind: str, params: Mapping[str, Any] | None) -> bool:
    """Whether a workload of this kind with these params moves its data through no device: the network
    workload between emulated hosts (veth and a bridge inside one guest hand packets over in memory:
    no DMA, so nothing is bounced through swiotlb; only hosts = "peer" crosses a real NIC)."""
    return kind == "network" and (params or {}).get("hosts", "emulated") == "emulated"


def fact_kinds(kinds: Iterable[str]) -> set[str]:
    """Of these kinds, those whose samples are facts about the machine rather than a measured result:
    the kinds that declare no primary metric (the probe's)."""
    return {cls.kind for cls in _loadable(kinds) if not cls.primary_metrics}


def peer_services(workloads: Iterable[tuple[str, str, dict[str, Any]]]) -> list[list[str]]:
    """The services a fleet's serving host runs for these (kind, name, params) workloads, each argv once."""
    services: list[list[str]] = []
    for kind, name, params in workloads:
        for cls in _loadable([kind]):
            for argv in cls(name, cls.Params.model_validate(params)).peer_services():
                if argv not in services:
                    services.append(argv)
    return services


def cleanup_stale(workdir: Path) -> list[str]:
    """Undo what killed runs left under workdir, kind by kind. Only the kinds that have their own
    directory there (workdir/<kind>) are imported and asked (Workload.cleanup_stale)."""
    removed: list[str] = []
    for cls in _loadable(kind for kind in REGISTRY if (Path(workdir) / kind).is_dir()):
        removed += cls.cleanup_stale(Path(workdir))
    return removed


def declaration(cls: type[Workload]) -> dict[str, Any]:
    """What a kind declares about its results, as a bundle's manifest records it (see
    ccbench.analysis.judgement.impact): its primary metrics and, where it has them, its message costs."""
    declared: dict[str, Any] = {"kind": cls.kind, "primary_metrics": list(cls.primary_metrics)}
    if cls.message_costs is not None:
        declared["message_costs"] = cls.message_costs.as_dict()
    return declared


def declarations(workloads: Iterable[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """{workload name: its kind's declaration} for these (name, kind) pairs; a kind that cannot be
    imported here is left out (analysis then falls back to the registry where it runs)."""
    out = {}
    for name, kind in workloads:
        for cls in _loadable([kind]):
            out[name] = declaration(cls)
    return out
