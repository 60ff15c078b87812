"""Tier accounting: each tier's CPU (its process tree) and its mean share of a request's latency (nginx's
access log with the application's Server-Timing), and the samples one load run becomes."""

from __future__ import annotations

import psutil

from ccbench.model import Measurement
from ccbench.workloads.microservices.state import ChainState, server_process


def tier_cpu_seconds(state: ChainState) -> dict[str, float]:
    """CPU seconds (user + system) consumed so far by each tier's process tree."""
    result: dict[str, float] = {}
    for server in state.servers:
        proc = server_process(server)
        if proc is None:
            continue
        total = 0.0
        try:
            members = [proc, *proc.children(recursive=True)]
        except psutil.Error:
            members = [proc]
        for member in members:
            try:
                times = member.cpu_times()
                total += times.user + times.system
            except psutil.Error:
                pass
        result[server.name] = total
    return result


def tier_latency_ms(rows, start: float, stop: float, client_mean_ms: float | None) -> dict[str, float]:
    """Mean time per request spent in each tier during [start, stop] (ms).

    nginx = request time - upstream time; network between nginx and app (and the app's HTTP stack) =
    upstream time - the app's own total; the app = its total less what it waited on the stores;
    postgres/redis/memcached = the app's waits on each (Server-Timing); client = the load generator's
    mean latency less nginx's request time (loopback or the edge link, and the client's queue)."""
    selected = [r for r in rows if start <= r[0] <= stop + 1.0 and r[3] is not None]
    if not selected:
        return {}
    n = len(selected)
    mean = lambda values: sum(values) / n  # noqa: E731
    request = mean([r[2] * 1000 for r in selected])
    upstream = mean([r[3] * 1000 for r in selected])
    app_total = mean([r[4].get("app", 0.0) for r in selected])
    stores = {
        name: mean([r[4].get(key, 0.0) for r in selected])
        for name, key in (("postgres", "pg"), ("redis", "redis"), ("memcached", "memcached"))
    }
    result = {
        "nginx": max(request - upstream, 0.0),
        "proxy_hop": max(upstream - app_total, 0.0),
        "app": max(app_total - sum(stores.values()), 0.0),
        **stores,
    }
    if client_mean_ms is not None:
        result["client"] = max(client_mean_ms - request, 0.0)
    return result


def measurements(case, summary, start, stop, before, after, rows, cores, common) -> list[Measurement]:
    """One load run's samples: throughput, errors, latency percentiles, each tier's CPU and share of
    the latency, the load generator's CPU and whether the client rather than the service was the limit."""
    wall = max(stop - start, 1e-9)
    errors = summary["status_errors"] + summary["transport_errors"]
    meta = {**common, "requests_ok": summary["ok"], "error_kinds": summary["error_kinds"]}
    out = [
        Measurement(
            metric="throughput",
            unit="req/s",
            value=summary["throughput"],
            better="higher",
            case=case,
            metadata=meta,
        ),
        Measurement(metric="errors", unit="requests", value=errors, case=case, metadata=meta),
    ]
    for q in ("p50", "p90", "p99", "p99.9", "max"):
        if summary.get(q) is not None:
            out.append(Measurement(metric=f"latency_{q}", unit="ms", value=summary[q], case=case, metadata=meta))
    loadgen_util = summary["loadgen_cpu_s"] / max(summary["wall_s"], 1e-9)
    tier_util = {t: (after.get(t, 0.0) - before.get(t, 0.0)) / wall for t in after}
    for tier, util in sorted(tier_util.items()):
        out.append(
            Measurement(
                metric="tier_cpu",
                unit="cores",
                value=util,
                better=None,
                case={**case, "tier": tier},
                metadata=common,
            )
        )
    out.append(
        Measurement(metric="loadgen_cpu", unit="cores", value=loadgen_util, better=None, case=case, metadata=common)
    )
    shortfall = case.get("rate") is not None and summary["throughput"] < 0.95 * case["rate"]
    busiest = max(tier_util.values(), default=0.0)
    saturated = loadgen_util >= 0.9 * cores or (shortfall and loadgen_util > busiest)
    out.append(
        Measurement(
            metric="client_saturated",
            unit="bool",
            value=float(saturated),
            better=None,
            case=case,
            metadata={
                **common,
                "loadgen_cores": round(loadgen_util, 3),
                "cores": cores,
                "busiest_tier_cores": round(busiest, 3),
                "rate_shortfall": bool(shortfall),
            },
        )
    )
    shares = tier_latency_ms(rows, start, stop, summary.get("mean"))
    total = sum(shares.values())
    for tier, value in sorted(shares.items()):
        out.append(
            Measurement(
                metric="tier_latency",
                unit="ms",
                value=value,
                case={**case, "tier": tier},
                metadata={
                    **common,
                    "share": value / total if total else None,
                    "basis": "mean per request: nginx access log and Server-Timing",
                },
            )
        )
    return out
