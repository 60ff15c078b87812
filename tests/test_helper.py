"""compare and report with helper processes (--jobs): the same output as one process, and a helper
that fails, dies or cannot take the work changes nothing but the time."""

import os
import re
from functools import partial

import pandas as pd
import pytest
from bundles import seal, write_bundles

from ccbench.analysis.samples.load import frame_from_bundles, load_bundles
from ccbench.basics.helper import Helper
from ccbench.bundle import BundleWriter
from ccbench.report import FigureDrawer, charts
from ccbench.report.sections import Figure


def test_frames_read_by_helpers_equal_those_read_here(tmp_path):
    paths = write_bundles(tmp_path)
    alone = frame_from_bundles(load_bundles(paths, samples=False))
    with Helper(2) as helper:
        assert helper.enabled
        shared = frame_from_bundles(load_bundles(paths, samples=False), helper=helper)
    pd.testing.assert_frame_equal(alone, shared)
    assert list(dict.fromkeys(shared["machine"])) == ["plain", "snp", "tdx"]  # bundle order kept


def test_jobs_do_not_change_compare_or_report(tmp_path, ccbench):
    paths = write_bundles(tmp_path)
    one = ccbench("compare", *paths, "--json", "-j", "1")
    two = ccbench("compare", *paths, "--json", "--jobs", "2")
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    assert one.stdout == two.stdout and len(one.stdout.splitlines()) > 20
    pages = []
    for jobs in ("1", "2"):
        html, figures = tmp_path / f"r{jobs}.html", tmp_path / f"figures{jobs}"
        done = ccbench("report", *paths, "-o", html, "--figures", figures, "-j", jobs)
        assert done.returncode == 0, done.stderr
        pages.append(re.sub(r"generated [^<]* UTC", "", html.read_text()))
        svgs = {p.name: p.read_bytes() for p in figures.glob("*.svg")}
        if jobs == "1":
            first_svgs = svgs
    assert pages[0] == pages[1] and pages[0].count("<svg") >= 3
    assert svgs == first_svgs  # the same bytes whichever process drew them


def _exits_in_helper(parent: int, title: str):
    """A chart function that kills the process drawing it, unless that is the test process itself."""
    if os.getpid() != parent:
        os._exit(3)
    return _matplotlib_chart(title)


def _matplotlib_chart(title: str):
    """A chart drawn with matplotlib (as the breakdown's and the microservices' are): the helper
    processes draw those; the report's SVG charts (charts.grouped_bars ...) are drawn in place."""
    fig = charts.new_figure(figsize=(3, 2))
    ax = fig.subplots()
    summary = _summary()
    ax.bar(summary["case"], summary["median"])
    ax.set_title(title)
    return fig


def _summary():
    return pd.DataFrame(
        {"case": ["a", "b"], "config": ["x", "x"], "median": [1.0, 2.0], "q1": [0.9, 1.9], "q3": [1.1, 2.1]}
    )


def test_figures_a_helper_cannot_draw_are_drawn_here(tmp_path):
    figures = [
        Figure("plain", partial(_matplotlib_chart, "plain")),
        Figure("unpicklable", lambda: _matplotlib_chart("unpicklable")),
        Figure("kills-its-helper", partial(_exits_in_helper, os.getpid(), "kills-its-helper")),
        Figure("svg", partial(charts.grouped_bars, _summary(), "svg", "s", "lower")),
    ] + [Figure(f"more-{i}", partial(_matplotlib_chart, f"more-{i}")) for i in range(4)]
    with Helper(2) as helper:
        drawer = FigureDrawer(svg=True, directory=tmp_path, helper=helper)
        drawer.add(figures)
        results = drawer.finish()
    assert sorted(results) == list(range(len(figures)))
    for index, figure in enumerate(figures):
        assert results[index].startswith("<svg") and f">{figure.name}<" in results[index]
        assert (tmp_path / f"{figure.name}.png").stat().st_size > 1000


def test_helper_bundle_warnings_and_errors_reach_the_user(tmp_path, ccbench):
    paths = write_bundles(tmp_path)
    # the smallest bundle goes to the helper: cut its last line short, as a killed run leaves it
    small = tmp_path / "small"
    writer = BundleWriter.create(
        small, {"plan": {"name": "t"}, "environment": {"hostname": "small", "tee": {"technology": "none"}}}
    )
    writer.close()
    lines = (paths[0] / "samples.jsonl").read_text().splitlines()[:8]
    (writer.path / "samples.jsonl").write_text("\n".join(lines[:7]) + "\n" + lines[7][:40])
    seal(writer.path)  # as a run killed and then attested leaves it
    done = ccbench("compare", paths[0], writer.path, "--json", "-j", "2")
    assert done.returncode == 0, done.stderr
    cut_off = r"samples\.jsonl:\s+the\s+last\s+line\s+\(line\s+8\)\s+is\s+cut\s+off"  # wrapped or not
    assert re.search(cut_off, done.stderr)
    (writer.path / "samples.jsonl").write_text("\n".join([lines[0], "{not json", *lines[1:7]]) + "\n")
    seal(writer.path)
    done = ccbench("compare", paths[0], writer.path, "-j", "2")
    assert done.returncode == 2
    assert re.search(r"samples\.jsonl:2: corrupt line", done.stderr) and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("jobs", ["0", "x"])
def test_bad_jobs_value(tmp_path, ccbench, jobs):
    paths = write_bundles(tmp_path, per_case=3)
    done = ccbench("report", *paths, "-o", tmp_path / "r.html", "-j", jobs)
    assert done.returncode == 2 and "--jobs" in done.stderr and "Traceback" not in done.stderr


def test_figures_directory_that_cannot_be_made(tmp_path, ccbench):
    paths = write_bundles(tmp_path, per_case=3)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = ccbench("report", *paths, "-o", tmp_path / "r.html", "--figures", blocker / "figures")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        f"ccbench: error: --figures {blocker / 'figures'}: cannot create the directory "
        "(Not a directory); give a writable path"
    )
