"""The lint for the known traps (ccbench.probe.lint for one machine, ccbench.analysis.judgement.lint for a comparison; docs/trust.md, Lint): each finding triggered from a
fixture and not triggered from its fixed twin, and where it shows (compare, the verdict, the report,
env --lint, the before-run check)."""

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from bundles import (
    ICE_LAKE,
    SAPPHIRE_RAPIDS,
    probe,
    provenance_probe,
    sample,
    snp_evidence,
    tdx_evidence,
    write_environment,
)

from ccbench.analysis import format as fmt
from ccbench.analysis.judgement import lint as comparison_lint
from ccbench.analysis.judgement import lint_cipher
from ccbench.analysis.judgement.verdict import verdicts
from ccbench.analysis.judgement.verdict_table import verdict_table
from ccbench.analysis.rows import sides as machine_sides
from ccbench.analysis.rows.compare import compare
from ccbench.analysis.samples.load import load
from ccbench.probe import lint as machine_lint
from ccbench.probe.syscheck import format_checks, system_check
from ccbench.workloads import plan_device_io

REAL_WORLD_TEE = (
    Path(os.environ.get("CCBENCH_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    / "fixtures"
    / "real-world"
    / "tee"
)


def raytrace(milliseconds: float, seed: int) -> list:
    """pyperformance raytrace as the seed recorded it: one benchmark, 5 executions around its mean."""
    rng = np.random.default_rng(seed)
    return [
        sample(
            workload="pyperformance",
            kind="pyperformance",
            params={"benchmark": "raytrace"},
            variant={},
            metric="time_s",
            unit="s",
            value=milliseconds / 1000 * float(np.exp(noise)),
            repetition=rep,
            metadata={"case": {"benchmark": "raytrace"}},
        )
        for rep, noise in enumerate(rng.normal(0, 0.01, 5))
    ]


def seed000(tmp_path, tdx_cpu=SAPPHIRE_RAPIDS, tdx_kernel="6.5.0-1025-azure"):
    """Seed 000's case: raytrace 673 ms on Intel-Non-TDX (D2_v5, Ice Lake) and 495 ms on Intel-TDX."""
    plain = provenance_probe("Intel-Non-TDX", "none", cpu=ICE_LAKE, kernel="6.2.0-1018-azure")
    tdx = provenance_probe("Intel-TDX", "tdx", cpu=tdx_cpu, kernel=tdx_kernel, tee_evidence=tdx_evidence(False))
    return [write_environment(tmp_path, plain, raytrace(673, 1)), write_environment(tmp_path, tdx, raytrace(495, 2))]


def machines_of(paths):
    from ccbench.bundle import read_bundle

    return {str(path): read_bundle(path, samples=False).probe for path in paths}


def test_seed000_tdx_cost_is_confounded_by_the_cpu_and_kernel(tmp_path, ccbench):
    paths = seed000(tmp_path)
    frame = load(paths)
    table = compare(frame, machines=machines_of(paths))
    flag = "confounded by CPU model (Ice Lake vs Sapphire Rapids) and kernel (6.2.0-1018-azure vs 6.5.0-1025-azure)"
    assert table["flags"].map(lambda flags: flag in flags).all(), table["flags"].tolist()
    (layer,) = verdicts(table, frame)
    sentence = layer.sentence()
    assert sentence.startswith("TEE: TDX: cost confounded by CPU model (Ice Lake vs Sapphire Rapids) and kernel")
    assert "95% interval" not in sentence and "not the layer's own" in sentence
    cells = verdict_table([layer]).iloc[0]
    assert cells["typical cost"].startswith("confounded (") and cells["95% interval"] == "-"

    summary = ccbench("compare", *paths, "--summary")
    assert summary.returncode == 0, summary.stderr
    # the headline line says the machines differ in CPU and kernel, with the kernels' values on it
    # or on the layer's next line; the sentence (full compare) names them
    out = summary.stdout.splitlines()
    at = next(n for n, line in enumerate(out) if line.startswith("TEE: TDX"))
    end = next((n for n in range(at + 1, len(out)) if not out[n].startswith(" ")), len(out))
    head, layer = " ".join(out[at].split()), " ".join(" ".join(out[at:end]).split())  # wrapped lines joined
    assert head.startswith("TEE: TDX (machines differ in CPU; kernels differ") and "faster" in layer
    assert "kernels differ: 6.2.0-1018-azure vs 6.5.0-1025-azure" in layer
    assert "[high] confounded:" in summary.stdout and "saves about" not in summary.stdout
    text = " ".join(ccbench("compare", *paths).stdout.split())
    assert "TEE: TDX: cost confounded by CPU model (Ice Lake vs Sapphire Rapids)" in text
    lines = [json.loads(line) for line in ccbench("compare", *paths, "--summary", "--json").stdout.splitlines()]
    layers = [line for line in lines if "finding" not in line]
    assert layers[0]["confounded"] == [flag[len("confounded by ") :]]
    finding = next(line for line in lines if line.get("finding") == "confounded")
    assert finding["severity"] == "high" and "firecracker" not in finding["source"]
    assert finding["evidence"]["Intel-Non-TDX"]["CPU model"] == ICE_LAKE["model"]
    assert finding["evidence"]["Intel-TDX"]["kernel"] == "6.5.0-1025-azure"
    rows = [json.loads(line) for line in ccbench("compare", *paths, "--json").stdout.splitlines()]
    assert flag in rows[0]["flags"] and rows[-1]["finding"] == "confounded"


def test_twins_that_differ_only_in_the_tee_are_not_confounded(tmp_path):
    paths = seed000(tmp_path, tdx_cpu=ICE_LAKE, tdx_kernel="6.2.0-1018-azure")
    frame = load(paths)
    table = compare(frame, machines=machines_of(paths))
    assert not any(f.startswith("confounded") for flags in table["flags"] for f in flags)
    (layer,) = verdicts(table, frame)
    assert layer.confounded == [] and layer.cpu_note == ""
    assert layer.sentence().startswith(f"TEE: TDX: {fmt.effect(layer.typical, layer.low, layer.high)} (")
    assert "faster" in layer.sentence().split("(")[0]  # 495 ms against 673 ms
    findings = comparison_lint.lint_comparison(frame, table, machines_of(paths))
    assert [f.code for f in findings] == []


def test_a_layer_with_some_comparisons_confounded_gives_no_interval_either(tmp_path):
    kernel = "6.2.0-1018-azure"
    plain = provenance_probe("plain", "none", cpu=ICE_LAKE, kernel=kernel)
    twin = provenance_probe("tdx-twin", "tdx", cpu=ICE_LAKE, kernel=kernel, tee_evidence=tdx_evidence(False))
    other = provenance_probe("tdx-spr", "tdx", cpu=SAPPHIRE_RAPIDS, kernel=kernel, tee_evidence=tdx_evidence(False))
    paths = [write_environment(tmp_path, plain, raytrace(673, 1))]
    paths += [write_environment(tmp_path, twin, raytrace(690, 2)), write_environment(tmp_path, other, raytrace(495, 3))]
    frame = load(paths)
    table = compare(frame, machines=machines_of(paths))
    flagged = dict(zip(table["config"], table["flags"].map(lambda f: any(x.startswith("confounded") for x in f))))
    assert flagged == {"tdx-twin / TDX": False, "tdx-spr / TDX": True}
    (layer,) = verdicts(table, frame)
    assert "(2 comparisons, 1 confounded: " in layer.sentence() and "95% interval" not in layer.sentence()
    assert layer.confounded == ["CPU model (Ice Lake vs Sapphire Rapids)"]


def test_memory_within_the_tolerance_is_the_same_size_and_smt_differs():
    a = [("a", provenance_probe("a", "none", memory_bytes=8 * 2**30, smt=False))]
    b = [("b", provenance_probe("b", "tdx", memory_bytes=int(7.8 * 2**30), smt=False))]
    assert machine_sides.differences(a, b) == ([], {})
    c = [("c", provenance_probe("c", "tdx", memory_bytes=16 * 2**30, smt=True, vcpus=4))]
    found, _ = machine_sides.differences(a, c)
    assert machine_sides.confounded_by(found) == "vCPUs (2 vs 4), memory (8.0 GiB vs 16.0 GiB) and SMT (False vs True)"


def test_cpus_are_compared_by_brand_and_named_by_microarchitecture():
    ice_lake_8380 = dict(ICE_LAKE, model="Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz")
    a = [("a", provenance_probe("a", "none", cpu=ICE_LAKE))]
    b = [("b", provenance_probe("b", "tdx", cpu=ice_lake_8380))]
    found, _ = machine_sides.differences(a, b)
    assert machine_sides.confounded_by(found) == f"CPU model ({ICE_LAKE['model']} vs {ice_lake_8380['model']})"
    # an older bundle without CPUID family and model, on the same CPU: not a difference
    brand_only = provenance_probe("c", "tdx", cpu={"model": ICE_LAKE["model"]})
    assert machine_sides.differences(a, [("c", brand_only)])[0] == []


def test_an_older_bundle_says_what_could_not_be_checked(tmp_path):
    old = probe("old", "none") | {"cpu": dict(ICE_LAKE, threads=2), "memory": {"total_bytes": 8 * 2**30}}
    new = provenance_probe("new", "tdx", cpu=ICE_LAKE, kernel="6")
    found, unknown = machine_sides.differences([("old", old)], [("new", new)])
    assert found == [] and unknown == {"SMT": ["old"]}
    findings = comparison_lint.unchecked([("old", old)], [("new", new)], unknown)
    assert findings[0].code == "unchecked" and "SMT (old)" in findings[0].what
    assert comparison_lint.unchecked([("new", new)], [("new", new)], {}) == []


@pytest.mark.parametrize(
    ("evidence", "field"),
    [(snp_evidence, "SNP guest policy DEBUG"), (tdx_evidence, "TD ATTRIBUTES.DEBUG")],
)
def test_a_debug_tee_is_not_representative(evidence, field):
    technology = evidence(True)["technology"]
    debug = provenance_probe("cvm", technology, tee_evidence=evidence(True))
    (finding,) = machine_lint.lint_machine(debug)
    assert finding.code == "debug-tee" and finding.severity == "high" and field in finding.what
    assert "not representative" in finding.what and finding.evidence["this machine"][field] is True
    assert machine_lint.lint_machine(provenance_probe("cvm", technology, tee_evidence=evidence(False))) == []


def test_a_tee_without_evidence_is_named_unchecked_and_a_plain_machine_is_not_linted():
    (finding,) = machine_lint.lint_machine(provenance_probe("cvm", "sev-snp", tee_evidence=None))
    assert finding.code == "unchecked" and "debug mode could not be checked" in finding.what
    assert machine_lint.lint_machine(provenance_probe("vm", "none"), device_io=True) == []


def test_small_bounce_buffers_under_an_io_heavy_plan():
    small = provenance_probe("cvm", "tdx", swiotlb_bytes=64 * 2**20, tee_evidence=tdx_evidence(False))
    (finding,) = machine_lint.lint_machine(small, device_io=True)
    assert finding.code == "small-swiotlb" and finding.severity == "medium"
    assert finding.evidence["this machine"]["kernel_default_bytes"] == int(0.06 * 8 * 2**30)
    assert "firecracker-microvm/firecracker/pull/5156" in finding.source
    assert machine_lint.lint_machine(small, device_io=False) == [] and machine_lint.lint_machine(small) == []
    large = provenance_probe("cvm", "tdx", swiotlb_bytes=1024 * 2**20, tee_evidence=tdx_evidence(False))
    assert machine_lint.lint_machine(large, device_io=True) == []
    plain = provenance_probe("vm", "none", swiotlb_bytes=64 * 2**20)
    assert machine_lint.lint_machine(plain, device_io=True) == []


def test_which_plans_move_data_through_devices():
    from ccbench.planning.plan import load_plan

    storage = load_plan("storage").model_dump(mode="json")
    transport = load_plan("transport").model_dump(mode="json")
    assert plan_device_io(storage) is True and plan_device_io(transport) is False
    assert plan_device_io(None) is None


def test_4k_pages_against_2m_pages():
    never = [("cvm", provenance_probe("cvm", "sev-snp", thp="never"))]
    madvise = [("vm", provenance_probe("vm", "none", thp="madvise"))]
    (finding,) = comparison_lint.small_pages(madvise, never)
    assert finding.code == "small-pages" and "4K pages on cvm where vm can use 2M" in finding.what
    assert "AMDSEV/issues/225" in finding.source and finding.evidence["cvm"]["thp"] == "never"
    assert comparison_lint.small_pages(madvise, [("cvm", provenance_probe("cvm", "sev-snp", thp="always"))]) == []
    reserved = [("cvm", provenance_probe("cvm", "sev-snp", thp="never", hugepages_total=512))]
    assert comparison_lint.small_pages(madvise, reserved) == []
    assert comparison_lint.small_pages(madvise, [("old", probe("old", "none"))]) == []  # not recorded: not judged


def throughput_rows(axis: str, speeds: dict, cases: dict, **extra) -> list[dict]:
    """Three executions of each (variant, case) of one machine: ``speeds[variant]`` at the bulk case,
    a tenth of it at the small one."""
    rows = []
    for _repetition in range(3):
        for value, speed in speeds.items():
            for params, scale in cases.items():
                rows.append({"metric": "throughput", axis: value, "params": params, "value": speed * scale, **extra})
    return rows


def machine_frame(rows: list[dict], workload: str) -> pd.DataFrame:
    frame = pd.DataFrame(rows).assign(machine="cvm", workload=workload, warmup=False)
    for column in ("transport", "storage", "storage_cipher_MBps"):
        if column not in frame:
            frame[column] = None
    return frame


def transport_frame(tls_mbps: float) -> pd.DataFrame:
    """One machine's transport run: the AEAD ceiling and the throughputs at 1536 B and 1 MiB (duplex)."""
    cases = {
        json.dumps({"payload": 1048576, "pipe": "duplex"}): 1.0,
        json.dumps({"payload": 1536, "pipe": "duplex"}): 0.1,
    }
    rows = throughput_rows("transport", {"plain": 6000.0, "securechannel": 2900.0, "tls": tls_mbps}, cases)
    rows += [{"metric": "aead_seal_open", "transport": "securechannel", "params": "{}", "value": 5000.0}] * 3
    return machine_frame(rows, "transport")


def test_a_transport_far_below_the_aead_speed_of_the_same_run():
    (finding,) = lint_cipher.slow_cipher(transport_frame(tls_mbps=300.0))
    evidence = finding.evidence["cvm"]
    assert finding.code == "slow-cipher" and evidence["transport"] == "tls" and '"payload": 1048576' in evidence["case"]
    assert evidence["implied_cipher_MBps"] == pytest.approx(1 / (1 / 300 - 1 / 6000), abs=0.1)
    # rustls' usual share (2100 of plain's 6000) costs per byte what a 3231 MB/s cipher would: not flagged,
    # nor is the small payload, where per-message costs dominate
    assert lint_cipher.slow_cipher(transport_frame(tls_mbps=2100.0)) == []


def storage_frame(fscrypt_mbps: float, cipher_mbps: float | None) -> pd.DataFrame:
    """fio on one machine: 1m sequential reads and 4k random reads, on disk, ext4-loop and fscrypt."""
    cases = {'{"bs": "1m", "rw": "read"}': 1.0, '{"bs": "4k", "rw": "randread"}': 0.05}
    rows = throughput_rows("storage", {"disk": 1500.0, "ext4-loop": 1400.0}, cases)
    rows += throughput_rows("storage", {"fscrypt": fscrypt_mbps}, cases, storage_cipher_MBps=cipher_mbps)
    return machine_frame(rows, "fio")


def test_encrypted_storage_far_below_the_kernel_cipher_speed_of_the_same_run():
    (finding,) = lint_cipher.slow_cipher(storage_frame(fscrypt_mbps=200.0, cipher_mbps=2400.0))
    evidence = finding.evidence["cvm"]
    assert evidence["storage"] == "fscrypt" and evidence["ext4-loop_throughput_MBps"] == 1400.0
    assert evidence["cipher_MBps_measured"] == 2400.0 and "1m" in evidence["case"]
    # the same throughput with a software cipher of 250 MB/s is what that cipher explains (the
    # software-AES cause, not a misconfiguration); without a measured speed nothing is judged
    assert lint_cipher.slow_cipher(storage_frame(fscrypt_mbps=200.0, cipher_mbps=250.0)) == []
    assert lint_cipher.slow_cipher(storage_frame(fscrypt_mbps=900.0, cipher_mbps=2400.0)) == []
    assert lint_cipher.slow_cipher(storage_frame(fscrypt_mbps=200.0, cipher_mbps=None)) == []


def test_the_kernel_cipher_speed_is_measured_or_its_absence_named():
    from ccbench.probe.crypto import kernel_cipher_speed

    speed = kernel_cipher_speed("xts(aes)", seconds=0.05)
    if "MBps" in speed:
        assert speed["MBps"] > 0 and speed["bytes"] >= 65536
    else:  # this development kernel has no AF_ALG (CONFIG_CRYPTO_USER_API_SKCIPHER)
        assert "AF_ALG" in speed["reason"] or "xts(aes)" in speed["reason"]
    assert "reason" in kernel_cipher_speed("no-such-cipher(aes)", seconds=0.05)


def test_the_report_shows_the_findings_after_the_verdict(tmp_path, ccbench):
    paths = seed000(tmp_path)
    out = tmp_path / "report.md"
    done = ccbench("report", *paths, "-o", out, "--format", "md")
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert text.index("Verdict per protection layer") < text.index("Lint: known traps")
    assert "cost confounded by CPU model (Ice Lake vs Sapphire Rapids)" in text
    assert "| high | confounded |" in text and "memory=8.0 GiB" in text


def test_env_lint_on_a_real_snp_guest_snapshot(ccbench):
    case = REAL_WORLD_TEE / "snp-gcp-n2d"
    if not case.is_dir():
        pytest.skip(f"{case} is absent (set CCBENCH_SHARED to the folder holding fixtures/real-world)")
    args = ["env", "--root", case / "root", "--dmesg", case / "dmesg.txt", "--lint"]
    done = ccbench(*args)
    assert done.returncode == 0, done.stderr
    findings_text = done.stdout[done.stdout.index("\nlint ") :]  # after the provenance block, which names swiotlb
    assert "debug mode could not be checked" in findings_text and "swiotlb" not in findings_text
    planned = ccbench(*args, "--plan", "storage", "--json")
    findings = json.loads(planned.stdout)["lint"]
    assert [f["code"] for f in findings] == ["unchecked", "unchecked"] and "swiotlb" in findings[1]["what"]
    transport = ccbench(*args, "--plan", "transport", "--json")
    assert len(json.loads(transport.stdout)["lint"]) == 1  # no device I/O: no bounce-buffer check
    wrong = ccbench("env", "--plan", "storage")
    assert wrong.returncode == 2 and "add --lint" in wrong.stderr and "Traceback" not in wrong.stderr


def test_env_lint_on_a_plain_snapshot_has_no_findings(ccbench):
    case = REAL_WORLD_TEE / "sgx-guest-qemu"
    if not case.is_dir():
        pytest.skip(f"{case} is absent (set CCBENCH_SHARED to the folder holding fixtures/real-world)")
    done = ccbench("env", "--root", case / "root", "--dmesg", case / "dmesg.txt", "--lint", "--plan", "storage")
    assert done.returncode == 0, done.stderr
    assert "no findings" in done.stdout


def test_the_before_run_check_prints_findings_and_never_blocks(tmp_path):
    debug = provenance_probe("cvm", "sev-snp", swiotlb_bytes=32 * 2**20, tee_evidence=snp_evidence(True))
    checks = system_check(tmp_path, processes=[], aes=False, environment=debug, device_io=True)
    lint_checks = {c["name"]: c for c in checks if c["name"].startswith("lint")}
    assert set(lint_checks) == {"lint: debug-tee", "lint: small-swiotlb"}
    assert all(c["ok"] is False and "source:" in c["advice"] for c in lint_checks.values())
    assert "WARN lint: debug-tee" in format_checks(checks)
    clean = provenance_probe("cvm", "sev-snp", tee_evidence=snp_evidence(False))
    checks = system_check(tmp_path, processes=[], aes=False, environment=clean, device_io=True)
    assert [c for c in checks if c["name"].startswith("lint")] == [
        {"name": "lint (docs/trust.md, Lint)", "value": "no findings", "ok": True, "advice": ""}
    ]


def test_compare_json_alone_lints_from_the_engine_as_from_the_per_sample_frame(tmp_path):
    """`compare --json` builds no per-sample frame: the lint reads the engine's facts and the few
    metrics its cipher check needs (Comparison.findings(per_sample=False)), and finds what it finds on
    the frame."""
    from bundles import write_samples

    from ccbench.analysis.comparison import comparison
    from ccbench.analysis.samples.load import frame_from_bundles, load_bundles

    rows = []
    for repetition in range(3):
        for transport, speed in (("plain", 6000.0), ("securechannel", 2900.0), ("tls", 300.0)):
            rows.append({"metric": "throughput", "unit": "MB/s", "better": "higher", "value": speed})
            rows[-1].update(workload="transport", variant={"transport": transport}, repetition=repetition)
            rows[-1]["params"] = {"payload": 1048576, "pipe": "duplex"}
        ceiling = {"workload": "transport", "variant": {"transport": "securechannel"}, "repetition": repetition}
        rows.append({**ceiling, "metric": "aead_seal_open", "unit": "MB/s", "better": "higher", "value": 5000.0})
        rows.append(
            {
                "workload": "app",
                "variant": {},
                "metric": "time",
                "value": 1.0 + repetition / 10,
                "repetition": repetition,
            }
        )
    paths = [write_samples(tmp_path, "cvm", "none", rows)]
    result = comparison(paths, frame=False)
    from_engine = result.findings(per_sample=False)
    bundles = load_bundles(paths, samples=False)
    machines, device_io = comparison_lint.bundle_machines(bundles)
    from_frame = comparison_lint.lint_comparison(frame_from_bundles(bundles), result.table, machines, device_io)
    assert [f.code for f in from_engine] == [f.code for f in from_frame]
    assert "slow-cipher" in [f.code for f in from_engine]


def test_a_bounce_pool_missing_from_memtotal_is_part_of_the_machine_size():
    """A plain VM of 2 GiB booted with swiotlb=65536,force reserves a 128 MiB pool at boot, which
    MemTotal leaves out (measured here under ccbench machines: 1.94 GB against 2.07 GB, 6.5% apart,
    over the 5% tolerance): with the pool counted the two are one size, and the text still shows
    what each machine recorded where they do differ."""
    plain = [("plain", provenance_probe("plain", "none", memory_bytes=2074636288, swiotlb_bytes=None))]
    twin = [("twin", provenance_probe("twin", "none", memory_bytes=1938845696, swiotlb_bytes=128 * 2**20))]
    assert machine_sides.differences(plain, twin) == ([], {})
    without_pool = [("twin", provenance_probe("twin", "none", memory_bytes=1938845696, swiotlb_bytes=None))]
    found, _ = machine_sides.differences(plain, without_pool)
    assert machine_sides.confounded_by(found) == "memory (1.9 GiB vs 1.8 GiB)"


def test_seed000_import_names_the_kernels_wherever_the_verdict_is_printed(tmp_path, ccbench):
    """seed 000's published results (a slice in tests/data): the TDX VMs and the plain one run
    different kernels; the layer's own headline lines say so with both kernels in the terminal, in
    `compare --summary --json` and in the report's verdict, not only in the lint and the table."""
    import html
    import re
    from pathlib import Path

    seed = Path(__file__).parent / "data" / "import" / "seed000-azure"
    tees = ["--tee", "TDX-Encrypted=tdx", "--tee", "TDX-Non-Encrypted=tdx", "--tee", "Intel-Non-TDX=none"]
    assert ccbench("import", "seed000", seed, "--out", tmp_path / "b", *tees).returncode == 0
    paths = sorted((tmp_path / "b").iterdir())
    kernels = "kernels differ: 6.8.0-1017-azure vs 6.5.0-1025-azure"

    def layer_lines(lines: list[str]) -> str:
        at = next(n for n, line in enumerate(lines) if line.startswith("TEE: TDX"))
        return "\n".join([lines[at], *[line for line in lines[at + 1 : at + 3] if line.startswith("  ")]])

    terminal = layer_lines(ccbench("compare", *paths, "--summary").stdout.splitlines())
    assert terminal.startswith("TEE: TDX (CPU unknown; kernels differ") and kernels in terminal, terminal
    assert all(len(line) <= 100 for line in terminal.splitlines())
    records = [json.loads(line) for line in ccbench("compare", *paths, "--summary", "--json").stdout.splitlines()]
    (tdx,) = [r for r in records if r.get("layer") == "TEE: TDX"]
    assert kernels in "\n".join(tdx["headline"]) and tdx["headline"][0].startswith("TEE: TDX (CPU unknown; kernels")
    page = tmp_path / "r.html"
    assert ccbench("report", *paths, "-o", page).returncode == 0
    verdict = page.read_text().split("<section id='verdict-per-protection-layer'", 1)[1].split("</section>", 1)[0]
    points = [html.unescape(re.sub(r"<[^>]+>", "", li)) for li in re.findall(r"<li>(.*?)</li>", verdict, re.S)]
    assert any(kernels in point for point in points), points


def test_cases_measured_at_other_params_than_the_baselines_are_named_not_dropped(tmp_path, ccbench):
    """Two runs of a workload that calibrates its open-loop rates per run (microservices) share only
    the closed-loop case: the open-loop cases of the second run have no row, and the lint says so
    (which, and the values on both sides) instead of the verdict resting silently on the rest."""
    from bundles import write_samples

    paths = []
    for host, rates in (("run-a", (1107, 2213)), ("run-b", (626, 1253))):
        rows = []
        for repetition in range(3):
            for transport in ("plain", "tls"):
                for params in ({"mode": "closed", "connections": 16}, *({"mode": "open", "rate": r} for r in rates)):
                    rows.append(
                        {
                            "workload": "svc",
                            "variant": {"transport": transport},
                            "metric": "latency_p50",
                            "unit": "ms",
                            "params": params,
                            "value": (1.0 if transport == "plain" else 1.2) * (1 + repetition / 100),
                            "repetition": repetition,
                        }
                    )
        paths.append(write_samples(tmp_path, host, "none", rows))
    alone = ccbench("compare", str(paths[1]), "--json")
    assert alone.returncode == 0, alone.stderr
    assert '"unpaired"' not in alone.stdout
    both = ccbench("compare", *map(str, paths), "--baseline", "run-a", "--json")
    assert both.returncode == 0, both.stderr
    found = [json.loads(line) for line in both.stdout.splitlines() if line.startswith('{"finding": "unpaired"')]
    assert {f["evidence"]["config"] for f in found} == {"run-b / no TEE / plain", "run-b / no TEE / tls"}
    assert all("rate 626, 1253 against 1107, 2213" in f["what"] and f["severity"] == "medium" for f in found)
    assert all(len(f["evidence"]["cases"]) == 2 for f in found)
    assert all("set it in the plan to the baseline's values (rate 1107, 2213)" in f["advice"] for f in found)
    summary = ccbench("compare", *map(str, paths), "--baseline", "run-a", "--summary")
    assert "[medium] unpaired: run-b / no TEE / " in summary.stdout


def test_a_protection_across_two_runs_that_each_measured_the_baseline_is_not_blamed_for_the_runs_difference(
    tmp_path, ccbench
):
    """Two runs of one plan (plain and TLS each), the second run 30% faster on everything: against the
    first run's plain, the second run's TLS row holds the runs' difference too. It is "combined: TLS +
    other machine or run", and the TLS verdict rests on the first run's own pair (no cost). A run that
    measured TLS only (no plain of its own) has nothing to separate: its row stays TLS's."""
    from bundles import write_samples

    def rows(speed, transports):
        return [
            {
                "workload": "svc",
                "variant": {"transport": transport},
                "metric": "latency_p50",
                "unit": "ms",
                "value": speed * (1 + repetition / 200),
                "repetition": repetition,
            }
            for repetition in range(5)
            for transport in transports
        ]

    first = write_samples(tmp_path, "run-a", "none", rows(1.0, ("plain", "tls")))
    second = write_samples(tmp_path, "run-b", "none", rows(0.7, ("plain", "tls")))
    done = ccbench("compare", str(first), str(second), "--baseline", "run-a", "--json")
    assert done.returncode == 0, done.stderr
    layers = {
        (r["baseline"], r["config"]): r["layer"] for r in map(json.loads, done.stdout.splitlines()) if "config" in r
    }
    assert layers == {
        ("run-a / no TEE / plain", "run-a / no TEE / tls"): "TLS",
        ("run-a / no TEE / plain", "run-b / no TEE / plain"): "none",
        ("run-a / no TEE / plain", "run-b / no TEE / tls"): "combined: TLS + other machine or run",
        # and the second run's own TLS, against its own plain
        ("run-b / no TEE / plain", "run-b / no TEE / tls"): "TLS",
    }
    summary = ccbench("compare", str(first), str(second), "--baseline", "run-a", "--summary").stdout
    assert summary.splitlines()[0].startswith(
        "verdict per protection layer against run-a / no TEE / plain; run-b also against its own;"
    )
    tls = next(line for line in summary.splitlines() if line.startswith("TLS:"))
    assert "0 of 2 significant" in tls and "faster" not in tls
    alone = write_samples(tmp_path / "c", "run-c", "none", rows(0.7, ("tls",)))
    done = ccbench("compare", str(first), str(alone), "--baseline", "run-a", "--json")
    layers = {r["config"]: r["layer"] for r in map(json.loads, done.stdout.splitlines()) if "config" in r}
    assert layers["run-c / no TEE / tls"] == "TLS"


def test_a_baseline_named_by_its_fullest_label_once_in_the_verdicts_title(tmp_path, ccbench):
    """Two runs of a plan with a storage workload (against "run-a / no TEE / disk") and one without
    storage variants (against "run-a / no TEE"): one baseline, named once by its fullest label (it
    read "matched baselines run-a, run-a")."""
    from bundles import write_samples

    paths = []
    for host in ("run-a", "run-b"):
        rows = [
            {
                "workload": "io",
                "variant": {"storage": storage},
                "metric": "time",
                "value": v * (1 + r / 100),
                "repetition": r,
            }
            for r in range(3)
            for storage, v in (("disk", 1.0), ("tmpfs", 0.5))
        ]
        rows += [
            {"workload": "cpu", "variant": {}, "metric": "time", "value": 2 + r / 100, "repetition": r}
            for r in range(3)
        ]
        paths.append(write_samples(tmp_path, host, "none", rows))
    done = ccbench("compare", *map(str, paths), "--baseline", "run-a", "--summary")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("verdict per protection layer against run-a / no TEE / disk;")


# ---- issue 56: a full bounce pool, another clock source, kernels that differ ------------------------------


def _with(probe_document: dict, **provenance_fields) -> dict:
    probe_document["provenance"].update(provenance_fields)
    return probe_document


def _findings_everywhere(tmp_path, ccbench, paths, code):
    """The finding ``code`` as compare --json shows it, compare's text (the findings after the verdict,
    whole) and the report."""
    records = [json.loads(line) for line in ccbench("compare", *paths, "--json").stdout.splitlines()]
    found = [r for r in records if r.get("finding") == code]
    summary = ccbench("compare", *paths)
    assert summary.returncode == 0, summary.stderr
    out = tmp_path / "report.md"
    assert ccbench("report", *paths, "-o", out, "--format", "md").returncode == 0
    return found, " ".join(summary.stdout.split()), out.read_text()


def test_machines_reading_time_from_different_clock_sources_are_flagged(tmp_path, ccbench):
    kernel = "6.8.0-1021-azure"
    plain = _with(provenance_probe("plain", "none", kernel=kernel), clocksource="kvm-clock")
    snp = _with(provenance_probe("snp", "sev-snp", kernel=kernel, tee_evidence=snp_evidence(False)), clocksource="tsc")
    paths = [write_environment(tmp_path, plain, raytrace(673, 1)), write_environment(tmp_path, snp, raytrace(690, 2))]
    found, summary, report = _findings_everywhere(tmp_path, ccbench, paths, "clock-source")
    assert len(found) == 1 and found[0]["severity"] == "medium", found
    assert "plain read time from kvm-clock and snp from tsc" in found[0]["what"]
    assert found[0]["evidence"] == {"plain": {"clocksource": "kvm-clock"}, "snp": {"clocksource": "tsc"}}
    assert "[medium] clock-source: plain read time from kvm-clock and snp from tsc" in summary
    assert "| medium | clock-source |" in report
    # the same clock on both sides, or a machine that did not record its clock: nothing said
    same = _with(provenance_probe("snp", "sev-snp", kernel=kernel), clocksource="kvm-clock")
    from ccbench.analysis.judgement.lint_run import clock_sources

    assert clock_sources([("plain", plain)], [("snp", same)]) == []
    assert clock_sources([("plain", plain)], [("snp", provenance_probe("snp", "sev-snp"))]) == []


def test_kernels_that_differ_are_a_confound_beside_the_tee_in_compare_and_the_report(tmp_path, ccbench):
    """Same CPU, size and SMT; only the guest kernel differs (a newer SEV-SNP guest kernel alone moves
    memory latency): the finding says the kernel stands beside the TEE."""
    plain = provenance_probe("plain", "none", kernel="6.8.0-1021-azure")
    snp = provenance_probe("snp", "sev-snp", kernel="6.11.0-1018-azure", tee_evidence=snp_evidence(False))
    paths = [write_environment(tmp_path, plain, raytrace(673, 1)), write_environment(tmp_path, snp, raytrace(690, 2))]
    found, summary, report = _findings_everywhere(tmp_path, ccbench, paths, "confounded")
    words = "the kernels differ, a confound beside the TEE: a kernel alone moves a guest's costs"
    assert len(found) == 1 and found[0]["severity"] == "high", found
    assert "confounded by kernel (6.8.0-1021-azure vs 6.11.0-1018-azure)" in found[0]["what"]
    assert words in found[0]["what"] and words in summary and words in report
    # other confounders alone do not say it
    cpu_only = provenance_probe("snp", "sev-snp", cpu=SAPPHIRE_RAPIDS, kernel="6.8.0-1021-azure")
    (finding,) = comparison_lint.lint_pairs(*_pair_frame(tmp_path / "cpu", plain, cpu_only))
    assert finding.code == "confounded" and "kernels differ" not in finding.what


def _pair_frame(tmp_path, baseline, other):
    paths = [
        write_environment(tmp_path, baseline, raytrace(673, 1)),
        write_environment(tmp_path, other, raytrace(690, 2)),
    ]
    frame = load(paths)
    machines = machines_of(paths)
    return frame, compare(frame, machines=machines), machines


def _execution(rep: int, **counters) -> dict:
    return {
        "key": f"fio|-|rep|{rep}",
        "workload": "fio",
        "variant": {},
        "repetition": rep,
        "warmup": False,
        "status": "ok",
        "counters": {"swiotlb.used.end": 0.0, **counters},
        "counters_missing": {},
    }


def _bounce_bundles(tmp_path, records, swiotlb_bytes=64 * 2**20, dynamic=None):
    from ccbench.bundle import BundleWriter

    kernel = "6.8.0-1021-azure"
    plain = provenance_probe("plain", "none", kernel=kernel)
    snp = provenance_probe(
        "snp", "sev-snp", kernel=kernel, swiotlb_bytes=swiotlb_bytes, tee_evidence=snp_evidence(False)
    )
    snp["provenance"]["swiotlb"]["dynamic"] = dynamic
    paths = [write_environment(tmp_path, plain, raytrace(673, 1))]
    writer = BundleWriter.create(tmp_path / "snp", {"plan": {"name": "t"}, "environment": snp})
    writer.append_samples(raytrace(690, 2))
    for record in records:
        writer.append_execution(record)
    writer.close()
    from bundles import seal

    return [*paths, seal(writer.path)]


def test_a_bounce_pool_that_filled_during_an_execution_is_a_finding_in_compare_and_the_report(tmp_path, ccbench):
    """A 64 MiB pool is 32768 slabs: an execution whose high-water mark reached them and whose kernel
    printed 'swiotlb buffer is full' 3 times (the counters' kmsg.swiotlb_full)."""
    records = [
        _execution(0, **{"swiotlb.hiwater.end": 1200.0, "swiotlb.nslabs.end": 32768.0, "kmsg.swiotlb_full": 0.0}),
        _execution(1, **{"swiotlb.hiwater.end": 32768.0, "swiotlb.nslabs.end": 32768.0, "kmsg.swiotlb_full": 3.0}),
    ]
    paths = _bounce_bundles(tmp_path, records, dynamic=False)
    found, summary, report = _findings_everywhere(tmp_path, ccbench, paths, "full-bounce-pool")
    assert len(found) == 1 and found[0]["severity"] == "high", found
    what = found[0]["what"]
    assert what.startswith("snp (sev-snp): the bounce-buffer pool of 64 MiB was full during 1 execution of fio")
    assert "printed 'swiotlb buffer is full' 3 times" in what and "cannot grow it (no SWIOTLB_DYNAMIC)" in what
    (execution,) = found[0]["evidence"]["snp"]["executions"]
    assert execution["execution"] == "fio|-|rep|1" and execution["peak_slabs"] == 32768
    assert "[high] full-bounce-pool: snp (sev-snp)" in summary and "| high | full-bounce-pool |" in report


def test_a_nearly_full_pool_without_failures_and_what_is_not_judged(tmp_path):
    from ccbench.analysis.judgement.lint_run import dynamic_pool, full_bounce_pool

    snp = provenance_probe("snp", "sev-snp", swiotlb_bytes=64 * 2**20)
    # no nslabs counted (an older run): the boot pool's size from the probe; a transient pool counted
    nearly = [_execution(0, **{"swiotlb.hiwater.end": 31500.0, "swiotlb.transient_nslabs.end": 512.0})]
    (finding,) = full_bounce_pool("snp", nearly, snp)
    assert finding.severity == "medium" and "reached 95% or more of the pool" in finding.what
    assert "grows the pool when full (SWIOTLB_DYNAMIC)" in finding.what and dynamic_pool(nearly, snp) is True
    # half full, or a high-water mark that was not reset (since boot, not this execution's): nothing
    assert full_bounce_pool("snp", [_execution(0, **{"swiotlb.hiwater.end": 16000.0})], snp) == []
    since_boot = _execution(0, **{"swiotlb.hiwater.end": 32768.0})
    since_boot["counters_missing"] = {"swiotlb.hiwater.reset": "io_tlb_used_hiwater not reset (Permission denied)"}
    assert full_bounce_pool("snp", [since_boot], snp) == []
    assert dynamic_pool([_execution(0, **{"swiotlb.hiwater.end": 1.0})], snp) is False
    assert dynamic_pool([_execution(0)], snp) is None
