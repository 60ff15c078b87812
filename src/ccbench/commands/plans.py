"""ccbench plans: the bundled plans, one line each."""

from __future__ import annotations

import click


@click.command()
def command() -> None:
    """List the bundled plans, one line each."""
    from ccbench.basics.console import say
    from ccbench.planning.plan import bundled_plans, plan_summary

    plans = bundled_plans()
    width = max((len(name) for name in plans), default=0) + 2  # a gap after the longest name
    for name, path in plans.items():
        # wrapped to the terminal, its further lines under the summary's column
        say(f"{name:<{width}}{plan_summary(path)}", indent=width)
