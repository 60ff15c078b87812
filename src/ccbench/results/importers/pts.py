"""The Phoronix Test Suite's result files (``composite.xml``; a directory stands for the
``composite.xml`` in it, or in each of its subdirectories, as in PTS's ``test-results/``), read by
ccbench.formats.pts.

**One bundle per system.** Each ``System`` of a file is a configuration (a TD and a plain VM saved
under one result name are two): its bundle is labelled by the system's identifier, and its
execution holds every ``BAR_GRAPH`` result's entry for it. Workload ``pts``; each result a case
``{"test": Identifier, "options": Description}`` (``Arguments`` where the description is empty;
a result derived from another, with a ``Parent``, adds its ``Scale`` as ``figure``), metric
``result`` in the result's ``Scale``, better as its ``Proportion`` says (``HIB`` higher, ``LIB``
lower, none for ``ABSTRACT``).

**Samples.** An entry's ``RawString`` holds every run's value: each is a sample. An entry without
one gives only its ``Value``, the mean of runs whose number the file does not state: one value
marked ``statistic: mean`` (compare's "summary statistics (number of values unknown)"). The title,
app version, arguments and the entry's JSON (min, max, run times, compiler options) are kept in
each sample's metadata. Results of another display format (a sensor's line graph, pass/fail) and
entries without a number (a failed test) are left out and said so in the execution's notes.

**Facts.** A system's Hardware and Software strings give the CPU model, cores and threads, the
memory (binary units, as PTS reads meminfo), the kernel release, the OS and the system layer (a
hypervisor, where PTS detected one), each pair also kept as PTS names it; its user, time stamp,
PTS version, notes and JSON too. The time stamp states no zone: it is read as UTC, and said so.

**Labels.** ``--label`` names the one system of the files (refused for a file of several); without
it, a system identifier that two files both hold is refused (two guests often share one, e.g.
canonical/tdx's runs in a TD and in a VM): import such files with a label each.
"""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ccbench.formats import FormatError, pts
from ccbench.results.importers.base import (
    MACHINE_KEYS,
    PTS_FILE,
    Execution,
    Imported,
    ImportProblem,
    Series,
    by_machine,
    iso,
    mtime,
    read_text,
    what_it_is,
)

WORKLOAD = "pts"
RESULT_FILE = "composite.xml"


def result_files(paths: list[Path]) -> list[Path]:
    """The files named; a directory stands for its composite.xml, or its subdirectories' ones."""
    files = []
    for path in paths:
        if not path.is_dir():
            files.append(path)
            continue
        found = [path / RESULT_FILE] if (path / RESULT_FILE).is_file() else sorted(path.glob(f"*/{RESULT_FILE}"))
        if not found:
            raise ImportProblem(f"{path}: no {RESULT_FILE} in it or in its subdirectories: give PTS's result file")
        files += found
    return files


def _decoded(text: str) -> Any:
    """The text as JSON where it is JSON (to name what a wrong file is), else None."""
    try:
        return json.loads(text[text.find("{") :]) if text.lstrip().startswith(("{", "[")) else None
    except ValueError:
        return None


def _parse(path: Path) -> pts.ResultFile:
    text = read_text(path, "a PTS result file")
    recognised = what_it_is(text, _decoded(text))
    if recognised and recognised[0] != PTS_FILE:
        raise ImportProblem(f"{path}: this is {recognised[0]}, not a Phoronix Test Suite result file: {recognised[1]}")
    try:
        return pts.parse(text)
    except FormatError as exc:
        advice = (
            "was the file cut short? Give the whole composite.xml PTS wrote"
            if "not complete" in str(exc)
            else "give the composite.xml PTS wrote"
        )
        raise ImportProblem(f"{path}: not a Phoronix Test Suite result file: {exc}; {advice}") from None


def _started(system: pts.System, path: Path) -> tuple[str, str]:
    try:
        moment = datetime.strptime(system.timestamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
        return iso(moment), "the system's TimeStamp (PTS states no zone: read as UTC)"
    except ValueError:
        return mtime(path), "the file's modification time (the system has no TimeStamp)"


def _case(result: pts.Result) -> dict[str, Any]:
    case = {"test": result.identifier or result.title, "options": result.description or result.arguments}
    if result.parent:
        case["figure"] = result.scale
    return case


def _series(path: Path, result: pts.Result, entry: pts.Entry, stamp_source: str) -> Series | None:
    metadata = {
        "title": result.title,
        "app_version": result.app_version,
        "arguments": result.arguments,
        "proportion": result.proportion,
        **({"pts_entry": entry.json} if entry.json else {}),
        "timestamp_source": stamp_source,
    }
    try:
        values = pts.run_values(entry)
    except FormatError as exc:
        raise ImportProblem(f"{path}: result {result.identifier} ({result.description}): {exc}") from None
    if values is None:
        mean = pts.mean_value(entry)
        if mean is None:
            return None
        values = [mean]
        metadata.update(
            statistic="mean", values=None, note="PTS's Value without its runs (no RawString): a mean of runs not stated"
        )
    return Series("result", result.scale, values, result.better, _case(result), metadata)


def _execution(path: Path, document: pts.ResultFile, system: pts.System) -> Execution:
    started, stamp_source = _started(system, path)
    series, other_formats, failed = [], [], []
    for result in document.results:
        for entry in (e for e in result.entries if e.system == system.identifier):
            if result.display_format != pts.PER_RUN:
                other_formats.append(result.display_format)
                continue
            one = _series(path, result, entry, stamp_source)
            if one is None:
                # cut at a word, marked "...": never mid-path as a note a reader takes for whole
                said = textwrap.shorten(str(entry.json.get("error", "")), 160, placeholder=" ...")
                failed.append(
                    f"{result.identifier} ({result.description}): {entry.value or 'no value'}"
                    + (f" (PTS: {said})" if said else "")
                )
            else:
                series.append(one)
    notes = []
    if other_formats:
        shown = ", ".join(sorted(set(other_formats)))
        notes.append(
            f"{len(other_formats)} result(s) of another display format ({shown}) left out: not a figure per run"
        )
    if failed:
        notes.append(f"{len(failed)} result(s) without a number left out: {'; '.join(failed[:5])}")
    facts = system.facts()
    facts.update(
        {
            "pts_user": system.user,
            "pts_timestamp": system.timestamp,
            "pts_notes": system.notes,
            "pts_system_json": system.json,
            "pts_result_title": document.generated.get("Title", ""),
        }
    )
    return Execution(
        workload=WORKLOAD,
        kind=WORKLOAD,
        source=path,
        started_at=started,
        series=series,
        machine={k: v for k, v in facts.items() if v not in ("", {}, None)},
        tool={"phoronix_test_suite": system.client_version or document.generated.get("TestClient")},
        status="ok" if series else "failed",
        notes=notes,
    )


class PtsFormat:
    name = "pts"
    description = (
        "Phoronix Test Suite result files (composite.xml, or a directory of them): one bundle per system "
        "(labelled by its identifier), every run's value of each result a sample, HIB/LIB as the direction, "
        "the CPU, memory and kernel its Hardware/Software strings state kept"
    )

    def collect(self, paths: list[Path], label: str | None) -> list[Imported]:
        files = [(path, _parse(path)) for path in result_files(paths)]
        if label is not None:
            for path, document in files:
                if len(document.systems) > 1:
                    names = ", ".join(s.identifier for s in document.systems)
                    raise ImportProblem(
                        f"{path}: --label {label!r} names one system but the file holds {len(document.systems)} "
                        f"({names}): leave --label out for one bundle per system"
                    )
            read = [(path, [_execution(path, document, document.systems[0])]) for path, document in files]
            return by_machine(self.name, read, label, MACHINE_KEYS)
        holders: dict[str, Path] = {}
        bundles = []
        for path, document in files:
            named = [s.identifier for s in document.systems]
            if twice := sorted({name for name in named if named.count(name) > 1}):
                raise ImportProblem(
                    f"{path}: {len(named)} systems share the identifier {twice[0]!r} (PTS's merge-results keeps both), "
                    "so its entries cannot be told apart: rename one with `phoronix-test-suite "
                    "rename-identifier-in-result-file`, then import"
                )
            for system in document.systems:
                if system.identifier in holders:
                    raise ImportProblem(
                        f"{holders[system.identifier]} and {path} both hold a system {system.identifier!r}: ccbench "
                        "cannot tell whether they are one configuration; import each file with its own --label "
                        "(or both under one --label if they are one)"
                    )
                holders[system.identifier] = path
                execution = _execution(path, document, system)
                bundles.append(
                    Imported(label=system.identifier, format=self.name, executions=[execution], facts=execution.machine)
                )
        return bundles


ADAPTER = PtsFormat()
