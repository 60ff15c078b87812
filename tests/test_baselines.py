"""Which machine and configuration each row stands against, on seed 000's real published files: a TEE
machine never against a plain machine of another CPU vendor, and the default baseline the least protected
configuration of all the bundles given, whatever their order (issue: "One answer everywhere", items 1-2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ccbench.probe.facts import cpu_vendor

SEED = Path(__file__).parent / "data" / "import" / "seed000-azure"
TEES = {"TDX-Encrypted": "tdx", "TDX-Non-Encrypted": "tdx", "Intel-Non-TDX": "none", "AMD-Non-SEV": "none",
        "SEV-Non-Encrypted": "sev-snp"}  # fmt: skip


def _seed_with_amd(tmp_path: Path, ccbench, with_intel: bool = True) -> Path:
    """Seed 000's slice with its AMD machines added (the Intel plain machine's files under the labels seed
    000 gives its AMD machines: the published slice holds only the Intel side), imported per machine with
    its --tee."""
    source = tmp_path / "source"
    shutil.copytree(SEED, source)
    for path in list(source.glob("Intel-Non-TDX_*")):
        for label in ("AMD-Non-SEV", "SEV-Non-Encrypted"):
            shutil.copy(path, source / path.name.replace("Intel-Non-TDX", label))
        if not with_intel:
            path.unlink()
    tees = [f"--tee={label}={tee}" for label, tee in TEES.items() if with_intel or label != "Intel-Non-TDX"]
    done = ccbench("import", "seed000", source, "--out", tmp_path / "s0", *tees)
    assert done.returncode == 0, done.stderr
    return tmp_path / "s0"


def _rows(ccbench, *args) -> list[dict]:
    done = ccbench("compare", *args, "--json")
    assert done.returncode == 0, done.stderr
    return [row for row in map(json.loads, done.stdout.splitlines()) if "finding" not in row]


def _machine(config: str) -> str:
    return config.split(" / ")[0]


def test_vendor_from_the_model_else_the_tee_else_the_label():
    assert cpu_vendor("Intel(R) Xeon(R) Platinum 8370C CPU @ 2.80GHz", "none", "x") == ("Intel", "CPU model")
    assert cpu_vendor("AMD EPYC 7763 64-Core Processor", "sev-snp", "Intel-ish") == ("AMD", "CPU model")
    assert cpu_vendor(None, "tdx", "AMD-box") == ("Intel", "implied by the TEE")
    assert cpu_vendor(None, "sev-snp", None) == ("AMD", "implied by the TEE")
    assert cpu_vendor(None, "none", "AMD-Non-SEV") == ("AMD", "named in the label")
    # a word of its own only: "damd" names nothing, two vendors name none
    assert cpu_vendor(None, "none", "damd-box") == (None, "")
    assert cpu_vendor(None, "none", "amd-vs-intel") == (None, "")


def test_seed000_pairs_tdx_with_the_intel_machine_and_sev_with_the_amd_one(tmp_path, ccbench):
    """On main's code every row stood against the first bundle, AMD-Non-SEV: TDX measured against AMD."""
    s0 = _seed_with_amd(tmp_path, ccbench)
    bundles = sorted(str(p) for p in s0.iterdir())
    pairs = {(_machine(r["config"]), _machine(r["baseline"])) for r in _rows(ccbench, *bundles)}
    assert ("TDX-Encrypted", "Intel-Non-TDX") in pairs and ("TDX-Non-Encrypted", "Intel-Non-TDX") in pairs
    assert ("SEV-Non-Encrypted", "AMD-Non-SEV") in pairs
    assert not {p for p in pairs if p[0].startswith("TDX") and p[1] == "AMD-Non-SEV"}
    summary = ccbench("compare", *bundles, "--summary")
    assert summary.returncode == 0 and "matched baselines AMD-Non-SEV, Intel-Non-TDX" in summary.stdout
    # the report's page says the same: its verdict names both baselines
    report = ccbench("report", *bundles, "-o", tmp_path / "r.md")
    assert report.returncode == 0, report.stderr
    assert "AMD-Non-SEV" in (tmp_path / "r.md").read_text() and "Intel-Non-TDX" in (tmp_path / "r.md").read_text()


def test_without_a_plain_machine_of_its_vendor_the_tee_layer_has_no_figure(tmp_path, ccbench):
    """Without Intel-Non-TDX, TDX's rows against AMD-Non-SEV are left out, saying why, in every output."""
    s0 = _seed_with_amd(tmp_path, ccbench, with_intel=False)
    bundles = sorted(str(p) for p in s0.iterdir())
    rows = [r for r in _rows(ccbench, *bundles) if _machine(r["config"]).startswith("TDX")]
    against_amd = [r for r in rows if _machine(r["baseline"]) == "AMD-Non-SEV"]
    assert against_amd and all(r["implausible"].startswith("across CPU vendors: Intel") for r in against_amd), rows
    # the encrypted disk inside TDX, against the TDX machine without it, is the same vendor's: a figure
    assert all(not r["implausible"] for r in rows if _machine(r["baseline"]) == "TDX-Non-Encrypted")
    summary = ccbench("compare", *bundles, "--summary").stdout
    tdx = [line for line in summary.splitlines() if line.startswith("TEE: TDX")]
    assert tdx and "no figure" in tdx[0], summary
    assert "across CPU vendors" in summary
    # the user's own pair is theirs: --pair sets TDX against the AMD machine and marks nothing as across
    paired = _rows(ccbench, *bundles, "--pair", "TDX*=AMD-Non-SEV")
    assert paired and not any(r["implausible"] for r in paired if _machine(r["config"]).startswith("TDX"))
    # the report takes --pair too, and refuses it beside --baseline in one line
    done = ccbench("report", *bundles, "--pair", "TDX*=AMD-Non-SEV", "-o", tmp_path / "p.md")
    assert done.returncode == 0, done.stderr
    assert "across CPU vendors" not in (tmp_path / "p.md").read_text()
    plain = ccbench("report", *bundles, "-o", tmp_path / "d.md")
    assert plain.returncode == 0 and "across CPU vendors" in (tmp_path / "d.md").read_text()
    both = ccbench("report", *bundles, "--pair", "TDX*=AMD*", "--baseline", "AMD-Non-SEV", "-o", tmp_path / "x.md")
    assert both.returncode == 2 and both.stderr.count("\n") == 1 and not (tmp_path / "x.md").exists()


@pytest.mark.parametrize("order", [("TDX-Encrypted", "TDX-Non-Encrypted"), ("TDX-Non-Encrypted", "TDX-Encrypted")])
def test_the_default_baseline_is_the_least_protected_whatever_the_order(tmp_path, ccbench, order):
    """On main's code the first bundle given was the baseline: the encrypted disk first read "storage
    removed: azure-confidential-disk"."""
    s0 = _seed_with_amd(tmp_path, ccbench)
    bundles = [str(next(s0.glob(f"{label}-2*"))) for label in order]
    rows = _rows(ccbench, *bundles)
    assert rows and {_machine(r["baseline"]) for r in rows} == {"TDX-Non-Encrypted"}
    assert {r["layer"] for r in rows} == {"storage encryption: azure-confidential-disk"}
    summary = ccbench("compare", *bundles, "--summary").stdout
    assert "against TDX-Non-Encrypted" in summary and "removed" not in summary


def test_a_tee_machine_pairs_with_a_plain_machine_it_shares_workloads_with_and_none_is_left_out_in_silence(
    tmp_path, ccbench
):
    """The user trial: a local run (no workload in common with seed 000's machines) given first took the
    TDX machines as their matched baseline, and the TEE: TDX line vanished without a word."""
    data = Path(__file__).parent / "data" / "import"
    done = ccbench("import", "pyperf", data / "pyperf-2.11-python3.11-one-value.json", "--out", tmp_path / "py",
                   "--label", "intel-box")  # fmt: skip
    assert done.returncode == 0, done.stderr
    s0 = _seed_with_amd(tmp_path, ccbench)
    bundles = [str(next((tmp_path / "py").iterdir())), *sorted(str(p) for p in s0.iterdir())]
    pairs = {(_machine(r["config"]), _machine(r["baseline"])) for r in _rows(ccbench, *bundles)}
    assert ("TDX-Encrypted", "Intel-Non-TDX") in pairs and ("TDX-Encrypted", "intel-box") not in pairs
    summary = ccbench("compare", *bundles, "--summary").stdout
    assert "TEE: TDX" in summary
    said = " ".join(summary.split())
    assert "not compared: intel-box (no workload in common" in said, summary
    assert ccbench("report", *bundles, "-o", tmp_path / "r.md").returncode == 0
    assert "Not compared: intel-box" in (tmp_path / "r.md").read_text()


def test_seed000_says_what_the_encrypted_disk_costs_inside_tdx_and_never_calls_it_the_tees(tmp_path, ccbench):
    """The user trial: TDX-Encrypted (TDX and Azure's confidential disk) against Intel-Non-TDX, whose
    storage the source does not state, was labelled "TEE: TDX", and no storage line appeared by default."""
    s0 = _seed_with_amd(tmp_path, ccbench)
    bundles = sorted(str(p) for p in s0.iterdir())
    layers = {(_machine(r["config"]), _machine(r["baseline"])): r["layer"] for r in _rows(ccbench, *bundles)}
    assert (
        layers[("TDX-Encrypted", "Intel-Non-TDX")] == "combined: TEE: TDX + storage encryption: azure-confidential-disk"
    )
    assert layers[("TDX-Non-Encrypted", "Intel-Non-TDX")] == "TEE: TDX"
    assert layers[("TDX-Encrypted", "TDX-Non-Encrypted")] == "storage encryption: azure-confidential-disk"
    summary = ccbench("compare", *bundles, "--summary").stdout
    assert any(line.startswith("storage encryption: azure-confidential-disk") for line in summary.splitlines())
