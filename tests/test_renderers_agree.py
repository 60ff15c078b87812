"""One judged result, rendered many ways (issue "One answer everywhere"): for every layer, the terminal's
headline, the page's point, the verdict table's cells, the ``--summary --json`` record and the sentence
say the same words and the same counts, over generated comparisons and over real bundles the tests hold
(seed 000's published results, imported)."""

from __future__ import annotations

import json
import math
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_verdict_semantics import cases, comparison_frame  # noqa: I001  (the generated comparisons)

from ccbench.analysis.judgement.headline import layer_lines, page_points
from ccbench.analysis.judgement.verdict import verdicts
from ccbench.analysis.judgement.verdict_table import verdict_table
from ccbench.commands.compare import verdict_record

EXAMPLES = int(os.environ.get("CCBENCH_HYPOTHESIS_EXAMPLES", "40"))


def _agree(items) -> None:
    """Every renderer of each layer against the others."""
    cells = verdict_table(items)
    points = page_points(items)
    for item, (_, cell), point in zip(items, cells.iterrows(), points, strict=True):
        lines = layer_lines(item, width=None)
        record = json.loads(json.dumps(verdict_record(item), default=str))
        words = item.words()
        # the same words: the headline, the page, the JSON record and the table's cell
        assert record["words"] == words and record["headline"] == lines
        assert point.startswith(lines[0]) and all(line.strip() in point for line in lines[1:])
        assert words in cell["typical cost"]
        if not item._per_message_only() and item.judgement is not None:
            phrase = item.judgement.phrase()
            assert phrase in lines[0], (phrase, lines[0])
        # the same counts: the record, the table and the headline's "k of n" (or "k/n")
        assert (record["comparisons"], record["significant"]) == (item.comparisons, item.significant)
        assert cell["comparisons"].startswith(f"{item.significant} of {item.comparisons} significant, "), cell
        # the layer's own counts end its line (a scope's words may count a workload's rows before them)
        found = re.findall(r"(\d+)(?: of |/)(\d+)(?: per-message)? (?:comparisons )?significant", lines[0])
        counts = re.match(r"(\d+) (\d+)", " ".join(found[-1])) if found else None
        if counts:
            assert (int(counts.group(1)), int(counts.group(2))) == (item.significant, item.comparisons), lines[0]
        if item.left_out_rows:
            assert f"{item.left_out_rows} left out" in lines[0] or "left out" in " ".join(lines), lines
        # one figure per workload, its judgement's: no second per-workload result beside it (the JSON's
        # workload_costs gave fio-cold's geometric mean, 15x, beside its judgement, 19x), and the
        # layer's range is of those figures
        assert "workload_costs" not in record
        figures = [w["typical"] for w in record["workload_judgements"] if _finite(w["typical"])]
        if figures:
            assert (record["range_low"], record["range_high"]) == (min(figures), max(figures)), record
        # the direction: a layer whose figure is a cost is never called faster anywhere, and the other way
        if item.distinguishable and item.judgement is not None and item.judgement.kind == "pooled":
            word = "slower" if item.judgement.typical >= 1 else "faster"
            for text in (lines[0], point, cell["typical cost"], record["words"], item.sentence()):
                assert word in text, (word, text)


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(parts=st.lists(cases(), min_size=1, max_size=60), with_implausible=st.booleans())
def test_every_renderer_says_the_same_on_generated_comparisons(parts, with_implausible):
    _agree(verdicts(comparison_frame(parts, with_implausible)))


@pytest.mark.parametrize("pair", [None, "TDX*=Intel-Non-TDX"])
def test_every_renderer_says_the_same_on_seed000(tmp_path, ccbench, pair):
    from pathlib import Path

    from ccbench.analysis.comparison import comparison

    seed = Path(__file__).parent / "data" / "import" / "seed000-azure"
    tees = ["--tee=TDX-Encrypted=tdx", "--tee=TDX-Non-Encrypted=tdx", "--tee=Intel-Non-TDX=none"]
    done = ccbench("import", "seed000", seed, "--out", tmp_path / "s0", *tees)
    assert done.returncode == 0, done.stderr
    result = comparison([tmp_path / "s0"], pairs=[pair] if pair else ())
    items = result.verdicts()
    assert items
    _agree(items)

    # the JSON is JSON: no NaN token anywhere (a workload's missing MDE was written as NaN)
    def refuse(token):
        raise AssertionError(f"{token} in --summary --json")

    lines = ccbench("compare", tmp_path / "s0", "--summary", "--json").stdout.splitlines()
    assert lines and all(json.loads(line, parse_constant=refuse) for line in lines)
    # the wide tables are never cropped at the pipe's width: every row of every box is closed
    details = ccbench("compare", tmp_path / "s0", "--details").stdout.splitlines()
    boxed = [line for line in details if line[:1] in "│┃"]
    assert boxed and all(line.rstrip()[-1] in "│┃" for line in boxed), [line[-20:] for line in boxed][:3]
    # and the terminal prints the headline it renders (wrapped, never cut)
    summary = ccbench("compare", tmp_path / "s0", "--summary", *(["--pair", pair] if pair else []))
    printed = " ".join(line.strip() for line in summary.stdout.splitlines())
    for item in items:
        assert item.words() in printed or item.judgement is None, (item.words(), printed)
