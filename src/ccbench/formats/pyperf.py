"""pyperf's JSON results (``-o FILE`` of pyperf and pyperformance; format 1.0, and the older perf
module's formats 5 and 6, see READABLE).

The sample unit, the same for ccbench's pyperformance workload and ``ccbench import pyperf``:
**every value pyperf measured is one sample** (``time_s`` in seconds, or ``value_<unit>`` for
benchmarks counting bytes or integers), case ``{"benchmark": name}``, with the number of the pyperf
run (one worker process) it came from and that run's loop count in its metadata. Calibration runs
carry no values and warmup values are not samples.

pyperf hoists metadata shared by every benchmark of a file to the top level (with one benchmark,
its name too), so a benchmark's metadata is the top level's overlaid with its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ccbench.formats import FormatError
from ccbench.model import Measurement

UNITS = {"second": "s", "byte": "B", "integer": "count"}
#: the JSON format versions read (pyperf's own reader takes the same): "1.0" (pyperf 1.0 and later),
#: 6 (perf 0.9.6) and 5 (perf 0.8.3, which names a benchmark's metadata ``common_metadata`` and its
#: values ``samples``); values mean the same in all three (only warmups changed, and they are not samples)
READABLE = ("1.0", "6", "5")
#: the per-run metadata a sample keeps (the rest is the benchmark's or the machine's)
RUN_KEYS = ("loops", "inner_loops")
#: Python's platform.platform() on Linux: ``Linux-<kernel release>-<machine>-with-<libc or distro>``
_LINUX_PLATFORM = re.compile(
    r"^Linux-(?P<release>.+?)-(?P<arch>x86_64|aarch64|arm64|i[3-6]86|ppc64le|ppc64|s390x|riscv64|armv\w+)(?:-|$)"
)


@dataclass
class PyperfRun:
    """One pyperf run (one worker process) of one benchmark: its values, in the order measured."""

    benchmark: str
    metric: str
    unit: str
    #: the run's number among the benchmark's runs that have values (0, 1, ...)
    number: int
    #: the run's metadata overlaid on the benchmark's and the file's
    metadata: dict[str, Any]
    values: list[float]

    def sample_metadata(self) -> dict[str, Any]:
        return {"run": self.number, **{k: self.metadata[k] for k in RUN_KEYS if k in self.metadata}}


def format_version(document: Any) -> str | None:
    return str(document.get("version")) if isinstance(document, dict) and "version" in document else None


def is_pyperf(document: Any) -> bool:
    return isinstance(document, dict) and isinstance(document.get("benchmarks"), list)


def _check(document: Any) -> str:
    """The format version ("1.0", "6" or "5"); FormatError for anything else."""
    if not is_pyperf(document):
        raise FormatError("no 'benchmarks' in it: not a pyperf/pyperformance JSON result (-o FILE)")
    version = format_version(document) or "1.0"
    if version not in READABLE:
        raise FormatError(
            f"this is JSON format version {version} of the old 'perf' module (before perf 0.8.3), which "
            f"pyperf no longer reads; ccbench reads format versions {', '.join(READABLE)}: convert the file "
            "with the perf release that wrote it, or run the benchmark again with pyperf"
        )
    return version


def runs(document: Any) -> Iterator[PyperfRun]:
    """Every run that has values, benchmark by benchmark; FormatError for a document of another shape."""
    version = _check(document)
    suite_meta = (document.get("metadata") or {}) if version != "5" else {}
    metadata_key, values_key = ("common_metadata", "samples") if version == "5" else ("metadata", "values")
    for benchmark in document["benchmarks"]:
        meta = {**suite_meta, **(benchmark.get(metadata_key) or {})}
        name = meta.get("name")
        if not name:
            raise FormatError(f"a benchmark without a name in its metadata: not pyperf's format {version}")
        unit = UNITS.get(meta.get("unit", "second"), str(meta.get("unit", "second")))
        metric = "time_s" if unit == "s" else f"value_{unit}"
        number = 0
        for run in benchmark.get("runs") or []:
            values = run.get(values_key) or []
            if not values:
                continue  # a calibration run
            if not isinstance(values, list) or not all(type(v) in (int, float) for v in values):
                raise FormatError(f"benchmark {name!r}, run {number}: its values are not a list of numbers")
            yield PyperfRun(str(name), metric, unit, number, {**meta, **(run.get("metadata") or {})}, values)
            number += 1


def measurements(document: Any) -> list[Measurement]:
    """Every value of every run of every benchmark, one Measurement each (see the module's doc)."""
    return [
        Measurement(
            metric=run.metric,
            unit=run.unit,
            value=value,
            case={"benchmark": run.benchmark},
            metadata=run.sample_metadata(),
        )
        for run in runs(document)
        for value in run.values
    ]


def kernel_release(platform: Any) -> str | None:
    """The kernel release in Python's platform string (Linux only): the same kernel reads the same
    whichever Python and C library wrote the string."""
    match = _LINUX_PLATFORM.match(str(platform or ""))
    return match["release"] if match else None


#: the metadata naming the Python a file measured (what makes two files two configurations)
PYTHON_KEYS = ("python_implementation", "python_version")


def _file_metadata(document: Any) -> dict[str, Any]:
    """The file-level metadata overlaid on the first benchmark's: pyperf hoists to the top only what
    every benchmark shares, and format 5 keeps no file-level metadata at all."""
    first = next((b for b in document["benchmarks"] if isinstance(b, dict)), {})
    own = first.get("common_metadata") or first.get("metadata") or {}
    return {**(own if isinstance(own, dict) else {}), **(document.get("metadata") or {})}


def python(document: Any) -> dict[str, Any]:
    """The Python a pyperf file measured ({"python_version": "3.11.7 (64-bit)", ...}), where it says."""
    if not is_pyperf(document):
        return {}
    meta = _file_metadata(document)
    return {key: meta[key] for key in PYTHON_KEYS if meta.get(key) is not None}


def machine(document: Any) -> dict[str, Any]:
    """The facts of the machine a pyperf file states (file-level metadata): CPU model, hostname,
    CPU count, and the kernel release read from Python's platform string."""
    if not is_pyperf(document):
        return {}
    meta = _file_metadata(document)
    facts = {
        "cpu_model": meta.get("cpu_model_name"),
        "hostname": meta.get("hostname"),
        "cpu_count": meta.get("cpu_count"),
        "kernel_release": kernel_release(meta.get("platform")),
        # as written, for the record: the machine's identity uses the kernel release above
        "platform": meta.get("platform"),
    }
    return {k: v for k, v in facts.items() if v is not None}
