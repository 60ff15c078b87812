"""ccbench import: others' results as bundles, one adapter per format (ccbench.results.importers)."""

from __future__ import annotations

from pathlib import Path

import click

from ccbench.results.importers import REGISTRY


class _ImportCommand(click.Command):
    """Lists each format with its adapter's one-line description in --help (read from the registry)."""

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help_text(ctx, formatter)
        from ccbench.results.importers import formats

        with formatter.section("Formats"):
            formatter.write_dl(list(formats().items()))


@click.command(cls=_ImportCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("format_name", metavar="FORMAT", type=click.Choice(list(REGISTRY)))
@click.argument("paths", metavar="PATH...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out", "out", required=True, type=click.Path(path_type=Path), help="Directory to write the bundle(s) into."
)
@click.option(
    "--label",
    default=None,
    help="The machine label of the bundle (default: the first file's name; seed000: the label in the file names, "
    "one bundle per label). Files stating different machines are refused under one label.",
)
@click.option(
    "--tee",
    default=None,
    metavar="TECHNOLOGY",
    help="State the TEE the source ran in (sev-snp, tdx, sev, sev-es, sgx, none): recorded as stated by you, "
    "never as measured, and used by compare's lint and analysis.",
)
@click.option(
    "--kernel-cmdline",
    default=None,
    metavar="TEXT",
    help='State the kernel command line the source ran under (e.g. "swiotlb=force"): recorded as stated by you.',
)
def command(
    format_name: str,
    paths: tuple[Path, ...],
    out: Path,
    label: str | None,
    tee: str | None,
    kernel_cmdline: str | None,
) -> None:
    """Turn results other tools wrote into bundles that show, compare and report take like any other.

    Every imported sample says it was imported and from which file; the manifest lists what is unknown
    (no TEE evidence, no CPU model when the source lacks it) and what you stated (--tee,
    --kernel-cmdline); `ccbench verify` says "imported, not measured by ccbench". Everything is read
    before anything is written, and a bundle appears only when complete.
    """
    from ccbench.results.importers import import_results
    from ccbench.results.importers.stated import stated_facts

    notes: list[str] = []
    written = import_results(format_name, paths, out, label, stated_facts(tee, kernel_cmdline), notes.append)
    for bundle in written:
        click.echo(str(bundle))
    for note in notes:
        click.echo(f"  note: {note}")
