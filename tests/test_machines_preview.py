"""`ccbench machines check --print-commands`: each arm's QEMU command line without booting (issue 54,
item 10), and the KVM-or-TCG answer the help promises, also when an arm cannot be launched here."""

from __future__ import annotations

import shlex
import shutil

import pytest
from conftest import run_ccbench

from ccbench.machines.hostcheck import kvm_problem

STUDY = """name = "preview"
plan = "quick"
[machine]
vcpus = 2
memory = "1G"
[[arm]]
name = "plain"
kind = "plain"
[[arm]]
name = "bounce"
kind = "plain"
twins = ["bounce"]
[[arm]]
name = "snp"
kind = "sev-snp"
"""


def _options(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, value in enumerate(argv) if value == flag]


@pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="no QEMU: bash scripts/setup.sh --with machines")
def test_check_prints_each_arms_qemu_command_line_and_kvm_or_tcg(tmp_path):
    (tmp_path / "study.toml").write_text(STUDY)
    done = run_ccbench("machines", "check", "study.toml", "--print-commands", cwd=tmp_path)
    assert done.returncode in (0, 2) and done.stdout, done.stderr
    problem = kvm_problem()
    how = f"under TCG, software emulation: {problem}" if problem else "under KVM"
    assert how in done.stdout.splitlines()[-1], done.stdout
    lines = done.stdout.splitlines()
    commands = {}
    for index, line in enumerate(lines):
        if line.startswith("# "):
            commands[line[2:].split(" ", 1)[0]] = (line, shlex.split(lines[index + 1]))
    assert set(commands) == {"plain", "bounce", "snp"}, done.stdout
    for name, (_title, argv) in commands.items():
        assert argv[0] == "qemu-system-x86_64" and "-kernel" in argv
        assert f"<run>/arms/{name}/overlay.qcow2" in " ".join(_options(argv, "-drive"))
    plain, bounce, snp = (commands[name][1] for name in ("plain", "bounce", "snp"))
    assert _options(plain, "-accel") == ["tcg" if problem else "kvm"]
    # the twin differs from the plain arm by its knob only: swiotlb=N,force on its kernel command line
    assert ",force" in _options(bounce, "-append")[0] and "swiotlb" not in _options(plain, "-append")[0]
    # a SEV-SNP arm is shown as a SEV-SNP host would launch it, and the line says why not here
    assert any(o.startswith("sev-snp-guest,") for o in _options(snp, "-object"))
    assert _options(snp, "-accel") == ["kvm"]
    if done.returncode == 2:
        assert "not launched here:" in commands["snp"][0] and "cannot launch every arm" in lines[-1]
