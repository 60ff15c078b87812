"""ccbench machines: launch the machines a study compares (a plain VM, its SEV-SNP and TDX twins, one
mechanism twin per knob, from one image on one host) and run a plan in each."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ccbench.commands.options import workdir_option

STUDY_HELP = "A study file (TOML; docs/machines.md): the plan, the image, the shared machine and the arms."


@click.group()
def command() -> None:
    """Launch the machines a study compares (QEMU, from one image on this host), run the plan in each
    through the fleet, and compare arm against arm (docs/machines.md). A study with a [cloud] table
    names AWS, GCP or Azure arms instead: check and run --dry-run print their exact requests and price
    (section 11; never run against a real cloud)."""


@command.command("run")
@click.argument("study", type=click.Path(dir_okay=False))
@click.option(
    "--out",
    default="results",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Directory that receives the study run (<out>/machines-<study>-<time>/: study.json, the arms' "
    "console logs, each round's fleet run, compare.txt, report.html).",
)
@workdir_option(
    "The work directory that owns the study's guests and SSH connections: after a killed study, "
    "'ccbench cleanup --workdir DIR' stops and removes what it left (and only that).",
    file_okay=False,
)
@click.option(
    "--boot-timeout",
    type=click.FloatRange(min=1),
    default=300,
    show_default=True,
    help="Seconds a guest may take from launch until SSH answers (software emulation: 10-20 s for ccbench's image).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Cloud study: print each arm's exact request, the differences between arms and the price; launch nothing.",
)
@click.option(
    "--yes",
    is_flag=True,
    help="Cloud study: launch without asking at the price estimate (needed when not on a terminal).",
)
@click.option(
    "--ssh-from",
    metavar="CIDR",
    help="Cloud study: the only addresses SSH to the instances may come from, e.g. your address "
    "203.0.113.7/32 (default: [cloud] ssh_from; one of them is required).",
)
def run_command(study, out, workdir, boot_timeout, dry_run, yes, ssh_from) -> None:
    """Check the host, build or reuse the image, boot the arms, run the plan in every arm through the
    fleet (Ansible over SSH to the loopback port forwarded to each guest), compare the arms against the
    baseline arm, and stop every guest: on success, failure, Ctrl-C, SIGTERM and SIGHUP. After Ctrl-C the
    runs in the guests stop and their bundles are fetched, the guests are stopped, and the last line
    says how to run the study again (a study does not resume).

    Exit code: 0 when every arm ran the plan, 1 when an arm's run failed (the other arms go on) or
    fewer than two arms brought back a bundle, 2 for a bad study, a host that cannot launch an arm
    (every reason, one line each) or a guest that does not boot (one line naming its log), 130 when
    interrupted.

    A study with a [cloud] table (docs/machines.md, "Cloud arms") prints each arm's request, the
    differences between arms and the price estimate, and applies the cost guard (over budget_usd,
    or without --yes when not on a terminal: refused, exit 2); then launches the arms (SSH open to
    --ssh-from only), runs the plan on them through the fleet and deletes every resource it made."""
    from ccbench.machines.cloud.model import is_cloud_study

    if is_cloud_study(study):
        from ccbench.machines.cloud.model import load_cloud_study
        from ccbench.machines.cloud.view import run_cloud_study

        loaded = load_cloud_study(study)
        where = {"out": out, "workdir": workdir, "ssh_from": ssh_from}
        sys.exit(run_cloud_study(loaded, dry_run, yes, sys.stdin.isatty(), _echo, _refuse, click.confirm, **where))
    if dry_run:
        raise click.UsageError("--dry-run is for cloud studies; `ccbench machines check STUDY` shows a local one")
    from ccbench.machines.lifecycle import run_study

    code = run_study(study, out, _echo, boot_timeout_s=boot_timeout, workdir=workdir)
    sys.exit(code)


@command.command("check")
@click.argument("study", type=click.Path(dir_okay=False))
@click.option(
    "--print-commands",
    is_flag=True,
    help="Also print each arm's QEMU command line as `machines run` would launch it here (placeholders in "
    "<> for the run's own files and SSH port); an arm this host cannot launch, as a host that can would.",
)
def check_command(study, print_commands) -> None:
    """Say whether this host can launch every arm of STUDY (one line per problem, every reason), and
    print each arm's kind, twins and what its knobs add (kernel parameters, virtio iommu_platform=on,
    the memory backend), and whether the arms would run under KVM or TCG. Starts nothing, and does
    not read the image's kernel (`machines run` does, once the image is there).

    A study with a [cloud] table prints instead each arm's exact request, the differences between
    the arms (only the CC mode) and the price estimate; `ccbench cloud check` asks the cloud.

    Exit code: 0 when every arm can be launched here, 2 otherwise."""
    from ccbench.machines.cloud.model import is_cloud_study

    if is_cloud_study(study):
        from ccbench.machines.cloud.model import load_cloud_study
        from ccbench.machines.cloud.view import show

        show(load_cloud_study(study), _echo)
        return
    from ccbench.machines import hostcheck
    from ccbench.machines.lifecycle import QEMU, HostRefused, split_launchable
    from ccbench.machines.preview import arm_notes
    from ccbench.machines.studyfile import load_study

    loaded = load_study(study)
    problems = hostcheck.check(loaded, QEMU, overlay_dir=Path.cwd())
    click.echo(
        f"study {loaded.name}: plan {loaded.plan}, {loaded.rounds} round(s) {loaded.order}, baseline {loaded.baseline}"
    )
    for arm in loaded.arms:
        knobs = arm.knobs
        parts = [f"kind {arm.kind}"]
        if arm.twins:
            parts.append("twins " + ", ".join(arm.twins))
        if knobs.kernel_params:
            parts.append("kernel " + " ".join(knobs.kernel_params))
        if knobs.iommu_platform:
            parts.append("virtio iommu_platform=on")
        if knobs.memory_backend:
            parts.append(f"memory {knobs.memory_backend}")
        click.echo(f"  {arm.name}: {'; '.join(parts)}")
        for note in arm_notes(arm):
            click.echo(f"    {note}")
    _sweep_lines(loaded, problems)
    no_kvm = hostcheck.kvm_problem()
    how = f"under TCG, software emulation: {no_kvm}" if no_kvm else "under KVM"
    if print_commands:
        from ccbench.machines.preview import command_lines, sweep_points

        for shown, point in sweep_points(loaded):
            for name, line, refused in command_lines(point, QEMU, "tcg" if no_kvm else "kvm"):
                at = f" at {shown}" if shown else ""
                click.echo(
                    f"# {name}{at}"
                    + (f" (not launched here: {refused})" if refused else "")
                    + (f"\n{line}" if line else "")
                )
    launched, rendered_only, problems = split_launchable(loaded, problems)
    if rendered_only:
        click.echo(
            f"this host launches {', '.join(launched)} ({how}); rendered only, not launched here (a launch-time "
            f"study keeps their command lines): {', '.join(a for a, _w in rendered_only)}"
        )
    for warning in hostcheck.size_warnings(loaded) + hostcheck.firmware_warnings(loaded):
        click.echo(f"warning: {warning}")
    if problems:
        click.echo(f"this host cannot launch every arm (its arms would run {how})")
        raise HostRefused(problems)  # every reason, each line in the CLI's one error form
    if rendered_only:
        return
    click.echo(f"this host can launch every arm ({how})")


def _sweep_lines(study, problems) -> None:
    sweep = study.sweep
    if sweep.memory_mib:
        sizes = ", ".join(f"{m} MiB" for m in sweep.memory_mib)
        click.echo(
            f"sweep: each arm's launch time (QEMU started -> guest ready) at {sizes}, {sweep.launches} launch(es) each"
            + ("; no plan rounds (rounds = 0)" if not study.rounds else "")
        )
    if sweep.vcpus:
        counts = ", ".join(str(n) for n in sweep.vcpus)
        click.echo(f"sweep: the plan at {counts} vCPUs, every arm at each (vcpus-N/ of the study run, compared there)")


def _echo(text: str) -> None:
    click.echo(text)


def _refuse(text: str) -> None:
    click.echo(text, err=True)
