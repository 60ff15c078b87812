"""One arm's QEMU command line: the knobs of each twin where they belong, the same machine for every
arm, SEV-SNP and TDX objects with the property names QEMU's schema documents, and this machine's
real QEMU (7.2) accepting a plain arm's and its bounce twin's command line."""

import contextlib
import json
import os
import shutil
import socket
import struct
import subprocess
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from ccbench.machines.arms import differences
from ccbench.machines.qemu import Boot, pin_vcpus, render
from ccbench.machines.study import StudyError, cvm_swiotlb_slabs
from ccbench.machines.studyfile import load_study

QEMU = "qemu-system-x86_64"

# Property names as QEMU's qapi/qom.json documents them in QEMU 10.1 (read in a mirror of QEMU's tree,
# github.com/pbo-linaro/qemu-ci at commit 04a5764cd197, where TdxGuestProperties says "Since: 10.1"
# and SevSnpGuestProperties "Since: 9.1"): SevCommonProperties + SevSnpGuestProperties,
# TdxGuestProperties, MemoryBackendProperties + MemoryBackendMemfdProperties. ObjectOptions adds
# "qom-type" (the object's name on the command line) and "id".
QOM_OBJECT_BASE = {"id"}
SEV_COMMON = {"sev-device", "cbitpos", "reduced-phys-bits", "kernel-hashes"}
SEV_SNP_GUEST = SEV_COMMON | {
    "policy",
    "guest-visible-workarounds",
    "id-block",
    "id-auth",
    "author-key-enabled",
    "host-data",
    "vcek-disabled",
}
TDX_GUEST = {"attributes", "sept-ve-disable", "mrconfigid", "mrowner", "mrownerconfig", "quote-generation-socket"}
MEMORY_BACKEND = {
    "dump",
    "host-nodes",
    "merge",
    "policy",
    "prealloc",
    "prealloc-threads",
    "prealloc-context",
    "share",
    "reserve",
    "size",
    "x-use-canonical-path-for-ramblock-id",
}
MEMORY_BACKEND_MEMFD = MEMORY_BACKEND | {"hugetlb", "hugetlbsize", "seal"}
SCHEMA = {
    "sev-snp-guest": SEV_SNP_GUEST,
    "tdx-guest": TDX_GUEST,
    "memory-backend-memfd": MEMORY_BACKEND_MEMFD,
    "memory-backend-ram": MEMORY_BACKEND,
}

STUDY = """
name = "launch"
plan = "quick"
[machine]
vcpus = 2
memory = "1G"
{machine}
[[arm]]
name = "plain"
kind = "plain"
[[arm]]
name = "plain+bounce"
kind = "plain"
twins = ["bounce"]
[[arm]]
name = "plain+huge"
kind = "plain"
twins = ["hugepages"]
[[arm]]
name = "snp"
kind = "sev-snp"
[[arm]]
name = "snp+poll"
kind = "sev-snp"
twins = ["poll-idle"]
[[arm]]
name = "snp+haltpoll"
kind = "sev-snp"
twins = ["haltpoll"]
"""
TDX_ARMS = """
[[arm]]
name = "td"
kind = "tdx"
[[arm]]
name = "td+eager"
kind = "tdx"
twins = ["eager-accept"]
"""


def study_at(tmp_path, machine=""):
    """Every kind of arm side by side for the renderer (one arm at a time): the SEV-SNP arms' study with
    the TDX arms of another (one host is AMD or Intel, so the loader refuses both kinds in one study)."""
    path, intel = tmp_path / "study.toml", tmp_path / "intel.toml"
    path.write_text(textwrap.dedent(STUDY.format(machine=machine)))
    intel.write_text(textwrap.dedent(STUDY.format(machine=machine)).split("[[arm]]")[0] + TDX_ARMS)
    study = load_study(path)
    return replace(study, arms=study.arms + load_study(intel).arms)


def boot_at(tmp_path, accel="kvm", kernel=True, port=2222, **extra):
    (tmp_path / "key").write_text("ssh-ed25519 AAAA test\n")
    values = dict(
        qemu=QEMU,
        accel=accel,
        kernel=tmp_path / "vmlinuz" if kernel else None,
        initrd=tmp_path / "initrd" if kernel else None,
        disk=tmp_path / "overlay.qcow2",
        disk_format="qcow2",
        base_append="root=/dev/vda1 console=ttyS0",
        ssh_port=port,
        serial_log=tmp_path / "serial.log",
        pidfile=tmp_path / "qemu.pid",
        qmp_socket=tmp_path / "qmp.sock",
        fw_cfg={"ssh_key": tmp_path / "key"},
        firmware=Path("/usr/share/OVMF/OVMF.fd"),
        image_digest="sha256:abc",
    )
    values.update(extra)
    return Boot(**values)


def option(argv, flag):
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def props(value):
    head, *rest = value.split(",")
    return head, dict(p.split("=", 1) for p in rest)


def test_each_twin_puts_its_knobs_where_they_belong(tmp_path):
    study = study_at(tmp_path)
    boot = boot_at(tmp_path)
    launches = {arm.name: render(study, arm, boot) for arm in study.arms}
    plain, bounce = launches["plain"], launches["plain+bounce"]
    assert plain.append == "root=/dev/vda1 console=ttyS0"
    assert bounce.append == f"root=/dev/vda1 console=ttyS0 swiotlb={cvm_swiotlb_slabs(1024, 2)},force"
    assert option(bounce.argv, "-append") == [bounce.append]
    for device in option(bounce.argv, "-device"):
        assert props(device)[1].get("iommu_platform") == "on" and props(device)[1].get("disable-legacy") == "on"
    for device in option(plain.argv, "-device"):
        assert "iommu_platform" not in props(device)[1]
    assert "idle=poll" in launches["snp+poll"].append.split()
    assert "cpuidle_haltpoll.force=1" in launches["snp+haltpoll"].append.split()
    assert "accept_memory=eager" in launches["td+eager"].append.split()
    huge = props(option(launches["plain+huge"].argv, "-object")[0])
    assert huge == ("memory-backend-memfd", {"id": "mem0", "size": "1024M", "hugetlb": "on", "hugetlbsize": "2M"})
    assert props(option(plain.argv, "-object")[0])[1].get("hugetlb") is None
    # the same machine for every arm
    for launch in launches.values():
        assert option(launch.argv, "-smp") == ["2,sockets=1,cores=2,threads=1"]
        assert option(launch.argv, "-m") == ["1024M"] and option(launch.argv, "-cpu") == ["host"]
        assert option(launch.argv, "-netdev") == ["user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:2222-:22"]
        assert option(launch.argv, "-fw_cfg") == [f"name=opt/ccbench/ssh_key,file={tmp_path / 'key'}"]
        assert launch.record["append"] == launch.append and launch.record["argv"] == launch.argv
    assert differences([launch.record for launch in launches.values()]) == []


def test_sev_snp_and_tdx_render_as_qemu_documents_them_with_the_schemas_property_names(tmp_path):
    study = study_at(tmp_path)
    boot = boot_at(tmp_path)
    snp = render(study, study.arm("snp"), boot)
    td = render(study, study.arm("td"), boot)
    snp_machine = props(option(snp.argv, "-machine")[0])[1]
    assert snp_machine == {"memory-backend": "mem0", "confidential-guest-support": "cvm0"}
    assert option(snp.argv, "-machine")[0].startswith("q35,")
    td_machine = props(option(td.argv, "-machine")[0])[1]
    assert td_machine == {"memory-backend": "mem0", "confidential-guest-support": "cvm0"}
    assert option(td.argv, "-accel") == ["kvm,kernel-irqchip=split"] and option(snp.argv, "-accel") == ["kvm"]
    assert option(snp.argv, "-bios") == ["/usr/share/OVMF/OVMF.fd"] == option(td.argv, "-bios")
    objects = {props(o)[0]: props(o)[1] for launch in (snp, td) for o in option(launch.argv, "-object")}
    assert objects["sev-snp-guest"] == {
        "id": "cvm0",
        "policy": "0x30000",
        "cbitpos": "51",
        "reduced-phys-bits": "1",
        "kernel-hashes": "on",
    }
    assert objects["tdx-guest"] == {"id": "cvm0", "sept-ve-disable": "on"}
    for qom, properties in objects.items():
        if qom in SCHEMA:
            unknown = set(properties) - SCHEMA[qom] - QOM_OBJECT_BASE
            assert not unknown, f"{qom}: {unknown} are not in qapi/qom.json"
    for launch in (snp, td):
        for device in option(launch.argv, "-device"):
            if device.startswith("virtio-"):
                assert "iommu_platform=on" in device.split(",")
    # without direct kernel boot there are no kernel hashes to add
    booting_itself = render(study, study.arm("snp"), boot_at(tmp_path, kernel=False))
    assert "kernel-hashes" not in " ".join(booting_itself.argv)
    assert "-kernel" not in booting_itself.argv and booting_itself.append == ""


@pytest.mark.skipif(
    shutil.which(QEMU) is None, reason="qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"
)
def test_the_memory_backend_properties_are_this_qemus_and_the_schemas(tmp_path):
    study = study_at(tmp_path, "prealloc = true")
    listed = subprocess.run([QEMU, "-object", "memory-backend-memfd,help"], capture_output=True, text=True).stdout
    this_qemu = {line.split("=", 1)[0].strip() for line in listed.splitlines()[1:] if "=" in line}
    assert {"hugetlb", "prealloc", "size"} <= this_qemu
    for arm in ("plain", "plain+huge", "snp"):
        qom, properties = props(option(render(study, study.arm(arm), boot_at(tmp_path)).argv, "-object")[0])
        assert qom == "memory-backend-memfd" and properties["prealloc"] == "on"
        assert set(properties) - QOM_OBJECT_BASE <= this_qemu & MEMORY_BACKEND_MEMFD


def test_render_refuses_what_cannot_launch(tmp_path):
    study = study_at(tmp_path)
    with pytest.raises(StudyError, match="needs KVM, and this launch is under tcg"):
        render(study, study.arm("snp"), boot_at(tmp_path, accel="tcg"))
    with pytest.raises(StudyError, match="boots through OVMF"):
        render(study, study.arm("td"), boot_at(tmp_path, firmware=None))
    with pytest.raises(StudyError, match="need direct kernel boot"):
        render(study, study.arm("plain+bounce"), boot_at(tmp_path, kernel=False))
    with pytest.raises(StudyError, match="fw_cfg name 'a,b'"):
        render(study, study.arm("plain"), boot_at(tmp_path, fw_cfg={"a,b": tmp_path / "key"}))
    with pytest.raises(StudyError, match="at most 43 bytes"):
        render(study, study.arm("plain"), boot_at(tmp_path, fw_cfg={"k" * 44: tmp_path / "key"}))
    # TCG has no "host" CPU: "auto" becomes "max" for every arm alike
    assert option(render(study, study.arm("plain"), boot_at(tmp_path, accel="tcg")).argv, "-cpu") == ["max"]


def test_differences_names_what_is_no_declared_knob(tmp_path):
    study = study_at(tmp_path)
    base = render(study, study.arm("plain"), boot_at(tmp_path)).record
    twin = render(study, study.arm("plain+bounce"), boot_at(tmp_path)).record
    assert differences([base, twin]) == []
    other = json.loads(json.dumps(twin))
    other["machine"]["memory_mib"] = 2048
    other["image"]["digest"] = "sha256:other"
    other["append"] += " mitigations=off"
    other["devices"][0] = other["devices"][0].replace("num-queues=1", "num-queues=4")
    lines = differences([base, other])
    assert any("machine.memory_mib: 2048 against 1024" in line for line in lines), lines
    assert any("another image" in line and "sha256:other" in line for line in lines), lines
    assert any("'mitigations=off' is neither the image's nor a declared knob" in line for line in lines), lines
    assert any("in devices" in line and "num-queues=4" in line for line in lines), lines
    assert len(lines) == 4
    snp = render(study, study.arm("snp"), boot_at(tmp_path)).record
    snp_poll = render(study, study.arm("snp+poll"), boot_at(tmp_path, firmware=Path("/elsewhere/OVMF.fd"))).record
    assert differences([base, snp]) == []  # the kind's own firmware and objects are declared by the kind
    assert differences([snp, snp_poll]) == [
        "arm 'snp+poll' boots other firmware than 'snp' of its kind (/elsewhere/OVMF.fd against /usr/share/OVMF/OVMF.fd)"
    ]
    # the hugepages twin's backend is declared; the same change without the twin is not
    huge = render(study, study.arm("plain+huge"), boot_at(tmp_path)).record
    assert differences([base, huge]) == []
    undeclared = json.loads(json.dumps(huge))
    undeclared["knobs"]["memory_backend"] = None
    assert any("memory backend" in line for line in differences([base, undeclared]))


# ---- this machine's real QEMU ---------------------------------------------------------------


def multiboot_kernel(path: Path) -> Path:
    """A kernel QEMU's loader accepts at start: the Multiboot header (spec 0.6.96, section 3.1) with
    the address fields, over a page of HLT. Under -S no guest instruction runs: the test checks the
    command line, not a kernel."""
    magic, flags = 0x1BADB002, 0x00010000
    header = struct.pack("<8I", magic, flags, (-(magic + flags)) & 0xFFFFFFFF, 0x100000, 0x100000, 0, 0, 0x100020)
    path.write_bytes(header + b"\xf4" * 4096)
    return path


def monitor(path: Path, timeout: float = 30):
    """The QEMU project's QMP client (qemu.qmp), connected once QEMU has made its socket."""
    from qemu.qmp.legacy import QEMUMonitorProtocol

    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no QMP socket at {path}")
        time.sleep(0.05)
    client = QEMUMonitorProtocol(str(path))
    client.connect(negotiate=True)
    client.settimeout(timeout)
    return client


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(
    shutil.which(QEMU) is None, reason="qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"
)
@pytest.mark.parametrize("machine", ["", '[machine.disk]\nbus = "virtio-scsi"\n'], ids=["virtio-blk", "virtio-scsi"])
def test_this_machines_qemu_accepts_a_plain_arm_and_its_bounce_twin(tmp_path, machine):
    cpu = min(os.sched_getaffinity(0))  # a host CPU this test may use
    study = study_at(tmp_path, f"pin = [{cpu}, {cpu}]\n" + machine)
    multiboot_kernel(tmp_path / "vmlinuz")
    (tmp_path / "initrd").write_bytes(b"initrd")
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(tmp_path / "overlay.qcow2"), "64M"], check=True)
    for name in ("plain", "plain+bounce"):
        boot = boot_at(tmp_path, accel="tcg", port=free_port(), qmp_socket=tmp_path / f"{name}.sock")
        launch = render(study, study.arm(name), boot)
        process = subprocess.Popen([*launch.argv, "-S"], stderr=subprocess.PIPE, text=True)
        try:
            qmp = monitor(boot.qmp_socket)
            status = qmp.cmd("query-status")
            assert status["status"] == "prelaunch" and status["running"] is False
            cpus = qmp.cmd("query-cpus-fast")
            assert len(cpus) == 2
            pinned = pin_vcpus(cpus, launch.pin)
            assert len(pinned) == 2
            for thread in pinned:
                assert os.sched_getaffinity(thread) == {cpu}
            assert int(boot.pidfile.read_text()) == process.pid
            qmp.cmd("quit")
            with contextlib.suppress(EOFError):  # QEMU closes the socket as it quits
                qmp.close()
            assert process.wait(timeout=30) == 0, process.stderr.read()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        with pytest.raises(ProcessLookupError):  # quit, and reaped: no QEMU left behind
            os.kill(process.pid, 0)


@pytest.mark.skipif(
    shutil.which(QEMU) is None, reason="qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"
)
def test_a_guests_monitor_pauses_and_resumes_it_and_a_refusal_is_one_line(tmp_path):
    """Guest.qmp through the QEMU project's client: stop and cont reach the real QEMU's monitor; a
    command it refuses, or a monitor that is gone, is an EnvironmentProblem naming the guest."""
    from ccbench.basics.errors import EnvironmentProblem
    from ccbench.machines.guest import Guest, socket_dir

    guest = Guest(name="plain", run_dir=tmp_path, ssh_port=0)
    socket_dir(guest.rid).mkdir(mode=0o700)
    process = subprocess.Popen(
        [
            QEMU,
            "-machine",
            "none",
            "-nodefaults",
            "-display",
            "none",
            "-qmp",
            f"unix:{guest.qmp_socket},server=on,wait=off",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        monitor(guest.qmp_socket).close()  # waits for the socket
        guest.qmp("stop")
        assert guest.qmp("query-status")["status"] == "paused"
        guest.qmp("cont")
        assert guest.qmp("query-status")["running"] is True
        with pytest.raises(EnvironmentProblem, match=r"^guest plain: QEMU's monitor refused no-such-command: "):
            guest.qmp("no-such-command")
    finally:
        process.kill()
        process.wait()
        shutil.rmtree(socket_dir(guest.rid), ignore_errors=True)
    with pytest.raises(EnvironmentProblem, match=r"^guest plain: QEMU's monitor refused stop: "):
        guest.qmp("stop")


@pytest.mark.skipif(
    shutil.which(QEMU) is None, reason="qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"
)
def test_qemu_binds_the_ssh_forward_itself_and_the_guest_reads_its_port_back(tmp_path, monkeypatch):
    """issue 59, item 8: two arms' QEMUs (the study's own command line, started paused) each bind a
    port of their own for the SSH forward (hostfwd port 0), and the launcher reads it back over QMP
    (info usernet): no port is probed free and released first, which another program could take."""
    from ccbench.machines.guest import Guest, socket_dir

    monkeypatch.setenv("CCBENCH_GUEST_INDEX", str(tmp_path / "index"))
    study = study_at(tmp_path)
    multiboot_kernel(tmp_path / "vmlinuz")
    (tmp_path / "initrd").write_bytes(b"initrd")
    guests = []
    try:
        for name in ("plain", "plain+bounce"):
            guest = Guest(name=name, run_dir=tmp_path / name)
            guest.enter()
            guests.append(guest)
            disk = tmp_path / f"{name}.qcow2"
            subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "64M"], check=True)
            boot = boot_at(
                tmp_path, accel="tcg", port=0, qmp_socket=guest.qmp_socket, pidfile=tmp_path / f"{name}.pid", disk=disk
            )
            launch = render(study, study.arm(name), boot)
            assert "hostfwd=tcp:127.0.0.1:0-:22" in " ".join(launch.argv)
            guest.start([*launch.argv, "-S"])
            port = guest.read_ssh_port()
            assert json.loads(guest.entry.read_text())["ssh_port"] == port
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                pass  # QEMU listens there
        assert guests[0].ssh_port != guests[1].ssh_port and all(g.ssh_port > 0 for g in guests)
    finally:
        for guest in guests:
            guest.stop(grace_s=5)
    assert all(not socket_dir(g.rid).exists() for g in guests)
