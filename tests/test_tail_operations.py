"""A percentile on few operations (docs/analysis.md, "Operations per execution"): fio's and YCSB's
latency samples record the operations they rest on, and the lint says which compared percentile
rows rest on fewer than 100 beyond the percentile in an execution."""

import json
from pathlib import Path

import pytest
from bundles import sample, write

from ccbench.analysis.comparison import comparison
from ccbench.analysis.judgement.lint_run import MIN_TAIL, beyond
from ccbench.workloads.fio import _load_json_output, parse_fio_json
from ccbench.workloads.ycsb import measurements_from, parse_report

FIO_DATA = Path(__file__).parent / "data" / "fio"
REPORT = """[OVERALL], RunTime(ms), 1782
[OVERALL], Throughput(ops/sec), 561.1672278338945
[READ], Operations, 2480
[READ], AverageLatency(us), 112.2
[READ], 99thPercentileLatency(us), 1352
[READ], Return=OK, 2480
"""


def test_ycsb_and_fio_latencies_record_the_operations_they_rest_on():
    by_metric = {m.metric: m for m in measurements_from(parse_report(REPORT), "run", "a")}
    assert by_metric["latency_p99"].metadata["operations"] == 2480
    assert "operations" not in by_metric["throughput"].metadata
    text = (FIO_DATA / "randrw-4k.json").read_text()
    document = json.loads(text)
    ios = {d: document["jobs"][0][d]["total_ios"] for d in ("read", "write")}
    for m in parse_fio_json(_load_json_output(text)):
        if m.metric in ("clat_p50", "clat_p99"):
            assert m.metadata["operations"] == ios[m.case["direction"]] > 0
    assert beyond("latency_p99", 2480) == pytest.approx(24.8)
    assert beyond("latency_p99999", 10**6) == pytest.approx(10)
    assert beyond("clat_p50", 100) == 50 and beyond("throughput", 100) is None


def test_the_lint_names_the_percentile_rows_that_rest_on_few_operations(tmp_path):
    """A YCSB-shaped bundle: the read p99 rests on 25 operations beyond it (2,500 reads), the update
    p99 on 200 (20,000 updates), the average latency on none in particular."""
    samples = []
    for storage, scale in (("disk", 1.0), ("tmpfs", 0.9)):
        for rep in range(3):
            for operation, count in (("read", 2500), ("update", 20000)):
                case = {"workload": "a", "phase": "run", "operation": operation}
                for metric in ("latency_p99", "latency_avg"):
                    samples.append(
                        sample(
                            workload="ycsb",
                            kind="ycsb",
                            params=case,
                            variant={"storage": storage},
                            metric=metric,
                            unit="us",
                            value=scale * (1000 + rep),
                            repetition=rep,
                            metadata={"case": case, "operations": count},
                        )
                    )
    bundle = write(tmp_path, "box", "none", samples)
    findings = [f for f in comparison([bundle]).findings(per_sample=False) if f.code == "few-tail-operations"]
    assert len(findings) == 1, findings
    (finding,) = findings
    assert finding.what.startswith(f"ycsb: 1 percentile row rests on fewer than {MIN_TAIL} operations beyond")
    # the row, the configuration with the fewest, and both figures in words
    assert "latency_p99 on box / no TEE / " in finding.what, finding.what
    assert "2,500 operations, 25 beyond it" in finding.what and "update" not in finding.what
    [(row, values)] = finding.evidence.items()
    assert row.startswith("ycsb ") and " latency_p99 on box / no TEE / " in row, row
    assert values == {"operations": 2500, "beyond the percentile": 25.0}
    assert "operationcount" in finding.advice
    # the report's evidence column reads it as words, never a Python repr
    from ccbench.report.sections.lint import evidence_text

    text = evidence_text(finding.evidence)
    assert text == f"{row}: operations=2500, beyond the percentile=25.0", text
    failed = {"fio": {"failed": [{"key": "k1", "status": "failed", "error": None}, {"key": "k2"}]}}
    assert evidence_text(failed) == "fio: failed=(key=k1, status=failed) (key=k2)"
