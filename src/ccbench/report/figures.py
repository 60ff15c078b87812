"""The report's figures, each drawn once: SVG text for the HTML page and, with a directory, PNG and
SVG files (--figures). Charts drawn as SVG directly (ccbench.report.svg) are drawn here, when the
page asks for them; matplotlib's, in helper processes where there are any."""

from __future__ import annotations

import gc
from collections.abc import Iterable
from pathlib import Path

from ccbench.basics.helper import Helper, outcome
from ccbench.report import charts
from ccbench.report.sections import Figure, Section

#: up to this many figures, a helper process draws them all (see FigureDrawer.finish)
HELPER_ONLY = 4


def _unique_stem(name: str, used: set[str]) -> str:
    stem, counter = name, 2
    while stem in used:
        stem = f"{name}-{counter}"
        counter += 1
    used.add(stem)
    return stem


class FigureDrawer:
    """Draws figures once each: SVG text for the HTML report and, with ``directory``, PNG and SVG files.

    Charts written as SVG directly (``native``) are drawn here, in finish(): cheap, and no
    matplotlib to load. matplotlib's figures are queued to the helper processes at once (the
    first one after a job that loads matplotlib there); finish() then draws, here, every queued
    figure that no helper has started yet, from the last one back, and collects the rest: the two
    ends meet wherever the work splits evenly. A figure a helper could not draw (it died, or the
    drawing function does not pickle) is drawn here.
    """

    def __init__(self, svg: bool = True, directory: Path | None = None, helper: Helper | None = None):
        self.svg, self.directory, self.helper = svg, directory, helper
        self.jobs: list[tuple] = []
        self.futures: list = []
        self.names: list[str] = []  # each figure's name, in report order
        self.stems: set[str] = set()
        self.position: dict[int, int] = {}  # id(figure): its job's index
        self.kept: list[Figure] = []
        self.prepared = False
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)

    def add(self, figures: Iterable[Figure]) -> None:
        """Queue ``figures`` (a figure added before, by a section that handed it over early with
        ReportContext.draw_soon, is not queued again)."""
        for figure in figures:
            if id(figure) in self.position:
                continue
            self.position[id(figure)] = len(self.jobs)
            self.kept.append(figure)  # its id stays its own while the drawer holds it
            self.names.append(figure.name)
            job = (figure.draw, self.svg, self.directory, _unique_stem(figure.name, self.stems))
            self.jobs.append(job)
            future = None
            if self.helper is not None and not native(figure.draw):
                if not self.prepared:  # matplotlib loaded in the helper before its first chart
                    self.prepared = self.helper.submit(charts.prepare) is not None
                future = self.helper.submit(_draw_one, *job)
            self.futures.append(future)

    def finish(self, order: Iterable[Figure] | None = None) -> dict[int, str]:
        """{position: SVG text} for every figure added: the position in ``order`` (the report's
        figures in page order) where it is given, else the order they were added in."""
        results: dict[int, str] = {}
        # a few figures a helper has queued are left to it: drawing one here would first load
        # matplotlib here (a third of a second), which the helper has already done
        queued = [future for future in self.futures if future is not None]
        few = len(queued) <= HELPER_ONLY and all(
            native(job[0]) for job, future in zip(self.jobs, self.futures) if future is None
        )
        for index in reversed(range(len(self.jobs))):
            future = self.futures[index]
            if future is None or (not few and future.cancel()):
                results[index] = _draw_one(*self.jobs[index])
        for index, future in enumerate(self.futures):
            if index not in results:
                results[index] = outcome(future, lambda index=index: _draw_one(*self.jobs[index]))
        if order is None:
            return results
        return {place: results[self.position[id(figure)]] for place, figure in enumerate(order)}

    def links(self) -> dict[str, str]:
        """{figure name: absolute path of its PNG file} for the Markdown report; empty without a directory."""
        if self.directory is None:
            return {}
        return {name: str((self.directory / f"{job[3]}.png").resolve()) for name, job in zip(self.names, self.jobs)}


def draw_figures(
    sections: list[Section], svg: bool = True, directory: Path | None = None, helper: Helper | None = None
) -> dict[int, str]:
    """Draw the figures of ``sections``: {position in the report: SVG text} (see FigureDrawer)."""
    drawer = FigureDrawer(svg, directory, helper)
    for section in sections:
        drawer.add(section.figures)
    return drawer.finish([figure for section in sections for figure in section.figures])


def native(draw) -> bool:
    """Whether ``draw`` (a function or a functools.partial of one) draws SVG itself (no matplotlib)."""
    return bool(getattr(getattr(draw, "func", draw), "native_svg", False))


def _draw_one(draw, svg: bool, directory: Path | None, stem: str) -> str:
    """Draw one figure; its SVG is rendered once, for the page and the file alike."""
    if native(draw):
        canvas = draw()
        document = canvas.svg()
        if directory is not None:
            (directory / f"{stem}.svg").write_text(document, encoding="utf-8")
            canvas.png(directory / f"{stem}.png", dpi=150)
        return charts.inline_svg(document) if svg else ""
    # no cyclic garbage collection while one figure is drawn: its thousands of short-lived artists
    # would set off collections over the whole heap (a third of the heatmap's time); the figure's
    # cycles are collected after it
    collecting = gc.isenabled()
    gc.disable()
    try:
        fig = draw()  # a matplotlib Figure outside pyplot: nothing to close, the garbage collector frees it
        charts.literal_text(fig)  # labels are the user's: a "$" in one is a dollar sign, not math
        document = charts.svg_document(fig) if svg or directory is not None else ""
        if directory is not None:
            (directory / f"{stem}.svg").write_text(document, encoding="utf-8")
            fig.savefig(directory / f"{stem}.png", format="png", dpi=150)
    finally:
        if collecting:
            gc.enable()
    return charts.inline_svg(document) if svg else ""
