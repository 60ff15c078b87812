"""What every importer shares: the records an adapter returns (``Execution``, ``Imported``), the
one error (``ImportProblem``), reading a tool's JSON and saying what a file is when it is not what
was asked for, the one function that turns a name from a source into a path component, and the
adapter for formats of one file per execution (``FileFormat``)."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ccbench.basics.errors import CCBenchError
from ccbench.model import Measurement

#: what an imported bundle cannot know, whatever the source
ALWAYS_UNKNOWN = [
    "tee: no TEE evidence (imported results carry none)",
    "contention: what else ran on the machine was not recorded",
]
#: what ``what_it_is`` calls a Phoronix Test Suite result file
PTS_FILE = "a Phoronix Test Suite result file (XML)"
#: the machine facts that must agree for files to share one bundle (one bundle is one machine)
MACHINE_KEYS = ("hostname", "cpu_model", "cpu_count", "kernel_release")


class ImportProblem(CCBenchError):
    """A source that cannot be imported (one line: which file, what is wrong, what to do)."""


@dataclass
class Series:
    """Values of one metric and case that share everything but the value (a pyperf run's values):
    written in bulk, one sample per value, without one object per value."""

    metric: str
    unit: str
    values: list[float]
    better: str | None = "lower"
    case: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Execution:
    """One execution of one workload: a source file's worth of measurements (or part of one)."""

    workload: str
    kind: str
    source: Path
    started_at: str
    measurements: list[Measurement] = field(default_factory=list)
    #: the same as measurements, in bulk (see Series)
    series: list[Series] = field(default_factory=list)
    #: the workload's parameters as the source states them (joined with each measurement's case)
    params: dict[str, Any] = field(default_factory=dict)
    #: how many executions of this workload came before it (set when bundles are assembled)
    repetition: int = 0
    elapsed_s: float | None = None
    #: facts of the machine the source states (pyperf's metadata: CPU model, hostname, ...)
    machine: dict[str, Any] = field(default_factory=dict)
    #: facts about the tool, not the machine (fio's, pyperf's, Python's version): the manifest's
    #: environment.tools (a format that must tell samples apart by them puts them in their metadata too)
    tool: dict[str, Any] = field(default_factory=dict)
    #: "ok", or "failed" for an execution the source says failed (its samples are left out)
    status: str = "ok"
    #: what the source says about this execution that a reader must know (runs left out, and why)
    notes: list[str] = field(default_factory=list)
    #: the runs the source says failed, left out of the samples but kept in the execution record
    #: (hyperfine -i's runs that exited non-zero: index, exit code, time)
    failed_runs: list[dict[str, Any]] = field(default_factory=list)

    def sample_count(self) -> int:
        return len(self.measurements) + sum(len(s.values) for s in self.series)


@dataclass
class Imported:
    """What one bundle will hold: the executions of one machine label, and the machine facts known."""

    label: str
    format: str
    executions: list[Execution] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)
    #: the storage protection the source itself names (a ``stated.STORAGE_CHOICES`` name), and how it
    #: names it; a user's --storage-protection wins over it
    storage_protection: str | None = None
    storage_protection_source: str = ""
    #: what the import must tell of the bundle as a whole (files taken as one machine, and why)
    notes: list[str] = field(default_factory=list)
    #: the file the machine facts come from where no execution is (seed 000's systeminfo)
    facts_source: Path | None = None

    def stated_by(self, fact: str) -> Path | None:
        """The file that states ``fact`` (a key of ``facts``): an execution's source, else facts_source."""
        for execution in self.executions:
            if execution.machine.get(fact):
                return execution.source
        return self.facts_source if self.facts.get(fact) else None


@dataclass
class Statements:
    """What the user stated: ``common`` for every bundle, ``by_label`` for the bundle of one label."""

    common: dict[str, Any] = field(default_factory=dict)
    by_label: dict[str, dict[str, Any]] = field(default_factory=dict)

    def for_label(self, label: str) -> dict[str, Any]:
        return {**self.common, **self.by_label.get(label, {})}

    def check(self, labels: Iterable[str]) -> None:
        """A one-line error for a LABEL= that names no bundle of this import."""
        known = sorted(set(labels))
        for label, facts in self.by_label.items():
            if label not in known:
                option = "--tee" if "tee" in facts else "--storage-protection"
                raise ImportProblem(
                    f"{option} {label}=...: no bundle of this import has the label {label!r} "
                    f"(its labels: {', '.join(known) or 'none'}); give one of them, or the value alone for all"
                )


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def mtime(path: Path) -> str:
    return iso(datetime.fromtimestamp(path.stat().st_mtime, UTC))


_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]")


def safe_component(name: Any, limit: int = 80) -> str:
    """A name from a source (a benchmark's, a file's, a label) as ONE path component that stays where
    it is put: only ``[A-Za-z0-9_.+-]``, never ``.``/``..`` or hidden, at most ``limit`` characters;
    a name that had to change keeps a short digest of the original, so two names stay two."""
    text = str(name)
    safe = _UNSAFE.sub("_", text).lstrip(".") or "_"
    if safe != text or len(safe) > limit:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        safe = f"{safe[: limit - 9]}-{digest}"
    return safe


# ---------------------------------------------------------------------------------- reading JSON


def what_it_is(text: str, document: Any = None) -> tuple[str, str] | None:
    """(what a file is, what to do) when it can be recognised (for an error that says so), else None.
    ``document`` is the decoded JSON, when the text decoded."""
    head = text.lstrip()[:2000].lower()
    if head.startswith(("<!doctype html", "<html")) or "<html" in head[:500]:
        return "an HTML page", "download the raw file, not the web page that shows it"
    if head.startswith("<") and "<phoronixtestsuite" in head:
        return PTS_FILE, "use `ccbench import pts`"
    if document is None:
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        if first.startswith("fio:") or first.startswith("fio-") and "err" in first:
            return f"fio's own error text ({first[:120]})", "fio did not run the job: fix the job and run it again"
        return None
    from ccbench.formats import cloudhypervisor, fio, pyperf

    for name, recognised in (
        ("fio", fio.is_fio(document)),
        ("pyperf", pyperf.is_pyperf(document)),
        ("cloud-hypervisor", cloudhypervisor.is_report(document)),
    ):
        if recognised:
            return f"{name} JSON", f"use `ccbench import {name}`"
    results = document.get("results") if isinstance(document, dict) else None
    if isinstance(results, list) and results and all(isinstance(r, dict) and "command" in r for r in results):
        return "hyperfine JSON", "use `ccbench import hyperfine`"
    if isinstance(document, dict) and "intervals" in document and "start" in document:
        return "iperf3 JSON", "import it with the iperf3 format"
    if isinstance(document, dict):
        shape = f"an object with keys {', '.join(map(str, list(document)[:5]))}"
    else:
        shape = type(document).__name__
    return f"complete JSON of another shape ({shape})", "give the file the tool wrote"


def read_text(path: Path, what: str) -> str:
    """The file's text (gzip-compressed when the name ends in .gz)."""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        return raw.decode("utf-8")
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        raise ImportProblem(f"{path}: cannot read it as {what} ({exc})") from None


def read_json(path: Path, what: str) -> Any:
    """A JSON document (gzip-compressed when the name ends in .gz); tools may print lines before it.
    A file that is not JSON is named for what it is where that can be recognised."""
    text = read_text(path, what)
    start = text.find("{")
    try:
        if start < 0:
            raise ValueError("no JSON object in it")
        return json.loads(text[start:])
    except ValueError as exc:
        recognised = what_it_is(text)
        if recognised:
            raise ImportProblem(f"{path}: this is {recognised[0]}, not {what} JSON: {recognised[1]}") from None
        raise ImportProblem(
            f"{path}: not a complete {what} JSON document ({exc}); was the file cut short? "
            "Give the whole file the tool wrote"
        ) from None


def wrong_shape(path: Path, document: Any, what: str, expected: str) -> ImportProblem:
    """The error for complete JSON that is not this format: what it is, when recognisable."""
    recognised, advice = what_it_is("", document) or ("JSON of another shape", "give the file the tool wrote")
    return ImportProblem(f"{path}: this is {recognised}, not {what} ({expected}): {advice}")


# ---------------------------------------------------------------------------- one file per execution


def expand(paths: list[Path], what: str, suffixes: tuple[str, ...] = (".json", ".gz")) -> list[Path]:
    """The files named, a directory standing for the files in it with these suffixes."""
    files = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in suffixes)
            if not found:
                raise ImportProblem(f"{path}: no {'/'.join(suffixes)} file in it to import as {what}")
            files += found
        else:
            files.append(path)
    return files


def machine_key(facts: dict[str, Any], keys: tuple[str, ...] = MACHINE_KEYS) -> tuple:
    return tuple(facts.get(key) for key in keys)


def by_machine(
    name: str,
    files: list[tuple[Path, list[Execution]]],
    label: str | None,
    keys: tuple[str, ...] = MACHINE_KEYS,
    host_labels: bool = False,
) -> list[Imported]:
    """One bundle per machine: executions whose stated facts ``keys`` agree share one (one file may
    state several machines, as fio --client output of several servers does); executions that state
    different machines are one bundle each, or, under one ``--label``, refused in one line. A bundle
    is labelled by its first file's name, or with ``host_labels`` by the host name its executions state."""
    groups: dict[tuple, list[tuple[Path, list[Execution]]]] = {}
    for path, executions in files:
        own: dict[tuple, list[Execution]] = {}
        for execution in executions:
            own.setdefault(machine_key(execution.machine, keys), []).append(execution)
        for key, members in own.items():
            groups.setdefault(key, []).append((path, members))
    if len(groups) > 1 and label is not None:
        (first, *_), (second, *_) = list(groups.values())[:2]
        differ = [
            f"{key} {a!r} vs {b!r}"
            for key, a, b in zip(keys, machine_key(first[1][0].machine, keys), machine_key(second[1][0].machine, keys))
            if a != b
        ]
        one_file = first[0] == second[0]
        where = f"{first[0]} states" if one_file else f"{first[0]} and {second[0]}: the files state"
        advice = "" if one_file else "import them separately, or "
        raise ImportProblem(
            f"{where} {len(groups)} machines ({'; '.join(differ)}) but --label {label!r} names one: "
            f"{advice}leave --label out for one bundle each"
        )
    bundles = []
    for members in groups.values():
        facts = {k: v for _, executions in members for e in executions for k, v in e.machine.items()}
        own = label or (host_labels and facts.get("hostname")) or members[0][0].stem
        imported = Imported(label=own, format=name, facts=facts)
        imported.executions = [e for _, executions in members for e in executions]
        bundles.append(imported)
    return bundles


@dataclass(frozen=True)
class FileFormat:
    """An adapter for a format of one file per source: ``read(path)`` gives its executions; files
    (or directories of them) that state one machine become one bundle."""

    name: str
    description: str
    read: Callable[[Path], list[Execution]]
    suffixes: tuple[str, ...] = (".json", ".gz")
    #: the stated facts that must agree for files to share one bundle (a format may add what else
    #: makes two files two configurations, as pyperf adds the Python that ran)
    bundle_keys: tuple[str, ...] = MACHINE_KEYS
    #: a bundle without --label is named by the host its source states (fio --client's servers), not
    #: by its first file's name
    host_labels: bool = False

    def collect(self, paths: list[Path], label: str | None) -> list[Imported]:
        read = [(path, self.read(path)) for path in expand(paths, self.name, self.suffixes)]
        return by_machine(self.name, read, label, self.bundle_keys, self.host_labels)
