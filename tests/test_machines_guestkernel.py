"""What the image's kernel must have for each arm, read from its build configuration."""

import textwrap
from dataclasses import replace

from ccbench.machines.guestkernel import guest_kernel_lacks, kernel_options
from ccbench.machines.studyfile import load_study

# the lines that matter of Debian 12's linux-image-cloud-amd64 6.1 configuration, as that file writes them
DEBIAN_12_CLOUD = """\
CONFIG_ARCH_CPUIDLE_HALTPOLL=y
# CONFIG_INTEL_TDX_GUEST is not set
CONFIG_AMD_MEM_ENCRYPT=y
# CONFIG_CPU_IDLE_GOV_HALTPOLL is not set
CONFIG_HALTPOLL_CPUIDLE=y
CONFIG_SWIOTLB=y
CONFIG_LOCALVERSION=""
"""
LATER = DEBIAN_12_CLOUD.replace("# CONFIG_INTEL_TDX_GUEST is not set", "CONFIG_INTEL_TDX_GUEST=y") + (
    "CONFIG_UNACCEPTED_MEMORY=y\n"
)

STUDY = """
name = "kernels"
plan = "quick"
[[arm]]
name = "plain"
kind = "plain"
[[arm]]
name = "plain+bounce"
kind = "plain"
twins = ["bounce"]
[[arm]]
name = "snp"
kind = "sev-snp"
[[arm]]
name = "snp+eager"
kind = "sev-snp"
twins = ["eager-accept"]
"""
TDX_ARM = '[[arm]]\nname = "td"\nkind = "tdx"\ntwins = ["haltpoll"]\n'


def test_the_configuration_is_read_as_the_kernel_writes_it():
    options = kernel_options(DEBIAN_12_CLOUD)
    assert options["AMD_MEM_ENCRYPT"] == "y" and options["LOCALVERSION"] == '""'
    assert "INTEL_TDX_GUEST" not in options and "CPU_IDLE_GOV_HALTPOLL" not in options


def test_a_kernel_without_tdx_or_lazy_acceptance_refuses_those_arms_in_one_line_each(tmp_path):
    # the SEV-SNP arms and a TDX arm (two studies: one host is AMD or Intel), checked side by side
    (tmp_path / "amd.toml").write_text(textwrap.dedent(STUDY))
    (tmp_path / "intel.toml").write_text(textwrap.dedent(STUDY).split("[[arm]]")[0] + TDX_ARM)
    study = load_study(tmp_path / "amd.toml")
    study = replace(study, arms=study.arms + load_study(tmp_path / "intel.toml").arms)
    lines = guest_kernel_lacks(study, DEBIAN_12_CLOUD, "6.1.0-50-cloud-amd64")
    assert len(lines) == 2, lines
    eager, td = lines
    assert eager.startswith("arm 'snp+eager' (sev-snp) cannot run on the image's kernel 6.1.0-50-cloud-amd64:")
    assert "CONFIG_UNACCEPTED_MEMORY" in eager and "would equal its CVM arm" in eager
    assert td.startswith("arm 'td' (tdx)") and "CONFIG_INTEL_TDX_GUEST (TDX guest support)" in td
    assert guest_kernel_lacks(study, LATER) == []
    without_haltpoll = LATER.replace("CONFIG_HALTPOLL_CPUIDLE=y", "CONFIG_HALTPOLL_CPUIDLE=m")
    assert guest_kernel_lacks(study, without_haltpoll) == []  # a module: the image loads it
    lines = guest_kernel_lacks(study, LATER.replace("CONFIG_HALTPOLL_CPUIDLE=y\n", ""))
    assert lines == [
        "arm 'td' (tdx) cannot run on the image's kernel: the haltpoll twin needs CONFIG_HALTPOLL_CPUIDLE: "
        "without it there is no halt-polling cpuidle driver; use an image whose kernel has it, or drop the arm"
    ]
