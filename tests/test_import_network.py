"""`ccbench import iperf3` and `ccbench import ping` through the real CLI: every interval and every
reply a sample, the SUM line the result, and comparisons of imported logs giving the ratios the
logs hold."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from conftest import run_ccbench

DATA = Path(__file__).parent / "data" / "network"
STUDY = DATA / "cvm-study"
#: the three machines of the study-shaped logs: plain VM (baseline), the same with swiotlb=force, SEV-SNP
MACHINES = ("plain-vm", "plain-vm-swiotlb-force", "sev-snp-vm")
_RATE = {"Kbits/sec": 1e-3, "Mbits/sec": 1.0, "Gbits/sec": 1e3}


def receiver_mbit(log: Path) -> float:
    """The geometric mean of the receiver's SUM rates as the log prints them (one per test; read here
    with a regex of its own, not the parser)."""
    rates = []
    for line in log.read_text().splitlines():
        if line.rstrip().endswith("receiver"):
            value, unit = re.search(r"([\d.]+) ([KMG]bits/sec)", line).groups()
            rates.append(float(value) * _RATE[unit])
    return math.exp(sum(map(math.log, rates)) / len(rates))


def bundle_of(stdout: str) -> Path:
    """The bundle an import printed (its notes follow, indented)."""
    (path,) = [line for line in stdout.splitlines() if line and not line[0].isspace()]
    return Path(path)


def samples(bundle: Path) -> list[dict]:
    return [json.loads(line) for line in (bundle / "samples.jsonl").read_text().splitlines()]


def import_study(tmp_path: Path, *extra_per_machine: tuple[str, ...]) -> dict[str, Path]:
    bundles = {}
    for index, machine in enumerate(MACHINES):
        extra = extra_per_machine[index] if extra_per_machine else ()
        done = run_ccbench(
            "import", "iperf3", STUDY / f"{machine}.txt", "--out", tmp_path / machine, "--label", machine, *extra
        )
        assert done.returncode == 0, done.stderr
        bundles[machine] = bundle_of(done.stdout)
    return bundles


def throughput_rows(tmp_path: Path, bundles: dict[str, Path]) -> dict[str, dict]:
    done = run_ccbench("compare", *bundles.values(), "--baseline", "plain-vm", "--json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {r["config"].split(" /")[0]: r for r in rows if r.get("metric") == "throughput"}


def test_imported_text_logs_give_the_ratios_the_logs_hold(tmp_path):
    bundles = import_study(tmp_path)
    rows = throughput_rows(tmp_path, bundles)
    base = receiver_mbit(STUDY / "plain-vm.txt")
    for machine in MACHINES[1:]:
        expected = receiver_mbit(STUDY / f"{machine}.txt") / base
        assert abs(rows[machine]["ratio"] - expected) < 1e-9, (machine, rows[machine]["ratio"], expected)
    assert round(rows["plain-vm-swiotlb-force"]["ratio"], 2) == 0.75 and round(rows["sev-snp-vm"]["ratio"], 2) == 0.17
    assert rows["sev-snp-vm"]["params"] == {"protocol": "udp", "streams": 1, "datagram_size": 1460}


def test_every_interval_is_a_sample_and_the_datagram_size_is_said_to_be_derived(tmp_path):
    done = run_ccbench("import", "iperf3", STUDY / "sev-snp-vm.txt", "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "datagram size 1460 B derived from the log's transfers and counts" in done.stdout
    found = samples(bundle_of(done.stdout))
    intervals = [s for s in found if s["metric"] == "sender_interval_throughput"]
    assert len(intervals) == 15  # three tests of five intervals
    assert [s["metadata"]["interval_start_s"] for s in intervals[:5]] == [0.0, 1.0, 2.0, 3.0, 4.0]
    results = [s for s in found if s["metric"] == "throughput"]
    assert [s["value"] for s in results] == [405.0, 407.0, 403.0]
    assert [s["repetition"] for s in results] == [0, 1, 2]  # each test one execution
    assert results[0]["metadata"]["datagram_size_derived"] is True
    assert [s["value"] for s in found if s["metric"] == "loss"] == [69.0, 68.0, 69.0]
    assert results[0]["kind"] == "network" and results[0]["workload"] == "network"


def test_json_states_the_machine_and_names_the_datagram_size(tmp_path):
    done = run_ccbench("import", "iperf3", DATA / "iperf3-udp-client.json", "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    bundle = bundle_of(done.stdout)
    found = samples(bundle)
    (result,) = [s for s in found if s["metric"] == "throughput"]
    assert result["params"]["datagram_size"] == 1460 and "datagram_size_derived" not in result["metadata"]
    assert len([s for s in found if s["metric"] == "sender_interval_throughput"]) == 8
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert "6.18" in json.dumps(manifest["environment"])  # the kernel release system_info names


def test_ping_each_reply_is_a_sample(tmp_path):
    done = run_ccbench("import", "ping", DATA / "ping-loopback.txt", "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    found = samples(bundle_of(done.stdout))
    assert [s["value"] for s in found if s["metric"] == "rtt"] == [0.148, 0.042, 0.040, 0.042, 0.042]
    assert [s["value"] for s in found if s["metric"] == "loss"] == [0.0]


def test_a_file_of_another_tool_is_a_one_line_error(tmp_path):
    done = run_ccbench("import", "iperf3", DATA / "ping-loopback.txt", "--out", tmp_path)
    assert done.returncode == 2 and "ping-loopback.txt" in done.stderr and "Traceback" not in done.stderr
    done = run_ccbench("import", "ping", DATA / "iperf3-tcp-client.txt", "--out", tmp_path)
    assert done.returncode == 2 and "ping" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_the_breakdown_attributes_the_bounce_buffer_share_of_a_sev_snp_vms_loss(tmp_path):
    """Issue 31's "Done when": a public CVM study's shape (a plain VM, the same VM booted with
    swiotlb=force, a SEV-SNP VM), facts the logs lack stated at import; the comparison holds the
    logs' ratios and the breakdown recognises the twin from its stated kernel command line."""
    bundles = import_study(
        tmp_path,
        ("--tee", "none"),
        ("--tee", "none", "--kernel-cmdline", "swiotlb=force"),
        ("--tee", "sev-snp"),
    )
    rows = throughput_rows(tmp_path, bundles)
    base = receiver_mbit(STUDY / "plain-vm.txt")
    twin_ratio = receiver_mbit(STUDY / "plain-vm-swiotlb-force.txt") / base
    cvm_ratio = receiver_mbit(STUDY / "sev-snp-vm.txt") / base
    snp = rows["sev-snp-vm"]
    assert abs(snp["ratio"] - cvm_ratio) < 1e-9 and abs(rows["plain-vm-swiotlb-force"]["ratio"] - twin_ratio) < 1e-9
    assert snp["layer"] == "TEE: SEV-SNP"  # stated, and read where a measured TEE is
    parts = {part["mechanism"]: part for part in snp["breakdown"]}
    bounce = parts["bounce-buffers"]
    assert bounce["source"] == "twin"
    # the breakdown's share is of the rate the CVM loses (docs/analysis.md, Breakdown), the study's own
    # reading: the twin loses about a third of what the CVM loses
    expected = (1 - twin_ratio) / (1 - cvm_ratio)
    assert 0.25 < expected < 0.4
    assert abs(bounce["share"] - expected) < 0.005
    assert bounce["ci_low"] <= bounce["share"] <= bounce["ci_high"] and bounce["ci_high"] - bounce["ci_low"] < 0.05
    assert abs(parts["unexplained"]["share"] - (1 - bounce["share"])) < 0.005
    # and on the log scale of the ratio, about 0.16
    assert abs(bounce["log_share"] - math.log(twin_ratio) / math.log(cvm_ratio)) < 0.005
    # the twin compares plain to plain: no TEE cost to split
    assert not rows["plain-vm-swiotlb-force"].get("breakdown")


# ---- issue 39: what a log holds that is not a measurement ------------------------------------------


def _rate_mbit(line: str) -> float:
    value, unit = re.search(r"([\d.]+) ([KMG]?bits/sec)", line).groups()
    return float(value) * {"bits/sec": 1e-6, **_RATE}[unit]


def test_intervals_omitted_by_dash_o_are_not_samples(tmp_path):
    log = DATA / "iperf3-tcp-client-omitted.txt"
    lines = log.read_text().splitlines()
    kept = [
        _rate_mbit(line)
        for line in lines
        if "/sec" in line and "omitted" not in line and not line.rstrip().endswith(("sender", "receiver"))
    ]
    done = run_ccbench("import", "iperf3", log, "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "2 intervals marked (omitted) by -O left out of the samples" in done.stdout
    intervals = [s["value"] for s in samples(bundle_of(done.stdout)) if s["metric"].endswith("interval_throughput")]
    assert intervals == kept and len(kept) == 4  # the measured intervals, not -O's warm-up


def test_an_old_servers_zero_byte_lines_are_placeholders_and_its_reverse_test_is_recognised(tmp_path):
    """iperf3 3.1's server prints 0.00 Bytes for the side it did not see; its intervals in a reverse
    test have no Retr/Cwnd columns."""
    log = DATA / "iperf3-3.1-server-forward-then-reverse.txt"
    sender_lines = [_rate_mbit(line) for line in log.read_text().splitlines() if line.rstrip().endswith("sender")]
    done = run_ccbench("import", "iperf3", log, "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    found = samples(bundle_of(done.stdout))
    forward = [s for s in found if s["repetition"] == 0]
    reverse = [s for s in found if s["repetition"] == 1]
    # forward: the server received; its "0.00 bits/sec sender" line is no sender's figure
    assert not [s for s in forward if s["metric"] == "sender_throughput"]
    assert [s["value"] for s in forward if s["metric"] == "throughput"] == [886.0]
    assert "reverse" not in forward[0]["params"]
    # reverse: the server sent; the real figure is its sender line, not the 0.00 receiver placeholder
    (result,) = [s for s in reverse if s["metric"] == "throughput"]
    assert result["value"] == sender_lines[1] > 0 and result["metadata"]["result_side"] == "sender"
    assert all(s["params"].get("reverse") is True for s in reverse)
    assert {s["metric"] for s in reverse} == {"throughput", "sender_throughput", "sender_interval_throughput"}
    assert "throughput is the sender's line" in done.stdout


def test_a_udp_server_log_after_the_client_terminated_reads_the_intervals_rate(tmp_path):
    log = DATA / "iperf3-3.1-udp-server-client-terminated.txt"
    text = log.read_text()
    intervals = re.findall(r"^\[\s*5\]\s+([\d.]+)-\s*([\d.]+)\s+sec\s+([\d.]+) MBytes\s+\d+ Mbits/sec", text, re.M)
    got = sum(float(mb) * 1024**2 for _, _, mb in intervals)
    span = float(intervals[-1][1]) - float(intervals[0][0])
    done = run_ccbench("import", "iperf3", log, "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "client has terminated" in done.stdout
    found = samples(bundle_of(done.stdout))
    (result,) = [s for s in found if s["metric"] == "throughput"]
    assert abs(result["value"] - got * 8 / span / 1e6) < 0.5 and 140 < result["value"] < 160
    assert result["metadata"]["result_side"] == "intervals"
    lost, total, percent = re.search(r"0\.00 bits/sec\s+[\d.]+ ms\s+(\d+)/(\d+) \(([\d.]+)%\)", text).groups()
    assert [s["value"] for s in found if s["metric"] == "loss"] == [float(percent)]
    assert len([s for s in found if s["metric"] == "interval_throughput"]) == len(intervals) == 13


def _reply_times(log: Path) -> list[float]:
    """The round trips of the reply lines a log prints (duplicates left out), read with a regex of its own."""
    return [float(m) for m in re.findall(r"^\d+ bytes from .*?time=([\d.]+) ms\s*$", log.read_text(), re.M)]


def test_busybox_ping_replies_are_read(tmp_path):
    """busybox prints seq=, not icmp_seq=, and counts duplicates in its statistics line."""
    log = DATA / "ping-busybox.txt"
    done = run_ccbench("import", "ping", log, "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    found = samples(bundle_of(done.stdout))
    rtts = [s for s in found if s["metric"] == "rtt"]
    assert [s["value"] for s in rtts] == _reply_times(log) and len(rtts) == 4
    assert [s["metadata"]["icmp_seq"] for s in rtts] == [0, 1, 3, 4]
    assert [s["value"] for s in found if s["metric"] == "loss"] == [20.0]
    assert "1 duplicate replies left out" in done.stdout


def test_bsd_macos_and_ipv6_ping_replies_are_read(tmp_path):
    for name in ("ping-macos.txt", "ping-iputils-ipv6.txt"):
        log = DATA / name
        done = run_ccbench("import", "ping", log, "--out", tmp_path / name)
        assert done.returncode == 0, done.stderr
        rtts = [s["value"] for s in samples(bundle_of(done.stdout)) if s["metric"] == "rtt"]
        assert rtts == _reply_times(log) and rtts, name


def test_ping_logs_to_different_destinations_are_different_cases(tmp_path):
    """Two iputils logs, one to 127.0.0.1 and one to ::1, imported together: two cases (one per
    destination, as each header names it), each holding only its own replies, never one merged case."""
    logs = {"127.0.0.1": DATA / "ping-loopback.txt", "::1": DATA / "ping-iputils-ipv6.txt"}
    done = run_ccbench("import", "ping", *logs.values(), "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    rtts = [s for s in samples(bundle_of(done.stdout)) if s["metric"] == "rtt"]
    by_destination: dict[str, list[float]] = {}
    for sample in rtts:
        by_destination.setdefault(sample["params"].get("destination"), []).append(sample["value"])
    assert {d: sorted(v) for d, v in by_destination.items()} == {
        d: sorted(_reply_times(log)) for d, log in logs.items()
    }
    shown = run_ccbench("show", bundle_of(done.stdout))
    assert "127.0.0.1" in shown.stdout and "::1" in shown.stdout, shown.stdout
