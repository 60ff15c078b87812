"""ccbench import --tee / --kernel-cmdline: facts the source lacks, stated by the user, recorded as
stated (never as measured) where the lint and the analysis read the measured ones."""

import json

from conftest import DATA, run_ccbench

from ccbench.bundle import read_bundle
from ccbench.probe.facts import provenance, tee_technology
from ccbench.probe.lint import small_swiotlb

FIO3 = DATA / "fio" / "randrw-4k.json"


def _import(tmp_path, name, *options):
    out = tmp_path / name
    done = run_ccbench("import", "fio", FIO3, "--out", out, "--label", name, *options)
    assert done.returncode == 0, done.stderr
    [bundle] = [p for p in out.iterdir() if (p / "manifest.json").exists()]
    return read_bundle(bundle)


def test_stated_facts_are_recorded_as_stated_where_measured_ones_are_read(tmp_path):
    bundle = _import(tmp_path, "snp", "--tee", "sev-snp", "--kernel-cmdline", "console=ttyS0 swiotlb=force")
    environment = bundle.manifest["environment"]
    assert environment["tee"]["technology"] == "sev-snp" and environment["tee"]["stated"] is True
    assert environment["tee"]["evidence"] == []  # stated, not measured: no evidence is invented
    assert tee_technology(bundle.probe) == "sev-snp"
    recorded = provenance(bundle.probe)
    assert recorded["kernel_cmdline"] == "console=ttyS0 swiotlb=force"
    assert recorded["swiotlb"]["cmdline"] == "force" and recorded["stated"] == ["kernel_cmdline"]
    assert recorded["cpu_model"] is None and recorded["tee_evidence"] is None  # the rest stays unknown
    assert environment["stated"]["tee"]["value"] == "sev-snp"
    assert any(line.startswith("tee: stated as sev-snp") for line in environment["unknown"])
    # the lint takes the stated TEE like a measured one: a SEV-SNP guest's bounce buffers are checked
    # (their size is not in the source: said so), where an unknown TEE is not checked at all
    [finding] = small_swiotlb(bundle.probe, "snp")
    assert "swiotlb" in finding.what and "sev-snp" in finding.what
    assert small_swiotlb(_import(tmp_path, "unstated").probe, "unstated") == []
    assert run_ccbench("verify", bundle.path).returncode == 0


def test_the_analysis_reads_a_stated_tee(tmp_path):
    plain = _import(tmp_path, "plain", "--tee", "none")
    snp = _import(tmp_path, "snp", "--tee", "sev-snp")
    compared = run_ccbench("compare", plain.path, snp.path, "--baseline", "plain", "--json")
    assert compared.returncode == 0, compared.stderr
    configs = {json.loads(line).get("config") for line in compared.stdout.splitlines() if line.startswith("{")}
    assert any("SEV-SNP" in str(c) for c in configs), configs


def test_without_statements_nothing_is_stated(tmp_path):
    environment = _import(tmp_path, "plain").manifest["environment"]
    assert environment["tee"]["technology"] == "unknown" and "stated" not in environment
    assert "provenance" not in environment


def test_a_statement_that_cannot_be_one_is_one_line(tmp_path):
    for options, expected in ((["--tee", "sev-snpp"], "--tee 'sev-snpp'"), (["--kernel-cmdline", " "], "one line")):
        done = run_ccbench("import", "fio", FIO3, "--out", tmp_path / "out", *options)
        assert done.returncode == 2 and expected in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "out").exists()
