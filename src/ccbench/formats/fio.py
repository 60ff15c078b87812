"""fio's JSON output (``--output-format=json`` or ``json+``), as the samples ccbench's fio workload
records: per job and direction, ``throughput`` (MB/s), ``iops``, and completion latency
``clat_mean``, ``clat_p50``, ``clat_p99`` in microseconds.

fio 3.x keeps completion latency under ``clat_ns`` in nanoseconds; fio 2.x under ``clat`` in
microseconds: both are read, and the unit is always microseconds. The block size and pattern of a
job (its case: ``bs``, ``rw``) come from the job's options or the global ones; where neither states
them they are left out (unknown stays unknown): the caller may know them another way (ccbench's own
job names). ``fio --client`` output holds its jobs under ``client_stats``, each with the
``hostname`` and ``port`` of the server that ran it; ``jobs_by_host`` groups them (the ``All
clients`` sum is not one machine's measurement and is left out; a server is named by its hostname,
or ``hostname:port`` where two servers share a hostname). With one server fio writes ``global
options`` as one object; with several, as a list of objects, one per server, each naming its
``hostname`` and ``port`` (fio's client.c): ``global_options`` gives the ones of one server.
"""

from __future__ import annotations

from typing import Any

from ccbench.formats import FormatError
from ccbench.model import Measurement

#: the ``client_stats`` entry that sums every server's jobs (fio's name for it)
ALL_CLIENTS = "All clients"


def version(document: dict[str, Any]) -> str | None:
    value = document.get("fio version")
    return str(value) if value else None


def is_fio(document: Any) -> bool:
    return isinstance(document, dict) and ("fio version" in document or "client_stats" in document)


def job_case(job: dict[str, Any], global_options: dict[str, Any] | None = None) -> dict[str, str]:
    """``bs`` and ``rw`` as the job's options (or the global ones) state them; absent when neither does."""
    options = {**(global_options or {}), **(job.get("job options") or {})}
    case = {}
    bs = options.get("bs") or options.get("blocksize")
    rw = options.get("rw") or options.get("readwrite")
    if bs:
        case["bs"] = str(bs).lower()
    if rw:
        case["rw"] = str(rw)
    return case


def _latency_us(stats: dict[str, Any]) -> tuple[float | None, dict[str, Any]]:
    """(mean, percentiles) of completion latency in microseconds, from fio 3 (ns) or fio 2 (us)."""
    if isinstance(stats.get("clat_ns"), dict):
        clat, scale = stats["clat_ns"], 1e-3
    elif isinstance(stats.get("clat"), dict):
        clat, scale = stats["clat"], 1.0
    else:
        return None, {}
    mean = clat.get("mean")
    percentiles = {k: v * scale for k, v in (clat.get("percentile") or {}).items() if isinstance(v, int | float)}
    return (mean * scale if isinstance(mean, int | float) else None), percentiles


def job_measurements(job: dict[str, Any], global_options: dict[str, Any] | None = None) -> list[Measurement]:
    """The samples of one job (both directions that did I/O); FormatError for a job fio says failed."""
    name = job.get("jobname", "?")
    if job.get("error"):
        raise FormatError(f"fio job {name!r} failed with error {job['error']}")
    measurements = []
    case_base = job_case(job, global_options)
    for direction in ("read", "write"):
        stats = job.get(direction) or {}
        if not stats.get("io_bytes") and not stats.get("total_ios"):
            continue
        case = {**case_base, "direction": direction}
        bandwidth = stats["bw_bytes"] if "bw_bytes" in stats else stats.get("bw", 0) * 1024
        measurements += [
            Measurement(metric="throughput", unit="MB/s", value=bandwidth / 1e6, better="higher", case=case),
            Measurement(metric="iops", unit="IOPS", value=stats.get("iops", 0.0), better="higher", case=case),
        ]
        mean, percentiles = _latency_us(stats)
        if mean is not None:
            measurements.append(Measurement(metric="clat_mean", unit="us", value=mean, case=case))
        # the I/Os its percentiles rest on: a 1m job of 6 s may complete a few hundred (the lint says so)
        counted = {"operations": int(stats["total_ios"])} if isinstance(stats.get("total_ios"), int) else {}
        for label, key in (("clat_p50", "50.000000"), ("clat_p99", "99.000000")):
            if key in percentiles:
                measurements.append(
                    Measurement(metric=label, unit="us", value=percentiles[key], case=case, metadata=dict(counted))
                )
    for measurement in measurements:
        measurement.metadata["job"] = name
    return measurements


def _server(entry: dict[str, Any]) -> tuple[str, Any]:
    return str(entry.get("hostname") or "unknown host"), entry.get("port")


def _server_names(document: dict[str, Any]) -> dict[tuple[str, Any], str]:
    """{(hostname, port): the server's name}: the hostname, or ``hostname:port`` where two share it."""
    servers = [
        _server(job)
        for job in document.get("client_stats") or []
        if isinstance(job, dict) and job.get("jobname") != ALL_CLIENTS
    ]
    hosts = [host for host, _ in dict.fromkeys(servers)]
    return {
        (host, port): host if hosts.count(host) == 1 or port is None else f"{host}:{port}"
        for host, port in dict.fromkeys(servers)
    }


def global_options(document: dict[str, Any], host: str | None = None) -> dict[str, Any]:
    """The global options of a local run, or of the server ``host`` (a name from ``jobs_by_host``) in
    ``--client`` output (a list of per-server objects when fio had several servers)."""
    found = document.get("global options")
    if isinstance(found, dict):
        return {k: v for k, v in found.items() if k not in ("hostname", "port")}
    if not isinstance(found, list):
        return {}
    names = _server_names(document)
    for entry in found:
        if isinstance(entry, dict) and names.get(_server(entry), _server(entry)[0]) == host:
            return {k: v for k, v in entry.items() if k not in ("hostname", "port")}
    return {}


def jobs_by_host(document: dict[str, Any]) -> dict[str | None, list[dict[str, Any]]]:
    """{server name (None for a local run): its jobs}; FormatError when there are none."""
    if isinstance(document.get("client_stats"), list):
        grouped: dict[str | None, list[dict[str, Any]]] = {}
        names = _server_names(document)
        for job in document["client_stats"]:
            if not isinstance(job, dict) or job.get("jobname") == ALL_CLIENTS:
                continue
            grouped.setdefault(names[_server(job)], []).append(job)
        if grouped:
            return grouped
        raise FormatError("fio --client output without one server's job in 'client_stats'")
    jobs = document.get("jobs")
    if not isinstance(jobs, list):
        raise FormatError("no 'jobs' in it: not fio's --output-format=json (or json+) output")
    if not jobs:
        raise FormatError("fio reported no I/O (no job in 'jobs')")
    return {None: [job for job in jobs if isinstance(job, dict)]}


def parse(document: dict[str, Any]) -> list[Measurement]:
    """Every job's samples, in file order (a local run; see ``jobs_by_host`` for ``--client`` output)."""
    measurements = [
        m
        for host, jobs in jobs_by_host(document).items()
        for job in jobs
        for m in job_measurements(job, global_options(document, host))
    ]
    if not measurements:
        raise FormatError("fio reported no I/O")
    return measurements
