"""The known traps of one machine (docs/trust.md, "Lint"): a debug TEE, bounce buffers too small for
an I/O-heavy plan. Pure functions over a probe document (read through ccbench.probe.facts) and
whether the plan moves data through devices; each returns Findings, never raises on odd input and
never changes anything. Shown by ``ccbench env --lint`` and the before-run system check, and for
each bundle of a comparison by the comparison lint (ccbench.analysis.judgement.lint), which also owns the
findings' list format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ccbench.probe.facts import machine_facts, provenance, tee_technology

HIGH, MEDIUM, INFO = "high", "medium", "info"

#: TEE technologies whose guests bounce every device DMA through swiotlb (SGX enclaves do no DMA)
BOUNCING_TEES = {"sev", "sev-es", "sev-snp", "tdx"}

#: the kernel's own bounce-buffer size for an encrypted guest (arch/x86/mm/mem_encrypt.c,
#: mem_encrypt_setup_arch): 6% of memory, at least the 64 MiB default, at most 1 GiB
SWIOTLB_SHARE, SWIOTLB_MIN, SWIOTLB_MAX = 0.06, 64 * 2**20, 2**30

#: a protection whose implied cipher speed (see slow_cipher) is below this share of the cipher's
#: speed measured in the same run does far more than encrypt; measured here, the secure channel
#: reaches 0.89 of the AEAD ceiling and rustls TLS 0.50, so 0.2 leaves room for a busy machine
CIPHER_SHARE_FLOOR = 0.2

SOURCES = {
    "confounded": "seed 000's published raw results: pyperformance raytrace 673 ms on Ice Lake (no TDX) vs 495 ms on "
    "the TDX machines' Sapphire Rapids, read as a TDX effect; a kernel alone moves TDX guests: Linux 6.15's halt "
    "change (https://worldofsoftware.org/intel-tdx-is-becoming-potentially-faster-avoiding-slow-buggy-code-path-on-linux)",
    "debug-tee": "AMD SEV-SNP ABI specification (56860), guest policy bit 19 DEBUG; Intel TDX module "
    "specification, TD ATTRIBUTES bit 0 DEBUG",
    "small-swiotlb": "https://github.com/firecracker-microvm/firecracker/pull/5156 (swiotlb: up to 80% throughput "
    "loss); Linux arch/x86/mm/mem_encrypt.c mem_encrypt_setup_arch (6% of memory, 64 MiB to 1 GiB)",
    "small-pages": "https://github.com/AMDESE/AMDSEV/issues/225 (a memory slowdown traced to 4K vs 2M guest pages)",
    "slow-cipher": "docs/trust.md (Lint); the AEAD ceiling is measured by ccchannel-bench in the same run",
    "unchecked": "docs/trust.md (Lint)",
    "clock-source": "Linux kernel/time/clocksource.c (current_clocksource); the SEV-SNP Secure TSC series (x86/sev: "
    "Mark Secure TSC as reliable clocksource): a confidential guest may read time from another clock than a plain VM",
    "tool-versions": "docs/trust.md (Lint); the tool versions an imported source states (pyperf's python_version, "
    "the version fio reports)",
    "full-bounce-pool": "Linux kernel/dma/swiotlb.c (swiotlb_tbl_map_single: 'swiotlb buffer is full', debugfs "
    "io_tlb_used_hiwater, io_tlb_nslabs; CONFIG_SWIOTLB_DYNAMIC's transient pools); arch/x86/mm/mem_encrypt.c "
    "(6% of memory up to 1 GiB)",
    "failed-executions": "docs/trust.md (Lint); the execution records (executions.jsonl status, error) and the "
    "manifest's outcomes; hyperfine's exit_codes (a run under -i that exited non-zero)",
    "unpaired": "docs/trust.md (Lint); docs/microservices.md (open-loop rates calibrated per run)",
    "few-tail-operations": "docs/analysis.md (Operations per execution); the operations YCSB reports per "
    "operation ([READ], Operations) and fio per direction (total_ios), recorded on the latency samples",
    "misnamed-storage-path": "docs/storage.md (--storage-path); ccbench.probe.storage.describe_path (the "
    "directory's mount in /proc/self/mountinfo, its dm-crypt chain in /sys/block, fscrypt's encrypt flag)",
    "implausible": "docs/analysis.md (Implausible rows); Linux fs/ext4/inode.c ext4_dio_alignment and "
    "fs/crypto/inline_crypt.c fscrypt_dio_supported (O_DIRECT on an encrypted file without inline encryption is "
    "served buffered); gocryptfs mangleOpenFlags (O_DIRECT cleared on backing files)",
}


@dataclass
class Finding:
    #: "confounded", "debug-tee", "small-swiotlb", "small-pages", "slow-cipher", "unchecked", "implausible",
    #: "unpaired", "clock-source", "tool-versions", "full-bounce-pool", "failed-executions",
    #: "few-tail-operations", "misnamed-storage-path" (ccbench.analysis.judgement.lint_run)
    code: str
    #: "high" (the number is not what it claims), "medium" (likely skews it), "info" (could not check)
    severity: str
    #: one sentence: what is wrong
    what: str
    #: the values seen, per machine
    evidence: dict[str, Any] = field(default_factory=dict)
    #: what to do about it
    advice: str = ""
    #: where the trap is documented (an issue URL or a vendor document)
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        return f"[{self.severity}] {self.code}: {self.what}"


def make_finding(code: str, severity: str, what: str, evidence: dict[str, Any], advice: str) -> Finding:
    return Finding(code, severity, what, evidence, advice, SOURCES[code])


def gib(value: Any) -> str:
    return f"{value / 2**30:.1f} GiB" if isinstance(value, int | float) else str(value)


def mib(value: Any) -> str:
    return f"{value / 2**20:.0f} MiB" if isinstance(value, int | float) else str(value)


# ---- one machine: env --lint, the before-run check, each bundle of a comparison -----------------


def lint_machine(
    probe: Mapping[str, Any] | None, device_io: bool | None = None, name: str = "this machine"
) -> list[Finding]:
    """The findings on one machine: a debug TEE, and with ``device_io`` (the plan moves data through
    devices: fio, YCSB, compression, notebooks reading data) small bounce buffers. ``device_io``
    None: the plan is not known, the bounce-buffer check is not made."""
    findings = debug_tee(probe, name)
    if device_io:
        findings += small_swiotlb(probe, name)
    return findings


def debug_tee(probe: Mapping[str, Any] | None, name: str = "this machine") -> list[Finding]:
    technology = tee_technology(probe)
    if technology not in BOUNCING_TEES:
        return []
    evidence = (provenance(probe) or {}).get("tee_evidence")
    if not isinstance(evidence, dict):
        return [
            make_finding(
                "unchecked",
                INFO,
                f"{name}: whether the {technology} guest runs in debug mode could not be checked ("
                + _why_missing(probe, "no TEE evidence was read: no configfs-tsm or sev-guest device")
                + ")",
                {name: {"tee": technology, "tee_evidence": None}},
                "run on a guest exposing its report (configfs-tsm) so the policy or attributes are recorded",
            )
        ]
    kind = evidence.get("technology")
    if kind == "sev-snp":
        flags, field_name = evidence.get("policy") or {}, "SNP guest policy DEBUG"
    elif kind == "tdx":
        flags, field_name = evidence.get("td_attributes") or {}, "TD ATTRIBUTES.DEBUG"
    else:
        return []
    if flags.get("debug") is not True:
        return []
    return [
        make_finding(
            "debug-tee",
            HIGH,
            f"{name} is a debug {kind} guest ({field_name} set): the hypervisor can read and change its memory, "
            "and its performance is not that of a production guest: not representative",
            {name: {"technology": kind, field_name: True, "raw": flags.get("raw")}},
            "launch the guest without the debug policy/attribute and measure again",
        )
    ]


def _why_missing(probe: Mapping[str, Any] | None, otherwise: str) -> str:
    if (probe or {}).get("imported"):
        # an imported bundle holds what its source states, nothing more: not a bundle of an old ccbench
        return "the imported source does not state it"
    if provenance(probe) is None:
        return "no provenance in this probe: recorded by an older ccbench"
    return otherwise


def swiotlb_expected(memory_bytes: Any) -> int:
    """The bounce-buffer size the kernel itself picks for an encrypted guest of this memory."""
    if not isinstance(memory_bytes, int | float) or memory_bytes <= 0:
        return SWIOTLB_MIN
    return int(min(max(memory_bytes * SWIOTLB_SHARE, SWIOTLB_MIN), SWIOTLB_MAX))


def small_swiotlb(probe: Mapping[str, Any] | None, name: str = "this machine") -> list[Finding]:
    technology = tee_technology(probe)
    if technology not in BOUNCING_TEES:
        return []
    swiotlb = (provenance(probe) or {}).get("swiotlb") or {}
    size = swiotlb.get("bytes") if isinstance(swiotlb, dict) else None
    memory = machine_facts(probe)["memory"]
    if not isinstance(size, int | float):
        return [
            make_finding(
                "unchecked",
                INFO,
                f"{name}: the bounce-buffer (swiotlb) size of this {technology} guest could not be checked ("
                + _why_missing(probe, "neither the kernel log nor the command line gave it")
                + ")",
                {name: {"tee": technology, "swiotlb": swiotlb or None}},
                "keep the boot messages (dmesg) so the 'software IO TLB: mapped' line is recorded",
            )
        ]
    expected = swiotlb_expected(memory)
    if size >= expected:
        return []
    return [
        make_finding(
            "small-swiotlb",
            MEDIUM,
            f"{name}: bounce buffers of {mib(size)} in a {technology} guest under an I/O-heavy plan: every device "
            f"DMA is bounced through them, and below the kernel's own size for this guest ({mib(expected)}) they "
            "fill and stall I/O",
            {
                name: {
                    "tee": technology,
                    "swiotlb_bytes": size,
                    "source": swiotlb.get("source"),
                    "cmdline": swiotlb.get("cmdline"),
                    "memory_bytes": memory,
                    "kernel_default_bytes": expected,
                }
            },
            f"boot the guest with swiotlb={expected // 2048} (2 KiB slabs) or larger, or drop a smaller swiotlb= "
            "from the kernel command line",
        )
    ]


def format_findings(findings: list[Finding]) -> str:
    """Lines for the console: the finding, then its advice and source."""
    if not findings:
        return "no findings"
    lines = []
    for finding in findings:
        lines.append(finding.line())
        if finding.advice:
            lines.append(f"       -> {finding.advice}")
        lines.append(f"       source: {finding.source}")
    return "\n".join(lines)
