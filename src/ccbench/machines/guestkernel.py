"""What the image's kernel must have for each arm, from its build configuration (``/boot/config-*``),
said before anything boots: a TDX arm cannot boot a kernel without TDX guest support, and an
eager-accept twin of a kernel without lazy acceptance equals its CVM arm."""

from __future__ import annotations

import re

from ccbench.machines.study import Arm, Study

#: the options each kind needs, with what they give
KIND_OPTIONS = {
    "sev-snp": (("AMD_MEM_ENCRYPT", "SEV and SEV-SNP guest support"),),
    "tdx": (("INTEL_TDX_GUEST", "TDX guest support"),),
}
#: the options each twin needs, with what is lost without them
TWIN_OPTIONS = {
    "bounce": (("SWIOTLB", "there is no bounce-buffer pool to force"),),
    "haltpoll": (("HALTPOLL_CPUIDLE", "there is no halt-polling cpuidle driver"),),
    "eager-accept": (
        (
            "UNACCEPTED_MEMORY",
            "it accepts all memory at boot already (lazy acceptance came with Linux 6.5), "
            "so the twin would equal its CVM arm",
        ),
    ),
}


def kernel_options(config: str) -> dict[str, str]:
    """``CONFIG_X=y`` / ``=m`` / ``="..."`` lines -> {"X": "y"}; "is not set" and absent options are left out."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^CONFIG_([A-Z0-9_]+)=(.*)$", config, re.MULTILINE)}


def _lacks(arm: Arm, options: dict[str, str]) -> list[str]:
    lacks = []
    for option, gives in KIND_OPTIONS.get(arm.kind, ()):
        if options.get(option) != "y":
            lacks.append(f"it is built without CONFIG_{option} ({gives})")
    for twin in arm.twins:
        for option, lost in TWIN_OPTIONS.get(twin, ()):
            if options.get(option) not in ("y", "m"):
                lacks.append(f"the {twin} twin needs CONFIG_{option}: without it {lost}")
    return lacks


def guest_kernel_lacks(study: Study, config: str, release: str = "") -> list[str]:
    """One line per arm the image's kernel cannot serve (its build configuration's text), with every
    reason; [] when it serves them all."""
    options = kernel_options(config)
    kernel = f"the image's kernel{f' {release}' if release else ''}"
    lines = []
    for arm in study.arms:
        lacks = _lacks(arm, options)
        if lacks:
            lines.append(
                f"arm '{arm.name}' ({arm.kind}) cannot run on {kernel}: {'; '.join(lacks)}; "
                "use an image whose kernel has it, or drop the arm"
            )
    return lines
