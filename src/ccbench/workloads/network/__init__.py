"""network: plain network benchmarks with the real tools, between emulated hosts or to a fleet peer.

Each execution runs the plan's ``tests`` in order:

* ``tcp``: an iperf3 TCP stream (``streams`` parallel streams, ``duration_s`` seconds);
* ``udp``: iperf3 datagrams of ``datagram_size`` bytes at a fixed offered rate (``udp_rate`` per
  stream): the receive rate, loss and jitter;
* ``latency``: request/response latency, sockperf ping-pong (half round trips, percentiles) or,
  where sockperf is missing or ``latency_tool = "ping"``, ping (each reply's round trip a sample).

Samples (the parsers in ``ccbench.formats`` give them the same shape as ``ccbench import iperf3``
and ``ccbench import ping``): every interval of every iperf3 stream, from both ends
(``interval_throughput`` where the stream was received, ``sender_interval_throughput`` where it was
sent; the interval's start and end in the metadata); the SUM line as the result (``throughput``,
the primary metric, and for UDP ``loss`` and ``jitter``); sockperf's ``latency_*``; ping's ``rtt``.

Placement (``hosts``): ``emulated`` puts a server host and a client host on this machine (network
namespaces joined by a bridge, the link shaped by ``tc tbf`` to ``rate``; the kernels ccbench is
developed on have no ``sch_netem``, so no delay is emulated, and a ``delay`` is refused up front
there); ``peer`` runs the client here against a server on another machine: in a fleet, the host's
``ccbench_peer`` names the serving host, the fleet starts the servers this workload declares
(``peer_services``) there for the run, bounded in time, and stops them (docs/network.md).

The rooms: ``params`` (the plan's parameters), ``hosts`` (placement, the servers' ledger and stale
clean-up), ``workload`` (the class the registry names, the tests).
"""

from ccbench.workloads.network.params import PEER_ENV, NetworkParams
from ccbench.workloads.network.workload import Network

__all__ = ["PEER_ENV", "Network", "NetworkParams"]
