"""The ``securechannel`` transport: OpenFL talks plaintext gRPC, and each party's TCP connection is
carried through ``ccchannel-proxy`` (the attested secure channel of crates/): one server proxy beside
the aggregator, one client proxy beside each collaborator, evidence checked at connect."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import IO

from ccbench.model import Measurement
from ccbench.workloads.base import ExecutionContext, WorkloadFailed, tail
from ccbench.workloads.federated.placement import LocalHosts

REPO = Path(__file__).resolve().parents[4]
PROXY_BINARY = REPO / "crates" / "target" / "release" / "ccchannel-proxy"


def proxy_binary() -> Path:
    return Path(os.environ.get("CCBENCH_CHANNEL_PROXY", PROXY_BINARY))


def _evidence_arguments(channel_evidence: str) -> list[str]:
    """What a proxy shows and what it accepts from its peer."""
    if channel_evidence == "mock":
        return ["--evidence", "mock:mock-tee:ccbench-federated", "--accept-technology", "mock-tee"]
    return ["--evidence", "tsm", "--accept-technology", "sev-snp", "--accept-technology", "tdx"]


def start_proxies(
    hosts: LocalHosts,
    ctx: ExecutionContext,
    channel_evidence: str,
    names: list[str],
    agg_port: int,
    proxies: dict[str, subprocess.Popen],
    logs: dict[str, IO[bytes]],
) -> dict[str, str]:
    """One server proxy beside the aggregator, one client proxy beside each collaborator; returns
    the address each collaborator dials (its own proxy). Started proxies land in ``proxies`` at
    once, so that the caller stops them even when a later one fails to start."""
    evidence = _evidence_arguments(channel_evidence)
    listen_any = "127.0.0.1" if hosts.local else "0.0.0.0"
    server_argv = [
        str(proxy_binary()),
        "server",
        "--listen",
        f"{listen_any}:0",
        "--target",
        f"127.0.0.1:{agg_port}",
        *evidence,
    ]
    server_address = _start_proxy(hosts, ctx, "aggregator", "proxy-aggregator", server_argv, proxies, logs)
    server_port = server_address.rpartition(":")[2]
    connect = {}
    for name in names:
        argv = [
            str(proxy_binary()),
            "client",
            "--listen",
            "127.0.0.1:0",
            "--server",
            f"{hosts.address('aggregator')}:{server_port}",
            *evidence,
        ]
        connect[name] = _start_proxy(hosts, ctx, name, f"proxy-{name}", argv, proxies, logs)
    return connect


def _start_proxy(hosts, ctx, host_name, key, argv, proxies, logs) -> str:
    logs[key] = open(ctx.raw_dir / f"{key}.stderr", "wb")
    proc = hosts.popen(host_name, argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=logs[key])
    proxies[key] = proc
    line = proc.stdout.readline().decode(errors="replace")  # {"ready": "<addr>", ...} once listening
    try:
        ready = json.loads(line)
    except ValueError:
        raise WorkloadFailed(
            f"ccchannel-proxy for {host_name} did not start: "
            f"{tail((ctx.raw_dir / f'{key}.stderr').read_text(errors='replace'), 3, 400)}"
        ) from None
    (ctx.raw_dir / f"{key}.ready.json").write_text(line)
    return ready["ready"]


def proxy_cipher(raw_dir: Path) -> str | None:
    """The AEAD the channels negotiated, as the first proxy that reported one said at start."""
    for path in sorted(raw_dir.glob("proxy-*.ready.json")):
        cipher = json.loads(path.read_text()).get("cipher")
        if cipher:
            return cipher
    return None


def proxy_measurements(raw_dir: Path, proxies: dict[str, subprocess.Popen]) -> list[Measurement]:
    """The proxies' own counters (printed when they stopped): channels set up and handshake time."""
    out = []
    for key, proc in proxies.items():
        text = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
        (raw_dir / f"{key}.stdout").write_text(text)
        stats = _last_counters(text)
        if not stats or not stats["accepted"]:
            continue
        party = key.removeprefix("proxy-")
        out.append(
            Measurement(
                metric="channel_handshake_time",
                unit="us",
                value=stats["handshake_us_mean"],
                case={"collaborator": party} if party != "aggregator" else {"proxy": "aggregator"},
                metadata={
                    "channels": stats["accepted"],
                    "refused": stats["refused"],
                    "what": "mean connect-to-channel-ready time per TCP connection (handshake and evidence check)",
                },
            )
        )
    return out


def _last_counters(text: str) -> dict | None:
    stats = None
    for line in text.splitlines():
        try:
            document = json.loads(line)
        except ValueError:
            continue
        if "accepted" in document:
            stats = document
    return stats
