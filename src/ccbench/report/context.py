"""The report's context (the samples, their comparison and summary, one colour per configuration)
and the sections built over it; the renderers (html, markdown) and the figures (figures) read both."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from ccbench.analysis.comparison import comparison
from ccbench.analysis.rows.reduce import summary_by_config
from ccbench.basics.helper import Helper
from ccbench.report import chartstyle
from ccbench.report.sections import ReportContext, Section, discover

if TYPE_CHECKING:
    from ccbench.report.figures import FigureDrawer


def build_context(
    paths: Iterable[str | Path],
    labels: dict[str, str] | None = None,
    baseline: str | None = None,
    helper: Helper | None = None,
    exclude_contended: bool = False,
    model_by: str = "workload",
    pairs: Iterable[str] = (),
) -> ReportContext:
    # one road (ccbench.analysis.comparison): the engine reduces the samples, compare puts each
    # configuration against the baseline; the sections get the engine's bounded per-sample frame
    result = comparison(paths, labels, baseline, helper=helper, exclude_contended=exclude_contended, pairs=pairs)
    engine = result.engine
    samples = engine.sample
    comparison_rows = summary = None
    if result.baseline is not None:
        comparison_rows = result.table
        summary = summary_by_config(engine, exclude_contended=exclude_contended)
    colours = chartstyle.colour_map(pd.unique(samples["config"])) if not samples.empty else {}
    return ReportContext(
        samples=samples,
        bundles=result.bundles,
        baseline=result.baseline,
        comparison=comparison_rows,
        summary=summary,
        colours=colours,
        exclude_contended=exclude_contended,
        model_by=model_by,
        engine=engine,
    )


def build_sections(ctx: ReportContext, drawer: FigureDrawer | None = None) -> list[Section]:
    """Every section with something to show, in order. With a FigureDrawer, each section's figures
    are handed to it as soon as the section is built (a helper draws them while later sections are
    being computed), and the modules that draw (DRAWS) are built first, in their order, so that the
    helper has charts to draw while the others are computed; the page keeps every module's ORDER."""
    ctx.drawer = drawer
    modules = discover()
    built_by: dict[str, list[Section]] = {}
    first = sorted(modules, key=lambda module: not getattr(module, "DRAWS", False)) if drawer else modules
    for module in first:
        built = module.build(ctx)
        # a module may give several sections (the verdict: the answer first, how it was reached after)
        built_by[module.__name__] = [s for s in (built if isinstance(built, list) else [built]) if s is not None]
        if drawer is not None:
            for section in built_by[module.__name__]:
                drawer.add(section.figures)
    ctx.drawer = None
    return [section for module in modules for section in built_by[module.__name__]]
