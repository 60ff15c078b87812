"""ping's output (iputils, busybox, BSD/macOS, Windows: each one's lines in ccbench.formats.ping): each
reply's round trip one sample (``rtt``, ms) and the run's ``loss``, as the network workload's ping
fallback records them. A file whose statistics count replies but whose reply lines were not read
(``ping -q``) imports the loss alone, and its notes say so; a log with replies and no statistics line
(the run was cut short: killed, or the file truncated) is refused in one line, never read as a
smaller sample.
One file is one execution of the workload ``network``; a ping log states no machine. The destination
ping names in its header (``PING 8.8.8.8 (8.8.8.8) 56(84) bytes of data``, as typed) is part of the
case: logs to different destinations are different cases, never one (a loopback's 0.04 ms and an
internet host's 10 ms are not one distribution), and compared only with logs to the same destination.
As ping names no host, logs imported together without ``--label`` are taken as one machine, the
bundle named after the first; the import says so, with the ping each log is the output of (busybox's
beside iputils' is a sign of two machines or images) and what to do if they are not one machine.
"""

from __future__ import annotations

from pathlib import Path

from ccbench.formats import FormatError
from ccbench.formats import ping as ping_format
from ccbench.results.importers.base import (
    Execution,
    FileFormat,
    Imported,
    ImportProblem,
    mtime,
    read_text,
    what_it_is,
)
from ccbench.results.importers.iperf3 import WORKLOAD


def case(run: ping_format.PingRun) -> dict[str, str | int]:
    """The run's case (protocol, payload size) with the destination as ping names it, where it does."""
    return {**run.case(), **({"destination": run.target} if run.target else {})}


def read(path: Path) -> list[Execution]:
    text = read_text(path, "ping")
    try:
        run = ping_format.parse(text)
    except FormatError as exc:
        raise ImportProblem(f"{path}: {what_it_is(text) or exc}; give ping's own output") from None
    if run.replies and run.sent is None:
        raise ImportProblem(
            f"{path}: ping's log ends after {len(run.replies)} replies without its statistics line "
            "('N packets transmitted, M received'): the run was cut short; import the log of a ping that ran "
            "to its end (-c N, or stopped with Ctrl-C, which prints the statistics)"
        )
    notes = [f"ping {run.target} ({run.address})"] if run.target else []
    if run.received and not run.replies:
        notes.append(
            f"the statistics count {run.received} replies but no reply line was printed (ping -q?): only the loss"
        )
    if run.duplicates:
        notes.append(f"{run.duplicates} duplicate replies left out of the samples")
    return [
        Execution(
            workload=WORKLOAD,
            kind="network",
            source=path,
            started_at=mtime(path),
            measurements=ping_format.measurements(run, case=case(run)),
            status="ok" if run.replies else "failed",
            notes=notes,
            tool={"ping": run.implementation},
        )
    ]


def one_machine_note(imported: Imported, label: str | None) -> str | None:
    """What the import says of a bundle of several ping logs: taken as one machine (ping names no
    host), and which ping wrote each where they differ; None for a bundle of one log."""
    logs = {e.source.name: e.tool.get("ping") or "an unknown ping" for e in imported.executions}
    if len(logs) < 2:
        return None
    pings = sorted(set(logs.values()))
    differ = (
        f"; they are the output of different pings ({', '.join(f'{n}: {p}' for n, p in logs.items())}), "
        "a sign of different machines or images"
        if len(pings) > 1
        else ""
    )
    if label is not None:
        return f"{len(logs)} ping logs under --label {label!r}, one machine as stated{differ}" if differ else None
    return (
        f"{len(logs)} ping logs taken as one machine, named after {next(iter(logs))} (ping names no host){differ}; "
        "if they come from different machines, import each machine's logs with its own --label"
    )


class PingFormat(FileFormat):
    """ping's logs: one bundle, whose import says it took several logs as one machine."""

    def collect(self, paths: list[Path], label: str | None) -> list[Imported]:
        bundles = super().collect(paths, label)
        for imported in bundles:
            note = one_machine_note(imported, label)
            imported.notes += [note] if note else []
        return bundles


ADAPTER = PingFormat(
    name="ping",
    description="ping's output (iputils, busybox, BSD/macOS, Windows): each reply's round trip a sample (rtt, ms), "
    "and the loss; each destination a case of its own; logs imported together are one machine (ping names no "
    "host: give each machine's logs their own --label)",
    read=read,
    suffixes=(".txt", ".log", ".out", ".gz"),
)
