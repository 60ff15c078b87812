#!/usr/bin/env bash
# network: the network workload's tools: iperf3 (TCP and UDP streams), sockperf (request/response
# latency), ping (the latency fallback), iproute2 (ip, tc, ss: emulated hosts), coreutils' timeout
apt_install iperf3 sockperf iputils-ping iproute2 coreutils
