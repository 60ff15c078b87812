"""ccbench machines on this machine, for real: ccbench's own Debian image booted by QEMU under software
emulation (TCG: no nested virtualization here), the plan run inside through the fleet, and every way
a study can end (success, a broken image, a guest whose SSH never answers, a launcher that dies,
Ctrl-C, a controller killed outright) leaving no QEMU process, overlay or index entry behind.

The image is built once (about 1-2 minutes with a Debian mirror) and cached by content under
~/.cache/ccbench/images; every test boots overlays of it. SEV-SNP and TDX arms cannot be launched
here: their refusal is tested (test_machines_hostcheck.py checks their command lines)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_ccbench

from ccbench.machines import hostcheck

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="building the guest image needs root (debootstrap)"),
    pytest.mark.skipif(
        not all(shutil.which(t) for t in ("qemu-system-x86_64", "qemu-img", "debootstrap", "mke2fs")),
        reason="QEMU, qemu-img, debootstrap or mke2fs missing: bash scripts/setup.sh --with machines",
    ),
]

TINY_PLAN = """name = "tiny-disk"
description = "fio random reads on the guest's virtio disk, briefly"
[defaults]
repetitions = 2
warmup = 0
cooldown = 0
timeout = 120
[[workloads]]
kind = "fio"
variants = { storage = ["disk"] }
blocksizes = ["4k"]
patterns = ["randread"]
size = "16M"
runtime = 1
"""

STUDY = """name = "bounce-share"
plan = "{plan}"
rounds = 1
{image}
[machine]
vcpus = 2
memory = "1G"

[[arm]]
name = "plain"
kind = "plain"
baseline = true

[[arm]]
name = "plain+bounce"
kind = "plain"
twins = ["bounce"]
"""


@pytest.fixture(scope="module")
def image():
    from ccbench.machines.image import ensure_image

    return ensure_image()


@pytest.fixture
def index(tmp_path, monkeypatch):
    """The guest index of this test alone (the machine-wide one may hold other runs' guests)."""
    path = tmp_path / "index"
    monkeypatch.setenv("CCBENCH_GUEST_INDEX", str(path))
    return path


def _study(tmp_path: Path, image_table: str = "") -> Path:
    plan = tmp_path / "tiny.toml"
    plan.write_text(TINY_PLAN)
    study = tmp_path / "study.toml"
    study.write_text(STUDY.format(plan=plan, image=image_table))
    return study


def _qemu_of(directory: Path) -> list[int]:
    """QEMU processes whose command line names anything under ``directory``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and b"qemu-system" in argv[0] and any(str(directory).encode() in a for a in argv):
            found.append(int(proc.name))
    return found


def _qmp_dirs(argv: list[str]) -> set[Path]:
    """The monitor socket's directory a QEMU command line names (-qmp unix:PATH,...)."""
    return {Path(v.split(":", 1)[1].split(",")[0]).parent for k, v in zip(argv, argv[1:]) if k == "-qmp"}


def _sockets_of(directory: Path) -> set[Path]:
    """The monitor socket directories of this test's guests (under /tmp, where other users' guests may
    have theirs too): named by the command lines of its running QEMUs and by its study's launch records."""
    found: set[Path] = set()
    for pid in _qemu_of(directory):
        try:
            found |= _qmp_dirs([a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")])
        except OSError:
            continue
    for study in directory.rglob("study.json"):
        for arm in json.loads(study.read_text()).get("arms", {}).values():
            found |= _qmp_dirs(arm.get("launch", {}).get("argv", []))
    return found


@pytest.fixture
def sockets(monkeypatch):
    """The monitor socket directories of the guests this test launches in its own process."""
    from ccbench.machines import guest as guests

    made: set[Path] = set()
    original = guests.socket_dir

    def recorded(rid: str) -> Path:
        made.add(original(rid))
        return original(rid)

    monkeypatch.setattr(guests, "socket_dir", recorded)
    return made


def _nothing_left(directory: Path, index: Path, sockets: set[Path]) -> None:
    """No QEMU, overlay, monitor socket or index entry of this test's guests (other users' guests on
    this host are none of its business)."""
    assert _qemu_of(directory) == []
    assert list(directory.rglob("overlay.qcow2")) == []
    assert sockets and [path for path in sockets if path.exists()] == []
    assert not index.exists() or list(index.iterdir()) == []


def test_a_two_arm_study_runs_from_nothing_to_a_comparison_that_names_the_twin(tmp_path, image, index):
    """plain and its bounce twin, booted here, the plan run in both through the fleet: the twin's own
    counters show it bounced and the plain arm's that it did not, the comparison names the row's
    mechanism, every bundle records its launch, and nothing is left running."""
    study = _study(tmp_path)
    out = tmp_path / "results"
    env = {"CCBENCH_GUEST_INDEX": str(index)}
    done = run_ccbench("machines", "run", study, "--out", out, timeout=1200, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (directory,) = out.glob("machines-bounce-share-*")
    document = json.loads((directory / "study.json").read_text())
    assert document["status"] == "complete"
    assert set(document["arms"]) == {"plain", "plain+bounce"}
    twin = document["arms"]["plain+bounce"]["launch"]
    assert any(p.startswith("swiotlb=") and p.endswith(",force") for p in twin["knobs"]["kernel_params"])
    assert "iommu_platform=on" in " ".join(twin["argv"])
    # the guests' own counters: the twin bounced, the plain arm did not
    bounced = {}
    for bundle in directory.glob("round-1/fleet-*/*/*/executions.jsonl"):
        arm = bundle.parts[-3]
        records = [json.loads(line) for line in bundle.read_text().splitlines() if line.strip()]
        bounced[arm] = sum(r["counters"]["trace.swiotlb:swiotlb_bounced"] for r in records if not r.get("warmup"))
        manifest = json.loads((bundle.parent / "manifest.json").read_text())
        launch = manifest["environment"]["machine_launch"]
        assert launch["arm"] == arm and launch["image"]["disk_sha256"] == image.digest
        if arm == "plain+bounce":
            pool = manifest["environment"]["provenance"]["swiotlb"]
            assert pool["cmdline"].endswith(",force") and pool["bytes"] > 0
    assert bounced["plain+bounce"] > 0 and bounced["plain"] == 0, bounced
    assert "plain+bounce (bounce-buffers twin):" in done.stdout
    assert "the arms differ only in their declared knobs (2 launch records compared)" in done.stdout
    assert json.loads((directory / "study.json").read_text())["launch_differences"] == []
    compared = (directory / "compare.txt").read_text()
    assert "mechanism twin: bounce buffers" in compared
    assert "confounded" not in compared  # the pool missing from MemTotal is the twin's, not another size
    assert (directory / "report.html").stat().st_size > 0
    _nothing_left(directory, index, _sockets_of(directory))


def _run_dir(tmp_path: Path) -> Path:
    return tmp_path / "study-run"


def _start(tmp_path, image, index, *, timeout_s=120.0, broken=None):
    """One arm of a study booted through StudyRun (the test owns the context)."""
    from ccbench.machines.lifecycle import StudyRun
    from ccbench.machines.studyfile import load_study

    study = load_study(_study(tmp_path))
    return StudyRun(study, broken or image, _run_dir(tmp_path), lambda _t: None, boot_timeout_s=timeout_s)


def test_a_broken_image_is_one_error_naming_the_console_and_leaves_nothing(tmp_path, image, index, sockets):
    """A disk that holds no file system: the kernel cannot mount root and panics; QEMU (-no-reboot)
    exits, and the error names it."""
    from ccbench.basics.errors import EnvironmentProblem
    from ccbench.machines.image import GuestImage

    garbage = tmp_path / "garbage.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(garbage), "64M"], check=True)
    broken = GuestImage("garbage", garbage, image.kernel, image.initrd, image.base_append + " panic=1", "0" * 64)
    with pytest.raises(EnvironmentProblem) as caught:
        with _start(tmp_path, image, index, timeout_s=240, broken=broken) as run:
            run.up("plain")
    message = str(caught.value)
    assert message.startswith("guest plain:") and "\n" not in message
    _nothing_left(_run_dir(tmp_path), index, sockets)


def test_a_guest_whose_ssh_never_answers_times_out_with_its_reason_and_leaves_nothing(tmp_path, image, index, sockets):
    """The guest boots and its init says ready, but it was handed another public key than the one
    SSH offers: SSH never lets the study in."""
    from ccbench.basics.errors import EnvironmentProblem
    from ccbench.machines import guest

    with pytest.raises(EnvironmentProblem) as caught:
        # its init says ready after 11-13 s under TCG here: 40 s leaves a loaded machine room, and every
        # second of it is waited out in full (SSH never answers)
        with _start(tmp_path, image, index, timeout_s=40) as run:
            other = tmp_path / "other_key"
            guest.keygen(other, "not the study's")
            shutil.copyfile(f"{other}.pub", f"{run.key}.pub")  # what up() hands the guest
            run.up("plain")
    assert "SSH did not answer within 40 s" in str(caught.value)
    _nothing_left(_run_dir(tmp_path), index, sockets)


def test_a_launcher_that_dies_during_boot_is_reported_and_leaves_nothing(tmp_path, image, index, sockets):
    from ccbench.basics.errors import EnvironmentProblem
    from ccbench.machines import guest as guests

    original = guests.Guest.start

    def start_then_die(self, argv):
        original(self, argv)
        time.sleep(1)
        os.kill(self.process.pid, signal.SIGKILL)

    guests.Guest.start = start_then_die
    try:
        with pytest.raises(EnvironmentProblem) as caught:
            with _start(tmp_path, image, index) as run:
                run.up("plain")
    finally:
        guests.Guest.start = original
    assert "QEMU exited with -9 during boot" in str(caught.value)
    _nothing_left(_run_dir(tmp_path), index, sockets)


def _start_cli(tmp_path, index) -> tuple[subprocess.Popen, Path, set[Path]]:
    """A study started as a user would (its work directory tmp_path/work), once its first QEMU runs;
    the monitor socket directories of its guests up then."""
    study = _study(tmp_path)
    out = tmp_path / "results"
    env = {**os.environ, "CCBENCH_GUEST_INDEX": str(index)}
    # --out and --workdir relative, as a user types them (QEMU runs in the arm's directory)
    process = subprocess.Popen(
        [sys.executable, "-m", "ccbench", "machines", "run", str(study), "--out", "results", "--workdir", "work"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and not list(out.glob("machines-*/arms/plain/console.log")):
        assert process.poll() is None, process.stdout.read()
        time.sleep(0.2)
    (directory,) = out.glob("machines-*")
    assert _qemu_of(directory), "no QEMU started"
    return process, directory, _sockets_of(directory)


def test_ctrl_c_during_a_study_stops_every_guest(tmp_path, image, index):
    process, directory, sockets = _start_cli(tmp_path, index)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 130, output
    assert "interrupted: every guest is stopped" in output
    assert "Traceback" not in output
    _nothing_left(directory, index, sockets | _sockets_of(directory))


def _executions_done(directory: Path) -> int:
    """Executions an arm's run has done in the guest so far (the round's fleet.json, as the fleet polls them)."""
    done = 0
    for fleet_json in directory.glob("round-*/fleet-*/fleet.json"):
        try:
            hosts = json.loads(fleet_json.read_text()).get("hosts", {})
        except ValueError:
            continue  # being replaced
        done += sum(r.get("executions_done", 0) for h in hosts.values() for r in (h.get("rounds") or {}).values())
    return done


def test_ctrl_c_during_a_round_says_one_next_step_and_stops_every_guest_in_seconds(tmp_path, image, index):
    """issue 59, item 6: Ctrl-C while an arm runs the plan was silent for about 19 s and then gave two
    next steps that disagreed (the round's "ccbench fleet run --resume", whose guest is stopped, and
    "run the study again"). Now: said at once, each guest's stop said, one next step."""
    process, directory, sockets = _start_cli(tmp_path, index)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and not _executions_done(directory):
        assert process.poll() is None, process.stdout.read()
        time.sleep(0.2)
    assert _executions_done(directory), "no arm ran an execution"
    sockets |= _sockets_of(directory)
    interrupted = time.monotonic()
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=300)
    took = time.monotonic() - interrupted
    assert process.returncode == 130, output
    lines = output.splitlines()
    assert "interrupted: stopping the runs (each keeps what it measured) and fetching their bundles" in lines
    assert "--resume" not in output and "Traceback" not in output, output
    steps = [line for line in lines if "run it again" in line or "Resume" in line or "run the study again" in line]
    assert len(steps) == 1 and steps[0].startswith("interrupted: every guest is stopped;"), steps
    assert f"ccbench machines run {tmp_path / 'study.toml'} --out {tmp_path / 'results'}" in steps[0]
    assert sum(line.startswith("stopped guest ") for line in lines) == 2, output  # both arms (interleaved)
    assert took < 120, f"{took:.0f} s from Ctrl-C to the end"
    _nothing_left(directory, index, sockets)


def test_a_controller_killed_outright_leaves_guests_that_cleanup_stops(tmp_path, image, index):
    process, directory, sockets = _start_cli(tmp_path, index)
    process.kill()
    process.wait(timeout=30)
    assert _qemu_of(directory), "the guest should outlive a controller killed with SIGKILL"
    sockets |= _sockets_of(directory)
    done = run_ccbench("cleanup", "--workdir", tmp_path / "work", env={"CCBENCH_GUEST_INDEX": str(index)})
    assert done.returncode == 0, done.stderr
    assert "stopped guest plain" in done.stdout and "left by a run that died" in done.stdout
    _nothing_left(directory, index, sockets)


def test_sev_snp_and_tdx_arms_are_refused_on_this_host_in_one_line_each(tmp_path):
    """The launch of a confidential guest is the boundary this machine cannot cross (no KVM with SNP
    or TDX, QEMU 7.2): the host check says so before anything starts, one line per arm. A study with
    both kinds no host can run (AMD or Intel): refused in one line before the host is even asked."""
    plain = _study(tmp_path).read_text()
    amd = tmp_path / "amd.toml"
    amd.write_text(
        plain
        + '\n[[arm]]\nname = "snp"\nkind = "sev-snp"\n\n[[arm]]\nname = "snp+poll"\nkind = "sev-snp"\ntwins = ["poll-idle"]\n'
    )
    mixed = tmp_path / "mixed.toml"
    mixed.write_text(plain + '\n[[arm]]\nname = "snp"\nkind = "sev-snp"\n\n[[arm]]\nname = "tdx"\nkind = "tdx"\n')
    for command, study, expected in (
        (
            "check",
            amd,
            ["arm 'snp' (sev-snp) cannot run on this host:", "arm 'snp+poll' (sev-snp) cannot run on this host:"],
        ),
        ("run", mixed, [f"{mixed}: arm.kind: sev-snp arms (snp) and tdx arms (tdx) cannot run on one host"]),
    ):
        out = ("--out", tmp_path / "out") if command == "run" else ()
        done = run_ccbench("machines", command, study, *out)
        assert done.returncode == 2, done.stdout + done.stderr
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        # one error form for every command (issue 59, item 10: check said "ccbench machines:")
        assert [line[: len("ccbench: error: " + e)] for line, e in zip(lines, expected)] == [
            "ccbench: error: " + e for e in expected
        ] and len(lines) == len(expected), lines
        assert "Traceback" not in done.stderr
        firmware = hostcheck.find_firmware("sev-snp")
        if command == "check" and firmware is not None and hostcheck.sev_hash_area(firmware) == (0, 0):
            # this host's OVMF for SEV-SNP is a generic build (Debian's OVMF.fd): kernel hashes need the AmdSev one
            assert f"warning: arm 'snp': firmware {firmware} has no SEV hash table area" in done.stdout, done.stdout
    assert not list((tmp_path / "out").glob("machines-*"))
