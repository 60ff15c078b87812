"""ccbench import: others' results as bundles, one adapter per format (ccbench.results.importers)."""

from __future__ import annotations

import json
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
    "one bundle per label; hyperfine: each command of a file of several, one bundle per command; fio --client: "
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

    A hyperfine file of several commands imported without --label gives one bundle per command, each
    a configuration named after its command, so that compare says which ran how much faster (the
    first command the baseline, as printed); with --label it is one machine's, each command a case.
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
    if format_name == "hyperfine" and label is None and len(written) > 1:
        _compare_line(written)


def _compare_line(written: list[Path]) -> None:
    """The compare line of a hyperfine file's commands, the first the baseline; a command whose every
    run failed has nothing to compare, and is left out of it (its note says why)."""
    import shlex

    manifests = {path: json.loads((path / "manifest.json").read_text()) for path in written}
    measured = [
        p for p, m in manifests.items() if (m.get("outcomes") or {}).get("hyperfine", {}).get("status") != "failed"
    ]
    failed = ", ".join(manifests[p]["label"] for p in written if p not in measured)
    if len(measured) < 2:
        click.echo(f"  no compare line: every run of {failed} failed, and fewer than two commands are left")
        return
    line = " ".join(
        [
            "ccbench compare",
            *map(shlex.quote, map(str, measured)),
            "--baseline",
            shlex.quote(manifests[measured[0]]["label"]),
        ]
    )
    left_out = f" ({failed} left out: every run failed)" if failed else ""
    click.echo(f"  each command is a configuration; compare them, the first command the baseline{left_out}: {line}")
