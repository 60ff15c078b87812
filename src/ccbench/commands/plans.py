"""ccbench plans: the bundled plans, one line each."""

from __future__ import annotations

import click


@click.command()
def command() -> None:
    """List the bundled plans, one line each."""
    from ccbench.plan import bundled_plans, plan_summary

    for name, path in bundled_plans().items():
        click.echo(f"{name:<14} {plan_summary(path)}")
