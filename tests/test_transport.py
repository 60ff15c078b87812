"""The secure channel seen from Python: Noise interoperability with an independent implementation
(the Python noiseprotocol package), and the transport workload end to end (run, compare, report).
The Rust security tests run from test_transport_rust.py."""

import json
import struct
import subprocess
from pathlib import Path

import pytest

from ccbench.bundle import read_bundle
from ccbench.workloads.base import WorkloadFailed
from ccbench.workloads.transport import (
    TransportParams,
    bench_argv,
    binary_path,
    label_cipher,
    measurements_from_document,
    read_document,
)

REPO = Path(__file__).resolve().parents[1]
#: a real output of `ccchannel-bench --transport all --pipe all --handshakes 20 --sizes 1536,1048576 --quick`
RECORDED = REPO / "tests" / "data" / "transport" / "ccchannel-bench-quick.json"
needs_binary = pytest.mark.skipif(not binary_path().exists(), reason="run 'bash scripts/setup.sh --with transport'")


@needs_binary
@pytest.mark.parametrize("cipher", ["AESGCM", "ChaChaPoly"])
def test_handshake_interoperates_with_python_noiseprotocol(cipher):
    connection = pytest.importorskip(
        "noise.connection", reason="noiseprotocol is not installed: run 'bash scripts/setup.sh --with test'"
    )
    NoiseConnection = connection.NoiseConnection  # noqa: N806 - the class, under its own name

    initiator = NoiseConnection.from_name(f"Noise_NN_25519_{cipher}_SHA256".encode())
    initiator.set_as_initiator()
    initiator.start_handshake()
    first = initiator.write_message()
    peer = subprocess.Popen(
        [str(binary_path()), "interop-responder", cipher],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    stdout, stderr = peer.communicate(struct.pack(">H", len(first)) + first, timeout=30)
    assert peer.returncode == 0, stderr.decode()
    (length,) = struct.unpack(">H", stdout[:2])
    initiator.read_message(stdout[2 : 2 + length])
    assert initiator.handshake_finished
    assert initiator.get_handshake_hash().hex() == stderr.decode().strip()
    rest = stdout[2 + length :]
    (length,) = struct.unpack(">H", rest[:2])
    assert initiator.decrypt(rest[2 : 2 + length]) == b"interop ok"


@needs_binary
def test_transport_workload_runs_each_variant(tmp_path, ccbench):
    (tmp_path / "plan.toml").write_text("""
name = "transport-test"
[defaults]
repetitions = 1
cooldown = 0
variants = { transport = ["plain", "tls", "securechannel"] }
[[workloads]]
kind = "transport"
handshakes = 50
sizes = [1536, 65536]
pipes = ["duplex", "tcp"]
quick = true
""")
    done = ccbench("run", tmp_path / "plan.toml", "--out", tmp_path / "out", "--workdir", tmp_path / "work")
    assert done.returncode == 0, done.stdout + done.stderr
    bundle = read_bundle(next((tmp_path / "out").iterdir()))
    by_transport = {}
    for sample in bundle.samples:
        by_transport.setdefault(sample["variant"]["transport"], set()).add(sample["metric"])
    assert {"rtt_p50", "throughput"} <= by_transport["plain"]
    assert {"handshake_p50", "rtt_p99", "throughput"} <= by_transport["tls"]
    assert {
        "handshake_p50",
        "aead_seal_open",
        "x25519_handshake_floor",
        "noise_nn_handshake_p50",
        "target_handshake_vs_x25519_floor",
        "verify_snp_report_p50",
        "verify_tdx_quote_p50",
    } <= by_transport["securechannel"]
    # every TLS sample names the version and suite rustls negotiated in that run
    tls_samples = [s for s in bundle.samples if s["variant"]["transport"] == "tls"]
    suites = {s["metadata"].get("transport_cipher") for s in tls_samples}
    assert len(suites) == 1 and suites.pop().startswith("TLS13_"), suites
    assert {s["metadata"].get("tls_version") for s in tls_samples} == {"TLSv1_3"}
    # the cost of verifying one real report is its own metric, not folded into the handshake
    verify = [s for s in bundle.samples if s["metric"] == "verify_snp_report_p50"]
    assert verify and all(s["value"] > 0 for s in verify)
    compared = ccbench("compare", bundle.path, "--baseline", "plain", "--json")
    assert compared.returncode == 0, compared.stderr
    rows = [r for r in map(json.loads, compared.stdout.splitlines()) if "finding" not in r]
    assert {r["config"].split(" / ")[-1] for r in rows} == {"tls", "securechannel"}
    report = ccbench("report", bundle.path, "--baseline", "plain", "-o", tmp_path / "r.html")
    assert report.returncode == 0, report.stderr
    assert ">Transport</h2>" in (tmp_path / "r.html").read_text()


@needs_binary
def test_the_benchmark_refuses_unknown_transport_and_pipe_names():
    for args in (["--transport", "securechanel"], ["--pipe", "udp"]):
        done = subprocess.run([str(binary_path()), *args, "--quick"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, (args, done.stdout[-300:])
        assert "unknown" in done.stderr and done.stdout == ""


def samples_of(transport):
    document = read_document(RECORDED.read_text())
    measurements = measurements_from_document(document, transport)
    label_cipher(measurements, document, transport)
    return document, measurements


def test_a_recorded_document_gives_each_figure_with_its_case():
    document, measurements = samples_of("plain")

    def metric(name):
        return [m for m in measurements if m.metric == name]

    # the recorded run had every transport (a workload run has one): 4 handshakes, 12 sizes x pipes
    assert len(measurements) == 4 * 3 + 12 * 3 + 12
    for q in ("p50", "p95", "p99"):
        assert [m.value for m in metric(f"handshake_{q}")] == [h[f"{q}_us"] for h in document["handshake"]]
        assert [m.value for m in metric(f"rtt_{q}")] == [r[f"{q}_us"] for r in document["rtt"]]
    assert [m.case for m in metric("handshake_p99")] == [{"pipe": h["pipe"]} for h in document["handshake"]]
    assert [m.case for m in metric("rtt_p50")] == [
        {"payload": r["payload"], "pipe": r["pipe"]} for r in document["rtt"]
    ]
    assert [m.metadata["n"] for m in metric("rtt_p95")] == [400, 20] * 6
    throughput = metric("throughput")
    assert [m.value for m in throughput] == [t["MBps"] for t in document["throughput"]]
    assert {m.unit for m in throughput} == {"MB/s"} and {m.better for m in throughput} == {"higher"}
    # the secure channel's own figures belong to its variant only; the cipher names every sample
    assert not any(m.metric.startswith(("aead", "target_", "verify_")) for m in measurements)
    assert {m.metadata["cipher"] for m in measurements} == {document["cipher"]}


def test_a_recorded_document_gives_the_secure_channel_its_floors_and_targets():
    document, measurements = samples_of("securechannel")
    by_metric = {m.metric: m for m in measurements}
    assert by_metric["aead_seal_open"].value == document["aead"]["seal_open_MBps"]
    floor = by_metric["x25519_handshake_floor"]
    assert floor.value == document["x25519"]["nn_handshake_floor_us"] and floor.better is None
    assert set(floor.metadata) == {"ring_keygen_plus_agree_p50_us", "snow_keygen_plus_agree_p50_us", "cipher"}
    assert by_metric["noise_nn_handshake_p50"].metadata["n"] == document["snow_nn_handshake"]["n"]
    assert by_metric["verify_tdx_quote_p50"].value == document["verify"]["tdx_quote"]["p50_us"]
    targets = {name.removeprefix("target_"): m for name, m in by_metric.items() if name.startswith("target_")}
    assert set(targets) == set(document["targets"])
    assert targets["handshake_vs_tls"].unit == "ratio" and targets["handshake_p50_us"].unit == ""
    assert targets["throughput_1MiB_share_of_aead"].unit == "ratio"
    assert targets["handshake_p50_us"].metadata["met"] is document["targets"]["handshake_p50_us"]["met"]


def test_a_recorded_document_labels_tls_samples_with_the_negotiated_suite():
    document, measurements = samples_of("tls")
    assert {m.metadata["transport_cipher"] for m in measurements} == {"TLS13_AES_256_GCM_SHA384"}
    assert {m.metadata["tls_version"] for m in measurements} == {"TLSv1_3"}
    assert not any("cipher" in m.metadata for m in measurements)


def test_the_command_line_names_one_pipe_or_all():
    one = bench_argv("tls", TransportParams(pipes=["tcp"], sizes=[1536, 4096], handshakes=50, quick=True))
    assert one[1:] == ["--transport", "tls", "--pipe", "tcp", "--handshakes", "50", "--sizes", "1536,4096", "--quick"]
    both = bench_argv("plain", TransportParams())
    assert both[both.index("--pipe") + 1] == "all" and "--quick" not in both


def test_output_that_is_not_json_is_a_one_line_failure():
    with pytest.raises(WorkloadFailed, match="^ccchannel-bench printed no JSON: [^\n]*$"):
        read_document("thread 'main' panicked at src/main.rs")
