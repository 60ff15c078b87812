"""ccbench cloud: ask a cloud before a study spends anything (check), and delete what killed runs
left (sweep)."""

from __future__ import annotations

import sys

import click

STATE_HELP = "Directory of the runs' journals (default: $CCBENCH_CLOUD_STATE, else ~/.local/state/ccbench/cloud)."


@click.group()
def command() -> None:
    """Cloud arms (docs/machines.md, "Cloud arms"): check a cloud study against the cloud, and sweep
    what killed runs left. Credentials come from each SDK's own chain; ccbench never reads them."""


@command.command("check")
@click.argument("study", type=click.Path(dir_okay=False))
def check_command(study) -> None:
    """Ask the study's cloud, through its SDK and the SDK's own credentials, whether every arm can be
    launched: the instance types offered in the zone or region, SEV-SNP/TDX support, the image (and on
    GCP its guest OS features), the vCPU quota; and print the price estimate. Launches nothing.

    Exit code: 0 when nothing stands in the way, 2 otherwise (one line per problem)."""
    from ccbench.machines.cloud.lifecycle import provider_for
    from ccbench.machines.cloud.model import load_cloud_study
    from ccbench.machines.cloud.view import cost

    loaded = load_cloud_study(study)
    _, per_hour, estimate = cost(loaded)
    click.echo(
        f"cloud study {loaded.name}: ${per_hour:.4f}/h, estimate ${estimate:.2f} (budget ${loaded.cloud.budget_usd:.2f})"
    )
    problems = provider_for(loaded.cloud).preflight(loaded)
    for line in problems:
        click.echo(f"ccbench: error: {line}", err=True)
    if problems:
        sys.exit(2)
    click.echo(f"{loaded.cloud.provider}: every arm's type, image and quota check out")


@command.command("sweep")
@click.option("--study", type=click.Path(dir_okay=False), help="Also look in this cloud study's provider and region.")
@click.option("--dry-run", is_flag=True, help="List what would be deleted; delete nothing.")
@click.option("--state-dir", type=click.Path(file_okay=False), help=STATE_HELP)
def sweep_command(study, dry_run, state_dir) -> None:
    """Find, by the ccbench-run tag, what runs that are gone left in each provider and region that a
    journal here names (and the --study's), and delete it: a run whose journal on this host is no
    longer held by its process, or any run past its ccbench-expiry. A live run's resources and an
    unexpired run from another host are listed, not touched; nothing without the tag is seen.
    Every cloud run sweeps its region first."""
    from ccbench.machines.cloud import journal
    from ccbench.machines.cloud.lifecycle import journal_clouds, provider_for, sweep
    from ccbench.machines.cloud.model import Cloud, load_cloud_study

    state = journal.state_dir(state_dir)
    clouds = [
        Cloud(c["provider"], c["region"], c["zone"] or "", c["account"] or "", 1, 1, 1, 10, "")
        for c in journal_clouds(state)
    ]
    if study:
        clouds.append(load_cloud_study(study).cloud)
    seen, providers = set(), []
    for cloud in clouds:
        key = (cloud.provider, cloud.region, cloud.zone, cloud.account)
        if key not in seen:
            seen.add(key)
            providers.append(provider_for(cloud))
    if not providers:
        click.echo(f"nothing to sweep: no run journaled under {state} and no --study")
        return
    lines = sweep(providers, state, dry_run)
    for line in lines:
        click.echo(line)
    click.echo(f"swept {len(providers)} place(s)" + (" (dry run: nothing deleted)" if dry_run else ""))
