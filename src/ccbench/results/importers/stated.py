"""Facts an import states that its source lacks (``--tee``, ``--kernel-cmdline``): recorded where the
lint and the analysis read the measured ones, each marked as stated by the user, never as measured.

- ``--tee T`` sets ``environment.tee`` to ``{"technology": T, "stated": true, "evidence": []}``: the
  analysis's configuration (``probe.facts.machine_of``) and the lint's TEE checks read ``tee.technology``.
- ``--kernel-cmdline S`` sets ``environment.provenance.kernel_cmdline`` to S (with its ``swiotlb=``
  parameter in ``provenance.swiotlb.cmdline``) and ``provenance.stated`` lists the stated keys; the
  provenance's other keys stay null (unknown).
"""

from __future__ import annotations

import shlex
from typing import Any

from ccbench.attestation.provenance import empty_provenance
from ccbench.results.importers.base import ImportProblem

#: what --tee may state (ccbench.probe.tee's technologies, "unknown" being the default)
TEE_CHOICES = ("none", "sev", "sev-es", "sev-snp", "tdx", "sgx")


def stated_facts(tee: str | None = None, kernel_cmdline: str | None = None) -> dict[str, Any]:
    """The facts given on the command line, checked (one-line error for a value that cannot be one)."""
    stated: dict[str, Any] = {}
    if tee is not None:
        if tee not in TEE_CHOICES:
            raise ImportProblem(f"--tee {tee!r}: not a TEE ccbench knows; give one of {', '.join(TEE_CHOICES)}")
        stated["tee"] = tee
    if kernel_cmdline is not None:
        if not kernel_cmdline.strip() or "\n" in kernel_cmdline or "\0" in kernel_cmdline:
            raise ImportProblem("--kernel-cmdline: give the kernel command line as one line of text")
        stated["kernel_cmdline"] = kernel_cmdline.strip()
    return stated


def _swiotlb(cmdline: str) -> str | None:
    try:
        words = shlex.split(cmdline)
    except ValueError:
        words = cmdline.split()
    values = [w.split("=", 1)[1] for w in words if w.startswith("swiotlb=")]
    return values[-1] if values else None


def apply_stated(environment: dict[str, Any], stated: dict[str, Any]) -> dict[str, Any]:
    """The environment with the stated facts in the places measured ones take, marked as stated."""
    if "tee" in stated:
        environment["tee"] = {
            "technology": stated["tee"],
            "evidence": [],
            "stated": True,
            "note": "stated by the user at import (--tee), not measured: no TEE evidence",
        }
        environment["unknown"] = [
            line if not line.startswith("tee:") else f"tee: stated as {stated['tee']} by the user, no TEE evidence"
            for line in environment["unknown"]
        ]
    if "kernel_cmdline" in stated:
        cmdline = stated["kernel_cmdline"]
        provenance = empty_provenance()
        provenance["kernel_cmdline"] = cmdline
        provenance["swiotlb"]["cmdline"] = _swiotlb(cmdline)
        provenance["stated"] = ["kernel_cmdline"]
        environment["provenance"] = provenance
    if stated:
        environment["stated"] = {key: {"value": value, "by": "the user at import"} for key, value in stated.items()}
    return environment
