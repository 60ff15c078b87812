"""Kernel-log lines that say what a machine *is* rather than which TEE protects it: a TDX or SEV host,
or a Hyper-V guest the hypervisor does not isolate. Each is positive evidence of "none" (a host is
not a guest; a Hyper-V guest without isolation is not a confidential VM), read where the log is only
a fragment (``dmesg | grep tdx``) and so cannot speak by its silence.

The formats are the kernel's own:

- arch/x86/virt/vmx/tdx/tdx.c (pr_fmt "virt/tdx: ", host code only; a TD's own code prints "tdx: "):
  ``BIOS enabled: private KeyID range [%u, %u)`` (tdx_init, from the MKTME KeyID partitioning MSR),
  ``TDX module: attributes 0x%x, vendor_id 0x%x, major_version %u, minor_version %u, build_date %u,
  build_num %u`` and ``CMR: [0x%llx, 0x%llx)`` (TDH.SYS.INFO, a SEAMCALL: 6.8 to 6.12; later
  ``TDX module version: 1.5.24``), ``%lu KB allocated for PAMT``, ``module initialized``;
- drivers/crypto/ccp/sev-dev.c (dev_notice/dev_info on the PSP's PCI device): ``ccp 0000:..: sev
  enabled`` (sev_dev_init), ``SEV API:%d.%d build:%d`` / ``SEV-SNP API:...`` (sev_pci_init, the firmware
  the host initialised);
- arch/x86/kvm/svm/sev.c (kvm_amd): ``SEV %s (ASIDs %u - %u)``, ``SEV-ES ...``, ``SEV-SNP ...`` with
  "enabled" (6.5+), ``SEV supported: %u ASIDs`` (before): KVM took ASIDs to run SEV guests;
- arch/x86/virt/svm/sev.c (pr_fmt "SEV-SNP: "): ``RMP table physical range [0x%016llx - 0x%016llx]``;
- arch/x86/kernel/cpu/mshyperv.c: ``Hyper-V: privilege flags low 0x%x, high 0x%x, hints 0x%x, misc
  0x%x``: "high" is CPUID 0x40000003 EBX, whose bit 22 (HV_ISOLATION) an isolated guest (SNP, TDX, VBS)
  has; only then does the kernel print ``Hyper-V: Isolation Config``.
"""

from __future__ import annotations

import re
from typing import Any

#: CPUID 0x40000003 EBX bit 22 (include/hyperv/hvgdk_mini.h, HV_ISOLATION)
HV_ISOLATION = 1 << 22

_TDX_HOST = (
    "the host side of TDX (arch/x86/virt/vmx/tdx/tdx.c runs only where the CPU partitions TDX KeyIDs and the "
    "kernel talks to the TDX module by SEAMCALL): this machine runs TDs, it is not one"
)
_SEV_HOST = (
    "the host side of SEV: the kernel drives the AMD secure processor (PSP) or reserves ASIDs to run SEV "
    "guests, which only a host does; this machine runs SEV guests, it is not one"
)

#: (line, the role it proves, why)
ROLE_LINES: list[tuple[re.Pattern[str], str, str]] = [
    # every line of the host's TDX code carries its pr_fmt (a TD's own lines are "tdx: "): the KeyID
    # range, the module's version and CMRs, PAMT, "module initialized", and its failures too
    (re.compile(r"\bvirt/tdx: \S"), "tdx host", _TDX_HOST),
    (re.compile(r"\bccp \S+: sev enabled\b"), "sev host", _SEV_HOST),
    (re.compile(r"\bccp \S+: SEV(-SNP)? API:\d+\.\d+ build:\d+"), "sev host", _SEV_HOST),
    (re.compile(r"\bkvm_amd: SEV(-ES|-SNP)? enabled \(ASIDs \d+ - \d+\)"), "sev host", _SEV_HOST),
    (re.compile(r"\bkvm_amd: SEV(-ES)? supported: [1-9]\d* ASIDs"), "sev host", _SEV_HOST),
    (re.compile(r"\bSEV-SNP: RMP table physical range \["), "sev host", _SEV_HOST),
]

_TDX_MODULE = re.compile(
    r"virt/tdx: TDX module: .*major_version (\d+), minor_version (\d+), build_date (\d+), build_num (\d+)"
)
#: the version line the metadata-based init prints instead ("virt/tdx: TDX module version: 1.5.24")
_TDX_MODULE_VERSION = re.compile(r"virt/tdx: TDX module version: (\d+\.\d+\.\d+)")
_PRIVILEGE_FLAGS = re.compile(r"Hyper-V: privilege flags low (0x[0-9a-fA-F]+), high (0x[0-9a-fA-F]+)")
_ISOLATION_CONFIG = "Hyper-V: Isolation Config:"

#: the evidence entries this module makes carry ``role``: what the machine is (a host, a guest
#: without isolation), which no guest-side line can also be
ROLE = "role"


def _line(text: str) -> str:
    return re.sub(r"^\[\s*[\d.]+\]\s*", "", text.strip())


def role_signals(log: str, evidence: list[dict[str, str]], notes: list[str]) -> dict[str, Any]:
    """Add one "none" evidence entry per role the log proves (its first line, with the reason);
    return {"roles": [...], "tdx_module": {...}} facts where the log states them."""
    facts: dict[str, Any] = {}
    seen: set[str] = set()
    lines = log.splitlines()
    for text in lines:
        for pattern, role, why in ROLE_LINES:
            if role not in seen and pattern.search(text):
                seen.add(role)
                evidence.append(_role_evidence(_line(text), role, why))
        module = _TDX_MODULE.search(text)
        if module:
            major, minor, date, build = module.groups()
            facts["tdx_module"] = {"version": f"{major}.{minor}", "build_date": date, "build_num": int(build)}
        version = _TDX_MODULE_VERSION.search(text)
        if version:
            facts["tdx_module"] = {"version": version.group(1)}
    hyperv = _hyperv_privileges(lines, notes)
    if hyperv is not None:
        seen.add(hyperv[ROLE])
        evidence.append(hyperv)
    if seen:
        facts["roles"] = sorted(seen)
    return facts


def _role_evidence(signal: str, role: str, why: str) -> dict[str, str]:
    return {"source": "kernel log", "signal": f"{signal}: {why}", "indicates": "none", ROLE: role}


def _hyperv_privileges(lines: list[str], notes: list[str]) -> dict[str, str] | None:
    """The guest's Hyper-V privilege flags: without HV_ISOLATION, a guest the hypervisor does not
    isolate (no Azure confidential VM); with it, the isolation type decides (the Isolation Config
    line), and where that line is missing nothing is said either way."""
    for text in lines:
        match = _PRIVILEGE_FLAGS.search(text)
        if not match:
            continue
        high = int(match.group(2), 16)
        if high & HV_ISOLATION:
            if not any(_ISOLATION_CONFIG in other for other in lines):
                notes.append(
                    f"{_line(text)}: the isolation bit (22 of 'high') is set but the log holds no 'Hyper-V: "
                    "Isolation Config' line: an isolated guest of unknown type"
                )
            return None
        why = (
            f"bit 22 (HV_ISOLATION) of 'high' ({high:#x}) is clear: Hyper-V does not isolate this guest "
            "(an Azure confidential VM has the bit, SEV-SNP or TDX), so it is no confidential VM"
        )
        return _role_evidence(_line(text), "hyper-v guest without isolation", why)
    return None


def contradicts_role(evidence: list[dict[str, str]], technologies: set[str]) -> str | None:
    """A note where the log proves a role no confidential guest can have and strong evidence names a
    technology: the signals contradict each other."""
    roles = sorted({e[ROLE] for e in evidence if ROLE in e})
    if roles and technologies:
        return (
            f"the kernel log says this machine is a {' and a '.join(roles)}, yet other signals name "
            f"{', '.join(sorted(technologies))}: contradictory, so unknown"
        )
    return None
