"""The network workload as the runner sees it: what it needs, and one execution (the placement, its
servers, then each test: iperf3 TCP, iperf3 UDP, the request/response latency)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, ClassVar

from ccbench.formats import FormatError, iperf3, ping, sockperf
from ccbench.model import Measurement
from ccbench.workloads.base import DEVICE_IO_CHECK, ExecutionContext, Workload, WorkloadFailed, missing_tools
from ccbench.workloads.network.hosts import cleanup_stale, placement
from ccbench.workloads.network.params import PEER_ENV, NetworkParams

INSTALL_HINT = "run 'bash scripts/setup.sh --with network' (apt-get install iperf3 sockperf iputils-ping)"


class Network(Workload):
    kind = "network"
    description = (
        "iperf3 TCP stream and UDP datagrams at a fixed offered rate (receive rate, loss), and request/response "
        "latency (sockperf ping-pong, or ping), between emulated hosts or to a fleet peer"
    )
    Params = NetworkParams
    matrix_params = frozenset({"tests"})
    #: the sum over streams of the receiver's rate (iperf3's SUM line); sockperf's median half round
    #: trip; ping's round trips (the fallback)
    primary_metrics = ("throughput", "latency_p50", "rtt")
    setup_component: ClassVar[str | None] = "network"
    #: network DMA is bounced through swiotlb in a SEV or TDX guest; only hosts = "peer" crosses a NIC,
    #: so the check runs for that alone (ccbench.workloads.crosses_no_device)
    system_checks = (DEVICE_IO_CHECK,)

    @classmethod
    def cleanup_stale(cls, workdir: Path) -> list[str]:
        return cleanup_stale(workdir)

    def latency_tool(self) -> str:
        tool = self.params.latency_tool
        if tool == "auto":
            return "sockperf" if shutil.which("sockperf") else "ping"
        return tool

    def requirements(self) -> str | None:
        p = self.params
        tools = ["iperf3"] if {"tcp", "udp"} & set(p.tests) else []
        if "latency" in p.tests:
            tools.append(self.latency_tool())
        if p.hosts == "emulated":
            tools += ["timeout", "ss"]
        missing = missing_tools(*tools)
        if missing:
            return f"{', '.join(missing)} not installed: {INSTALL_HINT}"
        if p.hosts == "peer":
            if not p.peer_address():
                return (
                    f"hosts = 'peer' needs the serving host's address: set peer = ADDRESS, or run it in a fleet "
                    f"where this host's ccbench_peer names the serving host (it sets ${PEER_ENV})"
                )
            return None
        from ccbench import topology

        reason = topology.available(topology.LinkShape(rate=p.rate, delay=p.delay))
        if reason:
            hint = " (this kernel may lack sch_netem: leave delay unset)" if p.delay else ""
            return f"hosts = 'emulated' cannot run here ({reason}){hint}; use hosts = 'peer' with a serving host"
        return None

    def peer_services(self) -> list[list[str]]:
        """What the serving host of a fleet runs for this workload (each argv listens until stopped)."""
        p = self.params
        services = []
        if {"tcp", "udp"} & set(p.tests):
            services.append(["iperf3", "-s", "-p", str(p.iperf3_port), "-i", str(p.interval_s)])
        if "latency" in p.tests and p.latency_tool != "ping":
            tcp = ["--tcp"] if p.latency_protocol == "tcp" else []
            services.append(["sockperf", "server", "-i", "0.0.0.0", "-p", str(p.sockperf_port), *tcp])
        return services

    def run(self, ctx: ExecutionContext) -> list[Measurement]:
        p = self.params
        ctx.raw_dir.mkdir(parents=True, exist_ok=True)
        tool = self.latency_tool()
        measurements: list[Measurement] = []
        with placement(p, ctx) as place:
            facts = {
                "hosts": p.hosts,
                "server": place.address,
                # no sch_netem in the kernels ccbench is developed on: the link adds no delay
                "link_rate": p.rate if p.hosts == "emulated" else None,
                "link_delay": p.delay if p.hosts == "emulated" else None,
            }
            if not place.peer:
                self._start_servers(place, ctx, tool)
            for test in p.tests:
                if test == "latency":
                    measured = self._latency(place, ctx, tool)
                else:
                    measured = self._iperf3(place, ctx, test)
                for measurement in measured:
                    measurement.metadata.update(facts)
                measurements += measured
        # the results before the intervals: the run summary shows a case's first metric
        return sorted(measurements, key=lambda m: "interval" in m.metric)

    def _start_servers(self, place, ctx: ExecutionContext, tool: str) -> None:
        p = self.params
        bound = p.bound_s()
        if {"tcp", "udp"} & set(p.tests):
            # the server reports at its own interval (the client's -i is not sent to it)
            argv = ["iperf3", "-s", "-p", str(p.iperf3_port), "-i", str(p.interval_s), "-B", place.address]
            place.start_server(
                "iperf3", argv, bound_s=bound, log=ctx.raw_dir / "iperf3-server.log", listens=("tcp", p.iperf3_port)
            )
        if "latency" in p.tests and tool == "sockperf":
            tcp = ["--tcp"] if p.latency_protocol == "tcp" else []
            argv = ["sockperf", "server", "-i", place.address, "-p", str(p.sockperf_port), *tcp]
            place.start_server(
                "sockperf",
                argv,
                bound_s=bound,
                log=ctx.raw_dir / "sockperf-server.log",
                listens=(p.latency_protocol, p.sockperf_port),
            )

    def _iperf3(self, place, ctx: ExecutionContext, test: str) -> list[Measurement]:
        p = self.params
        argv = ["iperf3", "-c", place.address, "-p", str(p.iperf3_port), "-t", str(p.duration_s)]
        argv += [
            "-i",
            str(p.interval_s),
            "-P",
            str(p.streams),
            "-J",
            "--get-server-output",
            "--connect-timeout",
            "5000",
        ]
        if test == "udp":
            argv += ["-u", "-b", p.udp_rate, "-l", str(p.datagram_size)]
        bounded = ["timeout", "-k", "5", str(p.duration_s + 20), *argv]
        result = ctx.run_command(place.client(bounded), log_name=f"iperf3-{test}", check=False)
        try:
            document = json.loads(result.stdout) if result.stdout.strip() else {}
            tests = iperf3.parse_json(document)
        except (ValueError, FormatError) as exc:
            raise WorkloadFailed(f"iperf3 {test} test: {exc} ({result.failure()})") from None
        if result.returncode != 0 or document.get("error"):
            raise WorkloadFailed(f"iperf3 {test} test failed: {document.get('error') or result.failure()}")
        client, served = tests[0], tests[1:]
        case = client.case()
        measured = iperf3.measurements(client, case=case)
        # the server's intervals are the receiving side's; its summary repeats the client's sum_received
        for server in served:
            measured += [m for m in iperf3.measurements(server, case=case) if m.metric == "interval_throughput"]
        if not any(m.metric == "throughput" for m in measured):
            raise WorkloadFailed(f"iperf3 {test} test: no receiver summary in its output ({ctx.raw_dir})")
        extra: dict[str, Any] = {"offered_rate": p.udp_rate} if test == "udp" else {}
        for measurement in measured:
            measurement.metadata.update(extra, iperf3_version=client.facts.get("version"))
        return measured

    def _latency(self, place, ctx: ExecutionContext, tool: str) -> list[Measurement]:
        p = self.params
        if tool == "sockperf":
            argv = ["sockperf", "ping-pong", "-i", place.address, "-p", str(p.sockperf_port)]
            argv += ["-t", str(p.latency_duration_s), "-m", str(p.message_size)]
            argv += ["--tcp"] if p.latency_protocol == "tcp" else []
            bounded = ["timeout", "-k", "5", str(p.latency_duration_s + 20), *argv]
            result = ctx.run_command(place.client(bounded), log_name="sockperf", check=False)
            try:
                summary = sockperf.parse(result.stdout)
            except FormatError as exc:
                raise WorkloadFailed(f"sockperf ping-pong: {exc} ({result.failure()})") from None
            case = {"protocol": p.latency_protocol, "message_size": p.message_size, "tool": "sockperf"}
            return sockperf.measurements(summary, case=case)
        argv = ["ping", "-n", "-c", str(p.ping_count), "-i", str(p.ping_interval_s), "-W", "2", place.address]
        bounded = ["timeout", "-k", "5", str(int(p.latency_time_s()) + 20), *argv]
        result = ctx.run_command(place.client(bounded), log_name="ping", check=False)
        try:
            run = ping.parse(result.stdout)
        except FormatError as exc:
            raise WorkloadFailed(f"ping: {exc} ({result.failure()})") from None
        if not run.replies:
            raise WorkloadFailed(f"ping: no reply from {place.address} ({result.failure()})")
        return ping.measurements(run)
