"""sockperf's summary of a latency test (``sockperf ping-pong`` or ``under-load``, 3.x).

sockperf reports latency as half the measured round trip (its one-way estimate), in microseconds:
``====> avg-latency=11.813 (std-dev=53.724)``, then ``---> percentile 50.000 =    9.494`` lines
and ``<MAX>``/``<MIN> observation`` lines. The samples: ``latency_avg``, ``latency_p25`` ...
``latency_p99999``, ``latency_min``, ``latency_max`` (us, half round trips; the metadata says so
and how many observations stand behind them, with the messages sent, received and dropped).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ccbench.formats import FormatError
from ccbench.model import Measurement

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_AVERAGE = re.compile(r"avg-latency=(?P<avg>\d+(?:\.\d+)?)\s+\(std-dev=(?P<std>\d+(?:\.\d+)?)")
_PERCENTILE = re.compile(r"--->\s+percentile\s+(?P<p>\d+(?:\.\d+)?)\s+=\s+(?P<value>\d+(?:\.\d+)?)")
_EXTREME = re.compile(r"--->\s+<(?P<which>MAX|MIN)>\s+observation\s+=\s+(?P<value>\d+(?:\.\d+)?)")
_OBSERVATIONS = re.compile(r"Total\s+(?P<n>\d+)\s+observations")
_VALID = re.compile(
    r"\[Valid Duration\]\s+RunTime=(?P<runtime>\d+(?:\.\d+)?)\s+sec;\s+SentMessages=(?P<sent>\d+);\s+ReceivedMessages=(?P<received>\d+)"
)
_DROPPED = re.compile(r"#\s+dropped messages\s+=\s+(?P<dropped>\d+)")
_MESSAGE_SIZE = re.compile(r"--msg-size=(?P<size>\d+)")


@dataclass
class SockperfLatency:
    average_us: float
    std_dev_us: float | None = None
    percentiles_us: dict[str, float] = field(default_factory=dict)
    min_us: float | None = None
    max_us: float | None = None
    facts: dict[str, Any] = field(default_factory=dict)


def _percentile_name(p: str) -> str:
    """'50.000' -> 'p50', '99.900' -> 'p999', '99.999' -> 'p99999' (the digits without the point)."""
    return "p" + p.rstrip("0").rstrip(".").replace(".", "")


def parse(text: str) -> SockperfLatency:
    """The latency summary of a sockperf client's output; FormatError when it has none (a client
    that reached no server prints no avg-latency line)."""
    text = _ANSI.sub("", text)
    average = _AVERAGE.search(text)
    if not average:
        raise FormatError("no 'avg-latency=' line in it: not the output of a finished sockperf ping-pong test")
    result = SockperfLatency(average_us=float(average["avg"]), std_dev_us=float(average["std"]))
    for match in _PERCENTILE.finditer(text):
        result.percentiles_us[_percentile_name(match["p"])] = float(match["value"])
    for match in _EXTREME.finditer(text):
        setattr(result, "max_us" if match["which"] == "MAX" else "min_us", float(match["value"]))
    if observations := _OBSERVATIONS.search(text):
        result.facts["observations"] = int(observations["n"])
    if valid := _VALID.search(text):
        result.facts.update(
            valid_runtime_s=float(valid["runtime"]), sent=int(valid["sent"]), received=int(valid["received"])
        )
    if dropped := _DROPPED.search(text):
        result.facts["dropped"] = int(dropped["dropped"])
    if size := _MESSAGE_SIZE.search(text):
        result.facts["message_size"] = int(size["size"])
    return result


def measurements(result: SockperfLatency, *, case: dict[str, Any] | None = None) -> list[Measurement]:
    case = dict(case or {})
    metadata = {"half_round_trip": True, **result.facts}
    values = {"latency_avg": result.average_us}
    values.update({f"latency_{name}": value for name, value in result.percentiles_us.items()})
    if result.min_us is not None:
        values["latency_min"] = result.min_us
    if result.max_us is not None:
        values["latency_max"] = result.max_us
    return [
        Measurement(metric=metric, unit="us", value=value, case=case, metadata=metadata)
        for metric, value in values.items()
    ]
