"""The network workload for real: iperf3 and sockperf (or ping) between two emulated hosts made by
ccbench (network namespaces on a bridge), every interval a sample and the SUM line the result; a run
interrupted by SIGINT or SIGKILL leaving no server or namespace behind (after `ccbench cleanup` for
the kill); what it refuses up front."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import psutil
import pytest
from conftest import FAST_DEFAULTS, PATIENCE_S, only_bundle, run_ccbench, start_run, wait_until

from ccbench.topology import available
from ccbench.workloads.base import ExecutionContext, WorkloadFailed
from ccbench.workloads.network import Network, NetworkParams
from ccbench.workloads.network.hosts import Servers, cleanup_stale

NEEDS = Network("probe", NetworkParams(latency_tool="ping")).requirements()
needs_hosts = pytest.mark.skipif(NEEDS is not None, reason=f"{NEEDS}")
needs_sockperf = pytest.mark.skipif(
    Network("probe", NetworkParams(latency_tool="sockperf")).requirements() is not None, reason="sockperf missing"
)


def _context(tmp_path: Path, name: str = "net") -> ExecutionContext:
    workdir = tmp_path / "work"
    (workdir / "scratch").mkdir(parents=True, exist_ok=True)
    (workdir / ".lock").write_text("")  # the run's work directory, as the runner makes it
    return ExecutionContext(
        workload_name=name,
        workdir=workdir / "scratch",
        raw_dir=tmp_path / "raw",
        repetition=0,
        warmup=False,
        variant={},
    )


def _our_namespaces(workdir: Path) -> list[str]:
    """Namespaces of topologies under workdir (their names are in the state files) that still exist."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    made = (
        [p.name.rsplit("-", 1)[-1] for p in (workdir / "topology").glob("*")] if (workdir / "topology").is_dir() else []
    )
    return [line.split()[0] for line in names.splitlines() if any(f"cc{rid}-" in line for rid in made)]


def _processes(name: str, marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if process.info["name"] == name and marker in cmdline:
            found.append(process)
    return found


@needs_hosts
@needs_sockperf
def test_tcp_udp_and_latency_between_emulated_hosts_every_interval_a_sample(tmp_path):
    params = NetworkParams(duration_s=1, interval_s=0.5, latency_duration_s=1, udp_rate="20M", rate="200mbit")
    ctx = _context(tmp_path)
    measured = Network("net", params).run(ctx)
    by_case: dict[tuple, dict[str, list]] = {}
    for m in measured:
        by_case.setdefault(tuple(sorted(m.case.items())), {}).setdefault(m.metric, []).append(m)
    tcp = by_case[(("protocol", "tcp"), ("streams", 1))]
    udp = by_case[(("datagram_size", 1460), ("protocol", "udp"), ("streams", 1))]
    latency = by_case[(("message_size", 64), ("protocol", "udp"), ("tool", "sockperf"))]
    # the SUM line (one stream: its line) is the result, once per test; the link's 200 Mbit/s bounds it
    assert len(tcp["throughput"]) == 1 and 0 < tcp["throughput"][0].value <= 200 * 1.1
    assert len(udp["throughput"]) == 1 and udp["loss"][0].unit == "%"
    # every interval of the stream, from both ends, with its start and end
    for metrics in (tcp, udp):
        senders, receivers = metrics["sender_interval_throughput"], metrics["interval_throughput"]
        assert len(senders) >= 2 and len(receivers) >= 2
        assert senders[0].metadata["interval_start_s"] == 0 and senders[0].metadata["interval_end_s"] > 0.4
        assert {m.metadata["side"] for m in receivers} == {"receiver"}
    assert udp["sender_interval_throughput"][0].metadata["datagrams"] > 0
    assert latency["latency_p50"][0].value > 0 and latency["latency_p50"][0].metadata["half_round_trip"]
    assert measured[0].metric == "throughput"  # results first: the run summary shows the first metric
    assert tcp["throughput"][0].metadata["link_rate"] == "200mbit"
    assert (ctx.raw_dir / "iperf3-udp.stdout").exists() and (ctx.raw_dir / "iperf3-server.log").exists()
    # nothing left: servers stopped, namespaces removed, ledgers gone
    workdir = tmp_path / "work"
    assert not _our_namespaces(workdir)
    assert not list((workdir / "network").glob("servers-*.json"))
    server = tcp["throughput"][0].metadata["server"]
    assert not _processes("iperf3", f"-B {server}") and not _processes("sockperf", f"-i {server}")


@needs_hosts
def test_ping_is_the_latency_fallback_each_reply_a_sample(tmp_path):
    params = NetworkParams(tests=["latency"], latency_tool="ping", ping_count=5, ping_interval_s=0.05)
    measured = Network("net", params).run(_context(tmp_path))
    rtts = [m for m in measured if m.metric == "rtt"]
    assert len(rtts) == 5 and [m.metadata["icmp_seq"] for m in rtts] == [1, 2, 3, 4, 5]
    assert rtts[0].case == {"protocol": "icmp", "payload_size": 56}
    assert [m.value for m in measured if m.metric == "loss"] == [0.0]


@needs_hosts
def test_a_server_that_cannot_start_fails_the_execution_and_leaves_nothing(tmp_path):
    ctx = _context(tmp_path)
    params = NetworkParams(tests=["tcp"], duration_s=1, iperf3_port=5201)
    workload = Network("net", params)
    original = workload._start_servers

    def start_then_a_broken_one(place, ctx, tool):
        original(place, ctx, tool)
        place.start_server(
            "broken", ["iperf3", "--no-such-flag"], bound_s=5, log=ctx.raw_dir / "b.log", listens=("tcp", 9)
        )

    workload._start_servers = start_then_a_broken_one
    with pytest.raises(WorkloadFailed, match="broken server exited"):
        workload.run(ctx)
    assert not _our_namespaces(tmp_path / "work")
    assert not list((tmp_path / "work" / "network").glob("servers-*.json"))


PLAN = f"""name = "net-interrupt"
[defaults]
{FAST_DEFAULTS}
[[workloads]]
kind = "network"
tests = ["udp"]
duration_s = 60
udp_rate = "5M"
"""


@needs_hosts
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_interrupted_run_leaves_no_server_or_namespace(tmp_path, sig):
    (tmp_path / "plan.toml").write_text(PLAN)
    workdir = tmp_path / "work"
    runner = start_run(tmp_path / "plan.toml", tmp_path / "out", workdir)

    def serving():
        for ledger in (workdir / "network").glob("servers-*.json") if (workdir / "network").is_dir() else []:
            entries = json.loads(ledger.read_text()).get("entries", [])
            if entries and entries[0].get("pid"):
                return entries
        assert runner.poll() is None, runner.communicate()
        return None

    entries = wait_until(serving, PATIENCE_S, "the iperf3 server")
    server = psutil.Process(entries[0]["pid"])
    wait_until(lambda: _processes("iperf3", "-c "), PATIENCE_S, "the iperf3 client")
    assert _our_namespaces(workdir)
    if sig == signal.SIGINT:
        runner.send_signal(signal.SIGINT)
        runner.wait(60)
        assert json.loads((only_bundle(tmp_path / "out") / "manifest.json").read_text())["status"] == "interrupted"
    else:
        spared = {server.pid} | {c.pid for c in server.children(recursive=True)}
        doomed = [runner.pid] + [
            c.pid for c in psutil.Process(runner.pid).children(recursive=True) if c.pid not in spared
        ]
        for pid in doomed:  # the runner and its worker; the server, in the namespace's own session, stays
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        runner.wait(10)
        assert server.is_running() and _our_namespaces(workdir)
        done = run_ccbench("cleanup", "--workdir", workdir, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "stopped iperf3" in done.stdout and "deleted network namespace" in done.stdout
    wait_until(lambda: not server.is_running() or server.status() == psutil.STATUS_ZOMBIE, 30, "the server's end")
    assert not _our_namespaces(workdir)
    assert not list((workdir / "network").glob("servers-*.json"))


def test_stale_ledger_servers_are_stopped(tmp_path):
    """What a SIGKILLed execution's ledger lists is stopped by the kind's stale clean-up (a real
    process standing in for a server: the ledger records pid and start time before anything else)."""
    servers = Servers(tmp_path)
    entry = servers.ledger.record({"kind": "server", "name": "sleeper", "argv": ["sleep", "60"], "port": 0})
    process = subprocess.Popen(["sleep", "60"], start_new_session=True)
    servers.ledger.update(entry, pid=process.pid, create_time=psutil.Process(process.pid).create_time())
    done = cleanup_stale(tmp_path)
    assert process.wait(10) is not None
    assert done[0] == f"stopped sleeper (pid {process.pid})" and not list((tmp_path / "network").glob("*.json"))


def test_missing_tools_are_a_skip_with_the_install_hint(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it
    reason = Network("n", NetworkParams()).requirements()
    assert reason.startswith("iperf3, ping, timeout, ss not installed")  # auto falls back to ping
    assert "bash scripts/setup.sh --with network" in reason and "apt-get install iperf3 sockperf" in reason


def test_what_cannot_run_is_said_before_the_run(monkeypatch):
    monkeypatch.delenv("CCBENCH_PEER", raising=False)
    reason = Network("n", NetworkParams(hosts="peer")).requirements()
    assert reason and "ccbench_peer" in reason and "peer = ADDRESS" in reason
    monkeypatch.setenv("CCBENCH_PEER", "10.0.0.9")
    assert Network("n", NetworkParams(hosts="peer")).params.peer_address() == "10.0.0.9"
    if available() is None and available(__import__("ccbench.topology").topology.LinkShape(delay="1ms")):
        # no sch_netem here: a delay is refused up front, with the reason
        reason = Network("n", NetworkParams(delay="1ms")).requirements()
        assert "netem" in reason and "leave delay unset" in reason


@pytest.mark.parametrize(
    "params, message",
    [
        ({"udp_rate": "fast"}, "udp_rate"),
        ({"tests": ["tcp", "tcp"]}, "once"),
        ({"tests": ["iperf"]}, "tests"),
        ({"interval_s": 5, "duration_s": 2}, "interval_s"),
        ({"streams": 64}, "streams"),
        ({"rate": "lots"}, "tc's units"),
    ],
)
def test_bad_parameters_are_refused(params, message):
    with pytest.raises(Exception, match=message):
        NetworkParams(**params)


def test_a_bad_plan_is_exit_2_without_a_traceback(tmp_path):
    (tmp_path / "plan.toml").write_text(PLAN.replace('udp_rate = "5M"', 'udp_rate = "fast"'))
    done = run_ccbench("run", tmp_path / "plan.toml", "--out", tmp_path / "out", "--workdir", tmp_path / "w")
    assert done.returncode == 2 and "udp_rate" in done.stderr and "Traceback" not in done.stderr


def test_the_fleet_peer_serves_what_the_plan_declares():
    workload = Network("n", NetworkParams(hosts="peer", latency_protocol="tcp", iperf3_port=5301))
    assert workload.peer_services() == [
        ["iperf3", "-s", "-p", "5301", "-i", "0.5"],
        ["sockperf", "server", "-i", "0.0.0.0", "-p", "11111", "--tcp"],
    ]
    assert Network("n", NetworkParams(tests=["latency"], latency_tool="ping")).peer_services() == []


def test_bound_covers_every_test():
    params = NetworkParams(duration_s=10, latency_duration_s=2)
    assert params.bound_s() >= 10 + 10 + 2 and params.bound_s() < 120
