"""Machines as replicas (issue 24, "machine-to-machine spread"): the two-level interval validated by
simulation, checked against scipy's two-sample t test on machine means, and read back from
bundles through ``compare --summary``, ``--json`` and the report."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from bundles import probe, sample, seal
from scipy import stats

import ccbench
from ccbench.analysis.judgement.verdict import verdicts
from ccbench.analysis.rows.compare import compare
from ccbench.analysis.statistics.replicas import BETWEEN_MACHINES, RUNS_ONLY, SAME_MACHINES
from ccbench.bundle import BundleWriter

BASELINE = "plain / no TEE"


def simulated(
    rng: np.random.Generator,
    trials: int,
    cost: float,
    machines: tuple[int, int] = (3, 3),
    runs: int = 3,
    spread: float = 0.03,
    noise: float = 0.01,
) -> pd.DataFrame:
    """``trials`` comparisons in one frame (one case each): the configurations "plain" and "other"
    with ``machines`` machines each, every machine offset by a log-normal draw of sd ``spread`` and
    measured ``runs`` times with noise ``noise``; "other" costs ``cost`` (1.0: an A/A comparison)."""
    per_trial = sum(machines) * runs
    trial = np.repeat(np.arange(trials), per_trial)
    machine = np.tile(np.repeat(np.arange(sum(machines)), runs), trials)
    other = machine >= machines[0]
    offsets = rng.normal(0, spread, (trials, sum(machines)))
    logs = np.log(10.0) + offsets[trial, machine] + rng.normal(0, noise, trial.size) + other * np.log(cost)
    label = np.where(other, "other", "plain")
    return pd.DataFrame(
        {
            "bundle": np.char.add(label, machine.astype(str)),
            "machine": label,
            "machine_id": np.char.add(label, machine.astype(str)),
            "tee": "none",
            "storage": None,
            "transport": None,
            "config": np.char.add(label, " / no TEE"),
            "workload": "w",
            "kind": "command",
            "params": "{}",
            "case": trial.astype(str),
            "metric": "time",
            "unit": "s",
            "value": np.exp(logs),
            "better": "lower",
            "repetition": 0,
            "warmup": False,
            "timestamp": "",
        }
    )


def one_machine_a_side(frame: pd.DataFrame) -> pd.DataFrame:
    """The same samples as if each label were one machine: the per-execution interval ccbench used
    before replicas (every sample of a configuration pooled)."""
    return frame.assign(machine_id=frame["machine"])


def test_aa_comparisons_with_machine_spread_stay_at_five_percent():
    """3 machines a side, machine spread 3%, run noise 1%, 3 runs each: A/A comparisons significant
    at most 5% of the time; the per-execution interval on the same samples flags far more."""
    trials = 10_000
    frame = simulated(np.random.default_rng(24), trials, cost=1.0)
    table = compare(frame, BASELINE)
    assert len(table) == trials and (table["interval_from"] == BETWEEN_MACHINES).all()
    assert (table["machines_baseline"] == 3).all() and (table["machines"] == 3).all()
    rate = table["significant"].mean()
    # the pooled t on machine means is exact here (nominal 5%): the simulated rate must be consistent
    # with at most 5%, i.e. 5% within its own 95% interval or above it (SE about 0.2% at 10,000)
    assert rate - 1.96 * math.sqrt(rate * (1 - rate) / trials) <= 0.05, rate
    per_execution = compare(one_machine_a_side(frame), BASELINE)
    assert (per_execution["interval_from"] == RUNS_ONLY).all()
    assert per_execution["significant"].mean() >= 0.2, per_execution["significant"].mean()  # about 31%


def test_a_ten_percent_layer_cost_is_detected_despite_machine_spread():
    trials = 10_000
    table = compare(simulated(np.random.default_rng(25), trials, cost=1.10), BASELINE)
    detected = (table["significant"] & (table["ratio"] > 1)).mean()
    assert detected >= 0.80, detected  # about 81% (the noncentral t with 4 degrees of freedom)


@pytest.mark.parametrize("machines", [(3, 3), (2, 4), (1, 3), (3, 1), (2, 1)])
def test_rows_match_scipys_two_sample_t_on_machine_means(machines):
    """Each row's ratio, interval and p value are scipy's pooled two-sample t on the machines' mean
    logs (unequal runs per machine included); 1 against 3 uses the same pooled interval."""
    rng = np.random.default_rng(sum(machines))
    frame = simulated(rng, 20, cost=1.05, machines=machines, runs=4)
    frame = frame.drop(index=rng.choice(frame.index, 25, replace=False))  # machines with 1-4 runs
    # samples interleaved as a run writes them: the per-machine statistics must still meet their rows
    frame = frame.sample(frac=1.0, random_state=1).reset_index(drop=True)
    table = compare(frame, BASELINE)
    assert (table["interval_from"] == BETWEEN_MACHINES).all()
    for row in table.itertuples(index=False):
        case = frame[frame["case"] == row.case]
        means = case.assign(log=np.log(case["value"])).groupby(["config", "machine_id"])["log"].mean()
        base, other = means.loc["plain / no TEE"].to_numpy(), means.loc["other / no TEE"].to_numpy()
        assert (row.machines_baseline, row.machines) == (len(base), len(other))
        test = stats.ttest_ind(other, base, equal_var=True)
        interval = test.confidence_interval(0.95)
        assert row.p_value == pytest.approx(test.pvalue, rel=1e-9)
        assert (row.ci_low, row.ci_high) == pytest.approx((math.exp(interval.low), math.exp(interval.high)))
        assert row.ratio == pytest.approx(math.exp(other.mean() - base.mean()))


def test_one_machine_a_side_keeps_the_per_execution_interval_and_the_verdict_says_so():
    frame = simulated(np.random.default_rng(3), 4, cost=1.0, machines=(1, 1), runs=5)
    table = compare(frame, BASELINE)
    assert (table["interval_from"] == RUNS_ONLY).all() and (table["machines"] == 1).all()
    (layer,) = verdicts(table)
    assert layer.machines == "1 vs 1"
    assert "one machine per side: the interval covers run-to-run noise only" in layer.sentence()
    assert "cannot separate the layer from machine-to-machine variation" in layer.sentence()


def test_the_same_machines_on_both_sides_keep_the_per_execution_interval():
    """Storage variants on the same two machines: each machine ran both sides, so its offset cancels;
    the row says so and the verdict names the machines."""
    frame = simulated(np.random.default_rng(4), 3, cost=1.2, machines=(2, 2))
    frame = frame.assign(
        machine="vm",
        machine_id=frame["machine_id"].str[-1].astype(int) % 2,
        storage=np.where(frame["machine"] == "other", "fscrypt", "disk"),
        config=np.where(frame["machine"] == "other", "vm / no TEE / fscrypt", "vm / no TEE / disk"),
    )
    table = compare(frame, "vm / no TEE / disk")
    assert (table["interval_from"] == SAME_MACHINES).all() and (table["machines"] == 2).all()
    (layer,) = verdicts(table)
    assert layer.layer == "storage encryption: fscrypt" and layer.machines == "2 (same on both sides)"
    assert "both sides measured on the same 2 machines" in layer.sentence()


def write_machine(out, directory, host, tee, values, machine_id=None):
    """A bundle in ``out/directory`` measured on ``host`` (with the probe's ``machine_id`` where
    given): one workload "app", metric time, the given values."""
    environment = probe(host, tee)
    if machine_id:
        environment["machine_id"] = machine_id
    writer = BundleWriter.create(out / directory, {"plan": {"name": "t"}, "environment": environment})
    writer.append_samples(
        [sample(workload="app", variant={}, metric="time", value=v, repetition=i) for i, v in enumerate(values)]
    )
    writer.close()
    return seal(writer.path)


#: (directory and hostname, label, TEE, the machine's offset): two plain VMs and two SEV-SNP VMs of
#: one size whose machines differ by up to 5%, and no cost of the TEE itself
REPLICAS = [
    ("plain-1", "plain", "none", 1.00),
    ("plain-2", "plain", "none", 1.04),
    ("snp-1", "snp", "sev-snp", 1.01),
    ("snp-2", "snp", "sev-snp", 1.05),
]


def write_replicas(out):
    """The four machines of REPLICAS, five runs each at 0.3% noise; their paths."""
    rng = np.random.default_rng(9)
    return {
        host: write_machine(out, host, host, tee, list(10 * offset * np.exp(rng.normal(0, 0.003, 5))))
        for host, _, tee, offset in REPLICAS
    }


def test_two_plus_two_replicas_read_correctly_in_compare_and_the_report(tmp_path, ccbench):
    """One machine a side ("plain-2" against "snp-1") makes the machines' lottery a significant
    "TEE saving" of 3% and says that the interval cannot separate it from the machines; with both
    machines a side (labels shared) the interval includes the spread between machines and the TEE's
    cost is not distinguishable from it."""
    paths = write_replicas(tmp_path)
    single = ccbench("compare", paths["plain-2"], paths["snp-1"])
    assert single.returncode == 0, single.stderr
    text = " ".join(single.stdout.split())
    assert "TEE: SEV-SNP: 1.03x faster [" in text  # plain-2 is the slower machine of the four
    assert "one machine per side: the interval covers run-to-run noise only" in text

    labels = [f"--label={paths[host]}={label}" for host, label, _, _ in REPLICAS]
    replicated = ccbench("compare", *paths.values(), *labels, "--details")
    assert replicated.returncode == 0, replicated.stderr
    text = " ".join(replicated.stdout.split())
    assert "TEE: SEV-SNP: no cost above " in text, text
    assert "2 machines against 2: the interval includes the spread between machines" in text
    assert "2 vs 2" in text

    rows = ccbench("compare", *paths.values(), *labels, "--json")
    (row,) = [r for r in map(json.loads, rows.stdout.splitlines()) if "finding" not in r]
    assert (row["machines_baseline"], row["machines"], row["interval_from"]) == (2, 2, BETWEEN_MACHINES)
    assert row["baseline"] == "plain / no TEE" and row["config"] == "snp / SEV-SNP" and not row["significant"]

    report = tmp_path / "report.md"
    done = ccbench("report", *paths.values(), *labels, "-o", report, "--format", "md")
    assert done.returncode == 0, done.stderr
    document = report.read_text()
    verdict = document[: document.index("ratios with 95% intervals")]
    assert "2 machines against 2: the interval includes the spread between machines" in verdict
    assert "| 2 vs 2 |" in verdict
    assert "| 2/2 |" in document  # the comparison table's machine counts


def test_the_probes_machine_id_tells_machines_apart(tmp_path):
    """Two bundles with one hostname (an image cloned to two VMs) are two machines when their probe
    says so; without a machine id the hostname decides, so two runs of one machine stay one."""
    values = [10.0, 10.1, 9.9]
    base = [write_machine(tmp_path, f"a{i}", "clone", "none", values, machine_id=f"id-{i}") for i in range(2)]
    other = [write_machine(tmp_path, f"b{i}", "same-host", "sev-snp", values) for i in range(2)]
    labels = {str(p): "plain" for p in base} | {str(p): "snp" for p in other}
    frame = ccbench.load([*base, *other], labels=labels)
    assert set(frame["machine_id"]) == {"id-0", "id-1", "same-host"}
    row = compare(frame).iloc[0]
    assert (row["machines_baseline"], row["machines"], row["interval_from"]) == (2, 1, BETWEEN_MACHINES)
    (layer,) = verdicts(compare(frame))
    assert "a side with one machine is taken to vary as much as the other side's machines" in layer.sentence()


def test_fleet_hosts_sharing_a_label_are_replicas_of_one_configuration(tmp_path):
    """An inventory with two hosts per ccbench_label: each host keeps its own key (records, bundle
    directory), the label stays the configuration, and the baseline may be set on its replicas."""
    pytest.importorskip("ansible")
    from ccbench.fleet.inventory import read_inventory

    path = tmp_path / "hosts.ini"
    path.write_text(
        "[study]\n"
        "plain-1 ansible_host=10.204.0.11 ccbench_label=plain ccbench_baseline=true\n"
        "plain-2 ansible_host=10.204.0.12 ccbench_label=plain ccbench_baseline=true\n"
        "snp-1 ansible_host=10.204.0.13 ccbench_label=snp\n"
        "snp-2 ansible_host=10.204.0.14 ccbench_label=snp\n"
        "tdx ansible_host=10.204.0.15\n"
    )
    inventory = read_inventory(path)
    assert [(h.key, h.label) for h in inventory.hosts] == [
        ("plain/plain-1", "plain"),
        ("plain/plain-2", "plain"),
        ("snp/snp-1", "snp"),
        ("snp/snp-2", "snp"),
        ("tdx", "tdx"),
    ]
    assert inventory.baseline.label == "plain"


def test_a_fleet_compares_replicas_as_one_configuration(tmp_path):
    """compare_and_report over a fleet whose hosts share labels: compare.txt and the report say
    2 machines against 2 (the bundles are labelled by configuration, not by host)."""
    from ccbench.fleet.gather import compare_and_report
    from ccbench.fleet.records import FleetRun, HostRun

    paths = write_replicas(tmp_path)
    keys = {host: f"{label}/{host}" for host, label, _, _ in REPLICAS}
    fleet = FleetRun(
        directory=tmp_path,
        plan="quick",
        plan_file=None,
        inventory=tmp_path / "hosts.ini",
        mode="parallel",
        forks=4,
        limit=None,
        accept_new_host_keys=False,
        run_id="fleet-replicas",
        rounds=["run"],
        hosts={keys[host]: {"inventory_hostname": host, "label": label} for host, label, _, _ in REPLICAS},
        runs={
            keys[host]: {"run": HostRun(round="run", outcome="ok", bundle=str(paths[host].relative_to(tmp_path)))}
            for host, _, _, _ in REPLICAS
        },
        baseline="plain",
        started_at="2026-01-01T00:00:00+00:00",
    )
    compare_and_report(fleet)
    assert fleet.analysis_error is None, fleet.analysis_error
    text = " ".join((tmp_path / "compare.txt").read_text().split())
    assert "against plain / no TEE" in text and "2 machines against 2" in text, text
    assert "2 machines against 2" in (tmp_path / fleet.report).read_text()
