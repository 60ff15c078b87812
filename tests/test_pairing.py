"""A cipher on a loop file stands against the same loop file without it (ccbench.analysis.rows.pairing;
docs/analysis.md, "A cipher on a loop file"): the storage-encryption layer's cost is the cipher's,
the loop file's own cost stays under "loop file, no cipher", and without that twin the verdict says
its figure includes the loop file."""

import json
import math

import numpy as np
import pytest
from bundles import sample, write

from ccbench.analysis.comparison import comparison
from ccbench.analysis.rows.pairing import loop_twin

DISK = {"storage": "disk"}
LOOP = {"storage": "ext4-loop", "storage_mechanism": "none"}
FSCRYPT = {"storage": "encrypted", "storage_mechanism": "fscrypt"}
GOCRYPTFS = {"storage": "encrypted", "storage_mechanism": "gocryptfs"}


def study(tmp_path, times: dict[str, tuple[dict, float]], workloads=("ycsb", "compression")):
    """Five executions per variant of each workload, a time per variant (1% noise)."""
    rng = np.random.default_rng(3)
    samples = []
    for workload in workloads:
        for variant, seconds in times.values():
            for rep, noise in enumerate(rng.normal(0, 0.01, 5)):
                samples.append(
                    sample(workload=workload, variant=variant, metric="time", value=seconds * math.exp(noise),
                           repetition=rep, execution=f"{workload}|{json.dumps(variant)}|rep|{rep}")
                )  # fmt: skip
    return write(tmp_path, "vm", "none", samples)


def rows_of(table):
    return {(r["workload"], r["config"]): r for r in table.to_dict("records")}


def test_the_twin_of_a_cipher_on_a_loop_file_is_the_same_configuration_on_ext4_loop():
    assert loop_twin("vm / no TEE / fscrypt") == "vm / no TEE / ext4-loop"
    assert loop_twin("vm / SEV-SNP / luks2 / tls") == "vm / SEV-SNP / ext4-loop / tls"
    assert loop_twin("vm / no TEE / encrypted:fscrypt") == "vm / no TEE / ext4-loop"
    for other in ("vm / no TEE / gocryptfs", "vm / no TEE / disk", "vm / no TEE / ext4-loop", "vm / no TEE"):
        assert loop_twin(other) is None, other


def test_a_cipher_on_a_loop_file_is_measured_against_the_loop_file_without_it(tmp_path, ccbench):
    # the loop file costs 40%, the cipher 10% more on top of it: 1.54x against the disk
    bundle = study(tmp_path, {"disk": (DISK, 1.0), "loop": (LOOP, 1.4), "fscrypt": (FSCRYPT, 1.54)})
    result = comparison([bundle])
    rows = rows_of(result.table)
    fscrypt, loop = rows[("ycsb", "vm / no TEE / fscrypt")], rows[("ycsb", "vm / no TEE / ext4-loop")]
    assert fscrypt["baseline"] == "vm / no TEE / ext4-loop" and fscrypt["ratio"] == pytest.approx(1.1, rel=0.03)
    assert fscrypt["layer"] == "storage encryption: fscrypt"
    assert fscrypt["baseline_median"] == pytest.approx(1.4, rel=0.03)
    assert loop["baseline"] == "vm / no TEE / disk" and loop["ratio"] == pytest.approx(1.4, rel=0.03)
    assert loop["layer"] == "loop file, no cipher: ext4-loop"
    # the table's config cell names the twin
    from ccbench.analysis.table import comparison_table

    cells = comparison_table(result.table)
    assert "vm / no TEE / fscrypt (vs ext4-loop)" in set(cells["config"])
    assert "vm / no TEE / ext4-loop" in set(cells["config"])
    # the words: the cipher's 10%, not the stack's 54%, and they say what it stood against
    done = ccbench("compare", bundle)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    encryption = text.split("- storage encryption: fscrypt")[1].split(" - ")[0]
    assert "10." in encryption and "54" not in encryption, encryption
    assert "measured against ext4-loop, the same loop file without the cipher" in encryption, encryption
    # the report says it where it names the baseline: the first screen's intro and the chart's caption
    report = ccbench("report", bundle, "--format", "md", "-o", tmp_path / "r.md")
    assert report.returncode == 0, report.stderr
    markdown = (tmp_path / "r.md").read_text()
    assert "Against the baseline vm / no TEE / disk (a cipher on a loop file: against ext4-loop):" in markdown
    assert "against the baseline (vm / no TEE / disk; a cipher on a loop file: against ext4-loop)" in markdown
    # and the chart's panel of the cipher under its heading; the loop file's own panel does not
    from ccbench.report import forest

    panels = forest.build(result.table, None).layers
    assert panels["vm / no TEE / fscrypt"] == "storage encryption: fscrypt (against ext4-loop)"
    assert panels["vm / no TEE / ext4-loop"] == "loop file, no cipher: ext4-loop"
    summary = ccbench("compare", bundle, "--summary")
    lines = summary.stdout.splitlines()
    assert lines[0].startswith("verdict per protection layer against vm / no TEE / disk;"), lines[0]
    assert any(line.startswith("storage encryption: fscrypt (against ext4-loop): 10.") for line in lines), lines
    assert any(line.startswith("loop file, no cipher: ext4-loop: 4") for line in lines), lines
    # the JSON says it too
    records = [json.loads(line) for line in ccbench("compare", bundle, "--summary", "--json").stdout.splitlines()]
    layer = next(r for r in records if r.get("layer") == "storage encryption: fscrypt")
    assert layer["against"] == "ext4-loop", layer


def test_without_the_loop_file_control_the_verdict_says_its_figure_includes_the_loop_file(tmp_path, ccbench):
    bundle = study(tmp_path, {"disk": (DISK, 1.0), "fscrypt": (FSCRYPT, 1.54), "gocryptfs": (GOCRYPTFS, 2.0)})
    rows = rows_of(comparison([bundle]).table)
    assert rows[("ycsb", "vm / no TEE / fscrypt")]["baseline"] == "vm / no TEE / disk"
    assert rows[("ycsb", "vm / no TEE / fscrypt")]["ratio"] == pytest.approx(1.54, rel=0.03)
    done = ccbench("compare", bundle)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    fscrypt = text.split("- storage encryption: fscrypt")[1].split(" - ")[0]
    assert "the figure includes the loop-file stack's own cost (add ext4-loop" in fscrypt, fscrypt
    # gocryptfs is no loop file: nothing to say of one
    gocryptfs = text.split("- storage encryption: gocryptfs")[1].split(" - ")[0]
    assert "loop" not in gocryptfs, gocryptfs


def test_a_workload_that_did_not_measure_the_twin_keeps_the_baseline(tmp_path):
    # ycsb measured all three, compression only disk and fscrypt
    rng = np.random.default_rng(5)
    samples = []
    for workload, variants in (("ycsb", (DISK, LOOP, FSCRYPT)), ("compression", (DISK, FSCRYPT))):
        for variant in variants:
            for rep in range(4):
                value = {"disk": 1.0, "ext4-loop": 1.4}.get(variant["storage"], 1.54) * math.exp(rng.normal(0, 0.01))
                samples.append(sample(workload=workload, variant=variant, metric="time", value=value, repetition=rep))
    result = comparison([write(tmp_path, "vm", "none", samples)])
    rows = rows_of(result.table)
    assert rows[("ycsb", "vm / no TEE / fscrypt")]["baseline"] == "vm / no TEE / ext4-loop"
    assert rows[("compression", "vm / no TEE / fscrypt")]["baseline"] == "vm / no TEE / disk"
    # the words say which workload stands against which, and the headline names no twin for the layer
    (layer,) = [v for v in result.verdicts() if v.layer == "storage encryption: fscrypt"]
    assert layer.against == ""
    sentence = layer.sentence()
    assert "ycsb measured against ext4-loop (the cipher's cost alone); compression against vm / no TEE / disk: their" \
        " figures include the loop-file stack's own cost" in sentence, sentence  # fmt: skip


def settled_bundle(tmp_path, against: bool):
    """A run that settled a workload on disk, ext4-loop and fscrypt (``storage=encrypted``, its
    mechanism fscrypt): the loop file 40% slower than the disk, the cipher 10% slower than the loop
    file; the record pairs fscrypt with ext4-loop where ``against``."""
    from bundles import probe, seal

    from ccbench.bundle import BundleWriter

    rng = np.random.default_rng(9)
    variants = {"storage=disk": (DISK, 1.0), "storage=ext4-loop": (LOOP, 1.4), "storage=encrypted": (FSCRYPT, 1.54)}
    samples = []
    for rep in range(5):
        drift = math.exp(rng.normal(0, 0.05))  # a round's drift hits every variant of it alike
        for key, (variant, seconds) in variants.items():
            value = seconds * drift * math.exp(rng.normal(0, 0.005))
            samples.append(sample(workload="w", metric="time", variant=variant, value=value, repetition=rep,
                                  execution=f"w|{key}|rep|{rep}"))  # fmt: skip
    record = {
        "target": 0.05,
        "baseline": "storage=disk",
        "variants": {
            "storage=ext4-loop": {"stopped_by": "settled", "cases": {}},
            "storage=encrypted": {"stopped_by": "settled", "cases": {}, **({"against": "storage=ext4-loop"} if against else {})},
        },
    }  # fmt: skip
    manifest = {
        "plan": {"name": "t"},
        "environment": probe("vm", "none"),
        "outcomes": {"w": {"status": "ok", "settled": record}},
    }
    writer = BundleWriter.create(tmp_path / "vm", manifest)
    writer.append_samples(samples)
    writer.close()
    return seal(writer.path), samples


def test_settle_pairs_a_cipher_on_a_loop_file_with_its_twin_and_compare_reads_it_so(tmp_path):
    from ccbench.analysis.settling.recorded import bundle_settlements
    from ccbench.analysis.statistics.sequential import loop_twins, paired_against
    from ccbench.bundle import read_bundle

    path, samples = settled_bundle(tmp_path, against=True)
    keys = ["storage=disk", "storage=ext4-loop", "storage=encrypted"]
    assert loop_twins(samples, keys) == {"storage=encrypted": "storage=ext4-loop"}
    assert loop_twins(samples, keys[::2]) == {}  # no twin measured: paired with the baseline
    costs = paired_against(samples, "storage=disk", keys, {"storage=encrypted": "storage=ext4-loop"})
    assert np.mean(costs["storage=encrypted"]["time"]) == pytest.approx(math.log(1.1), abs=0.01)
    assert np.mean(costs["storage=ext4-loop"]["time"]) == pytest.approx(math.log(1.4), abs=0.01)
    recomputed = bundle_settlements(read_bundle(path))["w"]["variants"]["storage=encrypted"]
    assert recomputed["against"] == "storage=ext4-loop" and recomputed["cases"]["time"]["state"] == "cost"
    # compare's row of the cipher (against the loop file) is the run's settled case, on its interval
    rows = rows_of(comparison([path]).table)
    fscrypt = rows[("w", "vm / no TEE / fscrypt")]
    assert fscrypt["baseline"] == "vm / no TEE / ext4-loop" and fscrypt["interval"] == "anytime-valid", fscrypt
    assert fscrypt["ratio"] == pytest.approx(1.1, rel=0.02)


def test_a_settled_run_before_the_pairing_keeps_welch_on_the_ciphers_row(tmp_path):
    # a record without "against" settled the cipher against the disk: compare's row of it (against
    # the loop file) is not that case, so it keeps Welch's interval rather than borrowing another's
    path, _ = settled_bundle(tmp_path, against=False)
    rows = rows_of(comparison([path]).table)
    assert rows[("w", "vm / no TEE / fscrypt")]["interval"] != "anytime-valid"
    assert rows[("w", "vm / no TEE / ext4-loop")]["interval"] == "anytime-valid"
