"""The notebook workload: real kernels (ccbench-python3), real notebooks, no mocks."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
from conftest import only_bundle

nbformat = pytest.importorskip(
    "nbformat", reason="the notebook workload needs nbformat: bash scripts/setup.sh --with datascience"
)

from ccbench.basics.errors import PlanError  # noqa: E402
from ccbench.notebooks import BUNDLED, NEEDS_TORCH, SEED_ALIASES, bundled_path, resolve  # noqa: E402
from ccbench.workloads import REGISTRY, workload_class  # noqa: E402
from ccbench.workloads.base import ExecutionContext, PrepareContext, RepeatingFailure, WorkloadFailed  # noqa: E402
from ccbench.workloads.notebook import Notebook, NotebookParams, first_line, inject_parameters  # noqa: E402

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
    # no cell's time is left in the overhead: both sleeps (floors no machine goes below) are in the cells'
    assert cell_sum >= 0.39
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
    assert isinstance(failure.value, RepeatingFailure)  # the cell's own exception: it would repeat
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
    assert cell_sum <= total
    assert all(m.case["first_line"] for m in metrics["cell_s"])
    executed = nbformat.read(str(ctx.raw_dir / f"{name}.executed.ipynb"), as_version=4)
    # every code cell has its own time (none is left inside the overhead)
    code_cells = [index for index, cell in enumerate(executed.cells) if cell.cell_type == "code"]
    assert sorted(m.case["cell"] for m in metrics["cell_s"]) == code_cells
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


# --- notebooks as people write them: files beside the notebook, read by relative paths

READS_ITS_DATA = [
    ("markdown", "# Reads data/x.csv beside it, as Jupyter would run it", []),
    ("code", "import pandas as pd\nframe = pd.read_csv('data/x.csv')", []),
    (
        "code",
        "import os\n"
        "cwd = os.getcwd()\n"
        "mounts = [line.split() for line in open('/proc/self/mounts')]\n"
        "under = [m for m in mounts if cwd == m[1] or cwd.startswith(m[1].rstrip('/') + '/')]\n"
        "fstype = max(under, key=lambda m: len(m[1]))[2]\n"
        "print(f\"sum={frame['value'].sum()} fstype={fstype}\")",
        [],
    ),
]


def notebook_folder(base: Path, cells=READS_ITS_DATA) -> Path:
    """A folder as a user keeps it: the notebook, its data folder, version control beside them."""
    folder = base / "project"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "x.csv").write_text("name,value\n" + "".join(f"r{i},{i}\n" for i in range(100)))
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text("[core]\n")
    (base / "outside.csv").write_text("a parent's file is never copied\n")
    return make_notebook(folder / "analysis.ipynb", cells)


def filesystem_type(path: Path) -> str:
    mounts = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
    text = str(path.resolve())
    under = [m for m in mounts if text == m[1] or text.startswith(m[1].rstrip("/") + "/")]
    return max(under, key=lambda m: len(m[1]))[2]


def printed(executed: Path) -> str:
    nb = nbformat.read(str(executed), as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


@pytest.mark.skipif(os.geteuid() != 0, reason="the tmpfs storage variant needs root")
def test_a_notebook_reads_its_data_by_a_relative_path_on_disk_and_tmpfs(tmp_path, ccbench, write_plan):
    notebook = notebook_folder(tmp_path)
    csv_bytes = (notebook.parent / "data" / "x.csv").stat().st_size
    plan = write_plan(
        f'[[workloads]]\nkind = "notebook"\nname = "analysis"\nnotebook = "{notebook}"\nrepetitions = 1\n',
        defaults='repetitions = 1\nwarmup = 0\ncooldown = 0\ntimeout = 300\nvariants = { storage = ["disk", "tmpfs"] }\n',
        top='[storage]\ntmpfs_size = "16M"\n',
    )
    work = tmp_path / "work"
    done = ccbench("run", plan, "--out", tmp_path / "out", "--workdir", work)
    assert done.returncode == 0, done.stdout + done.stderr
    bundle = only_bundle(tmp_path / "out")
    samples = [json.loads(line) for line in (bundle / "samples.jsonl").read_text().splitlines()]
    totals = {s["variant"]["storage"]: s for s in samples if s["metric"] == "total_s"}
    assert sorted(totals) == ["disk", "tmpfs"]
    for storage, total in totals.items():
        meta = total["metadata"]
        # the notebook and its data were copied (version control left out), the copy's figures ride along
        assert meta["staged_files"] == 2 and meta["staged_bytes"] == csv_bytes + notebook.stat().st_size
        assert meta["staged_from"] == str(notebook.parent) and meta["staged_copy_s"] >= 0
        # the kernel ran in the copy, on the variant's own filesystem, and read the file there
        output = printed(bundle / total["raw"] / meta["executed"])
        assert f"sum={sum(range(100))}" in output, output
        expected = "tmpfs" if storage == "tmpfs" else filesystem_type(work)
        assert f"fstype={expected}" in output, (storage, output)
    records = sorted(bundle.glob("raw/analysis/prepare/*/staged-files.json"))
    assert len(records) == 2
    for path in records:
        record = json.loads(path.read_text())
        assert sorted(f["path"] for f in record["files"]) == ["analysis.ipynb", "data/x.csv"]
        assert {"path": ".git", "why": record["skipped"][0]["why"]} in record["skipped"]
        assert record["copy_s"] >= 0 and record["bytes"] == csv_bytes + notebook.stat().st_size
    # cleanup took the copies away with the variants
    assert not list(work.rglob("notebook-files"))


def prepare_context(tmp_path: Path, workdir: Path, raw_dir: Path) -> PrepareContext:
    workdir.mkdir(parents=True, exist_ok=True)
    return PrepareContext(workload_name="analysis", workdir=workdir, raw_dir=raw_dir, variant={"storage": "disk"})


def test_the_copy_leaves_out_the_run_itself_bundles_and_linked_folders(tmp_path):
    notebook = notebook_folder(tmp_path)
    folder = notebook.parent
    # the user ran ccbench inside the notebook's folder: its work directory and bundles lie there
    workdir = folder / "mywork" / "storage" / "disk-1" / "data"
    raw_dir = folder / "results" / "now" / "raw" / "analysis" / "prepare" / "storage-disk"
    (folder / "results" / "now" / "raw").mkdir(parents=True)  # the runner made the bundle before prepare
    old_bundle = folder / "archive" / "earlier"
    old_bundle.mkdir(parents=True)
    (old_bundle / "manifest.json").write_text("{}")
    (old_bundle / "samples.jsonl").write_text("")
    (folder / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "big.bin").write_bytes(b"x" * 1000)
    (folder / "data" / "alias.csv").symlink_to(folder / "data" / "x.csv")
    workload = Notebook("analysis", NotebookParams(notebook=str(notebook)))
    ctx = prepare_context(tmp_path, workdir, raw_dir)
    workload.prepare(ctx)
    record = json.loads((raw_dir / "staged-files.json").read_text())
    assert sorted(f["path"] for f in record["files"]) == ["analysis.ipynb", "data/alias.csv", "data/x.csv"]
    skipped = {s["path"]: s["why"] for s in record["skipped"]}
    assert set(skipped) == {".git", "linked", "mywork", "results", "archive/earlier"}, skipped
    assert "link" in skipped["linked"] and "bundle" in skipped["archive/earlier"]
    copy = Path(record["destination"])
    assert copy.is_relative_to(workdir) and (copy / "data" / "alias.csv").read_text().startswith("name,value")
    assert not (copy / "data" / "alias.csv").is_symlink()  # the bytes now live on the variant
    # an execution runs in the copy and reads the file by its relative path
    execution = ExecutionContext("analysis", workdir, tmp_path / "rep-0", 0, False, {"storage": "disk"})
    metrics = by_metric(workload.run(execution))
    assert metrics["total_s"][0].metadata["working_directory"] == str(copy)
    assert metrics["total_s"][0].metadata["staged_files"] == 3
    assert f"sum={sum(range(100))}" in printed(tmp_path / "rep-0" / "analysis.executed.ipynb")
    workload.cleanup(ctx)
    assert not (workdir / "notebook-files").exists() and (folder / "data" / "x.csv").exists()


def test_a_folder_over_the_copy_limit_is_a_one_line_error(tmp_path):
    notebook = notebook_folder(tmp_path)
    (notebook.parent / "data" / "big.bin").write_bytes(b"\0" * 4096)
    workdir, raw_dir = tmp_path / "work", tmp_path / "raw"
    ctx = prepare_context(tmp_path, workdir, raw_dir)
    with pytest.raises(WorkloadFailed) as failure:
        Notebook("analysis", NotebookParams(notebook=str(notebook), copy_limit="2K")).prepare(ctx)
    message = str(failure.value)
    assert "\n" not in message and str(notebook.parent) in message and "copy_limit" in message
    assert "a folder of their own" in message
    assert not (workdir / "notebook-files").exists() and not (raw_dir / "staged-files.json").exists()
    with pytest.raises(WorkloadFailed, match="copy_max_files"):
        Notebook("analysis", NotebookParams(notebook=str(notebook), copy_max_files=2)).prepare(ctx)
    with pytest.raises(ValueError):
        NotebookParams(notebook=str(notebook), copy_limit="lots")


def test_a_failing_cell_skips_the_remaining_repetitions_with_its_reason(tmp_path, ccbench):
    path = make_notebook(
        tmp_path / "fails.ipynb",
        [("code", "x = 1", []), ("code", "raise ValueError('the data has no column y')", [])],
    )
    out = tmp_path / "out"
    done = ccbench("run", "--notebook", path, "--repeat", "3", "--out", out, "--workdir", tmp_path / "work")
    assert done.returncode == 1, done.stdout + done.stderr
    bundle = only_bundle(out)
    manifest = json.loads((bundle / "manifest.json").read_text())
    outcome = manifest["outcomes"]["fails"]
    assert outcome["executions_failed"] == 1 and outcome["executions_skipped"] == 2, outcome
    reason = outcome["repeating_failures"]["storage=disk"]
    assert "cell 1" in reason and "ValueError: the data has no column y" in reason
    records = [json.loads(line) for line in (bundle / "executions.jsonl").read_text().splitlines()]
    assert [r["status"] for r in records] == ["failed"]


def test_a_dead_kernel_is_a_failure_that_may_not_repeat(tmp_path):
    path = make_notebook(tmp_path / "dies.ipynb", [("code", "import os\nos._exit(3)", [])])
    with pytest.raises(WorkloadFailed) as failure:
        Notebook("dies", NotebookParams(notebook=str(path))).run(context(tmp_path))
    assert not isinstance(failure.value, RepeatingFailure), failure.value
