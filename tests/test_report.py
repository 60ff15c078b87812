"""compare and report over real bundles from two runs, and the HTML rendered in headless Chromium."""

import json
import re
import shutil
import subprocess

import pytest

PLAN = """
name = "tiny"
[defaults]
repetitions = 3
warmup = 1
cooldown = 0
[[workloads]]
kind = "prime"
n = 3000
[[workloads]]
kind = "fio"
blocksizes = ["4k"]
patterns = ["randread", "randwrite"]
size = "8M"
runtime = 1
warmup = 0
"""


@pytest.fixture(scope="module")
def two_bundles(tmp_path_factory):
    import subprocess
    import sys

    base = tmp_path_factory.mktemp("bundles")
    (base / "plan.toml").write_text(PLAN)
    paths = []
    for name in ("first", "second"):
        done = subprocess.run([sys.executable, "-m", "ccbench", "run", str(base / "plan.toml"), "--out", str(base / name),
                               "--workdir", str(base / "work")], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        paths.append(next(p for p in (base / name).iterdir() if (p / "manifest.json").exists()))
    return paths


def test_compare_two_real_runs_with_a_label(two_bundles, ccbench):
    first, second = two_bundles
    done = ccbench("compare", first, second, "--label", f"{second}=rerun", "--json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert {r["workload"] for r in rows} == {"prime", "fio"}
    assert all(r["config"].startswith("rerun /") for r in rows)
    table = ccbench("compare", first, second, "--label", f"{second}=rerun")
    assert table.returncode == 0 and "ratio" in table.stdout and "prime" in table.stdout and "fio" in table.stdout


def test_report_html_markdown_and_figures(two_bundles, ccbench, tmp_path):
    first, second = two_bundles
    html_path, md_path, figures = tmp_path / "r.html", tmp_path / "r.md", tmp_path / "figs"
    done = ccbench("report", first, second, "--label", f"{second}=rerun", "-o", html_path, "--figures", figures)
    assert done.returncode == 0, done.stderr
    text = html_path.read_text()
    for title in ("Machines", "Comparison with the baseline", "Workloads by configuration", "Overhead heatmap", "Methods"):
        assert f">{title}</h2>" in text
    assert text.count("<svg") >= 4
    # self-contained: nothing fetched from elsewhere
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)
    assert sorted(p.suffix for p in figures.iterdir()) == sorted([".png", ".svg"] * (len(list(figures.iterdir())) // 2))
    done = ccbench("report", first, second, "--label", f"{second}=rerun", "-o", md_path)
    assert done.returncode == 0, done.stderr
    markdown = md_path.read_text()
    assert "## Comparison with the baseline" in markdown and "| workload |" in markdown


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (bash scripts/setup.sh --with browser)")
def test_report_renders_in_headless_chromium(two_bundles, ccbench, tmp_path):
    from PIL import Image

    first, second = two_bundles
    html_path = tmp_path / "r.html"
    assert ccbench("report", first, second, "--label", f"{second}=rerun", "-o", html_path).returncode == 0
    shot = tmp_path / "shot.png"
    done = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,4000", "--enable-logging=stderr", "--v=0",
         f"--screenshot={shot}", html_path.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert shot.exists(), done.stderr[-2000:]
    console_errors = [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not console_errors, console_errors
    import numpy as np

    pixels = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3).astype(int)
    # the first configuration's bar colour (#4477AA) must cover a real area: the charts rendered
    bar = int((np.abs(pixels - np.array([0x44, 0x77, 0xAA])) < 8).all(axis=1).sum())
    assert bar > 2000, bar
    assert len({tuple(p) for p in pixels[::97]}) > 50  # not a blank page


def test_long_tables_fold_and_short_ones_do_not():
    import pandas as pd

    from ccbench.report import FOLD_ROWS, render_html
    from ccbench.report.sections import ReportContext, Section, Table

    long = Table("every row", pd.DataFrame({"case": [f"c{i}" for i in range(FOLD_ROWS + 1)], "ratio": 1.0}))
    short = Table("a few rows", pd.DataFrame({"case": ["a", "b"], "ratio": [1.0, 2.0]}))
    ctx = ReportContext(samples=pd.DataFrame(), bundles=[], baseline="b")
    page = render_html([Section("Long", tables=[long]), Section("Short", tables=[short])], ctx, svgs={})
    folded, rest = page.split("<h2>Short</h2>")
    assert f"<details><summary>{FOLD_ROWS + 1} rows: show the table</summary><table" in folded
    assert f"<td>c{FOLD_ROWS}</td>" in folded  # folded, not cut
    assert "<details>" not in rest and "<td>b</td>" in rest
