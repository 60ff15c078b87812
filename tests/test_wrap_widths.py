"""The same facts at every terminal width, and no line break inside a figure (ccbench.basics.wrap): compare
--summary of a real bundle (seed 000's published Azure results) at 60 to 200 columns says the same
words, only wrapped differently (on the code before: at 80 columns "; 13/30 significant",
"(none significant in 1 other)" and "20 left out" were dropped, and 140 columns mixed "13 of 30
significant in 2 workloads" with "5/30 significant"); compare's full output, env, plans and the
run's warning wrap at $COLUMNS (they printed 200- and 300-column lines, cut by rich inside "I2 0%" and
"13.7 us")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ccbench.basics.console import say
from ccbench.basics.wrap import fit
from ccbench.observe.interference import contention_summary

SEED = Path(__file__).parent / "data" / "import" / "seed000-azure"
WIDTHS = [60, 80, 100, 140, 200]
#: a figure's parts a break must never separate, checked independently of the wrapper's own rules:
#: (end of a line, start of the next)
UNITS = r"(?:us|ms|s|ns|%|x|IOPS|MB/s|MiB/s|GiB|MiB|KiB|slower|faster)\b"
BAD_BREAKS = [
    (re.compile(r"\d$"), re.compile(rf"^{UNITS}")),  # "13.7 | us", "9.0x | slower"
    (re.compile(r"\bI2$"), re.compile(r"^\d")),  # "I2 | 0%"
    (re.compile(r"\d+ of$"), re.compile(r"^\d")),  # "13 of | 30"
    (re.compile(r"\d$"), re.compile(r"^of \d")),  # "13 | of 30"
    (re.compile(r"(?:^|\s)--[a-z][\w-]*$"), re.compile(r"^(?:\d|[A-Z][A-Z_]+\b|/)")),  # "--addr | 0.0.0.0"
]
#: the facts a verdict line states: figures with their units, counts, intervals
FACT = re.compile(r"\d+ of \d+ [a-z-]+|\d+ left out|\[[^\]]*\]|\d[\d,.]*(?:x|%)?(?: (?:slower|faster))?")


def bad_breaks(text: str) -> list[str]:
    lines = text.splitlines()
    found = []
    for before, after in zip(lines, lines[1:], strict=False):
        end, start = before.rstrip(), after.lstrip()
        if any(tail.search(end) and head.search(start) for tail, head in BAD_BREAKS):
            found.append(f"{end[-30:]!r} | {start[:30]!r}")
    return found


def too_wide(text: str, width: int) -> list[str]:
    """The lines wider than ``width`` that could have been broken (a single word wider stays whole)."""
    return [line for line in text.splitlines() if len(line) > width and " " in line.strip()]


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    from conftest import run_ccbench

    out = tmp_path_factory.mktemp("seed") / "b"
    tees = ["--tee", "TDX-Encrypted=tdx", "--tee", "TDX-Non-Encrypted=tdx", "--tee", "Intel-Non-TDX=none"]
    done = run_ccbench("import", "seed000", SEED, "--out", out, *tees)
    assert done.returncode == 0, done.stderr
    return sorted(out.iterdir())


def _verdict(stdout: str) -> str:
    return stdout.split("\nlint: ")[0]


def test_the_summary_says_the_same_facts_at_every_width(bundles, ccbench):
    said = {}
    for width in WIDTHS:
        done = ccbench("compare", *bundles, "--summary", env={"COLUMNS": str(width)})
        assert done.returncode == 0, done.stderr
        assert not too_wide(done.stdout, width), (width, too_wide(done.stdout, width))
        assert not bad_breaks(done.stdout), (width, bad_breaks(done.stdout))
        said[width] = done.stdout
    words = {width: " ".join(text.split()) for width, text in said.items()}
    facts = {width: sorted(FACT.findall(_verdict(text))) for width, text in words.items()}
    assert facts[200] and "0 of 3 significant" in words[200] and "kernels differ: 6.8.0-1017-azure" in words[200]
    for width in WIDTHS:
        assert facts[width] == facts[200], (width, set(facts[width]) ^ set(facts[200]))
        # one style: the very same words, only the line breaks differ
        assert words[width] == words[200], width
    assert said[60] != said[200]  # and the wrapping does follow the width


@pytest.mark.parametrize("width", [60, 80])
def test_compare_env_and_plans_wrap_at_columns_and_never_inside_a_figure(bundles, ccbench, width):
    env = {"COLUMNS": str(width)}
    full = ccbench("compare", *bundles, env=env)
    assert full.returncode == 0, full.stderr
    # the table may stay wide; the prose around it wraps
    prose = "\n".join(line for line in full.stdout.splitlines() if not re.match(r"^[│┃┏┡├└╇┳┗┛━─]", line))
    prose = prose.split("\nbaseline: ")[0]
    assert not too_wide(prose, width), too_wide(prose, width)
    assert not bad_breaks(full.stdout), bad_breaks(full.stdout)
    for args in (["env"], ["plans"]):
        done = ccbench(*args, env=env)
        assert done.returncode == 0, done.stderr
        assert not too_wide(done.stdout, width), (args, too_wide(done.stdout, width))
        assert not bad_breaks(done.stdout), (args, bad_breaks(done.stdout))
    assert len(ccbench("plans", env={"COLUMNS": "300"}).stdout.splitlines()) < len(done.stdout.splitlines())


def test_the_runs_warning_wraps_at_columns_and_keeps_its_flag_and_figures(monkeypatch, capsys):
    executions = [
        {"contended": True, "interference": {"others_cpus": 1.37, "steal_fraction": 0.12}},
        {"contended": False, "interference": {}},
    ]
    warning = contention_summary(executions)
    for width in (40, 60, 80):
        monkeypatch.setenv("COLUMNS", str(width))
        say(f"warning: {warning}")
        out = capsys.readouterr().out
        assert " ".join(out.split()) == f"warning: {warning}"
        assert len(out.splitlines()) > 1 and not too_wide(out, width), out
        assert not bad_breaks(out), out
        assert any("1.37 CPUs" in line for line in out.splitlines()), out


@pytest.mark.parametrize(
    "text",
    [
        "one figure (Cochran's Q p=0.93, I2 0%); left out (IOPS and latency disagree: 0.246 IOPS at 13.7 us each is 0.0000034 I/Os at a time)",
        "13 of 30 significant in 2 workloads, 20 left out; 9.0x slower [7.1x, 11x]; faster, 4.3x to 5.5x",
        "console=ttyS0 rdinit=/process_api -- --firecracker-init --addr 0.0.0.0:2024 --max-ws-buffer-size 32768",
        "name one with --pair CONFIG=BASELINE or --baseline; the run's files under /var/tmp/ccbench/work/a-long-path",
    ],
)
def test_no_width_breaks_inside_a_figure_a_flag_or_a_path(text):
    for width in range(40, len(text) + 1):
        wrapped = fit(text, width)
        assert " ".join(part.strip() for part in wrapped.split("\n")) == text
        assert not bad_breaks(wrapped), (width, wrapped)
        for path in re.findall(r"/\S+", text):
            assert path in wrapped, (width, path)  # a path whole on one line


def test_a_path_longer_than_any_line_stays_beside_its_key():
    """ "bundle: PATH" with a path wider than the terminal: the path stays on the key's line (on a line
    of its own it would be as long, with "bundle:" alone above it); a word that fits a further line
    still goes there."""
    path = "/tmp/pytest-of-root/pytest-142/popen-gw1/test_run_summary_is_short_and_0/out/vm-20261203T095927Z"
    assert fit(f"bundle: {path}", 60) == f"bundle: {path}"
    assert fit(f"bundle: {path} then more words here", 60).splitlines() == [
        f"bundle: {path}",
        "    then more words here",
    ]
    assert fit("key: " + "x" * 50, 40) == "key: " + "x" * 50  # 50 > 40 - 4: no line holds it
    assert fit("key: " + "x" * 25, 29) == "key: " + "x" * 25  # a further line could hold it: the key keeps it
    assert fit("word " + "x" * 25, 29).splitlines() == ["word", "    " + "x" * 25]  # no key: it goes on
    assert fit("a few short words " + "y" * 20, 30).splitlines() == ["a few short words", "    " + "y" * 20]


@pytest.mark.parametrize("width", [None, 100])
def test_the_tables_effect_is_never_wrapped_inside_its_figure(bundles, ccbench, width):
    """A user trial: the table split "68.1% slower [24.0% slower, 2.3x" / "slower]" over two lines, and
    $COLUMNS was ignored for a pipe (200 columns whatever it said). An effect cell is one line; the
    table follows $COLUMNS where it is set."""
    done = ccbench("compare", *bundles, env={"COLUMNS": str(width)} if width else {})
    assert done.returncode == 0, done.stderr
    rows = [line.split("│")[1:-1] for line in done.stdout.splitlines() if line.startswith("│")]
    header = next(line for line in done.stdout.splitlines() if line.startswith("┃") and "effect" in line)
    effect = [cell.strip() for cell in header.split("┃")[1:-1]].index("effect [95% CI]")
    assert rows and any(row[effect].strip() for row in rows)
    # a continuation line (its first cell empty) never holds the rest of an effect
    assert not [row[effect] for row in rows if not row[0].strip() and row[effect].strip()], done.stdout
    table = [line for line in done.stdout.splitlines() if line.startswith(("│", "┏"))]
    assert max(len(line) for line in table) < (200 if width else 260)
