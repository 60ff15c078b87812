"""The result directory of the seed-000 study's runner: ``<Label>_<YYYYmmdd_HHMMSS>_<benchmark>.txt``,
the benchmark names being those of its CSV plan (ccbench.formats.seed000, shared with the plan
loader). One bundle per label; each file one execution at its time stamp: ``systeminfo`` gives the
machine facts, ``fio_*`` fio's JSON, ``*.ipynb`` the notebook's execution time, ``pyperformance *``
pyperf's console summary (a mean and a standard deviation, recorded as such; a summary line that
does not parse, as in a log cut in the middle of its last line, refuses the import as a cut JSON file
does: a benchmark silently missing would be a lost measurement).

``systeminfo`` is the runner's ``key: value`` lines in sections (``==== CPU Info ====``, ``====
Memory Information ====``, ``==== SWAP ====``): besides the CPU model and kernel release it gives
the logical CPUs (``Total cores``; ``CPU(s)`` as lscpu prints it) and the memory (the ``Total`` of
the memory section, never the swap's; ``MemTotal`` as /proc/meminfo prints it), so the lint can
check that compared machines have the same cores and memory. Sizes are read in binary units (the
runner's ``7.76GB`` is 7.76 GiB, psutil's figure scaled by 1024; meminfo's ``kB`` is KiB).

The study's labels name their second factor: a label ending in ``-Encrypted`` ran on Azure
confidential disk encryption (the confidential VM's OS disk encrypted with keys bound to its vTPM,
storage protection ``azure-confidential-disk``), one ending in ``-Non-Encrypted`` on a plain disk
(``none``); a label with neither states nothing (``--storage-protection LABEL=...`` does).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ccbench.formats import seed000
from ccbench.model import Measurement
from ccbench.results.importers import fio
from ccbench.results.importers.base import Execution, Imported, ImportProblem, iso, read_json

NAME = re.compile(r"^(?P<label>.+?)_(?P<stamp>\d{8}_\d{6})_(?P<benchmark>.+)\.txt$")
NOTEBOOK_TIME = re.compile(r"Notebook execution time:\s*([0-9.eE+-]+)\s*seconds")
PYPERF_LINE = re.compile(
    r"^(?P<name>[\w.\-\[\]]+):\s+Mean \+- std dev:\s+(?P<mean>[0-9.]+)\s+(?P<unit>ns|us|ms|sec)\s+\+-\s+"
    r"(?P<sd>[0-9.]+)\s+(?P<sdunit>ns|us|ms|sec)\s*$"
)
TO_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "sec": 1.0}
#: the start of a summary line, to tell one that does not parse (a file cut in its middle) from
#: pyperformance's other lines
PYPERF_START = re.compile(r"^[\w.\-\[\]]+:\s+(?P<rest>.*)$")
SUMMARY_WORDS = "Mean +- std dev:"


def _cut_summary(line: str, last: bool) -> bool:
    """Whether a line that did not parse is a summary line cut short: ``float: Mean +- std d``, or
    ``float:`` alone at the end of a file."""
    start = PYPERF_START.match(line) or (re.match(r"^[\w.\-\[\]]+:$", line) if last else None)
    if not start:
        return False
    rest = start.groupdict().get("rest") or ""
    return rest.startswith(SUMMARY_WORDS) or (bool(rest) or last) and SUMMARY_WORDS.startswith(rest)


def _stamp(text: str) -> str:
    return iso(datetime.strptime(text, "%Y%m%d_%H%M%S").replace(tzinfo=UTC))


def _notebook(path: Path, name: str, started: str) -> Execution:
    found = NOTEBOOK_TIME.search(path.read_text(errors="replace"))
    if not found:
        raise ImportProblem(f"{path}: no 'Notebook execution time: <seconds> seconds' line in it")
    return Execution(
        workload=name,
        kind="notebook",
        source=path,
        started_at=started,
        measurements=[
            Measurement(
                metric="execution_time_s",
                unit="s",
                value=float(found.group(1)),
                metadata={"note": "the seed-000 runner's figure: the whole notebook run, kernel start included"},
            )
        ],
    )


def _pyperformance(path: Path, name: str, started: str) -> Execution:
    measurements = []
    lines = path.read_text(errors="replace").splitlines()
    for number, line in enumerate(lines, 1):
        match = PYPERF_LINE.match(line.strip())
        if not match and _cut_summary(line.strip(), number == len(lines)):
            # as a JSON file cut short is refused: a benchmark silently missing is a lost measurement
            raise ImportProblem(
                f"{path}: line {number} ({line.strip()[:80]!r}) is a benchmark's summary cut off; "
                "was the file cut short? Give the whole file the runner wrote"
            )
        if match:
            measurements.append(
                Measurement(
                    metric="time_s",
                    unit="s",
                    value=float(match["mean"]) * TO_SECONDS[match["unit"]],
                    case={"benchmark": match["name"]},
                    metadata={
                        "statistic": "mean",
                        "stdev": float(match["sd"]) * TO_SECONDS[match["sdunit"]],
                        "values": None,
                        "note": "a console log's mean and standard deviation: the number of values behind it is unknown",
                    },
                )
            )
    if not measurements:
        raise ImportProblem(f"{path}: no '<benchmark>: Mean +- std dev: <mean> <unit> +- <sd> <unit>' line in it")
    return Execution(workload=name, kind="pyperformance", source=path, started_at=started, measurements=measurements)


def _fio(path: Path, name: str, started: str) -> Execution:
    document = read_json(path, "fio")
    if not isinstance(document, dict):
        raise ImportProblem(f"{path}: not fio's JSON output (a JSON object with 'jobs')")
    tool = {"fio_version": document.get("fio version")}
    found = [m for ms in fio.measurements(document, path).values() for m in ms]
    for measurement in found:
        measurement.metadata.update(tool)
    return Execution(
        workload=name,
        kind="fio",
        source=path,
        started_at=started,
        measurements=found,
        tool=tool,
    )


#: a section heading: a title between rules of '=' (the runner's), '-', '*' or '#'
_SECTION = re.compile(r"^\s*(?P<rule>[=*#-])(?P=rule){2,}\s*(?P<title>[^=*#]*?)\s*[=*#-]{3,}\s*$")
#: keys that name the machine's memory wherever they stand (not only in a memory section)
_MEMORY_KEYS = ("memtotal", "total memory", "memory total", "total ram", "ram", "memory", "physical memory")
#: sections whose sizes are not the machine's memory (a GPU's memory, the swap, a disk)
_NOT_MEMORY = ("swap", "gpu", "disk", "device", "partition")
#: a size at the start of a value, its unit glued or spaced: 7.29GB, 7.29 GB, 7.29 GiB (7.29 GB of RAM)
_SIZE_START = re.compile(r"^(?P<size>\d+(?:[.,]\d+)?\s*[KMGTP]?i?B?)\b", re.IGNORECASE)
_SIZE = re.compile(r"^(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGTP]?)(?:i?B)?$", re.IGNORECASE)
_BINARY = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
#: a label's suffix that names its storage protection: -Encrypted, -Non-Encrypted (-NonEncrypted, -Unencrypted)
ENCRYPTED_SUFFIX = re.compile(r"[-_](?P<non>non[-_]?|un)?encrypted$", re.IGNORECASE)


def _size_bytes(text: str) -> int | None:
    """Bytes of a size as the runner (``7.76GB``) or meminfo (``8123456 kB``) prints it, binary units;
    a decimal comma (``7,29 GB``) and words after the size are read too."""
    start = _SIZE_START.match(text.strip())
    match = _SIZE.match(start["size"].replace(" ", "").replace(",", ".")) if start else None
    return round(float(match["number"]) * _BINARY[match["unit"].upper()]) if match else None


def _systeminfo(path: Path) -> dict[str, Any]:
    """The file's ``key: value`` facts (the first of each key), with the machine's size read by section."""
    facts: dict[str, Any] = {}
    section = ""
    for line in path.read_text(errors="replace").splitlines():
        if heading := _SECTION.match(line):
            section = heading["title"].lower()
            continue
        key, colon, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if not (colon and key and value):
            continue
        facts.setdefault(key, value)
        lowered = key.lower()
        if lowered in ("total cores", "cpu(s)", "logical cores") and value.isdigit():
            facts.setdefault("cpu_threads", int(value))
        elif lowered in ("physical cores",) and value.isdigit():
            facts.setdefault("cpu_cores", int(value))
        elif lowered in _MEMORY_KEYS or (lowered == "total" and ("memory" in section or "ram" in section.split())):
            if not any(other in section for other in _NOT_MEMORY) and (size := _size_bytes(value)):
                facts.setdefault("memory_bytes", size)
    return facts


def storage_protection(label: str) -> tuple[str, str] | None:
    """(storage protection, how the label names it) from a seed-000 label's suffix, or None."""
    match = ENCRYPTED_SUFFIX.search(label)
    if not match:
        return None
    if match["non"]:
        return "none", f"read from the label's {match.group(0)!r} suffix: no disk encryption"
    return (
        "azure-confidential-disk",
        f"read from the label's {match.group(0)!r} suffix as Azure confidential disk encryption "
        "(seed 000 ran on Azure); --storage-protection LABEL=... states otherwise",
    )


def _cpu_model(facts: dict[str, Any]) -> str | None:
    for key, value in facts.items():
        lowered = key.lower()
        if "cpu" in lowered and ("model" in lowered or "brand" in lowered or "name" in lowered):
            return value
    processor = facts.get("Processor") or facts.get("processor")
    # platform.processor() is often only the architecture: no CPU model
    return processor if processor and processor.lower() not in ARCHITECTURES else None


#: what platform.processor() prints where it knows no more than the architecture
ARCHITECTURES = {"x86_64", "amd64", "i386", "i686", "aarch64", "arm64", "armv7l", "ppc64le", "s390x", "riscv64"}


READERS = {"fio": _fio, "notebook": _notebook, "pyperformance": _pyperformance}


def read_directory(directory: Path) -> list[Imported]:
    """One bundle per label; each file one execution at its time stamp."""
    if not directory.is_dir():
        raise ImportProblem(f"{directory}: not a directory: seed000 imports the result directory its runner wrote")
    by_label: dict[str, Imported] = {}
    skipped = []
    for path in sorted(directory.iterdir()):
        match = NAME.match(path.name) if path.is_file() else None
        known = seed000.benchmark(match["benchmark"]) if match else None
        if known is None:
            skipped.append(path.name)
            continue
        imported = by_label.setdefault(match["label"], Imported(label=match["label"], format="seed000"))
        if known.kind == "systeminfo":
            facts = _systeminfo(path)
            imported.facts.update(facts)
            imported.facts.update(
                {k: v for k, v in (("cpu_model", _cpu_model(facts)), ("kernel_release", facts.get("Release"))) if v}
            )
            imported.facts_source = path
            continue
        imported.executions.append(READERS[known.kind](path, known.name, _stamp(match["stamp"])))
    if not any(i.executions for i in by_label.values()):
        raise ImportProblem(
            f"{directory}: no seed-000 result file in it (names like <Label>_<YYYYmmdd_HHMMSS>_<benchmark>.txt)"
        )
    for imported in by_label.values():
        named = storage_protection(imported.label)
        if named:
            imported.storage_protection, imported.storage_protection_source = named
        if skipped:
            imported.unknown.append(f"files not recognised and left out: {', '.join(skipped[:10])}")
    return list(by_label.values())


class Seed000Adapter:
    name = "seed000"
    description = (
        "the result directory of the seed-000 study's runner (<Label>_<YYYYmmdd_HHMMSS>_<benchmark>.txt: "
        "systeminfo, fio_*, *.ipynb, pyperformance *): one bundle per label, its -Encrypted suffix read as Azure "
        "confidential disk encryption, systeminfo's cores and memory kept"
    )

    def collect(self, paths: list[Path], label: str | None) -> list[Imported]:
        bundles = [b for directory in paths for b in read_directory(directory)]
        if label is not None:
            labels = sorted({b.label for b in bundles})
            if len(labels) > 1:
                raise ImportProblem(
                    f"--label {label!r}: the files carry several labels ({', '.join(labels)}); "
                    "leave --label out to import one bundle per label"
                )
            for bundle in bundles:
                bundle.label = label
        return bundles


ADAPTER = Seed000Adapter()
