"""The microservices workload's parsers and generated files, on output recorded from the real tools
(oha 1.16, Debian's wrk and nginx driving the workload's own chain: see tests/data/microservices/README.md),
and the pieces that need no running chain: the nginx configuration checked by the real nginx, the wrk
script, the run's certificate and the chain's state file."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from ccbench.workloads.base import WorkloadFailed
from ccbench.workloads.microservices import (
    DEFAULT_MIX,
    ChainState,
    Microservices,
    Server,
    cleanup_stale,
    make_certificate,
    nginx_config,
    oha_argv,
    parse_oha,
    parse_wrk,
    read_access_log,
    tier_latency_ms,
    wrk_script,
)
from ccbench.workloads.microservices.nginx import make_temp_dirs

DATA = Path(__file__).parent / "data" / "microservices"
RECORDED = json.loads((DATA / "recorded.json").read_text())


def recorded(name: str) -> str:
    return (DATA / name).read_text()


# ---- oha


def test_oha_open_loop_summary_counts_successes_and_converts_latency_to_ms():
    raw = json.loads(recorded("oha-open-loop.json"))
    summary = parse_oha(recorded("oha-open-loop.json"))
    assert summary["ok"] == sum(raw["statusCodeDistribution"].values()) == 150
    assert summary["status_errors"] == summary["transport_errors"] == 0 and summary["error_kinds"] == {}
    assert summary["duration_s"] == raw["summary"]["total"]
    assert summary["throughput"] == pytest.approx(150 / raw["summary"]["total"])
    assert summary["p99"] == pytest.approx(raw["latencyPercentiles"]["p99"] * 1000)
    assert summary["max"] == pytest.approx(raw["summary"]["slowest"] * 1000)
    assert summary["mean"] == pytest.approx(raw["summary"]["average"] * 1000)
    assert 0 < summary["p50"] <= summary["p90"] <= summary["p99"] <= summary["p99.9"] <= summary["max"]


def test_oha_status_errors_are_counted_by_code_and_left_out_of_throughput():
    summary = parse_oha(recorded("oha-status-errors.json"))
    raw = json.loads(recorded("oha-status-errors.json"))["statusCodeDistribution"]
    assert summary["ok"] == raw["200"] and summary["status_errors"] == raw["403"] > 0
    assert summary["error_kinds"] == {"HTTP 403": raw["403"]}
    # oha's own rate counts the failed requests too; achieved throughput is the successful ones
    assert summary["throughput"] < summary["attempted_per_s"]


def test_oha_refused_connections_are_transport_errors_without_latency():
    summary = parse_oha(recorded("oha-refused.json"))
    assert summary["ok"] == 0 and summary["throughput"] == 0.0
    assert summary["transport_errors"] == 20
    assert list(summary["error_kinds"]) == ["Connection refused (os error 111)"]
    assert summary["p50"] is None and summary["max"] is None and summary["mean"] is None


def test_oha_output_that_is_not_json_fails_the_execution_with_a_reason():
    with pytest.raises(WorkloadFailed, match="oha printed no JSON summary"):
        parse_oha("Error: connection refused\n")


def test_oha_command_line_is_open_loop_only_with_a_rate():
    open_loop = oha_argv("http://h:1/x", rate=50, duration=3, connections=8, timeout=5, cacert="/ca.pem")
    assert open_loop[open_loop.index("-q") + 1] == "50" and "--latency-correction" in open_loop
    assert open_loop[open_loop.index("--cacert") + 1] == "/ca.pem"
    assert open_loop[-2:] == ["--rand-regex-url", "http://h:1/x"]
    assert open_loop[open_loop.index("-z") + 1] == "3s" and open_loop[open_loop.index("-c") + 1] == "8"
    capacity = oha_argv("http://h:1/x", rate=None, duration=3, connections=8, timeout=5, cacert=None)
    assert "-q" not in capacity and "--latency-correction" not in capacity and "--cacert" not in capacity


# ---- wrk


def test_wrk_summary_of_the_mix_agrees_with_wrks_own_report():
    text = recorded("wrk-mix.txt")
    summary = parse_wrk(text)
    requests = int(re.search(r"(\d+) requests in", text).group(1))
    average_ms = float(re.search(r"Latency\s+([0-9.]+)ms", text).group(1))
    assert summary["ok"] == requests and summary["status_errors"] == summary["transport_errors"] == 0
    assert summary["mean"] == pytest.approx(average_ms, abs=0.01)
    assert summary["throughput"] == pytest.approx(requests / summary["duration_s"])
    assert 0 < summary["p50"] <= summary["p90"] <= summary["p99"] <= summary["p99.9"] <= summary["max"]


def test_wrk_status_errors_when_the_application_tier_is_down():
    text = recorded("wrk-app-stopped.txt")
    summary = parse_wrk(text)
    non_2xx = int(re.search(r"Non-2xx or 3xx responses: (\d+)", text).group(1))
    assert summary["ok"] == 0 and summary["status_errors"] == non_2xx > 0
    assert summary["error_kinds"] == {"status": non_2xx}
    # failed responses are not throughput (wrk's own Requests/sec counts them)
    assert summary["throughput"] == 0.0 < float(re.search(r"Requests/sec:\s+([0-9.]+)", text).group(1))


def test_wrk_output_without_the_scripts_summary_fails_with_its_end():
    text = "\n".join(line for line in recorded("wrk-mix.txt").splitlines() if not line.startswith("CCBENCH "))
    with pytest.raises(WorkloadFailed, match="(?s)wrk printed no summary: .*Transfer/sec"):
        parse_wrk(text)


def test_wrk_script_is_the_recorded_one_and_carries_the_mix():
    script = wrk_script(DEFAULT_MIX, 1000)
    assert script == recorded("mix.lua")
    for op, weight in DEFAULT_MIX.items():
        assert f'w={weight}, op="{op}"' in script
    assert 'path="/wrk2-api/home-timeline/read?user_id=USER&start=0&stop=10"' in script
    assert "\\?" not in script  # the regex escape of the oha pattern does not reach wrk's paths
    assert "local users = 1000" in script
    # done() prints every field parse_wrk reads
    for key in ("requests", "duration_us", "connect", "read", "write", "status", "timeout", "p50", "p999", "mean"):
        assert f'"{key}": %' in script
    without_follow = wrk_script({**DEFAULT_MIX, "follow": 0}, 100)
    assert 'op="follow"' not in without_follow and "local users = 100" in without_follow


# ---- nginx's access log and the tiers' latency shares


def test_access_log_rows_carry_times_and_server_timing():
    rows, offset = read_access_log(DATA / "access.log", 0)
    assert offset == (DATA / "access.log").stat().st_size
    assert len(rows) == len(recorded("access.log").splitlines())
    served = [r for r in rows if r[1] == 200]
    assert served and all(r[3] is not None and {"pg", "redis", "memcached", "app"} <= set(r[4]) for r in served)
    # nginx answered the paths it does not serve itself: no upstream, no Server-Timing
    refused = [r for r in rows if r[1] == 403]
    assert refused and all(r[3] is None and r[4] == {} for r in refused)


def test_access_log_is_read_from_an_offset_and_only_up_to_the_last_whole_line(tmp_path):
    lines = recorded("access.log").splitlines(keepends=True)
    log = tmp_path / "access.log"
    log.write_text("".join(lines[:10]) + lines[10][:20])  # nginx is mid-way through a line
    rows, offset = read_access_log(log, 0)
    assert len(rows) == 10 and offset == len("".join(lines[:10]).encode())
    with open(log, "a") as handle:
        handle.write(lines[10][20:] + lines[11])
    more, end = read_access_log(log, offset)
    assert len(more) == 2 and end == log.stat().st_size
    assert more[0] == read_access_log(DATA / "access.log", 0)[0][10]
    assert read_access_log(tmp_path / "missing.log", 7) == ([], 7)


def test_tier_latency_shares_add_up_to_nginxs_request_time():
    rows, _ = read_access_log(DATA / "access.log", 0)
    start, stop = RECORDED["windows"]["oha-open-loop"]
    client_mean = parse_oha(recorded("oha-open-loop.json"))["mean"]
    shares = tier_latency_ms(rows, start, stop, client_mean)
    assert set(shares) == {"nginx", "proxy_hop", "app", "postgres", "redis", "memcached", "client"}
    assert all(value >= 0 for value in shares.values())
    assert shares["redis"] > 0 and shares["postgres"] > 0  # every timeline read waits on Redis, posts on PostgreSQL
    # the log read independently: whole lines in the window that went upstream
    fields = [line.split(" ") for line in recorded("access.log").splitlines()]
    window = [f for f in fields if start <= float(f[0]) <= stop + 1.0 and f[3] != "-"]
    request_ms = sum(float(f[2]) for f in window) * 1000 / len(window)
    assert sum(v for tier, v in shares.items() if tier != "client") == pytest.approx(request_ms)
    assert shares["client"] == pytest.approx(max(client_mean - request_ms, 0.0))


def test_tier_latency_is_empty_without_upstream_requests_in_the_window():
    rows, _ = read_access_log(DATA / "access.log", 0)
    refused = [r for r in rows if r[3] is None]
    assert tier_latency_ms(refused, refused[0][0], refused[-1][0], 1.0) == {}
    last = rows[-1][0]
    assert tier_latency_ms(rows, last + 10, last + 20, 1.0) == {}
    start, stop = RECORDED["windows"]["oha-open-loop"]
    assert "client" not in tier_latency_ms(rows, start, stop, None)


# ---- the nginx configuration


def _recorded_nginx_settings() -> tuple[Path, str, int, str]:
    conf = recorded("nginx.conf")
    directory = Path(re.search(r"^pid (.+)/nginx\.pid;$", conf, re.M).group(1))
    host, port = re.search(r"listen ([0-9.]+):(\d+);", conf).groups()
    app = re.search(r"server ([0-9.]+:\d+);", conf).group(1)
    return directory, host, int(port), app


def test_nginx_configuration_is_the_one_nginx_ran_with():
    directory, host, port, app = _recorded_nginx_settings()
    assert nginx_config(directory, host, port, app, 1, None, None) == recorded("nginx.conf")


def test_nginx_log_format_is_what_the_access_log_reader_expects():
    conf = nginx_config(Path("/c"), "127.0.0.1", 80, "127.0.0.1:81", 1, None, None)
    assert "'$msec $status $request_time $upstream_response_time \"$upstream_http_server_timing\" $uri'" in conf
    assert "access_log /c/logs/access.log ccbench" in conf
    assert "ssl" not in conf


NGINX = shutil.which("nginx")
needs_nginx = pytest.mark.skipif(NGINX is None, reason="nginx is not installed (set-up component microservices)")


def _nginx_test(directory: Path, conf: str) -> subprocess.CompletedProcess:
    (directory / "logs").mkdir(parents=True, exist_ok=True)
    make_temp_dirs(directory)
    path = directory / "nginx.conf"
    path.write_text(conf)
    return subprocess.run(
        [NGINX, "-t", "-c", str(path), "-p", str(directory), "-e", str(directory / "logs" / "error.log")],
        capture_output=True,
        text=True,
        timeout=60,
    )


@needs_nginx
def test_nginx_accepts_the_plain_configuration(tmp_path):
    done = _nginx_test(tmp_path, nginx_config(tmp_path, "127.0.0.1", 8080, "127.0.0.1:8081", 2, None, None))
    assert done.returncode == 0, done.stderr
    assert "syntax is ok" in done.stderr


@needs_nginx
def test_nginx_accepts_the_tls_configuration_with_the_runs_certificate(tmp_path):
    _, cert = make_certificate(tmp_path / "tls", "127.0.0.1")
    conf = nginx_config(tmp_path, "127.0.0.1", 8443, "127.0.0.1:8081", 1, cert, cert.with_name("key.pem"))
    assert "listen 127.0.0.1:8443 ssl;" in conf and "ssl_protocols TLSv1.3;" in conf
    done = _nginx_test(tmp_path, conf)
    assert done.returncode == 0, done.stderr


# ---- the run's certificate


def test_run_certificate_is_p256_for_the_address_and_localhost_signed_by_a_ca_whose_key_is_gone(tmp_path):
    ca_path, cert_path = make_certificate(tmp_path / "tls", "10.204.0.3")
    ca = x509.load_pem_x509_certificate(ca_path.read_bytes())
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    cert.verify_directly_issued_by(ca)
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey) and cert.public_key().curve.name == "secp256r1"
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["10.204.0.3"]
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert (cert_path.with_name("key.pem").stat().st_mode & 0o777) == 0o600
    assert sorted(p.name for p in (tmp_path / "tls").iterdir()) == ["ca.pem", "cert.pem", "key.pem"]


# ---- the chain's state


def test_chain_state_round_trips_and_stale_cleanup_skips_what_it_cannot_read(tmp_path):
    registry = tmp_path / "microservices"
    registry.mkdir()
    state = ChainState(path=registry / "chain-a.json", extra_dirs=[str(tmp_path / "pg")], info={"rates": [5.0]})
    state.servers.append(Server(name="redis", argv=["redis-server"], log="r.log", port=7, pid=None))
    state.save()
    loaded = ChainState.load(state.path)
    assert loaded.servers == state.servers and loaded.info == {"rates": [5.0]}
    assert json.loads(state.path.read_text())["servers"][0]["name"] == "redis"
    assert not list(registry.glob("*.tmp"))
    (tmp_path / "pg").mkdir()
    (registry / "chain-broken.json").write_text("{")
    done = cleanup_stale(tmp_path)
    assert done == [f"removed {tmp_path / 'pg'}", f"removed {state.path}"]
    assert not state.path.exists() and (registry / "chain-broken.json").exists()


def test_workload_declares_its_set_up_component_and_stops_what_a_killed_run_left(tmp_path):
    assert Microservices.setup_component == "microservices"
    (tmp_path / "microservices").mkdir()
    (tmp_path / "pg").mkdir()
    ChainState(path=tmp_path / "microservices" / "chain-b.json", extra_dirs=[str(tmp_path / "pg")]).save()
    assert Microservices.cleanup_stale(tmp_path) == [
        f"removed {tmp_path / 'pg'}",
        f"removed {tmp_path / 'microservices' / 'chain-b.json'}",
    ]
    assert Microservices.cleanup_stale(tmp_path) == []
