"""The host check: what this host lacks for each arm, in one line per arm, before anything starts;
and the host's facts. SEV-SNP and TDX hosts are fake trees under a root directory and a fake QEMU
that only prints a version (mocks: this machine is neither, and its QEMU is 7.2); this machine
itself is checked for what it has."""

import os
import shutil
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from ccbench.machines.hostcheck import (
    OVMF_TABLE_FOOTER,
    SEV_HASH_TABLE,
    accel,
    check,
    firmware_warnings,
    host_facts,
    qemu_version,
    sev_hash_area,
)
from ccbench.machines.studyfile import load_study

STUDY = """
name = "hosts"
plan = "quick"
[machine]
vcpus = 2
memory = "1G"
{machine}
{arms}
"""
PLAIN = '[[arm]]\nname = "plain"\nkind = "plain"\n'
SNP = '[[arm]]\nname = "snp"\nkind = "sev-snp"\n'
TDX = '[[arm]]\nname = "td"\nkind = "tdx"\n'


def study(tmp_path, arms, machine=""):
    """The study of these arms; SEV-SNP and TDX arms (refused in one study: one host is AMD or Intel)
    are loaded as two studies and joined, for check() to weigh each arm against a host."""

    def load(text, name):
        path = tmp_path / name
        path.write_text(textwrap.dedent(STUDY.format(arms=text, machine=machine)))
        return load_study(path)

    if SNP in arms and TDX in arms:
        amd = load(arms.replace(TDX, ""), "amd.toml")
        return replace(amd, arms=amd.arms + load(TDX, "intel.toml").arms)
    return load(arms, "study.toml")


def mock_qemu(tmp_path, version):
    """MOCK: a QEMU that only answers --version (this machine's QEMU is 7.2)."""
    path = tmp_path / f"mock-qemu-{version}"
    path.write_text(f"#!/bin/sh\necho 'QEMU emulator version {version} (mock)'\n")
    path.chmod(0o755)
    return str(path)


def ovmf(entries: list[tuple[bytes, bytes]], size: int = 0x8000) -> bytes:
    """MOCK: an OVMF file's bytes with this OVMF table at its end, laid out as edk2's reset vector puts
    it (and as Debian 12's /usr/share/ovmf/OVMF.fd shows it): each entry its data, its 2-byte length
    and its GUID; then the table's length, the footer GUID and 32 bytes to the end of the file."""
    table = b"".join(data + (len(data) + 18).to_bytes(2, "little") + guid for guid, data in entries)
    footer = (len(table) + 18).to_bytes(2, "little") + OVMF_TABLE_FOOTER + bytes(32)
    return bytes(size - len(table) - len(footer)) + table + footer


#: OVMF's AmdSev build reserves the SEV hash table at 0x10C00, 0x400 bytes (PcdQemuHashTableBase/Size)
AMDSEV = ovmf(
    [
        (b"\x11" * 16, (0x80B004).to_bytes(4, "little")),
        (SEV_HASH_TABLE, (0x10C00).to_bytes(4, "little") + (0x400).to_bytes(4, "little")),
    ]
)
#: a generic build carries the entry zeroed
GENERIC = ovmf([(SEV_HASH_TABLE, bytes(8)), (b"\x22" * 16, bytes(4))])


def mock_host(tmp_path, vendor):
    """MOCK: the files an SEV-SNP (vendor "amd") or TDX ("intel") host shows, under a root."""
    root = tmp_path / f"mock-{vendor}-root"
    files = {
        "dev/kvm": "",
        "proc/sys/kernel/osrelease": "6.16.0-snp\n",
        "sys/class/dmi/id/bios_version": "1.8.3\n",
        "sys/devices/system/cpu/online": "0-7\n",
    }
    if vendor == "amd":
        files |= {
            "proc/cpuinfo": "model name\t: AMD EPYC 9654 96-Core Processor\nflags\t\t: fpu svm sev sev_es sev_snp\n",
            "dev/sev": "",
            "sys/module/kvm_amd/parameters/sev_snp": "Y\n",
            "usr/share/OVMF/OVMF.amdsev.fd": AMDSEV,
        }
    else:
        files |= {
            "proc/cpuinfo": "model name\t: INTEL(R) XEON(R) PLATINUM 8580\nflags\t\t: fpu vmx tdx_host_platform\n",
            "sys/module/kvm_intel/parameters/tdx": "Y\n",
            "usr/share/OVMF/OVMF.inteltdx.fd": "firmware",
            "sys/firmware/tdx/tdx_module/major_version": "1\n",
            "sys/firmware/tdx/tdx_module/minor_version": "5\n",
            "sys/firmware/tdx/tdx_module/build_num": "744\n",
        }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            (root / name).write_bytes(text)
        else:
            (root / name).write_text(text)
    return root


def test_a_ready_snp_host_and_a_ready_tdx_host_pass_the_check(tmp_path):
    both = study(tmp_path, PLAIN + SNP + TDX)
    amd, intel = mock_host(tmp_path, "amd"), mock_host(tmp_path, "intel")
    qemu = mock_qemu(tmp_path, "10.1.0")
    assert [line for line in check(both, qemu, root=amd) if "'snp'" in line] == []
    assert [line for line in check(both, qemu, root=intel) if "'td'" in line] == []
    assert accel(amd) == "kvm"


def test_what_a_host_lacks_is_said_in_one_line_per_arm(tmp_path):
    both = study(tmp_path, SNP + TDX)
    amd = mock_host(tmp_path, "amd")
    (amd / "sys/module/kvm_amd/parameters/sev_snp").write_text("N\n")
    (amd / "dev/sev").unlink()
    lines = check(both, mock_qemu(tmp_path, "9.0.2"), root=amd)
    assert len(lines) == 2 and all("\n" not in line for line in lines)
    snp, td = lines
    assert snp.startswith("arm 'snp' (sev-snp) cannot run on this host:")
    for words in ("QEMU 9.0.2 is too old", ">= 9.1", "no /dev/sev", "sev_snp=N"):
        assert words in snp, snp
    for words in ("QEMU 9.0.2 is too old", ">= 10.1", "no vmx flag", "kvm_intel", "no OVMF"):
        assert words in td, td
    intel = mock_host(tmp_path, "intel")
    (intel / "sys/module/kvm_intel/parameters/tdx").write_text("N\n")
    (intel / "dev/kvm").unlink()
    td_line = check(study(tmp_path, TDX), mock_qemu(tmp_path, "10.1.0"), root=intel)
    assert len(td_line) == 1 and "tdx=N" in td_line[0] and "no /dev/kvm" in td_line[0]
    assert accel(intel) == "tcg"


def test_an_snp_arm_measuring_its_kernel_on_a_generic_ovmf_is_a_warning_naming_the_firmware(tmp_path):
    """kernel-hashes=on needs an OVMF that reserves the SEV hash table (the AmdSev build): QEMU refuses
    a generic OVMF.fd for it. Read from the firmware's OVMF table, as QEMU reads it."""
    assert sev_hash_area_of(tmp_path, AMDSEV) == (0x10C00, 0x400)
    assert sev_hash_area_of(tmp_path, GENERIC) == (0, 0)
    assert sev_hash_area_of(tmp_path, b"not an OVMF" * 100) is None
    amd = mock_host(tmp_path, "amd")
    snp = study(tmp_path, PLAIN + SNP + '[[arm]]\nname = "snp-nohash"\nkind = "sev-snp"\nkernel_hashes = false\n')
    assert firmware_warnings(snp, amd) == []
    (amd / "usr/share/OVMF/OVMF.amdsev.fd").unlink()
    (amd / "usr/share/ovmf").mkdir(parents=True)
    (amd / "usr/share/ovmf/OVMF.fd").write_bytes(GENERIC)
    (line,) = firmware_warnings(snp, amd)
    assert line.startswith(f"arm 'snp': firmware {amd}/usr/share/ovmf/OVMF.fd has no SEV hash table area"), line
    assert "install OVMF's AmdSev build" in line and "/usr/share/OVMF/OVMF.amdsev.fd" in line and "\n" not in line
    # the TDX arms' firmware has no such table to reserve
    intel = mock_host(tmp_path, "intel")
    (intel / "usr/share/ovmf").mkdir(parents=True)
    (intel / "usr/share/ovmf/OVMF.fd").write_bytes(GENERIC)
    assert firmware_warnings(study(tmp_path, PLAIN + TDX), intel) == []


def sev_hash_area_of(tmp_path, data):
    path = tmp_path / "firmware.fd"
    path.write_bytes(data)
    return sev_hash_area(path)


@pytest.mark.skipif(not os.path.isfile("/usr/share/ovmf/OVMF.fd"), reason="no OVMF installed (apt-get install ovmf)")
def test_this_machines_ovmf_is_read_as_qemu_reads_it():
    area = sev_hash_area(Path("/usr/share/ovmf/OVMF.fd"))
    # Debian's OVMF.fd is the generic build: the entry is there, zeroed; an AmdSev build has an area
    assert area == (0, 0) or (area is not None and area[0] and area[1] >= 176), area


def test_huge_pages_and_pinning_are_checked_against_the_host(tmp_path):
    amd = mock_host(tmp_path, "amd")
    (amd / "proc/meminfo").write_text("HugePages_Free:      100\nHugepagesize:       2048 kB\n")
    pinned = study(tmp_path, PLAIN + '[[arm]]\nname = "huge"\nkind = "plain"\ntwins = ["hugepages"]\n', "pin = [6, 9]")
    lines = check(pinned, mock_qemu(tmp_path, "9.2.0"), root=amd)
    assert any("arm 'huge'" in line and "200 MiB of free huge pages for 1024 MiB" in line for line in lines), lines
    assert any("machine.pin" in line and "[9]" in line for line in lines), lines
    assert not any("arm 'plain'" in line for line in lines)


def test_host_facts_of_mock_hosts_and_what_is_absent(tmp_path):
    amd = mock_host(tmp_path, "amd")
    facts = host_facts(
        mock_qemu(tmp_path, "9.2.0"), root=amd, kernel_log="[    3.1] ccp 0000:01:00.5: SEV API:1.55 build:21\n"
    )
    assert facts["kernel"] == "6.16.0-snp" and facts["cpu_model"] == "AMD EPYC 9654 96-Core Processor"
    assert facts["qemu_version"] == "9.2.0" and facts["sev_firmware"] == "SEV API:1.55 build:21"
    assert facts["sev_snp"] == "Y" and facts["firmware"]["bios_version"] == "1.8.3"
    assert facts["tdx_module"].startswith("absent") and facts["kvm_intel_tdx"] == "absent"
    assert facts["firmware"]["bios_date"] == "absent"
    intel = mock_host(tmp_path, "intel")
    facts = host_facts(mock_qemu(tmp_path, "10.1.0"), root=intel, kernel_log="")
    assert facts["tdx_module"] == "1.5 (build_num 744)"
    assert facts["sev_firmware"].startswith("absent (no /dev/sev)")
    assert host_facts("no-such-qemu", root=intel, kernel_log="")["qemu_version"].startswith(
        "absent (no-such-qemu not found"
    )


@pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="qemu-system-x86_64 is not installed")
def test_this_machine_runs_plain_arms_and_refuses_snp_and_tdx_in_one_line_each(tmp_path):
    version, _ = qemu_version()
    assert version is not None
    assert check(study(tmp_path, PLAIN)) == []
    lines = check(study(tmp_path, PLAIN + SNP + TDX))
    assert [line.split(":")[0] for line in lines] == [
        "arm 'snp' (sev-snp) cannot run on this host",
        "arm 'td' (tdx) cannot run on this host",
    ]
    if version[:2] < (9, 1):
        assert "too old" in lines[0] and "too old" in lines[1]
    facts = host_facts()
    assert facts["qemu_version"] == ".".join(map(str, version)) and facts["kernel"] != "absent"


def test_a_missing_qemu_is_one_line(tmp_path):
    lines = check(study(tmp_path, PLAIN), "no-such-qemu-binary")
    assert lines == [
        "no-such-qemu-binary not found: install QEMU (Debian: apt-get install qemu-system-x86; bash scripts/setup.sh --with machines) or put its qemu-system-x86_64 first on PATH"
    ]


def test_a_cpu_model_tcg_lacks_and_a_disk_cache_the_overlay_folder_refuses(tmp_path):
    intel = mock_host(tmp_path, "intel")
    (intel / "dev/kvm").unlink()
    lines = check(study(tmp_path, PLAIN, 'cpu = "host"'), mock_qemu(tmp_path, "9.2.0"), root=intel)
    assert len(lines) == 1 and "machine.cpu 'host' needs KVM" in lines[0] and 'cpu = "auto"' in lines[0]
    assert check(study(tmp_path, PLAIN), mock_qemu(tmp_path, "9.2.0"), root=intel) == []
    # O_DIRECT, which cache = "none" asks for, tried for real in a folder on this machine's disk
    overlays = tmp_path / "overlays"
    overlays.mkdir()
    assert check(study(tmp_path, PLAIN), mock_qemu(tmp_path, "9.2.0"), root=intel, overlay_dir=overlays) == []
    assert list(overlays.iterdir()) == []  # the probe file is gone
    lines = check(study(tmp_path, PLAIN), mock_qemu(tmp_path, "9.2.0"), root=intel, overlay_dir=tmp_path / "absent")
    assert len(lines) == 1 and "O_DIRECT" in lines[0] and "cannot be tried" in lines[0]
    writeback = study(tmp_path, PLAIN, '[machine.disk]\ncache = "writeback"')
    assert check(writeback, mock_qemu(tmp_path, "9.2.0"), root=intel, overlay_dir=tmp_path / "absent") == []


@pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="no QEMU: bash scripts/setup.sh --with machines")
def test_machines_check_says_whether_the_arms_would_run_under_kvm_or_tcg(tmp_path):
    """`ccbench machines check` on a plain study: every arm can run, and under what (this host's own
    answer: KVM where it can run guests, else TCG with the reason)."""
    from conftest import run_ccbench

    from ccbench.machines.hostcheck import kvm_problem

    study(tmp_path, PLAIN)  # writes tmp_path/study.toml
    done = run_ccbench("machines", "check", tmp_path / "study.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    problem = kvm_problem()
    expected = f"under TCG, software emulation: {problem}" if problem else "under KVM"
    assert last == f"this host can launch every arm ({expected})"
    assert "  plain: kind plain" in done.stdout


@pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="no QEMU: bash scripts/setup.sh --with machines")
@pytest.mark.parametrize(
    "size, refused, said",
    [
        ('memory = "1T"\nvcpus = 1', True, "more than this host's memory"),
        ('memory = "512M"\nvcpus = 64', False, "warning: machine.vcpus 64 is more than this host's"),
    ],
)
def test_machines_check_weighs_the_guest_against_the_host(tmp_path, size, refused, said):
    """The trial's `memory = "1T"` and `vcpus = 64` on a 2-core 23.5 GiB host: "this host can launch
    every arm" (exit 0). More memory than the host has is refused in one line (the guest would swap
    or be killed mid-run); more vCPUs than online CPUs is legal for QEMU, so it is a warning."""
    from conftest import run_ccbench

    if "64" in size and (os.cpu_count() or 0) >= 64:
        pytest.skip("this host has 64 CPUs or more")
    (tmp_path / "study.toml").write_text(f'name = "big"\nplan = "quick"\n[machine]\n{size}\n{PLAIN}')
    done = run_ccbench("machines", "check", tmp_path / "study.toml")
    assert done.returncode == (2 if refused else 0), done.stdout + done.stderr
    assert said in done.stdout + done.stderr
    if refused:
        assert "this host cannot launch every arm" in done.stdout and "Traceback" not in done.stderr
