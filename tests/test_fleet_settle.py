"""Settling each case across a fleet's labels (``fleet run --mode rounds --settle``) on real SSH hosts
(network namespaces running Debian's OpenSSH server, driven by real Ansible, as tests/test_fleet.py):
one label is made clearly slower on one workload (a marker file in that host's own home makes its
command sleep longer), the other workload is the same on both. The slow case settles as a cost
(on a quiet machine at the first round where the interval can be finite) and leaves the rounds on
every host; the equal case runs on to the round limit, leaves as unable to settle by it, or settles
as "no cost above"; fleet.json, the summary and compare say the same."""

import json
import subprocess
import sys
from pathlib import Path

import fleet_testhosts as testhosts
import pytest

from ccbench.analysis.settling.fleet_settle import minimum_rounds

pytestmark = testhosts.marks()

MARKER = "ccbench-slow-marker"
PLAN = f"""
name = "settle-across"
description = "two commands: one slower where the marker is, one the same everywhere"
[defaults]
repetitions = 1
warmup = 0
cooldown = 0.0
timeout = 60
[[workloads]]
kind = "command"
name = "marked"
command = "sleep 0.1; if [ -e /root/{MARKER} ]; then sleep 1.0; fi"
[[workloads]]
kind = "command"
name = "same"
command = "sleep 0.1"
"""
MAX_ROUNDS = 4


def fleet(*args, timeout=900):
    return subprocess.run(
        [sys.executable, "-m", "ccbench", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    with testhosts.SSHHosts(tmp_path_factory.mktemp("settle-hosts"), ["h1", "h2"]) as made:
        (made.hosts["h2"].home / MARKER).write_text("the host of the slower label\n")
        yield made


def _samples(bundle: Path) -> list[dict]:
    return [json.loads(line) for line in (bundle / "samples.jsonl").read_text().splitlines() if line.strip()]


def test_a_clear_cost_settles_early_and_leaves_the_rounds_on_every_host(hosts, tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(hosts.inventory_text(baseline="h1", labels={"h1": "plain", "h2": "slower"}))
    out = tmp_path / "out"
    done = fleet(
        "fleet", "run", plan, "-i", inventory, "--out", out, "--mode", "rounds", "--settle", "5%",
        "--max-rounds", MAX_ROUNDS,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    (directory,) = out.glob("fleet-*")
    manifest = json.loads((directory / "fleet.json").read_text())
    settling = manifest["settling"]
    cases = {c["workload"]: c for c in settling["cases"]}
    assert set(cases) == {"marked", "same"}, settling["cases"]
    least = minimum_rounds()
    marked, same = cases["marked"], cases["same"]
    assert marked["label"] == "slower" and marked["baseline"] == "plain"
    # an 11x cost settles at the first round where an interval is finite on a quiet machine; how soon
    # on a busy one depends on its speed (start-ups of 0.2 s shrink it), so the round is not asserted
    settled_at = marked["settled_at"]
    assert marked["answer"] == "cost" and least <= settled_at <= MAX_ROUNDS and marked["estimate"] > 0, marked
    assert settling["workloads"]["marked"]["stopped_by"] == "settled"
    # the equal case: no cost above 5%, or cut by the round limit or left as unable to settle by
    # it; never a cost or a gain
    assert same["answer"] in (None, "no cost above"), same
    if same["answer"] is None:
        assert same["stopped_by"] in ("max rounds", "cannot settle within the round limit"), same
    for k in range(settled_at + 1, len(manifest["rounds"]) + 1):
        assert settling["rounds"][f"round-{k}"] == ["same"]
        for host in manifest["hosts"].values():
            # the settled workload left the rounds on every host, the baseline's too
            bundle = directory / host["rounds"][f"round-{k}"]["bundle"]
            assert {s["workload"] for s in _samples(bundle)} == {"same"}, (host["label"], k)
    for host in manifest["hosts"].values():
        bundle = directory / host["rounds"][f"round-{settled_at}"]["bundle"]
        assert {s["workload"] for s in _samples(bundle)} == {"marked", "same"}
    # the summary says what fleet.json says
    assert f"settled at round {settled_at}" in said and "a cost: " in said, said
    compare_txt = (directory / "compare.txt").read_text()
    assert "settled across the fleet" in compare_txt and "a cost: " in compare_txt, compare_txt

    # compare of the fleet directory uses the controller's interval for those rows
    compared = fleet("compare", directory, "--json", timeout=300)
    assert compared.returncode == 0, compared.stdout + compared.stderr
    rows = [json.loads(line) for line in compared.stdout.splitlines() if line.startswith("{")]
    row = next(r for r in rows if r.get("workload") == "marked" and r.get("metric") == "wall_time")
    assert row["interval"] == "anytime-valid" and row["settled"] == "cost", row
    assert row["ratio"] == pytest.approx(1 + marked["estimate"], rel=1e-6)
    assert row["ci_low"] == pytest.approx(1 + marked["low"], rel=1e-6)
    assert row["ci_high"] == pytest.approx(1 + marked["high"], rel=1e-6)
    other = next(r for r in rows if r.get("workload") == "same" and r.get("metric") == "wall_time")
    assert other["interval"] == "anytime-valid" and other["significant"] is False, other
    assert other["settled"] == (same["answer"] or f"unsettled: {same['stopped_by']}")


def test_resuming_a_settling_fleet_run_is_refused_in_one_line(tmp_path):
    directory = tmp_path / "fleet-x"
    directory.mkdir()
    (directory / "fleet.json").write_text(json.dumps({"format": "ccbench-fleet", "settling": {"target": 0.05}}))
    done = fleet("fleet", "run", "--resume", directory, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "does not resume" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
