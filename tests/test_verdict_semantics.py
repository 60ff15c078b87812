"""Verdict semantics (issue 40, docs/analysis.md "Verdict semantics"), held over generated
comparisons: any mix of signs and sizes, n = 1..30 a side, 1..100 cases, implausible rows or none.

No line of any output (the headline in both sizes, the sentence, the verdict table, the
``--summary --json`` record, the report's chart takeaway, ``gate --markdown``) calls a scope
(layer, workload, case) costless, "within the noise" or "not distinguishable" when that scope holds
a significant row; a pooled figure is given only over rows that agree in direction; "no cost above"
only where nothing in the scope is significant; rows marked implausible are named and never
counted. CI runs a few examples; ``CCBENCH_HYPOTHESIS_EXAMPLES=500`` runs more.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ccbench.analysis import format as fmt  # noqa: E402
from ccbench.analysis.judgement import semantics  # noqa: E402
from ccbench.analysis.judgement.headline import layer_lines  # noqa: E402
from ccbench.analysis.judgement.verdict import verdicts  # noqa: E402
from ccbench.analysis.judgement.verdict_table import verdict_table  # noqa: E402
from ccbench.analysis.rows.compare import COMPARE_COLUMNS, with_time_equivalent  # noqa: E402
from ccbench.analysis.settling import gate, gate_pages  # noqa: E402
from ccbench.commands.compare import verdict_record  # noqa: E402
from ccbench.report import takeaways  # noqa: E402

EXAMPLES = int(os.environ.get("CCBENCH_HYPOTHESIS_EXAMPLES", "40"))
#: words that call a scope costless or unresolved
NOTHING = ("no cost", "within the noise", "not distinguishable", "do not differ", "no significant change")
LAYERS = ["TEE: TDX", "storage encryption: fscrypt", "in-memory storage: tmpfs"]
WORKLOADS = ["fio", "compression", "ycsb", "pyperformance"]


@st.composite
def cases(draw):
    """One comparison row's parts: layer, workload, case, effect (log of the time ratio), n, spread."""
    return {
        "layer": draw(st.sampled_from(LAYERS)),
        "workload": draw(st.sampled_from(WORKLOADS)),
        "case": draw(st.sampled_from(["4k randread", "1m randread", "4k randwrite", "1m randwrite", "a", "b"])),
        "effect": draw(
            st.one_of(
                st.floats(-0.05, 0.05),  # near no change
                st.floats(-6.0, 6.0),  # up to 400x either way
            )
        ),
        "n": draw(st.integers(1, 30)),
        "spread": draw(st.floats(0.001, 2.0)),
        "better": draw(st.sampled_from(["lower", "higher"])),
        "implausible": draw(st.sampled_from(["", "", "", "faster than tmpfs", "served buffered"])),
    }


def comparison_frame(parts: list[dict], with_implausible: bool) -> pd.DataFrame:
    """Comparison rows as ccbench.analysis.rows.compare makes them: ratio and its 95% interval (none with
    one value a side), significant where the interval leaves out 1."""
    rows = []
    for index, part in enumerate(parts):
        te = math.exp(part["effect"])
        computable = part["n"] >= 2
        half = 1.96 * part["spread"] / math.sqrt(part["n"]) if computable else math.nan
        te_low, te_high = (
            (math.exp(part["effect"] - half), math.exp(part["effect"] + half))
            if computable
            else (
                math.nan,
                math.nan,
            )
        )
        significant = bool(computable and (te_low > 1 or te_high < 1))
        if part["better"] == "higher":
            ratio, low, high = 1 / te, 1 / te_high, 1 / te_low
        else:
            ratio, low, high = te, te_low, te_high
        rows.append(
            {
                "workload": part["workload"],
                "case": f"{part['case']} #{index}",
                "params": "{}",
                "metric": "throughput" if part["better"] == "higher" else "time",
                "unit": "MB/s" if part["better"] == "higher" else "s",
                "better": part["better"],
                "baseline": "plain",
                "config": f"protected / {part['layer']}",
                "baseline_median": 100.0,
                "median": 100.0 * ratio,
                "ratio": ratio,
                "ci_low": low,
                "ci_high": high,
                "p_value": 0.01 if significant else (0.5 if computable else math.nan),
                "overhead_percent": (te - 1) * 100,
                "mde": 0.5 * part["spread"] if computable else math.nan,
                "significant": significant,
                "verdict": ("slower" if te > 1 else "faster") if significant else "not significant",
                "cv_baseline": 0.01,
                "cv": 0.01,
                "n_baseline": part["n"],
                "n": part["n"],
                "machines_baseline": 1,
                "machines": 1,
                "interval_from": "same machines",
                "contended_baseline": 0,
                "contended": 0,
                "layer": part["layer"],
                "flags": [],
                "implausible": part["implausible"],
            }
        )
    frame = pd.DataFrame(rows, columns=list(dict.fromkeys([*COMPARE_COLUMNS, "implausible"])))
    return frame if with_implausible else frame.drop(columns=["implausible"])


def _says_nothing(text: str) -> bool:
    lowered = text.lower()
    return any(word in lowered for word in NOTHING)


def _plausible(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[~semantics.implausible_mask(rows)]


def _shows(rows: pd.DataFrame) -> bool:
    return bool(_plausible(rows)["significant"].any())


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=EXAMPLES <= 50,
)
@given(parts=st.lists(cases(), min_size=1, max_size=100), with_implausible=st.booleans())
def test_no_output_calls_a_scope_with_a_significant_row_costless(parts, with_implausible):
    table = comparison_frame(parts, with_implausible)
    items = verdicts(table)
    # every layer is said, even one whose every row was left out as implausible
    assert {item.layer for item in items} == set(table["layer"])
    cells = verdict_table(items)
    for item, (_, cell) in zip(items, cells.iterrows(), strict=True):
        rows = table[table["layer"] == item.layer]
        short, full = layer_lines(item), layer_lines(item, full=True)
        record = verdict_record(item)
        json.dumps(record, default=str)  # serialisable as compare prints it
        # sizes a person reads: at most two lines of at most 100 columns in the summary
        # (a line too long is wrapped, never cut: each physical line within 100 columns)
        physical = [part for line in short + full for part in line.split("\n")]
        assert len(short) <= 2 and all(len(line) <= 100 for line in physical), short + full
        outputs = [short[0], item.sentence(), cell["typical cost"], record["words"], record["headline"][0]]
        if _shows(rows):
            for text in outputs:
                assert not _says_nothing(text), (text, item.judgement)
            assert item.distinguishable and record["distinguishable"]
        # the scope of each workload: its own line in the full headline and in the JSON record
        for workload, judged in item.workload_judgements:
            scope = rows[rows["workload"] == workload]
            mine = [line for line in full[1:] if line.strip().startswith(f"{workload}:")]
            words = next(w["words"] for w in record["workload_judgements"] if w["workload"] == workload)
            if _shows(scope):
                assert not any(_says_nothing(text) for text in [*mine, words]), (mine, words)
            else:
                assert judged.significant == 0
        judgement = item.judgement
        plausible = _plausible(rows)
        significant = plausible[plausible["significant"]]
        te = with_time_equivalent(significant)["te"]
        # "no cost above" only where nothing in the scope is significant
        if "no cost above" in short[0]:
            assert significant.empty
        # a pooled figure only over significant rows of one direction, and on their side
        if judgement.kind == semantics.POOLED:
            assert (te > 1).all() or (te < 1).all()
            assert (judgement.typical >= 1) == bool((te > 1).all())
            assert ("slower" in fmt.effect(judgement.typical)) == (judgement.typical >= 1)
        if judgement.kind == semantics.DISAGREE:
            assert "slower" in short[0] and "faster" in short[0], short[0]
        # rows marked implausible: never counted, always named
        if with_implausible:
            marked = rows[semantics.implausible_mask(rows)]
            # the counts are of the rows judged: the left-out ones are named apart, in no count
            assert item.comparisons + item.left_out_rows == len(rows)
            assert item.left_out_rows == len(marked)
            assert item.significant == int(rows[~semantics.implausible_mask(rows)]["significant"].sum())
            assert judgement.comparisons <= len(plausible)
            for _, row in marked.iterrows():
                assert any(row["implausible"] in text for text in judgement.left_out)
            if not marked.empty:
                assert "left out:" in short[-1] or "left out:" in item.sentence()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(parts=st.lists(cases(), min_size=1, max_size=60))
def test_the_report_and_the_gate_say_the_same(parts):
    table = comparison_frame(parts, True)
    for workload in table["workload"].unique():
        scope = table[table["workload"] == workload]
        sentence = takeaways.from_comparison(table, workload, set(scope["metric"]), "plain")
        if _shows(scope):
            assert not _says_nothing(sentence.split(" Left out:")[0]), sentence
    results = gate.judge(table)
    text = gate_pages.markdown(results, "plain", None)
    lines = text.splitlines()
    for result in results:
        if result.significant:
            assert "no significant change" not in result.why
            assert ("slower" in result.why) == (result.change_percent > 0), result.why
            mine = [line for line in lines if line.startswith(f"| {result.name} |")]
            assert mine and not any(_says_nothing(line) for line in mine), mine
    if any(r.significant and r.change_percent > 0 for r in results) and "passed" in text.splitlines()[0]:
        assert "significantly slower" in text.splitlines()[0]


def test_one_value_per_benchmark_is_pooled_across_benchmarks():
    """Seed 000's shape: 92 benchmarks of one value each, 90 faster: a sign test and the geometric mean
    with an interval from the spread between benchmarks; never "no cost" (failed on main's code:
    "no cost distinguishable from noise (typical -23.4%)")."""
    rng = np.random.default_rng(0)
    effects = np.log(0.77) + rng.normal(0, 0.05, 92)
    effects[[3, 50]] = np.log(1.04)
    parts = [
        {"layer": "TEE: TDX", "workload": "pyperformance", "case": f"b{i}", "effect": float(e), "n": 1,
         "spread": 0.1, "better": "lower", "implausible": ""}
        for i, e in enumerate(effects)
    ]  # fmt: skip
    (item,) = verdicts(comparison_frame(parts, False))
    line = layer_lines(item)[0]
    mean = math.exp(float(effects.mean()))
    # the geometric mean in the one convention, as pyperf compare_to says it ("1.30x faster")
    assert f"faster in 90 of 92 benchmarks, {fmt.effect(mean)} [" in line, line
    assert item.judgement.kind == semantics.ACROSS and item.judgement.sign_p < 0.001
    assert not _says_nothing(line) and not _says_nothing(item.sentence())
    assert "sign test" in item.sentence()


def test_cases_that_disagree_are_a_range_with_directions():
    """The storage case of issue 40: fscrypt 1m randread 340x slower, 4k randwrite 2.9x faster,
    both significant: no pooled figure, no "no cost above", both ends named with their directions
    (failed on main's code: "no cost above 1083.7%")."""
    parts = [
        {"layer": "storage encryption: fscrypt", "workload": "fio", "case": case, "effect": math.log(te), "n": 3,
         "spread": spread, "better": "higher", "implausible": ""}
        for case, te, spread in (("1m randread", 340, 0.9), ("4k randwrite", 1 / 2.9, 0.05), ("4k randread", 30, 1.5),
                                 ("1m randwrite", 1.0, 0.4))
    ]  # fmt: skip
    (item,) = verdicts(comparison_frame(parts, False))
    line = layer_lines(item)[0]
    assert "1m randread #0 340x slower ... 4k randwrite #1 2.9x faster" in line, line
    assert "no cost" not in line and item.judgement.kind == semantics.DISAGREE
    assert math.isnan(item.typical)  # no pooled number in the JSON either


def test_one_convention():
    assert fmt.effect(2.9, 2.6, 3.3) == "2.9x slower [2.6x, 3.3x]"
    assert fmt.effect(1 / 1.31) == "1.31x faster"
    assert fmt.effect(1.042, 1.021, 1.063) == "4.2% slower [2.1%, 6.3%]"
    assert fmt.effect(340.2) == "340x slower"
    # an interval that reaches the other direction says so
    assert fmt.effect(1.01, 0.98, 1.031) == "1.0% slower [1.02x faster, 3.1% slower]"
    # a throughput's ratio is inverted: 0.25x the rate is 4x slower
    assert fmt.row_effect({"ratio": 0.25, "ci_low": 0.2, "ci_high": 0.3, "better": "higher"}) == (
        "4.0x slower [3.3x, 5.0x]"
    )


# ---- matched baselines and sizes a person reads, through the command line -----------------------------

MILAN = {"model": "AMD EPYC 7763 64-Core Processor", "vendor": "AuthenticAMD", "family": "25", "model_number": "1"}


def _four_machines(tmp_path):
    """Seed 000's design in small: an AMD machine with and without SEV-SNP (the same CPU), an Intel
    machine without TDX (Ice Lake) and one with (Sapphire Rapids); raytrace 5 executions each."""
    from bundles import (
        ICE_LAKE,
        SAPPHIRE_RAPIDS,
        provenance_probe,
        sample,
        snp_evidence,
        tdx_evidence,
        write_environment,
    )

    def raytrace(milliseconds, seed):
        rng = np.random.default_rng(seed)
        return [
            sample(workload="pyperformance", kind="pyperformance", params={"benchmark": "raytrace"}, variant={},
                   metric="time_s", unit="s", value=milliseconds / 1000 * float(np.exp(noise)), repetition=rep,
                   metadata={"case": {"benchmark": "raytrace"}})
            for rep, noise in enumerate(rng.normal(0, 0.01, 5))
        ]  # fmt: skip

    machines = [
        (provenance_probe("AMD-Non-SEV", "none", cpu=MILAN), 700, 1),
        (provenance_probe("SEV-SNP", "sev-snp", cpu=MILAN, tee_evidence=snp_evidence(False)), 720, 2),
        (provenance_probe("Intel-Non-TDX", "none", cpu=ICE_LAKE), 673, 3),
        (
            provenance_probe("Intel-TDX", "tdx", cpu=SAPPHIRE_RAPIDS, tee_evidence=tdx_evidence(False)),
            495,
            4,
        ),
    ]
    return [write_environment(tmp_path, probe, raytrace(ms, seed)) for probe, ms, seed in machines]


def _rows(ccbench, *args):
    done = ccbench("compare", *args, "--json")
    assert done.returncode == 0, done.stderr
    return [r for r in map(json.loads, done.stdout.splitlines()) if "finding" not in r]


def test_each_tee_machine_is_compared_with_a_plain_machine_of_its_cpu(tmp_path, ccbench):
    """Without --baseline, SEV-SNP is compared with the AMD machine of the same CPU and TDX with the
    Intel one (on main's code both were compared with the first bundle: TDX against AMD)."""
    paths = _four_machines(tmp_path)
    pairs = {(r["config"].split(" / ")[0], r["baseline"].split(" / ")[0]) for r in _rows(ccbench, *paths)}
    assert ("SEV-SNP", "AMD-Non-SEV") in pairs and ("Intel-TDX", "Intel-Non-TDX") in pairs
    assert ("Intel-TDX", "AMD-Non-SEV") not in pairs
    summary = ccbench("compare", *paths, "--summary").stdout.splitlines()
    tdx = next(line for line in summary if line.startswith("TEE: TDX"))
    sev = next(line for line in summary if line.startswith("TEE: SEV-SNP"))
    # the TDX machine has a newer CPU than its baseline: said in its headline line; SEV-SNP's CPU is the same
    assert tdx.startswith("TEE: TDX (machines differ in CPU): ") and "faster" in tdx
    assert sev.startswith("TEE: SEV-SNP: ") and "slower" in sev


def test_pair_names_each_baseline_and_bad_pairs_are_one_line(tmp_path, ccbench):
    paths = _four_machines(tmp_path)
    rows = _rows(ccbench, *paths, "--pair", "Intel-TDX=AMD-Non-SEV", "--pair", "SEV*=AMD*")
    pairs = {(r["config"].split(" / ")[0], r["baseline"].split(" / ")[0]) for r in rows}
    assert pairs == {("Intel-TDX", "AMD-Non-SEV"), ("SEV-SNP", "AMD-Non-SEV")}
    for bad, said in (
        ("Intel-TDX=Nowhere", "BASELINE matches no machine"),
        ("TDX=AMD-Non-SEV", "CONFIG matches no machine"),
        ("TDX", "give CONFIG=BASELINE"),
        ("Intel-TDX=*Non*", "BASELINE matches several machines"),
    ):
        done = ccbench("compare", *paths, "--pair", bad)
        assert done.returncode == 2 and said in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert "Traceback" not in done.stderr


def test_a_label_whose_bundle_is_none_given_is_one_line_naming_the_bundles(tmp_path, ccbench):
    """On the old code `compare DIR/*/ --label nosuch=foo` exited 0 and ignored the label."""
    paths = _four_machines(tmp_path)
    for command in (("compare", *paths), ("report", *paths, "-o", tmp_path / "r.md")):
        done = ccbench(*command, "--label", "nosuch=foo")
        line = done.stderr.strip()
        assert done.returncode == 2 and line.count("\n") == 0 and "Traceback" not in line, done.stderr
        assert line.startswith("ccbench: error: --label 'nosuch=foo': nosuch is none of the bundles given"), line
        assert all(str(path) in line for path in paths), line
    # a label of a bundle given still labels it
    rows = _rows(ccbench, *paths, "--label", f"{paths[0]}=renamed")
    assert any(r["config"].startswith("renamed / ") or r["baseline"].startswith("renamed / ") for r in rows), rows


def test_pairs_that_compare_nothing_say_so_in_true_words(tmp_path):
    """--pair naming machines with no workload in common compared nothing; the error said "the
    bundles hold one configuration per workload" and listed three, where w had two."""
    from bundles import write_bundle

    from ccbench.analysis.comparison import comparison
    from ccbench.basics.errors import CCBenchError

    paths = [
        write_bundle(tmp_path, "tdx-vm", "tdx", {(): [1.2, 1.3, 1.25]}, workload="w"),
        write_bundle(tmp_path, "plain-vm", "none", {(): [1.0, 1.1, 1.05]}, workload="w"),
        write_bundle(tmp_path, "other", "none", {(): [1.0, 1.1, 1.05]}, workload="v"),
    ]
    assert not comparison(paths, pairs=["tdx-vm=plain-vm"]).table.empty
    for asked, said in (
        ({"pairs": ["tdx-vm=other"]}, "--pair 'tdx-vm=other' sets no configuration"),
        ({"baseline": "other"}, "the baseline 'other / no TEE' sets no configuration"),
    ):
        with pytest.raises(CCBenchError) as caught:
            comparison(paths, **asked).require_rows()
        message = str(caught.value)
        assert message.startswith(f"nothing to compare: {said} against another on a workload both measured"), message
        assert "w: plain-vm / no TEE, tdx-vm / TDX" in message and "one configuration per workload" not in message
    with pytest.raises(
        CCBenchError, match=r"each workload was measured in one configuration \(v: other / no TEE; w: tdx-vm / TDX\)"
    ):
        comparison([paths[0], paths[2]]).require_rows()


def test_summary_is_sized_for_a_person(tmp_path, ccbench):
    """At most two lines a layer, one line per kind of finding with a count, every line within 100
    columns, no breakdown where no mechanism was measured (on main's code: the sentences, the lint
    block once per pair, and "unexplained 100% [100%, 100%]" per row)."""
    paths = _four_machines(tmp_path)
    summary = ccbench("compare", *paths, "--baseline", "Intel-Non-TDX", "--summary")
    assert summary.returncode == 0, summary.stderr
    lines = summary.stdout.splitlines()
    assert all(len(line) <= 100 for line in lines), [line for line in lines if len(line) > 100]
    assert not any(line.startswith("- ") for line in lines) and "unexplained" not in summary.stdout
    verdict, lint = summary.stdout.split("\nlint: ")
    layers = [line for line in verdict.splitlines()[1:] if not line.startswith(" ")]
    assert len(verdict.splitlines()[1:]) <= 2 * len(layers)
    # one entry per kind of finding; an entry too long for the line goes on, indented, on the next
    findings: list[str] = []
    for line in lint.splitlines()[1:]:
        if line.startswith(" "):
            findings[-1] += " " + line.strip()
        else:
            findings.append(line)
    kinds = [line.split(":")[0] for line in findings]
    assert len(kinds) == len(set(kinds))  # deduplicated
    total = int(lint.split()[0])
    counted = sum(1 + int(line.rsplit("(+", 1)[1].split()[0]) if "more like it)" in line else 1 for line in findings)
    assert counted == total
    full = ccbench("compare", *paths, "--baseline", "Intel-Non-TDX").stdout
    assert "unexplained 100%" not in full  # no mechanism measured, no twin: no breakdown


def test_default_compare_shows_primary_metrics_and_details_the_rest(tmp_path, ccbench, monkeypatch):
    from bundles import sample, write

    monkeypatch.setenv("COLUMNS", "300")  # wide enough that no cell is folded

    samples = []
    for variant, factor in (({"storage": "disk"}, 1.0), ({"storage": "fscrypt"}, 3.0)):
        for rep, noise in enumerate(np.random.default_rng(1).normal(0, 0.01, 4)):
            for metric, unit, better, value in (("throughput", "MB/s", "higher", 300 / factor),
                                                ("clat_mean", "us", "lower", 50 * factor)):  # fmt: skip
                samples.append(
                    sample(workload="fio", kind="fio", params={"bs": "4k", "rw": "randread"}, variant=variant,
                           metric=metric, unit=unit, better=better, value=value * float(np.exp(noise)),
                           repetition=rep, metadata={"case": {"bs": "4k", "rw": "randread"}})
                )  # fmt: skip
    bundle = write(tmp_path, "box", "none", samples)
    plain = ccbench("compare", bundle).stdout
    assert "throughput" in plain and "clat_mean" not in plain and "behind --details" in plain
    assert "3.0x slower [" in plain and "overhead" not in plain and "CV %" not in plain
    detailed = ccbench("compare", bundle, "--details").stdout
    assert "clat_mean" in detailed and "CV %" in detailed and "ratio [95% CI]" in detailed
    # --json keeps the ratio and adds the words
    rows = [json.loads(line) for line in ccbench("compare", bundle, "--json").stdout.splitlines()]
    throughput = next(r for r in rows if r.get("metric") == "throughput")
    assert throughput["ratio"] == pytest.approx(1 / 3, rel=0.03)
    assert throughput["effect"] == fmt.row_effect(throughput) and throughput["effect"].startswith("3.0x slower [")


def test_a_layer_across_machines_whose_cpu_is_unknown_says_so(tmp_path, ccbench):
    from bundles import ICE_LAKE, provenance_probe, sample, tdx_evidence, write_environment

    def prime(seconds, seed):
        rng = np.random.default_rng(seed)
        return [
            sample(workload="prime", kind="prime", variant={}, metric="time", value=seconds * float(np.exp(noise)),
                   repetition=rep)
            for rep, noise in enumerate(rng.normal(0, 0.01, 5))
        ]  # fmt: skip

    unknown = provenance_probe("cvm", "tdx", cpu={"model": None, "vendor": None}, tee_evidence=tdx_evidence(False))
    unknown["provenance"]["cpu_model"] = None
    paths = [
        write_environment(tmp_path, provenance_probe("plain", "none", cpu=ICE_LAKE), prime(2.0, 1)),
        write_environment(tmp_path, unknown, prime(2.4, 2)),
    ]
    done = ccbench("compare", *paths, "--baseline", "plain", "--summary")
    assert done.returncode == 0, done.stderr
    tdx = next(line for line in done.stdout.splitlines() if line.startswith("TEE: TDX"))
    assert tdx.startswith("TEE: TDX (CPU unknown): 1") and "% slower [" in tdx, tdx  # 2.4 s against 2.0 s


def test_sign_test_p_is_scipys_binomial_test():
    """The sign test's p-value from the binomial distribution function is binomtest's, every split."""
    from scipy import stats

    from ccbench.analysis.statistics.pooling import sign_test_p

    for n in range(0, 80):
        for slower in range(n + 1):
            expected = stats.binomtest(slower, n).pvalue if n else 1.0
            assert sign_test_p(slower, n - slower) == pytest.approx(expected, rel=1e-9, abs=1e-300), (slower, n)


def test_a_figure_that_holds_in_one_workload_keeps_that_workload_on_a_long_line():
    """A layer whose only significant rows are in one workload: its headline, wrapped to 100
    columns, keeps "in <workload>" (failed before: a long layer name and a workload's name left
    "ext4-loop: 51.6% slower [32.2%, 73.9%]; 11/85 significant", a figure for the whole layer)."""
    parts = [
        {"layer": "loop file, no cipher: ext4-loop-with-a-long-name", "workload": "ycsb-durable-writes",
         "case": f"c{i}", "effect": math.log(1.5 + 0.01 * i), "n": 3, "spread": 0.02, "better": "lower",
         "implausible": ""}
        for i in range(3)
    ] + [
        {"layer": "loop file, no cipher: ext4-loop-with-a-long-name", "workload": "fio-seed003-long-name",
         "case": f"f{i}", "effect": 0.0, "n": 3, "spread": 0.9, "better": "higher", "implausible": ""}
        for i in range(20)
    ]  # fmt: skip
    (item,) = verdicts(comparison_frame(parts, False))
    assert item.judgement.only_in == "ycsb-durable-writes"
    line = layer_lines(item)[0]
    # wrapped to 100 columns (the same words at every width), never shortened
    assert all(len(part) <= 100 for part in line.split("\n")) and "slower" in line, line
    assert " in ycsb-durable-writes" in line and "3 of 23 significant in 2 workloads" in line, line


def test_the_named_test_reads_p_with_its_relation():
    """A tiny p value reads "p<0.001", never "p=<0.001" (the method text printed that)."""
    judgement = semantics.Judgement.__new__(semantics.Judgement)
    judgement.kind, judgement.q_p, judgement.i2, judgement.sign_p = semantics.POOLED, 0.00002, 0.7, math.nan
    assert judgement.test_named() == "Cochran's Q p<0.001, I2 70%"
    judgement.q_p = 0.034
    assert judgement.test_named() == "Cochran's Q p=0.034, I2 70%"
    judgement.kind, judgement.sign_p = semantics.ACROSS, 0.2
    assert judgement.test_named() == "sign test p=0.2"


def test_one_significant_row_among_rows_whose_sizes_differ_reads_as_one_figure():
    # seen in a real quick run: "fio-cold slower, 20.3% (sizes differ: I2 93%)", a range of one
    # value; the other row was not significant, and it is what made the sizes differ
    rows = pd.DataFrame(
        {
            "te": [1.203, 0.7],
            "te_low": [1.18, 0.45],
            "te_high": [1.226, 1.09],
            "significant": [True, False],
            "case": ["1m write", "1m read"],
        }
    )
    judgement = semantics.judge(rows)
    assert judgement.kind == semantics.SIZES
    phrase = judgement.phrase()
    # the one row that differs, named with its own figure, and the rest counted (the user trial: "20.3%
    # slower" alone read as the whole workload's)
    assert phrase == "1 of 2 significant: 1m write 20.3% slower [18.0%, 22.6%] (the other comparison not significant)"
    assert "slower, 20.3%" not in phrase


def test_a_settle_interval_wholly_on_the_faster_side_is_no_cost_at_all_not_above_zero():
    """The user trial: a case 7.9x faster [1.22x, 52x], not called a gain by its run, read "fio-rr: no
    cost above 0.0%" in the report's per-workload cell: its interval excludes every cost."""
    from ccbench.analysis.judgement.wording import BOUND_EXCLUDED, NONE_SEEN, Judgement

    said = Judgement(NONE_SEEN, comparisons=1, mde=0.0, bound=f"{BOUND_EXCLUDED}: repeated interval, limit 10").phrase(
        where=False
    )
    assert said.startswith("no cost at all (what the repeated interval, limit 10 excludes"), said
    assert "0.0%" not in said
    above = Judgement(NONE_SEEN, comparisons=1, mde=0.035, bound=f"{BOUND_EXCLUDED}: repeated interval, limit 10")
    assert above.phrase(where=False).startswith("no cost above 3.5% (what the repeated interval"), above.phrase()
