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
    "one bundle per label; fio --client: "
    "each server host, one bundle labelled by its hostname; pts: each system's identifier; cloud-hypervisor: "
    "each report's file name). Files stating different machines (one file of several fio servers too) are "
    "refused under one label; ping logs state none, so logs imported together are one machine, and the import "
    "says so.",
)
@click.option(
    "--tee",
    "tee",
    multiple=True,
    metavar="[LABEL=]TECHNOLOGY",
    help="State the TEE the source ran in (sev-snp, tdx, sev, sev-es, sgx, none): recorded as stated by you, "
    "never as measured, and used by compare's lint and analysis. LABEL=T states it for the bundle of that label "
    "(repeatable: one per machine of a seed000 directory); T alone holds for every bundle no LABEL= names.",
)
@click.option(
    "--storage-protection",
    "storage_protection",
    multiple=True,
    metavar="[LABEL=]PROTECTION",
    help="State the storage protection the source ran on (none, dm-crypt, fscrypt, gocryptfs, tmpfs, "
    "azure-confidential-disk), per label like --tee: recorded as stated, and compared as the storage layer. "
    "It wins over what a source names itself (seed000's -Encrypted label suffix).",
)
@click.option(
    "--kernel-cmdline",
    default=None,
    metavar="TEXT",
    help='State the kernel command line the source ran under (e.g. "swiotlb=force"), for every bundle of the '
    "import: recorded as stated by you.",
)
def command(
    format_name: str,
    paths: tuple[Path, ...],
    out: Path,
    label: str | None,
    tee: tuple[str, ...],
    storage_protection: tuple[str, ...],
    kernel_cmdline: str | None,
) -> None:
    """Turn results other tools wrote into bundles that show, compare and report take like any other.

    Every imported sample says it was imported and from which file; the manifest lists what is unknown
    (no TEE evidence, no CPU model when the source lacks it) and what you stated (--tee,
    --storage-protection, --kernel-cmdline); `ccbench verify` says "imported, not measured by ccbench".
    Everything is read before anything is written, and a bundle appears only when complete.

    A seed-000 directory holds several machines: state each one's TEE with --tee LABEL=T, e.g.
    --tee TDX-Encrypted=tdx --tee TDX-Non-Encrypted=tdx --tee Intel-Non-TDX=none. Its labels'
    -Encrypted / -Non-Encrypted suffix is read as the storage protection (Azure confidential disk
    encryption, or none).

    A hyperfine file is one machine's (--label, else the file's name), each command a case: files of
    the same commands on two machines compare command by command.
    Runs that exited non-zero (hyperfine -i) are no samples (the execution record keeps them); a
    command whose every run failed is a failed execution: compare gives no figure for it, and gate
    counts a baseline's case of it as lost.

    A PTS composite.xml of several systems gives one bundle per system, labelled by its identifier: a
    TD and a VM saved in one result compare with --tee TD=tdx --tee VM=none. A cloud-hypervisor report
    names neither its machine nor its VM type: each report is a bundle named after its file, so state
    the confidential arm's TEE with --tee FILE-NAME=tdx.
    """
    from ccbench.results.importers import import_results
    from ccbench.results.importers.stated import statements

    notes: list[str] = []
    stated = statements(tee, storage_protection, kernel_cmdline)
    written = import_results(format_name, paths, out, label, stated, notes.append)
    for bundle in written:
        click.echo(str(bundle))
    for note in notes:
        click.echo(f"  note: {note}")
