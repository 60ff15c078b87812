"""Shaped links of the emulated hosts: ``LinkShape`` (rate, delay, jitter, loss in tc's units), the
tc commands that apply one to a device (netem where the kernel has it, tbf for a rate alone), and
``available(shape)``: whether emulated hosts, and that shape, can be made here. ``TopologyError``
lives here, the lowest room that raises it; ccbench.topology re-exports all three."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ccbench.basics.errors import CCBenchError, EnvironmentProblem

_RATE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)$", re.IGNORECASE)
_TIME = re.compile(r"^\d+(?:\.\d+)?(us|usec|ms|msec|s|sec)$", re.IGNORECASE)
_PERCENT = re.compile(r"^\d+(?:\.\d+)?%$")


class TopologyError(EnvironmentProblem):
    """A namespace, link or shaping step failed, or the machine cannot host emulated hosts."""


@dataclass(frozen=True)
class LinkShape:
    """How a host's link to its segment behaves. Strings in tc's units: rate ``"1gbit"``,
    ``"100mbit"``, ``"50mbps"``; delay/jitter ``"0.2ms"``, ``"10ms"``, ``"200us"``; loss ``"0.1%"``.
    None leaves that property as the veth has it (no limit, no added delay)."""

    rate: str | None = None
    delay: str | None = None
    jitter: str | None = None
    loss: str | None = None

    def __post_init__(self):
        for field_name, pattern in (("rate", _RATE), ("delay", _TIME), ("jitter", _TIME), ("loss", _PERCENT)):
            value = getattr(self, field_name)
            if value is not None and not pattern.match(str(value)):
                raise CCBenchError(
                    f"link shape {field_name}={value!r} is not in tc's units "
                    f"(rate like '1gbit' or '50mbps', times like '0.2ms', loss like '0.1%')"
                )
        if self.jitter and not self.delay:
            raise CCBenchError("link shape: jitter needs a delay")

    @property
    def needs_netem(self) -> bool:
        return bool(self.delay or self.jitter or self.loss)

    @property
    def empty(self) -> bool:
        return not (self.rate or self.needs_netem)

    def rate_bytes_per_s(self) -> float | None:
        if not self.rate:
            return None
        number, unit = _RATE.match(self.rate).groups()
        unit = unit.lower()
        scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[unit[0] if unit[0] in "kmgt" else ""]
        value = float(number) * scale
        return value / 8 if unit.endswith("bit") else value


_qdisc_support: dict[str, str | None] = {}


def _qdisc_unavailable(kind: str) -> str | None:
    """Whether the kernel has qdisc ``kind``: tried on loopback in a throwaway network namespace
    (`unshare -n`: it vanishes with the process, nothing to record or clean)."""
    if kind in _qdisc_support:
        return _qdisc_support[kind]
    args = {"netem": "netem delay 1ms", "tbf": "tbf rate 1mbit burst 32kb latency 50ms"}[kind]
    reason = None
    if not shutil.which("tc"):
        reason = "tc is not installed (apt-get install iproute2)"
    elif not shutil.which("unshare"):
        reason = "unshare is not installed (apt-get install util-linux)"
    else:
        done = subprocess.run(
            ["unshare", "-n", "sh", "-c", f"ip link set lo up && tc qdisc add dev lo root {args}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if done.returncode != 0:
            reason = (
                f"the kernel lacks the {kind} qdisc (sch_{kind}: {done.stderr.strip()[-120:]}); "
                f"{'delay, jitter and loss' if kind == 'netem' else 'rate limits'} cannot be emulated here"
            )
    _qdisc_support[kind] = reason
    return reason


def available(shape: LinkShape | None = None) -> str | None:
    """None when emulated hosts (and ``shape``, if given) can be made here, else the reason."""
    if os.geteuid() != 0:
        return "emulated hosts need root (network namespaces, veths and bridges): run as root"
    for tool, package in (("ip", "iproute2"),):
        if not shutil.which(tool):
            return f"{tool} is not installed (apt-get install {package})"
    if not Path("/proc/self/ns/net").exists():
        return "the kernel has no network namespaces"
    if shape is not None and not shape.empty:
        if shape.needs_netem:
            return _qdisc_unavailable("netem")
        if _qdisc_unavailable("netem") and _qdisc_unavailable("tbf"):
            return _qdisc_unavailable("tbf")
    return None


def _shape_commands(device: str, shape: LinkShape, *, with_delay: bool) -> list[list[str]]:
    """tc commands shaping one device's egress: netem (delay and rate together) where it exists,
    else tbf for a rate alone."""
    wants_netem = with_delay and shape.needs_netem
    if not wants_netem and not shape.rate:
        return []
    if _qdisc_unavailable("netem") is None:
        args = ["tc", "qdisc", "replace", "dev", device, "root", "netem"]
        if wants_netem and shape.delay:
            args += ["delay", shape.delay] + ([shape.jitter] if shape.jitter else [])
        if wants_netem and shape.loss:
            args += ["loss", shape.loss]
        if shape.rate:
            args += ["rate", shape.rate]
        # netem's default queue (1000 packets) drops under a low rate; give it room for ~1 s
        args += ["limit", str(_netem_limit(shape))]
        return [args]
    if wants_netem:
        raise TopologyError(_qdisc_unavailable("netem"))
    reason = _qdisc_unavailable("tbf")
    if reason:
        raise TopologyError(reason)
    per_second = shape.rate_bytes_per_s()
    burst = max(int(per_second / 250), 64 * 1024)  # ≥ rate/HZ for any HZ up to 250
    return [
        [
            "tc",
            "qdisc",
            "replace",
            "dev",
            device,
            "root",
            "tbf",
            "rate",
            shape.rate,
            "burst",
            str(burst),
            "latency",
            "100ms",
        ]
    ]


def _netem_limit(shape: LinkShape) -> int:
    per_second = shape.rate_bytes_per_s() or 1.25e9
    return int(min(max(per_second / 1500, 1000), 100000))
