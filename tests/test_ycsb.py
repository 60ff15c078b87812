"""The real YCSB core with ccbench's RocksDB binding, on storage variants."""

import os
from pathlib import Path

import pytest

from ccbench.bundle import read_bundle
from ccbench.workloads.ycsb import Ycsb, YcsbParams, measurements_from, parse_report
from ccbench.workloads.base import WorkloadFailed

REPORT = """[OVERALL], RunTime(ms), 1782
[OVERALL], Throughput(ops/sec), 561.1672278338945
[CLEANUP], Operations, 1
[CLEANUP], AverageLatency(us), 2491.0
[READ], Operations, 480
[READ], AverageLatency(us), 112.2
[READ], 95thPercentileLatency(us), 81
[READ], 99thPercentileLatency(us), 1352
[READ], Return=OK, 480
[UPDATE], Operations, 520
[UPDATE], AverageLatency(us), 150.5
[UPDATE], 95thPercentileLatency(us), 201
[UPDATE], 99thPercentileLatency(us), 900
[UPDATE], Return=OK, 520
"""


def test_report_parsing():
    measurements = measurements_from(parse_report(REPORT), "run", "a")
    by_key = {(m.metric, m.case.get("operation")): m for m in measurements}
    assert by_key[("throughput", None)].value == pytest.approx(561.167, rel=1e-4)
    assert by_key[("throughput", None)].better == "higher"
    assert by_key[("latency_p99", "read")].value == 1352
    assert by_key[("latency_avg", "update")].value == 150.5
    assert not any(m.case.get("operation") == "cleanup" for m in measurements)
    with pytest.raises(WorkloadFailed, match="failed"):
        measurements_from(parse_report(REPORT + "[READ], Return=ERROR, 3\n"), "run", "a")


needs_binding = pytest.mark.skipif(Ycsb("y", YcsbParams()).requirements() is not None,
                                   reason="YCSB binding not built (bash scripts/setup.sh --with ycsb)")


@needs_binding
@pytest.mark.skipif(os.geteuid() != 0, reason="the tmpfs and fscrypt variants need root")
def test_ycsb_runs_on_each_variant(tmp_path, ccbench):
    (tmp_path / "plan.toml").write_text("""
name = "ycsb-test"
[defaults]
repetitions = 1
cooldown = 0
variants = { storage = ["disk", "tmpfs", "encrypted"] }
[storage]
tmpfs_size = "256M"
image_size = "256M"
[[workloads]]
kind = "ycsb"
workloads = ["a", "e"]
recordcount = 300
operationcount = 300
[[workloads]]
kind = "ycsb"
name = "ycsb-durable"
variants = { storage = ["tmpfs", "encrypted:gocryptfs", "ext4-loop"] }
workloads = ["f"]
recordcount = 100
operationcount = 100
sync_writes = true
write_buffer_mb = 1
block_cache_mb = 8
""")
    done = ccbench("run", tmp_path / "plan.toml", "--out", tmp_path / "out", "--workdir", tmp_path / "work")
    assert done.returncode == 0, done.stdout + done.stderr
    bundle = read_bundle(next((tmp_path / "out").iterdir()))
    seen = {(s["variant"]["storage"], s["params"]["workload"], s["params"]["phase"]) for s in bundle.samples
            if s["metric"] == "throughput"}
    for storage in ("disk", "tmpfs", "encrypted"):
        for letter in ("a", "e"):
            assert (storage, letter, "load") in seen and (storage, letter, "run") in seen
    scans = [s for s in bundle.samples if s["params"].get("operation") == "scan"]
    assert scans and all(s["value"] > 0 for s in scans)
    durable = [s for s in bundle.samples if s["workload"] == "ycsb-durable"]
    assert {s["variant"]["storage"] for s in durable} >= {"tmpfs", "ext4-loop"}
    assert all(s["params"]["sync_writes"] is True for s in durable)
    assert {s["params"].get("operation") for s in durable} >= {"read", "read-modify-write", "update"}
    # the binding was handed the RocksDB options (YCSB echoes its command line into the log)
    logs = list(bundle.path.glob("raw/**/ycsb-f-t.stdout")) + list(bundle.path.glob("raw/**/ycsb-f-t.stderr"))
    assert any("rocksdb.sync=true" in log.read_text() and "rocksdb.block_cache_mb=8" in log.read_text() for log in logs)


def test_binding_properties_follow_the_params(tmp_path):
    from ccbench.workloads.base import ExecutionContext

    captured = []

    class Recorder(ExecutionContext):
        def run_command(self, argv, **kwargs):
            captured.append(list(argv))
            raise WorkloadFailed("stop after the first command")

    ctx = Recorder(workload_name="y", workdir=tmp_path, raw_dir=tmp_path / "raw", repetition=0, warmup=False, variant={})
    workload = Ycsb("y", YcsbParams(workloads=["d"], sync_writes=True, write_buffer_mb=4, recordcount=7))
    with pytest.raises(WorkloadFailed):
        workload.run(ctx)
    argv = captured[0]
    properties = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-p")
    assert argv[argv.index("-db") + 1] == "ccbench.ycsb.RocksDbBinding" and "-load" in argv
    assert properties["rocksdb.sync"] == "true" and properties["rocksdb.write_buffer_mb"] == "4"
    assert "rocksdb.block_cache_mb" not in properties
    assert properties["requestdistribution"] == "latest" and properties["insertproportion"] == "0.05"
    assert properties["recordcount"] == "7" and properties["rocksdb.dir"].startswith(str(tmp_path))
    assert not (tmp_path / "ycsb-rocksdb-d").exists(), "the database is removed even when a phase fails"


YCSB_DATA = Path(__file__).parent / "data" / "ycsb"


@pytest.mark.parametrize("name, operations", [
    # captured from the real YCSB core with ccbench's RocksDB binding (2000 records and operations)
    ("workload-a-run", {"read", "update"}),
    ("workload-e-run", {"insert", "scan"}),
    ("workload-a-load", {"insert"}),
])
def test_parser_on_captured_ycsb_output(name, operations):
    text = (YCSB_DATA / f"{name}.txt").read_text()
    report = parse_report(text)
    # YCSB's garbage-collector lines are no operations
    assert "[TOTAL_GCs]" in text and not any("GC" in operation for operation in report)
    measurements = measurements_from(report, "run", name[9])
    [throughput] = [m for m in measurements if m.metric == "throughput"]
    line = next(line for line in text.splitlines() if line.startswith("[OVERALL], Throughput(ops/sec)"))
    assert throughput.value == pytest.approx(float(line.rsplit(",", 1)[1]))
    assert {m.case["operation"] for m in measurements if "operation" in m.case} == operations
    for m in measurements:
        if m.metric == "latency_p99":
            source = f"[{m.case['operation'].upper()}], 99thPercentileLatency(us), "
            assert f"{source}{m.value:g}" in text
