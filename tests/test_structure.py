"""The house rules of the source tree (docs/architecture.md), checked so that they stay true: no
module over 500 lines (a room is split before it passes), no function over 100 lines, and no
generic module (the runner, the fleet, the wheelhouse) naming a workload kind: workloads declare
what they need and the generic layers iterate the registry."""

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "ccbench"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 100
#: analysis/ (issue "One house"): its rooms split by what they hold before a module reaches this
MAX_ANALYSIS_LINES = 500
GENERIC = ["run/runner.py", "run/phases.py", "run/execution.py", "run/supervise.py", "fleet"]


def _modules():
    return sorted(p for p in SRC.rglob("*.py") if "notebooks/sources" not in p.as_posix())


def test_no_module_over_the_limit():
    too_long = {
        str(p.relative_to(SRC)): n for p in _modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not too_long, f"split these modules (lines): {too_long}"


def test_no_analysis_module_over_its_limit():
    too_long = {
        str(p.relative_to(SRC)): n
        for p in sorted((SRC / "analysis").rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > MAX_ANALYSIS_LINES
    }
    assert not too_long, f"split these analysis modules by what they hold (lines): {too_long}"


def test_no_function_over_the_limit():
    too_long = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    too_long[f"{path.relative_to(SRC)}:{node.name}"] = lines
    assert not too_long, f"make these read as a table of contents of smaller steps (lines): {too_long}"


@pytest.mark.parametrize("place", GENERIC)
def test_generic_layers_name_no_workload_kind(place):
    from ccbench.workloads import REGISTRY

    kinds = sorted(set(REGISTRY) - {"command"})  # "command" is also an ordinary word
    pattern = re.compile(r"[\"'](" + "|".join(map(re.escape, kinds)) + r")[\"']|workloads\.(" + "|".join(kinds) + ")")
    paths = [SRC / place] if place.endswith(".py") else sorted((SRC / place).rglob("*.py"))
    found = [
        f"{path.relative_to(SRC)}:{number}: {line.strip()}"
        for path in paths
        if path.exists()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, "a generic module names a workload kind:\n" + "\n".join(found)
