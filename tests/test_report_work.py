"""What `report` does beyond `compare` on the same bundles, checked as behaviour (never as timings):
it reads each bundle file no more often than compare does, neither command loads scipy.stats, and a
chart handed to the drawer early is drawn once and lands in its place on the page."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from functools import partial
from pathlib import Path

import pytest

SEED000 = Path(__file__).parent / "data" / "import" / "seed000-azure"
TEES = ["--tee", "TDX-Encrypted=tdx", "--tee", "TDX-Non-Encrypted=tdx", "--tee", "Intel-Non-TDX=none"]

# runs one ccbench command in this interpreter and prints, as JSON on its last line, how often each
# file under the bundles was opened (an audit hook sees every open) and whether scipy.stats,
# scipy.optimize and matplotlib were loaded
PROBE = """
import json, os, sys
root, args = sys.argv[1], sys.argv[2:]
opened = {}
def hook(event, hook_args):
    if event == "open" and isinstance(hook_args[0], (str, bytes, os.PathLike)):
        path = os.path.realpath(os.fsdecode(hook_args[0]))
        if path.startswith(root + os.sep):
            opened[path] = opened.get(path, 0) + 1
sys.addaudithook(hook)
from ccbench.cli import main
code = 0
try:
    code = main(args)
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "opened": opened, "scipy_stats": "scipy.stats" in sys.modules,
                  "matplotlib": "matplotlib" in sys.modules, "scipy_optimize": "scipy.optimize" in sys.modules}))
"""


@pytest.fixture(scope="module")
def seed000_bundles(tmp_path_factory) -> list[Path]:
    """seed 000's test directory (three Azure machines) imported as bundles."""
    out = tmp_path_factory.mktemp("seed000") / "bundles"
    done = subprocess.run(
        [sys.executable, "-m", "ccbench", "import", "seed000", str(SEED000), "--out", str(out), *TEES],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return sorted(out.iterdir())


def probed(root: Path, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, os.path.realpath(root), *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] in (0, None), done.stderr[-2000:]
    return result


def test_report_reads_no_bundle_file_more_often_than_compare(seed000_bundles, tmp_path):
    """The check on reading hashed every file once; the machines section asks whether each bundle is
    attested without hashing its files, or reading its Parquet file against its journal, again."""
    root = seed000_bundles[0].parent
    paths = [str(p) for p in seed000_bundles]
    compare = Counter(probed(root, "compare", *paths)["opened"])
    report = Counter(probed(root, "report", *paths, "-o", str(tmp_path / "r.html"))["opened"])
    raw = [path for path in report if f"{os.sep}raw{os.sep}" in path]
    assert raw, "the imported bundles keep the files they were imported from"
    more = {
        Path(path).relative_to(root).as_posix(): (n, compare[path]) for path, n in report.items() if n > compare[path]
    }
    # the bundle's own documents are read by the sections (the methods, the machines' provenance and
    # attestation) as compare does not; the files the digests cover beyond them (the tools' raw
    # output, samples.parquet) no more often than compare reads them
    documents = ("manifest.json", "samples.jsonl", "executions.jsonl", "attestation.json")
    assert set(more) <= {f"{p.name}/{name}" for p in seed000_bundles for name in documents}, more
    assert all(report[path] == 1 for path in raw), {p: report[p] for p in raw if report[p] != 1}


def test_compare_and_report_never_load_scipy_stats(seed000_bundles, tmp_path):
    """scipy.stats takes about a third of a second to load; the sign test and Cochran's Q come from
    scipy.special (the same numbers: tests/test_verdict_semantics.py)."""
    root = seed000_bundles[0].parent
    paths = [str(p) for p in seed000_bundles]
    assert probed(root, "compare", *paths, "--summary")["scipy_stats"] is False
    assert probed(root, "report", *paths, "-o", str(tmp_path / "r.html"))["scipy_stats"] is False


def test_the_overhead_model_of_a_few_layers_is_fitted_without_scipy_optimize(seed000_bundles, tmp_path):
    """seed 000's report fits the overhead model (T_base and the TEE's cost: two unknowns) by the
    supports, as its bootstrap does (tests/test_analysis.py checks both against scipy's nnls);
    loading scipy.optimize took a fifth of the report's time."""
    root = seed000_bundles[0].parent
    page = tmp_path / "r.html"
    result = probed(root, "report", *map(str, seed000_bundles), "-o", str(page), "-j", "1")
    assert result["scipy_optimize"] is False
    assert "<h2>Overhead model</h2>" in page.read_text()


def test_the_pages_charts_are_drawn_without_matplotlib(seed000_bundles, tmp_path):
    """The forest plot, the heatmap (seed 000) and the latency percentiles (the synthetic study) are
    written as SVG directly: a report in one process (-j 1) never loads matplotlib, with --figures
    neither (their PNG files come from Pillow)."""
    from bundles import write_bundles

    synthetic = write_bundles(tmp_path / "synthetic")
    for root, paths in ((seed000_bundles[0].parent, seed000_bundles), (tmp_path / "synthetic", synthetic)):
        figures = tmp_path / f"figures-{len(paths)}"
        page = tmp_path / "r.html"
        result = probed(root, "report", *map(str, paths), "-o", str(page), "-j", "1", "--figures", str(figures))
        assert result["matplotlib"] is False, root
        text = page.read_text()
        assert ":forest-" in text and text.count("<svg") >= 2
        assert sorted(p.suffix for p in figures.iterdir()).count(".png") == text.count("<svg") >= 2


def test_the_forest_module_loads_without_the_verdicts_statistics():
    """A helper process unpickles a Forest to draw it: its module must not pull in the verdict's
    statistics (scipy.stats, a third of a second) for a chart that never calls them."""
    code = "import sys, ccbench.report.forest; print(sorted(m for m in ('scipy.stats',) if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def _bars(title: str):
    """A chart drawn with matplotlib (the helper draws those; the SVG charts are drawn in place)."""
    from ccbench.report import charts

    fig = charts.new_figure(figsize=(3, 2))
    fig.subplots().bar(["a"], [1.0])
    fig.suptitle(title)
    return fig


def test_a_figure_handed_over_early_is_drawn_once_and_lands_in_its_place():
    from ccbench.basics.helper import Helper
    from ccbench.report import FigureDrawer
    from ccbench.report.sections import Figure

    first, second, third = (Figure(name, partial(_bars, name)) for name in ("first", "second", "third"))
    with Helper(2) as helper:
        drawer = FigureDrawer(svg=True, helper=helper)
        drawer.add([third])  # a section's draw_soon, before the page's earlier sections are built
        drawer.add([first, second])
        drawer.add([third])  # its section lists it again when it is done
        assert len(drawer.jobs) == 3
        svgs = drawer.finish([first, second, third])
    assert sorted(svgs) == [0, 1, 2]
    for position, name in enumerate(("first", "second", "third")):
        assert f">{name}<" in svgs[position]


def test_the_page_is_the_same_whether_charts_come_now_or_later(tmp_path):
    """render_html given the charts' SVG, or a function that returns them once the rest is written."""
    from bundles import write_bundles

    from ccbench.report import build_context, build_sections, render_html
    from ccbench.report.figures import draw_figures

    ctx = build_context(write_bundles(tmp_path))
    sections = build_sections(ctx)
    svgs = draw_figures(sections)
    assert svgs, "the synthetic bundles give charts"
    # the page's time of writing is left out: the two may be written a minute apart
    now = re.sub(r"generated [^<]* UTC", "", render_html(sections, ctx, "t", svgs))
    later = re.sub(r"generated [^<]* UTC", "", render_html(sections, ctx, "t", lambda: svgs))
    assert now == later and all(svg in now for svg in svgs.values())
