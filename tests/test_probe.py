"""The probe on fixture roots, one per TEE technology, a plain VM and a bare-metal host."""

import json

import pytest

from ccbench.probe import probe

GUEST_FLAGS = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge sse sse2 ht syscall nx lm constant_tsc hypervisor aes avx"
HOST_FLAGS = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge sse sse2 ht syscall nx lm constant_tsc aes avx"


def make_root(tmp_path, flags, vendor="AuthenticAMD", model="AMD EPYC 7763 64-Core Processor", dev=(), files=None):
    root = tmp_path / "root"
    (root / "proc/sys/kernel").mkdir(parents=True)
    cpuinfo = "".join(
        f"processor\t: {i}\nvendor_id\t: {vendor}\nmodel name\t: {model}\nphysical id\t: 0\ncore id\t\t: {i}\nflags\t\t: {flags}\n\n"
        for i in range(2)
    )
    (root / "proc/cpuinfo").write_text(cpuinfo)
    (root / "proc/meminfo").write_text("MemTotal:        8000000 kB\nMemFree:         100 kB\n")
    (root / "proc/sys/kernel/osrelease").write_text("6.8.0-1014-azure\n")
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/mountinfo").write_text("22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n")
    (root / "etc").mkdir()
    (root / "etc/os-release").write_text('PRETTY_NAME="Ubuntu 24.04 LTS"\nID=ubuntu\n')
    (root / "etc/hostname").write_text("fixture-host\n")
    for node in dev:
        path = root / node.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    for name, text in (files or {}).items():
        path = root / name.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def dmesg(tmp_path, text):
    path = tmp_path / "dmesg.txt"
    path.write_text(text)
    return path


CASES = {
    "sev-snp": dict(flags=GUEST_FLAGS + " sev sev_es sev_snp", dev=["/dev/sev-guest", "/dev/tpmrm0"],
                    log="[    0.000000] Memory Encryption Features active: AMD SEV SEV-ES SEV-SNP\n",
                    files={"/sys/kernel/config/tsm/report/r0/provider": "sev_guest\n"}),
    "sev-es": dict(flags=GUEST_FLAGS + " sev sev_es", log="[    0.1] Memory Encryption Features active: AMD SEV SEV-ES\n"),
    "sev": dict(flags=GUEST_FLAGS + " sev", log="[    0.2] AMD Memory Encryption Features active: SEV\n"),
    "tdx": dict(flags=GUEST_FLAGS + " tdx_guest", vendor="GenuineIntel", model="Intel(R) Xeon(R) Platinum 8573C",
                dev=["/dev/tdx_guest"], log="[    0.0] tdx: Guest detected\n[    0.3] Memory Encryption Features active: Intel TDX\n",
                files={"/sys/firmware/acpi/tables/CCEL": "x"}),
    "sgx": dict(flags=GUEST_FLAGS + " sgx sgx_lc", vendor="GenuineIntel", model="Intel(R) Xeon(R) Platinum 8370C",
                dev=["/dev/sgx_enclave"], log="[    0.0] sgx: EPC section 0x...\n"),
}


@pytest.mark.parametrize("technology", sorted(CASES))
def test_each_technology_is_detected_with_evidence(tmp_path, technology):
    case = CASES[technology]
    root = make_root(tmp_path, case["flags"], vendor=case.get("vendor", "AuthenticAMD"),
                     model=case.get("model", "AMD EPYC 7763 64-Core Processor"), dev=case.get("dev", ()),
                     files=case.get("files"))
    document = probe(root=root, dmesg=dmesg(tmp_path, case["log"]))
    tee = document["tee"]
    assert tee["technology"] == technology
    assert tee["evidence"], "the decision must name its signals"
    assert all(e["indicates"] in (technology, "sev", "sev-es", "sev-snp") for e in tee["evidence"])
    assert any(e["source"] == "kernel log" or e["source"].startswith("/dev") for e in tee["evidence"])


def test_plain_vm_is_none_with_negative_evidence(tmp_path):
    root = make_root(tmp_path, GUEST_FLAGS, files={"/sys/class/dmi/id/sys_vendor": "Microsoft Corporation\n",
                                                    "/sys/class/dmi/id/product_name": "Virtual Machine\n",
                                                    "/sys/class/dmi/id/chassis_asset_tag": "7783-7084-3265-9085-8269-3286-77\n"})
    document = probe(root=root, dmesg=dmesg(tmp_path, "[0.0] Linux version 6.8\n[0.1] Hypervisor detected: Microsoft Hyper-V\n"))
    assert document["tee"]["technology"] == "none"
    sources = {e["source"] for e in document["tee"]["evidence"]}
    assert "/proc/cpuinfo" in sources and any(s.startswith("kernel log") for s in sources)
    assert document["virtualization"] == "microsoft"
    assert document["cloud"] == "azure"
    assert document["hostname"] == "fixture-host"
    assert document["memory"]["total_bytes"] == 8000000 * 1024
    assert document["kernel"]["release"] == "6.8.0-1014-azure"
    assert document["cpu"]["threads"] == 2


def test_bare_metal_host_with_sev_capability_is_not_a_guest(tmp_path):
    root = make_root(tmp_path, HOST_FLAGS + " sev sev_es sev_snp")
    document = probe(root=root, dmesg=dmesg(tmp_path, "[0.0] SEV-SNP: RMP table physical range\n"))
    assert document["tee"]["technology"] == "none"
    assert any("capability, not protection" in note for note in document["tee"]["notes"])


def test_tsm_provider_alone_decides(tmp_path):
    root = make_root(tmp_path, GUEST_FLAGS, vendor="GenuineIntel",
                     files={"/sys/kernel/config/tsm/report/ccbench/provider": "tdx_guest\n"})
    document = probe(root=root, dmesg=dmesg(tmp_path, ""))
    assert document["tee"]["technology"] == "tdx"
    assert document["tee"]["evidence"][0]["signal"] == "provider tdx_guest"


def test_contradictory_signals_are_unknown(tmp_path):
    root = make_root(tmp_path, GUEST_FLAGS + " sev_snp tdx_guest")
    document = probe(root=root, dmesg=dmesg(tmp_path, ""))
    assert document["tee"]["technology"] == "unknown"


def test_missing_sources_give_unknown_not_a_crash(tmp_path):
    root = tmp_path / "empty"
    root.mkdir()
    document = probe(root=root)
    assert document["tee"]["technology"] == "unknown"
    assert any("unreadable" in n for n in document["tee"]["notes"])
    assert any("kernel log not read" in n for n in document["tee"]["notes"])
    assert document["cpu"]["model"] == "unknown"
    assert document["storage"]["protection"] == "unknown"


def test_storage_protection_from_fixture(tmp_path):
    root = make_root(tmp_path, GUEST_FLAGS, files={
        "/proc/self/mountinfo": "22 1 253:0 / / rw - ext4 /dev/mapper/root rw\n30 22 0:40 / /mnt/ram rw - tmpfs tmpfs rw\n"
                                "31 22 0:41 / /mnt/secure rw - fuse.gocryptfs /data/cipher rw\n",
        "/sys/dev/block/253:0/dm/uuid": "CRYPT-LUKS2-0123456789abcdef-root\n",
        "/sys/dev/block/253:0/dm/name": "root\n",
    })
    document = probe(root=root, dmesg=dmesg(tmp_path, ""))
    storage = document["storage"]
    assert storage["protection"] == "dm-crypt" and storage["dm_crypt_type"] == "LUKS2"
    from ccbench.probe import describe_path
    from ccbench.probe.sources import Sources

    sources = Sources(root=root, live=False)
    assert describe_path("/mnt/ram/x", sources)["protection"] == "tmpfs"
    fuse = describe_path("/mnt/secure", sources)
    assert fuse["protection"] == "fuse" and fuse["fuse_filesystem"] == "gocryptfs"


def test_env_cli_json_on_fixture(tmp_path, ccbench):
    case = CASES["sev-snp"]
    root = make_root(tmp_path, case["flags"], dev=case["dev"], files=case["files"])
    log = dmesg(tmp_path, case["log"])
    done = ccbench("env", "--root", root, "--dmesg", log, "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    for key in ("tee", "storage", "cpu", "memory", "kernel", "virtualization"):
        assert key in document
    assert document["tee"]["technology"] == "sev-snp"
    assert document["storage"]["protection"] == "plain"


def test_env_on_this_machine_reports_none(ccbench):
    done = ccbench("env", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    # the development and CI machines are plain KVM guests
    assert document["tee"]["technology"] == "none"
    assert document["tee"]["evidence"]


def test_env_bad_root_is_one_line_error(ccbench, tmp_path):
    done = ccbench("env", "--root", tmp_path / "missing")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "no such directory" in done.stderr
