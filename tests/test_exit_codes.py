"""One table of exit codes (issue 59, "the exit codes in one table everywhere"): basics.errors.EXIT_CODES,
printed at the end of `ccbench --help`, and the same table, row for row, in README.md, docs/commands.md
and docs/ci.md; every code in it is one the code returns, and the code returns no other."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from ccbench.basics.errors import EXIT_CODES
from ccbench.cli import cli

ROOT = Path(__file__).parents[1]
DOCS = ["README.md", "docs/commands.md", "docs/ci.md"]


def _tables(text: str) -> list[list[tuple[str, str]]]:
    """Every Markdown table whose header is '| exit | meaning |', as (code, meaning) rows."""
    tables = []
    for match in re.finditer(r"^\| exit \| meaning \|\n\|---\|---\|\n((?:\|.*\|\n?)+)", text, flags=re.M):
        rows = [line.strip().strip("|").split(" | ", 1) for line in match.group(1).splitlines()]
        tables.append([(code.strip(), meaning.strip()) for code, meaning in rows])
    return tables


@pytest.mark.parametrize("doc", DOCS)
def test_each_doc_carries_the_codes_table_and_no_other(doc):
    text = (ROOT / doc).read_text()
    tables = _tables(text)
    assert tables == [list(EXIT_CODES)], (doc, tables)
    # no second, disagreeing list of codes in prose: "Exit codes: 0 success, 1 ..."
    assert not re.search(r"Exit codes: \d", text), doc
    # a code the page names elsewhere ("exit 3", "exits 75") is one of the table's
    codes = {c for code, _ in EXIT_CODES for c in code.split(", ")}
    named = set(re.findall(r"\bexits? (\d+)\b", text))
    assert named <= codes, (doc, named - codes)


def test_help_ends_with_the_table():
    done = CliRunner().invoke(cli, ["--help"], prog_name="ccbench")
    assert done.exit_code == 0, done.output
    tail = done.output.split("Exit codes:\n", 1)[1]
    words = " ".join(tail.split())
    for code, meaning in EXIT_CODES:
        assert f"{code} {' '.join(meaning.split())}" in words, (code, words)


def _codes_in_source() -> set[str]:
    """The exit codes the source gives literally: sys.exit(N), SystemExit(N), exit_code = N, EXIT_X = N,
    `return 130` (an interrupted study or fleet), and 128 + a signal's number (SIGHUP, SIGTERM)."""
    found: set[str] = set()
    for path in (ROOT / "src" / "ccbench").rglob("*.py"):
        if "workspace_files" in path.parts or "notebooks" in path.parts:
            continue  # run inside a federation's parties or a notebook kernel, not as ccbench
        text = path.read_text()
        found |= set(re.findall(r"(?:sys\.exit|SystemExit)\((\d+)\)", text))
        found |= set(re.findall(r"\bexit_code = (\d+)\b", text))
        found |= set(re.findall(r"^EXIT_\w+ = (\d+)", text, flags=re.M))
        for _names, values in re.findall(r"^(EXIT_\w+(?:, EXIT_\w+)+) = ([\d, ]+)$", text, flags=re.M):
            found |= {v.strip() for v in values.split(",")}
        found |= set(re.findall(r"\breturn (130)\b", text))
        if "128 + " in text:
            found |= {"129", "143"}  # SIGHUP, SIGTERM: the signals ccbench turns into a stop
    return found


def test_every_code_in_the_table_is_used_and_no_other():
    documented = {c for code, _ in EXIT_CODES for c in code.split(", ")}
    used = _codes_in_source() | {"0", "1", "2"}  # click's usage errors exit 2; a run's failures 1
    assert used == documented, {"used, not in the table": used - documented, "in the table, unused": documented - used}
