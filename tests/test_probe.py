"""The probe on fixture roots, one per TEE technology, a plain VM and a bare-metal host."""

import json
import os

import pytest

from ccbench.probe import probe

GUEST_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge sse sse2 ht syscall nx lm constant_tsc hypervisor aes avx"
)
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
    "sev-snp": dict(
        flags=GUEST_FLAGS + " sev sev_es sev_snp",
        dev=["/dev/sev-guest", "/dev/tpmrm0"],
        log="[    0.000000] Memory Encryption Features active: AMD SEV SEV-ES SEV-SNP\n",
        files={"/sys/kernel/config/tsm/report/r0/provider": "sev_guest\n"},
    ),
    "sev-es": dict(
        flags=GUEST_FLAGS + " sev sev_es", log="[    0.1] Memory Encryption Features active: AMD SEV SEV-ES\n"
    ),
    "sev": dict(flags=GUEST_FLAGS + " sev", log="[    0.2] AMD Memory Encryption Features active: SEV\n"),
    "tdx": dict(
        flags=GUEST_FLAGS + " tdx_guest",
        vendor="GenuineIntel",
        model="Intel(R) Xeon(R) Platinum 8573C",
        dev=["/dev/tdx_guest"],
        log="[    0.0] tdx: Guest detected\n[    0.3] Memory Encryption Features active: Intel TDX\n",
        files={"/sys/firmware/acpi/tables/CCEL": "x"},
    ),
    "sgx": dict(
        flags=GUEST_FLAGS + " sgx sgx_lc",
        vendor="GenuineIntel",
        model="Intel(R) Xeon(R) Platinum 8370C",
        dev=["/dev/sgx_enclave"],
        log="[    0.0] sgx: EPC section 0x...\n",
    ),
}


@pytest.mark.parametrize("technology", sorted(CASES))
def test_each_technology_is_detected_with_evidence(tmp_path, technology):
    case = CASES[technology]
    root = make_root(
        tmp_path,
        case["flags"],
        vendor=case.get("vendor", "AuthenticAMD"),
        model=case.get("model", "AMD EPYC 7763 64-Core Processor"),
        dev=case.get("dev", ()),
        files=case.get("files"),
    )
    document = probe(root=root, dmesg=dmesg(tmp_path, case["log"]))
    tee = document["tee"]
    assert tee["technology"] == technology
    assert tee["evidence"], "the decision must name its signals"
    assert all(e["indicates"] in (technology, "sev", "sev-es", "sev-snp") for e in tee["evidence"])
    assert any(e["source"] == "kernel log" or e["source"].startswith("/dev") for e in tee["evidence"])


def test_plain_vm_is_none_with_negative_evidence(tmp_path):
    root = make_root(
        tmp_path,
        GUEST_FLAGS,
        files={
            "/sys/class/dmi/id/sys_vendor": "Microsoft Corporation\n",
            "/sys/class/dmi/id/product_name": "Virtual Machine\n",
            "/sys/class/dmi/id/chassis_asset_tag": "7783-7084-3265-9085-8269-3286-77\n",
        },
    )
    document = probe(
        root=root, dmesg=dmesg(tmp_path, "[0.0] Linux version 6.8\n[0.1] Hypervisor detected: Microsoft Hyper-V\n")
    )
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
    root = make_root(
        tmp_path,
        GUEST_FLAGS,
        vendor="GenuineIntel",
        files={"/sys/kernel/config/tsm/report/ccbench/provider": "tdx_guest\n"},
    )
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
    root = make_root(
        tmp_path,
        GUEST_FLAGS,
        files={
            "/proc/self/mountinfo": "22 1 253:0 / / rw - ext4 /dev/mapper/root rw\n30 22 0:40 / /mnt/ram rw - tmpfs tmpfs rw\n"
            "31 22 0:41 / /mnt/secure rw - fuse.gocryptfs /data/cipher rw\n",
            "/sys/dev/block/253:0/dm/uuid": "CRYPT-LUKS2-0123456789abcdef-root\n",
            "/sys/dev/block/253:0/dm/name": "root\n",
        },
    )
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


# ---- the kernel cipher driver and the CPU's crypto features ------------------------------------------

from pathlib import Path  # noqa: E402

from ccbench.probe import crypto  # noqa: E402

CRYPTO_FIXTURES = Path(__file__).parent / "data" / "probe" / "crypto"


def test_this_kernels_software_xts_is_named_from_a_captured_proc_crypto():
    text = (CRYPTO_FIXTURES / "devvm-6.18-after-fscrypt.txt").read_text()
    xts = crypto.cipher_from_text(text, "xts(aes)")
    assert xts["driver"] == "xts(ecb(aes-fixed-time))" and xts["accelerated"] is False
    assert "constant-time" in xts["implementation"] and xts["instantiated"]
    assert crypto.cipher_from_text(text, "cts(cbc(aes))")["driver"] == "cts(cbc(ecb(aes-fixed-time)))"
    # aes-fixed-time (101) outranks aes-generic (100)
    assert crypto.cipher_from_text(text, "aes")["driver"] == "aes-fixed-time"
    # not used yet: gcm(aes) is not instantiated; say what it would be built on
    gcm = crypto.cipher_from_text(text, "gcm(aes)")
    assert gcm["instantiated"] is False and gcm["driver"] == "aes-fixed-time" and "first use" in gcm["note"]


def test_a_cloud_kernels_vaes_driver_wins_by_priority_and_internal_entries_are_skipped():
    text = (CRYPTO_FIXTURES / "cloud-6.11-vaes-handmade.txt").read_text()
    xts = crypto.cipher_from_text(text, "xts(aes)")
    assert xts["driver"] == "xts-aes-vaes-avx10_512" and xts["priority"] == 800
    assert xts["accelerated"] is True and "VAES" in xts["implementation"]
    assert crypto.cipher_from_text(text, "cts(cbc(aes))")["driver"] == "cts-cbc-aes-aesni"
    assert crypto.cipher_from_text(text, "aes")["driver"] == "aes-aesni"
    assert crypto.cipher_from_text(text, "gcm(aes)")["accelerated"] is True
    entries = crypto.parse_proc_crypto(text)
    assert crypto.serving_driver(entries, "__xts(aes)") is None  # internal: not what users get
    # a driver whose self-test did not pass is never chosen
    for entry in entries:
        if entry["driver"] == "xts-aes-vaes-avx10_512":
            entry["selftest"] = "unknown"
    assert crypto.serving_driver(entries, "xts(aes)")["driver"] == "xts-aes-vaes-avx10_256"


@pytest.mark.parametrize(
    "driver, accelerated",
    [
        ("xts-aes-aesni", True),
        ("__xts-aes-aesni", True),
        ("xts-aes-vaes-avx2", True),
        ("xts-aes-ce", True),
        ("gcm_base(ctr-aes-aesni,ghash-clmulni)", True),
        ("xts-aes-ccp", True),
        ("xts(ecb(aes-generic))", False),
        ("xts(ecb(aes-fixed-time))", False),
        ("aes-generic", False),
        ("xts-aes-neonbs", False),
        ("gcm_base(ctr(aes-generic),ghash-generic)", False),
        ("mystery-xts", None),
    ],
)
def test_driver_names_are_classified(driver, accelerated):
    assert crypto.implementation(driver)[0] is accelerated


def test_cause_text_names_software_aes_and_stays_silent_when_accelerated():
    cpu = crypto.cpu_crypto("aes vaes avx2".split())
    text = crypto.cause_text(
        "storage", driver="xts(ecb(aes-fixed-time))", accelerated=False, cipher="xts(aes)", cpu=cpu
    )
    assert text.startswith(
        "the kernel served AES-XTS in software (xts(ecb(aes-fixed-time))): "
        "this cost is not intrinsic to encryption at rest"
    )
    assert "aesni_intel" in text
    assert crypto.cause_text("storage", driver="xts-aes-aesni", accelerated=True, cipher="xts(aes)") is None
    assert crypto.cause_text("storage", driver=None, accelerated=None) is None
    transport = crypto.cause_text(
        "transport",
        driver="TLS13_AES_256_GCM_SHA384",
        accelerated=False,
        cipher="TLS13_AES_256_GCM_SHA384",
        library="OpenSSL",
    )
    assert transport.startswith("OpenSSL ran TLS13_AES_256_GCM_SHA384 without AES instructions: ")
    variant = {
        "storage": "encrypted",
        "storage_cipher": "AES-256-XTS",
        "storage_cipher_driver": "xts(ecb(aes-fixed-time))",
        "storage_cipher_accelerated": False,
    }
    assert crypto.cause_from_variant(variant)[0].startswith("the kernel served AES-XTS in software")
    assert (
        crypto.cause_from_variant({"storage_cipher_driver": "xts-aes-aesni", "storage_cipher_accelerated": True}) == []
    )


def test_storage_variant_info_and_cpu_crypto_in_the_probe(tmp_path):
    root = make_root(
        tmp_path,
        GUEST_FLAGS + " vaes sha_ni",
        files={"/proc/crypto": (CRYPTO_FIXTURES / "devvm-6.18-after-fscrypt.txt").read_text()},
    )
    info = crypto.storage_variant_info("AES-256-XTS", root=root)
    assert info == {"storage_cipher_driver": "xts(ecb(aes-fixed-time))", "storage_cipher_accelerated": False}
    assert (
        crypto.storage_variant_info("aes-xts-plain64", root=root)["storage_cipher_driver"] == "xts(ecb(aes-fixed-time))"
    )
    assert crypto.storage_variant_info("AES-256-GCM via gocryptfs", root=root) == {}
    document = probe(root=root, dmesg=dmesg(tmp_path, ""))
    assert document["cpu_crypto"] == {
        "aes": True,
        "vaes": True,
        "pclmulqdq": False,
        "vpclmulqdq": False,
        "sha_ni": True,
        "avx2": False,
        "avx512f": False,
    }
    assert document["kernel_crypto"]["xts(aes)"]["accelerated"] is False
    assert (
        "unreadable"
        in probe(root=make_root(tmp_path / "b", GUEST_FLAGS), dmesg=dmesg(tmp_path, ""))["kernel_crypto"]["reason"]
    )


def test_live_proc_crypto_answers_for_aes():
    found = crypto.kernel_cipher("aes")
    if found is None:
        pytest.skip("/proc/crypto unreadable here")
    # every kernel registers at least one AES cipher; its class must be known
    assert found["driver"] and found["accelerated"] in (True, False)


@pytest.mark.root
def test_a_live_fscrypt_directory_names_the_driver_that_served_it(tmp_path):
    from ccbench.variants.storage import StorageAxis, mechanism_reason
    from ccbench.variants.storage_base import StorageOptions

    reason = mechanism_reason("fscrypt")
    if reason:
        pytest.skip(reason)
    axis = StorageAxis()
    prepared = axis.setup("encrypted:fscrypt", tmp_path / "work", StorageOptions(image_size="64M"))
    try:
        (prepared.path / "data.bin").write_bytes(b"x" * 65536)  # the policy is used: xts(aes) is instantiated
        info = crypto.storage_variant_info(prepared.info["storage_cipher"])
        entries = crypto.parse_proc_crypto(Path("/proc/crypto").read_text())
    finally:
        axis.teardown(prepared)
    assert "storage_cipher_driver_note" not in info  # read after the policy was live: instantiated
    has_aesni = any(
        "aesni" in e.get("driver", "") or "vaes" in e.get("driver", "") for e in entries if e.get("name") == "xts(aes)"
    )
    assert info["storage_cipher_accelerated"] is has_aesni
    if not has_aesni:  # the development and CI kernels: constant-time or table-based software AES
        assert info["storage_cipher_driver"] in ("xts(ecb(aes-fixed-time))", "xts(ecb(aes-generic))")


# ---- the TEE of the seeds' own clouds, from their kernel logs -------------------------------------------

DMESG_FIXTURES = Path(__file__).parent / "data" / "probe" / "dmesg"
AZURE_DMI = {
    "/sys/class/dmi/id/sys_vendor": "Microsoft Corporation\n",
    "/sys/class/dmi/id/product_name": "Virtual Machine\n",
    "/sys/class/dmi/id/chassis_asset_tag": "7783-7084-3265-9085-8269-3286-77\n",
}


@pytest.mark.parametrize(
    "log, vendor, technology",
    [
        ("azure-snp-cvm.txt", "AuthenticAMD", "sev-snp"),
        ("azure-tdx-cvm.txt", "GenuineIntel", "tdx"),
        ("gcp-snp.txt", "AuthenticAMD", "sev-snp"),
        ("gcp-tdx.txt", "GenuineIntel", "tdx"),
        ("aws-snp.txt", "AuthenticAMD", "sev-snp"),
    ],
)
def test_cloud_confidential_vms_are_named_from_their_kernel_logs(tmp_path, log, vendor, technology):
    # the guests' cpuinfo shows no SEV or TDX flag (Azure's paravisor hides them): the log decides
    root = make_root(tmp_path, GUEST_FLAGS, vendor=vendor, files=AZURE_DMI if log.startswith("azure") else None)
    document = probe(root=root, dmesg=DMESG_FIXTURES / log)
    tee = document["tee"]
    assert tee["technology"] == technology, tee
    assert all(e["source"] == "kernel log" for e in tee["evidence"])


def test_azure_snp_is_sev_snp_because_of_the_isolation_config_not_the_generic_amd_sev_line(tmp_path):
    root = make_root(tmp_path, GUEST_FLAGS, files=AZURE_DMI)
    tee = probe(root=root, dmesg=DMESG_FIXTURES / "azure-snp-cvm.txt")["tee"]
    assert tee["technology"] == "sev-snp"
    assert tee["hyperv_isolation"] == {
        "group_a": "0x1",
        "group_b": "0xba2",
        "isolation_type": 2,
        "technology": "sev-snp",
        "paravisor_present": True,
        "shared_gpa_boundary_active": True,
        "shared_gpa_boundary_bits": 46,
    }
    assert any("Isolation Config" in e["signal"] for e in tee["evidence"])
    assert any("vTOM guest's generic print" in n for n in tee["notes"])
    # without the isolation line (what ccbench used to rely on) the same log can only say "sev"
    without = tmp_path / "no-isolation.txt"
    without.write_text(
        "".join(
            line
            for line in (DMESG_FIXTURES / "azure-snp-cvm.txt").read_text().splitlines(True)
            if "Isolation Config" not in line
        )
    )
    assert probe(root=root, dmesg=without)["tee"]["technology"] == "sev"


def test_hyperv_vbs_isolation_is_not_memory_encryption_and_contradictions_are_unknown(tmp_path):
    root = make_root(tmp_path, GUEST_FLAGS, files=AZURE_DMI)
    vbs = dmesg(
        tmp_path,
        "[0.0] Hyper-V: Isolation Config: Group A 0x1, Group B 0xba1\n"
        "[0.1] Memory Encryption Features active: AMD SEV\n",
    )
    tee = probe(root=root, dmesg=vbs)["tee"]
    assert tee["technology"] == "none" and any("(vbs), not hardware memory encryption" in n for n in tee["notes"])
    clash = dmesg(
        tmp_path,
        "[0.0] Hyper-V: Isolation Config: Group A 0x1, Group B 0xbe3\n"
        "[0.1] Memory Encryption Features active: AMD SEV SEV-ES SEV-SNP\n",
    )
    assert probe(root=root, dmesg=clash)["tee"]["technology"] == "unknown"


def test_openssl_speed_output_and_the_aes_verdict():
    output = (
        "Doing AES-256-GCM ops for 1s on 16384 size blocks: 183245 AES-256-GCM ops in 0.99s\n"
        "version: 3.0.19\nbuilt on: ...\nThe 'numbers' are in 1000s of bytes per second processed.\n"
        "type      16384 bytes\nAES-256-GCM    2951413.76k\n"
    )
    assert crypto.parse_openssl_speed(output) == pytest.approx(2951.41376)
    assert crypto.parse_openssl_speed("nothing here") is None
    slow = crypto.assess_aes_speed(
        "aes-256-gcm", {"default": 61.0, "without VAES": 2951.0, "software (no AES-NI)": 300.0}
    )
    assert slow["accelerated"] is False and "48x slower than without VAES" in slow["verdict"]
    fast = crypto.assess_aes_speed(
        "aes-256-gcm", {"default": 3000.0, "without VAES": 2900.0, "software (no AES-NI)": 300.0}
    )
    assert fast["accelerated"] is True and "uses AES instructions" in fast["verdict"]
    assert "reason" in crypto.assess_aes_speed(
        "aes-256-gcm", {"default": None, "without VAES": None, "software (no AES-NI)": None}
    )


def test_openssl_aes_speed_live():
    import shutil

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    result = crypto.openssl_aes_speed(seconds=1)
    assert set(result["MBps"]) == set(crypto.OPENSSL_PATHS)
    assert all(v and v > 0 for v in result["MBps"].values()), result
    assert result["verdict"]


def test_dm_crypt_table_options_and_inline_encryption():
    from ccbench.probe.sources import Sources
    from ccbench.probe.storage import mount_of, parse_dm_crypt_table

    line = (
        "0 4194304 crypt aes-xts-plain64 :64:logon:cryptsetup:0a1b-d0 0 7:0 32768 "
        "4 allow_discards no_read_workqueue no_write_workqueue sector_size:4096"
    )
    table = parse_dm_crypt_table(line)
    assert table["cipher"] == "aes-xts-plain64" and table["sector_size"] == 4096
    assert table["no_read_workqueue"] and table["no_write_workqueue"]
    assert "logon" not in str(table)  # the key field is not kept
    plain = parse_dm_crypt_table(
        "0 2048 crypt aes-xts-plain64 0000000000000000000000000000000000000000000000000000000000000000 0 8:16 4096"
    )
    assert plain["sector_size"] == 512 and plain["options"] == [] and not plain["no_read_workqueue"]
    assert parse_dm_crypt_table("0 2048 linear 8:16 0") is None
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "proc/self").mkdir(parents=True)
        (root / "proc/self/mountinfo").write_text("40 1 7:0 / /mnt/enc rw,relatime - ext4 /dev/loop0 rw,inlinecrypt\n")
        assert "inlinecrypt" in mount_of(Path("/mnt/enc/x"), Sources(root=root, live=False))["super_options"]


# Real machines' kernel logs and files, quoted from public documentation, kept outside the project in
# ../shared/fixtures/real-world/tee (CCBENCH_SHARED names another place): read in place, never copied.
REAL_WORLD_TEE = (
    Path(os.environ.get("CCBENCH_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    / "fixtures"
    / "real-world"
    / "tee"
)


def _real_world_tee_cases():
    if not REAL_WORLD_TEE.is_dir():
        reason = f"{REAL_WORLD_TEE} is absent (set CCBENCH_SHARED to the folder holding fixtures/real-world)"
        return [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="real-world-tee-absent")]
    return [pytest.param(case, id=case.name) for case in sorted(REAL_WORLD_TEE.iterdir()) if case.is_dir()]


@pytest.mark.parametrize("case", _real_world_tee_cases())
def test_real_world_machines_are_named_as_their_sources_say(case, ccbench):
    """`ccbench env --root CASE/root --dmesg CASE/dmesg.txt --json` names the case's expected TEE."""
    expected = (case / "expected").read_text().strip()
    done = ccbench("env", "--root", case / "root", "--dmesg", case / "dmesg.txt", "--json")
    assert done.returncode == 0, done.stderr
    tee = json.loads(done.stdout)["tee"]
    assert tee["technology"] == expected, tee


def test_the_sgx_drivers_epc_lines_alone_say_sgx(tmp_path):
    """A guest with virtual EPC: no sgx flag or device node captured, only the driver's EPC lines."""
    root = make_root(tmp_path, GUEST_FLAGS, vendor="GenuineIntel", model="Intel Xeon")
    log = tmp_path / "sgx.txt"
    log.write_text("[    1.2] sgx: EPC section 0x180000000-0x181bfffff\n")
    tee = probe(root=root, dmesg=log)["tee"]
    assert tee["technology"] == "sgx", tee
    assert tee["evidence"] == [
        {"source": "kernel log", "signal": "sgx: EPC section 0x180000000-0x181bfffff", "indicates": "sgx"}
    ]


def test_systemds_confidential_virtualization_line_outranks_the_generic_amd_sev_print(tmp_path):
    """An Azure vTOM guest whose log lacks the Hyper-V isolation line: the kernel says only "AMD SEV" and
    "vTom", systemd (which reads the isolation leaf) says sev-snp."""
    root = make_root(tmp_path, GUEST_FLAGS, files=AZURE_DMI)
    log = tmp_path / "vtom.txt"
    log.write_text(
        "[    0.45] Memory Encryption Features active: AMD SEV\n"
        "[    0.45] SEV: Status: vTom \n"
        "[    1.34] systemd[1]: Detected confidential virtualization sev-snp.\n"
    )
    tee = probe(root=root, dmesg=log)["tee"]
    assert tee["technology"] == "sev-snp", tee
    assert any(e["signal"].startswith("systemd[1]: Detected confidential") for e in tee["evidence"])
    log.write_text("[    1.34] systemd[1]: Detected confidential virtualization tdx.\n")
    assert probe(root=root, dmesg=log)["tee"]["technology"] == "tdx"


# ---- CC provenance: what decides a confidential machine's performance -------------------------------

import hashlib  # noqa: E402

#: kernel-log lines WRITTEN BY HAND in the kernel's exact formats (kernel/dma/swiotlb.c swiotlb_print_info,
#: arch/x86/kernel/cpu/hypervisor.c, arch/x86/kernel/process.c select_idle_routine, the x86 boot's
#: "Command line:"), around an ordinary boot line
PROVENANCE_LOG = (
    "[    0.000000] Linux version 6.8.0-1015-gcp (buildd@lcy02-amd64-001)\n"
    "[    0.000000] Command line: BOOT_IMAGE=/boot/vmlinuz-6.8.0 root=PARTUUID=1a2b-01 ro swiotlb=262144,force\n"
    "[    0.000000] Hypervisor detected: KVM\n"
    "[    0.251207] process: using TDX aware idle routine\n"
    "[    1.104442] software IO TLB: mapped [mem 0x00000000dbe00000-0x00000000e3e00000] (128MB)\n"
)


def provenance_root(tmp_path, **overrides):
    files = {
        "/proc/cpuinfo": "".join(
            f"processor\t: {i}\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8573C\n"
            f"microcode\t: 0x21000230\nphysical id\t: 0\ncore id\t\t: {i // 2}\nflags\t\t: {GUEST_FLAGS} tdx_guest\n\n"
            for i in range(4)
        ),
        "/proc/meminfo": "MemTotal:       16384000 kB\nHugePages_Total:      8\nHugepagesize:       2048 kB\n",
        "/proc/cmdline": "BOOT_IMAGE=/boot/vmlinuz-6.8.0 root=PARTUUID=1a2b-01 ro swiotlb=262144,force\n",
        "/sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n",
        "/sys/kernel/mm/transparent_hugepage/defrag": "always defer defer+madvise [madvise] never\n",
        "/sys/devices/system/cpu/smt/active": "1\n",
        "/etc/machine-id": "4c4c4544003710388032b4c04f4e4d32\n",
    }
    files.update(overrides)
    return make_root(tmp_path, GUEST_FLAGS, files={k: v for k, v in files.items() if v is not None})


def test_provenance_reads_each_field_from_recorded_sources(tmp_path):
    document = probe(root=provenance_root(tmp_path), dmesg=dmesg(tmp_path, PROVENANCE_LOG))
    provenance = document["provenance"]
    assert provenance["kernel_cmdline"].endswith("ro swiotlb=262144,force")
    # the kernel log's mapped size wins over the command line's request: it is what the kernel made
    assert provenance["swiotlb"] == {
        "bytes": 128 << 20,
        "source": "kernel-log",
        "cmdline": "262144,force",
        "dynamic": None,
    }
    assert provenance["page_size"] is None  # sysconf describes this machine, not a recorded one
    assert provenance["thp"] == {"enabled": "madvise", "defrag": "madvise"}
    assert provenance["hugepages_total"] == 8
    assert (provenance["vcpus"], provenance["smt"]) == (4, True)
    assert provenance["memory_bytes"] == 16384000 * 1024
    assert provenance["cpu_model"] == "Intel(R) Xeon(R) Platinum 8573C"
    assert provenance["microcode"] == "0x21000230"
    assert provenance["hypervisor"] == "kvm"
    assert provenance["tdx_idle"] == "process: using TDX aware idle routine"
    assert provenance["tee_evidence"] is None  # only the verifier's reading of evidence fills it
    assert document["machine_id"] == hashlib.sha256(b"4c4c4544003710388032b4c04f4e4d32").hexdigest()[:16]
    assert document["probe_version"] == 2


def test_clones_sharing_a_machine_id_are_told_apart_by_their_vm_uuid(tmp_path):
    shared = {"/etc/machine-id": "4c4c4544003710388032b4c04f4e4d32\n"}
    ids = {
        probe(root=provenance_root(tmp_path / name, **shared, **{"/sys/class/dmi/id/product_uuid": uuid}))["machine_id"]
        for name, uuid in (
            ("a", "EC2A1B2C-0000-1111-2222-333344445555\n"),
            ("b", "ec2d9e8f-6666-7777-8888-999900001111\n"),
        )
    }
    assert len(ids) == 2 and None not in ids


def test_swiotlb_from_the_command_line_when_the_log_does_not_say(tmp_path):
    log = "".join(line + "\n" for line in PROVENANCE_LOG.splitlines() if "software IO TLB" not in line)
    provenance = probe(root=provenance_root(tmp_path), dmesg=dmesg(tmp_path, log))["provenance"]
    # 262144 slabs of 2 KiB (IO_TLB_SHIFT 11)
    assert provenance["swiotlb"] == {
        "bytes": 512 << 20,
        "source": "cmdline",
        "cmdline": "262144,force",
        "dynamic": None,
    }
    # debugfs's slab count (the boot lines gone from a long-running machine's ring buffer) before the request
    root = provenance_root(tmp_path / "d", **{"/sys/kernel/debug/swiotlb/io_tlb_nslabs": "32768\n"})
    provenance = probe(root=root, dmesg=dmesg(tmp_path, log))["provenance"]
    assert provenance["swiotlb"] == {"bytes": 64 << 20, "source": "debugfs", "cmdline": "262144,force", "dynamic": None}
    # a swiotlb= that sets only the mode gives no size; one after "--" is init's, not the kernel's
    root = provenance_root(tmp_path / "b", **{"/proc/cmdline": "ro swiotlb=noforce -- swiotlb=4096\n"})
    provenance = probe(root=root, dmesg=dmesg(tmp_path, "nothing\n"))["provenance"]
    assert provenance["swiotlb"] == {"bytes": None, "source": None, "cmdline": "noforce", "dynamic": None}


def test_provenance_is_null_where_its_sources_are_absent(tmp_path):
    root = tmp_path / "empty"
    root.mkdir()
    document = probe(root=root)
    provenance = document["provenance"]
    assert document["machine_id"] is None
    assert provenance["swiotlb"] == {"bytes": None, "source": None, "cmdline": None, "dynamic": None}
    assert provenance["thp"] == {"enabled": None, "defrag": None}
    nested = {"swiotlb", "thp"}
    assert all(value is None for key, value in provenance.items() if key not in nested), provenance
    # SMT absent from sysfs (an old kernel, no SMT control) is unknown, not "off"
    partial = provenance_root(tmp_path, **{"/sys/devices/system/cpu/smt/active": None})
    assert probe(root=partial)["provenance"]["smt"] is None


def test_the_hypervisor_and_a_paravisor_in_the_probes_own_names(tmp_path):
    log = (DMESG_FIXTURES / "azure-tdx-cvm.txt").read_text()
    provenance = probe(root=provenance_root(tmp_path), dmesg=dmesg(tmp_path, log))["provenance"]
    assert provenance["hypervisor"] == "microsoft (paravisor)"
    # without a "Hypervisor detected" line: what the probe read from DMI
    root = provenance_root(tmp_path / "b", **{"/sys/class/dmi/id/sys_vendor": "Google\n"})
    assert probe(root=root, dmesg=dmesg(tmp_path, "nothing\n"))["provenance"]["hypervisor"] == "google"


def test_live_provenance_has_this_machines_page_size(ccbench):
    done = ccbench("env", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["provenance"]["page_size"] == os.sysconf("SC_PAGE_SIZE")
    assert document["provenance"]["cpu_model"] == document["cpu"]["model"]


def test_env_prints_the_provenance_block(tmp_path, ccbench):
    done = ccbench("env", "--root", provenance_root(tmp_path), "--dmesg", dmesg(tmp_path, PROVENANCE_LOG))
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "swiotlb 128 MiB (from the kernel-log); swiotlb=262144,force on the command line" in text
    assert "THP enabled madvise, defrag madvise" in text
    assert "vCPUs / SMT 4 / on" in text
    assert "TDX idle process: using TDX aware idle routine" in text
    assert "page size unknown" in text


@pytest.mark.skipif(not REAL_WORLD_TEE.is_dir(), reason=f"{REAL_WORLD_TEE} is absent (set CCBENCH_SHARED)")
def test_real_world_kernel_logs_give_the_tdx_idle_line_and_the_hypervisor():
    """Canonical's TD log prints the TDX idle routine and a QEMU DMI line; GCP's SNP guest neither."""
    td = REAL_WORLD_TEE / "tdx-canonical-readme-configfs"
    provenance = probe(root=td / "root", dmesg=td / "dmesg.txt")["provenance"]
    assert provenance["tdx_idle"] == "process: using TDX aware idle routine"
    assert provenance["hypervisor"] == "qemu"
    snp = REAL_WORLD_TEE / "snp-gcp-n2d"
    provenance = probe(root=snp / "root", dmesg=snp / "dmesg.txt")["provenance"]
    assert provenance["tdx_idle"] is None and provenance["hypervisor"] is None
    assert provenance["swiotlb"]["bytes"] is None and provenance["kernel_cmdline"] is None


def test_a_td_log_fragment_holding_only_the_tdx_idle_line_reads_tdx_on_weak_evidence(tmp_path):
    """A GCP TD's boot-log fragment: no tdx_guest flag captured, no device node, only the idle line
    (arch/x86/kernel/process.c select_idle_routine, written here in its exact format)."""
    root = make_root(tmp_path, GUEST_FLAGS, vendor="GenuineIntel", model="Intel(R) Xeon(R) Platinum 8481C")
    log = dmesg(tmp_path, "[    0.412345] process: using TDX aware idle routine\n")
    tee = probe(root=root, dmesg=log)["tee"]
    assert tee["technology"] == "tdx", tee
    (entry,) = tee["evidence"]
    assert entry["signal"] == "process: using TDX aware idle routine" and entry["strength"] == "weak"
    assert any(note.startswith("tdx rests on weak evidence alone") for note in tee["notes"]), tee["notes"]
    # without the line a fragment says nothing either way ("unknown"); a log from boot without it: "none"
    assert probe(root=root, dmesg=dmesg(tmp_path, "[    0.1] nothing here\n"))["tee"]["technology"] == "unknown"
    boot = "[    0.000000] Linux version 6.8.0 (buildd@lcy02)\n[    0.1] nothing here\n"
    assert probe(root=root, dmesg=dmesg(tmp_path, boot))["tee"]["technology"] == "none"


def test_weak_evidence_never_contradicts_strong_evidence(tmp_path):
    """Strong evidence of another technology decides; the weak line neither wins nor makes it "unknown"."""
    root = make_root(tmp_path, GUEST_FLAGS + " sev sev_es sev_snp")
    log = dmesg(
        tmp_path,
        "[    0.1] Memory Encryption Features active: AMD SEV SEV-ES SEV-SNP\n"
        "[    0.4] process: using TDX aware idle routine\n",
    )
    tee = probe(root=root, dmesg=log)["tee"]
    assert tee["technology"] == "sev-snp", tee
    assert not any("weak evidence alone" in note for note in tee["notes"])
    # a strong TDX signal beside the line: tdx, and no note that it rests on weak evidence
    root = make_root(tmp_path / "td", GUEST_FLAGS + " tdx_guest", vendor="GenuineIntel")
    tee = probe(root=root, dmesg=dmesg(tmp_path, "[    0.4] process: using TDX aware idle routine\n"))["tee"]
    assert tee["technology"] == "tdx" and not any("weak evidence alone" in n for n in tee["notes"])


# --- issue 39: "none" only on positive evidence; CPUID of the probed machine --------------------------


def test_an_amd_guest_seen_only_through_cpuinfo_and_a_vtpm_is_unknown_not_none(tmp_path):
    """KVM hides the sev flags from its SEV guests and Azure's have no guest device: a guest whose
    flags say only "hypervisor", with a vTPM and no kernel log, could be any of them."""
    root = make_root(tmp_path, GUEST_FLAGS, dev=["/dev/tpmrm0"])
    tee = probe(root=root)["tee"]
    assert tee["technology"] == "unknown", tee
    assert any("no positive evidence either way" in note for note in tee["notes"]), tee["notes"]
    # a log that rolled over (it does not reach back to boot) is no evidence either
    fragment = dmesg(tmp_path, "[84000.1] systemd[1]: Started Daily apt upgrade.\n")
    assert probe(root=root, dmesg=fragment)["tee"]["technology"] == "unknown"
    # the whole log from boot, silent about memory encryption: positive evidence of none
    boot = dmesg(tmp_path, "[    0.000000] Linux version 6.8.0-1021-azure\n[0.1] Hypervisor detected: KVM\n")
    assert probe(root=root, dmesg=boot)["tee"]["technology"] == "none"


def test_the_pre_5_10_sev_line_is_read(tmp_path):
    root = make_root(tmp_path, GUEST_FLAGS)
    log = dmesg(
        tmp_path,
        "[    0.000000] Linux version 5.4.0-1043-gcp (buildd@lcy01-amd64-012)\n"
        "[    0.150000] AMD Secure Encrypted Virtualization (SEV) active\n",
    )
    tee = probe(root=root, dmesg=log)["tee"]
    assert tee["technology"] == "sev", tee
    # a host's SME line is no guest protection
    sme = dmesg(tmp_path, "[    0.000000] Linux version 5.4.0\n[    0.1] AMD Secure Memory Encryption (SME) active\n")
    assert probe(root=make_root(tmp_path / "h", HOST_FLAGS), dmesg=sme)["tee"]["technology"] == "none"


def _registers(text):
    """(ebx, edx, ecx) of a 12-character signature, as CPUID returns it."""
    words = [int.from_bytes(text[i : i + 4].encode(), "little") for i in (0, 4, 8)]
    return words[0], words[1], words[2]


def cpuid_dump(path, leaves):
    """A CPUID dump as `cpuid -r -1` prints it: {(leaf, subleaf): (eax, ebx, ecx, edx)}."""
    lines = ["CPU:"]
    for (leaf, subleaf), (eax, ebx, ecx, edx) in sorted(leaves.items()):
        lines.append(f"   {leaf:#010x} {subleaf:#04x}: eax={eax:#010x} ebx={ebx:#010x} ecx={ecx:#010x} edx={edx:#010x}")
    path.write_text("\n".join(lines) + "\n")
    return path


def vendor_leaf(vendor, top):
    ebx, edx, ecx = _registers(vendor)
    return (top, ebx, ecx, edx)


def signature_leaf(signature, eax=0):
    ebx, edx, ecx = _registers(signature)
    return (eax, ebx, ecx, edx)


def kvm_leaf(eax=0x40000001):
    # the hypervisor leaf holds its name in EBX, ECX, EDX order
    words = [int.from_bytes(b"KVMKVMKVM\0\0\0"[i : i + 4], "little") for i in (0, 4, 8)]
    return (eax, words[0], words[1], words[2])


GUEST_LEAF1 = (0x000806F8, 0x00000800, 0x80000000, 0x0)  # ECX[31]: a hypervisor


def test_a_recorded_cpuid_dump_decides_where_the_log_and_flags_cannot(tmp_path):
    intel = {(0, 0): vendor_leaf("GenuineIntel", 0x23), (1, 0): GUEST_LEAF1, (0x40000000, 0): kvm_leaf()}
    amd = {
        (0, 0): vendor_leaf("AuthenticAMD", 0x10),
        (1, 0): GUEST_LEAF1,
        (0x40000000, 0): kvm_leaf(),
        (0x80000000, 0): (0x80000021, 0, 0, 0),
    }
    cases = {
        "td": ({**intel, (0x21, 0): signature_leaf("IntelTDX    ")}, "tdx"),
        "intel plain": (intel, "none"),
        # SEV advertised: whether this guest runs with it is in the status MSR, which a snapshot lacks
        "amd sev advertised": ({**amd, (0x8000001F, 0): (0x0001007B, 0x0000016F, 0, 0)}, "unknown"),
        "amd plain": ({**amd, (0x8000001F, 0): (0, 0, 0, 0)}, "none"),
        # Azure's vTOM guest: the Hyper-V isolation leaf (type 2, SEV-SNP; paravisor present)
        "azure snp": (
            {
                **amd,
                (0x40000000, 0): (0x4000000C, *_hv_words()),
                (0x40000003, 0): (0, 1 << 22, 0, 0),
                (0x4000000C, 0): (0x1, 0xBA2, 0, 0),
                (0x8000001F, 0): (0, 0, 0, 0),
            },
            "sev-snp",
        ),
    }
    root = make_root(tmp_path, GUEST_FLAGS, dev=["/dev/tpmrm0"])
    for name, (leaves, expected) in cases.items():
        dump = cpuid_dump(tmp_path / f"{name}.txt", leaves)
        tee = probe(root=root, cpuid=dump)["tee"]
        assert tee["technology"] == expected, (name, tee)
        assert any(e["source"] == "cpuid" for e in tee["evidence"]) or expected == "unknown", (name, tee)


def _hv_words():
    return tuple(int.from_bytes(b"Microsoft Hv"[i : i + 4], "little") for i in (0, 4, 8))


def test_env_reads_a_recorded_cpuid_dump_and_a_bad_one_is_one_line(tmp_path, ccbench):
    root = make_root(tmp_path, GUEST_FLAGS)
    leaves = {
        (0, 0): vendor_leaf("GenuineIntel", 0x23),
        (1, 0): GUEST_LEAF1,
        (0x21, 0): signature_leaf("IntelTDX    "),
    }
    done = ccbench("env", "--root", root, "--cpuid", cpuid_dump(tmp_path / "td.txt", leaves), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["tee"]["technology"] == "tdx"
    done = ccbench("env", "--root", root, "--cpuid", tmp_path / "absent.txt")
    assert done.returncode != 0 and "--cpuid" in done.stderr and "Traceback" not in done.stderr


def test_the_live_cpuid_runs_unprivileged_and_agrees_with_the_kernel():
    """CPUID executed by this process (no /dev/cpu, no root needed) gives the vendor /proc/cpuinfo names."""
    from ccbench.probe.sources import UserCpuid

    reader = UserCpuid()
    if reader.error:
        pytest.skip(reader.error)
    leaf0 = reader(0)
    vendor = b"".join(r.to_bytes(4, "little") for r in (leaf0[1], leaf0[3], leaf0[2])).decode()
    assert f"vendor_id\t: {vendor}" in open("/proc/cpuinfo").read()


def test_a_paravisor_cvm_without_configfs_tsm_is_told_the_vtpm_path(tmp_path):
    from ccbench.attestation.evidence import TsmProvider

    root = make_root(tmp_path, GUEST_FLAGS)
    tee = probe(root=root, dmesg=DMESG_FIXTURES / "azure-snp-cvm.txt")["tee"]
    reason = TsmProvider(tmp_path / "no-tsm").available(tee)
    assert "paravisor" in reason and "vTPM" in reason and "not a confidential VM" not in reason
    assert "not a confidential VM" in TsmProvider(tmp_path / "no-tsm").available({"technology": "none"})


def test_each_virtio_device_records_whether_access_platform_was_negotiated(tmp_path):
    """/sys/bus/virtio/devices/*/features: one '0' or '1' per feature bit, bit 0 first; bit 33 is
    VIRTIO_F_ACCESS_PLATFORM (this development VM's devices have it clear)."""
    bits = ["0"] * 64
    bits[32] = "1"  # VIRTIO_F_VERSION_1
    plain = "".join(bits)
    bits[33] = "1"
    platform = "".join(bits)
    files = {
        "/sys/bus/virtio/devices/virtio0/features": plain + "\n",
        "/sys/bus/virtio/devices/virtio0/device": "0x0001\n",
        "/sys/bus/virtio/devices/virtio1/features": platform + "\n",
        "/sys/bus/virtio/devices/virtio1/device": "0x0002\n",
    }
    devices = probe(root=make_root(tmp_path, GUEST_FLAGS, files=files))["virtio_devices"]
    assert devices == [
        {"name": "virtio0", "type": "net", "access_platform": False},
        {"name": "virtio1", "type": "block", "access_platform": True},
    ]


# --- issue 56: "none" on evidence a host or a hypervisor gives ------------------------------------------


def _fragment(tmp_path, fixture, keep):
    """What `dmesg | grep -i KEEP` shows of a fixture log: no boot line, so its silence proves nothing."""
    lines = (DMESG_FIXTURES / fixture).read_text().splitlines(True)
    path = tmp_path / f"fragment-{fixture}"
    path.write_text("".join(line for line in lines if keep.lower() in line.lower()))
    return path


def _bare_root(tmp_path):
    """A snapshot with no cpuinfo: nothing but the log can decide."""
    root = tmp_path / "bare"
    (root / "etc").mkdir(parents=True, exist_ok=True)
    return root


@pytest.mark.parametrize(
    "fixture, keep, role, reason",
    [
        ("tdx-host.txt", "tdx", "tdx host", "the host side of TDX"),
        ("sev-host.txt", "sev", "sev host", "the host side of SEV"),
        ("hyperv-no-isolation.txt", "hyper-v", "hyper-v guest without isolation", "does not isolate this guest"),
    ],
)
def test_a_host_and_a_hyperv_guest_without_isolation_are_none_with_their_reason(
    tmp_path, ccbench, fixture, keep, role, reason
):
    fragment = _fragment(tmp_path, fixture, keep)
    done = ccbench("env", "--root", _bare_root(tmp_path), "--dmesg", fragment, "--json")
    assert done.returncode == 0, done.stderr
    tee = json.loads(done.stdout)["tee"]
    assert tee["technology"] == "none", tee
    assert tee["roles"] == [role]
    assert any(e.get("role") == role and reason in e["signal"] for e in tee["evidence"]), tee["evidence"]
    shown = ccbench("env", "--root", _bare_root(tmp_path), "--dmesg", fragment)
    text = " ".join(shown.stdout.split())  # the console wraps long lines
    assert reason in text and "-> none" in text


def test_the_tdx_hosts_module_version_is_recorded(tmp_path):
    tee = probe(root=_bare_root(tmp_path), dmesg=_fragment(tmp_path, "tdx-host.txt", "virt/tdx"))["tee"]
    assert tee["tdx_module"] == {"version": "1.5", "build_date": "20240129", "build_num": 698}
    # each CMR or module line alone says "host" too
    for line in (
        "virt/tdx: CMR: [0x100000, 0x77800000)",
        "virt/tdx: module initialized",
        "virt/tdx: TDX module version: 1.5.24",
    ):
        alone = dmesg(tmp_path, f"[   24.1] {line}\n")
        assert probe(root=_bare_root(tmp_path), dmesg=alone)["tee"]["technology"] == "none", line
    version = dmesg(tmp_path, "[   24.1] virt/tdx: TDX module version: 1.5.24\n")
    assert probe(root=_bare_root(tmp_path), dmesg=version)["tee"]["tdx_module"] == {"version": "1.5.24"}


def test_lines_that_prove_no_role_leave_it_unknown(tmp_path):
    unknown = [
        # kvm_amd prints "disabled" wherever the CPU has the SEV bit, a nested guest's too
        "[   10.7] kvm_amd: SEV disabled (ASIDs 0 - 0)\n",
        "[    5.5] ccp 0000:47:00.1: sev initialization failed\n",
        # the isolation bit set, the line that names the isolation type cut off
        "[    0.0] Hyper-V: privilege flags low 0xae7f, high 0x7b8030, hints 0xa0e24, misc 0xe0bed7b2\n",
        # a TD's own (guest-side) lines are "tdx: ", never "virt/tdx: "
        "[    0.3] tdx: Guest detected\n[    0.4] Hyper-V: privilege flags low 0xae7f, high 0x3b8030\n",
    ]
    for text in unknown[:3]:
        assert probe(root=_bare_root(tmp_path), dmesg=dmesg(tmp_path, text))["tee"]["technology"] == "unknown", text
    # a TD's line beside a Hyper-V guest without isolation: contradictory
    tee = probe(root=_bare_root(tmp_path), dmesg=dmesg(tmp_path, unknown[3]))["tee"]
    assert tee["technology"] == "unknown" and any("contradictory" in n for n in tee["notes"]), tee


def test_the_hyperv_isolation_bit_is_what_an_azure_cvms_privilege_flags_carry():
    """The project's own CVM fixtures are consistent with mshyperv.c: the Isolation Config line is
    printed only under HV_ISOLATION."""
    from ccbench.probe.tee_roles import HV_ISOLATION

    for log in ("azure-snp-cvm.txt", "azure-tdx-cvm.txt"):
        text = (DMESG_FIXTURES / log).read_text()
        high = int(text.split("privilege flags low ")[1].split("high ")[1].split(",")[0], 16)
        assert high & HV_ISOLATION and "Isolation Config" in text


# --- issue 56: the clock source and whether the bounce pool can grow ------------------------------------


def test_the_clock_source_is_recorded_from_sysfs_else_from_the_kernels_last_switch(tmp_path):
    sysfs = {"/sys/devices/system/clocksource/clocksource0/current_clocksource": "hyperv_clocksource_tsc_page\n"}
    log = dmesg(
        tmp_path,
        "[    0.0] Linux version 6.8.0\n"
        "[    0.9] clocksource: Switched to clocksource kvm-clock\n"
        "[    2.1] clocksource: Switched to clocksource tsc\n",
    )
    assert probe(root=provenance_root(tmp_path / "a", **sysfs), dmesg=log)["provenance"]["clocksource"] == (
        "hyperv_clocksource_tsc_page"
    )
    assert probe(root=provenance_root(tmp_path / "b"), dmesg=log)["provenance"]["clocksource"] == "tsc"
    assert probe(root=provenance_root(tmp_path / "c"))["provenance"]["clocksource"] is None
    # a live machine's own (this one's): whatever sysfs says, named in env's provenance block
    with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as current:
        assert probe()["provenance"]["clocksource"] == current.read().strip()


def test_whether_the_kernel_grows_its_bounce_pool_is_read_from_its_config(tmp_path):
    import gzip

    built = provenance_root(
        tmp_path / "a", **{"/boot/config-6.8.0-1014-azure": "CONFIG_SWIOTLB=y\nCONFIG_SWIOTLB_DYNAMIC=y\n"}
    )
    assert probe(root=built)["provenance"]["swiotlb"]["dynamic"] is True
    unset = provenance_root(
        tmp_path / "b", **{"/boot/config-6.8.0-1014-azure": "# CONFIG_SWIOTLB_DYNAMIC is not set\n"}
    )
    assert probe(root=unset)["provenance"]["swiotlb"]["dynamic"] is False
    proc = provenance_root(tmp_path / "c")
    (proc / "proc/config.gz").write_bytes(gzip.compress(b"CONFIG_SWIOTLB_DYNAMIC=y\n"))
    assert probe(root=proc)["provenance"]["swiotlb"]["dynamic"] is True
    debugfs = provenance_root(tmp_path / "d", **{"/sys/kernel/debug/swiotlb/io_tlb_transient_nslabs": "0\n"})
    assert probe(root=debugfs)["provenance"]["swiotlb"]["dynamic"] is True


def test_the_kernels_swiotlb_full_lines_are_counted_from_where_the_log_stood(tmp_path):
    """A MOCK of /dev/kmsg (a file of records in its format, "prio,seq,usec,flags;text" and " KEY=value"
    continuation lines): what was there at opening is not counted, what is appended is."""
    from ccbench.probe.kmsg import KernelMessages

    kmsg = tmp_path / "kmsg"
    full = "4,{},{},-;virtio-pci 0000:00:04.0: swiotlb buffer is full (sz: 65536 bytes), total 32768 (slots), used 32712 (slots)\n"
    kmsg.write_text(full.format(1, 10) + " SUBSYSTEM=pci\n")
    reader = KernelMessages(tmp_path)
    assert reader.error is None and reader.read() == {"kmsg.swiotlb_full": 0.0}
    with kmsg.open("a") as log:
        log.write(full.format(2, 20) + " DEVICE=+pci:0000:00:04.0\n6,3,30,-;virtio_net virtio0 eth0: link up\n")
        log.write(full.format(4, 40))
    assert reader.read() == {"kmsg.swiotlb_full": 2.0}
    reader.close()
    missing: dict[str, str] = {}
    absent = KernelMessages(tmp_path / "nowhere", missing=missing)
    assert absent.read() == {} and "dmesg_restrict" in missing["kmsg"]


def test_the_live_kernel_log_is_read_onward_without_counting_the_past():
    from ccbench.probe.kmsg import KernelMessages

    reader = KernelMessages()
    if reader.error:
        pytest.skip(reader.error)
    assert reader.read() == {"kmsg.swiotlb_full": 0.0}  # whatever this machine printed before is not counted
    reader.close()
