"""Property-based: odd labels, case names and values thrown through import -> verify -> compare ->
report -> export -> history, as a user's shell would (the real command line, run in this process).

Whatever the strings (quotes, ``../``, glob characters, ``$`` math, NUL inside JSON, very long,
unicode), nothing is written outside the directory the commands were given, no command ends in a
traceback (exit 0, or one line and exit 2), and the numbers come back as they went in. CI runs a few
examples; ``CCBENCH_HYPOTHESIS_EXAMPLES=500`` runs more (docs/analysis.md, Testing).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import statistics
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

EXAMPLES = int(os.environ.get("CCBENCH_HYPOTHESIS_EXAMPLES", "8"))

#: strings that broke, or could break, a path, a glob, SQL, JSON, HTML or matplotlib
NASTY = [
    "../x",
    "../../../escaped",
    "/abs/path",
    "*",
    "a?b",
    "[1]",
    "{a,b}",
    "$x$",
    "$\\frac$",
    "'; DROP TABLE runs; --",
    '"quoted"',
    "back\\slash",
    "<b>html</b>",
    "名前 ünïcödé",
    "tab\there",
    "x" * 300,
    "-rf",
    "%s %n",
]
odd_text = st.one_of(
    st.sampled_from(NASTY),
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40),
)
#: command names go into JSON: NUL and newlines allowed there
command_names = st.lists(
    st.one_of(odd_text, st.sampled_from(["nul\x00inside", "line\nbreak"])), min_size=1, max_size=3, unique=True
)
#: labels go through argv: no NUL there (exec refuses it), anything else
labels = odd_text.filter(lambda text: "\x00" not in text and text.strip() and "=" not in text)


def drawn_times(seed: int) -> list[float]:
    """3 to 6 run times between a microsecond and ten days, from ``seed``."""
    rng = random.Random(seed)
    return [rng.choice([1e-6, 1e-3, 1.0, 1e3]) * rng.uniform(1, 1000) for _ in range(rng.randint(3, 6))]


def cli(*args) -> tuple[int, str, str]:
    from ccbench.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue()


def accepted(result: tuple[int, str, str], what: str) -> bool:
    """Exit 0; or a one-line error with exit 2 (then False). Anything else fails the test."""
    code, _, err = result
    assert "Traceback" not in err, (what, err)
    if code == 0:
        return True
    assert code == 2 and err.strip().count("\n") == 0 and err.startswith("ccbench: error:"), (what, code, err)
    return False


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=EXAMPLES <= 20,  # CI: the same examples every time
)
@given(names=command_names, label_a=labels, label_b=labels, seed=st.integers(0, 2**32))
# the attacks of issue 29, every time: math text, path escapes, glob characters, SQL quotes
@example(names=["$\\frac$", "../../../escaped", "[1]", "it's"], label_a="$x$", label_b="../b*", seed=1)
def test_odd_names_and_values_go_through_every_command(tmp_path_factory, monkeypatch, names, label_a, label_b, seed):
    if label_a.strip() == label_b.strip():
        label_b = label_b + " (2)"
    sandbox = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    # deep, so that an escape by ../ of any depth lands somewhere this test looks
    work = sandbox / "a" / "b" / "c" / "work"
    work.mkdir(parents=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(work / "cache"))
    monkeypatch.chdir(work)
    drawn = {
        label: {name: drawn_times(seed + index * 7919 + side) for index, name in enumerate(names)}
        for side, label in enumerate((label_a, label_b))
    }
    out = work / "out"
    for index, (label, per_command) in enumerate(drawn.items()):
        source = work / f"h{index}.json"
        source.write_text(json.dumps({"results": [{"command": n, "times": t} for n, t in per_command.items()]}))
        if not accepted(cli("import", "hyperfine", source, "--out", out, "--label", label), "import"):
            event("import refused the input with one line")
            return
    bundles = sorted(p for p in out.iterdir() if (p / "manifest.json").exists())
    assert len(bundles) == 2
    for bundle in bundles:
        assert cli("verify", bundle)[0] == 0
    code, stdout, err = cli("compare", "--json", *bundles)
    if accepted((code, stdout, err), "compare"):
        rows = [json.loads(line) for line in stdout.splitlines() if '"median"' in line]
        # the two sides' medians are the two labels' (which side is the baseline is compare's choice)
        expected = {name: sorted(statistics.median(per[name]) for per in drawn.values()) for name in names}
        assert len(rows) == len(names)
        for row in rows:
            shown = sorted([row["baseline_median"], row["median"]])
            assert shown == pytest.approx(expected[row["params"]["command"]], rel=1e-9)
    assert accepted(cli("report", *bundles, "-o", work / "r.html", "-j", "1"), "report")
    if accepted(cli("export", *bundles, "-o", work / "e.parquet"), "export"):
        import pyarrow.parquet as pq

        exported = sorted(pq.read_table(work / "e.parquet", columns=["value"]).column("value").to_pylist())
        assert exported == sorted(v for per in drawn.values() for t in per.values() for v in t)
    accepted(cli("history", "add", *bundles, "--store", work / "h.duckdb"), "history add")
    # nothing outside the directory the commands were given
    assert files_under(sandbox) - files_under(work) == {
        sandbox / "a",
        sandbox / "a" / "b",
        sandbox / "a" / "b" / "c",
        work,
    }
    event("through every command")
