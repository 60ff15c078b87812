"""The notebook workload: real kernels (ccbench-python3), real notebooks, no mocks."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import nbformat
import pytest

from ccbench.errors import PlanError
from ccbench.notebooks import BUNDLED, NEEDS_TORCH, SEED_ALIASES, bundled_path, resolve
from ccbench.workloads import REGISTRY, workload_class
from ccbench.workloads.base import ExecutionContext, WorkloadFailed
from ccbench.workloads.notebook import Notebook, NotebookParams, first_line, inject_parameters

HAS_TORCH = importlib.util.find_spec("torch") is not None


def make_notebook(path: Path, cells: list[tuple[str, str, list[str]]]) -> Path:
    nb = nbformat.v4.new_notebook()
    for kind, source, tags in cells:
        cell = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
        if tags:
            cell.metadata["tags"] = tags
        nb.cells.append(cell)
    nbformat.write(nb, str(path))
    return path


def context(tmp_path: Path, name: str = "nb") -> ExecutionContext:
    return ExecutionContext(
        workload_name=name,
        workdir=tmp_path / "work",
        raw_dir=tmp_path / "raw",
        repetition=0,
        warmup=False,
        variant={"storage": "disk"},
    )


def by_metric(measurements):
    out: dict[str, list] = {}
    for m in measurements:
        out.setdefault(m.metric, []).append(m)
    return out


def test_registered():
    assert workload_class("notebook") is Notebook
    assert REGISTRY["notebook"].endswith(":Notebook")
    assert Notebook.variant_axes == frozenset({"storage"})


def test_resolve_bundled_names_and_seed_aliases(tmp_path):
    for name in BUNDLED:
        assert resolve(name) == bundled_path(name)
        assert resolve(f"{name}.ipynb") == bundled_path(name)
        assert bundled_path(name).is_file(), name
        # the first cell names the data's origin
        first = nbformat.read(str(bundled_path(name)), as_version=4).cells[0]
        assert first.cell_type == "markdown" and "Data:" in first.source, name
    for alias, name in SEED_ALIASES.items():
        assert resolve(alias) == bundled_path(name), alias
    own = make_notebook(tmp_path / "SimplePrime.ipynb", [("code", "x = 1", [])])
    assert resolve(str(own)) == own.resolve()  # a real file wins over the alias
    with pytest.raises(PlanError, match="no-such-notebook.*bundled"):
        resolve("no-such-notebook.ipynb")


def test_inject_parameters_after_the_tagged_cell():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# t"),
        nbformat.v4.new_code_cell("a = 1"),
        nbformat.v4.new_code_cell("print(a)"),
    ]
    nb.cells[1].metadata["tags"] = ["parameters"]
    inject_parameters(nb, {"a": 2, "name": "x"})
    assert nb.cells[2].metadata["tags"] == ["injected-parameters"]
    assert "a = 2" in nb.cells[2].source and "name = 'x'" in nb.cells[2].source
    inject_parameters(nb, {"a": 3})  # replaces the earlier injected cell
    assert len(nb.cells) == 4 and "a = 3" in nb.cells[2].source
    with pytest.raises(WorkloadFailed, match="not a Python identifier"):
        inject_parameters(nb, {"not valid": 1})


def test_first_line():
    assert first_line("\n\n  import x  \ny = 2") == "import x"
    assert len(first_line("x" * 200)) == 80


def test_cells_timed_and_sum_to_total(tmp_path):
    path = make_notebook(
        tmp_path / "timed.ipynb",
        [
            ("markdown", "# Timed", []),
            ("code", "size = 'full'", ["parameters"]),
            ("code", "import time\ntime.sleep(0.3)", []),
            ("code", "data = bytearray(64 * 1024 * 1024)\nopen('out.txt', 'w').write(size)", []),
            ("code", "time.sleep(0.1)", []),
        ],
    )
    workload = Notebook("timed", NotebookParams(notebook=str(path), size="quick"))
    assert workload.requirements() is None
    ctx = context(tmp_path)
    metrics = by_metric(workload.run(ctx))
    cells = {m.case["cell"]: m for m in metrics["cell_s"]}
    # every code cell, keyed by its index in the executed notebook (the injected cell is 2)
    assert sorted(cells) == [1, 2, 3, 4, 5]
    assert cells[2].case["first_line"] == "# Parameters"
    assert cells[3].case["first_line"] == "import time"
    assert cells[3].value >= 0.29 and cells[5].value >= 0.09
    total = metrics["total_s"][0].value
    cell_sum = sum(m.value for m in metrics["cell_s"])
    overhead = metrics["cell_overhead_s"][0].value
    assert cell_sum <= total
    assert overhead == pytest.approx(total - cell_sum)
    assert overhead < 0.1 * len(cells) + 0.2  # message round trips, not a missing cell
    assert metrics["kernel_start_s"][0].value > 0
    assert metrics["peak_rss_mib"][0].value > 64  # the kernel held a 64 MiB buffer
    # the working directory is the storage variant's, and the parameter reached the kernel
    assert (ctx.workdir / "out.txt").read_text() == "quick"
    executed = nbformat.read(str(ctx.raw_dir / "timed.executed.ipynb"), as_version=4)
    assert executed.cells[3].metadata["execution"]["shell.execute_reply"]


def test_failing_cell_is_recorded_with_its_index(tmp_path):
    path = make_notebook(
        tmp_path / "broken.ipynb",
        [
            ("markdown", "# Broken", []),
            ("code", "x = 1", []),
            ("code", "y = x / 0", []),
            ("code", "open('never.txt', 'w')", []),
        ],
    )
    ctx = context(tmp_path)
    with pytest.raises(WorkloadFailed) as failure:
        Notebook("broken", NotebookParams(notebook=str(path))).run(ctx)
    message = str(failure.value)
    assert "cell 2" in message and "'y = x / 0'" in message
    assert "ZeroDivisionError: division by zero" in message
    assert "Traceback" not in message
    executed = nbformat.read(str(ctx.raw_dir / "broken.executed.ipynb"), as_version=4)
    assert executed.cells[2].outputs[0]["ename"] == "ZeroDivisionError"
    assert not (ctx.workdir / "never.txt").exists()


def test_unknown_kernel_is_a_skip_with_a_hint(tmp_path):
    path = make_notebook(tmp_path / "k.ipynb", [("code", "1", [])])
    reason = Notebook("k", NotebookParams(notebook=str(path), kernel="no-such-kernel")).requirements()
    assert reason and "no-such-kernel" in reason and "setup.sh" in reason
    reason = Notebook("k", NotebookParams(notebook="nowhere.ipynb")).requirements()
    assert reason and "nowhere.ipynb" in reason


def test_params_are_strict():
    with pytest.raises(ValueError):
        NotebookParams(notebook="simple_prime", size="huge")
    with pytest.raises(ValueError):
        NotebookParams(notebook="simple_prime", unknown=1)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_bundled_notebook_runs_at_quick_size(name, tmp_path):
    if name in NEEDS_TORCH and not HAS_TORCH:
        pytest.skip("needs PyTorch: bash scripts/setup.sh --with ml")
    workload = Notebook(name, NotebookParams(notebook=name, size="quick"))
    assert workload.requirements() is None
    ctx = context(tmp_path, name)
    metrics = by_metric(workload.run(ctx))
    assert {"total_s", "kernel_start_s", "cell_s", "cell_overhead_s", "peak_rss_mib"} <= set(metrics)
    total = metrics["total_s"][0].value
    cell_sum = sum(m.value for m in metrics["cell_s"])
    assert cell_sum <= total and total - cell_sum < 0.1 * len(metrics["cell_s"]) + 0.05 * total + 0.2
    assert all(m.case["first_line"] for m in metrics["cell_s"])
    executed = nbformat.read(str(ctx.raw_dir / f"{name}.executed.ipynb"), as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and "size = 'quick'" in injected[0].source


def test_run_notebook_from_the_cli_with_a_parameter(tmp_path, ccbench):
    path = make_notebook(
        tmp_path / "mine.ipynb",
        [
            ("code", "greeting = 'hello'\nrepeat = 1", ["parameters"]),
            ("code", "open('greeting.txt', 'w').write(greeting * repeat)", []),
            ("code", "assert repeat == 2, repeat", []),
        ],
    )
    out = tmp_path / "out"
    result = ccbench(
        "run",
        "--notebook",
        path,
        "--param",
        "greeting=hi",
        "--param",
        "repeat=2",
        "--repeat",
        "1",
        "--out",
        out,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    bundles = [p for p in out.iterdir() if (p / "manifest.json").exists()]
    assert len(bundles) == 1
    samples = [json.loads(line) for line in (bundles[0] / "samples.jsonl").read_text().splitlines()]
    measured = [s for s in samples if not s["warmup"]]
    cells = sorted(s["params"]["cell"] for s in measured if s["metric"] == "cell_s")
    assert cells == [0, 1, 2, 3]
    assert {s["params"]["parameters"]["greeting"] for s in measured} == {"hi"}
    assert any(s["metric"] == "kernel_start_s" for s in measured)
    assert list(bundles[0].glob("raw/**/mine.executed.ipynb"))
