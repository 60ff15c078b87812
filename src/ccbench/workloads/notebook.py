"""Jupyter notebooks executed in a fresh kernel, timed as a whole and cell by cell.

One execution = start a kernel (``kernel_start_s``, its own metric), inject parameters the way
papermill does (a cell tagged ``injected-parameters`` after the cell tagged ``parameters``), run
every code cell in order (``total_s``: first cell sent to last reply, kernel start excluded),
and read the kernel's peak resident memory (VmHWM) before shutting it down.

Per-cell times (``cell_s``, case ``{"cell": index, "first_line": ...}``) come from the kernel's
own message timestamps (execute_input to execute_reply), so they exclude the client's message
round trips; ``cell_overhead_s`` is what ``total_s`` holds beyond their sum (the harness's cost).
Cell indices count every cell of the executed notebook (markdown included, the injected
parameters cell included), as saved in ``raw/``.

A user's notebook runs where Jupyter would run it, beside its files: ``prepare`` copies the folder
holding it onto the storage variant (``notebook_files``), and the kernel starts in that copy, so a
relative ``pd.read_csv('data/x.csv')`` finds its file and reads it through the layer being measured.
An exception raised by a cell's own code is a ``RepeatingFailure``: the runner skips the remaining
executions of that variant combination instead of failing the same way again.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ccbench.basics.errors import PlanError
from ccbench.model import Measurement
from ccbench.notebooks import NOTEBOOK_DIR
from ccbench.workloads.base import (
    DEVICE_IO_CHECK,
    ExecutionContext,
    PrepareContext,
    RepeatingFailure,
    Workload,
    WorkloadFailed,
    WorkloadParams,
    size_bytes,
)
from ccbench.workloads.notebook_files import StagedFiles, read_record, stage, unstage

DEFAULT_KERNEL = "ccbench-python3"
SETUP_HINT = "run `bash scripts/setup.sh --with datascience`"


class NotebookParams(WorkloadParams):
    #: a bundled name (``airline_delay``), a seed-000 file name (``SimplePrime.ipynb``) or a path
    notebook: str
    #: injected as the parameter ``size``; None leaves the notebook's own default (bundled: "full")
    size: Literal["quick", "full"] | None = None
    #: more parameters to inject (name -> JSON-like value)
    parameters: dict[str, Any] = {}
    #: the Jupyter kernel spec to start (the setup component registers ccbench-python3)
    kernel: str = DEFAULT_KERNEL
    #: seconds to wait for the kernel to become ready
    startup_timeout: float = 120.0
    #: the most the folder holding a user's notebook may hold (copied onto the storage variant), e.g. 512M, 2G
    copy_limit: str = Field("512M", pattern=r"^\d+[KkMmGg]?$")
    #: the most files that folder may hold
    copy_max_files: int = Field(10_000, ge=1)


def first_line(source: str, limit: int = 80) -> str:
    """The cell's first non-blank line, shortened: a readable key for the cell."""
    for line in source.splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def _parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def kernel_cell_seconds(cell: Any) -> float | None:
    """Execution time as the kernel saw it, from nbclient's recorded message timestamps."""
    timing = cell.get("metadata", {}).get("execution", {})
    start = _parse_time(timing.get("iopub.execute_input")) or _parse_time(timing.get("iopub.status.busy"))
    end = _parse_time(timing.get("shell.execute_reply")) or _parse_time(timing.get("iopub.status.idle"))
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds())


def parameter_source(parameters: dict[str, Any]) -> str:
    lines = ["# Parameters"]
    for key, value in parameters.items():
        if not key.isidentifier():
            raise WorkloadFailed(f"parameter name {key!r} is not a Python identifier; rename it in the plan or --param")
        lines.append(f"{key} = {value!r}")
    return "\n".join(lines) + "\n"


def inject_parameters(nb: Any, parameters: dict[str, Any]) -> None:
    """Insert a cell tagged ``injected-parameters`` as papermill does.

    It goes right after the cell tagged ``parameters`` (or first when there is none), replacing
    an injected cell left from an earlier papermill or ccbench run.
    """
    import nbformat

    if not parameters:
        return
    for index in reversed(range(len(nb.cells))):
        if "injected-parameters" in nb.cells[index].get("metadata", {}).get("tags", []):
            del nb.cells[index]
    position = 0
    for index, cell in enumerate(nb.cells):
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            position = index + 1
            break
    cell = nbformat.v4.new_code_cell(source=parameter_source(parameters))
    cell.metadata["tags"] = ["injected-parameters"]
    nb.cells.insert(position, cell)


def peak_rss_kib(pid: int) -> int | None:
    """VmHWM of a live process: its exact resident-memory high-water mark."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _error_line(exc: Any) -> str:
    ename = getattr(exc, "ename", None)
    evalue = getattr(exc, "evalue", None)
    if ename:
        return f"{ename}: {evalue}" if evalue else str(ename)
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return re.sub(r"\x1b\[[0-9;]*m", "", lines[-1]) if lines else type(exc).__name__


class Notebook(Workload):
    kind = "notebook"
    description = "a Jupyter notebook in a fresh kernel: total, kernel start, each cell, kernel peak memory"
    Params = NotebookParams
    variant_axes = frozenset({"storage"})
    system_checks = (DEVICE_IO_CHECK,)
    setup_component = "datascience"
    ships_python_extra = True
    #: the notebook's wall time (``execution_time_s``: the seed-000 runner's, as imported); per-cell
    #: times, kernel start and harness overhead explain it
    primary_metrics = ("total_s", "execution_time_s")
    params: NotebookParams

    def requirements(self) -> str | None:
        try:
            import nbclient  # noqa: F401
            import nbformat  # noqa: F401
            from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
        except ImportError as exc:
            return f"the notebook workload needs nbclient and ipykernel ({exc.name} missing): {SETUP_HINT}"
        try:
            KernelSpecManager().get_kernel_spec(self.params.kernel)
        except NoSuchKernel:
            return f"no Jupyter kernel named {self.params.kernel!r} is registered: {SETUP_HINT}"
        from ccbench.notebooks import NEEDS_TORCH, bundled_name, resolve

        try:
            resolve(self.params.notebook)
        except PlanError as exc:
            return str(exc)
        if bundled_name(self.params.notebook) in NEEDS_TORCH:
            import importlib.util

            if importlib.util.find_spec("torch") is None:
                return "this notebook needs PyTorch: run `bash scripts/setup.sh --with ml`"
        return None

    def injected(self) -> dict[str, Any]:
        parameters: dict[str, Any] = {}
        if self.params.size is not None:
            parameters["size"] = self.params.size
        parameters.update(self.params.parameters)
        return parameters

    def prepare(self, ctx: PrepareContext) -> None:
        """Copy the folder holding a user's notebook onto the storage variant (not timed; recorded).

        A bundled notebook brings its data from installed packages and has nothing beside it to copy.
        """
        source_path = self._source()
        if source_path.parent == NOTEBOOK_DIR:
            unstage(ctx.workdir, ctx.workload_name)  # a copy a killed run left under this name is not its folder
            return
        stage(
            source_path,
            ctx.workdir,
            ctx.workload_name,
            ctx.raw_dir,
            limit_bytes=size_bytes(self.params.copy_limit),
            max_files=self.params.copy_max_files,
            protected=[ctx.workdir, ctx.raw_dir],
        )

    def cleanup(self, ctx: PrepareContext) -> None:
        unstage(ctx.workdir, ctx.workload_name)

    def run(self, ctx: ExecutionContext) -> list[Measurement]:
        source_path = self._source()
        nb = self._read(source_path)
        inject_parameters(nb, self.injected())
        staged = read_record(ctx.workdir, ctx.workload_name)
        # where Jupyter would start it: beside its files (their copy on the variant), else the variant's directory
        cwd = Path(staged.destination) if staged is not None else ctx.workdir
        cwd.mkdir(parents=True, exist_ok=True)
        ctx.raw_dir.mkdir(parents=True, exist_ok=True)
        executed_path = ctx.raw_dir / f"{source_path.stem}.executed.ipynb"
        try:
            timed = self._execute(nb, cwd, self._kernel_env(source_path, staged))
        finally:
            nbformat_write(nb, executed_path)
        if timed.failure is not None:
            failure = RepeatingFailure if timed.failure_in_cell else WorkloadFailed
            raise failure(f"{timed.failure} (executed notebook: {executed_path.name} in raw/)")
        origin = {"notebook_path": str(source_path), "executed": executed_path.name, "working_directory": str(cwd)}
        if staged is not None:
            origin.update(staged.metadata())
        return self._measurements(nb, timed, origin)

    # --- the steps of one execution
    def _source(self) -> Path:
        from ccbench.notebooks import resolve

        try:
            return resolve(self.params.notebook)
        except PlanError as exc:
            raise WorkloadFailed(str(exc)) from None

    @staticmethod
    def _read(source_path: Path) -> Any:
        import nbformat

        try:
            return nbformat.read(str(source_path), as_version=4)
        except Exception as exc:  # nbformat raises several types for a damaged file
            raise WorkloadFailed(f"{source_path}: not a readable notebook ({exc})") from None

    @staticmethod
    def _kernel_env(source_path: Path, staged: StagedFiles | None) -> dict[str, str]:
        env = dict(os.environ)
        # figures render to files, never to a display; hashing is repeatable across runs
        env.setdefault("MPLBACKEND", "Agg")
        env.setdefault("PYTHONHASHSEED", "0")
        folder = Path(staged.destination) if staged is not None else source_path.parent
        env["CCBENCH_NOTEBOOK_DATA"] = str(folder / "data")
        return env

    def _execute(self, nb: Any, cwd: Path, env: dict[str, str]) -> _Timed:
        """Start the kernel in ``cwd``, run every code cell in order, read the kernel's peak memory."""
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

        client = NotebookClient(
            nb,
            kernel_name=self.params.kernel,
            timeout=None,  # the runner's timeout ends the whole execution
            startup_timeout=int(self.params.startup_timeout),
            allow_errors=False,
            record_timing=True,
            resources={"metadata": {"path": str(cwd)}},
        )
        timed = _Timed()
        start = time.perf_counter()
        try:
            with client.setup_kernel(cwd=str(cwd), env=env):
                ready = time.perf_counter()
                timed.kernel_start_s = ready - start
                timed.kernel_pid = getattr(getattr(client.km, "provisioner", None), "pid", None)
                self._run_cells(client, nb, timed)
                timed.total_s = time.perf_counter() - ready
                if timed.kernel_pid is not None:
                    timed.peak_kib = peak_rss_kib(timed.kernel_pid)
        except (CellExecutionError, CellTimeoutError, DeadKernelError, RuntimeError, TimeoutError) as exc:
            timed.failure = timed.failure or f"the kernel {self.params.kernel!r} failed: {_error_line(exc)}"
        return timed

    @staticmethod
    def _run_cells(client: Any, nb: Any, timed: _Timed) -> None:
        """Each code cell in order, its client-side wall time kept; the first failing cell ends the run."""
        from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

        executed = 0
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            cell_start = time.perf_counter()
            try:
                client.execute_cell(cell, index, execution_count=executed + 1)
            except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
                timed.failure = f"cell {index} ({first_line(cell.source)!r}) failed: {_error_line(exc)}"
                # an exception raised by the cell's own code would be raised again by every execution
                timed.failure_in_cell = isinstance(exc, CellExecutionError)
                return
            finally:
                timed.cell_wall[index] = time.perf_counter() - cell_start
            executed += 1

    def _measurements(self, nb: Any, timed: _Timed, origin: dict[str, Any]) -> list[Measurement]:
        measurements = [
            Measurement(
                metric="total_s",
                unit="s",
                value=timed.total_s,
                metadata={**origin, "note": "all code cells, kernel start excluded"},
            ),
            Measurement(
                metric="kernel_start_s",
                unit="s",
                value=timed.kernel_start_s,
                metadata={"note": "kernel start until the client is ready; not in total_s"},
            ),
        ]
        cells = self._cell_measurements(nb, timed)
        cell_sum = sum(m.value for m in cells)
        measurements += cells
        measurements.append(
            Measurement(
                metric="cell_overhead_s",
                unit="s",
                value=max(0.0, timed.total_s - cell_sum),
                metadata={"note": "total_s minus the sum of cell_s: message round trips, the harness's own cost"},
            )
        )
        if timed.peak_kib is not None:
            measurements.append(
                Measurement(
                    metric="peak_rss_mib",
                    unit="MiB",
                    value=timed.peak_kib / 1024,
                    metadata={"source": "VmHWM of the kernel process", "pid": timed.kernel_pid},
                )
            )
        return measurements

    @staticmethod
    def _cell_measurements(nb: Any, timed: _Timed) -> list[Measurement]:
        """One cell_s per executed code cell: the kernel's own timestamps, else the client's wall time."""
        measurements = []
        for index, wall in timed.cell_wall.items():
            cell = nb.cells[index]
            seconds = kernel_cell_seconds(cell)
            source_of_time = "kernel"
            if seconds is None:
                seconds, source_of_time = wall, "client"
            measurements.append(
                Measurement(
                    metric="cell_s",
                    unit="s",
                    value=seconds,
                    case={"cell": index, "first_line": first_line(cell.source)},
                    metadata={"client_wall_s": round(wall, 6), "timed_by": source_of_time},
                )
            )
        return measurements


@dataclass
class _Timed:
    """What one execution of a notebook measured, or where it failed."""

    kernel_start_s: float = 0.0
    total_s: float = 0.0
    #: code cell index -> the client's wall time for it
    cell_wall: dict[int, float] = field(default_factory=dict)
    peak_kib: int | None = None
    kernel_pid: int | None = None
    failure: str | None = None
    #: the failure is an exception raised by a cell's own code (it would repeat)
    failure_in_cell: bool = False


def nbformat_write(nb: Any, path: Path) -> None:
    """Keep the executed notebook (outputs and timings as far as it got) in the raw directory."""
    import nbformat

    nbformat.write(nb, str(path))


def ad_hoc_plan(notebook: str, params: dict[str, str], repeat: int | None) -> dict[str, Any]:
    """The plan document (for ccbench.planning.plan.plan_from_dict) that runs one notebook: ``ccbench run
    --notebook``, each ``--param`` value read as JSON where it parses (``3``, ``true``), else as text."""
    import json

    if not Path(notebook).exists():
        raise PlanError(f"--notebook {notebook}: no such file")
    if not Path(notebook).is_file() or not os.access(notebook, os.R_OK):
        raise PlanError(f"--notebook {notebook}: not a readable file; name the .ipynb file to run")

    def typed(value: str):
        try:
            return json.loads(value)
        except ValueError:
            return value

    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(notebook).stem) or "notebook"
    return {
        "name": f"notebook-{name}",
        "description": f"ad-hoc plan for {notebook}",
        "defaults": {"repetitions": repeat or 3, "warmup": 0},
        "workloads": [
            {
                "kind": "notebook",
                "name": name,
                "notebook": str(Path(notebook).resolve()),
                "parameters": {k: typed(v) for k, v in params.items()},
            }
        ],
    }
