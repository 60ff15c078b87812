"""microservices: seed 002's question (what does a TEE do to a service chain's latency?) with real servers.

A social network in the shape of DeathStarBench's: nginx (HTTP/1.1, or HTTPS with TLS 1.3 and a
certificate made per run) -> ccbench's Go application tier (``services/socialnet``: compose post,
home timeline, user timeline, follow) -> memcached and Redis -> PostgreSQL. ``prepare`` starts the
chain from the Debian packages' binaries in ccbench's own directory (free loopback ports, its own
PostgreSQL cluster; never the system's services), loads a seeded dataset (users, a follow graph with
a Zipf in-degree, posts, timelines) and, once per bundle, probes the chain's capacity. Each
execution then drives a request mix:

* open loop at constant rates (``oha -q RATE --latency-correction``: latency from each request's
  scheduled start, so a slow server cannot hide its queue), one case per rate of the sweep;
* closed loop with ``wrk`` (threads, connections, duration), as the seed did.

Per rate it records achieved throughput, latency p50/p90/p99/p99.9/max, errors (counted, never
dropped), each tier's CPU use (its process tree), each tier's mean share of the latency (nginx's
access log with ``$upstream_response_time`` and the application's ``Server-Timing`` header), the load
generator's own CPU and whether the client rather than the service was the bottleneck.

Every server is recorded in ``<workdir>/microservices/chain-*.json`` before it starts and stopped in cleanup;
``ccbench cleanup`` stops what a killed run left (``cleanup_stale``).

The package's rooms:

* ``params``      the plan's parameters, the request mix's operations, the tiers
* ``state``       a chain's record (servers, directories) and stopping it, also after a kill
* ``chain``       the chain: placement (loopback or emulated hosts) and starting the tiers in order
* ``tiers``       one function per tier (PostgreSQL, Redis, memcached, the dataset, the Go tier, nginx)
* ``oha``, ``wrk``, ``nginx``  the tools it drives: their command lines, configuration and output parsers
* ``accounting``  each tier's CPU and share of the latency, and the samples of one load run
* ``workload``    the ``Microservices`` workload: requirements, prepare, run, cleanup
* ``k8s``         the same chain as Kubernetes manifests (rendered, not run)
"""

from ccbench.basics.netutil import free_ports
from ccbench.workloads.microservices.accounting import measurements, tier_cpu_seconds, tier_latency_ms
from ccbench.workloads.microservices.chain import PLACEMENT, Chain
from ccbench.workloads.microservices.k8s import k8s_manifests
from ccbench.workloads.microservices.nginx import nginx_argv, nginx_config, read_access_log
from ccbench.workloads.microservices.oha import mix_url_regex, oha_argv, oha_binary, parse_oha, user_pattern
from ccbench.workloads.microservices.params import DEFAULT_MIX, OPERATIONS, TIERS, MicroservicesParams
from ccbench.workloads.microservices.state import (
    REGISTRY_DIR,
    ChainState,
    Server,
    cleanup_stale,
    run_workdir,
    state_file,
    stop_chain,
)
from ccbench.workloads.microservices.tiers import make_certificate, pg_bin, seed_args, socialnet_binary
from ccbench.workloads.microservices.workload import Microservices
from ccbench.workloads.microservices.wrk import parse_wrk, wrk_argv, wrk_script

__all__ = [
    "DEFAULT_MIX",
    "OPERATIONS",
    "PLACEMENT",
    "REGISTRY_DIR",
    "TIERS",
    "Chain",
    "ChainState",
    "Microservices",
    "MicroservicesParams",
    "Server",
    "cleanup_stale",
    "free_ports",
    "k8s_manifests",
    "make_certificate",
    "measurements",
    "mix_url_regex",
    "nginx_argv",
    "nginx_config",
    "oha_argv",
    "oha_binary",
    "parse_oha",
    "parse_wrk",
    "pg_bin",
    "read_access_log",
    "run_workdir",
    "seed_args",
    "socialnet_binary",
    "state_file",
    "stop_chain",
    "tier_cpu_seconds",
    "tier_latency_ms",
    "user_pattern",
    "wrk_argv",
    "wrk_script",
]
