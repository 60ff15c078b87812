"""The AWS lifecycle against moto run as a real local server (no cloud is reachable here; moto stands
in for EC2's API, answering botocore over HTTP on the loopback): a run killed with SIGKILL in the
middle of its launch leaves tagged resources that `ccbench cloud sweep` finds and deletes, every one,
while an instance without the run tag is left alone; Ctrl-C mid-launch tears everything down by
itself; a run past its expiry is swept from another host, an unexpired one is not."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cloud_studies import write
from conftest import run_ccbench

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent
REGION = "us-east-1"


@pytest.fixture(scope="module")
def moto_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture
def aws_env(moto_url, tmp_path, monkeypatch):
    """The SDK's own chain pointed at moto: its endpoint and moto's dummy keys in the environment, no
    config or credentials file read."""
    env = {
        "AWS_ENDPOINT_URL": moto_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_DEFAULT_REGION": REGION,
        "CCBENCH_CLOUD_STATE": str(tmp_path / "state"),
        "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"), str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture
def ec2(aws_env):
    import boto3

    return boto3.client("ec2", region_name=REGION)


def _study(tmp_path, ec2) -> Path:
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    arms = "".join(
        f'\n[[arm]]\nname = "{n}"\nkind = "{k}"\ninstance_type = "m6a.large"\nimage = "{image}"\nreplicas = 2\n'
        for n, k in (("plain", "plain"), ("snp", "sev-snp"))
    )
    text = f'name = "moto"\nplan = "quick"\n[cloud]\nprovider = "aws"\nregion = "{REGION}"\nzone = "{REGION}a"\nmax_lifetime = "1h"\nbudget_usd = 5\nowner = "alice"\n{arms}'
    return write(tmp_path, text)


def _launch(tmp_path, ec2, aws_env):
    marker = tmp_path / "launched"
    child = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "cloud_launcher.py"),
            _study(tmp_path, ec2),
            aws_env["CCBENCH_CLOUD_STATE"],
            marker,
            tmp_path / "access",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for _ in range(600):
        if marker.exists() or child.poll() is not None:
            break
        time.sleep(0.1)
    assert marker.exists(), child.communicate()
    return child, marker.read_text()


def _live_instances(ec2, tagged: bool | None = None) -> dict[str, dict]:
    out = {}
    for reservation in ec2.describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )["Reservations"]:
        for inst in reservation["Instances"]:
            tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
            out[inst["InstanceId"]] = tags
    return out


def _tagged(ec2) -> dict[str, set[str]]:
    f = [{"Name": "tag-key", "Values": ["ccbench-run"]}]
    return {
        "instance": {i for i, tags in _live_instances(ec2).items() if "ccbench-run" in tags},
        "security-group": {g["GroupId"] for g in ec2.describe_security_groups(Filters=f)["SecurityGroups"]},
        "key-pair": {k["KeyName"] for k in ec2.describe_key_pairs(Filters=f)["KeyPairs"]},
    }


def _untagged_instance(ec2) -> str:
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    return ec2.run_instances(ImageId=image, InstanceType="t3.micro", MinCount=1, MaxCount=1)["Instances"][0][
        "InstanceId"
    ]


def test_a_run_killed_mid_launch_is_swept_and_nothing_untagged_is_touched(tmp_path, ec2, aws_env):
    bystander = _untagged_instance(ec2)
    child, first = _launch(tmp_path, ec2, aws_env)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    left = _tagged(ec2)
    assert first in left["instance"] and len(left["security-group"]) == 1 and len(left["key-pair"]) == 1
    run_id = _live_instances(ec2)[first]["ccbench-run"]
    journal = (Path(aws_env["CCBENCH_CLOUD_STATE"]) / f"{run_id}.jsonl").read_text()
    assert journal.count('"op": "create"') == 3  # the key, the group and the first instance, each before its call

    dry = run_ccbench("cloud", "sweep", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"would delete (its run is gone): instance {first}" in dry.stdout
    assert _tagged(ec2) == left

    access = tmp_path / "access"
    assert (access / "id_ed25519").exists()  # the killed run's secrets, until the sweep
    swept = run_ccbench("cloud", "sweep")
    assert swept.returncode == 0, swept.stderr
    assert f"aws: terminated instance {first}" in swept.stdout
    assert not (access / "id_ed25519").exists() and not list(access.glob("hosts/*_ed25519"))
    assert (access / "known_hosts").exists()
    assert _tagged(ec2) == {"instance": set(), "security-group": set(), "key-pair": set()}
    assert bystander in _live_instances(ec2)
    again = run_ccbench("cloud", "sweep")
    assert "aws:" not in again.stdout  # nothing of the run is left to find


def test_ctrl_c_mid_launch_tears_the_run_down_by_itself(tmp_path, ec2, aws_env):
    bystander = _untagged_instance(ec2)
    before = _tagged(ec2)
    child, first = _launch(tmp_path, ec2, aws_env)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120)
    assert child.returncode != 0
    assert f"aws: terminated instance {first}" in out, out + err
    assert _tagged(ec2) == before
    assert bystander in _live_instances(ec2)
    assert not (tmp_path / "access" / "id_ed25519").exists()  # the teardown deleted the run's secrets
    journal = next(Path(aws_env["CCBENCH_CLOUD_STATE"]).glob("*.jsonl")).read_text().splitlines()
    assert '"outcome": "torn down"' in journal[-1]


def test_sweep_deletes_an_expired_foreign_run_and_leaves_an_unexpired_one(tmp_path, ec2, aws_env):
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]

    def tagged_instance(run: str, expiry: int) -> str:
        tags = [{"Key": "ccbench-run", "Value": run}, {"Key": "ccbench-expiry", "Value": str(expiry)}]
        return ec2.run_instances(
            ImageId=image,
            InstanceType="m6a.large",
            MinCount=1,
            MaxCount=1,
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )["Instances"][0]["InstanceId"]

    expired = tagged_instance("elsewhere-old", int(time.time()) - 60)
    current = tagged_instance("elsewhere-new", int(time.time()) + 3600)
    swept = run_ccbench("cloud", "sweep", "--study", _study(tmp_path, ec2))
    assert swept.returncode == 0, swept.stderr
    assert "run elsewhere-old (expired)" in swept.stdout and f"terminated instance {expired}" in swept.stdout
    assert "run elsewhere-new is not from this host and expires" in swept.stdout
    live = _live_instances(ec2)
    assert expired not in live and current in live


def test_cloud_check_asks_the_api_and_says_each_problem_in_one_line(tmp_path, ec2, aws_env):
    study = _study(tmp_path, ec2)
    result = run_ccbench("cloud", "check", study)
    assert "cloud study moto: $0.3629/h" in result.stdout
    # moto answers offers, SEV-SNP support and images as EC2 does, but has no EC2 quotas: its refusal
    # comes back as the provider's word, in one line
    assert result.returncode == 2 and result.stderr.splitlines() == [
        "ccbench: error: aws get_service_quota: NoSuchResourceException: This service is not available in the "
        "current Region. Choose a different Region or a different service."
    ]
    text = study.read_text()
    image = text.split('image = "')[1].split('"')[0]
    study.write_text(text.replace(image, "ami-0123456789abcdef0"))
    result = run_ccbench("cloud", "check", study)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("ccbench: error: aws describe_images: InvalidAMIID.NotFound: "), result.stderr
