"""Cloud studies through the real CLI: `machines check` and `machines run --dry-run` print each arm's
request, the differences (only the CC mode) and the price; a bad study, an unmatched arm, an unknown
size and a launch over budget or without --yes off a terminal are refused in one line each."""

from __future__ import annotations

import pytest
from cloud_studies import DATA, IMAGES, arm, study_text, write
from conftest import run_ccbench

from ccbench.machines.cloud import pricing
from ccbench.machines.cloud.model import load_cloud_study
from ccbench.machines.cloud.view import cost, guard
from ccbench.machines.study import StudyError


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_check_prints_requests_differences_and_price(cloud):
    result = run_ccbench("machines", "check", DATA / f"{cloud}-study.toml")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    difference = {
        "aws": "CpuOptions.AmdSevSnp: (absent) -> enabled",
        "gcp": "confidentialInstanceConfig.confidentialInstanceType: (absent) -> TDX",
        "azure": "properties.securityProfile.securityType: TrustedLaunch -> ConfidentialVM",
    }[cloud]
    assert difference in out
    assert f"list prices of {pricing.PRICES_DATE}" in out and "estimate: $" in out
    assert out.count("  request (") == 2


def test_dry_run_prints_the_same_and_launches_nothing():
    result = run_ccbench("machines", "run", DATA / "aws-study.toml", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "CpuOptions.AmdSevSnp: (absent) -> enabled" in result.stdout
    assert "dry run: nothing launched" in result.stdout


def _refusal(tmp_path, text, *command):
    result = run_ccbench(*(command or ("machines", "check")), write(tmp_path, text))
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (study_text("aws", "sev-snp", "reigon = 'x'"), ["reigon", "did you mean 'region'?"]),
        (
            study_text("aws", "sev-snp", arms=arm("p", "plain", "m6a.large", IMAGES["aws"], 'instance_tpye = "x"')),
            ["instance_tpye", "did you mean 'instance_type'?"],
        ),
        (
            study_text("aws", "sev-snp", arms=arm("p", "plain", "m6a.lrage", IMAGES["aws"])),
            ["'m6a.lrage' is not a aws size", "did you mean 'm6a.large'?"],
        ),
        (
            study_text(
                "aws",
                "sev-snp",
                arms=arm("p", "plain", "m6a.large", IMAGES["aws"]) + arm("s", "sev-snp", "m6a.xlarge", IMAGES["aws"]),
            ),
            [
                "arm 's'",
                "differs from the baseline 'p' in instance_type (m6a.xlarge vs m6a.large)",
                "only in their CC mode",
            ],
        ),
        (
            study_text(
                "aws",
                "sev-snp",
                arms=arm("p", "plain", "m6a.large", IMAGES["aws"])
                + arm("s", "sev-snp", "m6a.large", "ami-0fff12345def67890"),
            ),
            ["arm 's'", "in image (ami-0fff12345def67890 vs ami-0abc12345def67890)"],
        ),
        (
            study_text(
                "azure",
                "sev-snp",
                arms=arm("p", "plain", "Standard_D2as_v5", IMAGES["azure"])
                + arm("s", "sev-snp", "Standard_DC4as_v5", IMAGES["azure"]),
            ),  # fmt: skip
            ["in instance_type (Standard_DC4as_v5 vs Standard_D2as_v5 (its twin is Standard_DC2as_v5))"],
        ),
        (
            study_text("aws", "sev-snp", arms=arm("t", "tdx", "m6a.large", IMAGES["aws"])),
            ["m6a.large cannot launch as a tdx arm", "AWS offers no TDX instances"],
        ),
        (
            study_text("azure", "sev-snp", arms=arm("p", "plain", "Standard_DC2as_v5", IMAGES["azure"])),
            ["Standard_DC2as_v5 cannot launch as a plain arm", "its plain twin is Standard_D2as_v5"],
        ),
        (
            study_text("azure", "sev-snp", arms=arm("t", "tdx", "Standard_DC2es_v5", IMAGES["azure"])),
            ["Standard_DC2es_v5 has no plain twin on Azure"],
        ),
        (
            study_text("gcp", "tdx", arms=arm("t", "tdx", "n2d-standard-2", IMAGES["gcp"])),
            ["n2d-standard-2 cannot launch as a tdx arm", "c3-standard-4"],
        ),
        (
            study_text("gcp", "tdx", arms=arm("t", "tdx", "c3-standard-4", "ubuntu-2404")),
            ["arm 't'.image", "projects/ubuntu-os-cloud"],
        ),
        (study_text("aws", "sev-snp").replace("budget_usd = 5\n", ""), ["cloud.budget_usd: missing"]),
        (study_text("aws", "sev-snp").replace('"3h"', '"3 weeks"'), ["cloud.max_lifetime", '"4h"']),
        (study_text("aws", "sev-snp", 'project = "p"'), ["cloud.project: is not a aws setting", "profile"]),
    ],
)
def test_a_bad_cloud_study_is_refused_in_one_line(tmp_path, text, words):
    line = _refusal(tmp_path, text)
    assert line.startswith("ccbench: error: ") and str(tmp_path / "study.toml") in line
    for word in words:
        assert word in line, line


def test_the_cost_guard_refuses_over_budget_and_off_a_terminal_without_yes(tmp_path):
    over = study_text("gcp", "tdx").replace("budget_usd = 5", "budget_usd = 0.5")
    result = run_ccbench("machines", "run", write(tmp_path, over), "--dry-run")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "refused: estimate $0.90" in result.stderr and "over budget_usd $0.50" in result.stderr
    result = run_ccbench("machines", "run", DATA / "gcp-study.toml")  # stdin is no terminal here
    assert result.returncode == 2 and "not on a terminal, so nothing is launched without --yes" in result.stderr
    result = run_ccbench("machines", "run", DATA / "gcp-study.toml", "--yes")
    assert result.returncode == 2 and result.stderr.splitlines() == [
        "ccbench: error: refused: say which addresses SSH to the instances may come from: --ssh-from "
        "203.0.113.7/32 (your own address) or ssh_from in [cloud]; nothing was launched"
    ]
    result = run_ccbench("machines", "run", DATA / "gcp-study.toml", "--yes", "--ssh-from", "my-laptop")
    assert result.returncode == 2 and result.stderr.splitlines() == [
        "ccbench: error: refused: --ssh-from: 'my-laptop' is not an address or network; give your own "
        "address, e.g. 203.0.113.7/32"
    ]
    bad = study_text("aws", "sev-snp", 'ssh_from = "::1"')
    line = _refusal(tmp_path, bad)
    assert "cloud.ssh_from: '::1': give an IPv4 address" in line


def test_the_estimate_is_price_per_hour_times_arms_times_hours(tmp_path):
    study = load_cloud_study(write(tmp_path, study_text("aws", "sev-snp")))
    rates, per_hour, estimate = cost(study)
    plain = pricing.SIZES["aws"]["m6a.large"].usd_per_hour
    assert [r for _, r in rates] == [plain, pytest.approx(plain * (1 + pricing.AWS_SNP_SURCHARGE))]
    assert estimate == pytest.approx(per_hour * 2)
    assert guard(study, yes=False, interactive=True) == "ask"
    assert guard(study, yes=True, interactive=False) is None


def test_a_local_study_with_provider_points_to_the_cloud_table(tmp_path):
    text = 'plan = "quick"\n[[arm]]\nname = "a"\nkind = "sev-snp"\nprovider = "azure"\n'
    line = _refusal(tmp_path, text)
    assert "a cloud study names its provider once, in a [cloud] table" in line


def test_load_cloud_study_raises_study_error(tmp_path):
    with pytest.raises(StudyError, match="cloud.provider"):
        load_cloud_study(write(tmp_path, study_text("aws", "sev-snp").replace('provider = "aws"', 'provider = "ibm"')))


def test_the_documented_cloud_study_and_prices_are_what_the_code_says(tmp_path):
    import re

    doc = (DATA.parents[1].parent / "docs" / "machines.md").read_text()
    example = re.search(r"```toml\n(name = \"aws-snp\".*?)```", doc, re.DOTALL).group(1)
    study = load_cloud_study(write(tmp_path, example))
    assert [(a.kind, a.size.name) for a in study.arms] == [("plain", "m6a.large"), ("sev-snp", "m6a.large")]
    rows = {
        "AWS m6a.large": ("aws", "m6a.large", "m6a.large"),
        "GCP c3-standard-4": ("gcp", "c3-standard-4", "c3-standard-4"),
        "GCP n2d-standard-2": ("gcp", "n2d-standard-2", "n2d-standard-2"),
        "Azure D2as_v5": ("azure", "Standard_D2as_v5", "Standard_DC2as_v5"),
    }
    for start, (cloud, plain, cc) in rows.items():
        row = next(line for line in doc.splitlines() if line.startswith(f"| {start}"))
        prices = [float(p) for p in re.findall(r"\$(\d+\.\d+)", row)]
        kind = next(k for k in pricing.SIZES[cloud][cc].kinds if k != "plain")
        expected = [
            pricing.hourly(pricing.SIZES[cloud][plain], "plain"),
            pricing.hourly(pricing.SIZES[cloud][cc], kind),
        ]
        assert prices[:2] == [round(p, 4) for p in expected], row
        assert prices[2] == round(sum(expected), 2), row
    assert f"dated {pricing.PRICES_DATE}" in doc


def test_the_launch_facts_say_each_instance_and_name_a_confounded_launch(tmp_path):
    import json

    from ccbench.machines.cloud.studyrun import launch_facts

    study = load_cloud_study(DATA / "azure-study.toml")
    base = {"provider": "azure", "region": "eastus", "zone": None, "image": IMAGES["azure"], "replica": 1}
    instances = {
        "plain-1": {**base, "arm": "plain", "instance_type": "Standard_D2as_v5", "cloud_says": {}},
        "snp-1": {
            **base,
            "arm": "snp",
            "instance_type": "Standard_DC2as_v5",
            "cloud_says": {"securityType": "ConfidentialVM"},
        },
    }
    (tmp_path / "study.json").write_text(json.dumps({"instances": instances}))
    lines = launch_facts(tmp_path, study)
    assert [a.name for a in study.arms] == ["plain", "snp"]
    assert lines[1] == (
        f"snp #1: azure eastus -, Standard_DC2as_v5, image {IMAGES['azure']}, "
        'CC flag as returned {"securityType": "ConfidentialVM"}'
    )
    assert lines[-1] == "the arms share provider, region, zone, image as launched (2 instances)"
    instances["snp-1"]["image"] = "Canonical:ubuntu-24_04-lts:cvm:latest"  # what a wrong launch would leave
    (tmp_path / "study.json").write_text(json.dumps({"instances": instances}))
    lines = launch_facts(tmp_path, study)
    assert lines[-1] == (
        f"launch confounded: image differs: plain={IMAGES['azure']}, snp=Canonical:ubuntu-24_04-lts:cvm:latest"
    )
    assert json.loads((tmp_path / "study.json").read_text())["launch_differences"] == [
        lines[-1][len("launch confounded: ") :]
    ]
