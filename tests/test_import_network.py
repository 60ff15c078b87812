"""`ccbench import iperf3` and `ccbench import ping` through the real CLI: every interval and every
reply a sample, the SUM line the result, and comparisons of imported logs giving the ratios the
logs hold."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import run_ccbench

DATA = Path(__file__).parent / "data" / "network"
STUDY = DATA / "cvm-study"
#: the three machines of the study-shaped logs: plain VM (baseline), the same with swiotlb=force, SEV-SNP
MACHINES = ("plain-vm", "plain-vm-swiotlb-force", "sev-snp-vm")
_RATE = {"Kbits/sec": 1e-3, "Mbits/sec": 1.0, "Gbits/sec": 1e3}


def receiver_mbit(log: Path) -> float:
    """The receiver's SUM rate as the log prints it (read here with a regex of its own, not the parser)."""
    line = next(line for line in log.read_text().splitlines() if line.rstrip().endswith("receiver"))
    value, unit = re.search(r"([\d.]+) ([KMG]bits/sec)", line).groups()
    return float(value) * _RATE[unit]


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
        bundles[machine] = Path(done.stdout.strip().splitlines()[-1])
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
    found = samples(Path(done.stdout.strip()))
    intervals = [s for s in found if s["metric"] == "sender_interval_throughput"]
    assert len(intervals) == 5
    assert [s["metadata"]["interval_start_s"] for s in intervals] == [0.0, 1.0, 2.0, 3.0, 4.0]
    (result,) = [s for s in found if s["metric"] == "throughput"]
    assert result["value"] == 408.0 and result["metadata"]["datagram_size_derived"] is True
    (loss,) = [s for s in found if s["metric"] == "loss"]
    assert loss["value"] == 69.0
    assert result["kind"] == "network" and result["workload"] == "network"


def test_json_states_the_machine_and_names_the_datagram_size(tmp_path):
    done = run_ccbench("import", "iperf3", DATA / "iperf3-udp-client.json", "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    bundle = Path(done.stdout.strip())
    found = samples(bundle)
    (result,) = [s for s in found if s["metric"] == "throughput"]
    assert result["params"]["datagram_size"] == 1460 and "datagram_size_derived" not in result["metadata"]
    assert len([s for s in found if s["metric"] == "sender_interval_throughput"]) == 8
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert "6.18" in json.dumps(manifest["environment"])  # the kernel release system_info names


def test_ping_each_reply_is_a_sample(tmp_path):
    done = run_ccbench("import", "ping", DATA / "ping-loopback.txt", "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    found = samples(Path(done.stdout.strip()))
    assert [s["value"] for s in found if s["metric"] == "rtt"] == [0.148, 0.042, 0.040, 0.042, 0.042]
    assert [s["value"] for s in found if s["metric"] == "loss"] == [0.0]


def test_a_file_of_another_tool_is_a_one_line_error(tmp_path):
    done = run_ccbench("import", "iperf3", DATA / "ping-loopback.txt", "--out", tmp_path)
    assert done.returncode == 2 and "ping-loopback.txt" in done.stderr and "Traceback" not in done.stderr
    done = run_ccbench("import", "ping", DATA / "iperf3-tcp-client.txt", "--out", tmp_path)
    assert done.returncode == 2 and "ping" in done.stderr and len(done.stderr.strip().splitlines()) == 1
