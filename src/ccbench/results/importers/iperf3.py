"""iperf3's text logs (client or server side, TCP or UDP) and ``-J`` JSON documents: the samples the
network workload records (ccbench.formats.iperf3): every interval of every stream, and the SUM
line as the result (``throughput``, for UDP the receive rate, with ``loss`` and ``jitter``).

Each test in a file is one execution of the workload ``network`` (a server's log may hold several
tests). A text log does not name the datagram size: it is derived from the transfer and datagram
counts, and each sample's metadata says so, with the bounds the log's rounding allows. A JSON
document's ``system_info`` (``Linux HOST RELEASE ...``) gives the machine's hostname and kernel;
a text log states no machine (``--label``, ``--tee`` and ``--kernel-cmdline`` say what it lacks).
What a log holds that is not a measurement (``-O``'s omitted intervals, an old server's 0-byte
placeholder for the side it did not see) is not imported as one, and each execution's notes say so.
A text log cut short (interval lines and no end summary, or a summary without the [SUM] lines of a
multi-stream test or a client's receiver line: the process stopped before the test ended) is
refused in one line, never read as a smaller sample.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ccbench.formats import FormatError
from ccbench.formats import iperf3 as iperf3_format
from ccbench.results.importers.base import Execution, FileFormat, ImportProblem, iso, mtime, read_text, what_it_is

#: the workload the network workload's own bundles name: imported and measured results compare
WORKLOAD = "network"


def _machine(test: iperf3_format.Iperf3Test) -> dict[str, Any]:
    words = str(test.facts.get("system_info", "")).split()
    if len(words) >= 3 and words[0] == "Linux":
        return {"hostname": words[1], "kernel_release": words[2]}
    return {}


def _started(test: iperf3_format.Iperf3Test, path: Path) -> str:
    stamp = test.facts.get("timestamp")
    if stamp:
        try:
            return iso(datetime.strptime(stamp, "%a, %d %b %Y %H:%M:%S %Z").replace(tzinfo=UTC))
        except ValueError:
            pass
    return mtime(path)


def tests_in(path: Path) -> list[iperf3_format.Iperf3Test]:
    text = read_text(path, "iperf3")
    try:
        if text.lstrip().startswith("{"):
            try:
                document = json.loads(text[text.find("{") :])
            except ValueError as exc:
                raise ImportProblem(f"{path}: not a complete iperf3 JSON document ({exc}); was it cut short?") from None
            return iperf3_format.parse_json(document)
        return iperf3_format.parse_text(text)
    except FormatError as exc:
        recognised = what_it_is(text)
        raise ImportProblem(
            f"{path}: {recognised or exc}; give iperf3's own output (its text log or -J JSON)"
        ) from None


def _refuse_cut_short(path: Path, tests: list[iperf3_format.Iperf3Test]) -> None:
    """One line for a text log whose test ended before its summary: never read as a smaller sample."""
    for number, test in enumerate(tests, 1):
        if cut := test.facts.get("cut_short"):
            which = f"its test {number} of {len(tests)}" if len(tests) > 1 else "its test"
            where = "before the summary" if not test.summary else "inside the summary"
            raise ImportProblem(
                f"{path}: iperf3's log ends {where} of {which} ({len(test.intervals)} interval lines, {cut}): "
                "the run was cut short; import the log of a test that ran to its end"
            )


def read(path: Path) -> list[Execution]:
    executions = []
    tests = tests_in(path)
    _refuse_cut_short(path, tests)
    for test in tests:
        measurements = iperf3_format.measurements(test)
        if not measurements:
            continue
        tool = {"iperf3_version": test.facts["version"]} if test.facts.get("version") else {}
        notes = []
        if test.datagram_size_bounds is not None:
            low, high = test.datagram_size_bounds
            notes.append(
                f"datagram size {test.datagram_size} B derived from the log's transfers and counts ({low}-{high})"
            )
        if test.facts.get("omitted_intervals"):
            notes.append(f"{test.facts['omitted_intervals']} intervals marked (omitted) by -O left out of the samples")
        if test.facts.get("client_terminated"):
            notes.append("the server log says the client has terminated: the test ended early")
        sides = {m.metadata.get("result_side") for m in measurements if m.metric == "throughput"}
        if "sender" in sides:
            notes.append("the receiver's summary was a 0-byte placeholder: throughput is the sender's line")
        if "intervals" in sides:
            notes.append("the summary's byte count was not the receiver's: throughput is the intervals' bytes")
        executions.append(
            Execution(
                workload=WORKLOAD,
                kind="network",
                source=path,
                started_at=_started(test, path),
                measurements=measurements,
                machine=_machine(test),
                tool=tool,
                notes=notes,
            )
        )
    if not executions:
        raise ImportProblem(f"{path}: iperf3's output holds no measurement (did the test run?)")
    return executions


ADAPTER = FileFormat(
    name="iperf3",
    description="iperf3 text logs (client or server side, TCP or UDP; the datagram size derived) and -J JSON: "
    "every interval of every stream, the SUM line as the result (throughput; UDP loss and jitter)",
    read=read,
    suffixes=(".txt", ".log", ".json", ".out", ".gz"),
)
