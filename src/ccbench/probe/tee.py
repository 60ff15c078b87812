"""Which confidential-computing technology protects this machine's memory, and the evidence.

The decision follows the signals a guest can see: CPU flags the kernel sets for an active guest
feature, guest device nodes, the configfs-tsm report provider, the ACPI CCEL table, kernel log lines,
and on a live machine CPUID and the SEV status MSR (the way ``systemd-detect-virt --cvm`` decides,
including Hyper-V isolation leaves used by Azure confidential VMs).

A host whose CPU merely *supports* SEV or TDX is not a confidential guest: CPU flags without the
``hypervisor`` flag are recorded as host capability, not as protection. Kernel-log lines only a TDX or
SEV host prints, and a Hyper-V guest's privilege flags without the isolation bit, are positive
evidence of "none" (ccbench.probe.tee_roles), even in a log fragment.
"""

from __future__ import annotations

import re
from typing import Any

from ccbench.probe.sources import CpuidReader, RecordedCpuid, Sources, UserCpuid, read_msr
from ccbench.probe.tee_roles import ROLE, contradicts_role, role_signals

TECHNOLOGIES = ("none", "sev", "sev-es", "sev-snp", "tdx", "sgx", "unknown")
#: order of strength within the AMD family: SNP implies ES implies SEV
_AMD_RANK = {"sev": 1, "sev-es": 2, "sev-snp": 3}

_KERNEL_LOG_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # sev_show_status() (6.8+) prints SEV_STATUS bit names; an Azure vTOM guest (paravisor) shows only "vTom"
    (re.compile(r"SEV: Status:.*SEV-SNP"), "sev-snp"),
    (re.compile(r"SEV: Status:.*SEV-ES"), "sev-es"),
    (re.compile(r"SEV: Status:.*\bSEV\b"), "sev"),
    (re.compile(r"SEV: Status:.*\bvTom\b"), "sev"),
    (re.compile(r"SEV: Using SNP CPUID table"), "sev-snp"),
    (re.compile(r"SEV: SNP running at VMPL"), "sev-snp"),
    (re.compile(r"Memory Encryption Features active:.*SEV-SNP"), "sev-snp"),
    (re.compile(r"Memory Encryption Features active:.*SEV-ES"), "sev-es"),
    (re.compile(r"Memory Encryption Features active:.*\bSEV\b"), "sev"),
    (re.compile(r"Memory Encryption Features active:.*Intel TDX"), "tdx"),
    # before 5.10 mem_encrypt_init() printed "AMD Secure Encrypted Virtualization (SEV) active" in a guest
    # (and "AMD Secure Memory Encryption (SME) active" on a host: not a guest's protection)
    (re.compile(r"AMD Secure Encrypted Virtualization \(SEV\) active"), "sev"),
    (re.compile(r"\btdx: Guest detected"), "tdx"),
    (re.compile(r"\bSEV: SNP guest platform device"), "sev-snp"),
    # the SGX driver (arch/x86/kernel/cpu/sgx/main.c) prints each EPC section it initialised: enclaves can
    # run here (a guest with virtual EPC shows only these lines, no cpuinfo or device node captured)
    (re.compile(r"\bsgx: EPC section"), "sgx"),
    # systemd's confidential-virtualization detection (src/basic/confidential-virt.c) reads CPUID, the
    # SEV status MSR and the Hyper-V isolation leaf: on an Azure vTOM guest whose kernel says only "AMD
    # SEV" it is the line that says SNP
    (re.compile(r"systemd\[\d+\]: Detected confidential virtualization sev-snp\b"), "sev-snp"),
    (re.compile(r"systemd\[\d+\]: Detected confidential virtualization sev-es\b"), "sev-es"),
    (re.compile(r"systemd\[\d+\]: Detected confidential virtualization sev\b"), "sev"),
    (re.compile(r"systemd\[\d+\]: Detected confidential virtualization tdx\b"), "tdx"),
]

_DEVICE_NODES = {
    "/dev/tdx_guest": "tdx",
    "/dev/tdx-guest": "tdx",
    "/dev/sev-guest": "sev-snp",
    "/dev/sgx_enclave": "sgx",
    "/dev/sgx/enclave": "sgx",
}

_TSM_PROVIDERS = {"sev_guest": "sev-snp", "tdx_guest": "tdx"}

# Hyper-V isolation types (CPUID 0x4000000C EBX[3:0]): what Azure confidential VMs expose
_HYPERV_ISOLATION = {0: "none", 1: "vbs", 2: "sev-snp", 3: "tdx"}
#: the kernel's print of that leaf (arch/x86/kernel/cpu/mshyperv.c): EAX is group A, EBX group B
_HYPERV_ISOLATION_LINE = re.compile(r"Hyper-V: Isolation Config: Group A (0x[0-9a-fA-F]+), Group B (0x[0-9a-fA-F]+)")
#: kernel-log lines that say only "an AMD memory-encrypted guest": under Hyper-V's vTOM (a paravisor),
#: the kernel prints "AMD SEV" for SEV-SNP and VBS isolation alike, so the isolation type decides
_GENERIC_AMD = re.compile(r"Memory Encryption Features active: AMD( SEV)?\s*$|SEV: Status:\s*vTom\s*$")


#: the idle routine a TD runs (arch/x86/kernel/process.c, select_idle_routine: "using TDX aware idle
#: routine"): idle vCPUs leave the TD through a TDCALL, a cost a plain VM's HLT does not have
_TDX_IDLE = re.compile(r"using TDX aware idle routine")


#: tdx_announce() (arch/x86/coco/tdx/debug.c, 6.13+) prints the TD's controls once the kernel set them:
#: "tdx: TD_CTLS: PENDING_VE_DISABLE ENUM_TOPOLOGY VIRT_CPUID2 REDUCE_VE"
_TD_CTLS = re.compile(r"\btdx: TD_CTLS:(.*)$")
#: snp_cpuid_get_table's report: "SEV: Using SNP CPUID table, 29 entries present."
_SNP_CPUID_TABLE = re.compile(r"SEV: Using SNP CPUID table, (\d+) entries present")
#: lines only the start of a boot prints: a log holding one reaches back to boot, so what it lacks is evidence
_BOOT_LINE = re.compile(r"\] Linux version \d|\] Command line: |^Linux version \d")

_TDX_IDLE_WHY = (
    "the kernel selects this idle routine only in a TD (X86_FEATURE_TDX_GUEST), but it is one line of a"
    " log that may be a fragment, and it names no attestation: weak evidence"
)


def tdx_idle_line(sources: Sources) -> str | None:
    """The kernel's TDX idle-routine line as printed (without its time stamp), or None."""
    log, _origin = sources.kernel_log()
    for line in (log or "").splitlines():
        if _TDX_IDLE.search(line):
            return re.sub(r"^\[\s*[\d.]+\]\s*", "", line.strip())
    return None


def hyperv_isolation(group_a: int, group_b: int) -> dict[str, Any]:
    """Decode the Hyper-V isolation configuration (CPUID 0x4000000C EAX/EBX, or the kernel's print of it)."""
    kind = group_b & 0xF
    return {
        "group_a": f"{group_a:#x}",
        "group_b": f"{group_b:#x}",
        "isolation_type": kind,
        "technology": _HYPERV_ISOLATION.get(kind, "unknown"),
        "paravisor_present": bool(group_a & 0x1),
        "shared_gpa_boundary_active": bool(group_b >> 5 & 1),
        "shared_gpa_boundary_bits": group_b >> 6 & 0x3F,
    }


SEV_STATUS_MSR = 0xC0010131


def cpu_flags(sources: Sources) -> set[str] | None:
    text = sources.read_text("/proc/cpuinfo")
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith("flags") and ":" in line:
            return set(line.split(":", 1)[1].split())
    return set()


def _evidence(source: str, signal: str, indicates: str) -> dict[str, str]:
    return {"source": source, "signal": signal, "indicates": indicates}


#: an evidence entry that decides only where nothing stronger speaks carries ``strength: weak``
WEAK = "weak"


def _weak_evidence(source: str, signal: str, indicates: str, why: str) -> dict[str, str]:
    return {**_evidence(source, signal, indicates), "strength": WEAK, "why": why}


def _cpuid_reader(sources: Sources):
    """CPUID of the probed machine: executed here (unprivileged) on a live machine, else the snapshot's
    recorded dump (``cpuid -r -1``), else None with the reason."""
    if sources.live:
        reader = UserCpuid()
        if reader.error:
            device = CpuidReader()  # the cpuid driver (root) where user space cannot execute the code
            return (None, f"{reader.error}; {device.error}") if device.error else (device, None)
        return reader, None
    if sources.cpuid_file is not None:
        reader = RecordedCpuid(sources.cpuid_file)
        return (None, reader.error) if reader.error else (reader, None)
    return None, "a snapshot's CPUID is that of its machine: give it recorded (cpuid -r -1) with --cpuid FILE"


def _text(*registers: int) -> str:
    return b"".join(r.to_bytes(4, "little") for r in registers).decode("ascii", "replace")


def _cpuid_signals(sources: Sources, evidence: list[dict[str, str]], notes: list[str]) -> bool:
    """The CPUID leaves that tell a confidential guest (0x4000000C Hyper-V isolation, 0x21 the TDX
    signature, 0x8000001F the SEV features, then the SEV status MSR where root can read it). Positive
    evidence of "none" only where the leaf a guest of that vendor could not hide says so. Returns
    whether CPUID was read."""
    cpuid, error = _cpuid_reader(sources)
    if cpuid is None:
        notes.append(f"CPUID not consulted: {error}")
        return False
    try:
        leaf1 = cpuid(1)
        if leaf1 is None:
            notes.append("CPUID leaf 1 unreadable")
            return False
        if not (leaf1[2] >> 31) & 1:
            evidence.append(_evidence("cpuid", "leaf 1 ECX[31] clear: no hypervisor (bare metal)", "none"))
            return True
        base = cpuid(0x40000000)
        signature = _text(*base[1:4]).strip("\0 ") if base else ""
        isolated = False
        if signature == "Microsoft Hv" and base and base[0] >= 0x4000000C:
            features = cpuid(0x40000003)
            if features and (features[1] >> 22) & 1:
                isolation = cpuid(0x4000000C)
                if isolation:
                    config = hyperv_isolation(isolation[0], isolation[1])
                    kind = config["technology"]
                    if kind in ("sev-snp", "tdx"):
                        isolated = True
                        evidence.append(
                            _evidence("cpuid", f"Hyper-V isolation type {isolation[1] & 0xF} ({kind})", kind)
                        )
                    else:
                        notes.append(f"Hyper-V isolation type {kind} (not memory encryption)")
        vendor_leaf = cpuid(0)
        vendor = _text(vendor_leaf[1], vendor_leaf[3], vendor_leaf[2]) if vendor_leaf else ""
        if vendor == "GenuineIntel":
            tdx = cpuid(0x21, 0) if vendor_leaf and vendor_leaf[0] >= 0x21 else None
            if tdx and _text(tdx[1], tdx[3], tdx[2]) == "IntelTDX    ":
                evidence.append(_evidence("cpuid", "leaf 0x21 vendor 'IntelTDX'", "tdx"))
            elif not isolated:
                # the TDX module answers leaf 0x21 in every TD: a guest without it is no TD
                evidence.append(_evidence("cpuid", "Intel guest without the leaf 0x21 'IntelTDX' signature", "none"))
        elif vendor == "AuthenticAMD":
            _amd_signals(cpuid, evidence, notes, isolated, sources.live)
        if signature:
            notes.append(f"hypervisor signature {signature!r}")
        return True
    finally:
        cpuid.close()


def _amd_signals(cpuid, evidence: list, notes: list[str], isolated: bool, live: bool) -> None:
    ext = cpuid(0x80000000)
    sev_leaf = cpuid(0x8000001F) if ext and ext[0] >= 0x8000001F else None
    if not sev_leaf or not (sev_leaf[0] >> 1) & 1:
        if not isolated:
            # an SEV guest needs leaf 0x8000001F (the C-bit position): without SEV in it, no SEV guest
            evidence.append(_evidence("cpuid", "AMD guest without SEV in leaf 0x8000001F", "none"))
        return
    # a snapshot's MSR is not recorded (and this machine's says nothing of it)
    value, error = read_msr(SEV_STATUS_MSR) if live else (None, "a snapshot holds no MSR")
    if error:
        notes.append(
            f"CPUID 0x8000001F advertises SEV but whether this guest runs with it is in the SEV status MSR, "
            f"not read: {error}"
        )
        if not isolated:
            evidence.append(_evidence("cpuid", "leaf 0x8000001F advertises SEV; SEV status MSR unreadable", "unknown"))
    elif value is not None:
        if value & 0b100:
            evidence.append(_evidence("msr", f"SEV_STATUS {value:#x}: SNP enabled", "sev-snp"))
        elif value & 0b10:
            evidence.append(_evidence("msr", f"SEV_STATUS {value:#x}: SEV-ES enabled", "sev-es"))
        elif value & 0b1:
            evidence.append(_evidence("msr", f"SEV_STATUS {value:#x}: SEV enabled", "sev"))
        else:
            evidence.append(_evidence("msr", f"SEV_STATUS {value:#x}: no SEV feature enabled", "none"))


def detect(sources: Sources) -> dict[str, Any]:
    """The technology protecting this machine's memory, the signals that say so, what was looked at."""
    evidence: list[dict[str, str]] = []
    notes: list[str] = []
    checked: list[str] = []
    _cpu_flag_signals(sources, evidence, notes, checked)
    _device_signals(sources, evidence, notes, checked)
    _tsm_signals(sources, evidence, notes, checked)
    if sources.exists("/sys/firmware/acpi/tables/CCEL"):
        evidence.append(_evidence("/sys/firmware/acpi/tables/CCEL", "ACPI CC event log table present", "tdx"))
    log_facts: dict[str, Any] = {}
    hyperv = _kernel_log_signals(sources, evidence, notes, checked, log_facts)
    if _cpuid_signals(sources, evidence, notes):
        checked.append("cpuid/msr")
    evidence = _defer_generic_amd_to_hyperv(evidence, notes, hyperv)
    technology = _decide(evidence, checked)
    clash = contradicts_role(evidence, _strong_technologies(evidence))
    if clash:
        notes.append(clash)
    blind = "cpuid/msr" not in checked and not any(c.startswith("kernel log") for c in checked)
    if technology == "unknown" and blind and not any(e["indicates"] not in ("none", "unknown") for e in evidence):
        notes.append(
            "no positive evidence either way: the kernel log is unread or does not reach back to boot, and "
            "CPUID was not consulted; a guest's cpuinfo flags and device nodes cannot rule out a confidential "
            "VM (KVM hides the sev flags, Azure and SEV/SEV-ES guests have no guest device)"
        )
    _note_weak_decision(technology, evidence, notes)
    if technology == "none":
        evidence += _negative_evidence(evidence, notes, checked)
    result = {
        "technology": technology,
        "evidence": [e for e in evidence if e["indicates"] != "none" or technology == "none"],
        "checked": checked,
        "notes": notes,
    }
    if hyperv is not None:
        result["hyperv_isolation"] = hyperv
    result.update(log_facts)
    return result


def _cpu_flag_signals(sources: Sources, evidence: list, notes: list[str], checked: list[str]) -> None:
    """Guest feature flags (only in a guest: a host's flags are capability) and SGX."""
    flags = cpu_flags(sources)
    if flags is None:
        notes.append(f"{sources.path('/proc/cpuinfo')}: unreadable")
        return
    checked.append("cpu flags")
    guest = "hypervisor" in flags
    for flag, tech in (("sev_snp", "sev-snp"), ("sev_es", "sev-es"), ("sev", "sev"), ("tdx_guest", "tdx")):
        if flag in flags:
            if guest or flag == "tdx_guest":
                evidence.append(_evidence("/proc/cpuinfo", f"flag {flag}", tech))
            else:
                notes.append(f"host CPU supports {tech} (flag {flag}, no hypervisor flag): capability, not protection")
    if "sgx" in flags:
        evidence.append(_evidence("/proc/cpuinfo", "flag sgx", "sgx"))
    if not guest and "tdx_guest" not in flags:
        evidence.append(_evidence("/proc/cpuinfo", "no hypervisor flag: bare metal, not a guest", "none"))


def _device_signals(sources: Sources, evidence: list, notes: list[str], checked: list[str]) -> None:
    checked.append("device nodes")
    for node, tech in _DEVICE_NODES.items():
        if sources.exists(node):
            evidence.append(_evidence(node, "device node present", tech))
    for node in ("/dev/tpm0", "/dev/tpmrm0"):
        if sources.exists(node):
            notes.append(f"{node} present (a TPM or vTPM: not memory encryption by itself)")


def _tsm_signals(sources: Sources, evidence: list, notes: list[str], checked: list[str]) -> None:
    """The configfs-tsm report provider: the guest driver that answers attestation requests."""
    tsm = "/sys/kernel/config/tsm/report"
    if not sources.exists(tsm):
        return
    checked.append("configfs-tsm")
    provider = None
    for entry in sorted(sources.path(tsm).glob("*/provider")):
        try:
            provider = entry.read_text().strip()
            break
        except OSError:
            continue
    if provider:
        evidence.append(_evidence(tsm, f"provider {provider}", _TSM_PROVIDERS.get(provider, "unknown")))
    else:
        notes.append(f"{tsm} present (no report entry with a provider to read)")


def _kernel_log_signals(
    sources: Sources, evidence: list, notes: list[str], checked: list[str], facts: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Each distinct kernel-log line that names a technology; returns the Hyper-V isolation config if
    printed. ``facts`` gets the TD's controls (``tdx_td_ctls``) and the SNP CPUID table's entries
    (``snp_cpuid_table_entries``) where the log prints them. Only a log that reaches back to boot
    counts as checked: the silence of a fragment (rolled over, or cut) is no evidence."""
    facts = facts if facts is not None else {}
    log, origin = sources.kernel_log()
    if log is None:
        notes.append(f"kernel log not read: {origin}")
        return None
    if any(_BOOT_LINE.search(line) for line in log.splitlines()):
        checked.append(f"kernel log ({origin})")
    else:
        notes.append(
            f"kernel log ({origin}) does not reach back to boot (no 'Linux version' or 'Command line' line: "
            "rolled over or cut): what it lacks is no evidence"
        )
    facts.update(role_signals(log, evidence, notes))
    for line in log.splitlines():
        ctls = _TD_CTLS.search(line)
        if ctls:
            facts["tdx_td_ctls"] = ctls.group(1).split()
        table = _SNP_CPUID_TABLE.search(line)
        if table:
            facts["snp_cpuid_table_entries"] = int(table.group(1))
    hyperv = None
    seen: set[tuple[str, str]] = set()
    idle = tdx_idle_line(sources)
    if idle is not None:
        evidence.append(_weak_evidence("kernel log", idle, "tdx", _TDX_IDLE_WHY))
    for line in log.splitlines():
        match = _HYPERV_ISOLATION_LINE.search(line)
        if match:
            hyperv = hyperv_isolation(int(match.group(1), 16), int(match.group(2), 16))
            _hyperv_line(match.group(0), hyperv, seen, evidence, notes)
            continue
        for pattern, tech in _KERNEL_LOG_PATTERNS:
            if pattern.search(line):
                text = re.sub(r"^\[\s*[\d.]+\]\s*", "", line.strip())
                if (text, tech) not in seen:
                    seen.add((text, tech))
                    evidence.append(_evidence("kernel log", text, tech))
                break
    return hyperv


def _hyperv_line(text: str, config: dict[str, Any], seen: set, evidence: list, notes: list[str]) -> None:
    if (text, "hyperv") in seen:
        return
    seen.add((text, "hyperv"))
    meaning = f"isolation type {config['isolation_type']} ({config['technology']})"
    if config["technology"] in ("sev-snp", "tdx"):
        evidence.append(_evidence("kernel log", f"{text}: {meaning}", config["technology"]))
    else:
        notes.append(f"{text}: {meaning}, not hardware memory encryption")
        if config["technology"] in ("none", "vbs"):
            evidence.append(_evidence("kernel log", f"{text}: {meaning}", "none"))


def _defer_generic_amd_to_hyperv(evidence: list, notes: list[str], hyperv: dict[str, Any] | None) -> list:
    """Under a Hyper-V isolation type (printed, or read from CPUID), drop the generic "AMD SEV" lines."""
    hyperv_kind = (
        hyperv["technology"]
        if hyperv
        else next(
            (
                e["indicates"]
                for e in evidence
                if e["source"] == "cpuid" and e["signal"].startswith("Hyper-V isolation")
            ),
            None,
        )
    )
    if hyperv_kind is None:
        return evidence
    # the isolation type is the hypervisor's own statement; generic "AMD SEV" lines are what any
    # vTOM guest prints (SEV-SNP and VBS alike), so they neither lower nor contradict it
    generic = [e for e in evidence if e["source"] == "kernel log" and _GENERIC_AMD.search(e["signal"])]
    if generic:
        notes.append(
            "kernel log line(s) "
            + "; ".join(repr(e["signal"]) for e in generic)
            + f" read as the vTOM guest's generic print; the Hyper-V isolation type ({hyperv_kind}) decides"
        )
    return [e for e in evidence if e not in generic]


def _negative_evidence(evidence: list, notes: list[str], checked: list[str]) -> list[dict[str, str]]:
    """ "none" is decided by absences: say which sources were looked at and found nothing."""
    negative = {
        "cpu flags": ("/proc/cpuinfo", "no sev, sev_es, sev_snp, tdx_guest or sgx flag in a guest"),
        "device nodes": ("/dev", "no TEE guest device node (tdx_guest, sev-guest, sgx_enclave)"),
        "configfs-tsm": ("/sys/kernel/config/tsm/report", "no SEV-SNP or TDX report provider"),
    }
    found = []
    for item in checked:
        if item in negative:
            found.append(_evidence(*negative[item], "none"))
        elif item.startswith("kernel log"):
            found.append(_evidence(item, "no memory-encryption, TDX guest or SGX EPC line", "none"))
        elif item == "cpuid/msr" and not any(e["source"] in ("cpuid", "msr") for e in evidence):
            hint = next((n for n in notes if n.startswith("hypervisor signature")), "")
            if not any(n.startswith("CPUID not consulted") for n in notes):
                found.append(
                    _evidence("cpuid", f"no TDX leaf, SEV status or Hyper-V isolation; {hint}".rstrip("; "), "none")
                )
    return found


def _note_weak_decision(technology: str, evidence: list[dict[str, str]], notes: list[str]) -> None:
    """Say so when the technology rests on weak evidence alone."""
    deciding = [e for e in evidence if e["indicates"] == technology]
    if deciding and all(e.get("strength") == WEAK for e in deciding):
        signals = "; ".join(repr(e["signal"]) for e in deciding)
        notes.append(f"{technology} rests on weak evidence alone ({signals}): {deciding[0]['why']}")


def _strong_technologies(evidence: list[dict[str, str]]) -> set[str]:
    return {e["indicates"] for e in evidence if e.get("strength") != WEAK and e["indicates"] not in ("none", "unknown")}


def _decide(evidence: list[dict[str, str]], checked: list[str]) -> str:
    strong = [e for e in evidence if e.get("strength") != WEAK]
    strong_positive = _strong_technologies(evidence)
    if any(ROLE in e for e in evidence):
        # a host, or a Hyper-V guest without isolation, is no confidential guest: a guest-side signal
        # beside it contradicts it (unknown), a weak one does not outweigh it
        return "unknown" if strong_positive else "none"
    # weak evidence decides only where no strong evidence names a technology: it never contradicts one
    if strong_positive:
        evidence = strong
    positive = {e["indicates"] for e in evidence if e["indicates"] not in ("none", "unknown")}
    amd = {t for t in positive if t in _AMD_RANK}
    families = (1 if amd else 0) + (1 if "tdx" in positive else 0)
    if families > 1:
        return "unknown"  # contradictory signals: say so rather than guess
    if amd:
        return max(amd, key=_AMD_RANK.__getitem__)
    if "tdx" in positive:
        return "tdx"
    if "sgx" in positive:
        return "sgx"
    if any(e["indicates"] == "unknown" for e in evidence):
        return "unknown"
    # "none" only on positive evidence (bare metal, CPUID, the SEV status MSR, a Hyper-V isolation type
    # without encryption, a kernel log from boot): absent flags and device nodes prove nothing in a guest
    if any(e["indicates"] == "none" for e in evidence) or any(c.startswith("kernel log") for c in checked):
        return "none"
    return "unknown"
