"""ccbench import: others' results (fio, pyperf, hyperfine, the seed-000 runner) as bundles."""

from __future__ import annotations

from pathlib import Path

import click


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("format_name", metavar="FORMAT", type=click.Choice(["fio", "pyperf", "hyperfine", "seed000"]))
@click.argument("paths", metavar="PATH...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out", "out", required=True, type=click.Path(path_type=Path), help="Directory to write the bundle(s) into."
)
@click.option(
    "--label",
    default=None,
    help="The machine label of the bundle (default: the first file's name; seed000: the label in the file names, "
    "one bundle per label).",
)
def command(format_name: str, paths: tuple[Path, ...], out: Path, label: str | None) -> None:
    """Turn results other tools wrote into bundles that show, compare and report take like any other.

    \b
    FORMAT is one of:
      fio        fio's JSON output (--output-format=json or json+), fio 3.x: the samples ccbench's own
                 fio workload records, per job (bs and rw from the job's options)
      pyperf     pyperf / pyperformance JSON results (-o results.json, .json.gz): every value of every
                 run of every benchmark, with pyperf's metadata
      hyperfine  hyperfine --export-json files: every run's wall time, per command
      seed000    the result directory of the seed-000 study's runner
                 (<Label>_<YYYYmmdd_HHMMSS>_<benchmark>.txt: systeminfo, fio_*, *.ipynb, pyperformance *):
                 one bundle per label; a console log's mean and standard deviation are recorded as such

    Every imported sample says it was imported and from which file; the manifest lists what is unknown
    (no TEE evidence, no CPU model when the source lacks it) and `ccbench verify` says "imported, not
    measured by ccbench". Everything is read before anything is written: a bad file writes nothing.
    """
    from ccbench.results.importers import import_results

    written = import_results(format_name, paths, out, label)
    for bundle in written:
        click.echo(str(bundle))
