"""A study's sweep (docs/machines.md, section 12): the [sweep] table read and refused in one line, the
confidential arms' command lines with their firmware and memory-acceptance setting, the launch-time
verdict's cause rule on made launch times, and one real launch-time study under TCG (the plain arm
booted at two memory sizes; the SEV-SNP arm, which this host cannot launch, rendered only)."""

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import run_ccbench

from ccbench.machines import hostcheck, launchtime, qemu
from ccbench.machines.study import StudyError
from ccbench.machines.studyfile import load_study

BASE = """name = "sweep"
plan = "quick"
{top}
[machine]
vcpus = 2
memory = "1G"
{machine}
{sweep}
[[arm]]
name = "plain"
kind = "plain"
baseline = true

[[arm]]
name = "plain+bounce"
kind = "plain"
twins = ["bounce"]

[[arm]]
name = "td"
kind = "tdx"

[[arm]]
name = "td+eager"
kind = "tdx"
twins = ["eager-accept"]

[[arm]]
name = "td+haltpoll"
kind = "tdx"
twins = ["haltpoll"]
"""


def _load(tmp_path: Path, sweep: str, top: str = "", machine: str = ""):
    path = tmp_path / "study.toml"
    path.write_text(BASE.format(top=top, machine=machine, sweep=sweep))
    return load_study(path)


def test_the_sweep_makes_the_study_at_each_memory_size_and_vcpu_count(tmp_path):
    study = _load(tmp_path, '[sweep]\nmemory = ["2G", "512M"]\nvcpus = [4, 2]\nlaunches = 2\n')
    sweep = study.sweep
    assert (sweep.memory_mib, sweep.vcpus, sweep.launches) == ((512, 2048), (2, 4), 2)
    assert [p.machine.memory_mib for p in sweep.memory_points] == [512, 2048]
    assert [(p.machine.vcpus, p.machine.cores) for p in sweep.vcpu_points] == [(2, 2), (4, 4)]
    # the bounce twin's pool follows each point's memory and vCPUs, as a CVM of that size would
    pools = [p.arm("plain+bounce").knobs.kernel_params for p in sweep.memory_points]
    assert pools == [("swiotlb=32768,force",), ("swiotlb=65536,force",)]
    # the haltpoll twin is an arm like any other: present at every vCPU count
    assert all(p.arm("td+haltpoll").knobs.kernel_params == ("cpuidle_haltpoll.force=1",) for p in sweep.vcpu_points)


@pytest.mark.parametrize(
    ("sweep", "top", "machine", "said"),
    [
        ("", "sweep = 3", "", "sweep: must be a table"),
        ('[sweep]\nmemory = ["1G", "2G"]\nsizes = 2', "", "", "sizes: unknown key in [sweep]"),
        ("[sweep]", "", "", "sweep: sweeps nothing"),
        ('[sweep]\nmemory = ["1G"]', "", "", "sweep.memory: ['1G']: a sweep needs a list of two or more"),
        ('[sweep]\nmemory = ["1G", "1024M"]', "", "", "lists a value twice"),
        ('[sweep]\nmemory = ["1G", "64M"]', "", "", "sweep.memory: '64M' is below 128 MiB"),
        ("[sweep]\nvcpus = [2, 4]\nlaunches = 2", "", "", "sweep.launches: counts launches at each memory size"),
        ("[sweep]\nvcpus = [2, 4]", "", "pin = [0, 1]", "sweep.vcpus: machine.pin names one host CPU per vCPU"),
        ("[sweep]\nvcpus = [2, 4]", "", "cores = 2", "sweep.vcpus: machine.cores is fixed"),
        ("[sweep]\nvcpus = [2, 3]", "", "sockets = 2", "sweep.vcpus: at 3 vCPUs: machine.sockets/cores/threads"),
        ("", "rounds = 0", "", "rounds: 0 must be a whole number of at least 1"),
        ("[sweep]\nvcpus = [2, 4]", "rounds = 0", "", "rounds: 0 must be a whole number of at least 1"),
    ],
)
def test_a_bad_sweep_is_refused_in_one_line_naming_the_key(tmp_path, sweep, top, machine, said):
    with pytest.raises(StudyError) as caught:
        _load(tmp_path, sweep, top, machine)
    message = str(caught.value)
    assert said in message and "\n" not in message and message.startswith(str(tmp_path / "study.toml")), message


def test_a_launch_time_study_may_have_no_rounds(tmp_path):
    study = _load(tmp_path, '[sweep]\nmemory = ["512M", "2G"]', top="rounds = 0")
    assert study.rounds == 0 and all(p.rounds == 1 for p in study.sweep.memory_points)


def _boot(tmp_path: Path, firmware: Path | None) -> qemu.Boot:
    return qemu.Boot(
        qemu="qemu-system-x86_64",
        accel="kvm",
        kernel=tmp_path / "vmlinuz",
        initrd=None,
        disk=tmp_path / "overlay.qcow2",
        disk_format="qcow2",
        base_append="root=/dev/vda console=ttyS0",
        ssh_port=0,
        serial_log=tmp_path / "console.log",
        pidfile=tmp_path / "qemu.pid",
        qmp_socket=tmp_path / "qmp.sock",
        firmware=firmware,
        firmware_digest=hostcheck.firmware_digest(firmware),
    )


def test_the_confidential_arms_command_lines_carry_the_firmware_and_the_acceptance_setting(tmp_path):
    study = _load(tmp_path, '[sweep]\nmemory = ["512M", "2G"]', top="rounds = 0")
    ovmf = tmp_path / "OVMF.inteltdx.fd"
    ovmf.write_bytes(b"a TDVF build" * 1000)
    digest = "sha256:" + hashlib.sha256(ovmf.read_bytes()).hexdigest()
    for point in study.sweep.memory_points:
        lazy = qemu.render(point, point.arm("td"), _boot(tmp_path, ovmf))
        eager = qemu.render(point, point.arm("td+eager"), _boot(tmp_path, ovmf))
        for launch in (lazy, eager):
            assert launch.argv[launch.argv.index("-bios") + 1] == str(ovmf)
            assert launch.argv[launch.argv.index("-m") + 1] == f"{point.machine.memory_mib}M"
            assert launch.record["firmware_sha256"] == digest
        assert "accept_memory" not in lazy.append and lazy.record["memory_acceptance"]["kernel"] == "lazy"
        assert eager.append.endswith("accept_memory=eager") and eager.record["memory_acceptance"]["kernel"] == "eager"
    plain = qemu.render(study, study.arm("plain"), _boot(tmp_path, None))
    assert plain.record["memory_acceptance"]["kernel"] is None and plain.record["firmware_sha256"] is None


def _samples(times: dict[str, tuple[str, list[float], list[float]]]) -> list[dict]:
    """Made launch times: arm -> (kind, seconds at 512 MiB, seconds at 4 GiB)."""
    out = []
    for arm, (kind, small, large) in times.items():
        out += [{"arm": arm, "kind": kind, "memory_mib": 512, "ready_s": s} for s in small]
        out += [{"arm": arm, "kind": kind, "memory_mib": 4096, "ready_s": s} for s in large]
    return out


def test_acceptance_at_boot_is_named_only_when_launch_time_grows_in_the_confidential_arm_alone():
    grows_in_cvm = launchtime.verdict(
        _samples({"plain": ("plain", [6.0, 6.4], [6.2, 6.5]), "td": ("tdx", [7.0, 7.2], [19.0, 19.6])})
    )
    assert grows_in_cvm.cause == launchtime.CAUSE and "'td'" in grows_in_cvm.reason
    grows_in_both = launchtime.verdict(
        _samples({"plain": ("plain", [6.0, 6.4], [12.0, 12.5]), "td": ("tdx", [7.0, 7.2], [19.0, 19.6])})
    )
    assert grows_in_both.cause is None and "plain arm 'plain' too" in grows_in_both.reason
    flat = launchtime.verdict(_samples({"plain": ("plain", [6.0], [6.1]), "td": ("tdx", [7.0], [7.3])}))
    assert flat.cause is None and "does not grow" in flat.reason
    # a growth within the launches' own spread is no growth
    noisy = launchtime.verdict(_samples({"plain": ("plain", [6.0], [6.1]), "td": ("tdx", [5.0, 9.0], [7.5, 11.0])}))
    assert noisy.cause is None
    no_plain = launchtime.verdict(_samples({"td": ("tdx", [7.0], [19.0])}))
    assert no_plain.cause is None and "no plain arm" in no_plain.reason
    only_plain = launchtime.verdict(_samples({"plain": ("plain", [6.0], [6.1])}), [("td", "no TDX host")])
    assert only_plain.cause is None and "rendered only: td" in only_plain.reason
    assert any("td: rendered only, not launched here (no TDX host)" in line for line in only_plain.lines())


LAUNCH_STUDY = """name = "launch-memory"
plan = "quick"
rounds = 0
[machine]
vcpus = 1
memory = "512M"
[sweep]
memory = ["512M", "1G"]
[[arm]]
name = "plain"
kind = "plain"
[[arm]]
name = "snp"
kind = "sev-snp"
"""


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="building the guest image needs root (debootstrap)")
@pytest.mark.skipif(
    not all(shutil.which(t) for t in ("qemu-system-x86_64", "qemu-img", "debootstrap", "mke2fs")),
    reason="QEMU, qemu-img, debootstrap or mke2fs missing: bash scripts/setup.sh --with machines",
)
def test_a_real_launch_time_study_times_the_plain_arm_at_two_sizes_and_renders_the_snp_arm(tmp_path, monkeypatch):
    from ccbench.machines.image import ensure_image

    ensure_image()  # built once and cached (minutes the first time); the study below boots overlays of it
    monkeypatch.setenv("CCBENCH_GUEST_INDEX", str(tmp_path / "index"))
    (tmp_path / "study.toml").write_text(LAUNCH_STUDY)
    done = run_ccbench("machines", "run", tmp_path / "study.toml", "--out", tmp_path / "out", "--workdir", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    (directory,) = (tmp_path / "out").glob("machines-launch-memory-*")
    samples = [json.loads(line) for line in (directory / "launch-times.jsonl").read_text().splitlines()]
    assert sorted((s["arm"], s["memory_mib"]) for s in samples) == [("plain", 512), ("plain", 1024)]
    assert all(2 < s["ready_s"] < 300 and s["accel"] == "tcg" and s["host"]["kernel"] for s in samples)
    judged = json.loads((directory / "launch-time.json").read_text())
    assert judged["cause"] is None and "no confidential arm was launched (rendered only: snp)" in judged["reason"]
    rendered = {r["memory_mib"]: r for r in judged["rendered"]}
    assert sorted(rendered) == [512, 1024] and all("sev-snp-guest" in " ".join(r["argv"]) for r in rendered.values())
    assert "snp: rendered only, not launched here" in done.stdout
    assert not list((tmp_path / "index").glob("*.json"))  # every guest stopped and left the index


def test_machines_check_prints_every_arm_at_every_vcpu_count_with_its_idle_twin(tmp_path):
    (tmp_path / "study.toml").write_text(
        BASE.format(top="", machine="", sweep="[sweep]\nvcpus = [2, 4]\n")
        + '\n[[arm]]\nname = "td+poll"\nkind = "tdx"\ntwins = ["poll-idle"]\n'
    )
    done = run_ccbench("machines", "check", tmp_path / "study.toml", "--print-commands")
    assert done.returncode in (0, 2), done.stderr
    out = done.stdout
    assert "sweep: the plan at 2, 4 vCPUs, every arm at each" in out
    for count in (2, 4):
        for arm, word in (("td+haltpoll", "cpuidle_haltpoll.force=1"), ("td+poll", "idle=poll"), ("plain", "")):
            header = next(line for line in out.splitlines() if line.startswith(f"# {arm} at {count} vCPUs"))
            line = out.splitlines()[out.splitlines().index(header) + 1]
            assert f"-smp {count},sockets=1,cores={count},threads=1" in line and word in line
    assert "memory acceptance: kernel accept_memory=eager" in out  # td+eager's setting, under the arm
