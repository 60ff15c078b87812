"""Cloud studies for the tests: one per cloud and CC kind, written as a user would, and a fixed run
context so that requests are reproducible."""

from __future__ import annotations

from pathlib import Path

from ccbench.machines.cloud.provider import RunContext

DATA = Path(__file__).parent / "data" / "cloud"
CTX = RunContext(
    "202612021000-0a1b2c", "alice", 1796212800, 10800, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBenchKey ccbench"
)
IMAGES = {
    "aws": "ami-0abc12345def67890",
    "gcp": "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64",
    "azure": "Canonical:0001-com-ubuntu-confidential-vm-jammy:22_04-lts-cvm:latest",
}
CLOUD = {
    "aws": 'provider = "aws"\nregion = "us-east-2"\nzone = "us-east-2a"',
    "gcp": 'provider = "gcp"\nzone = "us-central1-a"\nproject = "my-project"',
    "azure": 'provider = "azure"\nregion = "eastus"\nsubscription = "00000000-0000-0000-0000-000000000000"',
}
#: (cloud, CC kind) -> (the CC arm's size, its plain twin's size)
PAIRS = {
    ("aws", "sev-snp"): ("m6a.large", "m6a.large"),
    ("gcp", "sev-snp"): ("n2d-standard-2", "n2d-standard-2"),
    ("gcp", "tdx"): ("c3-standard-4", "c3-standard-4"),
    ("azure", "sev-snp"): ("Standard_DC2as_v5", "Standard_D2as_v5"),
}


def arm(name: str, kind: str, size: str, image: str, extra: str = "") -> str:
    return f'\n[[arm]]\nname = "{name}"\nkind = "{kind}"\ninstance_type = "{size}"\nimage = "{image}"\n{extra}'


def study_text(cloud: str, kind: str, cloud_extra: str = "", arms: str | None = None) -> str:
    cc_size, plain_size = PAIRS[(cloud, kind)]
    image = IMAGES[cloud]
    if arms is None:
        arms = arm("plain", "plain", plain_size, image) + arm("cc", kind, cc_size, image)
    return (
        f'name = "s"\nplan = "quick"\n\n[cloud]\n{CLOUD[cloud]}\nmax_lifetime = "3h"\nexpected_hours = 2\n'
        f'budget_usd = 5\nowner = "alice"\n{cloud_extra}\n{arms}'
    )


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(text)
    return path
