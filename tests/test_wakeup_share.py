"""The share of a row's time its cross-vCPU wake-ups take (ccbench.analysis.rows.wakeups): the RES and
CAL interrupts each execution counted, over the wake-up case's IPIs per wake-up, times its latency per
wake-up measured in the same bundle, over the execution's wall time. Made data throughout (named so):
synthetic bundles through ``ccbench compare --json`` as a user runs it, and the missing inputs named."""

import json

import numpy as np
import pandas as pd
from bundles import provenance_probe, sample, seal

from ccbench.analysis.rows import wakeups

#: made-up machines: (elapsed s per execution, RES, CAL per execution, ns per wake-up, IPIs per wake-up)
MADE_UP = {
    "plain": (1.0, 1000, 200, 50_000.0, 1.2),  # 1,000 wake-ups x 50 us = 0.05 s of 1 s: 5%
    "cvm": (2.0, 2000, 400, 200_000.0, 1.2),  # 2,000 wake-ups x 200 us = 0.4 s of 2 s: 20%
}


def _made_up_bundle(root, host, tee, with_case=True, with_counters=True):
    from ccbench.bundle import BundleWriter

    elapsed, res, cal, ns, ipis = MADE_UP[host]
    writer = BundleWriter.create(
        root / host, {"plan": {"name": "t"}, "environment": provenance_probe(host, tee, vcpus=4)}
    )
    samples = []
    for rep in range(6):
        execution = f"notebook|-|rep|{rep}"
        samples.append(
            sample(
                workload="notebook",
                variant={},
                metric="wall_time",
                unit="s",
                value=elapsed * (1 + 0.01 * rep),
                repetition=rep,
            )
        )
        counters = {"interrupts.RES": res, "interrupts.CAL": cal, "stat.ctxt": 5000} if with_counters else None
        writer.append_execution(
            {
                "key": execution,
                "workload": "notebook",
                "variant": {},
                "repetition": rep,
                "warmup": False,
                "status": "ok",
                "elapsed_s": elapsed,
                "counters": counters,
            }
        )
        if with_case:
            for vcpus, scale in ((1, 0.05), (2, 1.0)):  # one vCPU: a context switch, no IPI: never the unit
                case = {"mechanism": "cross-vcpu-wakeup", "pattern": "ping-pong", "vcpus": vcpus}
                for metric, unit, value in (("cross_wakeup_ns", "ns", ns * scale), ("ipis_per_wakeup", "IPIs", ipis)):
                    samples.append(
                        sample(
                            workload="mechanisms",
                            kind="mechanisms",
                            variant={},
                            metric=metric,
                            unit=unit,
                            params=case,
                            metadata={"case": case},
                            value=value if vcpus > 1 else 0.0 if metric == "ipis_per_wakeup" else value,
                            repetition=rep,
                        )
                    )
    writer.append_samples(samples)
    writer.close()
    return seal(writer.path)


def _rows(done):
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if '"finding"' not in line]


def test_made_up_wakeups_give_their_share_of_each_sides_time(tmp_path, ccbench):
    paths = [_made_up_bundle(tmp_path, "plain", "none"), _made_up_bundle(tmp_path, "cvm", "sev-snp")]
    rows = _rows(ccbench("compare", *paths, "--baseline", "plain", "--json"))
    notebook = next(r for r in rows if r["workload"] == "notebook")
    cvm, plain = notebook["wakeups"]["config"], notebook["wakeups"]["baseline"]
    assert cvm["share"] == 0.2 and cvm["wakeups"] == 2000 and cvm["vcpus"] == 2 and cvm["executions"] == 6
    assert plain["share"] == 0.05 and plain["ns_per_wakeup"] == 50_000 and plain["context_switches"] == 5000
    # the unit cost's own rows are not rows to estimate
    assert all(r["wakeups"] == {} for r in rows if r["workload"] == "mechanisms")
    text = " ".join(ccbench("compare", *paths, "--baseline", "plain").stdout.split())
    said = "cvm / SEV-SNP: 20.0% of the execution's time (2,000 wake-ups x 200 us at 2 vCPUs)"
    assert f"- notebook: cross-vCPU wake-ups {said}; plain / no TEE: 5.0%" in text, text
    assert text.count("- notebook: cross-vCPU wake-ups") == 1  # once per workload, not per metric


def test_a_side_without_the_wakeup_case_or_without_counters_says_what_is_missing(tmp_path, ccbench):
    paths = [
        _made_up_bundle(tmp_path, "plain", "none", with_counters=False),
        _made_up_bundle(tmp_path, "cvm", "sev-snp", with_case=False),
    ]
    rows = _rows(ccbench("compare", *paths, "--baseline", "plain", "--json"))
    notebook = next(r for r in rows if r["workload"] == "notebook")
    assert notebook["wakeups"]["config"] == {"missing": wakeups.NO_CASE}
    assert notebook["wakeups"]["baseline"] == {"missing": wakeups.NO_COUNTERS}
    text = " ".join(ccbench("compare", *paths, "--baseline", "plain").stdout.split())
    assert "cross-vCPU wake-up share: not computed: " in text and "no cross-vCPU wake-up case" in text, text


def test_a_bundle_without_the_case_takes_its_machines_other_bundle_and_both_missing_is_said_once():
    made_up = pd.DataFrame(
        {
            "bundle": ["b1", "b1"],
            "params": [json.dumps({"pattern": "ping-pong", "vcpus": 4})] * 2,
            "metric": ["cross_wakeup_ns", "ipis_per_wakeup"],
            "value": [10_000.0, 2.0],
        }
    )
    record = {"workload": "w", "variant": {}, "elapsed_s": 1.0, "counters": {"interrupts.RES": 200}}
    table = pd.DataFrame({"workload": ["w"], "config": ["a"], "baseline": ["z"], "params": ["{}"]})
    facts = pd.DataFrame({"bundle": ["b2", "z1"], "config": ["a", "z"]})
    shares = wakeups.wakeup_shares(
        table, made_up, facts, {"b2": [record], "z1": [{**record, "counters": {}}]}, {"b1": "m", "b2": "m"}
    )
    # 200 IPIs / 2 per wake-up = 100 wake-ups x 10 us = 1 ms of 1 s
    assert shares[0]["config"]["share"] == 0.001 and shares[0]["config"]["vcpus"] == 4
    assert shares[0]["baseline"]["missing"].startswith(wakeups.NO_COUNTERS + "; and ")
    assert np.isclose(wakeups.unit_costs(made_up)["b1"]["ns_per_wakeup"], 10_000)
