"""A cloud study from launch to comparison: the arms' instances (``lifecycle.run_arms``) become a
fleet inventory (public address, the run's user and key, the run's known_hosts with the host key
made for each instance: strict checking from the first connection), each instance gets its facts
(provider, region and zone, instance type, image, the API's own CC flag as returned) as its launch
record, which ccbench's probe reads into every bundle (``machine_launch``), and the plan runs
through the fleet with rounds interleaved across the arms while every instance stays up. Before the
first turn, ccbench's TEE detector runs in every instance's guest over the same SSH
(``guestprobe``) and its answer is checked against the arm's kind (``tee.check_guest``): a
confidential arm whose guest shows no TEE (or a plain arm whose guest shows one) stops the study in
one line before any plan runs, whatever the cloud said; after an arm's first turn its bundles' own
probe is checked the same way.

One directory per run (``<out>/cloud-<study>-<time>/``): ``study.json`` (the study, each instance's
facts, how each turn ended), ``access/`` (the run's keys: the private ones deleted at the
teardown), ``hosts.ini``, ``round-<k>/fleet-*/`` (the fleet's runs and bundles), and the local studies' ending
(``ccbench.machines.lifecycle.compare_arms``): ``compare.txt``, ``report.html``, the twins' evidence and
each arm's launch facts."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from ccbench.basics.errors import CCBenchError, EnvironmentProblem
from ccbench.basics.fsutil import make_new_dir, write_json_atomic, write_text_atomic
from ccbench.machines.cloud.access import USER, Access
from ccbench.machines.cloud.guestprobe import probe_tee
from ccbench.machines.cloud.provider import Launched, Provider
from ccbench.machines.cloud.tee import check_guest

Echo = Callable[[str], None]
SSH_READY_S = 600.0
LAUNCH_RECORD = "/run/ccbench/launch.json"


def schedule(study) -> list[tuple[int, tuple[str, ...]]]:
    """Each round's arms in order, round r starting r places along (A B, B A, ...), as local studies do."""
    names = [a.name for a in study.arms]
    return [(r, tuple(names[r % len(names) :] + names[: r % len(names)])) for r in range(study.rounds)]


def _host(launched: Launched) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in f"{launched.arm}-{launched.replica}")


class CloudStudyRun:
    def __init__(self, study, provider: Provider, directory: Path, echo: Echo, workdir: str | None = None):
        self.study, self.provider, self.directory, self.echo = study, provider, directory, echo
        self.workdir = workdir
        self.access = Access(directory / "access")
        #: the login on every instance (a stand-in's hosts may take root)
        self.user = getattr(provider, "login_user", USER)
        self.document: dict[str, Any] = {
            "study": str(study.source),
            "name": study.name,
            "plan": study.plan,
            "provider": study.cloud.provider,
            "schedule": [list(names) for _r, names in schedule(study)],
            "instances": {},
            "rounds": [],
            "status": "running",
        }
        self.checked: set[str] = set()

    def save(self) -> None:
        write_json_atomic(self.directory / "study.json", self.document)

    # -- the instances, once launched
    def facts(self, launched: Launched) -> dict[str, Any]:
        arm = next(a for a in self.study.arms if a.name == launched.arm)
        cloud = self.study.cloud
        return {
            "launcher": "ccbench cloud",
            "arm": arm.name,
            "kind": arm.kind,
            "replica": launched.replica,
            "provider": cloud.provider,
            "region": cloud.region,
            "zone": cloud.zone,
            "instance_type": arm.size.name,
            "image": arm.image,
            "instance_id": launched.id,
            "cloud_says": launched.cloud_says,
        }

    def ssh(self, launched: Launched, command: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["ssh", *self.access.ssh_options(), f"{self.user}@{launched.address}", command],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def ready(self, launched: Launched, timeout_s: float = SSH_READY_S) -> float:
        """Wait until SSH answers with the host key made for the instance; seconds waited."""
        started = time.monotonic()
        while True:
            done = self.ssh(launched, "true")
            if done.returncode == 0:
                return time.monotonic() - started
            if "host key" in done.stderr.lower() and "verification failed" in done.stderr.lower():
                raise EnvironmentProblem(
                    f"instance {launched.name} ({launched.address}) offers another host key than the one made for "
                    "it: stopping the study (the address may not be the instance's)"
                )
            if time.monotonic() - started > timeout_s:
                last = (done.stderr.strip().splitlines() or ["no answer"])[-1]
                raise EnvironmentProblem(
                    f"instance {launched.name} ({launched.address}): no SSH after {timeout_s:.0f} s ({last})"
                )
            time.sleep(3)

    def record_launch(self, launched: Launched, facts: dict[str, Any]) -> None:
        """Write the instance's facts where ccbench's probe reads a launch record (its bundles carry it)."""
        sudo = "" if self.user == "root" else "sudo -n "
        command = f"{sudo}sh -c 'umask 022; mkdir -p /run/ccbench && cat > {LAUNCH_RECORD}'"
        done = self.ssh(launched, command, json.dumps(facts, sort_keys=True))
        if done.returncode != 0:
            raise EnvironmentProblem(
                f"instance {launched.name}: its launch record could not be written ({done.stderr.strip()[:200]})"
            )

    def inventory(self, launched: list[Launched]) -> Path:
        lines = ["[study]"]
        for one in launched:
            baseline = " ccbench_baseline=true" if one.arm == self.study.baseline else ""
            lines.append(f"{_host(one)} ansible_host={one.address} ccbench_label={one.arm}{baseline}")
        options = " ".join(self.access.ssh_options()[2:])  # the key has its own variable
        become = "" if self.user == "root" else "ansible_become=true\n"
        lines += [
            "",
            "[study:vars]",
            f"ansible_user={self.user}",
            f"ansible_ssh_private_key_file={self.access.key}",
            f"ansible_ssh_common_args='{options}'",
            "ansible_python_interpreter=/usr/bin/python3",
            become,
        ]
        path = self.directory / "hosts.ini"
        write_text_atomic(path, "\n".join(lines))
        return path

    def up(self, launched: list[Launched]) -> Path:
        for one in launched:
            self.provider.address(one)
            self.access.trust(one.address, self.access.host_public(one.name))
        for one in launched:
            waited = self.ready(one)
            facts = self.facts(one)
            self.record_launch(one, facts)
            self.document["instances"][_host(one)] = {**facts, "address": one.address, "ssh_ready_s": round(waited, 1)}
            self.echo(f"{one.arm} #{one.replica}: {one.address} answers SSH with its own host key ({waited:.0f} s)")
        self.save()
        return self.inventory(launched)

    # -- the plan
    def turn(self, index: int, arm: str, inventory: Path, launched: list[Launched]) -> int:
        from ccbench.fleet.engine import run_fleet
        from ccbench.fleet.start import FleetOptions

        out = self.directory / f"round-{index + 1}"
        out.mkdir(parents=True, exist_ok=True)
        hosts = [_host(one) for one in launched if one.arm == arm]
        self.echo(f"round {index + 1} of {self.study.rounds}: {arm} ({len(hosts)} instance(s))")
        before = set(out.glob("fleet-*"))
        options = FleetOptions(
            plan=self.study.plan,
            inventory=str(inventory),
            out=str(out),
            mode="parallel",
            limit=",".join(hosts),
            report=False,
            workdir=self.workdir,
            resumable=False,  # the instances go with the study
        )
        code = run_fleet(options, self.echo)
        self.document["rounds"].append({"round": index + 1, "arm": arm, "exit": code})
        self.save()
        if arm not in self.checked and code != 130:
            self.check_tee(arm, sorted(set(out.glob("fleet-*")) - before), launched)
        return code

    def check_tee(self, arm_name: str, fleets: list[Path], launched: list[Launched]) -> None:
        """The guests' own probe against the arm's kind: NoTee (one line) stops the study."""
        arm = next(a for a in self.study.arms if a.name == arm_name)
        says = next((one.cloud_says for one in launched if one.arm == arm_name), {})
        seen = 0
        for manifest in sorted(p for f in fleets for p in f.glob("**/manifest.json")):
            environment = (json.loads(manifest.read_text()).get("environment")) or {}
            facts = check_guest(arm.name, arm.kind, environment, says)
            self.document.setdefault("tee", {})[str(manifest.parent.relative_to(self.directory))] = facts
            seen += 1
        if not seen:
            raise CCBenchError(f"arm '{arm_name}': no bundle came back to show its TEE; stopping the study")
        self.checked.add(arm_name)
        self.save()

    def probe_tees(self, launched: list[Launched]) -> None:
        """ccbench's TEE detector in every instance's guest, checked against its arm's kind before any
        plan turn: NoTee (one line) stops the study, and the teardown follows."""
        kinds = {a.name: a.kind for a in self.study.arms}
        for one in launched:
            document = probe_tee(partial(self.ssh, one), one.name, self.user == "root")
            facts = check_guest(one.arm, kinds[one.arm], document, one.cloud_says)
            self.document.setdefault("tee_before_plan", {})[_host(one)] = facts
            self.save()
            shown = "; ".join(facts["evidence"][:2]) or "no evidence either way"
            self.echo(f"{one.arm} #{one.replica}: its guest shows {facts['guest_shows']} ({shown})")

    def rounds(self, launched: list[Launched]) -> int:
        inventory = self.up(launched)
        self.probe_tees(launched)
        worst = 0
        for index, names in schedule(self.study):
            for name in names:
                code = self.turn(index, name, inventory, launched)
                worst = max(worst, code)
                if code == 130:
                    return 130
        return worst


def run_directory(out: Path, name: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(c if c.isalnum() or c in "._+-" else "_" for c in name)
    return make_new_dir(out, f"cloud-{safe}-{stamp}")


#: the launch facts that must be the same on every arm (the CC mode, and on Azure the size that
#: carries it, may differ: the study file's matched-arm rule checked those before the launch)
SHARED_FACTS = ("provider", "region", "zone", "image")


def launch_facts(directory: Path, study) -> list[str]:
    """Each arm's launch facts as its instances were made (study.json's instances), and whether the
    arms, as launched, share what they must; the result is recorded in study.json too."""
    document = json.loads((directory / "study.json").read_text())
    instances = list(document.get("instances", {}).values())
    lines = []
    for arm in study.arms:
        for facts in (f for f in instances if f.get("arm") == arm.name):
            said = json.dumps(facts.get("cloud_says") or {}, sort_keys=True)
            lines.append(
                f"{arm.name} #{facts.get('replica')}: {facts.get('provider')} {facts.get('region')} "
                f"{facts.get('zone') or '-'}, {facts.get('instance_type')}, image {facts.get('image')}, "
                f"CC flag as returned {said}"
            )
    confounded = [
        f"{key} differs: " + ", ".join(sorted({f"{f.get('arm')}={f.get(key)}" for f in instances}))
        for key in SHARED_FACTS
        if len({str(f.get(key)) for f in instances}) > 1
    ]
    document["launch_differences"] = confounded
    write_json_atomic(directory / "study.json", document)
    if confounded:
        return lines + [f"launch confounded: {line}" for line in confounded]
    return lines + [f"the arms share {', '.join(SHARED_FACTS)} as launched ({len(instances)} instances)"]


def compare(directory: Path, study, echo: Echo) -> int:
    """The local studies' ending over every round's bundles (compare.txt, report.html, the twins'
    evidence), with the instances' launch facts."""
    from ccbench.machines.lifecycle import compare_arms

    return compare_arms(directory, study, echo, launch_facts)


def run(
    study, provider: Provider, out: Path, echo: Echo, state: Path, ssh_from: str, workdir: str | None = None
) -> int:
    """Launch, run the plan on every arm, compare, and tear everything down; the exit code."""
    from ccbench.machines.cloud.lifecycle import run_arms

    directory = run_directory(Path(out).resolve(), study.name)
    runner = CloudStudyRun(study, provider, directory, echo, workdir)
    echo(f"cloud study {study.name}: {', '.join(a.name for a in study.arms)} -> {directory}")
    try:
        code = run_arms(study, provider, runner.rounds, echo, state, runner.access, ssh_from)
    except BaseException as error:
        runner.document["status"] = f"failed: {error}" if isinstance(error, CCBenchError) else f"stopped: {error!r}"
        runner.save()
        raise
    runner.document["status"] = "interrupted" if code == 130 else "complete"
    runner.save()
    if code == 130:
        return 130
    return max(code, compare(directory, study, echo))
