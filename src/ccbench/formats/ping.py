"""ping's output, as each implementation prints it:

- iputils (Linux): ``64 bytes from HOST (ADDR): icmp_seq=1 ttl=64 time=0.148 ms``, with ``-D``'s
  ``[epoch]`` prefix or without, ``icmp_req=`` in old versions; statistics ``5 packets transmitted,
  5 received, 0% packet loss``;
- busybox (Alpine, embedded systems, minimal images): ``64 bytes from ADDR: seq=0 ttl=64 time=0.063
  ms``; statistics ``5 packets transmitted, 5 packets received, 0% packet loss``;
- BSD and macOS: ``64 bytes from ADDR: icmp_seq=0 ttl=64 time=0.045 ms``; statistics ``5 packets
  transmitted, 5 packets received, 0.0% packet loss`` (``+1 duplicates`` where there were some);
- Windows: ``Reply from ADDR: bytes=32 time=1ms TTL=57``, ``time<1ms``.

The sample unit, the same for the network workload's ping fallback and ``ccbench import ping``:
**each reply's time is one sample** (``rtt``, ms) with its sequence number, TTL and, with ``-D``,
its time stamp in the metadata; duplicate replies (``DUP!``) are not samples (their count is kept).
The statistics line gives ``loss`` (% of probes). The case: ``protocol: icmp`` and
``payload_size`` (bytes of data per probe) where the output names it. ``implementation`` names the
ping that wrote the output as its lines tell it (``seq=`` is busybox's, ``):`` after the header's
address BSD's and macOS's, ``Reply from`` Windows'), None where they do not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ccbench.formats import FormatError
from ccbench.model import Measurement

_HEADER = re.compile(
    r"^PING\s+(?P<target>\S+)\s+\((?P<address>[^)]+)\)[:\s]+(?P<payload>\d+)(?:\(\d+\))?\s+(?:data\s+)?bytes"
)
_WINDOWS_HEADER = re.compile(
    r"^Pinging\s+(?P<target>\S+)(?:\s+\[(?P<address>[^\]]+)\])?\s+with\s+(?P<payload>\d+)\s+bytes"
)
_REPLY = re.compile(
    r"^(?:\[(?P<stamp>\d+(?:\.\d+)?)\]\s+)?\d+\s+bytes\s+from\s+(?P<source>.+?):?\s+"
    r"(?:icmp_[sr]eq|seq)=(?P<seq>\d+)\s+ttl=(?P<ttl>\d+)\s+time[=<](?P<time>\d+(?:\.\d+)?)\s*(?P<unit>ms|us|µs|s)\b(?P<rest>.*)$"
)
_WINDOWS_REPLY = re.compile(
    r"^Reply\s+from\s+(?P<source>[^:]+):\s+bytes=(?P<bytes>\d+)\s+time(?P<op>[=<])(?P<time>\d+(?:\.\d+)?)ms\s+TTL=(?P<ttl>\d+)"
)
_STATISTICS = re.compile(
    r"(?P<sent>\d+)\s+packets\s+transmitted,\s+(?P<received>\d+)\s+(?:packets\s+)?received.*?(?P<loss>\d+(?:\.\d+)?)%\s+packet\s+loss"
)
_WINDOWS_STATISTICS = re.compile(
    r"Sent\s*=\s*(?P<sent>\d+),\s*Received\s*=\s*(?P<received>\d+),\s*Lost\s*=\s*\d+\s*\((?P<loss>\d+)%"
)
_SCALE_MS = {"ms": 1.0, "us": 1e-3, "µs": 1e-3, "s": 1e3}


@dataclass
class Reply:
    rtt_ms: float
    sequence: int | None
    ttl: int | None
    timestamp: float | None = None
    #: Windows prints "time<1ms" for anything under a millisecond: an upper bound, not a value
    below: bool = False


@dataclass
class PingRun:
    target: str | None = None
    address: str | None = None
    payload_size: int | None = None
    replies: list[Reply] = field(default_factory=list)
    duplicates: int = 0
    sent: int | None = None
    received: int | None = None
    loss_percent: float | None = None
    #: "iputils", "busybox", "BSD/macOS" or "Windows", as the lines tell it; None where they do not
    implementation: str | None = None

    def case(self) -> dict[str, Any]:
        case: dict[str, Any] = {"protocol": "icmp"}
        if self.payload_size is not None:
            case["payload_size"] = self.payload_size
        return case


def parse(text: str) -> PingRun:
    """One ping run's replies and statistics. Raises FormatError when it holds neither a reply nor
    a statistics line."""
    run = PingRun()
    for raw in text.splitlines():
        line = raw.strip()
        if header := (_HEADER.match(line) or _WINDOWS_HEADER.match(line)):
            run.target, run.address = header["target"], header["address"] or header["target"]
            run.payload_size = int(header["payload"])
            run.implementation = run.implementation or _implementation(line, header)
        elif reply := _REPLY.match(line):
            if re.search(r"\sseq=", line):
                run.implementation = "busybox"
            if "DUP!" in reply["rest"]:
                run.duplicates += 1
                continue
            run.replies.append(
                Reply(
                    rtt_ms=float(reply["time"]) * _SCALE_MS[reply["unit"]],
                    sequence=int(reply["seq"]),
                    ttl=int(reply["ttl"]),
                    timestamp=float(reply["stamp"]) if reply["stamp"] else None,
                )
            )
        elif reply := _WINDOWS_REPLY.match(line):
            run.implementation = "Windows"
            run.replies.append(
                Reply(rtt_ms=float(reply["time"]), sequence=None, ttl=int(reply["ttl"]), below=reply["op"] == "<")
            )
            run.payload_size = run.payload_size or int(reply["bytes"])
        elif statistics := (_STATISTICS.search(line) or _WINDOWS_STATISTICS.search(line)):
            run.sent, run.received = int(statistics["sent"]), int(statistics["received"])
            run.loss_percent = float(statistics["loss"])
    if not run.replies and run.sent is None:
        raise FormatError(
            "no ping reply or statistics line in it (lines like '64 bytes from ...: icmp_seq=1 ... time=0.1 ms')"
        )
    return run


def _implementation(line: str, header: re.Match) -> str:
    """The ping a header line is the output of (busybox's header is BSD's: its replies tell it apart)."""
    if line.startswith("Pinging"):
        return "Windows"
    return "BSD/macOS" if line[header.end("address") :].startswith("):") else "iputils"


def measurements(run: PingRun, *, case: dict[str, Any] | None = None) -> list[Measurement]:
    """Each reply's time a sample (``rtt``, ms), and the run's ``loss`` (%) when ping printed it."""
    case = dict(run.case() if case is None else case)
    out = []
    for reply in run.replies:
        metadata: dict[str, Any] = {}
        if reply.sequence is not None:
            metadata["icmp_seq"] = reply.sequence
        if reply.ttl is not None:
            metadata["ttl"] = reply.ttl
        if reply.timestamp is not None:
            metadata["timestamp"] = reply.timestamp
        if reply.below:
            metadata["upper_bound"] = True
        out.append(Measurement(metric="rtt", unit="ms", value=reply.rtt_ms, case=case, metadata=metadata))
    if run.loss_percent is not None:
        metadata = {"sent": run.sent, "received": run.received, "duplicates": run.duplicates}
        out.append(Measurement(metric="loss", unit="%", value=run.loss_percent, case=case, metadata=metadata))
    return out
