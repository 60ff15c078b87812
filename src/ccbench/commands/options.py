"""Click options shared by the commands that read bundles (compare, report, export, history), and the
work directory's of those that make things (run, cleanup, gate --confirm, machines run): one definition each,
so that the same option reads the same in every command's --help. Not a command itself (no
``command`` here, so the command line does not list it)."""

from __future__ import annotations

import click

from ccbench.run.workdir import DEFAULT_WORKDIR

#: the --baseline option's help: what a baseline may be named by
BASELINE_HELP = (
    "Configuration to compare against: a full label, a unique part of one, or a machine's label "
    "(that machine's least protected configuration, per workload)."
)

baseline_option = click.option("--baseline", metavar="LABEL", help=BASELINE_HELP)

labels_option = click.option(
    "--label", "labels", multiple=True, metavar="BUNDLE=NAME", help="Call a bundle's machine NAME (repeatable)."
)

pairs_option = click.option(
    "--pair",
    "pairs",
    multiple=True,
    metavar="CONFIG=BASELINE",
    help="Compare the machines CONFIG matches against BASELINE (globs on machine labels, e.g. 'TDX*=Intel-Non-TDX'; "
    "repeatable). Without --pair or --baseline each TEE machine is compared with a machine without a TEE of the "
    "same CPU model, else the same CPU vendor (a TDX machine's is Intel, an SEV one's AMD), never one of another "
    "vendor.",
)
exclude_contended_option = click.option(
    "--exclude-contended",
    is_flag=True,
    help="Leave out executions flagged contended (other processes' CPU or steal time while they ran).",
)

allow_unverified_option = click.option(
    "--allow-unverified",
    is_flag=True,
    help="Read bundles whose files do not match their digest list (attestation.json), or that have none "
    "(a run still going or killed); the output names them. Without it such a bundle is refused (exit 3).",
)


def jobs_option(work: str, example: str = ""):
    """-j/--jobs: the processes the command may use for ``work`` (e.g. "reading bundles");
    ``example`` says when one process is the better choice."""
    return click.option(
        "-j",
        "--jobs",
        type=click.IntRange(min=1),
        default=None,
        metavar="N",
        help=f"Processes to use for {work} (default: 2 on a machine with 2 or more CPUs; "
        f"1 = this process only{example}).",
    )


def workdir_option(help: str, file_okay: bool = True):
    """--workdir: ccbench's work directory (default .ccbench/work), with ``help`` saying what it is to
    the command; ``file_okay=False`` for a command that refuses a file there."""
    return click.option(
        "--workdir", type=click.Path(file_okay=file_okay), default=DEFAULT_WORKDIR, show_default=True, help=help
    )
