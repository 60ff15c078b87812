"""Transport protection variants: which transport a transport-bound workload measures.

The variant info records what is known before the workload runs (the negotiated TLS suite is
recorded by the workload itself, from the handshake): whether the AEAD will run on the CPU's AES
instructions, and for the secure channel which AEAD it chooses. Both transports use ring, which
uses AES-NI with carry-less multiply (``aes`` and ``pclmulqdq``) when the CPU has them; the secure
channel picks AES-256-GCM on such a CPU and ChaCha20-Poly1305 otherwise (crates/ccchannel, record.rs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ccbench.variants.base import AxisOptions, PreparedVariant, VariantAxis


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def transport_info(value: str, flags: set[str]) -> dict[str, Any]:
    """The variant info for ``value`` on a CPU with these /proc/cpuinfo flags."""
    info: dict[str, Any] = {"transport": value}
    if value == "plain" or not flags:
        return info
    accelerated = {"aes", "pclmulqdq"} <= flags
    info["transport_aes_accelerated"] = accelerated
    if value == "securechannel":
        info["transport_cipher"] = "AES-256-GCM" if accelerated else "ChaCha20-Poly1305"
    return info


class TransportAxis(VariantAxis):
    axis = "transport"
    default_value = "plain"
    VALUES = ("plain", "tls", "securechannel")

    def validate(self, value: str) -> None:
        if value not in self.VALUES:
            raise ValueError(f"unknown transport variant {value!r}; expected one of: {', '.join(self.VALUES)}")

    def setup(self, value: str, workdir: Path, options: AxisOptions) -> PreparedVariant:
        return PreparedVariant(axis=self.axis, value=value, info=transport_info(value, cpu_flags()))
