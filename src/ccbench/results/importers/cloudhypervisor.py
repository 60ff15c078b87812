"""cloud-hypervisor's ``performance-metrics`` reports (``--report-file FILE``, or its standard output
with the progress lines before the JSON): workload ``cloud-hypervisor``, one execution per report,
each test a metric named as the binary names it (``boot_time_ms``, ``block_read_MiBps``), its unit
and direction read from the name's suffix (ccbench.formats.cloudhypervisor).

**Stated summaries, not samples.** A report gives per test a mean, a standard deviation, a
maximum and a minimum over iterations whose number it does not state: each test is one value,
the mean, marked ``statistic: mean`` with the rest beside it (``stdev``, its kind ``population``:
the binary divides by the count; ``max``, ``min``; ``values: null``), which compare flags as
"summary statistics (number of values unknown)" and never calls significant. No sample is invented.

A test the report marks ``FAILED`` (``--continue-on-failure``; its figures are 0.0) has no value:
it is left out and said so in the execution's notes, and a report of failed tests only is a
failed execution.

**The run.** The report's ``git_human_readable``, ``git_revision``, ``git_commit_date`` and ``date``
are kept: in the manifest's ``source_facts``, its tools (``cloud_hypervisor``: the git description,
else the revision) and each value's metadata; the execution starts at ``date`` where its zone is
UTC (else the file's modification time, and the date as stated stays in the facts).

**Bundles.** A report names no machine and not its VM type (``--vm-type confidential`` writes the
same fields): without ``--label`` each report is a bundle of its own, labelled by its file name, so a
regular and a confidential arm are never pooled; ``--label`` puts reports of one configuration
together (refused where they state different git revisions: two builds are two configurations).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from ccbench.formats import FormatError
from ccbench.formats import cloudhypervisor as ch
from ccbench.model import Measurement
from ccbench.results.importers.base import (
    Execution,
    FileFormat,
    Imported,
    ImportProblem,
    by_machine,
    expand,
    iso,
    mtime,
    read_json,
    wrong_shape,
)

WORKLOAD = "cloud-hypervisor"
#: the run facts that make two reports two configurations under one label
BUNDLE_KEYS = ("git_revision",)
_UTC_ZONES = ("UTC", "GMT")


def _started(date: str | None, path: Path) -> tuple[str, str]:
    """(when the run ended, where that came from): the report's ``date`` where its zone is UTC."""
    if date:
        words = date.split()
        if len(words) == 6 and words[4] in _UTC_ZONES:
            try:
                moment = datetime.strptime(" ".join(words[:4] + words[5:]), "%a %b %d %H:%M:%S %Y")
                return iso(moment.replace(tzinfo=UTC)), "the report's date"
            except ValueError:
                pass
    return mtime(path), "the file's modification time (the report's date has no UTC zone)"


def _measurement(test: ch.TestResult, run: dict[str, str], stamp_source: str) -> Measurement:
    unit, better = ch.unit_of(test.name) or ("", None)
    return Measurement(
        metric=test.name,
        unit=unit,
        value=test.mean,
        better=better,
        metadata={
            "statistic": "mean",
            "stdev": test.std_dev,
            "stdev_kind": "population (divided by the number of iterations)",
            "max": test.max,
            "min": test.min,
            "values": None,
            "note": "cloud-hypervisor's performance-metrics report: the mean of iterations whose number it does "
            "not state",
            **({"status": test.status} if test.status else {}),
            **{f"report_{key}": value for key, value in run.items()},
            "timestamp_source": stamp_source,
        },
    )


def read(path: Path) -> list[Execution]:
    document = read_json(path, "cloud-hypervisor performance-metrics")
    if not ch.is_report(document):
        raise wrong_shape(
            path,
            document,
            "cloud-hypervisor's performance-metrics report",
            "a JSON object with git_revision and results",
        )
    try:
        tests = ch.results(document)
    except FormatError as exc:
        raise ImportProblem(f"{path}: {exc}") from None
    if not tests:
        raise ImportProblem(f"{path}: the report has no test in its results (did every test get filtered out?)")
    run = ch.run_facts(document)
    started, stamp_source = _started(run.get("date"), path)
    measurements = [_measurement(test, run, stamp_source) for test in tests if not test.failed]
    notes = []
    failed = [test.name for test in tests if test.failed]
    if failed:
        notes.append(f"{len(failed)} test(s) the report marks FAILED, left out (no value): {', '.join(failed)}")
    unitless = [test.name for test in tests if not test.failed and ch.unit_of(test.name) is None]
    if unitless:
        notes.append(
            f"no unit known for {', '.join(unitless)} (the name ends in no unit suffix): unit and direction left empty"
        )
    version = run.get("git_human_readable") or run.get("git_revision")
    return [
        Execution(
            workload=WORKLOAD,
            kind=WORKLOAD,
            source=path,
            started_at=started,
            measurements=measurements,
            machine=dict(run),
            tool={"cloud_hypervisor": version} if version else {},
            status="ok" if measurements else "failed",
            notes=notes,
        )
    ]


class CloudHypervisorFormat(FileFormat):
    """Without --label, one bundle per report: a report names neither its machine nor its VM type."""

    def collect(self, paths: list[Path], label: str | None) -> list[Imported]:
        files = [(path, self.read(path)) for path in expand(paths, self.name, self.suffixes)]
        if label is not None:
            return by_machine(self.name, files, label, self.bundle_keys)
        seen: dict[str, Path] = {}
        bundles = []
        for path, executions in files:
            if path.stem in seen:
                raise ImportProblem(
                    f"{seen[path.stem]} and {path}: two reports named {path.stem!r} would be two bundles of one label: "
                    "import each with its own --label (or both under one --label if they are one configuration)"
                )
            seen[path.stem] = path
            bundles += by_machine(self.name, [(path, executions)], None, self.bundle_keys)
        return bundles


ADAPTER = CloudHypervisorFormat(
    name="cloud-hypervisor",
    description="cloud-hypervisor's performance-metrics reports (--report-file): each test's mean with its "
    "std_dev, max and min as a stated summary (the number of iterations unknown), FAILED tests left out and said "
    "so, the git revision and date kept; one bundle per report unless --label",
    read=read,
    bundle_keys=BUNDLE_KEYS,
)
