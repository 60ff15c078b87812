"""Cloud arms as a fleet inventory. No cloud is reachable here, so two stand-ins, each named:

- moto (EC2's API as a local server) launches the arms through the real AWS adapter: the public
  address and the CC flag come from DescribeInstances, and the inventory, the known_hosts (the host
  key made for each instance) and the facts a bundle carries are built from those instances;
- a stand-in provider (a mock of a cloud, behind the same interface) whose "instances" are SSH test
  hosts (network namespaces running OpenSSH, tests/fleet_testhosts.py): each boots from the very
  user-data ccbench would send a cloud (its host key and the run's user key taken from the
  #cloud-config), so the plan really runs over SSH with strict host-key checking, the bundles carry
  the instances' facts, and the confidential arm, whose guest shows no TEE, stops the study."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import fleet_testhosts as testhosts
import pytest
from cloud_studies import write
from test_cloud_lifecycle import REGION, aws_env, ec2, moto_url  # noqa: F401 (fixtures)

from ccbench.machines.cloud.access import parse_cloud_config
from ccbench.machines.cloud.provider import Found, Launched, Provider
from ccbench.machines.cloud.tee import NoTee

TINY_PLAN = """
name = "tiny"
description = "systeminfo and a short prime"
[defaults]
repetitions = 2
warmup = 0
cooldown = 0.0
timeout = 120
[[workloads]]
kind = "systeminfo"
repetitions = 1
[[workloads]]
kind = "prime"
n = 20000
"""


def _study_text(image: str, plan: str = "quick", rounds: int = 1) -> str:
    arms = "".join(
        f'\n[[arm]]\nname = "{n}"\nkind = "{k}"\ninstance_type = "m6a.large"\nimage = "{image}"\n'
        for n, k in (("plain", "plain"), ("snp", "sev-snp"))
    )
    return (
        f'name = "arms"\nplan = "{plan}"\nrounds = {rounds}\n[cloud]\nprovider = "aws"\nregion = "{REGION}"\n'
        f'zone = "{REGION}a"\nmax_lifetime = "1h"\nbudget_usd = 5\nowner = "alice"\nssh_from = "192.0.2.7"\n{arms}'
    )


@pytest.mark.slow
def test_moto_launched_arms_become_an_inventory_with_their_host_keys_and_facts(tmp_path, ec2):  # noqa: F811
    from ccbench.machines.cloud.aws import Aws
    from ccbench.machines.cloud.lifecycle import run_arms
    from ccbench.machines.cloud.model import load_cloud_study
    from ccbench.machines.cloud.studyrun import CloudStudyRun

    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    study = load_cloud_study(write(tmp_path, _study_text(image)))
    assert study.cloud.ssh_from == "192.0.2.7/32"
    provider = Aws(study.cloud)
    (tmp_path / "run").mkdir()
    runner = CloudStudyRun(study, provider, tmp_path / "run", print)
    seen = {}

    def body(launched):
        for one in launched:
            provider.address(one)
            runner.access.trust(one.address, runner.access.host_public(one.name))
        seen["inventory"] = runner.inventory(launched).read_text()
        seen["facts"] = [runner.facts(one) for one in launched]
        seen["known_hosts"] = runner.access.known_hosts.read_text()
        seen["launched"] = launched
        reply = ec2.describe_instances(InstanceIds=[one.id for one in launched])["Reservations"]
        seen["described"] = {i["InstanceId"]: i.get("CpuOptions", {}) for r in reply for i in r["Instances"]}
        groups = ec2.describe_security_groups(Filters=[{"Name": "tag-key", "Values": ["ccbench-run"]}])
        seen["ingress"] = groups["SecurityGroups"][0]["IpPermissions"]

    run_arms(study, provider, body, print, tmp_path / "state", runner.access, study.cloud.ssh_from)
    launched = seen["launched"]
    assert all(one.address for one in launched)
    for one in launched:  # each address named with the key made for that instance, before any connection
        assert f"{one.address} {runner.access.host_public(one.name).rsplit(' ', 1)[0]}" in seen["known_hosts"]
        assert f"ansible_host={one.address} ccbench_label={one.arm}" in seen["inventory"]
    assert "StrictHostKeyChecking=yes" in seen["inventory"] and "ansible_become=true" in seen["inventory"]
    assert "ansible_user=ccbench" in seen["inventory"]
    snp = next(f for f in seen["facts"] if f["arm"] == "snp")
    assert snp["provider"] == "aws" and snp["region"] == REGION and snp["zone"] == f"{REGION}a"
    assert snp["instance_type"] == "m6a.large" and snp["image"] == image
    # the CC flag as DescribeInstances returned it, whatever it says (moto leaves AmdSevSnp out of
    # CpuOptions: a real EC2's answer has never been seen here)
    assert snp["cloud_says"] == {"CpuOptions": seen["described"][snp["instance_id"]]}
    (rule,) = seen["ingress"]
    assert [r["CidrIp"] for r in rule["IpRanges"]] == ["192.0.2.7/32"]  # never 0.0.0.0/0
    assert not (runner.access.key).exists()  # the teardown deleted the run's secrets


class StandIn(Provider):
    """A mock of a cloud: each instance is an SSH test host that boots from the user-data ccbench
    made for it (a real cloud's cloud-init would do the same with it)."""

    name = "aws"
    login_user = "root"  # the test hosts' sshd serves root only

    def __init__(self, hosts: testhosts.SSHHosts, cloud_says: dict[str, dict]):
        self.hosts, self.cloud_says, self.live, self.booted = hosts, cloud_says, {}, []

    def request(self, arm, replica, ctx):
        return {"UserData": ctx.user_data(self.instance_name(ctx.run_id, arm.name, replica))}

    def preflight(self, study):
        return []

    def prepare(self, ctx, journal):
        pass

    def launch(self, arm, replica, ctx, journal):
        name = self.instance_name(ctx.run_id, arm.name, replica)
        journal.intend("instance", name, arm=arm.name)
        config = parse_cloud_config(self.request(arm, replica, ctx)["UserData"])
        host = self.hosts.hosts[f"{arm.name}-{replica}"]
        host.host_key.write_text(config["ssh_keys"]["ed25519_private"])
        host.host_key.chmod(0o600)
        Path(f"{host.host_key}.pub").write_text(config["ssh_keys"]["ed25519_public"] + "\n")
        (user,) = [u for u in config["users"] if isinstance(u, dict)]
        (host.directory / "authorized_keys").write_text("\n".join(user["ssh_authorized_keys"]) + "\n")
        run_ccbench = host.directory / "run-ccbench"
        run_ccbench.mkdir(exist_ok=True)
        host.binds["/run/ccbench"] = str(run_ccbench)  # the instance's own /run/ccbench
        self.hosts.stop_sshd(host.name)
        self.hosts.start_sshd(host.name)
        self.live[name] = host.name
        self.booted.append(host.name)
        journal.made("instance", name, name)
        return Launched(arm.name, replica, name, host.address, self.cloud_says.get(arm.kind, {}), name=name)

    def tagged(self):
        return [Found("instance", name, name.split("-")[1] + "-" + name.split("-")[2], 0) for name in self.live]

    def destroy(self, found):
        done = []
        for f in found:
            if f.id in self.live:
                self.hosts.stop_sshd(self.live.pop(f.id))
                done.append(f"stand-in: stopped {f.id}")
        return done

    def settle(self, found):
        pass


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(testhosts.unavailable() is not None, reason=f"SSH test hosts: {testhosts.unavailable()}")
def test_the_plan_runs_on_stand_in_instances_over_strict_ssh_and_a_tee_less_cvm_arm_stops_the_study(tmp_path):
    import importlib.util

    if importlib.util.find_spec("ansible") is None:
        pytest.skip("Ansible (ansible-core) is not installed")
    from ccbench.machines.cloud import studyrun
    from ccbench.machines.cloud.model import load_cloud_study

    (tmp_path / "tiny.toml").write_text(TINY_PLAN)
    study = load_cloud_study(write(tmp_path, _study_text("ami-0abc12345def67890", plan="tiny.toml")))
    said: list[str] = []
    with testhosts.SSHHosts(tmp_path / "hosts", ["plain-1", "snp-1"]) as hosts:
        # the hosts start with keys of their own: ccbench must never trust those (the stand-in
        # replaces them with the ones from the user-data at "boot")
        provider = StandIn(hosts, {"sev-snp": {"CpuOptions": {"AmdSevSnp": "enabled"}}, "plain": {"CpuOptions": {}}})
        with pytest.raises(NoTee) as stopped:
            studyrun.run(study, provider, tmp_path / "out", said.append, tmp_path / "state", "127.0.0.1/32")
        assert provider.live == {}  # every stand-in instance torn down
    message = str(stopped.value)
    assert message.startswith("arm 'snp' (sev-snp): its guest shows no TEE") and "\n" not in message
    assert "the cloud said CpuOptions={'AmdSevSnp': 'enabled'}, which is not evidence" in message
    (directory,) = (tmp_path / "out").glob("cloud-arms-*")
    document = json.loads((directory / "study.json").read_text())
    assert document["status"].startswith("failed: arm 'snp'")
    assert [r["arm"] for r in document["rounds"]] == ["plain", "snp"] and document["rounds"][0]["exit"] == 0
    manifests = sorted(directory.glob("round-1/fleet-*/**/manifest.json"))
    launches = {}
    for path in manifests:
        record = json.loads(path.read_text())["environment"]["machine_launch"]
        launches[record["arm"]] = record
    assert set(launches) == {"plain", "snp"}
    assert launches["snp"]["cloud_says"] == {"CpuOptions": {"AmdSevSnp": "enabled"}}
    assert launches["plain"]["instance_type"] == "m6a.large" and launches["plain"]["provider"] == "aws"
    access = directory / "access"
    assert not (access / "id_ed25519").exists() and (access / "known_hosts").read_text().count("ssh-ed25519") == 2
    # strict: the known_hosts ccbench wrote holds the keys from the user-data, not the hosts' first ones
    for host in ("plain-1", "snp-1"):
        served = Path(f"{tmp_path / 'hosts' / 'hosts' / host / 'ssh_host_ed25519_key'}.pub").read_text().split()[1]
        assert served in (access / "known_hosts").read_text()
    assert any("answers SSH with its own host key" in line for line in said)
    done = subprocess.run(["ssh-keygen", "-l", "-f", str(access / "known_hosts")], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.count("ED25519") == 2
