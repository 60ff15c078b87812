"""The secure channel seen from Python: Noise interoperability with an independent implementation
(the Python noiseprotocol package), and the transport workload end to end (run, compare, report).
The Rust security tests run from test_transport_rust.py."""

import json
import struct
import subprocess
from pathlib import Path

import pytest

from ccbench.bundle import read_bundle
from ccbench.workloads.transport import binary_path

REPO = Path(__file__).resolve().parents[1]
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
    rows = [json.loads(line) for line in compared.stdout.splitlines()]
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
