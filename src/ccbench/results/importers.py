"""Others' results as bundles: fio JSON, pyperf/pyperformance JSON, hyperfine JSON and the result
directories of the seed-000 study's runner.

Every source file becomes one execution of a bundle that ``show``, ``compare`` and ``report`` read
like any other. Nothing is invented: each sample says it was imported and from which file; the
manifest says what is unknown (no TEE evidence, no CPU model when the source lacks it); a summary
statistic (a console log's mean and standard deviation) is recorded as such, with an unknown number
of values behind it. The source files are copied into the bundle's raw/ directory, so the bundle
holds what it was made from.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ccbench.errors import CCBenchError
from ccbench.model import ExecutionKey, Measurement, Sample

FORMATS = ("fio", "pyperf", "hyperfine", "seed000")
#: what an imported bundle cannot know, whatever the source
ALWAYS_UNKNOWN = [
    "tee: no TEE evidence (imported results carry none)",
    "contention: what else ran on the machine was not recorded",
]


class ImportProblem(CCBenchError):
    """A source that cannot be imported (one line: which file, what is wrong, what to do)."""


@dataclass
class Execution:
    """One source file's worth of measurements: one execution of one workload."""

    workload: str
    kind: str
    source: Path
    started_at: str
    measurements: list[Measurement]
    #: the workload's parameters as the source states them (joined with each measurement's case)
    params: dict[str, Any] = field(default_factory=dict)
    #: how many executions of this workload came before it (set when bundles are assembled)
    repetition: int = 0
    elapsed_s: float | None = None
    #: facts of the machine the source states (pyperf's metadata: CPU model, hostname, ...)
    machine: dict[str, Any] = field(default_factory=dict)


@dataclass
class Imported:
    """What one bundle will hold: the executions of one machine label, and the machine facts known."""

    label: str
    format: str
    executions: list[Execution] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _mtime(path: Path) -> str:
    return _iso(datetime.fromtimestamp(path.stat().st_mtime, UTC))


def _read_json(path: Path, what: str) -> Any:
    """A JSON document (gzip-compressed when the name ends in .gz); tools may print lines before it."""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        raise ImportProblem(f"{path}: cannot read it as {what} ({exc})") from None
    start = text.find("{")
    try:
        if start < 0:
            raise ValueError("no JSON object in it")
        return json.loads(text[start:])
    except ValueError as exc:
        raise ImportProblem(
            f"{path}: not a complete {what} JSON document ({exc}); was the file cut short? "
            "Give the whole file the tool wrote"
        ) from None


# ---------------------------------------------------------------------------------------------- fio


def _fio_case(job: dict[str, Any], global_options: dict[str, Any]) -> dict[str, str]:
    """bs and rw from the job's options (or the global ones), as ccbench's own fio workload names
    them; the job name when the source does not say."""
    options = {**global_options, **(job.get("job options") or {})}
    bs = str(options.get("bs") or options.get("blocksize") or "").lower()
    rw = str(options.get("rw") or options.get("readwrite") or "")
    if not bs or not rw:
        size, _, pattern = str(job.get("jobname", "")).partition("_")
        bs, rw = bs or size, rw or pattern
    return {"bs": bs, "rw": rw}


def fio_measurements(document: dict[str, Any], source: Path) -> list[Measurement]:
    from ccbench.workloads.base import WorkloadFailed
    from ccbench.workloads.fio import parse_fio_json

    jobs = document.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise ImportProblem(f"{source}: no 'jobs' in it: not fio's --output-format=json (or json+) output")
    global_options = document.get("global options") or {}
    measurements: list[Measurement] = []
    for job in jobs:
        try:
            parsed = parse_fio_json({"jobs": [job]})
        except WorkloadFailed as exc:
            raise ImportProblem(f"{source}: job {job.get('jobname', '?')!r}: {exc}") from None
        case = _fio_case(job, global_options)
        for measurement in parsed:
            measurement.case = {**measurement.case, **case}
        measurements += parsed
    return measurements


def _fio_started(document: dict[str, Any], source: Path) -> str:
    stamp = document.get("timestamp")
    return _iso(datetime.fromtimestamp(stamp, UTC)) if isinstance(stamp, int | float) else _mtime(source)


def read_fio(path: Path) -> list[Execution]:
    document = _read_json(path, "fio")
    if not isinstance(document, dict):
        raise ImportProblem(f"{path}: not fio's JSON output (a JSON object with 'jobs')")
    return [
        Execution(
            workload="fio",
            kind="fio",
            source=path,
            started_at=_fio_started(document, path),
            measurements=fio_measurements(document, path),
            params={"fio_version": document.get("fio version")},
        )
    ]


# -------------------------------------------------------------------------------------------- pyperf

PYPERF_UNITS = {"second": "s", "byte": "B", "integer": "count"}


def read_pyperf(path: Path) -> list[Execution]:
    """Every value of every run of every benchmark: one execution per pyperf run (a worker process),
    each value a sample; calibration runs carry no values and warmup values are left out."""
    document = _read_json(path, "pyperf")
    if not isinstance(document, dict) or not isinstance(document.get("benchmarks"), list):
        raise ImportProblem(f"{path}: no 'benchmarks' in it: not a pyperf/pyperformance JSON result (-o FILE)")
    suite_meta = document.get("metadata") or {}
    machine = {
        "cpu_model": suite_meta.get("cpu_model_name"),
        "hostname": suite_meta.get("hostname"),
        "platform": suite_meta.get("platform"),
        "python": suite_meta.get("python_version"),
        "cpu_count": suite_meta.get("cpu_count"),
    }
    machine = {k: v for k, v in machine.items() if v is not None}
    executions = []
    for benchmark in document["benchmarks"]:
        meta = {**suite_meta, **(benchmark.get("metadata") or {})}
        name = meta.get("name")
        if not name:
            raise ImportProblem(f"{path}: a benchmark without a name in its metadata: not pyperf's format")
        unit = PYPERF_UNITS.get(meta.get("unit", "second"), meta.get("unit", "second"))
        metric = "time_s" if unit == "s" else f"value_{unit}"
        for run in benchmark.get("runs", []):
            values = run.get("values") or []
            if not values:
                continue  # a calibration run
            run_meta = {**meta, **(run.get("metadata") or {})}
            started = run_meta.get("date")
            kept = {k: run_meta[k] for k in ("loops", "inner_loops", "python_version", "perf_version") if k in run_meta}
            executions.append(
                Execution(
                    workload=f"pyperf-{name}" if not suite_meta.get("performance_version") else "pyperformance",
                    kind="pyperformance",
                    source=path,
                    started_at=_iso(datetime.fromisoformat(started)) if started else _mtime(path),
                    measurements=[
                        Measurement(
                            metric=metric, unit=unit, value=value, case={"benchmark": name}, metadata=dict(kept)
                        )
                        for value in values
                    ],
                    machine=machine,
                )
            )
    if not executions:
        raise ImportProblem(f"{path}: no benchmark in it has a measured value (only calibration runs?)")
    return executions


# ----------------------------------------------------------------------------------------- hyperfine


def read_hyperfine(path: Path) -> list[Execution]:
    """Every run's wall time of every command (hyperfine's ``--export-json``): one execution per
    command, each run a sample, with the command's parameters as the case."""
    document = _read_json(path, "hyperfine")
    results = document.get("results") if isinstance(document, dict) else None
    if not isinstance(results, list) or not results:
        raise ImportProblem(f"{path}: no 'results' in it: not hyperfine's --export-json output")
    started = _mtime(path)
    executions = []
    for result in results:
        times = result.get("times")
        if not isinstance(times, list) or not times:
            raise ImportProblem(
                f"{path}: command {result.get('command', '?')!r} has no per-run 'times' (hyperfine >= 1.9 writes them)"
            )
        case = {
            "command": result.get("command", "?"),
            **{k: str(v) for k, v in (result.get("parameters") or {}).items()},
        }
        codes = result.get("exit_codes") or [None] * len(times)
        executions.append(
            Execution(
                workload="hyperfine",
                kind="command",
                source=path,
                started_at=started,
                measurements=[
                    Measurement(
                        metric="wall_s",
                        unit="s",
                        value=float(seconds),
                        case=case,
                        metadata={"exit_code": code, "timestamp_source": "the file's modification time"},
                    )
                    for seconds, code in zip(times, codes, strict=False)
                ],
            )
        )
    return executions


# ------------------------------------------------------------------------------------------- seed000

SEED000_NAME = re.compile(r"^(?P<label>.+?)_(?P<stamp>\d{8}_\d{6})_(?P<benchmark>.+)\.txt$")
SEED000_FIO = re.compile(r"^fio_(4k|64k|1m)_(sequential|random)(read|write)$")
NOTEBOOK_TIME = re.compile(r"Notebook execution time:\s*([0-9.eE+-]+)\s*seconds")
PYPERF_LINE = re.compile(
    r"^(?P<name>[\w.\-\[\]]+):\s+Mean \+- std dev:\s+(?P<mean>[0-9.]+)\s+(?P<unit>ns|us|ms|sec)\s+\+-\s+"
    r"(?P<sd>[0-9.]+)\s+(?P<sdunit>ns|us|ms|sec)\s*$"
)
TO_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "sec": 1.0}


def _seed000_stamp(text: str) -> str:
    return _iso(datetime.strptime(text, "%Y%m%d_%H%M%S").replace(tzinfo=UTC))


def _seed000_notebook(path: Path, benchmark: str, started: str) -> Execution:
    found = NOTEBOOK_TIME.search(path.read_text(errors="replace"))
    if not found:
        raise ImportProblem(f"{path}: no 'Notebook execution time: <seconds> seconds' line in it")
    name = re.sub(r"[^A-Za-z0-9_.+-]", "_", Path(benchmark).stem)
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


def _seed000_pyperformance(path: Path, benchmark: str, started: str) -> Execution:
    measurements = []
    for line in path.read_text(errors="replace").splitlines():
        match = PYPERF_LINE.match(line.strip())
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
    suite = benchmark.split(None, 1)[1].strip() if " " in benchmark else "default"
    return Execution(
        workload=f"pyperformance-{suite}",
        kind="pyperformance",
        source=path,
        started_at=started,
        measurements=measurements,
    )


def _seed000_systeminfo(path: Path) -> dict[str, Any]:
    facts = {}
    for line in path.read_text(errors="replace").splitlines():
        key, colon, value = line.partition(":")
        if colon and key.strip() and value.strip():
            facts[key.strip()] = value.strip()
    return facts


def _seed000_cpu_model(facts: dict[str, Any]) -> str | None:
    for key, value in facts.items():
        lowered = key.lower()
        if "cpu" in lowered and ("model" in lowered or "brand" in lowered or "name" in lowered):
            return value
    return facts.get("Processor") or facts.get("processor")


def read_seed000(directory: Path) -> list[Imported]:
    """One bundle per label; each file one execution at its time stamp."""
    if not directory.is_dir():
        raise ImportProblem(f"{directory}: not a directory: seed000 imports the result directory its runner wrote")
    by_label: dict[str, Imported] = {}
    skipped = []
    for path in sorted(directory.iterdir()):
        match = SEED000_NAME.match(path.name) if path.is_file() else None
        if not match:
            skipped.append(path.name)
            continue
        label, benchmark = match["label"], match["benchmark"]
        started = _seed000_stamp(match["stamp"])
        imported = by_label.setdefault(label, Imported(label=label, format="seed000"))
        fio = SEED000_FIO.match(benchmark)
        if benchmark == "systeminfo":
            imported.facts.update(_seed000_systeminfo(path))
            continue
        if fio:
            document = _read_json(path, "fio")
            imported.executions.append(
                Execution(
                    workload=benchmark,
                    kind="fio",
                    source=path,
                    started_at=started,
                    measurements=fio_measurements(document, path),
                )
            )
        elif benchmark.endswith(".ipynb"):
            imported.executions.append(_seed000_notebook(path, benchmark, started))
        elif benchmark.startswith("pyperformance"):
            imported.executions.append(_seed000_pyperformance(path, benchmark, started))
        else:
            skipped.append(path.name)
    if not any(i.executions for i in by_label.values()):
        raise ImportProblem(
            f"{directory}: no seed-000 result file in it (names like <Label>_<YYYYmmdd_HHMMSS>_<benchmark>.txt)"
        )
    for imported in by_label.values():
        if skipped:
            imported.unknown.append(f"files not recognised and left out: {', '.join(skipped[:10])}")
    return list(by_label.values())


# --------------------------------------------------------------------------------------- assembling


def collect(format_name: str, paths: Iterable[Path], label: str | None) -> list[Imported]:
    """Read every source; one Imported per bundle to write (seed000: one per label in the files)."""
    paths = [Path(p).absolute() for p in paths]
    if format_name not in FORMATS:
        raise ImportProblem(f"unknown format {format_name!r}: choose one of {', '.join(FORMATS)}")
    if label is not None and ("," in label or "=" in label or not label.strip()):
        raise ImportProblem(f"--label {label!r}: one label, without ',' or '='")
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise ImportProblem(f"{missing[0]}: no such file or directory")
    if format_name == "seed000":
        bundles = [b for directory in paths for b in read_seed000(directory)]
        if label is not None:
            if len({b.label for b in bundles}) > 1:
                raise ImportProblem(
                    f"--label {label!r}: the files carry several labels ({', '.join(sorted({b.label for b in bundles}))}); "
                    "leave --label out to import one bundle per label"
                )
            for bundle in bundles:
                bundle.label = label
        return bundles
    reader = {"fio": read_fio, "pyperf": read_pyperf, "hyperfine": read_hyperfine}[format_name]
    files = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in (".json", ".gz"))
            if not found:
                raise ImportProblem(f"{path}: no .json file in it to import as {format_name}")
            files += found
        else:
            files.append(path)
    imported = Imported(label=label or files[0].stem, format=format_name)
    for path in files:
        imported.executions += reader(path)
    for execution in imported.executions:
        imported.facts.update(execution.machine)
    return [imported]


def _environment(imported: Imported) -> dict[str, Any]:
    facts = imported.facts
    cpu_model = facts.get("cpu_model") or _seed000_cpu_model(facts)
    unknown = list(ALWAYS_UNKNOWN)
    if not cpu_model:
        unknown.append("cpu: the source names no CPU model")
    unknown.append("kernel, memory, storage protection: not in the source")
    return {
        "hostname": imported.label,
        "imported": True,
        "cpu": {"model": cpu_model},
        "memory": {},
        "kernel": {"release": facts.get("Release") or facts.get("platform")},
        "os": {},
        "virtualization": "unknown",
        "tee": {"technology": "unknown", "evidence": [], "note": "imported: no TEE evidence"},
        "storage": {"protection": "unknown"},
        "source_facts": facts,
        "unknown": unknown + imported.unknown,
    }


def _number_executions(executions: list[Execution]) -> None:
    executions.sort(key=lambda e: (e.started_at, str(e.source)))
    seen: dict[str, int] = {}
    for execution in executions:
        execution.repetition = seen.get(execution.workload, 0)
        seen[execution.workload] = execution.repetition + 1


def write_bundle(imported: Imported, out: Path) -> Path:
    """Write one bundle (in a staging directory renamed into place at the end, so a failure leaves
    nothing partial) and its digest list; returns its path."""
    from ccbench import attestation
    from ccbench.bundle import BundleWriter, bundle_dir_name, unused_path
    from ccbench.results.columnar import write_bundle_parquet
    from ccbench.workloads import declarations

    _number_executions(imported.executions)
    started = imported.executions[0].started_at if imported.executions else _iso(datetime.now(UTC))
    manifest = {
        "imported": {
            "format": imported.format,
            "sources": sorted({str(e.source) for e in imported.executions}),
            "note": "imported, not measured by ccbench",
        },
        "label": imported.label,
        "plan": {"name": f"imported-{imported.format}", "workloads": []},
        "declarations": declarations({(e.workload, e.kind) for e in imported.executions}),
        "environment": _environment(imported),
        "started_at": started,
        "ended_at": imported.executions[-1].started_at if imported.executions else started,
        "status": "complete",
        "outcomes": {},
    }
    staging_parent = Path(out) / ".importing"
    writer = BundleWriter.create(staging_parent, manifest, name=bundle_dir_name(imported.label))
    try:
        for execution in imported.executions:
            _write_execution(writer, execution)
        writer.close()
        write_bundle_parquet(writer.path)  # as a run ends: the samples as Parquet, under the digest list
        attestation.finish_bundle(writer.path, provider=None)  # nothing here was measured in a TEE
        target = unused_path(Path(out), writer.path.name)
        writer.path.rename(target)
    except BaseException:
        writer.close()
        shutil.rmtree(writer.path, ignore_errors=True)
        raise
    finally:
        try:
            staging_parent.rmdir()
        except OSError:
            pass
    return target


def _write_execution(writer, execution: Execution) -> None:
    key = str(ExecutionKey(execution.workload, "-", False, execution.repetition))
    raw = f"raw/{execution.workload}/rep-{execution.repetition}"
    (writer.path / raw).mkdir(parents=True, exist_ok=True)
    shutil.copy2(execution.source, writer.path / raw / execution.source.name)
    imported_from = {"imported": True, "source": str(execution.source)}
    samples = [
        Sample(
            workload=execution.workload,
            kind=execution.kind,
            params={**{k: v for k, v in execution.params.items() if v is not None}, **m.case},
            variant={},
            metric=m.metric,
            unit=m.unit,
            value=m.value,
            better=m.better,
            repetition=execution.repetition,
            warmup=False,
            timestamp=execution.started_at,
            metadata={**m.metadata, **({"case": m.case} if m.case else {}), **imported_from},
            execution=key,
            raw=raw,
            contended=False,
        )
        for m in execution.measurements
    ]
    writer.append_samples(samples)
    writer.append_execution(
        {
            "key": key,
            "workload": execution.workload,
            "variant": {},
            "repetition": execution.repetition,
            "warmup": False,
            "status": "ok",
            "started_at": execution.started_at,
            "elapsed_s": execution.elapsed_s if execution.elapsed_s is not None else 0.0,
            "samples": len(samples),
            "raw": raw,
            "imported": True,
        }
    )


def import_results(format_name: str, paths: Iterable[Path], out: Path, label: str | None = None) -> list[Path]:
    """Read everything first (a bad file stops the import before anything is written), then write
    one bundle per label."""
    bundles = collect(format_name, paths, label)
    return [write_bundle(imported, Path(out)) for imported in bundles]
