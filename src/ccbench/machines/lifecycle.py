"""A study of machines from nothing to a comparison: host check, image, guests, the plan through the
fleet, the comparison, and every guest stopped on success, failure and interruption.

One directory per study run (``<out>/machines-<study>-<time>/``): ``study.json`` (the study as
loaded, the host's facts, the image, each arm's launch record and boot time, the schedule and how
each round ended), the study's SSH client key and known_hosts (each guest's host key is made here
and handed to it through fw_cfg, so SSH checks it strictly), ``arms/<arm>/`` (console and QEMU
logs), ``round-<k>/`` (the fleet run of round k: ``fleet-*/<arm>/<bundle>``), and ``compare.txt``
and ``report.html`` over every round's bundles, each labelled with its arm.

``interleaved``: every arm is booted once and stays up, paused (QMP ``stop``) except during its own
turns; each turn is one fleet run of that arm alone, in the round's order (``Study.schedule``), and
the arm's clock is set from the host's when it resumes. ``rounds``: each round boots each arm
afresh, runs the plan in it and stops it, in the round's order. Guests that a killed study left
are swept first (``guest.sweep``), as ``ccbench cleanup`` does.

A study with ``[sweep]`` (docs/machines.md, section 12) first launches each arm at each memory size
and times it (ccbench.machines.sweeprun: ``launch-times.jsonl``, ``launch-time.json``), then runs
its rounds at each vCPU count in ``vcpus-<N>/`` (compared there), or once without a vCPU sweep.
The comparison itself is ccbench.machines.studycompare.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ccbench.basics.errors import CCBenchError, EnvironmentProblem
from ccbench.basics.fsutil import make_new_dir, write_json_atomic, write_text_atomic
from ccbench.machines import guest as guests
from ccbench.machines import hostcheck, qemu
from ccbench.machines.image import GuestImage, ensure_image, user_image
from ccbench.machines.study import Study
from ccbench.machines.studycompare import bundles_by_arm, compare_arms
from ccbench.machines.studyfile import load_study
from ccbench.machines.sweeprun import SAMPLES, launch_sweep
from ccbench.run.workdir import DEFAULT_WORKDIR

QEMU = "qemu-system-x86_64"
BOOT_TIMEOUT_S = 300.0


def resolve_image(study: Study, echo: Callable[[str], None]) -> GuestImage:
    image = study.image
    if image.kind == "debian-12":
        return ensure_image(echo=echo)
    if image.kind == "kernel":
        return user_image(image.disk, image.kernel, image.initrd, image.append, image.format)
    raise EnvironmentProblem(
        f"{study.source}: an image that boots itself through firmware is not launched by this version; "
        "name its kernel and initrd in [image] (direct kernel boot)"
    )


class StudyRun:
    """The guests of one study run and their records; a context manager that stops every guest."""

    def __init__(self, study: Study, image: GuestImage, directory: Path, echo: Callable[[str], None], **options):
        self.study, self.image, self.directory, self.echo = study, image, directory, echo
        self.boot_timeout_s = float(options.get("boot_timeout_s") or BOOT_TIMEOUT_S)
        #: the work directory that owns the guests and SSH connections (ccbench cleanup --workdir)
        self.workdir = Path(options.get("workdir") or DEFAULT_WORKDIR).resolve()
        self.accel = options.get("accel") or hostcheck.accel()
        self.running: dict[str, guests.Guest] = {}
        self.document: dict[str, Any] = {
            "study": str(study.source),
            "name": study.name,
            "plan": study.plan,
            "order": study.order,
            "schedule": [list(names) for _r, names in study.schedule()],
            "image": image.record(),
            "host": hostcheck.host_facts(QEMU),
            "accel": self.accel,
            "arms": {},
            "rounds": [],
            "status": "running",
        }
        self.key = directory / "id_ed25519"
        self.known_hosts = directory / "known_hosts"

    def __enter__(self) -> StudyRun:
        self.directory.mkdir(parents=True, exist_ok=True)  # run_study made it its own already
        guests.keygen(self.key, f"ccbench-study-{self.study.name}")
        self.known_hosts.write_text("")
        self.save()
        return self

    def __exit__(self, *exc) -> None:
        self.down_all()
        self.save()

    def save(self) -> None:
        write_json_atomic(self.directory / "study.json", self.document)

    # -- guests
    def up(self, arm_name: str, study: Study | None = None, label: str | None = None) -> guests.Guest:
        """Boot an arm and wait until it is ready; ``study`` another point of the study's sweep (its
        memory or vCPUs), ``label`` the name the guest is known by (default: the arm's)."""
        study = study or self.study
        arm = study.arm(arm_name)
        label = label or arm.name
        run_dir = self.directory / "arms" / _safe(label)
        files = run_dir / "fw_cfg"
        files.mkdir(parents=True, exist_ok=True)
        host_key = guests.keygen(files / "ssh_host_ed25519_key", f"{arm.name}@ccbench")
        Path(f"{files / 'ssh_host_ed25519_key'}.pub").unlink()
        shutil.copyfile(f"{self.key}.pub", files / "authorized_keys")
        (files / "hostname").write_text(_safe(arm.name).replace("+", "-") + "\n")
        (files / "machine_id").write_text(
            hashlib.sha256(f"{self.study.name}\0{arm.name}".encode()).hexdigest()[:32] + "\n"
        )
        fw_cfg = {name: files / name for name in ("authorized_keys", "ssh_host_ed25519_key", "hostname", "machine_id")}
        fw_cfg["launch"] = files / "launch"
        overlay = run_dir / "overlay.qcow2"
        guest = guests.Guest(label, run_dir, workdir=self.workdir)
        guest_id = guest.rid
        firmware = hostcheck.find_firmware(arm.kind) if arm.confidential else None
        boot = qemu.Boot(
            qemu=QEMU,
            accel=self.accel,
            kernel=self.image.kernel,
            initrd=self.image.initrd,
            disk=overlay,
            disk_format="qcow2",
            base_append=self.image.base_append,
            ssh_port=0,  # QEMU binds a free one itself: read back once it runs
            serial_log=run_dir / "console.log",
            pidfile=run_dir / "qemu.pid",
            qmp_socket=guests.socket_dir(guest_id) / "qmp.sock",
            fw_cfg=fw_cfg,
            firmware=firmware,
            image_digest=self.image.digest,
            firmware_digest=hostcheck.firmware_digest(firmware),
        )
        launch = qemu.render(study, arm, boot)
        # the host's kernel, firmware and TEE module versions travel with every bundle, beside the
        # guest's own evidence (a slow CVM is often an old SEV firmware or TDX module)
        record = {
            **launch.record,
            "image": {**launch.record.get("image", {}), **self.image.record()},
            "host": self.document["host"],
        }
        write_json_atomic(files / "launch", record)
        guest.enter()  # recorded before anything is made
        self.running[label] = guest
        (run_dir / "console.log").unlink(missing_ok=True)
        subprocess.run(
            [
                "qemu-img",
                "create",
                "-q",
                "-f",
                "qcow2",
                "-b",
                str(self.image.disk),
                "-F",
                self.image.disk_format,
                str(overlay),
            ],
            check=True,
            capture_output=True,
        )
        self.echo(f"{label}: booting ({arm.kind}, {self.accel}) ...")
        guest.start(launch.argv)
        port = guest.read_ssh_port()
        with open(self.known_hosts, "a") as handle:
            handle.write(f"[127.0.0.1]:{port} {host_key}\n")
        ready = guest.wait_ready(guests.ssh_probe(port, self.key, self.known_hosts), self.boot_timeout_s)
        if launch.pin:
            qemu.pin_vcpus(guest.qmp("query-cpus-fast") or [], launch.pin)
        self.echo(f"{label}: ready in {ready:.1f} s (ssh -p {port} root@127.0.0.1)")
        self.document["arms"].setdefault(label, {"launch": record, "boots": []})["boots"].append(
            {"ready_s": round(ready, 2), "ssh_port": port}
        )
        self.save()
        return guest

    def pause(self, arm_name: str) -> None:
        self.running[arm_name].qmp("stop")

    def resume(self, arm_name: str) -> None:
        """Let a paused arm run again, and set its clock: a guest's wall clock stands still while its
        vCPUs are stopped, and would stamp its bundle and executions as far in the past as it waited
        (to within the SSH command's latency, well under a second)."""
        guest = self.running[arm_name]
        guest.qmp("cont")
        done = subprocess.run(
            [*guests.ssh_command(guest.ssh_port, self.key, self.known_hosts), f"date -u -s @{time.time():.3f}"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            raise EnvironmentProblem(
                f"guest {arm_name}: its clock could not be set after the pause (ssh exit {done.returncode}: "
                f"{(done.stderr or done.stdout).strip()[:200]})"
            )

    def down(self, arm_name: str) -> None:
        """Stop an arm's guest, and say so with how long it took; kept among the running until it is
        stopped (stop can be called again after an interruption)."""
        guest = self.running.get(arm_name)
        if guest is None:
            return
        started = time.monotonic()
        lines = guest.stop()
        del self.running[arm_name]
        for line in lines:
            self.echo(f"{line} in {time.monotonic() - started:.1f} s")

    def down_all(self) -> None:
        """Stop every guest; a Ctrl-C meanwhile does not leave one running (each holds its memory)."""
        if self.running:
            self.echo(f"stopping {len(self.running)} guest(s): {', '.join(self.running)}")
        while self.running:
            try:
                self.down(next(iter(self.running)))
            except KeyboardInterrupt:
                self.echo("stopping the guests first: none is left running")

    # -- the plan
    def inventory(self, names: tuple[str, ...], path: Path) -> Path:
        lines = ["[study]"]
        for name in names:
            guest = self.running[name]
            baseline = " ccbench_baseline=true" if name == self.study.baseline else ""
            lines.append(
                f"{_host(name)} ansible_host=127.0.0.1 ansible_port={guest.ssh_port} ansible_user=root "
                f"ansible_ssh_private_key_file={self.key} "
                f"ansible_ssh_common_args='-o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes' "
                f"ansible_python_interpreter=/usr/bin/python3 ccbench_label={name}{baseline}"
            )
        write_text_atomic(path, "\n".join(lines) + "\n")
        return path

    def run_round(self, index: int, names: tuple[str, ...]) -> int:
        from ccbench.fleet.engine import run_fleet
        from ccbench.fleet.start import FleetOptions

        out = self.directory / f"round-{index + 1}"
        out.mkdir(parents=True, exist_ok=True)
        inventory = self.inventory(names, out / "hosts.ini")
        others = " (the other arms paused)" if self.study.order == "interleaved" and len(self.running) > 1 else ""
        self.echo(f"round {index + 1} of {self.study.rounds}: {', '.join(names)}{others}")
        options = FleetOptions(
            plan=self.study.plan,
            inventory=str(inventory),
            out=str(out),
            mode="serial",
            report=False,
            workdir=str(self.workdir),
            resumable=False,  # the guests are stopped when the study ends: the study is what runs again
        )
        code = run_fleet(options, self.echo)
        self.document["rounds"].append({"round": index + 1, "arms": list(names), "exit": code})
        self.save()
        return code


def study_directory(out: Path, name: str, now: datetime | None = None) -> Path:
    """The study run's directory, made here: ``machines-<study>-<UTC second>``, with ``-2``, ``-3``...
    when another study run holds that name (two copies started in the same second with one --out)."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return make_new_dir(out, f"machines-{_safe(name)}-{stamp}")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._+-" else "_" for c in name)


def _host(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)


class HostRefused(CCBenchError):
    """The host (or the image's kernel) cannot launch some arm: every reason, one line each."""

    def __init__(self, lines: list[str]):
        # the CLI prints "ccbench: error: " before the first line; every line gets it
        super().__init__("\nccbench: error: ".join(lines))
        self.lines = lines


def preflight(study: Study, out: Path) -> list[str]:
    """What keeps the study from starting on this host, one line each ([] when nothing does): the
    host check, and Ansible (the fleet's road into the guests) checked before any guest boots."""
    from ccbench.fleet.inventory import ansible_tool

    problems = hostcheck.check(study, QEMU, overlay_dir=out)
    if not study.rounds:
        return problems  # a launch-time study runs no plan: no Ansible needed
    try:
        ansible_tool("ansible-playbook")
    except EnvironmentProblem as missing:
        problems.append(str(missing))
    return problems


def run_study(
    path: str | Path,
    out: str | Path,
    echo: Callable[[str], None],
    *,
    boot_timeout_s: float | None = None,
    workdir: str | Path | None = None,
) -> int:
    """Run a study from nothing to its comparison; the exit code (0 ok, 1 an arm failed, 130 interrupted).
    ``workdir`` owns its guests and SSH connections: what a killed study left, ``ccbench cleanup
    --workdir`` (and the next study with that work directory) removes."""
    from ccbench.machines.guestkernel import guest_kernel_lacks

    study = load_study(path)
    # absolute: QEMU runs in the arm's directory, and every path of its command line must hold there
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    workdir = Path(workdir or DEFAULT_WORKDIR)
    workdir.mkdir(parents=True, exist_ok=True)
    from ccbench.fleet.sshcontrol import sweep_control_dirs

    for line in guests.sweep(workdir) + sweep_control_dirs(workdir):
        echo(line)
    problems = preflight(study, out)
    launched, rendered_only, problems = split_launchable(study, problems)
    if problems:
        raise HostRefused(problems)
    for warning in hostcheck.firmware_warnings(study):
        echo(f"warning: {warning}")
    image = resolve_image(study, echo)
    if image.kernel_config:
        served = replace(study, arms=tuple(a for a in study.arms if a.name in launched))
        problems = guest_kernel_lacks(served, image.kernel_config, image.facts.get("kernel_release", ""))
        if problems:
            raise HostRefused(problems)
    directory = study_directory(out, study.name)
    echo(
        f"study {study.name}: {len(study.arms)} arms ({', '.join(a.name for a in study.arms)}), plan {study.plan}, "
        f"{study.rounds} round(s) {study.order}, baseline {study.baseline} -> {directory}"
    )
    code = 0
    with StudyRun(study, image, directory, echo, boot_timeout_s=boot_timeout_s, workdir=workdir) as run:
        run.document["status"] = "failed"  # until the rounds say otherwise: a guest that never booted, a stop
        run.document["sweep"] = study.sweep.as_dict()
        try:
            code = _sweep_and_rounds(run, launched, rendered_only)
        except KeyboardInterrupt:
            code = 130
        except BaseException as error:  # a guest that did not boot, SIGTERM or SIGHUP (errors.Stopped)
            run.document["status"] = f"failed: {error}" if isinstance(error, CCBenchError) else f"stopped: {error!r}"
            raise
        run.document["status"] = "interrupted" if code == 130 else "complete"
    if code == 130:
        kept = sum(len(bundles_by_arm(d)) for d in [directory, *sorted(directory.glob("vcpus-*"))])
        launches = len((directory / SAMPLES).read_text().splitlines()) if (directory / SAMPLES).exists() else 0
        words = ["ccbench", "machines", "run", str(study.source), "--out", str(out)]
        again = shlex.join(words + (["--workdir", str(workdir)] if str(workdir) != DEFAULT_WORKDIR else []))
        echo(
            f"interrupted: every guest is stopped; {kept} bundle(s) and {launches} launch time(s) measured before "
            f"the stop are kept in {directory}. A study does not resume: to measure it in full, run it again: {again}"
        )
        return 130
    if study.rounds and not study.sweep.vcpu_points:
        code = max(code, compare_arms(directory, study, echo))
    return code


def split_launchable(study: Study, problems: list[str]) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """(arms to launch, (arm, why) rendered only, problems left). Only a launch-time study (rounds = 0)
    renders the arms this host cannot launch instead of refusing the study: it compares launches, and a
    confidential arm's command line, firmware and acceptance are kept beside the plain arms' times."""
    names = [a.name for a in study.arms]
    if study.rounds or not problems:
        return names, [], problems
    refused = {}
    for arm in study.arms:
        for line in problems:
            if line.startswith(f"arm '{arm.name}' ("):
                refused[arm.name] = line.split(": ", 1)[1]
    launched = [n for n in names if n not in refused]
    left = [line for line in problems if not any(line.startswith(f"arm '{n}' (") for n in refused)]
    if not launched:
        return [], [], problems
    return launched, list(refused.items()), left


def _sweep_and_rounds(run: StudyRun, launched: list[str], rendered_only: list[tuple[str, str]]) -> int:
    """The launch-time sweep (if any), then the rounds: at each vCPU count of the sweep in a directory
    of its own (``vcpus-N/``, every arm, compared there), or once at the study's machine."""
    study = run.study
    if study.sweep.memory_points:
        launch_sweep(run, launched, rendered_only, QEMU)
    if not study.rounds:
        return 0
    if not study.sweep.vcpu_points:
        return _rounds(run)
    worst = 0
    for point in study.sweep.vcpu_points:
        sub = run.directory / f"vcpus-{point.machine.vcpus}"
        run.echo(f"at {point.machine.vcpus} vCPUs: {len(point.arms)} arms, {point.rounds} round(s) -> {sub}")
        options = {"boot_timeout_s": run.boot_timeout_s, "workdir": run.workdir, "accel": run.accel}
        with StudyRun(point, run.image, sub, run.echo, **options) as inner:
            inner.document["status"] = "failed"
            code = _rounds(inner)
            inner.document["status"] = "interrupted" if code == 130 else "complete"
        if code == 130:
            return 130
        worst = max(worst, code, compare_arms(sub, point, run.echo))
    return worst


def _rounds(run: StudyRun) -> int:
    """Every round's arms in the round's order. Interleaved: every arm booted once, and while one runs
    the plan the others are paused (QMP ``stop``: their vCPUs do not run, so a waiting arm takes no
    CPU from the measured one, even one that polls when idle). Rounds: each arm booted for its turn."""
    worst = 0
    interleaved = run.study.order == "interleaved"
    if interleaved:
        for name in run.study.schedule()[0][1]:
            run.up(name)
            run.pause(name)
    for index, names in run.study.schedule():
        for name in names:
            if interleaved:
                run.resume(name)
            else:
                run.up(name)
            try:
                code = run.run_round(index, (name,))
            finally:
                if interleaved:
                    run.pause(name)
                else:
                    run.down(name)
            worst = max(worst, code)
            if code == 130:
                return 130
    return worst
