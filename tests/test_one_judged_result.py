"""One judged result in every output (docs/analysis.md, "Verdict semantics"): a layer's "no cost above"
bound is its verdict's alone (a chart's or a case's floor is said as what it is), rows left out as
implausible are in no count and drawn grey, and in a run settled by layer "significant" means called
across the layer. With a scripted run settled by layer (test_layer_across) and an fio bundle whose
direct I/O on fscrypt is left out (test_layer_settle_plausible)."""

import json
import re

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from bundles import write
from conftest import ccbench_in_process
from test_layer_across import VALUES, two_workloads
from test_layer_settle_plausible import fio_samples
from test_scheduling import measured

from ccbench.analysis import format as fmt
from ccbench.analysis.comparison import comparison
from ccbench.analysis.judgement import semantics
from ccbench.analysis.settling.settled import NOT_CALLED


def settled_by_layer(tmp_path, monkeypatch):
    """Two workloads settled by layer at 3 rounds, 30% noise: tmpfs 3x slower in b alone (its own
    interval clear of 1, not called across the layer by e-BH), ext4-loop no cost (left open)."""

    def scripted(job):
        value = job.variant["storage"]
        scale = 3.0 if (job.name, value) == ("b", "tmpfs") else 1.0
        rng = np.random.default_rng([ord(job.name), VALUES.index(value), job.repetition])
        return measured(scale * rng.lognormal(0, 0.3))

    result, _ = two_workloads(tmp_path, monkeypatch, scripted, settle="2%", max_repetitions=3, settle_by="layer")
    return result.bundle


def bounds_in(text: str) -> set[str]:
    return set(re.findall(r"no cost above (\S+?x)\b", " ".join(text.split())))


def test_a_layers_bound_is_its_verdicts_in_every_output(tmp_path, monkeypatch, capsys):
    bundle = settled_by_layer(tmp_path, monkeypatch)
    layers = comparison([bundle]).verdicts()
    open_layers = [v for v in layers if v.judgement is not None and v.judgement.kind == semantics.NONE_SEEN]
    assert open_layers, [v.words() for v in layers]
    # the figures the verdict itself judged: each open layer's, and its workloads' own lines
    judged = {fmt.mde(v.judgement.mde) for v in open_layers} | {
        fmt.mde(j.mde) for v in layers for _, j in v.workload_judgements if j.kind == semantics.NONE_SEEN
    }
    report = tmp_path / "r.md"
    code, _, err = ccbench_in_process(capsys, "report", str(bundle), "-o", str(report))
    assert code == 0, err
    text = report.read_text()
    # no chart, table or note states a "no cost above" of its own (the trial: 5.9x, 5.3x, 9.3x, 2.8x)
    assert bounds_in(text) and bounds_in(text) <= judged, (bounds_in(text), judged)
    for layer in open_layers:
        assert f"{layer.layer}: {layer.words()}" in " ".join(text.split())
    # the per-case figure is said as what it is, never as a bound
    assert "per-case detection floor" in text and "(median MDE)" not in text and "smallest detectable" not in text
    # the heatmap's own figure (the trial's 5.3x) labelled as the chart's, not as a bound
    assert "all cells together: the chart's detection floor " in " ".join(text.split())
    assert "all cells together: no cost above" not in text
    # --summary --json: the fraction keeps its name, its printed words beside it
    code, out, err = ccbench_in_process(capsys, "compare", str(bundle), "--summary", "--json")
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines() if '"layer"' in line and '"words"' in line]
    by_layer = {r["layer"]: r for r in records}
    for layer in open_layers:
        record = by_layer[layer.layer]
        assert record["no_cost_above"] == fmt.mde(layer.judgement.mde)
        assert f"no cost above {record['no_cost_above']}" in record["words"]
        assert record["detection_floor"] == f"{fmt.mde(record['mde'])} (median of its cases' MDE)"
    assert all(r["no_cost_above"] is None for r in records if r["layer"] not in {v.layer for v in open_layers})


def test_a_case_not_called_across_its_layer_is_flagged_and_the_methods_say_why(tmp_path, monkeypatch, capsys):
    bundle = settled_by_layer(tmp_path, monkeypatch)
    table = comparison([bundle]).table
    row = table[(table["workload"] == "b") & table["config"].str.contains("tmpfs")].iloc[0]
    # its own interval clear of 1, yet not significant: e-BH did not call it across its layer
    assert row["ci_low"] > 1 and not row["significant"], row
    assert NOT_CALLED in row["flags"] and "not significant" in row["flags"]
    unclear = table[(table["ci_low"] <= 1) & (table["ci_high"] >= 1)]
    assert not unclear.empty and not any(NOT_CALLED in flags for flags in unclear["flags"])
    report = tmp_path / "r.md"
    code, _, err = ccbench_in_process(capsys, "report", str(bundle), "-o", str(report))
    assert code == 0, err
    text = " ".join(report.read_text().split())
    assert (
        "Significant = the interval excludes 1; but in a run settled by layer a case is significant only where "
        "called across its layer (e-BH at 5% over the layer's cases)"
    ) in text
    assert "rows significant (interval clear of 1x; in a run settled by layer, called across its layer" in text
    assert NOT_CALLED in text  # the row's flag in the comparison table


def test_a_run_not_settled_by_layer_keeps_the_plain_definition(tmp_path, capsys):
    from ccbench.report.sections.methods import layer_settled_note

    bundle = write(tmp_path / "out", "vm", "none", fio_samples(direct=False))
    assert layer_settled_note(comparison([bundle]).table) == ""
    assert layer_settled_note(None) == ""


def fio_bundle(tmp_path):
    """fio's direct I/O on fscrypt (left out as implausible) with latency percentiles."""
    samples = fio_samples(direct=True)
    samples += [
        s.model_copy(update={"metric": metric, "value": s.value * factor})
        for s in samples
        if s.metric == "clat_mean"
        for metric, factor in (("clat_p50", 0.9), ("clat_p99", 3.0))
    ]
    return write(tmp_path / "out", "vm", "none", samples)


def test_rows_left_out_are_in_no_count_and_drawn_grey(tmp_path, capsys):
    bundle = fio_bundle(tmp_path)
    table = comparison([bundle]).table
    left_out = semantics.implausible_mask(table)
    assert left_out.sum() == 10 and table["significant"].sum() == 30  # all "significant" on their own intervals
    report, figures = tmp_path / "r.md", tmp_path / "figures"
    code, _, err = ccbench_in_process(capsys, "report", str(bundle), "-o", str(report), "--figures", str(figures))
    assert code == 0, err
    text = " ".join(report.read_text().split())
    assert "30 comparisons, 20 significant at 95%, 10 left out as implausible (the lint says why)" in text
    # the latency chart: the fscrypt lines grey and dashed, said in its caption
    assert "grey dashed: left out of the verdict as implausible" in text
    [chart] = figures.glob("*clat*percentiles.svg")
    svg = chart.read_text()
    groups = re.findall(r'<g id="(series:[^"]+)">\s*<path[^>]*style="([^"]*)"', svg)
    grey = {gid for gid, style in groups if gid.endswith(":left-out")}
    assert len(grey) == 2 and all("#888888" in style for gid, style in groups if gid in grey), groups
    assert len(groups) == 8  # four configurations, two cases: only fscrypt's two lines are grey


def test_export_names_why_a_sample_is_left_out(tmp_path, capsys):
    bundle = fio_bundle(tmp_path)
    for name in ("x.parquet", "x.csv"):
        out = tmp_path / name
        code, _, err = ccbench_in_process(capsys, "export", str(bundle), "-o", str(out))
        assert code == 0, err
        frame = pq.read_table(out).to_pandas() if name.endswith("parquet") else pd.read_csv(out, keep_default_na=False)
        marked = frame[frame["implausible"] != ""]
        assert set(marked["config"]) == {"vm / no TEE / fscrypt"} and len(marked) == 50
        assert set(marked["implausible"]) == {"direct I/O served buffered on fscrypt"}
        assert (frame[frame["config"] != "vm / no TEE / fscrypt"]["implausible"] == "").all()


def test_export_of_plausible_rows_has_an_empty_column(tmp_path, capsys):
    bundle = write(tmp_path / "out", "vm", "none", fio_samples(direct=False))
    out = tmp_path / "x.parquet"
    code, _, err = ccbench_in_process(capsys, "export", str(bundle), "-o", str(out))
    assert code == 0, err
    assert (pq.read_table(out).column("implausible").to_pandas() == "").all()
