"""Report sections contributed by workload families.

Each module in this package exports ``build(ctx: ReportContext) -> Section | list[Section] | None`` and an
integer ``ORDER`` (position in the report; lower first); a module that draws charts sets ``DRAWS = True``
(the report builds those first, so that a helper process draws their charts while the others are
computed). The report (ccbench.report) finds them,
calls each, and renders what they return as HTML (figures inlined as SVG), as Markdown with
``--format md``, and as PNG+SVG files with ``--figures DIR``. A section returns None when the
loaded bundles hold nothing for it. Charts are given as functions that draw them (``Figure.draw``),
so that the report can draw them in parallel.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd


@dataclass
class Table:
    title: str
    frame: pd.DataFrame
    note: str = ""
    #: where the table is shown: ("html", "md") by default; ("md",) for a table that stands in for a
    #: chart in Markdown (the heatmap's numbers, the workloads' medians)
    formats: tuple[str, ...] = ("html", "md")
    #: cells to set apart on the page (True: highlighted), the frame's shape; None: none
    highlight: pd.DataFrame | None = None


@dataclass
class Figure:
    #: file-name stem for --figures (letters, digits, dashes)
    name: str
    #: draws the chart: a function of no arguments returning a ccbench.report.svg.Canvas (a function
    #: marked ``native_svg``: drawn where the page is written) or a matplotlib.figure.Figure, called
    #: when the report is written. A picklable matplotlib one (a module-level function, or
    #: functools.partial of one) can be drawn by a helper process; any other is drawn in the main one.
    draw: Callable[[], Any]
    caption: str = ""
    #: what a reader should take from the chart, in a sentence (shown under it, and in Markdown)
    takeaway: str = ""


@dataclass
class Section:
    title: str
    #: a short paragraph of plain text (rendered as a paragraph in HTML and Markdown)
    intro: str = ""
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    #: sentences shown as a list after the intro (the verdict's conclusions)
    points: list[str] = field(default_factory=list)
    #: an HTML class for the section (the verdict is set apart with "verdict")
    css_class: str = ""


def measured_of_kind(samples: pd.DataFrame, kind: str) -> pd.DataFrame | None:
    """The measured samples (no warmup) of one workload kind, or None when there is no sample of
    that kind at all (the kind's section is then left out)."""
    if samples.empty:
        return None
    of_kind = samples["kind"].eq(kind)
    if not of_kind.any():
        return None
    return samples[of_kind & ~samples["warmup"]]


def kind_data(samples: pd.DataFrame, kind: str) -> tuple[pd.DataFrame, pd.Series] | None:
    """A copy of the measured samples of one kind (to add columns to) and their params, each a dict;
    None where there is none (the kind's section is then left out)."""
    data = measured_of_kind(samples, kind)
    if data is None or data.empty:
        return None
    return data.copy(), data["params"].map(json.loads)


@dataclass
class ReportContext:
    #: ccbench.load(...) output, warmup rows included (filter on the ``warmup`` column)
    samples: pd.DataFrame
    #: the ccbench.bundle.Bundle objects loaded, in the order given (manifest, probe, executions; read
    #: without their samples, which are in ``samples``)
    bundles: list[Any]
    #: the configuration label used as baseline
    baseline: str | None
    #: the comparison table (ccbench.analysis.rows.compare output) over ``samples``
    comparison: pd.DataFrame | None = None
    #: median, quartiles, CV and n per group and configuration (ccbench.analysis.rows.reduce.summary_by_config)
    summary: pd.DataFrame | None = None
    #: one colour per configuration for every chart (ccbench.report.chartstyle.colour_map); pass it to the
    #: chart functions so that a configuration has the same colour everywhere
    colours: dict[str, str] = field(default_factory=dict)
    #: whether executions flagged contended were left out of ``comparison``
    exclude_contended: bool = False
    #: how the overhead model pools its per-case fits: "workload" (default), "kind" or "all"
    model_by: str = "workload"
    #: the engine's SampleSet (ccbench.analysis.samples.engine) behind ``samples`` when the report was built
    #: from bundles: its exact counts and executions. ``samples`` is then every sample up to
    #: engine.SAMPLE_BUDGET of them, beyond it every ``engine.stride``-th of each group and configuration
    engine: Any = None
    #: what one section computed and a later one reuses (the verdict's forest rows: "forest")
    shared: dict[str, Any] = field(default_factory=dict)
    #: the bundles (their paths, as text) whose files the check on reading found as their digest lists
    #: say (ccbench.attestation.onread): the machines' attestation is then checked without hashing again
    verified_on_read: set[str] = field(default_factory=set)
    #: the report's FigureDrawer while the sections are built (None: figures are drawn afterwards)
    drawer: Any = None

    def draw_soon(self, figures: list[Figure]) -> list[Figure]:
        """Hand ``figures`` to the report's drawer now, before their section is done, so that a helper
        process draws them while the section computes the rest; the section still lists them (they are
        drawn once). Returns ``figures``."""
        if self.drawer is not None:
            self.drawer.add(figures)
        return figures

    def layer_verdicts(self) -> list:
        """The verdict per protection layer (ccbench.analysis.judgement.verdict), computed once for every
        section: a chart that speaks of a layer's bound says the verdict's own words."""
        if "verdicts" not in self.shared:
            from ccbench.analysis.judgement.lint import bundle_machines
            from ccbench.analysis.judgement.verdict import verdicts

            # the machines' probes: a layer measured across machines of different or unknown CPUs says so
            machines = bundle_machines(self.bundles)[0] if self.bundles else None
            self.shared["verdicts"] = verdicts(self.comparison, self.samples, machines)
        return self.shared["verdicts"]

    @property
    def sample_count(self) -> int:
        """Every sample of the bundles (``samples`` may be a systematic sample of them)."""
        return self.engine.total if self.engine is not None else len(self.samples)

    @property
    def sampling_note(self) -> str:
        """What the header says when ``samples`` is a systematic sample: nothing otherwise."""
        stride = self.engine.stride if self.engine is not None else 1
        if stride == 1:
            return ""
        return (
            f" (distributions, percentiles and the overhead model from every {stride}th sample of each group "
            "and configuration; the comparison and the verdict from all)"
        )


def discover() -> list[Any]:
    """The section modules, sorted by ORDER."""
    modules = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "build"):
            modules.append(module)
    return sorted(modules, key=lambda m: getattr(m, "ORDER", 100))
