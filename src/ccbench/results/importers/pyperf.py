"""pyperf / pyperformance JSON results (``-o FILE``, ``.json.gz`` too): every value of every run of
every benchmark is one sample (the sample unit of ccbench.formats.pyperf, the same as ccbench's
pyperformance workload), workload ``pyperformance`` with case ``{"benchmark": name}`` whether the
file holds one benchmark (``pyperf timeit``) or a suite. One execution per pyperf run (a worker
process). The machine facts are the file's metadata (pyperf's ``cpu_model_name``, ``hostname``,
``cpu_count``, and the kernel release read from ``platform``, so two Pythons on one kernel state one
kernel): the manifest's CPU model and logical CPUs, and the host name as ``source_hostname``.

Files that state different Pythons (``python_implementation``, ``python_version``), e.g. Python 3.10
against 3.11 on one host, are different configurations: one bundle each (named after its file),
compared with each other like two machines, never one bundle whose benchmarks mix both Pythons.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from ccbench.formats import FormatError
from ccbench.formats import pyperf as pyperf_format
from ccbench.results.importers.base import (
    MACHINE_KEYS,
    Execution,
    FileFormat,
    ImportProblem,
    Series,
    iso,
    mtime,
    read_json,
    wrong_shape,
)

#: the workload name of pyperf results, imported or measured (ccbench's pyperformance workload)
WORKLOAD = "pyperformance"
#: facts about the tools (not the machine, not the sample): the manifest's environment.tools
TOOLS = ("python_version", "python_implementation", "perf_version", "performance_version")


def _started(value: object, path: Path) -> str:
    if isinstance(value, str):
        try:
            return iso(datetime.fromisoformat(value))
        except ValueError:
            pass
    return mtime(path)


def read(path: Path) -> list[Execution]:
    document = read_json(path, "pyperf")
    if not pyperf_format.is_pyperf(document):
        raise wrong_shape(path, document, "a pyperf/pyperformance JSON result", "-o FILE")
    machine = pyperf_format.machine(document)
    # the Python that ran is part of what the file measured: files of two Pythons are two bundles
    machine.update(pyperf_format.python(document))
    executions = []
    try:
        for run in pyperf_format.runs(document):
            metadata = run.sample_metadata()
            executions.append(
                Execution(
                    workload=WORKLOAD,
                    kind="pyperformance",
                    source=path,
                    started_at=_started(run.metadata.get("date"), path),
                    series=[
                        Series(run.metric, run.unit, run.values, case={"benchmark": run.benchmark}, metadata=metadata)
                    ],
                    machine=machine,
                    tool={k: run.metadata[k] for k in TOOLS if k in run.metadata},
                )
            )
    except FormatError as exc:
        raise ImportProblem(f"{path}: {exc}") from None
    if not executions:
        raise ImportProblem(f"{path}: no benchmark in it has a measured value (only calibration runs?)")
    return executions


ADAPTER = FileFormat(
    name="pyperf",
    description="pyperf / pyperformance JSON results (-o results.json, .json.gz): every value of every run "
    "of every benchmark, workload pyperformance; the CPU model, cpu_count and host name kept; files of "
    "different Pythons one bundle each",
    read=read,
    bundle_keys=(*MACHINE_KEYS, *pyperf_format.PYTHON_KEYS),
)
