"""iperf3's output: its text log (client or server side, TCP or UDP, every interval line and the
end summary) and its ``-J`` JSON document (with the server's own output when the client asked for
it with ``--get-server-output``).

The sample unit, the same for ccbench's network workload and ``ccbench import iperf3``:

* every interval of every stream is one sample: ``interval_throughput`` (Mbit/s) where the side
  that printed it received the stream, ``sender_interval_throughput`` where it sent it; the
  interval's start and end (seconds into the test), the stream's id and the side are metadata,
  with the interval's retransmits and congestion window (TCP sender), datagrams, lost datagrams
  and jitter (UDP) where the line holds them;
* the end summary's SUM line (the one stream's line when there is one stream) is the result:
  ``throughput`` (Mbit/s, what the receiver got: for UDP the receive rate), and for UDP ``loss``
  (% of datagrams) and ``jitter`` (ms); ``sender_throughput`` and, for TCP, ``retransmits`` from
  the sender's summary.

What a text log holds that is not a measurement is not taken as one:

* intervals iperf3 marks ``(omitted)`` (the ``-O`` warm-up) are not samples (the JSON path skips
  them the same way); their count is kept in ``facts["omitted_intervals"]``;
* a summary line of 0 bytes is a placeholder for a side the printing process did not see (an old
  server's ``0.00 Bytes  0.00 bits/sec  receiver`` in a reverse test, its ``sender`` line in a
  forward one; a UDP ``0/0`` line): it is dropped. A TCP test whose receiver line was such a
  placeholder takes its ``throughput`` from the sender's line (TCP delivers what was sent), and the
  sample's metadata says ``result_side: sender``;
* a UDP summary of 0 bytes over a non-zero datagram count (iperf3 up to 3.1 printed the sender's
  byte count there, which a server never got when the client terminated): the loss and jitter are the
  receiver's own and are kept; the throughput is the receiver's intervals' bytes over their span
  (``result_side: intervals``). A server log's "the client has terminated" is kept in
  ``facts["client_terminated"]``;
* a test with interval lines and no end summary, a multi-stream test (several stream ids, or SUM
  interval lines) whose summary lacks the SUM sender or receiver line its streams' lines have, or
  a client's summary with the sender's line and no receiver's, ended before iperf3 printed it all
  (the process was killed, the log cut short): ``facts["cut_short"]`` says what is missing, and
  ``ccbench import`` refuses such a log rather than read what is left as a smaller sample;
* a server log is a reverse test when the server sent: its intervals carry the sender's Retr/Cwnd
  columns, or (old servers, whose intervals have no such columns) its summary has a real sender line
  and only a placeholder (or nothing) for the receiver's.

The case: ``protocol`` (tcp, udp), ``streams``, for UDP ``datagram_size`` (bytes), and
``reverse: true`` for a reverse-mode test. iperf3's text log does not name the datagram size: it
is derived from each line's transfer and datagram count (the printed transfer is rounded, so each
line bounds the size to an interval; the intersection of all of them is kept, and a common size
inside it is preferred), and the metadata says it was derived, with its bounds.

Units as iperf3 prints them: transfers in binary multiples (KBytes = 1024 bytes), rates in
decimal ones (Mbits/sec = 10^6 bits per second).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from ccbench.formats import FormatError
from ccbench.model import Measurement

_BYTE_SCALE = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_BIT_SCALE = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
#: datagram sizes people pass to -l (and iperf3's own defaults), preferred when a text log's bounds hold one
COMMON_DATAGRAM_SIZES = (
    *(2**k for k in range(4, 17)),
    1400,
    1448,
    1450,
    1460,
    1470,
    1472,
    8972,
    9000,
    63000,
    65000,
    65507,
)

_LINE = re.compile(
    r"^\[\s*(?P<id>\d+|SUM)\](?:\[(?P<tag>[TR]X-[CS])\])?\s+(?P<start>\d+(?:\.\d+)?)-\s*(?P<end>\d+(?:\.\d+)?)\s+sec"
    r"\s+(?P<transfer>\d+(?:\.\d+)?)\s+(?P<tunit>[KMGT]?)Bytes"
    r"\s+(?P<rate>\d+(?:\.\d+)?)\s+(?P<runit>[KMGT]?)bits/sec(?P<rest>.*)$",
    re.MULTILINE,
)
_UDP_RECEIVED = re.compile(
    r"^\s+(?P<jitter>\d+(?:\.\d+)?)\s+ms\s+(?P<lost>-?\d+|Unknown)/\s*(?P<total>\d+)(?:\s+\((?P<percent>[^)%]*)%\))?"
)
_TCP_SENT = re.compile(r"^\s+(?P<retr>\d+)(?:\s+(?P<cwnd>\d+(?:\.\d+)?)\s+(?P<cunit>[KMGT]?)Bytes)?")
_DATAGRAMS = re.compile(r"^\s+(?P<datagrams>\d+)\s*(?:\(omitted\)\s*)?$")
#: what iperf3 appends to an interval of the -O warm-up (iperf_locale.c's report_omitted)
OMITTED = "(omitted)"
_ROLE = re.compile(r"\b(sender|receiver)\s*$")
#: the lines that begin a test in a log, and whose side of it follows them (a client run with
#: --get-server-output prints the server's log after "Server output:")
_TEST_STARTS = {"Connecting to host": "client", "Accepted connection from": "server", "Server output:": "server"}


@dataclass
class Line:
    """One interval or summary line of one stream (``stream`` is "SUM" for the sum of the streams)."""

    stream: str
    start: float
    end: float
    bytes: float
    bits_per_second: float
    #: "sender" or "receiver": the side whose numbers the line holds
    side: str
    retransmits: int | None = None
    cwnd_bytes: float | None = None
    jitter_ms: float | None = None
    lost: int | None = None
    #: datagrams sent (sender) or expected (receiver: received + lost)
    datagrams: int | None = None
    lost_percent: float | None = None
    #: half the last printed digit of the transfer, in bytes (0 for JSON): the rounding a text log holds
    bytes_error: float = 0.0


@dataclass
class Iperf3Test:
    """One test of one iperf3 process, as one side saw it."""

    protocol: str  # "tcp" or "udp"
    #: "client" or "server": who printed it
    role: str
    reverse: bool = False
    intervals: list[Line] = field(default_factory=list)
    summary: list[Line] = field(default_factory=list)
    datagram_size: int | None = None
    #: (low, high) bounds on a datagram size derived from a text log; None when the source names it
    datagram_size_bounds: tuple[float, float] | None = None
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def streams(self) -> int:
        ids = {line.stream for line in self.intervals + self.summary if line.stream != "SUM"}
        return max(len(ids), 1)

    def case(self) -> dict[str, Any]:
        case: dict[str, Any] = {"protocol": self.protocol, "streams": self.streams}
        if self.protocol == "udp" and self.datagram_size:
            case["datagram_size"] = self.datagram_size
        if self.reverse:
            case["reverse"] = True
        return case

    def result(self, side: str) -> Line | None:
        """The summary line of ``side``: the SUM line, or the one stream's line."""
        lines = [line for line in self.summary if line.side == side]
        sums = [line for line in lines if line.stream == "SUM"]
        if sums:
            return sums[-1]
        return lines[-1] if len(lines) == 1 else None


# ------------------------------------------------------------------------------------------- text


def _half_digit(number: str) -> float:
    decimals = len(number.partition(".")[2])
    return 0.5 * 10.0**-decimals


def _parse_line(match: re.Match, protocol: str | None, summary: bool) -> tuple[Line, str]:
    """A Line from an interval or summary line, and the protocol its columns show."""
    rest = match["rest"]
    scale = _BYTE_SCALE[match["tunit"]]
    stream = match["id"] + (f"[{match['tag']}]" if match["tag"] else "")
    line = Line(
        stream=stream,
        start=float(match["start"]),
        end=float(match["end"]),
        bytes=float(match["transfer"]) * scale,
        bits_per_second=float(match["rate"]) * _BIT_SCALE[match["runit"]],
        side="receiver",
        bytes_error=_half_digit(match["transfer"]) * scale,
    )
    role = _ROLE.search(rest)
    if received := _UDP_RECEIVED.match(rest):
        protocol = "udp"
        line.jitter_ms = float(received["jitter"])
        line.datagrams = int(received["total"])
        if received["lost"] != "Unknown":  # iperf3 prints "Unknown/N" when -O's lost count is unknown
            line.lost = int(received["lost"])
            line.lost_percent = _percent(received["percent"] or "", line.lost, line.datagrams)
    elif (datagrams := _DATAGRAMS.match(rest)) and protocol == "udp":
        line.datagrams, line.side = int(datagrams["datagrams"]), "sender"
    elif (sent := _TCP_SENT.match(rest)) and protocol != "udp":
        protocol = "tcp"
        line.retransmits, line.side = int(sent["retr"]), "sender"
        if sent["cwnd"]:
            line.cwnd_bytes = float(sent["cwnd"]) * _BYTE_SCALE[sent["cunit"]]
    if role:
        line.side = role.group(1)
    elif summary and protocol == "udp" and line.jitter_ms is not None and line.datagrams is not None:
        # iperf3 before 3.1.5 printed one UDP summary line holding the receiver's report
        line.side = "receiver"
    return line, protocol or "tcp"


def _percent(text: str, lost: int, total: int) -> float:
    try:
        return float(text)
    except ValueError:
        return 100.0 * lost / total if total else 0.0


def parse_text(text: str) -> list[Iperf3Test]:
    """The tests in an iperf3 text log (a client's or a server's; a server that served several
    tests logs each). Raises FormatError when there is no interval or summary line."""
    tests: list[Iperf3Test] = []
    current: Iperf3Test | None = None
    protocol: str | None = None
    in_summary = after_separator = False
    for raw in text.splitlines():
        line = raw.strip()
        starts_test = line.startswith(tuple(_TEST_STARTS))
        if starts_test or (current is None and _LINE.match(line)):
            role = _TEST_STARTS.get(next((s for s in _TEST_STARTS if line.startswith(s)), ""), "unknown")
            current = Iperf3Test(protocol="tcp", role=role)
            tests.append(current)
            protocol, in_summary, after_separator = None, False, False
            if starts_test:
                continue
        if current is None:
            continue
        if "the client has terminated" in line:
            current.facts["client_terminated"] = True
        elif line.startswith("Reverse mode"):
            current.reverse = True
        elif line.startswith("- - - -"):
            after_separator = True
        elif line.startswith("[ ID]"):
            in_summary = after_separator
            if "Datagrams" in line or "Jitter" in line:
                protocol = "udp"
        elif match := _LINE.match(line):
            if OMITTED in match["rest"]:
                if match["id"] != "SUM":
                    current.facts["omitted_intervals"] = current.facts.get("omitted_intervals", 0) + 1
                continue
            parsed, protocol = _parse_line(match, protocol, in_summary or bool(_ROLE.search(match["rest"])))
            (current.summary if in_summary or _ROLE.search(match["rest"]) else current.intervals).append(parsed)
            current.protocol = protocol
    tests = [test for test in tests if test.intervals or test.summary]
    if not tests:
        raise FormatError("no iperf3 interval or summary line in it (lines like '[  5]   0.00-1.00   sec ...')")
    for test in tests:
        if cut := _cut_short(test):
            # the process stopped before iperf3 printed the whole end summary (killed, the log cut short)
            test.facts["cut_short"] = cut
        _drop_placeholders(test)
        if test.protocol == "udp":
            _derive_datagram_size(test)
    return tests


def _cut_short(test: Iperf3Test) -> str | None:
    """What a text log's end summary lacks when the log was cut short, or None for a whole one
    (placeholders count as lines here: a side the process did not see is still printed)."""
    if not test.summary:
        return "no sender or receiver line" if test.intervals else None
    sides = {line.side for line in test.summary if line.stream != "SUM"}
    sum_sides = {line.side for line in test.summary if line.stream == "SUM"}
    ids = {line.stream for line in test.intervals + test.summary if line.stream != "SUM"}
    several = len(ids) > 1 or any(line.stream == "SUM" for line in test.intervals)
    if several and (missing := [side for side in ("sender", "receiver") if side in sides - sum_sides]):
        lines = " and ".join(missing) + (" lines are" if len(missing) > 1 else " line is")
        return f"{len(ids)} streams: the [SUM] {lines} missing"
    if test.role == "client" and "sender" in sides | sum_sides and "receiver" not in sides | sum_sides:
        # a client prints the receiver's summary after the sender's (a placeholder when it has none)
        return "the receiver's summary line is missing"
    return None


def _placeholder(line: Line) -> bool:
    """A summary line that stands for a side the printing process did not see: 0 bytes (and, for
    UDP, no datagram counted)."""
    return line.bytes == 0 and not line.datagrams and not line.lost


def _drop_placeholders(test: Iperf3Test) -> None:
    """Drop the summary's placeholders and decide a server log's direction (see the module's docstring)."""
    placeholders = [line for line in test.summary if _placeholder(line)]
    test.summary = [line for line in test.summary if not _placeholder(line)]
    if test.role != "server":
        return
    sent = any(line.side == "sender" for line in test.summary)
    received = any(line.side == "receiver" for line in test.summary)
    unseen_receiver = any(line.side == "receiver" for line in placeholders)
    if any(line.side == "sender" for line in test.intervals):
        test.reverse = True  # a server log does not say so; the server sent the streams
    elif test.protocol == "tcp" and sent and unseen_receiver and not received:
        # an old server's reverse test: intervals without Retr/Cwnd columns, the receiver's side unseen
        test.reverse = True
        for line in test.intervals:
            line.side = "sender"


def _derive_datagram_size(test: Iperf3Test) -> None:
    """The datagram size a UDP text log implies: every line with a transfer and a datagram count
    bounds it to [bytes - error, bytes + error] / datagrams; the bounds are intersected."""
    low, high = 0.0, math.inf
    for line in test.intervals + test.summary:
        if not line.datagrams:
            continue
        count = line.datagrams - (line.lost or 0) if line.side == "receiver" else line.datagrams
        if count <= 0 or line.bytes <= 0:
            continue
        line_low = (line.bytes - line.bytes_error) / count
        line_high = (line.bytes + line.bytes_error) / count
        if line_low > high or line_high < low:
            continue  # a line that disagrees with the others (a partial last datagram) is passed over
        low, high = max(low, line_low), min(high, line_high)
    if high == math.inf:
        return
    test.datagram_size_bounds = (round(low, 1), round(high, 1))
    common = [size for size in COMMON_DATAGRAM_SIZES if low <= size <= high]
    middle = (low + high) / 2
    test.datagram_size = min(common, key=lambda s: abs(s - middle)) if common else round(middle)


# ------------------------------------------------------------------------------------------- JSON


def _json_line(entry: dict[str, Any], stream: str, protocol: str, sender: bool | None) -> Line:
    side_is_sender = entry.get("sender", sender)
    line = Line(
        stream=stream,
        start=float(entry.get("start", 0.0)),
        end=float(entry.get("end", 0.0)),
        bytes=float(entry.get("bytes", 0)),
        bits_per_second=float(entry.get("bits_per_second", 0.0)),
        side="sender" if side_is_sender else "receiver",
    )
    if protocol == "tcp" and line.side == "sender" and "retransmits" in entry:
        line.retransmits = int(entry["retransmits"])
        if "snd_cwnd" in entry:
            line.cwnd_bytes = float(entry["snd_cwnd"])
    if protocol == "udp":
        line.datagrams = int(entry["packets"]) if "packets" in entry else None
        if line.side == "receiver":
            line.jitter_ms = float(entry.get("jitter_ms", 0.0))
            line.lost = int(entry.get("lost_packets", 0))
            line.lost_percent = float(entry.get("lost_percent", 0.0))
    return line


def parse_json(document: Any) -> list[Iperf3Test]:
    """The test of an iperf3 ``-J`` document (client or server side), and the server's own test
    when the client embedded it (``--get-server-output``). Raises FormatError for a document
    without iperf3's start/intervals/end, or one that holds only iperf3's error."""
    if not isinstance(document, dict) or not isinstance(document.get("intervals"), list):
        if isinstance(document, dict) and document.get("error"):
            raise FormatError(f"iperf3 reported an error and no measurement: {document['error']}")
        raise FormatError("not iperf3's -J output (no 'intervals' list)")
    start = document.get("start") or {}
    test_start = start.get("test_start") or {}
    protocol = str(test_start.get("protocol", "TCP")).lower()
    role = "client" if start.get("connecting_to") else "server"
    test = Iperf3Test(protocol=protocol, role=role, reverse=bool(test_start.get("reverse")))
    if protocol == "udp" and test_start.get("blksize"):
        test.datagram_size = int(test_start["blksize"])
    test.facts = {
        key: value
        for key, value in (
            ("version", start.get("version")),
            ("system_info", start.get("system_info")),
            ("timestamp", (start.get("timestamp") or {}).get("time")),
            ("target_bitrate", test_start.get("target_bitrate")),
            ("duration", test_start.get("duration")),
        )
        if value not in (None, "")
    }
    for interval in document["intervals"]:
        for entry in interval.get("streams", []):
            if not entry.get("omitted"):
                test.intervals.append(_json_line(entry, str(entry.get("socket", "?")), protocol, None))
    end = document.get("end") or {}
    for key, sender in (("sum_sent", True), ("sum_received", False)):
        entry = end.get(key)
        # each side fills the sum it does not know (a server's sum_sent) with zeros: not a result
        unknown = isinstance(entry, dict) and not entry.get("bytes") and not entry.get("lost_packets")
        if isinstance(entry, dict) and not unknown:
            # TCP's sum_received says "sender": true (whose socket the sums came from): the key decides
            test.summary.append(_json_line({**end[key], "sender": sender}, "SUM", protocol, sender))
    if not test.summary and isinstance(end.get("sum"), dict):
        test.summary.append(_json_line(end["sum"], "SUM", protocol, None))
    tests = [test]
    server, server_text = document.get("server_output_json"), document.get("server_output_text")
    served = None
    if isinstance(server, dict) and isinstance(server.get("intervals"), list):
        served = parse_json(server)[0]
    elif isinstance(server_text, str) and _LINE.search(server_text.replace("\r", "")):
        served = parse_text(server_text)[-1]
    if served is not None:
        served.role, served.reverse, served.protocol = "server", test.reverse, protocol
        served.datagram_size = test.datagram_size
        served.datagram_size_bounds = None
        tests.append(served)
    return tests


# ----------------------------------------------------------------------------------- measurements


def _interval_metadata(line: Line) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "stream": line.stream,
        "interval_start_s": line.start,
        "interval_end_s": line.end,
        "side": line.side,
        "bytes": line.bytes,
    }
    for key in ("retransmits", "cwnd_bytes", "jitter_ms", "lost", "datagrams"):
        value = getattr(line, key)
        if value is not None:
            metadata[key] = value
    return metadata


def measurements(test: Iperf3Test, *, case: dict[str, Any] | None = None) -> list[Measurement]:
    """The samples of one test (see the module's docstring); ``case`` overrides the test's own."""
    case = dict(test.case() if case is None else case)
    facts: dict[str, Any] = {"role": test.role}
    if test.datagram_size_bounds is not None:
        facts["datagram_size_derived"] = True
        facts["datagram_size_bounds"] = list(test.datagram_size_bounds)
    out: list[Measurement] = []
    received, sent = test.result("receiver"), test.result("sender")
    if received is not None:
        summary = {**facts, **_interval_metadata(received)}
        rate = received.bits_per_second
        if received.bytes == 0 and received.datagrams:
            # the byte figure was the sender's, never received (see the module's docstring)
            rate = _interval_rate(test, "receiver")
            summary["result_side"] = "intervals"
        if rate is not None:
            out.append(_result("throughput", "Mbit/s", rate / 1e6, "higher", case, summary))
        if test.protocol == "udp" and received.datagrams is not None:
            if received.lost_percent is not None:
                out.append(_result("loss", "%", received.lost_percent, "lower", case, summary))
            out.append(_result("jitter", "ms", received.jitter_ms or 0.0, "lower", case, summary))
    elif sent is not None and test.protocol == "tcp":
        # the receiver's side was not seen (a placeholder): TCP delivered what the sender's line says
        summary = {**facts, **_interval_metadata(sent), "result_side": "sender"}
        out.append(_result("throughput", "Mbit/s", sent.bits_per_second / 1e6, "higher", case, summary))
    if sent is not None:
        summary = {**facts, **_interval_metadata(sent)}
        out.append(_result("sender_throughput", "Mbit/s", sent.bits_per_second / 1e6, "higher", case, summary))
        if test.protocol == "tcp" and sent.retransmits is not None:
            out.append(_result("retransmits", "count", float(sent.retransmits), "lower", case, summary))
    # the results first (a table shows a case's first metric), then every interval
    for line in test.intervals:
        if line.stream == "SUM":
            continue
        metric = "interval_throughput" if line.side == "receiver" else "sender_interval_throughput"
        out.append(
            Measurement(
                metric=metric,
                unit="Mbit/s",
                value=line.bits_per_second / 1e6,
                better="higher",
                case=case,
                metadata=_interval_metadata(line),
            )
        )
    return out


def _interval_rate(test: Iperf3Test, side: str) -> float | None:
    """bits/s over the intervals of ``side`` (the SUM lines where there are several streams)."""
    lines = [line for line in test.intervals if line.side == side]
    sums = [line for line in lines if line.stream == "SUM"]
    lines = sums if sums else lines
    if not lines:
        return None
    span = max(line.end for line in lines) - min(line.start for line in lines)
    return sum(line.bytes for line in lines) * 8 / span if span > 0 else None


def _result(metric: str, unit: str, value: float, better: str, case: dict, metadata: dict) -> Measurement:
    return Measurement(metric=metric, unit=unit, value=value, better=better, case=case, metadata=metadata)


def summary_lines(tests: list[Iperf3Test]) -> list[Line]:
    """Every summary line of these tests (for callers that check a log holds a result)."""
    return [line for test in tests for line in test.summary]
