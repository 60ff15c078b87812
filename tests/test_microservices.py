"""The microservices workload for real: nginx, the Go tier, memcached, Redis and PostgreSQL started by
ccbench, driven by oha (open loop) and wrk (closed loop); a database killed mid-run; a run interrupted
by SIGINT or SIGKILL leaving nothing behind after `ccbench cleanup`; bad plans refused up front."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from conftest import PATIENCE_S, wait_until

from ccbench.bundle import read_bundle
from ccbench.workloads.base import ExecutionContext, PrepareContext, WorkloadFailed
from ccbench.workloads.microservices import (
    Chain,
    ChainState,
    Microservices,
    MicroservicesParams,
    Server,
    mix_url_regex,
    state_file,
)

REQUIREMENT = Microservices("probe", MicroservicesParams()).requirements()
needs_chain = pytest.mark.skipif(REQUIREMENT is not None, reason=f"{REQUIREMENT}")


def start_chain(base: Path, transport: str, **params) -> tuple[Microservices, PrepareContext]:
    workload = Microservices("ms", MicroservicesParams(**params))
    (base / "work").mkdir(parents=True)
    ctx = PrepareContext("ms", base / "work", base / "raw" / "prepare" / transport, {"transport": transport})
    workload.prepare(ctx)
    return workload, ctx


def execution(ctx: PrepareContext, name: str = "rep-0") -> ExecutionContext:
    return ExecutionContext(
        workload_name="ms",
        workdir=ctx.workdir,
        raw_dir=ctx.raw_dir.parent.parent / name,
        repetition=0,
        warmup=False,
        variant=ctx.variant,
    )


def chain_pids(state_path: Path) -> list[int]:
    return [s["pid"] for s in json.loads(state_path.read_text())["servers"] if s.get("pid")]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _running(name: str) -> bool:
    """Whether a process called ``name`` runs below this test process."""
    for child in psutil.Process().children(recursive=True):
        try:
            if child.name() == name:
                return True
        except psutil.Error:
            continue
    return False


def _served_since(access_log: Path, offset: int) -> bool:
    """Whether nginx logged a successful request after ``offset`` (its format starts: msec status ...)."""
    with open(access_log, "rb") as handle:
        handle.seek(offset)
        return any(line.split(b" ")[1:2] == [b"200"] for line in handle.read().splitlines())


def port_free(port: int) -> bool:
    """No socket listens on port (connections in TIME_WAIT after a killed server do not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


@pytest.fixture(scope="module", params=["plain", "tls"])
def chain(request, tmp_path_factory):
    base = tmp_path_factory.mktemp(f"chain-{request.param}")
    workload, ctx = start_chain(
        base,
        request.param,
        rates=[20],
        duration=5,
        closed_loop=True,
        wrk_threads=1,
        wrk_connections=4,
        wrk_duration=2,
        connections=8,
    )
    yield workload, ctx
    workload.cleanup(ctx)


@needs_chain
def test_chain_serves_a_low_fixed_rate_without_errors(chain):
    workload, ctx = chain
    measurements = workload.run(execution(ctx))
    by = {}
    for m in measurements:
        by.setdefault((m.metric, m.case.get("mode"), m.case.get("tier")), []).append(m)
    open_loop = {m.metric: m for m in measurements if m.case.get("mode") == "open" and "tier" not in m.case}
    assert open_loop["errors"].value == 0
    # open loop at 20 req/s for 5 s: requests were served, never more than were asked for (how many of
    # them finished inside the 5 s is the machine's speed, not the behaviour)
    assert 0 < open_loop["throughput"].metadata["requests_ok"] <= 20 * 5 * 1.05
    assert 0 < open_loop["throughput"].value <= 20 * 1.05
    assert 0 < open_loop["latency_p50"].value <= open_loop["latency_p99"].value <= open_loop["latency_max"].value
    closed = {m.metric: m for m in measurements if m.case.get("mode") == "closed" and "tier" not in m.case}
    assert closed["errors"].value == 0 and closed["throughput"].value > 0 and closed["latency_p99.9"].value > 0
    tiers = {m.case["tier"] for m in measurements if m.metric == "tier_cpu"}
    assert tiers == {"nginx", "app", "memcached", "redis", "postgres"}
    shares = {m.case["tier"]: m.value for m in measurements if m.metric == "tier_latency" and m.case["mode"] == "open"}
    assert {"nginx", "app", "postgres", "redis", "memcached"} <= set(shares)
    assert shares["redis"] > 0  # every timeline read waits on Redis
    if ctx.variant["transport"] == "tls":
        assert open_loop["latency_p50"].metadata["transport_cipher"].startswith("TLS_")
        assert open_loop["latency_p50"].metadata["tls_version"] == "TLSv1.3"
    else:
        assert "transport_cipher" not in open_loop["latency_p50"].metadata
    # the mix reached every operation (the open-loop regex and the wrk script each choose per request)
    log = Path(json.loads((ctx.raw_dir / "chain.json").read_text())["access_log"]).read_text()
    for path in ("home-timeline/read", "user-timeline/read", "post/compose"):
        assert path in log


def test_mix_weights_become_repeated_alternatives():
    regex = mix_url_regex("http://127.0.0.1:80", {"home_timeline": 6, "compose_post": 2, "follow": 0}, 1000)
    assert regex.count("home-timeline") == 3 and regex.count("post/compose") == 1 and "follow" not in regex
    assert regex.startswith("http://127.0.0.1:80(/wrk2-api/")


@needs_chain
def test_killed_database_is_counted_errors_and_a_failed_execution(tmp_path):
    workload, ctx = start_chain(
        tmp_path, "plain", rates=[40], duration=6, closed_loop=False, connections=8, request_timeout=2
    )
    try:
        state = ChainState.load(state_file(ctx.workdir))
        outcome: dict = {}

        def drive():
            try:
                outcome["measurements"] = workload.run(execution(ctx))
            except WorkloadFailed as exc:
                outcome["failed"] = str(exc)

        thread = threading.Thread(target=drive)
        thread.start()
        # the kill lands while the load runs and after some requests were served, however long the
        # run takes to get there: oha is running and nginx has logged a success since it started
        wait_until(lambda: _running("oha"), what="the load generator's start")
        access_log = Path(json.loads((ctx.raw_dir / "chain.json").read_text())["access_log"])
        offset = access_log.stat().st_size
        wait_until(lambda: _served_since(access_log, offset), what="a request served under load")
        os.kill(state.server("postgres").pid, signal.SIGKILL)
        thread.join(120)
        assert not thread.is_alive(), "the run hung after the database was killed"
        assert "failed" in outcome, outcome
        assert "requests failed at 40 req/s" in outcome["failed"] and "postgres" in outcome["failed"]
        summary = json.loads((ctx.raw_dir.parent.parent / "rep-0" / "summary.json").read_text())
        assert summary[0]["status_errors"] + summary[0]["transport_errors"] > 0 and summary[0]["ok"] > 0
    finally:
        workload.cleanup(ctx)


@needs_chain
def test_server_that_fails_to_start_is_named_with_its_log(tmp_path):
    chain = Chain(tmp_path, MicroservicesParams(), "plain")
    tmp_path.mkdir(exist_ok=True)
    server = Server(
        name="nginx",
        port=1,
        log=str(tmp_path / "nginx.log"),
        argv=["nginx", "-c", str(tmp_path / "missing.conf"), "-e", str(tmp_path / "nginx.log")],
    )
    with pytest.raises(WorkloadFailed) as failure:
        chain.start(server)
    assert failure.value.args[0].startswith("nginx exited with")
    assert "missing.conf" in failure.value.args[0]


PLAN = """
name = "microservices-test"
[defaults]
repetitions = {repetitions}
warmup = 0
cooldown = 0
variants = {{ transport = {transports} }}
[[workloads]]
kind = "microservices"
rates = [{rate}]
duration = {duration}
closed_loop = false
connections = 4
{extra}
"""


@needs_chain
def test_plan_runs_reports_and_stops_its_servers(tmp_path, ccbench):
    (tmp_path / "plan.toml").write_text(
        PLAN.format(rate=20, duration=2, extra="", repetitions=2, transports='["plain", "tls"]')
    )
    done = ccbench("run", tmp_path / "plan.toml", "--out", tmp_path / "out", "--workdir", tmp_path / "work")
    assert done.returncode == 0, done.stdout + done.stderr
    bundle = read_bundle(next((tmp_path / "out").iterdir()))
    metrics = {s["metric"] for s in bundle.samples}
    assert {
        "throughput",
        "latency_p99",
        "errors",
        "tier_cpu",
        "tier_latency",
        "loadgen_cpu",
        "client_saturated",
    } <= metrics
    assert all(s["params"]["rate"] == 20 for s in bundle.samples)
    assert {s["variant"]["transport"] for s in bundle.samples} == {"plain", "tls"}
    report = tmp_path / "report.md"
    done = ccbench("report", next((tmp_path / "out").iterdir()), "-o", report, "--format", "md")
    assert done.returncode == 0, done.stdout + done.stderr
    text = report.read_text()
    assert "Microservices (seed 002)" in text and "p99 latency relative to" in text and "95% interval" in text
    assert "where a request's time goes" in text
    states = list((tmp_path / "work" / "microservices").glob("chain-*.json"))
    assert states == []  # cleanup removed the record after stopping everything
    pgdata = json.loads(next((tmp_path / "out").rglob("chain.json")).read_text())["pgdata"]
    assert not [p for p in psutil.process_iter() if str(tmp_path) in " ".join(_cmdline(p)) or pgdata in _cmdline(p)]


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


@needs_chain
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_interrupted_run_leaves_no_server_or_port(tmp_path, sig):
    (tmp_path / "plan.toml").write_text(
        PLAN.format(rate=10, duration=60, extra="", repetitions=1, transports='["plain"]')
    )
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ccbench",
            "run",
            str(tmp_path / "plan.toml"),
            "--out",
            str(tmp_path / "out"),
            "--workdir",
            str(tmp_path / "work"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + PATIENCE_S
    state_path = None
    while time.monotonic() < deadline:
        found = list((tmp_path / "work" / "microservices").glob("chain-*.json"))
        if found and json.loads(found[0].read_text()).get("info", {}).get("rates"):
            state_path = found[0]
            break
        assert runner.poll() is None, runner.stdout.read().decode()
        time.sleep(0.2)
    assert state_path is not None, "the chain did not come up"
    time.sleep(1.5)  # the load is running
    state = json.loads(state_path.read_text())
    pids = chain_pids(state_path)
    ports = [s["port"] for s in state["servers"]]
    assert pids and all(alive(pid) for pid in pids)
    if sig == signal.SIGINT:
        runner.send_signal(signal.SIGINT)
        runner.wait(60)
    else:
        # the runner and its worker (with its load generator) die; the servers, in their own sessions, stay
        doomed = [runner.pid] + [
            c.pid for c in psutil.Process(runner.pid).children(recursive=True) if c.pid not in pids
        ]
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        runner.wait(10)
        assert any(alive(pid) for pid in pids)  # a killed runner cannot stop them itself
        done = subprocess.run(
            [sys.executable, "-m", "ccbench", "cleanup", "--workdir", str(tmp_path / "work")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "stopped postgres" in done.stdout
    for pid in pids:
        try:
            psutil.Process(pid).wait(10)
        except psutil.Error:
            pass
    assert not [pid for pid in pids if alive(pid)]
    assert all(port_free(port) for port in ports)
    extra = state.get("extra_dirs", [])
    assert not [d for d in extra if Path(d).exists()]


@pytest.mark.parametrize(
    "extra, rate, expected",
    [
        ("", 0, "rates must be positive"),
        ("", -5, "rates must be positive"),
        ("mix = { home_timeline = 5, read_everything = 1 }", 10, "unknown mix key(s) read_everything"),
    ],
)
def test_bad_rate_or_mix_is_a_one_line_error_before_anything_starts(tmp_path, ccbench, extra, rate, expected):
    (tmp_path / "plan.toml").write_text(
        PLAN.format(rate=rate, duration=5, extra=extra, repetitions=1, transports='["plain"]')
    )
    done = ccbench("run", tmp_path / "plan.toml", "--out", tmp_path / "out", "--workdir", tmp_path / "work")
    assert done.returncode == 2, done.stdout + done.stderr
    assert expected in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def _emulated_unavailable() -> str | None:
    from ccbench.topology import LinkShape, available

    return available(LinkShape(rate="200mbit"))


@needs_chain
def test_emulated_hosts_place_each_tier_in_its_own_namespace(tmp_path):
    reason = _emulated_unavailable()
    if reason:
        pytest.skip(reason)
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / ".lock").write_text("")  # a run's work directory, where topologies are recorded
    workload = Microservices(
        "ms",
        MicroservicesParams(
            hosts="emulated", edge_rate="200mbit", rates=[20], duration=3, closed_loop=False, connections=4
        ),
    )
    assert workload.requirements() is None
    workdir = tmp_path / "work" / "scratch" / "ms" / "plain"
    workdir.mkdir(parents=True)
    ctx = PrepareContext("ms", workdir, tmp_path / "raw" / "prepare" / "plain", {"transport": "plain"})
    try:
        workload.prepare(ctx)
        info = json.loads((ctx.raw_dir / "chain.json").read_text())
        addresses = {tier: place["address"] for tier, place in info["placement"].items()}
        assert len(set(addresses.values())) == 5 and all(a.startswith("10.204.") for a in addresses.values())
        state = ChainState.load(state_file(workdir))
        namespaces = {s.name: os.readlink(f"/proc/{s.pid}/ns/net") for s in state.servers}
        assert len(set(namespaces.values())) == 5 and os.readlink("/proc/self/ns/net") not in namespaces.values()
        measurements = workload.run(execution(ctx))
        errors = [m for m in measurements if m.metric == "errors"]
        assert errors and errors[0].value == 0
        assert errors[0].metadata["hosts"] == "emulated" and errors[0].metadata["edge_rate"] == "200mbit"
    finally:
        workload.cleanup(ctx)
    assert not list((tmp_path / "work" / "topology").glob("ms-*"))


@pytest.mark.parametrize("transport", ["plain", "tls"])
def test_kubernetes_manifests_validate_offline(tmp_path, transport):
    pytest.importorskip("kubernetes_validate", reason="installed by the fleet set-up component")
    from ccbench.basics import kube as k8s
    from ccbench.workloads.microservices import k8s_manifests

    objects = k8s_manifests(
        MicroservicesParams(),
        app_image="registry.example/ccbench-socialnet:1",
        loadgen_image="registry.example/oha:1.16",
        runtime_class="kata-qemu-snp",
        transport=transport,
        rate=250,
    )
    assert k8s.validate_objects(objects) == []
    deployments = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}
    assert set(deployments) == {"front", "app", "memcached", "redis", "postgres"}
    assert all(d["spec"]["template"]["spec"]["runtimeClassName"] == "kata-qemu-snp" for d in deployments.values())
    services = {o["metadata"]["name"] for o in objects if o["kind"] == "Service"}
    assert services == set(deployments)
    job = next(o for o in objects if o["kind"] == "Job")
    pod = job["spec"]["template"]["spec"]
    assert "runtimeClassName" not in pod  # the load generator stands for the edge device, outside the TEE
    args = pod["containers"][0]["args"]
    assert args[args.index("-q") + 1] == "250" and "--latency-correction" in args
    conf = next(o for o in objects if o["kind"] == "ConfigMap")["data"]["nginx.conf"]
    assert ("ssl_protocols TLSv1.3" in conf) == (transport == "tls")
    k8s.write_manifests(objects, tmp_path / "socialnet.yaml")
    assert k8s.validate_files([tmp_path / "socialnet.yaml"]) == []


def test_the_next_run_stops_servers_a_killed_run_left(tmp_path, ccbench):
    """`ccbench run` cleans up at start what `ccbench cleanup` would: a chain state left by a killed
    run (here a real process recorded as its only server) is stopped before the new run starts."""
    work = tmp_path / "work"
    (work / "microservices").mkdir(parents=True)
    leftover = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        server = Server(
            name="leftover",
            argv=["sleep", "600"],
            log=str(tmp_path / "leftover.log"),
            port=1,
            pid=leftover.pid,
            create_time=psutil.Process(leftover.pid).create_time(),
        )
        ChainState(path=work / "microservices" / "chain-killed.json", servers=[server]).save()
        (tmp_path / "plan.toml").write_text(
            'name = "after-a-kill"\n[[workloads]]\nkind = "systeminfo"\nname = "systeminfo"\n'
        )
        done = ccbench("run", tmp_path / "plan.toml", "--out", tmp_path / "out", "--workdir", work)
        assert done.returncode == 0, done.stdout + done.stderr
        assert leftover.wait(30) is not None
        assert not (work / "microservices" / "chain-killed.json").exists()
    finally:
        if leftover.poll() is None:
            leftover.kill()
