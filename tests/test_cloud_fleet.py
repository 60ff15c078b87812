"""Cloud arms as a fleet inventory. No cloud is reachable here, so two stand-ins, each named:

- moto (EC2's API as a local server) launches the arms through the real AWS adapter: the public
  address and the CC flag come from DescribeInstances, and the inventory, the known_hosts (the host
  key made for each instance) and the facts a bundle carries are built from those instances;
- a stand-in provider (a mock of a cloud, behind the same interface) whose "instances" are SSH test
  hosts (network namespaces running OpenSSH, tests/fleet_testhosts.py): each boots from the very
  user-data ccbench would send a cloud (its host key and the run's user key taken from the
  #cloud-config), so ccbench's TEE detector and the plan really run over SSH with strict host-key
  checking: the confidential arm whose guest shows no TEE stops the study before any plan turn, and
  one whose guest shows SEV-SNP (a mock: its `dmesg` prints an SEV-SNP guest's boot log) goes on,
  the bundles carry the instances' facts, and the study ends as a local one does."""

from __future__ import annotations

import json
import shutil
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


#: the kernel log a stand-in SEV-SNP guest's `dmesg` prints (a mock: no SEV-SNP guest here)
SNP_GUEST_LOG = (
    "[    0.000000] Linux version 6.8.0-snp (mock of an SEV-SNP guest) #1 SMP\n"
    "[    0.000000] Memory Encryption Features active: AMD SEV SEV-ES SEV-SNP\n"
    "[    0.100000] SEV: Using SNP CPUID table, 29 entries present.\n"
)


class StandIn(Provider):
    """A mock of a cloud: each instance is an SSH test host that boots from the user-data ccbench
    made for it (a real cloud's cloud-init would do the same with it). ``guest_logs``: per arm kind,
    the kernel log the instance's `dmesg` prints (bound over the real one in that host's mount
    namespace: a mock of a confidential guest's log; the rest of the probe reads this machine)."""

    name = "aws"
    login_user = "root"  # the test hosts' sshd serves root only

    def __init__(
        self, hosts: testhosts.SSHHosts, cloud_says: dict[str, dict], guest_logs: dict[str, str] | None = None
    ):
        self.hosts, self.cloud_says, self.live, self.booted = hosts, cloud_says, {}, []
        self.guest_logs = guest_logs or {}

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
        if arm.kind in self.guest_logs:
            (host.directory / "kernel.log").write_text(self.guest_logs[arm.kind])
            dmesg = host.directory / "dmesg"
            dmesg.write_text(f"#!/bin/sh\nexec cat {host.directory / 'kernel.log'}\n")
            dmesg.chmod(0o755)
            host.binds[str(Path(shutil.which("dmesg") or "/usr/bin/dmesg").resolve())] = str(dmesg)
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


SAYS = {"sev-snp": {"CpuOptions": {"AmdSevSnp": "enabled"}}, "plain": {"CpuOptions": {}}}


def _needs_ansible():
    import importlib.util

    if importlib.util.find_spec("ansible") is None:
        pytest.skip("Ansible (ansible-core) is not installed")


def _known_hosts_are_the_user_datas(directory: Path, tmp_path: Path) -> None:
    access = directory / "access"
    assert not (access / "id_ed25519").exists() and (access / "known_hosts").read_text().count("ssh-ed25519") == 2
    # strict: the known_hosts ccbench wrote holds the keys from the user-data, not the hosts' first ones
    for host in ("plain-1", "snp-1"):
        served = Path(f"{tmp_path / 'hosts' / 'hosts' / host / 'ssh_host_ed25519_key'}.pub").read_text().split()[1]
        assert served in (access / "known_hosts").read_text()
    done = subprocess.run(["ssh-keygen", "-l", "-f", str(access / "known_hosts")], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.count("ED25519") == 2


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(testhosts.unavailable() is not None, reason=f"SSH test hosts: {testhosts.unavailable()}")
def test_a_cvm_arm_whose_guest_shows_no_tee_stops_the_study_before_any_plan_turn(tmp_path):
    _needs_ansible()
    from ccbench.machines.cloud import studyrun
    from ccbench.machines.cloud.model import load_cloud_study

    (tmp_path / "tiny.toml").write_text(TINY_PLAN)
    study = load_cloud_study(write(tmp_path, _study_text("ami-0abc12345def67890", plan="tiny.toml")))
    said: list[str] = []
    with testhosts.SSHHosts(tmp_path / "hosts", ["plain-1", "snp-1"]) as hosts:
        # the hosts start with keys of their own: ccbench must never trust those (the stand-in
        # replaces them with the ones from the user-data at "boot")
        provider = StandIn(hosts, SAYS)
        with pytest.raises(NoTee) as stopped:
            studyrun.run(study, provider, tmp_path / "out", said.append, tmp_path / "state", "127.0.0.1/32")
        assert provider.live == {}  # every stand-in instance torn down
    message = str(stopped.value)
    assert message.startswith("arm 'snp' (sev-snp): its guest shows no TEE") and "\n" not in message
    assert "the cloud said CpuOptions={'AmdSevSnp': 'enabled'}, which is not evidence" in message
    (directory,) = (tmp_path / "out").glob("cloud-arms-*")
    document = json.loads((directory / "study.json").read_text())
    assert document["status"].startswith("failed: arm 'snp'")
    # no plan turn ran: no round, no fleet run, no bundle
    assert document["rounds"] == [] and not list(directory.glob("round-*"))
    assert not any(line.startswith("round ") for line in said)
    # the guests' own detector answered (this machine's guest: no TEE), over the same strict SSH
    before = document["tee_before_plan"]
    assert before["plain-1"]["guest_shows"] == "none" and any("cpuid" in e for e in before["plain-1"]["evidence"])
    assert "snp-1" not in before  # it stopped the study
    assert any("answers SSH with its own host key" in line for line in said)
    _known_hosts_are_the_user_datas(directory, tmp_path)


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(testhosts.unavailable() is not None, reason=f"SSH test hosts: {testhosts.unavailable()}")
def test_a_cvm_arm_whose_guest_shows_its_tee_goes_on_and_the_study_ends_like_a_local_one(tmp_path):
    _needs_ansible()
    from ccbench.machines.cloud import studyrun
    from ccbench.machines.cloud.model import load_cloud_study

    (tmp_path / "tiny.toml").write_text(TINY_PLAN)
    study = load_cloud_study(write(tmp_path, _study_text("ami-0abc12345def67890", plan="tiny.toml")))
    said: list[str] = []
    with testhosts.SSHHosts(tmp_path / "hosts", ["plain-1", "snp-1"]) as hosts:
        # the mock: the snp instance's `dmesg` prints an SEV-SNP guest's boot log
        provider = StandIn(hosts, SAYS, guest_logs={"sev-snp": SNP_GUEST_LOG})
        code = studyrun.run(study, provider, tmp_path / "out", said.append, tmp_path / "state", "127.0.0.1/32")
        assert provider.live == {}
    (directory,) = (tmp_path / "out").glob("cloud-arms-*")
    document = json.loads((directory / "study.json").read_text())
    assert document["status"] == "complete" and code == 0, said[-10:]
    before = document["tee_before_plan"]
    assert before["snp-1"]["guest_shows"] == "sev-snp" and before["plain-1"]["guest_shows"] == "none"
    assert "kernel log: Memory Encryption Features active: AMD SEV SEV-ES SEV-SNP" in before["snp-1"]["evidence"]
    assert [r["arm"] for r in document["rounds"]] == ["plain", "snp"] and all(
        r["exit"] == 0 for r in document["rounds"]
    )
    # each bundle carries its instance's facts; the bundles' own probe agrees with the one before the plan
    launches = {}
    for path in sorted(directory.glob("round-1/fleet-*/**/manifest.json")):
        record = json.loads(path.read_text())["environment"]["machine_launch"]
        launches[record["arm"]] = record
    assert set(launches) == {"plain", "snp"}
    assert launches["snp"]["cloud_says"] == {"CpuOptions": {"AmdSevSnp": "enabled"}}
    assert launches["plain"]["instance_type"] == "m6a.large" and launches["plain"]["provider"] == "aws"
    assert sorted(f["guest_shows"] for f in document["tee"].values()) == ["none", "sev-snp"]
    # the local studies' ending: compare.txt, report.html (the launch facts where it shows the
    # machines), the twins' evidence and the launch facts
    assert "plain" in (directory / "compare.txt").read_text() and "snp" in (directory / "compare.txt").read_text()
    report = (directory / "report.html").read_text()
    for fact in ("cloud launch", "aws us-east-1 us-east-1a", "CC flag as returned", "CpuOptions={&#x27;AmdSevSnp"):
        assert fact in report or fact.replace("&#x27;", "'") in report, fact
    assert any(line.startswith("snp (sev-snp): ") or "bounce buffers not counted" in line for line in said)
    assert any(line.startswith("snp #1: aws us-east-1 us-east-1a, m6a.large, image ami-0abc") for line in said)
    assert "the arms share provider, region, zone, image as launched (2 instances)" in said
    assert document["launch_differences"] == []
    assert any(line.endswith(f"report: {directory / 'report.html'}") for line in said)
    _known_hosts_are_the_user_datas(directory, tmp_path)
