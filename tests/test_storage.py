"""Storage variants set up and torn down for real (as root), the compression workload on each,
cleanup after a killed run, and the reasons a variant is skipped."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import mounts_under, others_can_read, python_path_for_other_users, start_run, wait_until

from ccbench.basics.errors import CCBenchError
from ccbench.bundle import read_bundle
from ccbench.variants import AXES, storage_base, storage_encrypted, storage_plain
from ccbench.variants import storage as storage_module

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="mounting needs root (CI runs as root)")
AXIS = AXES["storage"]
OPTIONS = AXIS.Options(tmpfs_size="64M", image_size="64M")


def loops_for(path: Path) -> str:
    return subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout if shutil.which("losetup") else ""


@root_only
@pytest.mark.parametrize(
    "value, mechanism",
    [
        ("tmpfs", "tmpfs"),
        ("encrypted:fscrypt", "fscrypt"),
        ("encrypted:gocryptfs", "gocryptfs"),
        ("encrypted", None),
        ("ext4-loop", "none"),
    ],
)
def test_variant_is_set_up_for_real_and_torn_down(tmp_path, value, mechanism):
    reason = AXIS.skip_reason(value, OPTIONS)
    if value == "encrypted:gocryptfs" and reason:
        pytest.skip(reason)
    assert reason is None, reason
    prepared = AXIS.setup(value, tmp_path, OPTIONS)
    try:
        assert prepared.path.is_dir()
        (prepared.path / "probe.txt").write_text("secret")
        expected = mechanism or storage_module.choose_mechanism()[0]
        assert prepared.info.get("storage_mechanism") == expected
        if expected not in ("tmpfs", "none"):
            assert prepared.info["storage"] == "encrypted" and prepared.info["storage_cipher"]
        if expected in ("fscrypt", "none"):
            assert prepared.info["loop_direct_io"] is True  # no second page cache in front of the disk
            assert prepared.handle.image.device in loops_for(tmp_path)
        if expected == "gocryptfs":
            assert prepared.info["storage_cipher"] == "AES-256-GCM"
            # a userspace cipher: no kernel driver, whether the CPU has AES and carry-less multiply
            assert prepared.info["storage_cipher_accelerated"] in (True, False)
        if expected == "fscrypt":
            assert "aes" in prepared.info["storage_cipher_driver"]
        mounted = mounts_under(tmp_path)
        assert mounted, "the variant must be a real mount"
        from ccbench.probe import describe_path

        protection = describe_path(prepared.path)["protection"]
        assert protection == {"tmpfs": "tmpfs", "fscrypt": "fscrypt", "gocryptfs": "fuse", "none": "plain"}[expected]
        if expected == "gocryptfs":
            cipher_files = list((prepared.handle.directory / "cipher").iterdir())
            assert not any(b"secret" in f.read_bytes() for f in cipher_files if f.is_file()), "plaintext at rest"
    finally:
        AXIS.teardown(prepared)
    assert mounts_under(tmp_path) == []
    assert str(tmp_path) not in loops_for(tmp_path)
    assert [p.name for p in (tmp_path / "storage").iterdir()] == ["state.json"]
    assert not list((tmp_path / "storage").rglob("key*"))


def test_luks_commands_and_skip_reason(tmp_path):
    commands = storage_encrypted.Luks.commands("/dev/loop7", tmp_path / "key", "ccbench-x", tmp_path / "mnt")
    format_command = commands[0]
    assert format_command[:2] == ["cryptsetup", "luksFormat"]
    assert format_command[format_command.index("--type") + 1] == "luks2"
    assert format_command[format_command.index("--cipher") + 1] == "aes-xts-plain64"
    assert format_command[format_command.index("--key-size") + 1] == "512"
    assert format_command[format_command.index("--key-file") + 1] == str(tmp_path / "key")
    assert format_command[-1] == "/dev/loop7"  # only ever the loop device ccbench attached
    assert commands[1][:2] == ["cryptsetup", "open"] and commands[1][-2:] == ["/dev/loop7", "ccbench-x"]
    assert commands[2] == ["mkfs.ext4", "-q", "-F", "/dev/mapper/ccbench-x"]
    for not_ours in ("/dev/sda", "/dev/vda1", "/dev/mapper/root", "/dev/loop7p1", str(tmp_path / "image.img")):
        with pytest.raises(CCBenchError, match="only formats loop devices"):
            storage_encrypted.Luks.commands(not_ours, tmp_path / "key", "ccbench-x", tmp_path / "mnt")
    assert commands[3] == ["mount", "/dev/mapper/ccbench-x", str(tmp_path / "mnt")]
    if not storage_base.kernel_has_device_mapper():
        assert "device-mapper" in AXIS.skip_reason("encrypted:luks", OPTIONS)


def test_device_mapper_is_detected_from_the_kernel_not_from_a_device_node(tmp_path):
    misc = tmp_path / "misc"
    misc.write_text(" 62 loop-control\n229 fuse\n")
    assert not storage_base.kernel_has_device_mapper(misc)
    misc.write_text(" 62 loop-control\n236 device-mapper\n229 fuse\n")
    assert storage_base.kernel_has_device_mapper(misc)
    assert not storage_base.kernel_has_device_mapper(tmp_path / "absent")


def test_non_root_skips_root_only_variants(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "needs root" in AXIS.skip_reason("tmpfs", OPTIONS)
    assert "needs root" in AXIS.skip_reason("encrypted:fscrypt", OPTIONS)
    assert "needs root" in AXIS.skip_reason("encrypted:luks", OPTIONS)
    assert AXIS.skip_reason("disk", OPTIONS) is None


def test_unknown_variant_and_user_path(tmp_path):
    with pytest.raises(ValueError, match="unknown storage variant"):
        AXIS.validate("floppy")
    options = AXIS.Options(paths={"encrypted": str(tmp_path / "mine")})
    assert "no such directory" in AXIS.skip_reason("encrypted", options)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "users-own-file").write_text("keep me")
    prepared = AXIS.setup("encrypted", tmp_path / "work", options)
    assert prepared.path.parent == tmp_path / "mine" and prepared.info["storage_mechanism"] == "user-path"
    AXIS.teardown(prepared)
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["users-own-file"]
    # a killed run (no teardown): the next start removes ccbench's directory there, and only that
    left = AXIS.setup("encrypted", tmp_path / "work", options)
    (left.path / "data.bin").write_bytes(b"x" * 100)
    removed = storage_module.cleanup_stale(tmp_path / "work")
    assert f"removed {left.path}" in removed
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["users-own-file"]


PLAN = """
name = "storage-test"
[defaults]
repetitions = 1
cooldown = 0
variants = { storage = %s }
[storage]
tmpfs_size = "64M"
image_size = "64M"
[[workloads]]
kind = "compression"
size = "4M"
[[workloads]]
kind = "fio"
blocksizes = ["4k"]
patterns = ["randrw"]
size = "8M"
runtime = 1
"""


@root_only
def test_compression_and_fio_run_on_every_variant(tmp_path, ccbench):
    variants = ["disk", "tmpfs", "encrypted", "encrypted:gocryptfs"]
    (tmp_path / "plan.toml").write_text(PLAN % variants)
    done = ccbench("run", tmp_path / "plan.toml", "--out", tmp_path / "out", "--workdir", tmp_path / "work")
    assert done.returncode == 0, done.stdout + done.stderr
    bundle = read_bundle(next((tmp_path / "out").iterdir()))
    for workload in ("compression", "fio"):
        seen = {
            (s["variant"]["storage"], s["variant"].get("storage_mechanism"))
            for s in bundle.samples
            if s["workload"] == workload
        }
        assert ("disk", None) in seen and ("tmpfs", "tmpfs") in seen
        assert ("encrypted", "fscrypt") in seen and ("encrypted", "gocryptfs") in seen
    ratios = [s["value"] for s in bundle.samples if s["metric"] == "compression_ratio"]
    assert ratios and all(r > 1.2 for r in ratios)
    assert mounts_under(tmp_path / "work") == []
    # the comparison shows every variant against plain disk
    compared = ccbench("compare", bundle.path, "--json")
    assert compared.returncode == 0, compared.stderr
    configs = {
        line.split('"config": "')[1].split('"')[0] for line in compared.stdout.splitlines() if '"config": "' in line
    }
    assert len(configs) == 3 and all("disk" not in c for c in configs)


@root_only
def test_killed_run_leaves_nothing_after_cleanup(tmp_path, ccbench):
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'name = "k"\n[defaults]\nrepetitions = 50\ncooldown = 0\n'
        'variants = { storage = ["tmpfs", "encrypted:fscrypt", "encrypted:gocryptfs"] }\n'
        '[storage]\ntmpfs_size = "16M"\nimage_size = "32M"\n'
        '[[workloads]]\nkind = "command"\ncommand = "sleep 0.2"\n'
    )
    work = tmp_path / "work"
    process = start_run(plan, tmp_path / "out", work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: len(mounts_under(work)) >= 3, what="three mounts")
    time.sleep(0.5)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert mounts_under(work), "SIGKILL gives no chance to clean up"
    done = ccbench("cleanup", "--workdir", work)
    assert done.returncode == 0, done.stderr
    assert "unmounted" in done.stdout
    assert mounts_under(work) == []
    assert str(work) not in loops_for(work)
    assert not list((work / "storage").rglob("key*"))
    assert [p.name for p in (work / "storage").iterdir()] == ["state.json"]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to switch to nobody")
def test_a_real_non_root_process_skips_root_only_variants_with_the_reason():
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    started = subprocess.run([*as_nobody, sys.executable, "-c", "pass"], capture_output=True, text=True, cwd="/")
    if started.returncode != 0:
        pytest.skip(f"the user nobody cannot start this Python ({sys.executable}): {started.stderr.strip()[-200:]}")
    # the checkout may live where nobody cannot read it (/root, mktemp -d): give nobody a readable
    # copy of what it imports (pytest's tmp_path is private to root too, so a directory in /tmp)
    with tempfile.TemporaryDirectory(prefix="ccbench-for-nobody-") as readable:
        os.chmod(readable, 0o755)
        if not others_can_read(Path(readable)):
            pytest.skip(f"no directory readable by nobody could be made for a copy of ccbench ({readable})")
        python_path = python_path_for_other_users(["ccbench.planning.plan", "ccbench.variants"], Path(readable) / "lib")
        done = run_as_nobody(as_nobody, python_path)
    _check_non_root_reasons(done)


def run_as_nobody(as_nobody: list[str], python_path: str) -> subprocess.CompletedProcess:
    script = (
        "from ccbench.planning.plan import load_plan\n"
        "from ccbench.variants import AXES\n"
        "import sys\n"
        "axis = AXES['storage']\n"
        "options = axis.Options()\n"
        "for value in sys.argv[1:]:\n"
        "    print(value, '=>', axis.skip_reason(value, options))\n"
    )
    done = subprocess.run(
        [
            *as_nobody,
            sys.executable,
            "-c",
            script,
            "disk",
            "tmpfs",
            "encrypted:fscrypt",
            "encrypted:luks",
            "ext4-loop",
            "encrypted:gocryptfs",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={**os.environ, "PYTHONPATH": f"{python_path}:{os.environ.get('PYTHONPATH', '')}"},
    )
    return done


def _check_non_root_reasons(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" => ", 1) for line in done.stdout.splitlines())
    assert lines["disk"] == "None"
    assert lines["tmpfs"] == "mounting a tmpfs needs root"
    assert "needs root" in lines["encrypted:fscrypt"] and "needs root" in lines["encrypted:luks"]
    assert "needs root" in lines["ext4-loop"]
    # FUSE works without root only where /dev/fuse is open to the user (0600 root here)
    fuse_open_to_all = os.path.exists("/dev/fuse") and os.stat("/dev/fuse").st_mode & 0o006 == 0o006
    if shutil.which("gocryptfs") and os.path.exists("/dev/fuse") and not fuse_open_to_all:
        assert "cannot open /dev/fuse" in lines["encrypted:gocryptfs"]


@root_only
def test_fscrypt_keeps_no_plaintext_in_the_loop_file(tmp_path):
    """Data in the encrypted directory never reaches the image file in the clear, while the same
    data written next to it (outside the encrypted directory, same filesystem) does: the check can fail."""
    prepared = AXIS.setup("encrypted:fscrypt", tmp_path, OPTIONS)
    try:
        secret, control = os.urandom(65536), os.urandom(65536)
        (prepared.path / "secret-name.bin").write_bytes(secret)
        (prepared.path.parent / "control-name.bin").write_bytes(control)  # the mount's root is not encrypted
        os.sync()
        image = prepared.handle.image.path.read_bytes()
        assert control[:4096] in image and b"control-name.bin" in image, (
            "control: plaintext outside the policy is visible"
        )
        assert secret[:4096] not in image and secret[-4096:] not in image, "plaintext at rest in the image"
        assert b"secret-name.bin" not in image, "file names are encrypted too"
    finally:
        AXIS.teardown(prepared)


@root_only
def test_the_next_run_cleans_up_after_a_killed_one(tmp_path, ccbench):
    work = tmp_path / "work"
    work.mkdir()
    left = [AXIS.setup(value, work, OPTIONS) for value in ("tmpfs", "encrypted:fscrypt", "ext4-loop")]
    assert len(mounts_under(work)) == 3 and str(work) in loops_for(work)
    # as if the process had been killed: nothing was torn down
    (tmp_path / "plan.toml").write_text(
        'name = "after-kill"\n[defaults]\nrepetitions = 1\ncooldown = 0\n'
        '[[workloads]]\nkind = "command"\ncommand = "true"\n'
    )
    done = ccbench("run", tmp_path / "plan.toml", "--out", tmp_path / "out", "--workdir", work)
    assert done.returncode == 0, done.stdout + done.stderr
    assert mounts_under(work) == []
    assert str(work) not in loops_for(work)
    assert not any(p.handle.directory.exists() for p in left)


@root_only
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_interrupted_run_tears_its_variants_down(tmp_path, sig):
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'name = "i"\n[defaults]\nrepetitions = 50\ncooldown = 0\n'
        'variants = { storage = ["tmpfs", "encrypted:fscrypt", "encrypted:gocryptfs", "ext4-loop"] }\n'
        '[storage]\ntmpfs_size = "16M"\nimage_size = "32M"\n'
        '[[workloads]]\nkind = "command"\ncommand = "sleep 0.2"\n'
    )
    work = tmp_path / "work"
    process = start_run(plan, tmp_path / "out", work, stdout=subprocess.DEVNULL)
    wait_until(lambda: len(mounts_under(work)) >= 4, what="four mounts")
    time.sleep(0.5)
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode != 0
    assert mounts_under(work) == [], stderr
    assert str(work) not in loops_for(work)
    assert not list((work / "storage").rglob("key*"))


@root_only
def test_a_hang_up_leaves_no_mount_no_counter_session_and_says_how_to_resume(tmp_path):
    """The SSH session that started a run drops: SIGHUP. The tmpfs variant, the counters' private
    tracefs mount and trace instance are undone, the bundle says interrupted, and the last line
    printed is the resume command (on today's main SIGHUP killed the run on the spot: exit 129,
    everything left mounted)."""
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'name = "hup"\n[defaults]\nrepetitions = 50\ncooldown = 0\ncounters = true\n'
        'variants = { storage = ["disk", "tmpfs"] }\n[storage]\ntmpfs_size = "16M"\n'
        '[[workloads]]\nkind = "command"\ncommand = "sleep 0.2"\n'
    )
    work, out = tmp_path / "work", tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "ccbench", "run", str(plan), "--out", str(out), "--workdir", str(work)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as a login session's process has it, whatever this test was started with (nohup ignores it)
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
    )
    ledger = work / "counters" / "mounts.json"

    def counting() -> bool:
        return ledger.exists() and any(e["kind"] == "trace-instance" for e in json.loads(ledger.read_text())["entries"])

    wait_until(lambda: mounts_under(work) and counting(), what="the tmpfs variant and a counters' trace instance")
    time.sleep(0.5)
    process.send_signal(signal.SIGHUP)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    # the resume command is the last line on stderr (and in a log that takes both streams)
    assert stderr.strip().splitlines()[-1].startswith("interrupted. Resume with: ccbench run --resume"), stderr
    assert mounts_under(work) == [], stderr
    assert json.loads(ledger.read_text())["entries"] == []
    assert not [line for line in open("/proc/self/mountinfo") if f"ccbench-counters-{process.pid}-" in line]
    bundle = next(out.iterdir())
    assert json.loads((bundle / "manifest.json").read_text())["status"] == "interrupted"
    assert (bundle / "samples.parquet").exists()


@root_only
@pytest.mark.skipif(shutil.which("cryptsetup") is None, reason="cryptsetup not installed")
def test_luks_as_far_as_this_machine_allows(tmp_path, monkeypatch):
    """luksFormat needs no device-mapper: format ccbench's own loop device for real and read the header
    back. Opening needs dm-crypt; where it is missing setup refuses before running anything, and a
    LUKS setup that fails after the format leaves nothing behind."""
    control_node_before = os.path.exists("/dev/mapper/control")
    (tmp_path / "v").mkdir()
    loop = storage_plain.LoopImage(tmp_path / "v" / "image.img", OPTIONS.image_size)
    loop.create()
    image = loop.path
    key = storage_base._key_file(tmp_path / "v", os.urandom(64))
    try:
        device = loop.attach()
        subprocess.run(
            storage_encrypted.Luks.commands(device, key, "unused", tmp_path / "mnt")[0], check=True, capture_output=True
        )
        header = storage_encrypted.luks_header(device)
        assert header.pop("luks_sector_size") in (512, 4096)  # cryptsetup follows the device's block size
        assert header == {"storage_cipher": "aes-xts-plain64", "key_bits": 512}
        assert image.read_bytes()[:6] == b"LUKS\xba\xbe"
    finally:
        subprocess.run(["losetup", "-d", loop.device or "/dev/null"], capture_output=True)
    work = tmp_path / "work"
    if not storage_base.kernel_has_device_mapper():
        with pytest.raises(CCBenchError, match="device-mapper"):
            AXIS.setup("encrypted:luks", work, OPTIONS)
        assert [p.name for p in (work / "storage").iterdir()] == ["state.json"]
    # the real format and header read, then an opening step that fails: everything is undone
    monkeypatch.setattr(storage_module, "mechanism_reason", lambda mechanism: None)
    real_commands = storage_encrypted.Luks.commands
    monkeypatch.setattr(storage_encrypted.Luks, "commands", staticmethod(lambda *a: [real_commands(*a)[0], ["false"]]))
    with pytest.raises(CCBenchError, match="false failed"):
        AXIS.setup("encrypted:luks", work, OPTIONS)
    assert mounts_under(work) == [] and str(work) not in loops_for(work)
    assert [p.name for p in (work / "storage").iterdir()] == ["state.json"]
    assert not list((work / "storage").rglob("key*"))
    # without dm-crypt ccbench never calls cryptsetup open/close, which would create /dev/mapper/control
    if not storage_base.kernel_has_device_mapper():
        assert os.path.exists("/dev/mapper/control") == control_node_before


@root_only
def test_fscrypt_records_the_kernel_driver_that_served_its_cipher(tmp_path):
    """Read from /proc/crypto once the policy is live. This machine's kernel has no AES-NI driver,
    so fscrypt's XTS is built on a software AES (aes-fixed-time, or aes-generic)."""
    if AXIS.skip_reason("encrypted:fscrypt", OPTIONS):
        pytest.skip(AXIS.skip_reason("encrypted:fscrypt", OPTIONS))
    prepared = AXIS.setup("encrypted:fscrypt", tmp_path, OPTIONS)
    try:
        driver, accelerated = prepared.info["storage_cipher_driver"], prepared.info["storage_cipher_accelerated"]
    finally:
        AXIS.teardown(prepared)
    crypto = Path("/proc/crypto").read_text()
    assert "xts" in driver and "aes" in driver and f"driver       : {driver}" in crypto
    assert "storage_cipher_driver_note" not in prepared.info, "the template was instantiated before it was read"
    if "aesni" not in crypto and "vaes" not in crypto:
        assert driver in ("xts(ecb(aes-fixed-time))", "xts(ecb(aes-generic))") and accelerated is False
    assert not list(tmp_path.rglob(".ccbench-cipher-probe"))


def test_transport_variants_say_what_their_aead_runs_on():
    from ccbench.variants.transport import transport_info

    assert transport_info("plain", {"aes", "pclmulqdq"}) == {"transport": "plain"}
    assert transport_info("securechannel", {"aes", "pclmulqdq", "avx2"}) == {
        "transport": "securechannel",
        "transport_aes_accelerated": True,
        "transport_cipher": "AES-256-GCM",
    }
    assert transport_info("securechannel", {"avx2"})["transport_cipher"] == "ChaCha20-Poly1305"
    assert transport_info("tls", {"aes"}) == {"transport": "tls", "transport_aes_accelerated": False}
    live = AXES["transport"].setup("tls", Path("/nonexistent"), AXES["transport"].Options())
    assert live.info["transport"] == "tls" and isinstance(live.info.get("transport_aes_accelerated", False), bool)
