"""ccbench export: every sample of some bundles as one Parquet or CSV table."""

from __future__ import annotations

from pathlib import Path

import click

from ccbench.commands.options import allow_unverified_option, labels_option


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("bundles", metavar="BUNDLE...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", required=True, type=click.Path(path_type=Path), help="The file to write.")
@click.option(
    "--format",
    "format_name",
    type=click.Choice(["parquet", "csv"]),
    default=None,
    help="parquet (zstd) or csv; default: from the file name's extension (.csv -> csv, otherwise parquet).",
)
@click.option("--force", is_flag=True, help="Replace the output file if it exists (refused otherwise).")
@labels_option
@allow_unverified_option
def command(bundles, out: Path, format_name: str | None, force: bool, labels, allow_unverified) -> None:
    """Write every sample of BUNDLE... (bundles, or directories holding bundles) as one table, each row
    joined with its machine's facts (label, TEE technology, CPU model, kernel, storage protection,
    contended, ...) and the reason its comparison is left out as implausible (empty where it is not),
    for pandas, DuckDB, R (arrow), Spark or BigQuery without ccbench. Warmup samples are included and
    flagged. The columns are documented in docs/bundle-format.md ("Export")."""
    from ccbench.analysis.samples.load import parse_labels
    from ccbench.attestation.onread import check_before_reading, unverified_warning
    from ccbench.results.export import check_output, export

    unverified = check_before_reading(bundles, allow_unverified, finished_only=True)
    if unverified:
        click.echo(f"warning: {unverified_warning(unverified)}", err=True)

    if format_name is None and out.suffix.lower() not in (".csv", ".parquet", ".pq", ""):
        from ccbench.basics.errors import CCBenchError

        raise CCBenchError(
            f"-o {out}: ccbench exports Parquet or CSV, not {out.suffix}; name the file .parquet or .csv "
            "(or give --format)"
        )
    format_name = format_name or ("csv" if out.suffix.lower() == ".csv" else "parquet")
    check_output(out, format_name, force)  # before the work, as well as when writing
    rows, taken = export(bundles, out, format_name, parse_labels(labels, within=bundles), force)
    click.echo(f"{out}: {rows} samples from {taken} bundle(s), {format_name}")
