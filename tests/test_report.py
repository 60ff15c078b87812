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
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ccbench",
                "run",
                str(base / "plan.toml"),
                "--out",
                str(base / name),
                "--workdir",
                str(base / "work"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        paths.append(next(p for p in (base / name).iterdir() if (p / "manifest.json").exists()))
    return paths


def test_compare_two_real_runs_with_a_label(two_bundles, ccbench):
    first, second = two_bundles
    done = ccbench("compare", first, second, "--label", f"{second}=rerun", "--json")
    assert done.returncode == 0, done.stderr
    rows = [r for r in map(json.loads, done.stdout.splitlines()) if "finding" not in r]
    assert {r["workload"] for r in rows} == {"prime", "fio"}
    assert all(r["config"].startswith("rerun /") for r in rows)
    # bundle format 2: each number leads to the raw directories of the executions behind it
    assert all(r["raw"] and all(path.startswith("raw/") for path in r["raw"] + r["raw_baseline"]) for r in rows)
    assert {r["contended"] for r in rows} <= {0, 1, 2, 3}
    table = ccbench("compare", first, second, "--label", f"{second}=rerun")
    assert table.returncode == 0 and "ratio" in table.stdout and "prime" in table.stdout and "fio" in table.stdout


def test_report_html_markdown_and_figures(two_bundles, ccbench, tmp_path):
    first, second = two_bundles
    html_path, md_path, figures = tmp_path / "r.html", tmp_path / "r.md", tmp_path / "figs"
    done = ccbench("report", first, second, "--label", f"{second}=rerun", "-o", html_path, "--figures", figures)
    assert done.returncode == 0, done.stderr
    text = html_path.read_text()
    for title in (
        "Machines",
        "Comparison with the baseline",
        "Workloads by configuration",
        "Overhead heatmap",
        "Methods",
    ):
        assert f">{title}</h2>" in text
    # the forest plot of the verdict, the latency percentiles, the heatmap: figures only for what the page shows
    assert text.count("<svg") >= 3 and ":forest-intervals" in text
    # self-contained: nothing fetched from elsewhere
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)
    assert sorted(p.suffix for p in figures.iterdir()) == sorted([".png", ".svg"] * (len(list(figures.iterdir())) // 2))
    done = ccbench("report", first, second, "--label", f"{second}=rerun", "-o", md_path)
    assert done.returncode == 0, done.stderr
    markdown = md_path.read_text()
    assert "## Comparison with the baseline" in markdown and "| workload |" in markdown


@pytest.mark.skipif(
    shutil.which("chromium") is None, reason="chromium is not installed (bash scripts/setup.sh --with browser)"
)
def test_report_renders_in_headless_chromium(two_bundles, ccbench, tmp_path):
    from PIL import Image

    first, second = two_bundles
    html_path = tmp_path / "r.html"
    assert ccbench("report", first, second, "--label", f"{second}=rerun", "-o", html_path).returncode == 0
    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1280,4000",
            "--enable-logging=stderr",
            "--v=0",
            f"--screenshot={shot}",
            html_path.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.exists(), done.stderr[-2000:]
    console_errors = [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not console_errors, console_errors
    import numpy as np

    pixels = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3).astype(int)
    # the configurations' colours (the percentile lines, the forest plot's intervals and points,
    # solid where significant and faint, 40% over white, where not) are on the screen; how many
    # pixels depends on the two real runs' intervals (14 when every row came out faint and short on a
    # loaded machine), so the test asks that they are there, not how much
    from ccbench.report.chartstyle import PALETTE

    solid = [np.array([int(c[i : i + 2], 16) for i in (1, 3, 5)]) for c in PALETTE[:4]]
    colours = solid + [np.rint(0.4 * rgb + 0.6 * 255) for rgb in solid]
    drawn = sum(int((np.abs(pixels - rgb) < 8).all(axis=1).sum()) for rgb in colours)
    assert drawn > 0, drawn
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


def three_configuration_bundles(root):
    """Synthetic bundles of three machines x two storage variants (tests/bundles.py)."""
    from bundles import write_bundles

    return write_bundles(root)


def test_summary_numbers_match_the_comparison_table(tmp_path, ccbench):

    paths = three_configuration_bundles(tmp_path)
    rows = [r for r in map(json.loads, ccbench("compare", *paths, "--json").stdout.splitlines()) if "finding" not in r]
    summary = ccbench("compare", *paths, "--summary", "--json").stdout.splitlines()
    layers = [item for item in map(json.loads, summary) if "finding" not in item]
    assert {item["layer"] for item in layers} >= {"TEE: SEV-SNP", "TEE: TDX", "storage encryption: fscrypt"}
    for item in layers:
        mine = [r for r in rows if r["layer"] == item["layer"]]
        # judged per workload on the time-equivalent ratios of its primary (application-level)
        # metrics: fio's throughput, prime's time (ccbench.analysis.judgement.semantics); the counts
        # are of those rows, the others counted apart
        primary = [r for r in mine if (r["workload"], r["metric"]) in {("fio", "throughput"), ("prime", "time")}]
        assert item["comparisons"] == len(primary)
        assert item["significant"] == sum(r["significant"] for r in primary)
        assert item["not_counted"] == len(mine) - len(primary) > 0
        others = sum(r["significant"] for r in mine) - item["significant"]
        assert item["supporting_significant"] == others
        per_workload = {}
        for r in primary:
            te = r["ratio"] if r["better"] == "lower" else 1 / r["ratio"]
            per_workload.setdefault(r["workload"], []).append((te, r["significant"]))
        for judged in item["workload_judgements"]:
            values = per_workload[judged["workload"]]
            significant = [te for te, sig in values if sig]
            assert judged["significant"] == len(significant)
            if judged["kind"] == "pooled":  # one direction, and the figure within its rows
                assert all(te > 1 for te in significant) or all(te < 1 for te in significant)
                assert min(te for te, _ in values) <= judged["typical"] <= max(te for te, _ in values)
            elif judged["kind"] in ("sizes differ", "disagree"):
                assert sorted([judged["least"], judged["most"]]) == pytest.approx([min(significant), max(significant)])
            else:
                assert not significant and "no cost above" in judged["words"]
        if item["judgement"]["kind"] not in ("pooled", "pooled across benchmarks"):
            assert item["typical"] is None  # no pooled figure where the rows do not agree
        # the worst comparison quoted is a row of the table, with its numbers as the table prints them
        worst = max((r for r in primary if r["significant"]), key=lambda r: r["overhead_percent"])
        from ccbench.analysis import format as fmt

        assert (
            f"{fmt.row_effect(worst)}, ratio {worst['ratio']:.3f} [{worst['ci_low']:.3f}, {worst['ci_high']:.3f}]"
            in item["worst"]
        )
    text = ccbench("compare", *paths).stdout
    summary = ccbench("compare", *paths, "--summary").stdout
    # the table opens with the same verdict: each layer's line of the summary, word for word
    heads = [line for line in summary.split("lint:")[0].splitlines()[1:] if not line.startswith(" ")]
    assert heads and all(line in text.splitlines() for line in heads), (heads, text)
    assert "ratio [95% CI]" not in summary


def test_every_configuration_keeps_its_colour_in_every_chart(tmp_path, ccbench):
    from ccbench.report.chartstyle import series_id

    paths = three_configuration_bundles(tmp_path)
    figures = tmp_path / "figures"
    done = ccbench("report", *paths, "-o", tmp_path / "r.html", "--figures", figures)
    assert done.returncode == 0, done.stderr
    configs = [
        f"{m} / {t} / {s}"
        for m, t in (("plain", "no TEE"), ("snp", "SEV-SNP"), ("tdx", "TDX"))
        for s in ("disk", "fscrypt")
    ]
    by_id = {series_id(c): c for c in configs}
    colours: dict[str, set] = {}
    charts_seen = 0
    for svg in figures.glob("*.svg"):
        found = re.findall(r'<g id="(series:[^":]+):[^"]*">\s*<path[^>]*style="([^"]*)"', svg.read_text())
        charts_seen += bool(found)
        for series, style in found:
            colour = re.search(r"(?:fill|stroke): (#[0-9a-f]{6})", style.replace("fill: none", ""))
            colours.setdefault(by_id[series], set()).add(colour.group(1))
    assert charts_seen >= 2  # the verdict's forest plot and the latency percentiles
    assert set(colours) == set(configs)
    assert all(len(c) == 1 for c in colours.values()), colours
    assert len({next(iter(c)) for c in colours.values()}) == len(configs)  # and no two share one


def test_markdown_carries_every_sections_content(tmp_path, ccbench):
    paths = three_configuration_bundles(tmp_path)
    out = tmp_path / "r.md"
    assert ccbench("report", *paths, "-o", out).returncode == 0
    text = out.read_text()
    sections = {part.split("\n", 1)[0]: part for part in text.split("\n## ")[1:]}
    assert list(sections)[0] == "Verdict per protection layer"
    for title, body in sections.items():
        if title == "Flags" and "No configuration has" in body:
            continue  # nothing flagged, and it says so
        assert "\n| " in body or "\n- " in body, f"{title}: only captions"
    assert "| workload case metric |" in sections["Overhead heatmap"]
    assert "medians per configuration" in sections["Workloads by configuration"]
    assert "largest:" in sections["Workloads by configuration"]  # each chart's takeaway in words
    assert not re.search(r"\d\.\d{7,}", text), re.search(r".{40}\d\.\d{7,}.{10}", text)  # no raw floats
    assert "e+0" not in text


def test_seed_001_report_pools_per_workload(tmp_path, ccbench):
    from seed001_table2 import write_table2_bundles

    paths = write_table2_bundles(tmp_path)
    out = tmp_path / "r.md"
    assert ccbench("report", *paths, "-o", out).returncode == 0
    section = out.read_text().split("## Overhead model", 1)[1].split("\n## ", 1)[0]
    pooled = section.split("### pooled per workload over its cases and metrics", 1)[1].split("###", 1)[0]
    rows = {
        line.split("|")[1].strip(): line
        for line in pooled.splitlines()
        if line.startswith("| ") and "workload" not in line
    }
    assert set(rows) == {"resnet18", "mobilenetv3-small"}
    cells = [c.strip() for c in rows["resnet18"].split("|")]
    c_tee = float(cells[3].split()[0])
    c_tls = float(cells[4].split()[0])
    assert abs(c_tee - 0.126) <= 0.005 and abs(c_tls - 0.079) <= 0.005, (c_tee, c_tls)
    assert "machine" in cells[5]  # the confounding note on the pooled row
    assert "T_base" not in pooled.split("\n")[2]  # no normalised 1.0 passed off as a time
    per_case = section.split("### per case", 1)[1]
    assert "| resnet18 | MNIST | wall_time | 3,615 s |" in per_case  # T_base with its unit (01:00 and 01:04 fitted)
    assert "spread between the cases pooled" in section and "measurement noise" in section


@pytest.mark.skipif(
    shutil.which("chromium") is None, reason="chromium is not installed (bash scripts/setup.sh --with browser)"
)
def test_verdict_is_above_the_first_table_in_headless_chromium(tmp_path, ccbench):
    """A report over three configurations, rendered and screenshotted: the verdict's box is on the
    screen and lies wholly above the first ordinary table (the machines)."""
    import numpy as np
    from bundles import write_samples
    from PIL import Image

    paths = []
    for host, tee, factor in (("plain", "none", 1.0), ("snp", "sev-snp", 1.06), ("tdx", "tdx", 1.1)):
        samples = [
            {"workload": w, "variant": {}, "metric": "time", "value": factor * base * v, "repetition": i}
            for w, base in (("prime", 2.0), ("sort", 5.0))
            for i, v in enumerate([1.0, 1.01, 0.99, 1.005])
        ]
        paths.append(write_samples(tmp_path, host, tee, samples))
    html_path = tmp_path / "r.html"
    done = ccbench("report", *paths, "-o", html_path)
    assert done.returncode == 0, done.stderr
    page = html_path.read_text()
    assert page.index("Verdict per protection layer</h2>") < page.index("<h2>Machines</h2>")
    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1280,3000",
            f"--screenshot={shot}",
            html_path.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.exists(), done.stderr[-2000:]
    pixels = np.asarray(Image.open(shot).convert("RGB")).astype(int)

    def rows_with(colour: str) -> np.ndarray:
        rgb = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
        return np.flatnonzero(
            (np.abs(pixels - rgb) <= 2).all(axis=2).sum(axis=1) > 200
        )  # rows of a box, not anti-aliased text

    verdict_box = rows_with("#fff7e0")  # .verdict background
    table_headers = rows_with("#f4f4f4")  # th of every other table
    assert len(verdict_box) > 50, "the verdict is not on the screen"
    assert len(table_headers) > 0
    assert verdict_box.max() < table_headers.min(), (verdict_box.max(), table_headers.min())


def test_model_grouping_is_the_users_choice_and_bad_choices_are_refused(tmp_path, ccbench):
    from seed001_table2 import write_table2_bundles

    paths = write_table2_bundles(tmp_path)
    out = tmp_path / "all.md"
    assert ccbench("report", *paths, "-o", out, "--model-by", "all").returncode == 0
    section = out.read_text().split("## Overhead model", 1)[1].split("\n## ", 1)[0]
    assert "### pooled over every case of every workload" in section and "| all workloads | 6 cases pooled |" in section
    done = ccbench("report", *paths, "-o", out, "--model-by", "machine")
    assert done.returncode == 2 and "--model-by" in done.stderr and "Traceback" not in done.stderr


#: run in the page by the first-screen test: where the verdict's lines and its chart are laid out in
#: a 1400x1000 window, and per forest panel how many markers, intervals and n = 1 marks were drawn
FIRST_SCREEN_PROBE = """
<script>
const box = (el) => { const r = el.getBoundingClientRect(); return [r.top, r.bottom, r.left, r.right]; };
const verdict = document.querySelector("section.verdict");
const chart = verdict ? verdict.querySelector("svg") : null;
const count = (id, tag) => { const g = document.getElementById(id); return g ? g.querySelectorAll(tag).length : 0; };
const panels = [];
const series = chart ? [...new Set([...chart.querySelectorAll("g[id*=':forest-']")]
    .map((g) => g.id.split(":forest-")[0]))] : [];
for (const s of series) {
  const markers = ["points", "pooled", "one-value"].map((w) => count(`${s}:forest-${w}`, "use"));
  panels.push({series: s, markers: markers[0] + markers[1], one_value: markers[2],
               intervals: count(`${s}:forest-intervals`, "path")});
}
const probe = document.createElement("pre");
probe.id = "first-screen-probe";
probe.textContent = JSON.stringify({
  viewport: [window.innerWidth, window.innerHeight],
  lines: verdict ? [...verdict.querySelectorAll("li")].map((li) => [li.textContent, ...box(li)]) : [],
  chart: chart ? box(chart) : null,
  panels: panels,
  one_value_marks: chart ? [...chart.querySelectorAll("text, g[id^='forest:one-value']")]
      .filter((e) => (e.id || "").startsWith("forest:one-value")).length : 0,
  chart_text: chart ? chart.textContent : "",
});
document.body.appendChild(probe);
</script>
"""


def first_screen(html_path, tmp_path) -> dict:
    """The report opened in headless Chromium at 1400x1000: the probe's measurements."""
    page = tmp_path / "probed.html"
    page.write_text(html_path.read_text().replace("</body>", FIRST_SCREEN_PROBE + "</body>"))
    done = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1400,1000",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = re.search(r'<pre id="first-screen-probe">(.*?)</pre>', done.stdout, re.S)
    assert found, done.stderr[-2000:]
    import html as html_module

    return json.loads(html_module.unescape(found.group(1)))


def check_first_screen(probe: dict) -> None:
    """The verdict (one line per layer) and its chart lie within the first 1000 px, and every row
    of the chart has its interval or the n = 1 mark."""
    # headless Chromium lays the page out 1400 wide (its window's inner height is less than the
    # window's; its screenshot at this size shows the page's first 1000 px)
    assert probe["viewport"][0] == 1400, probe["viewport"]
    assert probe["lines"], "no verdict lines"
    for text, top, bottom, _left, _right in probe["lines"]:
        assert 0 <= top and bottom <= 1000, (text, top, bottom)
    assert probe["chart"] is not None, "no chart in the verdict"
    top, bottom, left, right = probe["chart"]
    assert 0 <= top and bottom <= 1000 and right <= 1400, probe["chart"]
    assert probe["panels"], "the chart is no forest plot"
    for panel in probe["panels"]:
        # each row drawn is a marker; each has its interval, or is an open circle of one value
        assert panel["markers"] + panel["one_value"] > 0, panel
        assert panel["intervals"] == panel["markers"], panel
    if any(panel["one_value"] for panel in probe["panels"]):
        assert probe["one_value_marks"] > 0 and "one value: no interval" in probe["chart_text"]
    assert "slower ->" in probe["chart_text"] and "1x" in probe["chart_text"]


@pytest.mark.skipif(
    shutil.which("chromium") is None, reason="chromium is not installed (bash scripts/setup.sh --with browser)"
)
def test_first_screen_holds_the_verdict_and_a_forest_plot_with_intervals(tmp_path, ccbench):
    """Three machines x two storage variants (several runs each): every row has its interval."""
    paths = three_configuration_bundles(tmp_path)
    html_path = tmp_path / "r.html"
    done = ccbench("report", *paths, "-o", html_path)
    assert done.returncode == 0, done.stderr
    probe = first_screen(html_path, tmp_path)
    check_first_screen(probe)
    # one verdict line per layer at least (SEV-SNP, TDX, fscrypt), and one panel per configuration
    assert len(probe["lines"]) >= 3
    assert len(probe["panels"]) == 5
    assert sum(panel["intervals"] for panel in probe["panels"]) >= 5


@pytest.mark.skipif(
    shutil.which("chromium") is None, reason="chromium is not installed (bash scripts/setup.sh --with browser)"
)
def test_first_screen_of_seed_000_marks_one_value_rows(tmp_path, ccbench):
    """seed 000's machines, one pyperformance value per benchmark: those rows say they have no interval."""
    from pathlib import Path

    seed = Path(__file__).parent / "data" / "import" / "seed000-azure"
    tees = ["--tee", "TDX-Encrypted=tdx", "--tee", "TDX-Non-Encrypted=tdx", "--tee", "Intel-Non-TDX=none"]
    done = ccbench("import", "seed000", seed, "--out", tmp_path / "bundles", *tees)
    assert done.returncode == 0, done.stderr
    html_path = tmp_path / "r.html"
    done = ccbench("report", *sorted((tmp_path / "bundles").iterdir()), "-o", html_path)
    assert done.returncode == 0, done.stderr
    probe = first_screen(html_path, tmp_path)
    check_first_screen(probe)
    assert sum(panel["one_value"] for panel in probe["panels"]) > 0


def test_machines_identical_facts_once_and_differences_highlighted(tmp_path, ccbench):
    """Three machines that differ in host and TEE and share their kernel: the shared facts are
    one row each, the differing ones a table whose cells unlike the first machine's are set apart."""
    paths = three_configuration_bundles(tmp_path)
    html_path = tmp_path / "r.html"
    assert ccbench("report", *paths, "-o", html_path).returncode == 0
    section = html_path.read_text().split("<h2>Machines</h2>", 1)[1].split("</section>", 1)[0]
    differs, same = section.split("the same on every machine", 1)
    assert "what differs between the 3 machines" in differs
    rows = {
        re.sub(r"<[^>]+>", "", row.split("</td>", 1)[0]): row
        for row in re.findall(r"<tr>(.*?)</tr>", differs, re.S)
        if "<td" in row
    }
    # the TEE differs: the SEV-SNP and TDX machines' cells set apart, the first (plain) machine's not
    tee = re.findall(r"<td( class='differs')?>([^<]*)</td>", rows["TEE"])[1:]
    assert [(bool(mark), value) for mark, value in tee] == [(False, "no TEE"), (True, "SEV-SNP"), (True, "TDX")]
    assert "<td>TEE</td>" not in same  # each fact in one place
    shared = dict(re.findall(r"<tr>\s*<td>([^<]*)</td>\s*<td>([^<]*)</td>\s*</tr>", same))
    assert shared and len(shared) + len(rows) >= 10  # the facts they share: one value each
    assert all(fact not in rows for fact in shared)


@pytest.mark.parametrize("rows", [3, 28, 92])
def test_a_forest_charts_title_clears_its_panels_titles(rows):
    """The chart's title sits above the panels' titles however many rows the chart has (placed as a
    fraction of a 92-row chart's height it fell onto them)."""
    import pandas as pd

    from ccbench.report import charts
    from ccbench.report.forest import Forest

    labels = [f"bench_{i:02d}" for i in range(rows)]
    configs = ["SEV-Encrypted / SEV-SNP", "TDX-Non-Encrypted / TDX"]
    frame = pd.DataFrame(
        [
            {"label": label, "config": config, "layer": "TEE", "te": 1.1, "te_low": 1.0, "te_high": 1.2,
             "range_low": float("nan"), "range_high": float("nan"), "cases": 1, "significant": True, "kind": "row"}
            for label in labels
            for config in configs
        ]
    )  # fmt: skip
    document = charts.forest(Forest(frame, labels, configs, {c: "TEE" for c in configs}), "every case against x").svg()
    import xml.etree.ElementTree as ET

    # each text's box from its baseline and font size (a descent of a quarter of the size under it)
    root = ET.fromstring(document.split("?>", 1)[1])
    texts = {}
    for element in root.iter("{http://www.w3.org/2000/svg}text"):
        size = float(re.search(r"font-size: ([0-9.]+)px", element.get("style")).group(1))
        baseline = float(element.get("y"))
        texts.setdefault(element.text, []).append((baseline - size, baseline + 0.25 * size))
    ((title_top, title_bottom),) = texts["every case against x"]
    headings = [box for config in configs for box in texts[config]]
    assert len(headings) == len(configs)
    for heading_top, _ in headings:
        assert title_bottom < heading_top, (rows, title_bottom, heading_top)
    assert title_top >= 0  # and on the chart
