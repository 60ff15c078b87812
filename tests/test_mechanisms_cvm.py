"""The mechanisms wing on confidential VMs this machine is not (issue 39): each platform simulated by
a fake /proc, /sys and /dev tree and a recorded kernel log or CPUID dump (the probe reads under a
root), the port-I/O fault simulated by an LD_PRELOAD shim whose ioperm() says yes (the `out` then
faults as it does in a TD) and by a stand-in ccmech that dies by SIGSEGV. Who serves each exit, the
acceptance unit, the swiotlb counters and lockdown follow the kernel's code as
../shared/reviews/cvm-on-paper.md cites it."""

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from test_probe import GUEST_FLAGS, dmesg, make_root

from ccbench.observe.counters import TRACEPOINTS, CounterSession, differences, read_proc
from ccbench.probe import probe
from ccbench.workloads.base import ExecutionContext
from ccbench.workloads.mechanisms import BINARY, Mechanisms, MechanismsParams, parse

DMESG = Path(__file__).parent / "data" / "probe" / "dmesg"
BOOT = "[    0.000000] Linux version 6.14.0-1 (buildd@lcy02) #1 SMP\n"
TDX_LOG = BOOT + "[    0.000000] tdx: Guest detected\n[    0.3] Memory Encryption Features active: Intel TDX\n"
TD_CTLS_ON = "[    0.000000] tdx: TD_CTLS: PENDING_VE_DISABLE ENUM_TOPOLOGY VIRT_CPUID2 REDUCE_VE\n"
TD_CTLS_OFF = "[    0.000000] tdx: TD_CTLS: PENDING_VE_DISABLE\n"
INTEL = dict(vendor="GenuineIntel", model="Intel(R) Xeon(R) Platinum 8573C")

# --- recorded ccmech exits output ----------------------------------------------------------------------

HEADER = {"iterations": 1000, "batches": 3, "leaves": ["0x0", "0xb", "0x40000000"], "port": "0x80"}
EMPTY = {"name": "empty", "ns_per_op": [0.3, 0.2, 0.4], "cycles_per_op": [1.0, 0.5, 2.0]}


def cpuid_case(leaf, ns):
    return {"name": "cpuid", "leaf": leaf, "ns_per_op": [ns, ns, ns], "cycles_per_op": [ns * 2] * 3}


def lines(*documents):
    return "".join(json.dumps(d) + "\n" for d in documents)


def test_a_run_that_died_keeps_every_case_it_printed_and_names_the_rest_with_the_signal():
    # ccmech printed two CPUID cases, then died by SIGSEGV mid-line
    stdout = lines(HEADER, EMPTY, cpuid_case("0x0", 100.0), cpuid_case("0xb", 4000.0)) + '{"cycles_per'
    document, lost = parse.exit_document(stdout, -signal.SIGSEGV)
    found, missing = parse.exit_measurements(document)
    leaves = {m.case["leaf"]: m.value for m in found if m.metric == "exit_ns"}
    assert leaves == pytest.approx({"0x0": 100 - 0.3, "0xb": 4000 - 0.3})
    assert {item["figure"]: item["why"] for item in lost} == {
        "exit cpuid 0x40000000": "ccmech exits died by SIGSEGV before printing it",
        "exit out 0x80": "ccmech exits died by SIGSEGV before printing it",
    }
    assert missing == []
    # nothing readable: one figure missing, with how it ended
    document, lost = parse.exit_document("", 139)
    assert parse.exit_measurements(document)[1] == [
        {"figure": "exits", "why": "ccmech exits printed nothing readable (exited with status 139)"}
    ]
    document, lost = parse.exit_document("", 2, 'ccmech: --batches must be a positive integer, not "0"\n')
    assert parse.exit_measurements(document)[1][0]["why"].endswith(
        'status 2: ccmech: --batches must be a positive integer, not "0")'
    )


def _context(tmp_path, environment):
    return ExecutionContext(
        workload_name="m",
        workdir=tmp_path,
        raw_dir=tmp_path / "raw",
        repetition=0,
        warmup=False,
        variant={},
        environment=environment,
    )


def test_the_workload_keeps_the_cases_of_a_ccmech_that_dies_by_sigsegv(tmp_path, monkeypatch):
    """A stand-in ccmech (a shell script) prints the header, the empty loop and one CPUID case, then
    kills itself with SIGSEGV, as the real one did on a TD: the execution goes on with that case."""
    stand_in = tmp_path / "ccmech"
    stand_in.write_text(
        "#!/bin/sh\nprintf '%s\\n' '"
        + json.dumps(HEADER)
        + "' '"
        + json.dumps(EMPTY)
        + "' '"
        + json.dumps(cpuid_case("0x0", 120.0))
        + "'\nkill -SEGV $$\n"
    )
    stand_in.chmod(0o755)
    monkeypatch.setenv("CCBENCH_CCMECH", str(stand_in))
    tee = probe(root=make_root(tmp_path, GUEST_FLAGS + " tdx_guest", **INTEL), dmesg=dmesg(tmp_path, TDX_LOG))["tee"]
    workload = Mechanisms("m", MechanismsParams(cases=["exits"]))
    found, missing = workload._exits(_context(tmp_path, {"tee": tee, "cpu": {"flags": ["hypervisor", "tdx_guest"]}}))
    (measured,) = [m for m in found if m.metric == "exit_ns"]
    assert measured.case["leaf"] == "0x0" and measured.value == pytest.approx(120 - 0.3)
    assert measured.metadata["served_by"] == "the TDX module (no exit to the VMM)"
    figures = {item["figure"]: item["why"] for item in missing}
    assert figures["exit out 0x80"] == "ccmech exits died by SIGSEGV before printing it"
    assert set(figures) == {"exit cpuid 0xb", "exit cpuid 0x40000000", "exit out 0x80"}


#: ccmech built, a C compiler for the ioperm() stand-ins, an x86_64 CPU
needs_ccmech = pytest.mark.skipif(
    not BINARY.is_file() or shutil.which("cc") is None or os.uname().machine != "x86_64",
    reason=f"needs {BINARY} built ('bash scripts/setup.sh --with mechanisms'), a C compiler and x86_64",
)
#: ioperm() stand-ins: one that says yes without granting the port (the `out` then faults, as a
#: user-space port write does in a TD), one that refuses with EPERM (as lockdown does, even to root)
SHIMS = {
    "grants": "int ioperm(unsigned long from, unsigned long num, int on) { return 0; }\n",
    "refuses": "#include <errno.h>\nint ioperm(unsigned long from, unsigned long num, int on) { errno = EPERM; return -1; }\n",
}


def run_ccmech(tmp_path, shim, root=None):
    """ccmech exits under an ioperm() stand-in (and a fake /proc, /sys tree): it must exit 0 with every
    CPUID case; the port case's reason is returned."""
    source = tmp_path / f"{shim}.c"
    source.write_text(SHIMS[shim])
    library = tmp_path / f"{shim}.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    env = {**os.environ, "LD_PRELOAD": str(library)}
    if root is not None:
        env["CCMECH_ROOT"] = str(root)
    argv = [str(BINARY), "exits", "--iterations", "200", "--batches", "2"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr)
    document, lost = parse.exit_document(done.stdout, done.returncode)
    found, missing = parse.exit_measurements(document)
    assert lost == []
    assert {m.case["leaf"] for m in found if m.metric == "exit_ns"} == {"0x0", "0xb", "0x40000000"}
    (port,) = missing
    assert port["figure"] == "exit out 0x80"
    return port["why"]


@needs_ccmech
def test_a_port_write_that_faults_loses_only_the_port_case(tmp_path):
    """ioperm() says yes without granting the port: the `out` faults (SIGSEGV), as it does in a TD.
    ccmech still exits 0 with every CPUID case (main's printed nothing and exited 139)."""
    assert "SIGSEGV" in run_ccmech(tmp_path, "grants")


@needs_ccmech
def test_in_a_tdx_guest_port_io_is_not_attempted_and_under_lockdown_lockdown_is_the_reason(tmp_path):
    root = tmp_path / "root"
    (root / "proc").mkdir(parents=True)
    (root / "proc/cpuinfo").write_text("processor\t: 0\nflags\t\t: fpu tsc msr hypervisor tdx_guest\n")
    # the stand-in would let the write through (and fault): the TD's flag keeps it from being tried
    why = run_ccmech(tmp_path, "grants", root)
    assert why.startswith("not attempted in a TDX guest (the cpuinfo flag tdx_guest)"), why
    (root / "proc/cpuinfo").write_text("processor\t: 0\nflags\t\t: fpu tsc msr hypervisor\n")
    (root / "sys/kernel/security").mkdir(parents=True)
    (root / "sys/kernel/security/lockdown").write_text("none [integrity] confidentiality\n")
    why = run_ccmech(tmp_path, "refuses", root)
    assert "kernel lockdown (integrity)" in why and "needs root" not in why, why


# --- who serves each exit, by platform ------------------------------------------------------------------


def _tee(tmp_path, flags, log, **machine):
    root = make_root(tmp_path / str(len(list(tmp_path.iterdir()))), flags, **machine)
    log_file = log if isinstance(log, Path) else dmesg(tmp_path, log)
    return probe(root=root, dmesg=log_file)["tee"]


def test_who_serves_each_exit_follows_the_platform_the_probe_found(tmp_path):
    tdx = GUEST_FLAGS + " tdx_guest"
    platforms = {
        "tdx topology": _tee(tmp_path, tdx, TDX_LOG + TD_CTLS_ON, **INTEL),
        "tdx no topology": _tee(tmp_path, tdx, TDX_LOG + TD_CTLS_OFF, **INTEL),
        "tdx no ctls line": _tee(tmp_path, tdx, TDX_LOG, **INTEL),
        "snp kvm": _tee(tmp_path, GUEST_FLAGS, DMESG / "gcp-snp.txt"),
        "sev-es": _tee(tmp_path, GUEST_FLAGS, BOOT + "[0.4] Memory Encryption Features active: AMD SEV SEV-ES\n"),
        "gcp sev": _tee(tmp_path, GUEST_FLAGS, BOOT + "[0.4] Memory Encryption Features active: AMD SEV\n"),
        "azure snp": _tee(tmp_path, GUEST_FLAGS, DMESG / "azure-snp-cvm.txt"),
        "azure tdx": _tee(tmp_path, GUEST_FLAGS, DMESG / "azure-tdx-cvm.txt", **INTEL),
        "plain": _tee(tmp_path, GUEST_FLAGS, BOOT),
    }
    assert platforms["tdx topology"]["tdx_td_ctls"] == [
        "PENDING_VE_DISABLE",
        "ENUM_TOPOLOGY",
        "VIRT_CPUID2",
        "REDUCE_VE",
    ]
    expected = {
        # (platform, case): the words that must be in served_by
        ("tdx topology", "0xb"): "the TDX module (topology enumeration on",
        ("tdx no topology", "0xb"): "a #VE the guest kernel answers with zeros",
        ("tdx no ctls line", "0xb"): "no TD_CTLS line in the kernel log to tell",
        ("tdx topology", "0x0"): "the TDX module",
        ("tdx topology", "0x40000000"): "a #VE, then the VMM (TDVMCALL)",
        ("tdx topology", "port"): "not attempted",
        ("snp kvm", "0x0"): "the SEV-SNP CPUID table",
        ("snp kvm", "0xb"): "then the hypervisor for the x2APIC ID",
        ("snp kvm", "0x40000000"): "no exit to the hypervisor",
        ("sev-es", "0x0"): "the hypervisor, through the GHCB",
        ("sev-es", "0x40000000"): "the hypervisor, through the GHCB",
        ("gcp sev", "0x0"): "a VM exit; SEV encrypts memory",
        ("azure snp", "0x0"): "the paravisor (the #VC reflected to it",
        ("azure tdx", "0xb"): "the paravisor (TD partitioning",
        ("plain", "0x0"): "the hypervisor (a VM exit)",
    }
    for (platform, case), words in expected.items():
        text = parse.served_by(platforms[platform], case)
        assert words in text, (platform, case, text)
    assert parse.served_by(platforms["plain"], "0x0", hypervisor=False) == "the CPU (bare metal: no exit)"
    assert parse.served_by({"technology": "unknown"}, "0x0").startswith("unknown")


# --- page acceptance ----------------------------------------------------------------------------------


def touch(before, after, elapsed_ns=256e6):
    return {
        "pages": "4k",
        "bytes": 256 << 20,
        "elapsed_ns": elapsed_ns,
        "ns_per_4k_page": elapsed_ns / 65536,
        "ns_per_2m_page": elapsed_ns / 128,
        "huge_bytes": 0,
        "nr_unaccepted_before": before,
        "nr_unaccepted_after": after,
        "unaccepted_kb_before": None if before is None else before * 4,
        "unaccepted_kb_after": None if after is None else after * 4,
    }


def test_the_acceptance_unit_comes_only_from_a_touch_that_accepted():
    # 4 MiB chunks: 1024 pages accepted during a touch of 256 MiB that took 256 ms
    found, missing = parse.first_touch_measurements(touch(500_000, 500_000 - 1024))
    (unit,) = [m for m in found if m.metric == "accept_ns_per_page"]
    assert unit.value == pytest.approx(256e6 / 1024)
    assert unit.case == {"mechanism": "page-acceptance", "pages": "4k"} and missing == []
    # the zone had accepted memory to spare: the touch timed faults, not acceptance
    found, missing = parse.first_touch_measurements(touch(500_000, 500_000))
    assert not [m for m in found if m.metric == "accept_ns_per_page"]
    (why,) = missing
    assert why["figure"] == "time per accepted page (4k)" and why["why"].startswith("no acceptance")
    # no unaccepted memory at all: one reason, no acceptance figure
    found, missing = parse.first_touch_measurements(touch(None, None))
    assert [m.metric for m in found] == ["first_touch_ns"] and "nr_unaccepted" in missing[0]["why"]


# --- the swiotlb counters, lockdown, the online CPUs -----------------------------------------------------


def swiotlb_session(tmp_path, files, lockdown=None):
    sys_root = tmp_path / "sys"
    directory = tmp_path / "debug" / "swiotlb"
    directory.mkdir(parents=True)
    for name, text in files.items():
        if text is None:  # unreadable: a directory where a file was (reading raises OSError, as EPERM would)
            (directory / name).mkdir()
        else:
            (directory / name).write_text(text)
    if lockdown:
        (sys_root / "kernel/security").mkdir(parents=True)
        (sys_root / "kernel/security/lockdown").write_text(lockdown)
    session = CounterSession(None, proc_root=tmp_path / "proc", sys_root=sys_root)
    session.swiotlb = directory
    return session, directory


def test_a_swiotlb_value_above_the_pool_is_rejected_and_the_high_water_mark_is_reset_per_execution(tmp_path):
    session, directory = swiotlb_session(
        tmp_path,
        {
            "io_tlb_nslabs": "32768\n",
            "io_tlb_used": "18446744073709551615\n",
            "io_tlb_used_hiwater": "30000\n",
            "io_tlb_transient_nslabs": "1024\n",
        },
    )
    before = session.begin()
    assert (directory / "io_tlb_used_hiwater").read_text() == "0"
    assert before["swiotlb.hiwater"] == 0 and before["swiotlb.transient_nslabs"] == 1024
    assert "swiotlb.used" not in before
    assert (
        "18446744073709551615" in session.missing["swiotlb.used"] and "33792 slabs" in session.missing["swiotlb.used"]
    )
    (directory / "io_tlb_used_hiwater").write_text("700\n")
    (directory / "io_tlb_transient_nslabs").write_text("3072\n")
    after = differences(before, session.snapshot())
    assert after["swiotlb.hiwater.end"] == 700 and "swiotlb.hiwater" not in after
    assert after["swiotlb.transient_nslabs"] == 2048 and after["swiotlb.transient_nslabs.end"] == 3072


def test_under_lockdown_the_unreadable_high_water_mark_names_lockdown(tmp_path):
    from ccbench.observe.counters import lockdown_mode

    session, _ = swiotlb_session(
        tmp_path,
        {"io_tlb_nslabs": "32768\n", "io_tlb_used": "12\n", "io_tlb_used_hiwater": None},
        lockdown="none [integrity] confidentiality\n",
    )
    values = session.snapshot()
    assert values["swiotlb.used"] == 12
    assert "locked down (integrity)" in session.missing["swiotlb.hiwater"], session.missing
    assert lockdown_mode(tmp_path / "sys") == "integrity"
    # what lockdown can refuse says so (debugfs under any lockdown, perf only under confidentiality);
    # a counter this machine lacks for another reason is not blamed on it
    session.missing |= {
        "debugfs": "could not mount debugfs: mount: Operation not permitted",
        "pmu.cycles": "perf_event_open(cycles): Operation not permitted: not permitted (run as root, ...)",
        "cpuidle": "no cpuidle states in sysfs (no idle driver: the CPUs halt or poll directly)",
    }
    session._name_lockdown()
    assert session.missing["debugfs"].endswith("(the kernel is locked down: integrity)")
    assert "locked down" not in session.missing["pmu.cycles"] and "locked down" not in session.missing["cpuidle"]
    (tmp_path / "sys/kernel/security/lockdown").write_text("none integrity [confidentiality]\n")
    session._name_lockdown()
    assert session.missing["pmu.cycles"].endswith("(the kernel is locked down: confidentiality)")
    assert "locked down" not in session.missing["cpuidle"] and "exits" in session.missing
    assert "locked down" not in session.missing["exits"]
    (tmp_path / "sys/kernel/security/lockdown").write_text("[none] integrity confidentiality\n")
    assert lockdown_mode(tmp_path / "sys") is None


def test_the_pmu_is_opened_on_the_online_cpus(tmp_path):
    from ccbench.observe.counters import online_cpus

    (tmp_path / "devices/system/cpu").mkdir(parents=True)
    (tmp_path / "devices/system/cpu/online").write_text("0-1,4,6-7\n")
    assert online_cpus(tmp_path) == [0, 1, 4, 6, 7]
    assert online_cpus(tmp_path / "nowhere") is None


def test_every_counter_a_counts_rule_names_is_one_the_counters_produce(tmp_path):
    """A count rule on a counter that counters.py never records can never fire (main's bounce rule
    named swiotlb.bounced_bytes): each named counter must come out of a snapshot's differences."""
    from ccbench.analysis.rows.breakdown import COUNT_RULES

    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "vmstat").write_text("nr_unaccepted 4096\npgfault 10\nnr_anon_transparent_hugepages 0\n")
    produced = set(differences(read_proc(proc), read_proc(proc)))
    session, _ = swiotlb_session(
        tmp_path, {"io_tlb_nslabs": "64\n", "io_tlb_used": "1\n", "io_tlb_used_hiwater": "2\n"}
    )
    produced |= set(differences(session.snapshot(), session.snapshot()))
    produced |= {f"trace.{event}" for event in TRACEPOINTS} | {"pmu.cycles", "pmu.instructions"}
    for mechanism, rule in COUNT_RULES.items():
        assert set(rule.counters) <= produced, (mechanism, set(rule.counters) - produced)


def test_the_pools_slabs_and_the_kernels_full_lines_are_counted_per_execution(tmp_path):
    """io_tlb_nslabs as a level (its growth: a dynamic pool's new slabs), and the kernel's "swiotlb
    buffer is full" lines printed during the execution, from a MOCK of /dev/kmsg (a file of records)."""
    from ccbench.probe.kmsg import KernelMessages

    session, directory = swiotlb_session(
        tmp_path, {"io_tlb_nslabs": "32768\n", "io_tlb_used": "0\n", "io_tlb_used_hiwater": "0\n"}
    )
    kmsg = tmp_path / "dev" / "kmsg"
    kmsg.parent.mkdir()
    kmsg.write_text("4,1,1,-;virtio_blk virtio1: swiotlb buffer is full (sz: 524288 bytes), total 32768 (slots)\n")
    session.kmsg = KernelMessages(kmsg.parent)
    before = session.begin()
    (directory / "io_tlb_nslabs").write_text("33792\n")
    (directory / "io_tlb_used_hiwater").write_text("33792\n")
    with kmsg.open("a") as log:
        log.write(
            "4,2,9,-;virtio_blk virtio1: swiotlb buffer is full (sz: 524288 bytes), total 33792 (slots), used 33790 (slots)\n"
        )
    after = differences(before, session.snapshot())
    assert after["swiotlb.nslabs.end"] == 33792 and after["swiotlb.nslabs"] == 1024
    assert after["swiotlb.hiwater.end"] == 33792
    assert after["kmsg.swiotlb_full"] == 1  # the line printed before the execution is not its
    session.close()
