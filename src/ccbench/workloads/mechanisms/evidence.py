"""The evidence-latency case: the time to obtain a fresh attestation report (SEV-SNP) or quote (TDX)
from inside the guest, through configfs-tsm (ccbench.attestation.evidence.TsmProvider: a report
entry made, 64 fresh random bytes written to ``inblob``, ``outblob`` and ``auxblob`` read, the entry
removed), timed per report. A TDX quote goes from the guest to the host's quoting enclave and back;
a stock kernel polls for it once a second, which is what a figure near 1 s shows (docs/mechanisms.md).

Where the guest cannot obtain evidence the figure is named as missing with what was looked for:
the configfs-tsm directory, and the guest drivers' device nodes (/dev/sev-guest, /dev/tdx-guest),
which ccbench does not drive by ioctl (configfs-tsm is the kernel's interface for both since 6.7)."""

from __future__ import annotations

import secrets
import statistics
import time
from pathlib import Path
from typing import Any

from ccbench.attestation.evidence import AttestationError, TsmProvider
from ccbench.model import Measurement

Missing = dict[str, str]
DEVICE_NODES = ("/dev/sev-guest", "/dev/tdx-guest")
FIGURE = "evidence latency"


def _nodes(root: Path) -> list[str]:
    return [node for node in DEVICE_NODES if (root / node.lstrip("/")).exists()]


def evidence_latency(
    provider: TsmProvider, reports: int, tee: dict[str, Any] | None = None, root: Path = Path("/")
) -> tuple[list[Measurement], list[Missing]]:
    """``reports`` fresh reports through ``provider``, each timed from the entry's creation to its
    removal; ``root`` is where the device nodes are looked for (a test's tree)."""
    reason = provider.available(tee)
    if reason:
        nodes = _nodes(root)
        looked = f"looked for {provider.root}, {', '.join(DEVICE_NODES)}: "
        looked += (
            f"{', '.join(nodes)} present, but ccbench obtains evidence through configfs-tsm only"
            if nodes
            else "none exists"
        )
        return [], [{"figure": FIGURE, "why": f"{reason} ({looked})"}]
    times_ms: list[float] = []
    evidence = None
    for _ in range(reports):
        start = time.perf_counter()
        try:
            evidence = provider.attest(secrets.token_bytes(64))
        except AttestationError as exc:
            return [], [{"figure": FIGURE, "why": f"{exc} (after {len(times_ms)} reports)"}]
        times_ms.append((time.perf_counter() - start) * 1e3)
    assert evidence is not None
    case = {"mechanism": "evidence", "interface": "configfs-tsm", "provider": evidence.provider}
    metadata = {
        "times_ms": times_ms,
        "first_ms": times_ms[0],
        "technology": evidence.technology,
        "evidence_bytes": len(evidence.raw),
        "aux_bytes": len(evidence.aux or b""),
        "per": "fresh report: entry made, 64 random bytes written to inblob, outblob and auxblob read, entry removed",
        "mock": evidence.mock,
    }
    value = statistics.median(times_ms)
    return [Measurement(metric="evidence_ms", unit="ms", value=value, case=case, metadata=metadata)], []
