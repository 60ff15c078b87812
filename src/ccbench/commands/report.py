"""ccbench report: a self-contained HTML report (or Markdown) and figure files."""

from __future__ import annotations

import warnings
from pathlib import Path

import click

from ccbench.basics.fsutil import write_text_atomic
from ccbench.commands.options import (
    allow_unverified_option,
    baseline_option,
    exclude_contended_option,
    jobs_option,
    labels_option,
    pairs_option,
)

#: the output names the report tells its format by (without --format; a name without a suffix is HTML)
HTML_SUFFIXES = (".html", ".htm")
MD_SUFFIXES = (".md", ".markdown")


@click.command()
@click.argument("bundles", nargs=-1, required=True, type=click.Path())
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default="report.html",
    show_default=True,
    help="The file to write: .html (or .htm) or .md (or .markdown); another suffix needs --format.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "md"]),
    default=None,
    help="html (one self-contained file, charts inlined as SVG, works offline) or md (Markdown tables); "
    "by default the one -o's suffix names (HTML for a name without one).",
)
@click.option(
    "--figures", type=click.Path(file_okay=False), help="Also write every chart as PNG and SVG into this directory."
)
@baseline_option
@exclude_contended_option
@click.option(
    "--model-by",
    type=click.Choice(["workload", "kind", "all"]),
    default="workload",
    show_default=True,
    help="How the overhead model pools its per-case fits: per workload (over its cases), per workload kind, "
    "or all together.",
)
@labels_option
@pairs_option
@click.option("--title", default="ccbench report", show_default=True)
@jobs_option("reading bundles and drawing charts", ", e.g. beside a running benchmark")
@allow_unverified_option
def command(
    bundles, output, fmt, figures, baseline, exclude_contended, model_by, labels, pairs, title, jobs, allow_unverified
) -> None:
    """Write a report over BUNDLE... (bundles or directories of bundles). Its first screen holds the
    answer: one line per protection layer and a forest plot of every configuration's cost per
    workload case (time ratio with its 95% interval, log scale). Then how the verdict was reached,
    the machines (what differs, then what they share), the comparison with 95% intervals, every
    case of the pooled workloads, latency percentiles, the overhead heatmap (log2 of the time ratio,
    clipped at 1/4x and 4x), the overhead model, flagged noisy results and the methods as the
    bundles recorded them."""
    from ccbench.analysis.samples.load import parse_labels
    from ccbench.attestation.onread import check_before_reading, unverified_warning
    from ccbench.basics.console import console, skip_teardown, warn
    from ccbench.basics.errors import CCBenchError
    from ccbench.basics.helper import Helper
    from ccbench.report import FigureDrawer, build_context, build_sections, render_html, render_markdown

    if pairs and baseline:
        raise CCBenchError("--pair and --baseline: give one (--pair names a baseline per machine)")
    output_path = Path(output)
    suffix = output_path.suffix.lower()
    if fmt is None and suffix not in (*HTML_SUFFIXES, *MD_SUFFIXES, ""):
        # the page would be HTML under another format's name (r.pdf): said before anything is written
        raise CCBenchError(
            f"-o {output}: ccbench report writes HTML or Markdown, not {output_path.suffix}; "
            "name the file .html or .md (or give --format)"
        )
    fmt = fmt or ("md" if suffix in MD_SUFFIXES else "html")
    if not output_path.parent.exists():
        raise CCBenchError(f"-o {output}: the directory {output_path.parent} does not exist")
    figure_dir = Path(figures) if figures else None
    if figure_dir is not None:
        try:
            figure_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CCBenchError(
                f"--figures {figures}: cannot create the directory ({exc.strerror}); give a writable path"
            ) from None
    verified: list[Path] = []
    unverified = check_before_reading(bundles, allow_unverified, verified=verified)
    if unverified:
        console.print(f"warning: {unverified_warning(unverified)}", markup=False)
        title = f"{title} (UNVERIFIED bundles: {len(unverified)})"
    with Helper(jobs) as helper:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ctx = build_context(
                bundles,
                parse_labels(labels, within=bundles),
                baseline,
                helper,
                exclude_contended=exclude_contended,
                model_by=model_by,
                pairs=pairs,
            )
        for warning in caught:
            warn(warning.message)  # one plain line each, once
        ctx.verified_on_read = {str(path) for path in verified}
        if ctx.samples.empty:
            raise CCBenchError("the bundles hold no samples to report")
        contended = int(ctx.engine.config_counts["contended"].sum())
        if exclude_contended and (ctx.comparison is None or ctx.comparison.empty) and contended:
            console.print(
                f"warning: --exclude-contended: {contended} of {ctx.sample_count} "
                "samples came from contended executions and nothing is left to compare; the report has no "
                "verdict or comparison (run again on a quiet machine, or report without the option)"
            )
        # charts are drawn only where they go: into the page (html) or into --figures
        drawer = (
            FigureDrawer(svg=fmt == "html", directory=figure_dir, helper=helper)
            if fmt == "html" or figure_dir
            else None
        )
        sections = build_sections(ctx, drawer)
        if unverified:
            sections.insert(0, _unverified_section(unverified))
        order = [figure for section in sections for figure in section.figures]
        if fmt == "md":
            if drawer is not None:
                drawer.finish(order)
            text = render_markdown(sections, ctx, title, drawer.links() if drawer is not None else None)
        else:
            # the page is written while the helpers draw; the charts go in last
            text = render_html(sections, ctx, title, lambda: drawer.finish(order))
    try:
        write_text_atomic(output_path, text)  # a stopped report leaves the old file or none, never half
    except OSError as exc:
        raise CCBenchError(f"-o {output}: cannot write ({exc.strerror})") from None
    console.print(f"wrote {output_path} ({len(sections)} sections)" + (f" and figures in {figures}" if figures else ""))
    skip_teardown()


def _unverified_section(notes: list[str]):
    """The report's first section when --allow-unverified let bundles in: which, and why."""
    from ccbench.report.sections import Section

    return Section(
        title="Unverified bundles",
        intro="These bundles were read with --allow-unverified: their files do not match their digest list "
        "(attestation.json), or they have none. Their numbers may not be what was measured.",
        points=notes,
        css_class="verdict",
    )
