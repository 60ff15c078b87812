"""How fast can the load generator go on this machine? (So readers know where the client, not the
service, limits the microservices workload's measurements.)

Starts the workload's own nginx configuration with only its static location in use (``/static``
returns a fixed 3-byte body; no application tier behind it) and measures, for plain HTTP and TLS 1.3:

* oha open loop (``-q RATE --latency-correction``) at doubling rates until the achieved rate falls
  below 95% of the target: the largest rate sustained, with p99 and oha's own CPU use;
* oha unthrottled and wrk closed loop: the most requests per second each client gets.

    PYTHONPATH=src python benchmarks/bench_loadgen.py [--seconds 5] [--connections 32]

Prints one table; nothing is asserted (speed is a measurement, not a test).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ccbench.workloads.microservices import (  # noqa: E402
    Chain,
    MicroservicesParams,
    Server,
    free_ports,
    make_certificate,
    nginx_config,
    oha_argv,
    parse_oha,
    stop_chain,
)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_oha(url: str, rate: float | None, seconds: float, connections: int, cacert: str | None) -> dict:
    # a fixed URL (oha's rand_regex takes '.' literally)
    argv = oha_argv(url, rate=rate, duration=seconds, connections=connections, timeout=5, cacert=cacert)
    before = children_cpu()
    start = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"oha failed: {result.stderr.strip()[-400:]}")
    summary = parse_oha(result.stdout)
    summary["client_cores"] = (children_cpu() - before) / wall
    return summary


def run_wrk(url: str, seconds: float, connections: int) -> dict:
    before = children_cpu()
    start = time.perf_counter()
    result = subprocess.run(["wrk", "-t", "2", "-c", str(connections), "-d", f"{seconds:g}s", url],
                            capture_output=True, text=True)
    wall = time.perf_counter() - start
    rps = next((float(line.split()[1]) for line in result.stdout.splitlines() if line.startswith("Requests/sec")), 0.0)
    return {"throughput": rps, "client_cores": (children_cpu() - before) / wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per measurement")
    parser.add_argument("--connections", type=int, default=32, help="client connections")
    parser.add_argument("--start-rate", type=float, default=1000.0, help="first open-loop rate (req/s); doubled each step")
    args = parser.parse_args()
    for tool in ("nginx", "wrk", "openssl"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is missing: run 'bash scripts/setup.sh --with microservices'")
    print(f"# load generator ceiling against a static nginx response ({os.cpu_count()} CPUs, client and nginx "
          f"sharing them; {args.seconds:g} s per point, {args.connections} connections)")
    print("| transport | client | target (req/s) | achieved (req/s) | p99 (ms) | client CPU (cores) |")
    print("|---|---|---:|---:|---:|---:|")
    for transport in ("plain", "tls"):
        directory = Path(tempfile.mkdtemp(prefix="ccbench-bench-loadgen-"))
        chain = Chain(directory, MicroservicesParams(), transport)
        try:
            (directory / "logs").mkdir()
            for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
                (directory / "nginx-temp" / sub).mkdir(parents=True)
            port, unused = free_ports(2)
            ca = cert = key = None
            if transport == "tls":
                ca, cert = make_certificate(directory / "tls", "127.0.0.1")
                key = cert.with_name("key.pem")
            conf = directory / "nginx.conf"
            conf.write_text(nginx_config(directory, "127.0.0.1", port, f"127.0.0.1:{unused}", 1, cert, key))
            chain.start(Server(name="nginx", port=port, log=str(directory / "logs" / "nginx-error.log"),
                               argv=["nginx", "-c", str(conf), "-p", str(directory), "-e",
                                     str(directory / "logs" / "nginx-error.log"), "-g", "daemon off;"]))
            url = f"{'https' if cert else 'http'}://127.0.0.1:{port}/static"
            cacert = str(ca) if ca else None
            rate = args.start_rate
            best = None
            while True:
                summary = run_oha(url, rate, args.seconds, args.connections, cacert)
                print(f"| {transport} | oha -q | {rate:,.0f} | {summary['throughput']:,.0f} | {summary['p99']:.2f} | "
                      f"{summary['client_cores']:.2f} |", flush=True)
                if summary["throughput"] < 0.95 * rate or rate > 1e6:
                    break
                best = rate
                rate *= 2
            free = run_oha(url, None, args.seconds, args.connections, cacert)
            print(f"| {transport} | oha, unthrottled | - | {free['throughput']:,.0f} | {free['p99']:.2f} | "
                  f"{free['client_cores']:.2f} |", flush=True)
            wrk = run_wrk(url, args.seconds, args.connections)
            print(f"| {transport} | wrk, closed loop | - | {wrk['throughput']:,.0f} | - | {wrk['client_cores']:.2f} |", flush=True)
            print(f"| {transport} | **largest open-loop rate sustained** | {best or 0:,.0f} | | | |", flush=True)
        finally:
            stop_chain(chain.state)
            shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
