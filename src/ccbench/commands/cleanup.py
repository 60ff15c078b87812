"""ccbench cleanup: undo what a killed run left in the work directory."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.option(
    "--workdir",
    type=click.Path(file_okay=False),
    default=".ccbench/work",
    show_default=True,
    help="The work directory of the runs to clean up after.",
)
def command(workdir) -> None:
    """Unmount tmpfs, fscrypt, gocryptfs and LUKS variants, detach loop devices and remove key files that
    a killed run left under WORKDIR/storage, the network namespaces, bridges, veths and processes of
    emulated hosts under WORKDIR/topology whose owner is gone, and the servers workloads started (the
    microservices chain, the network workload's iperf3 and sockperf), and the guests (QEMU and their
    overlays) of `ccbench machines` studies whose controller is gone (listed in /run/ccbench/guests).
    Touches nothing else outside the work directory but emulated hosts whose owner is gone that
    were made under another work directory (listed in /run/ccbench/topologies).
    (Every `ccbench run` does the same at start.)"""
    from ccbench.machines.guest import sweep as sweep_guests
    from ccbench.runner import WorkdirLock, cleanup_stale

    for item in sweep_guests():
        click.echo(item)
    path = Path(workdir)
    if not path.exists():
        from ccbench.topology.records import sweep_index

        # what killed runs left under other work directories is still found
        removed = sweep_index()
        for item in removed:
            click.echo(item)
        click.echo(f"nothing else to clean: {path} does not exist")
        return
    with WorkdirLock(path.resolve()):
        removed = cleanup_stale(path.resolve())
    for item in removed:
        click.echo(item)
    click.echo(f"clean: {len(removed)} item(s) removed under {path}")
