"""oha, the open-loop load generator: where it is, its command line and its JSON summary.

``oha -q RATE --latency-correction`` measures each request's latency from its scheduled start, so a
server that falls behind cannot hide its queue (no coordinated omission). The request mix becomes a
``--rand-regex-url`` pattern whose alternatives are the mix's operations.
"""

from __future__ import annotations

import json
import math
import shutil
from functools import reduce
from pathlib import Path
from typing import Any

from ccbench.workloads.base import WorkloadFailed
from ccbench.workloads.microservices.params import OPERATIONS


def oha_binary() -> str | None:
    found = shutil.which("oha")
    if found:
        return found
    cargo = Path.home() / ".cargo" / "bin" / "oha"
    return str(cargo) if cargo.exists() else None


def user_pattern(users: int) -> str:
    return f"[0-9]{{{len(str(users)) - 1}}}"


def mix_url_regex(base_url: str, mix: dict[str, int], users: int) -> str:
    """A rand_regex pattern whose alternatives are the mix's operations, repeated by weight.

    Each repetition carries its own ``b=`` tag so that the alternatives stay distinct (rand_regex picks
    one of them uniformly)."""
    weights = {op: w for op, w in mix.items() if w > 0}
    divisor = reduce(math.gcd, weights.values())
    branches = []
    for op, weight in sorted(weights.items()):
        path = OPERATIONS[op].replace("USER", user_pattern(users))
        for i in range(weight // divisor):
            branches.append(f"{path}&b={op[0]}{i}")
    # oha's rand_regex treats '.' literally ("dot is disabled"); the base URL has no other metacharacter
    return base_url + "(" + "|".join(branches) + ")"


def oha_argv(
    url_regex: str, *, rate: float | None, duration: float, connections: int, timeout: float, cacert: str | None
) -> list[str]:
    oha = oha_binary() or "oha"
    # -w: requests still in flight at the deadline are waited for, not counted as aborted
    argv = [
        oha,
        "--no-tui",
        "--output-format",
        "json",
        "-z",
        f"{duration:g}s",
        "-w",
        "-c",
        str(connections),
        "-t",
        f"{timeout:g}s",
        "--rand-regex-url",
        url_regex,
    ]
    if rate is not None:
        argv[1:1] = ["-q", f"{rate:g}", "--latency-correction"]
    if cacert:
        argv[1:1] = ["--cacert", cacert]
    return argv


def parse_oha(text: str) -> dict[str, Any]:
    """oha's JSON summary -> requests, errors, throughput and latency percentiles (ms)."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise WorkloadFailed(f"oha printed no JSON summary: {exc}") from None
    statuses = {int(k): int(v) for k, v in (doc.get("statusCodeDistribution") or {}).items()}
    transport_errors = {str(k): int(v) for k, v in (doc.get("errorDistribution") or {}).items()}
    ok = sum(v for k, v in statuses.items() if 200 <= k < 400)
    bad_status = sum(v for k, v in statuses.items() if not 200 <= k < 400)
    summary = doc.get("summary", {})
    percentiles = doc.get("latencyPercentiles", {})

    def ms(value):
        return None if value is None else float(value) * 1000.0

    return {
        "ok": ok,
        "status_errors": bad_status,
        "transport_errors": sum(transport_errors.values()),
        "error_kinds": {**{f"HTTP {k}": v for k, v in statuses.items() if not 200 <= k < 400}, **transport_errors},
        "duration_s": float(summary.get("total") or 0.0),
        # oha's requestsPerSec counts failed requests too: achieved throughput is the successful ones
        "throughput": ok / float(summary["total"]) if summary.get("total") else 0.0,
        "attempted_per_s": float(summary.get("requestsPerSec") or 0.0),
        "p50": ms(percentiles.get("p50")),
        "p90": ms(percentiles.get("p90")),
        "p99": ms(percentiles.get("p99")),
        "p99.9": ms(percentiles.get("p99.9")),
        "max": ms(summary.get("slowest")),
        "mean": ms(summary.get("average")),
    }
