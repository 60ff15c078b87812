"""The network workload's parameters, checked before anything runs (one-line errors)."""

from __future__ import annotations

import os
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ccbench.workloads.base import WorkloadParams

TESTS = ("tcp", "udp", "latency")
#: the environment variable the fleet sets on a host whose ccbench_peer names the serving host
PEER_ENV = "CCBENCH_PEER"
_RATE = re.compile(r"^\d+(?:\.\d+)?[KMG]?$")
#: the most seconds a plan may ask of one test (the load is bounded in time as well as in count)
MAX_TEST_S = 300


class NetworkParams(WorkloadParams):
    #: the tests each execution runs, in this order: "tcp" (an iperf3 TCP stream), "udp" (iperf3
    #: datagrams at a fixed offered rate: receive rate and loss), "latency" (request/response)
    tests: list[Literal["tcp", "udp", "latency"]] = Field(default_factory=lambda: list(TESTS), min_length=1)
    #: seconds each iperf3 test sends (iperf3 -t)
    duration_s: int = Field(2, ge=1, le=MAX_TEST_S)
    #: seconds per interval report (iperf3 -i): every interval of every stream is a sample
    interval_s: float = Field(0.5, ge=0.1, le=60)
    #: parallel streams (iperf3 -P)
    streams: int = Field(1, ge=1, le=16)
    #: the UDP test's fixed offered rate per stream (iperf3 -b: bits per second, K/M/G suffixes)
    udp_rate: str = "100M"
    #: the UDP test's datagram size in bytes (iperf3 -l)
    datagram_size: int = Field(1460, ge=16, le=65507)
    #: "sockperf" (ping-pong), "ping" (ICMP echo), or "auto": sockperf where installed, else ping
    latency_tool: Literal["auto", "sockperf", "ping"] = "auto"
    #: sockperf's protocol and message size, and seconds of ping-pong (sockperf -t)
    latency_protocol: Literal["udp", "tcp"] = "udp"
    message_size: int = Field(64, ge=14, le=65000)
    latency_duration_s: int = Field(1, ge=1, le=MAX_TEST_S)
    #: ping's probes and the seconds between them (ping -c, -i)
    ping_count: int = Field(20, ge=1, le=10000)
    ping_interval_s: float = Field(0.05, ge=0.01, le=10)
    #: "emulated": a server and a client host on this machine (network namespaces joined by a bridge,
    #: ccbench.topology; needs root); "peer": the server runs on another machine (a fleet's ccbench_peer)
    hosts: Literal["emulated", "peer"] = "emulated"
    #: the serving host's address with hosts = "peer" (default: $CCBENCH_PEER, which the fleet sets)
    peer: str | None = None
    #: the emulated link's rate in tc's units (tbf; "" leaves it unshaped). This kernel has no
    #: sch_netem, so no delay can be emulated: a delay asked for is refused before the run
    rate: str | None = "1gbit"
    delay: str | None = None
    #: the servers' ports (iperf3's and sockperf's defaults)
    iperf3_port: int = Field(5201, ge=1024, le=65535)
    sockperf_port: int = Field(11111, ge=1024, le=65535)

    @field_validator("udp_rate")
    @classmethod
    def _check_rate(cls, value: str) -> str:
        if not _RATE.match(value):
            raise ValueError(f"udp_rate {value!r}: give bits per second like 100M, 1G or 500K (iperf3 -b)")
        return value

    @field_validator("tests")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"tests {value}: name each test once")
        return value

    @model_validator(mode="after")
    def _check_shape(self) -> NetworkParams:
        self.rate = self.rate or None
        self.delay = self.delay or None
        if self.interval_s > self.duration_s:
            raise ValueError(f"interval_s {self.interval_s} is longer than duration_s {self.duration_s}")
        if self.rate or self.delay:
            from ccbench.topology import LinkShape

            LinkShape(rate=self.rate, delay=self.delay)  # tc's units, checked up front
        return self

    def peer_address(self) -> str | None:
        return self.peer or os.environ.get(PEER_ENV) or None

    def bound_s(self) -> float:
        """The most seconds one execution's tests may take (the servers' lifetime bound): each
        test's own time plus connection and reporting slack."""
        per_test = {"tcp": self.duration_s, "udp": self.duration_s, "latency": self.latency_time_s()}
        return sum(per_test[test] + 15 for test in self.tests) + 10

    def latency_time_s(self) -> float:
        return max(self.latency_duration_s, self.ping_count * self.ping_interval_s) + 1
