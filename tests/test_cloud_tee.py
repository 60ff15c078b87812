"""A confidential cloud arm is believed only on its guest's own word: ccbench's probe reads a guest
tree (here a directory laid out as a guest's /proc and kernel log) and check_guest stops the study
when it shows no TEE, another TEE, or a TEE on the plain arm, whatever the cloud said; the detector
shipped to a guest (guestprobe) answers as ccbench's own probe does there."""

from __future__ import annotations

import subprocess

import pytest

from ccbench.basics.errors import EnvironmentProblem
from ccbench.machines.cloud.guestprobe import probe_tee
from ccbench.machines.cloud.tee import NoTee, check_guest
from ccbench.probe.sources import Sources
from ccbench.probe.tee import detect

SNP_LOG = (
    "[    0.000000] Memory Encryption Features active: AMD SEV SEV-ES SEV-SNP\n[    0.1] SEV: Using SNP CPUID table\n"
)
PLAIN_LOG = "[    0.000000] Linux version 6.8.0 (buildd@lcy02) #1 SMP\n[    0.0] Hypervisor detected: KVM\n"


def _guest(tmp_path, flags: str, log: str) -> dict:
    (tmp_path / "proc").mkdir(parents=True)
    (tmp_path / "proc" / "cpuinfo").write_text(f"processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu {flags}\n")
    (tmp_path / "dmesg").write_text(log)
    return {"tee": detect(Sources(root=tmp_path, dmesg_file=tmp_path / "dmesg", live=False))}


def test_an_snp_guest_passes_and_its_facts_are_recorded(tmp_path):
    probe = _guest(tmp_path, "hypervisor sev sev_es sev_snp", SNP_LOG)
    facts = check_guest("snp", "sev-snp", probe, {"CpuOptions": {"AmdSevSnp": "enabled"}})
    assert facts["guest_shows"] == "sev-snp" and facts["cloud_says"] == {"CpuOptions": {"AmdSevSnp": "enabled"}}
    assert any("SEV-SNP" in e for e in facts["evidence"])


def test_a_confidential_arm_whose_guest_shows_no_tee_stops_the_study(tmp_path):
    probe = _guest(tmp_path, "hypervisor", PLAIN_LOG)
    with pytest.raises(NoTee) as caught:
        check_guest("snp", "sev-snp", probe, {"AmdSevSnp": "enabled"})
    message = str(caught.value)
    assert message.startswith("arm 'snp' (sev-snp): its guest shows no TEE (probe: ")
    assert "the cloud said AmdSevSnp=enabled, which is not evidence: stopping the study" in message
    assert "\n" not in message


def test_a_tdx_arm_showing_snp_and_a_plain_arm_showing_snp_stop_it_too(tmp_path):
    probe = _guest(tmp_path, "hypervisor sev sev_es sev_snp", SNP_LOG)
    with pytest.raises(NoTee, match=r"arm 'td' \(tdx\): its guest shows sev-snp"):
        check_guest("td", "tdx", probe, {"confidentialInstanceType": "TDX"})
    with pytest.raises(NoTee, match=r"arm 'plain' \(plain\): its guest shows sev-snp .*no baseline"):
        check_guest("plain", "plain", probe, {})
    assert check_guest("plain", "plain", _guest(tmp_path / "p", "hypervisor", PLAIN_LOG), {})["guest_shows"] in (
        "none",
        "unknown",
    )


def _local(command: str, stdin: str) -> subprocess.CompletedProcess:
    """The guest's side of the SSH call, run on this machine (the stand-in instances of
    tests/test_cloud_fleet.py run it over real SSH)."""
    assert command in ("python3 -", "sudo -n python3 -")
    return subprocess.run(["python3", "-"], input=stdin, capture_output=True, text=True, timeout=120)


def test_the_detector_shipped_to_a_guest_answers_as_ccbenchs_own_probe_does_there():
    document = probe_tee(_local, "local-1", root=True)
    here = detect(Sources())
    assert document["tee"]["technology"] == here["technology"]
    assert document["tee"]["checked"] == here["checked"]
    assert {e["signal"] for e in document["tee"]["evidence"]} == {e["signal"] for e in here["evidence"]}


def test_a_probe_that_cannot_run_in_the_guest_stops_in_one_line():
    failed = subprocess.CompletedProcess([], 1, "", "sudo: a password is required\n")
    with pytest.raises(EnvironmentProblem) as caught:
        probe_tee(lambda command, stdin: failed, "snp-1", root=False)
    message = str(caught.value)
    assert message.startswith("instance snp-1: ccbench's TEE probe did not run in its guest (sudo: a password")
    assert "before any plan turn" in message and "\n" not in message
    garbled = subprocess.CompletedProcess([], 0, "Welcome!\n", "")
    with pytest.raises(EnvironmentProblem, match="printed no document"):
        probe_tee(lambda command, stdin: garbled, "snp-1", root=True)
