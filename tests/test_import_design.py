"""ccbench import keeps a study's design (issue 40): each machine of a seed-000 directory gets its own
stated TEE (--tee LABEL=T) and storage protection (--storage-protection LABEL=P, or the labels'
-Encrypted suffix), and systeminfo's cores and memory, so compare separates the layers and the lint
can check the machines' sizes. The directory (tests/data/import/seed000-azure/) is shaped like the
seed-000 runner's output: <Label>_<YYYYmmdd_HHMMSS>_<benchmark>.txt."""

import json
import re
from pathlib import Path

import pytest
from conftest import DATA, run_ccbench

from ccbench.bundle import read_bundle
from ccbench.probe.facts import machine_facts, tee_technology

SEED = DATA / "import" / "seed000-azure"
FIO3 = DATA / "fio" / "randrw-4k.json"
TEES = ("--tee", "TDX-Encrypted=tdx", "--tee", "TDX-Non-Encrypted=tdx", "--tee", "Intel-Non-TDX=none")


def _import(out: Path, *options) -> dict:
    done = run_ccbench("import", "seed000", SEED, "--out", out, *options)
    assert done.returncode == 0, done.stderr
    bundles = [read_bundle(p) for p in sorted(out.iterdir()) if (p / "manifest.json").exists()]
    return {b.manifest["label"]: b for b in bundles}


def _systeminfo(label: str) -> str:
    (path,) = SEED.glob(f"{label}_*_systeminfo.txt")
    return path.read_text()


def test_each_label_gets_its_own_tee_and_the_suffix_names_the_storage_layer(tmp_path):
    bundles = _import(tmp_path / "out", *TEES)
    assert {label: tee_technology(b.probe) for label, b in bundles.items()} == {
        "TDX-Encrypted": "tdx",
        "TDX-Non-Encrypted": "tdx",
        "Intel-Non-TDX": "none",
    }
    assert all(b.manifest["environment"]["tee"]["stated"] is True for b in bundles.values())
    storage = {label: b.manifest["environment"]["storage"]["protection"] for label, b in bundles.items()}
    assert storage == {
        "TDX-Encrypted": "azure-confidential-disk",
        "TDX-Non-Encrypted": "none",
        "Intel-Non-TDX": "unknown",
    }
    assert (
        "Azure confidential disk encryption"
        in bundles["TDX-Encrypted"].manifest["environment"]["storage"]["from_source"]
    )
    # the analysis reads a configuration's storage layer from the samples' variant
    assert {s["variant"]["storage_mechanism"] for s in bundles["TDX-Encrypted"].samples} == {"azure-confidential-disk"}
    assert {s["variant"]["storage"] for s in bundles["TDX-Non-Encrypted"].samples} == {"disk"}
    assert all(s["variant"] == {} for s in bundles["Intel-Non-TDX"].samples)
    assert any("storage protection" in line for line in bundles["Intel-Non-TDX"].manifest["environment"]["unknown"])


def test_systeminfo_gives_cores_and_memory_for_the_confounding_lint(tmp_path):
    bundles = _import(tmp_path / "out", *TEES)
    for label, bundle in bundles.items():
        text = _systeminfo(label)
        threads = int(re.search(r"^Total cores: (\d+)$", text, re.M).group(1))
        memory_gb = float(re.search(r"Memory Information=+\nTotal: ([\d.]+)GB", text).group(1))
        facts = machine_facts(bundle.probe)
        assert facts["vCPUs"] == threads == 2
        assert facts["memory"] == round(memory_gb * 1024**3)  # the memory section's Total, not the swap's 0.00B
        assert facts["CPU model"] is None  # "Processor: x86_64" is the architecture, not a model


def test_compare_separates_the_disk_encryption_from_the_tee(tmp_path):
    bundles = _import(tmp_path / "out", *TEES)
    done = run_ccbench("compare", *(b.path for b in bundles.values()), "--baseline", "TDX-Non-Encrypted", "--json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    layers = {r["config"].split(" / ")[0]: r["layer"] for r in rows if r.get("config") and r.get("layer")}
    assert layers["TDX-Encrypted"] == "storage encryption: azure-confidential-disk"
    assert layers["Intel-Non-TDX"] == "TEE removed: TDX"


def test_a_bare_tee_holds_for_the_labels_not_named_and_a_statement_wins_over_the_label(tmp_path):
    bundles = _import(
        tmp_path / "out",
        "--tee",
        "none",
        "--tee",
        "TDX-Encrypted=tdx",
        "--storage-protection",
        "TDX-Encrypted=dm-crypt",
    )
    assert {label: tee_technology(b.probe) for label, b in bundles.items()} == {
        "TDX-Encrypted": "tdx",
        "TDX-Non-Encrypted": "none",
        "Intel-Non-TDX": "none",
    }
    storage = bundles["TDX-Encrypted"].manifest["environment"]["storage"]
    assert storage["protection"] == "dm-crypt" and storage["stated"] is True
    assert {s["variant"]["storage_mechanism"] for s in bundles["TDX-Encrypted"].samples} == {"dm-crypt"}


def test_a_single_source_takes_a_bare_storage_protection(tmp_path):
    out = tmp_path / "out"
    done = run_ccbench("import", "fio", FIO3, "--out", out, "--storage-protection", "fscrypt", "--tee", "sev-snp")
    assert done.returncode == 0, done.stderr
    [bundle] = [read_bundle(p) for p in out.iterdir()]
    assert bundle.manifest["environment"]["storage"]["protection"] == "fscrypt"
    assert {s["variant"]["storage_mechanism"] for s in bundle.samples} == {"fscrypt"}
    assert {e["key"].split("|")[1] for e in bundle.executions} == {"storage=encrypted"}


@pytest.mark.parametrize(
    "options, expected",
    [
        (("--tee", "Nope=tdx"), "no bundle of this import has the label 'Nope'"),
        (("--tee", "TDX-Encrypted=tdz"), "--tee 'tdz': not a TEE ccbench knows"),
        (("--storage-protection", "TDX-Encrypted=bitlocker"), "--storage-protection 'bitlocker'"),
        (("--storage-protection", "Intel=none"), "no bundle of this import has the label 'Intel'"),
        (("--tee", "tdx", "--tee", "none"), "both given for every bundle"),
        (("--tee", "=tdx"), "give LABEL=VALUE"),
        (("--tee", "TDX-Encrypted=tdx", "--tee", "TDX-Encrypted=none"), "'TDX-Encrypted' is given"),
    ],
)
def test_a_statement_that_cannot_be_one_is_one_line_and_writes_nothing(tmp_path, options, expected):
    out = tmp_path / "out"
    done = run_ccbench("import", "seed000", SEED, "--out", out, *options)
    assert done.returncode == 2, done.stdout + done.stderr
    assert expected in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists() or not any(out.iterdir())
