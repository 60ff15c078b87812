"""ccbench cleanup: undo what a killed run left in the work directory."""

from __future__ import annotations

from pathlib import Path

import click

from ccbench.commands.options import workdir_option


@click.command()
@workdir_option(
    "The work directory of the runs (ccbench run, machines run) to clean up after; it must exist.", file_okay=False
)
def command(workdir) -> None:
    """Unmount tmpfs, fscrypt, gocryptfs and LUKS variants, detach loop devices and remove key files that
    a killed run left under WORKDIR/storage, the network namespaces, bridges, veths and processes of
    emulated hosts under WORKDIR/topology whose owner is gone, and the servers workloads started (the
    microservices chain, the network workload's iperf3 and sockperf); stop the guests (QEMU and their
    overlays) of `ccbench machines` studies of this work directory whose controller is gone (listed in
    /run/ccbench/guests, each with its study's work directory), and end the SSH connections and remove
    the control directories (/tmp/ccbench-ssh-*) that its killed studies left (and killed `fleet run`s,
    which name no work directory). Touches nothing else
    outside the work directory but emulated hosts whose owner is gone that were made under another
    work directory (listed in /run/ccbench/topologies). A work directory that does not exist is
    refused. (Every `ccbench run` and `machines run` does the same at start.)

    Exit code: 0 when cleaned (or nothing was left), 2 for a work directory that does not exist, 75
    when a live run holds the work directory."""
    from ccbench.basics.errors import CCBenchError
    from ccbench.fleet.sshcontrol import sweep_control_dirs
    from ccbench.machines.guest import sweep as sweep_guests
    from ccbench.run.runner import WorkdirLock, cleanup_stale

    path = Path(workdir)
    if not path.is_dir():
        raise CCBenchError(
            f"--workdir {workdir}: no such directory, so no run left anything there; "
            "pass the --workdir the killed run was given"
        )
    resolved = path.resolve()
    with WorkdirLock(resolved):
        removed = sweep_guests(resolved) + sweep_control_dirs(resolved) + cleanup_stale(resolved)
    for item in removed:
        click.echo(item)
    click.echo(f"clean: {len(removed)} item(s) removed for the work directory {path}")
