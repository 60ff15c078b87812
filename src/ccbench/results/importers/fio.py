"""fio's JSON output (``--output-format=json`` / ``json+``), fio 2.x and 3.x, and ``fio --client``
output: the samples ccbench's own fio workload records (ccbench.formats.fio), per job.

A local run's file is one execution; ``--client`` output is one execution per server, each sample
naming its server, the ``All clients`` sum left out. A server is a machine: its executions state its
hostname, so a file of two servers (a TDX guest and a plain VM driven by one client) gives two
bundles, each labelled by its server's hostname (under one ``--label``, refused: one label names one
machine); two servers on one host (``hostname:port``) stay one machine's two executions. The block size and pattern come from
the job's options (or the global ones); where the file does not state them they stay unknown. fio's
version is a fact about the tool, kept in each sample's metadata (``fio_version``) and the
manifest's ``environment.tools``, never in the case: the same job compares across fio versions.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ccbench.formats import FormatError
from ccbench.formats import fio as fio_format
from ccbench.model import Measurement
from ccbench.results.importers.base import Execution, FileFormat, ImportProblem, iso, mtime, read_json, wrong_shape


def started_at(document: dict[str, Any], source: Path) -> str:
    stamp = document.get("timestamp")
    return iso(datetime.fromtimestamp(stamp, UTC)) if isinstance(stamp, int | float) else mtime(source)


def measurements(document: dict[str, Any], source: Path) -> dict[str | None, list[Measurement]]:
    """{server hostname (None for a local run): its samples}; ImportProblem naming the file."""
    if not fio_format.is_fio(document) and "jobs" not in document:
        raise wrong_shape(source, document, "fio's JSON output", "a JSON object with 'jobs'")
    found: dict[str | None, list[Measurement]] = {}
    try:
        for host, jobs in fio_format.jobs_by_host(document).items():
            options = fio_format.global_options(document, host)
            found[host] = [m for job in jobs for m in fio_format.job_measurements(job, options)]
            for measurement in found[host]:
                if host is not None:
                    measurement.metadata["host"] = host
    except FormatError as exc:
        raise ImportProblem(f"{source}: {exc}") from None
    if not any(found.values()):
        raise ImportProblem(f"{source}: fio reported no I/O in it")
    return found


def _hostname(document: dict[str, Any], server: str) -> str:
    """The host of a --client server as ``jobs_by_host`` names it (``hostname:port`` where two servers
    share a host): the machine is the host, whichever port its servers listen on."""
    hosts = {str(job.get("hostname")) for job in document.get("client_stats") or [] if isinstance(job, dict)}
    return server if server in hosts else server.rsplit(":", 1)[0]


def read(path: Path) -> list[Execution]:
    document = read_json(path, "fio")
    if not isinstance(document, dict):
        raise wrong_shape(path, document, "fio's JSON output", "a JSON object with 'jobs'")
    tool = {"fio_version": fio_format.version(document)}
    found = measurements(document, path)
    for measurement in (m for ms in found.values() for m in ms):
        measurement.metadata.update(tool)
    return [
        Execution(
            workload="fio",
            kind="fio",
            source=path,
            started_at=started_at(document, path),
            measurements=samples,
            tool=tool,
            machine={"hostname": _hostname(document, host)} if host is not None else {},
            notes=[f"fio --client: server {host}"] if host is not None else [],
        )
        for host, samples in found.items()
        if samples
    ]


ADAPTER = FileFormat(
    name="fio",
    description="fio's JSON output (--output-format=json or json+), fio 2.x and 3.x, --client output "
    "(one bundle per server host): per job and direction MB/s, IOPS, clat mean/p50/p99",
    read=read,
    host_labels=True,
)
