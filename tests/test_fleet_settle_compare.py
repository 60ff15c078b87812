"""compare on a fleet directory whose run settled its cases across labels: the controller's decision
(ccbench.fleet.settling.decide on ccbench.analysis.settling.fleet_settle.round_table) on bundles written with
known values, laid out as a fleet run lays them out, and compare's rows of those cases on the same
anytime-valid interval. The real fleet run is in tests/test_fleet_settle.py."""

import json
import math
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from bundles import sample, write

from ccbench.analysis.comparison import comparison
from ccbench.analysis.labels import ANYTIME
from ccbench.analysis.settling.fleet_settle import fleet_paths, round_table
from ccbench.fleet import settling
from ccbench.planning.plan import plan_from_dict

PLAN = """
name = "p"
[defaults]
repetitions = 1
[[workloads]]
kind = "command"
name = "w"
command = "true"
"""
ROUNDS = 4
#: (host key, label, machine's hostname, TEE, factor): two replicas of "snp", 30% slower than "plain"
HOSTS = [
    ("plain", "plain", "p1", "none", 1.0),
    ("snp/s1", "snp", "s1", "sev-snp", 1.32),
    ("snp/s2", "snp", "s2", "sev-snp", 1.28),
]


def _fleet(tmp_path):
    """A fleet directory of ROUNDS rounds (each round a bundle per host, the machine drifting 10% a
    round) with the controller's settling record after each round; its path and that record."""
    rng = np.random.default_rng(5)
    directory = tmp_path / "fleet-x"
    hosts, members = {}, []
    for key, label, hostname, tee, factor in HOSTS:
        rounds = {}
        for k in range(1, ROUNDS + 1):
            value = (1 + 0.1 * k) * factor * math.exp(rng.normal(0, 0.01))
            common = {"workload": "w", "variant": {"storage": "disk"}, "metric": "wall_time", "repetition": 0}
            bundle = write(
                directory / key / f"round-{k}",
                hostname,
                tee,
                [sample(**common, value=value, execution="w|storage=disk|rep|0")],
            )
            rounds[f"round-{k}"] = {"bundle": str(bundle.relative_to(directory)), "outcome": "ok"}
            members.append((label, k, bundle))
        hosts[key] = {"label": label, "rounds": rounds}
    plan = plan_from_dict(tomllib.loads(PLAN), "test")
    record = settling.new_record(
        plan, target=0.05, budget_s=None, max_rounds=ROUNDS, baseline="plain", labels={"plain", "snp"}
    )
    for k in range(1, ROUNDS + 1):
        table, info = round_table([m for m in members if m[1] <= k])
        if not settling.decide(record, table, info, k, {"plain", "snp"}, 10.0 * k, 10.0):
            break
    document = {
        "format": "ccbench-fleet",
        "rounds": [f"round-{k}" for k in range(1, ROUNDS + 1)],
        "baseline": "plain",
        "hosts": hosts,
        "settling": record,
    }
    (directory / "fleet.json").write_text(json.dumps(document))
    return directory, record


def test_replicas_are_averaged_per_round_and_the_cost_settles_at_the_minimum(tmp_path):
    directory, record = _fleet(tmp_path)
    (case,) = record["cases"]
    assert case["label"] == "snp" and case["answer"] == "cost" and case["settled_at"] == 3
    # the paired value of a round: the replicas' geometric mean against the baseline, the drift cancelled
    assert case["estimate"] == pytest.approx(math.sqrt(1.32 * 1.28) - 1, abs=0.02)
    assert record["ended_by"] == "every case settled"


def test_compare_of_the_fleet_directory_uses_the_controllers_interval(tmp_path):
    directory, record = _fleet(tmp_path)
    (case,) = record["cases"]
    paths, labels = fleet_paths([directory])
    assert set(labels.values()) == {"plain", "snp"} and len(paths) == len(HOSTS) * ROUNDS
    assert [labels[str(Path(p).resolve())] for p in paths[:ROUNDS]] == ["plain"] * ROUNDS  # the baseline's first
    result = comparison(paths, labels)
    (row,) = [r for r in result.table.to_dict("records") if r["metric"] == "wall_time"]
    assert (row["interval"], row["settled"]) == (ANYTIME, "cost")
    assert row["ratio"] == pytest.approx(1 + case["estimate"])
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(1 + case["low"]), pytest.approx(1 + case["high"]))
    assert row["significant"] and row["p_value"] == pytest.approx(case["p_value"])

    # the command: a fleet directory is labelled by its hosts' labels, against the fleet's baseline
    done = subprocess.run(
        [sys.executable, "-m", "ccbench", "compare", str(directory), "--json"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{") and "finding" not in line]
    (cli_row,) = [r for r in rows if r["metric"] == "wall_time"]
    assert cli_row["interval"] == ANYTIME and cli_row["ratio"] == pytest.approx(row["ratio"])
    text = subprocess.run(
        [sys.executable, "-m", "ccbench", "compare", str(directory)], capture_output=True, text=True
    ).stdout
    assert "settled across the fleet fleet-x" in text and "settled at round 3" in text, text
    # --summary: the header and how many settled, no line per case
    summary = subprocess.run(
        [sys.executable, "-m", "ccbench", "compare", str(directory), "--summary"], capture_output=True, text=True
    ).stdout
    settled = summary[summary.index("settled across the fleet fleet-x") :].splitlines()
    assert [line for line in settled if not line.startswith("    ")][1:] == [
        "  1 of 1 case(s) settled (compare without --summary: each one)"
    ], summary


def test_a_hand_edited_record_does_not_change_the_numbers_and_part_of_a_fleet_keeps_its_own_interval(tmp_path):
    directory, record = _fleet(tmp_path)
    (case,) = record["cases"]
    document = json.loads((directory / "fleet.json").read_text())
    document["settling"]["cases"][0]["estimate"] = 9.0
    (directory / "fleet.json").write_text(json.dumps(document))
    paths, labels = fleet_paths([directory])
    (row,) = [r for r in comparison(paths, labels).table.to_dict("records") if r["metric"] == "wall_time"]
    assert row["ratio"] == pytest.approx(1 + case["estimate"])  # recomputed from the samples, not read
    # without round 1's bundles compare cannot recompute the fleet's case: its own interval stays
    some = [p for p in (directory / key / f"round-{k}" for key, *_ in HOSTS for k in range(2, ROUNDS + 1))]
    (row,) = [r for r in comparison(some, labels).table.to_dict("records") if r["metric"] == "wall_time"]
    assert row["interval"] != ANYTIME and row["settled"] is None


def test_a_record_naming_a_bundle_outside_the_fleet_directory_is_refused_in_one_line(tmp_path):
    """fleet.json's text never becomes a path elsewhere: a bundle named '../..' or absolute stops
    compare with one line naming the record, before anything is read."""
    directory, _ = _fleet(tmp_path)
    document = json.loads((directory / "fleet.json").read_text())
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    first = next(iter(document["hosts"].values()))
    next(iter(first["rounds"].values()))["bundle"] = "../elsewhere"
    (directory / "fleet.json").write_text(json.dumps(document))
    done = subprocess.run([sys.executable, "-m", "ccbench", "compare", str(directory)], capture_output=True, text=True)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "lies outside the fleet directory" in lines[0] and "Traceback" not in done.stderr, lines
    assert str(directory / "fleet.json") in lines[0]


def test_a_fleet_settles_transport_on_the_round_trip_it_judges_not_only_the_plaintext_embedding(tmp_path):
    """Transport's primary metric (the embedding) is measured on plaintext only; a fleet's cases are
    what ``run --settle`` judges (sequential.judged): the round trip at its declared 1536 B on every
    pipe, for every transport, and no other size."""
    from bundles import probe, seal

    from ccbench.analysis.settling.fleet_settle import bundle_values
    from ccbench.bundle import BundleWriter
    from ccbench.workloads import declarations

    samples = [
        sample(
            workload="t",
            kind="transport",
            variant={"transport": "plain"},
            metric="embedding_time",
            value=0.02,
            execution="t|transport=plain|rep|0",
            repetition=0,
        )
    ]
    for transport in ("plain", "tls"):
        for pipe in ("duplex", "tcp"):
            for payload in (64, 1536):
                samples.append(
                    sample(
                        workload="t",
                        kind="transport",
                        variant={"transport": transport},
                        metric="rtt_p50",
                        params={"pipe": pipe, "payload": payload},
                        value=1e-5 * (2 if transport == "tls" else 1),
                        execution=f"t|transport={transport}|rep|0",
                        repetition=0,
                    )
                )
    manifest = {
        "plan": {"name": "t"},
        "environment": probe("h", "none"),
        "declarations": declarations([("t", "transport")]),
    }
    writer = BundleWriter.create(tmp_path / "h", manifest)
    writer.append_samples(samples)
    writer.close()
    values, _ = bundle_values(seal(writer.path))
    cases = {
        (variant, metric, json.loads(params).get("pipe"), json.loads(params).get("payload"))
        for _, variant, metric, params in values
    }
    assert ("transport=plain", "embedding_time", None, None) in cases
    for transport in ("plain", "tls"):
        for pipe in ("duplex", "tcp"):
            assert (f"transport={transport}", "rtt_p50", pipe, 1536) in cases
    assert not any(payload == 64 for *_, payload in cases)
