"""Facts an import states that its source lacks (``--tee``, ``--storage-protection``,
``--kernel-cmdline``): recorded where the lint and the analysis read the measured ones, each marked as
stated by the user, never as measured.

- ``--tee T`` sets ``environment.tee`` to ``{"technology": T, "stated": true, "evidence": []}``: the
  analysis's configuration (``probe.facts.machine_of``) and the lint's TEE checks read ``tee.technology``.
  ``--tee LABEL=T`` states it for the bundle of that label only (repeatable: one per machine of a
  seed-000 directory); a bare ``--tee T`` holds for every bundle no ``LABEL=`` names.
- ``--storage-protection P`` (or ``LABEL=P``, the same way) states the storage-protection layer the
  source ran on (``STORAGE_CHOICES``): ``environment.storage.protection`` and every sample's and
  execution's ``variant`` (``storage``, ``storage_mechanism``), which is where the analysis reads the
  storage layer of a configuration. A source may name it itself (seed 000's ``-Encrypted`` label
  suffix); a statement wins over the source, and the manifest says which it was.
- ``--kernel-cmdline S`` sets ``environment.provenance.kernel_cmdline`` to S (with its ``swiotlb=``
  parameter in ``provenance.swiotlb.cmdline``) and ``provenance.stated`` lists the stated keys; the
  provenance's other keys stay null (unknown). It holds for every bundle of the import.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from typing import Any

from ccbench.attestation.provenance import empty_provenance
from ccbench.results.importers.base import Imported, ImportProblem, Statements

#: what --tee may state (ccbench.probe.tee's technologies, "unknown" being the default)
TEE_CHOICES = ("none", "sev", "sev-es", "sev-snp", "tdx", "sgx")


#: what --storage-protection may state: {name: the variant the analysis reads (ccbench.variants' keys)}
STORAGE_CHOICES: dict[str, dict[str, str]] = {
    "none": {"storage": "disk", "storage_mechanism": "none"},
    "dm-crypt": {"storage": "encrypted", "storage_mechanism": "dm-crypt"},
    "fscrypt": {"storage": "encrypted", "storage_mechanism": "fscrypt"},
    "gocryptfs": {"storage": "encrypted", "storage_mechanism": "gocryptfs"},
    "tmpfs": {"storage": "tmpfs", "storage_mechanism": "tmpfs"},
    # Azure confidential VMs' confidential OS disk encryption (keys bound to the VM's vTPM)
    "azure-confidential-disk": {"storage": "encrypted", "storage_mechanism": "azure-confidential-disk"},
}


def _per_label(option: str, items: Iterable[str], check) -> tuple[Any, dict[str, Any]]:
    """(the value for every bundle or None, {label: value}) of a repeatable ``[LABEL=]VALUE`` option."""
    common, by_label = None, {}
    for item in items:
        label, sep, value = item.rpartition("=")
        if sep and not label.strip():
            raise ImportProblem(f"{option} {item!r}: give LABEL=VALUE, or VALUE alone for every bundle")
        value = check(value.strip())
        if not sep:
            if common is not None and common != value:
                raise ImportProblem(
                    f"{option}: {common!r} and {value!r} both given for every bundle: "
                    f"give one, and LABEL={value} for the bundles that differ"
                )
            common = value
        else:
            if by_label.get(label, value) != value:
                raise ImportProblem(f"{option}: {label!r} is given {by_label[label]!r} and {value!r}: give one")
            by_label[label] = value
    return common, by_label


def _tee(value: str) -> str:
    if value not in TEE_CHOICES:
        raise ImportProblem(f"--tee {value!r}: not a TEE ccbench knows; give one of {', '.join(TEE_CHOICES)}")
    return value


def _storage(value: str) -> str:
    if value not in STORAGE_CHOICES:
        raise ImportProblem(
            f"--storage-protection {value!r}: not a storage protection ccbench knows; "
            f"give one of {', '.join(STORAGE_CHOICES)}"
        )
    return value


def statements(
    tee: Iterable[str] = (), storage_protection: Iterable[str] = (), kernel_cmdline: str | None = None
) -> Statements:
    """The repeatable ``--tee [LABEL=]T`` and ``--storage-protection [LABEL=]P`` and ``--kernel-cmdline``,
    checked (a one-line error for a value that cannot be one)."""
    stated = Statements(common=stated_facts(None, kernel_cmdline))
    for key, option, items, check in (
        ("tee", "--tee", tee, _tee),
        ("storage_protection", "--storage-protection", storage_protection, _storage),
    ):
        common, by_label = _per_label(option, items, check)
        if common is not None:
            stated.common[key] = common
        for label, value in by_label.items():
            stated.by_label.setdefault(label, {})[key] = value
    return stated


def check_vendor(imported: Imported, statements: Statements) -> None:
    """A one-line error where a stated TEE cannot run on the CPU the source states: TDX and SGX need an
    Intel CPU, SEV in every form an AMD one (ccbench.probe.facts.TEE_VENDOR). A source that names no CPU
    (or one whose vendor its model does not say) is not checked."""
    from ccbench.probe.facts import TEE_VENDOR, cpu_vendor

    tee = statements.for_label(imported.label).get("tee")
    needs = TEE_VENDOR.get(str(tee))
    model = imported.facts.get("cpu_model")
    vendor, said_by = cpu_vendor(str(model) if model else None)
    if not needs or said_by != "CPU model" or vendor == needs:
        return
    named = "tee" in statements.by_label.get(imported.label, {})
    option = f"--tee {imported.label}={tee}" if named else f"--tee {tee}"
    where = imported.stated_by("cpu_model") or imported.label
    fits = [name for name, of in TEE_VENDOR.items() if of == vendor and name in TEE_CHOICES]
    raise ImportProblem(
        f"{option}: {tee} runs only on {needs} CPUs, but {where} states the CPU {model!r} ({vendor}); "
        f"state this machine's TEE as {' or '.join([*fits, 'none'])}, or give the files of the machine that ran {tee}"
    )


def stated_facts(tee: str | None = None, kernel_cmdline: str | None = None) -> dict[str, Any]:
    """The facts given on the command line, checked (one-line error for a value that cannot be one)."""
    stated: dict[str, Any] = {}
    if tee is not None:
        stated["tee"] = _tee(tee)
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
    if "storage_protection" in stated:
        environment["storage"] = {
            "protection": stated["storage_protection"],
            "stated": True,
            "note": "stated by the user at import (--storage-protection), not measured",
        }
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
