"""Where TEE evidence comes from: Linux configfs-tsm on a confidential VM, or the mock for tests.

configfs-tsm (/sys/kernel/config/tsm/report, Linux 6.7+): make a report entry, write the 64-byte
report data to `inblob`, read `outblob` (the SEV-SNP report or TDX quote) and `auxblob` (SEV-SNP: the
certificate table with the VCEK, when the host provides it), `provider` says which (`sev_guest`,
`tdx_guest`). Another writer to the same entry between our write and our reads would hand us
evidence for its report data: `generation` is read after writing and again after reading, and a
change is a race, retried.

The mock provider exists only for tests: everything it produces says "mock" and verifies as
"MOCK evidence (tests only; proves nothing)". It is chosen only through the environment variable
CCBENCH_TEST_ATTESTATION_PROVIDER=mock, never by detection.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccbench.basics.errors import CCBenchError

TSM_ROOT = Path("/sys/kernel/config/tsm/report")
TEST_PROVIDER_ENV = "CCBENCH_TEST_ATTESTATION_PROVIDER"
MOCK_MAGIC = b"CCMOCK01"
MOCK_TECHNOLOGY = "mock"
TECHNOLOGY_BY_PROVIDER = {"sev_guest": "sev-snp", "tdx_guest": "tdx"}


class AttestationError(CCBenchError):
    """Evidence could not be produced (no TEE, a racing writer, an unsupported provider)."""


@dataclass
class Evidence:
    technology: str  # "sev-snp", "tdx" or "mock"
    provider: str  # configfs-tsm provider ("sev_guest", "tdx_guest") or "mock"
    raw: bytes  # the report / quote
    aux: bytes | None = None  # SEV-SNP certificate table (auxblob), when the host supplies one
    generation: int | None = None
    mock: bool = False


class TsmProvider:
    """Real evidence through configfs-tsm."""

    name = "configfs-tsm"

    def __init__(self, root: Path = TSM_ROOT, attempts: int = 3):
        self.root = Path(root)
        self.attempts = attempts

    def available(self, tee: dict[str, Any] | None = None) -> str | None:
        """None where evidence can be had, else why not; ``tee``: the probe's TEE section, which tells a
        paravisor CVM (whose evidence is not where configfs-tsm looks) from a machine with no TEE."""
        if not self.root.is_dir():
            return no_tsm_reason(self.root, tee)
        if not os.access(self.root, os.W_OK):
            return f"{self.root} is not writable (configfs-tsm needs root)"
        return None

    def _make_entry(self) -> Path:
        entry = self.root / f"ccbench-{os.getpid()}-{secrets.token_hex(4)}"
        entry.mkdir()
        return entry

    @staticmethod
    def _generation(entry: Path) -> int:
        return int((entry / "generation").read_text().strip())

    def attest(self, report_data: bytes) -> Evidence:
        if len(report_data) != 64:
            raise ValueError("report data must be 64 bytes")
        reason = self.available()
        if reason:
            raise AttestationError(reason)
        try:
            entry = self._make_entry()
        except OSError as exc:
            raise AttestationError(
                f"configfs-tsm: cannot create a report entry under {self.root}: {exc.strerror}"
            ) from None
        try:
            for _attempt in range(self.attempts):
                (entry / "inblob").write_bytes(report_data)
                before = self._generation(entry)
                raw = (entry / "outblob").read_bytes()
                aux_path = entry / "auxblob"
                try:
                    aux = aux_path.read_bytes() if aux_path.exists() else None
                except OSError:
                    aux = None  # the host supplied no certificates; the VCEK can be given as a file
                provider = (entry / "provider").read_text().strip()
                after = self._generation(entry)
                if after != before:
                    time.sleep(0.01)
                    continue  # another writer changed the request between our write and our reads
                technology = TECHNOLOGY_BY_PROVIDER.get(provider)
                if technology is None:
                    raise AttestationError(
                        f"configfs-tsm provider {provider!r} is not supported (sev_guest or tdx_guest)"
                    )
                return Evidence(technology=technology, provider=provider, raw=raw, aux=aux or None, generation=after)
            raise AttestationError(
                f"configfs-tsm: the report entry {entry} kept changing under us "
                f"({self.attempts} attempts): another process is writing to it"
            )
        except OSError as exc:
            raise AttestationError(f"configfs-tsm: {exc.filename}: {exc.strerror}") from None
        finally:
            try:
                entry.rmdir()
            except OSError:
                pass


class MockProvider:
    """FOR TESTS ONLY: evidence in ccchannel's mock layout (magic, technology, measurement, report
    data), unsigned. Verification says it is mock and proves nothing."""

    name = "mock (tests only)"

    def __init__(self, measurement_label: str = "ccbench-test-image"):
        self.measurement = hashlib.sha512(measurement_label.encode()).digest()[:48]

    def available(self) -> str | None:
        return None

    def attest(self, report_data: bytes) -> Evidence:
        if len(report_data) != 64:
            raise ValueError("report data must be 64 bytes")
        tech = b"mock-tests-only"
        raw = MOCK_MAGIC + bytes([len(tech)]) + tech + self.measurement + report_data
        return Evidence(technology=MOCK_TECHNOLOGY, provider="mock", raw=raw, mock=True)


def parse_mock(raw: bytes) -> tuple[bytes, bytes]:
    """(measurement, report data) of mock evidence; ValueError when it is not mock evidence."""
    if len(raw) < 9 or raw[:8] != MOCK_MAGIC:
        raise ValueError("not mock evidence")
    tech_len = raw[8]
    start = 9 + tech_len
    if len(raw) != start + 48 + 64:
        raise ValueError("mock evidence has the wrong length")
    return raw[start : start + 48], raw[start + 48 :]


def no_tsm_reason(root: Path, tee: dict[str, Any] | None) -> str:
    """Why there is no configfs-tsm report interface, by what the probe found: a paravisor CVM (Azure:
    the hardware report sits in the vTPM), a CVM of another kind, or no TEE (or an unknown one)."""
    tee = tee or {}
    technology = tee.get("technology") or "unknown"
    if (tee.get("hyperv_isolation") or {}).get("paravisor_present") and technology in ("sev-snp", "tdx"):
        return (
            f"no configfs-tsm report interface at {root}: this {technology} CVM runs under a paravisor (Hyper-V "
            "isolation, Azure), which keeps the hardware report in the vTPM (the HCL report in a TPM NV index), "
            "not in a guest driver; ccbench does not read the vTPM path"
        )
    if technology in ("sev-snp", "tdx"):
        return (
            f"no configfs-tsm report interface at {root}: this {technology} guest needs Linux 6.7+ with its "
            "guest driver (sev-guest, tdx-guest) loaded and configfs mounted"
        )
    if technology in ("sev", "sev-es"):
        return f"no configfs-tsm report interface at {root}: {technology} guests have no attestation report"
    return (
        f"no configfs-tsm report interface at {root}: not a confidential VM as far as the probe can tell "
        f"(TEE {technology}; an SEV-SNP or TDX guest needs Linux 6.7+ and configfs mounted)"
    )


def detect_provider(tee: dict[str, Any] | None = None) -> tuple[TsmProvider | MockProvider | None, str | None]:
    """(provider, None) where evidence can be had, else (None, why not); ``tee``: the probe's TEE section."""
    if os.environ.get(TEST_PROVIDER_ENV) == "mock":
        return MockProvider(), None
    tsm = TsmProvider()
    reason = tsm.available(tee)
    return (None, reason) if reason else (tsm, None)
