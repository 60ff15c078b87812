"""pyperformance: the Python benchmark suite, each benchmark's values recorded as samples.

pyperformance runs every benchmark in a virtual environment of its own, which it creates and
pip-installs from PyPI the first time. That happens in ``prepare`` (not timed, once per
machine: the environment is kept in a cache directory and reused), so an execution measures
only the benchmarks. pyperf's JSON is kept in ``raw/`` as ``pyperformance.json``.

Samples: ``time_s`` per benchmark (case ``{"benchmark": name}``): every value pyperf measured is one
sample, with its pyperf run (worker process) and loop count in the metadata: the sample unit of
``ccbench.formats.pyperf``, the same as ``ccbench import pyperf``; ``wall_s`` for the whole execution.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import model_validator

from ccbench.formats import FormatError
from ccbench.formats import pyperf as pyperf_format
from ccbench.model import Measurement
from ccbench.workloads.base import ExecutionContext, PrepareContext, Workload, WorkloadFailed, WorkloadParams

SETUP_HINT = "run `bash scripts/setup.sh --with datascience`"


def cache_dir() -> Path:
    """Where pyperformance's benchmark environment lives between runs (it is large and slow to make)."""
    base = os.environ.get("CCBENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ccbench"
    )
    return Path(base) / "pyperformance"


class PyperformanceParams(WorkloadParams):
    #: a named pyperformance group ("default", "all", "apps", "math", ...); default when no benchmarks given
    suite: str | None = None
    #: benchmark names (or groups); pyperformance's -b list
    benchmarks: list[str] = []
    #: pyperformance --fast: rough values quickly (few runs); for quick plans and tests
    fast: bool = False
    #: pyperformance --rigorous: more runs, tighter values
    rigorous: bool = False

    @model_validator(mode="after")
    def _one_selection(self) -> PyperformanceParams:
        if self.suite and self.benchmarks:
            raise ValueError("give either suite or benchmarks, not both")
        if self.fast and self.rigorous:
            raise ValueError("fast and rigorous exclude each other")
        for name in self.benchmarks:
            if not name or "," in name or name.strip() != name:
                raise ValueError(f"benchmark name {name!r}: one name per list item, no commas or spaces")
        return self

    def selection(self) -> str:
        return ",".join(self.benchmarks) if self.benchmarks else (self.suite or "default")


def parse_results(document: dict[str, Any]) -> list[Measurement]:
    """Every value of every benchmark of a pyperf JSON document, one sample each: the sample unit of
    ccbench.formats.pyperf, shared with ``ccbench import pyperf``."""
    try:
        return pyperf_format.measurements(document)
    except FormatError as exc:
        raise WorkloadFailed(f"pyperformance.json: {exc}") from None


class Pyperformance(Workload):
    kind = "pyperformance"
    description = "the pyperformance Python benchmarks (a suite or a list), every value of each benchmark"
    Params = PyperformanceParams
    setup_component = "datascience"
    ships_python_extra = True
    #: each benchmark's time; ``wall_s`` (the whole run, calibration and process starts included) is not
    primary_metrics = ("time_s",)
    params: PyperformanceParams

    def requirements(self) -> str | None:
        import importlib.util

        if importlib.util.find_spec("pyperformance") is None:
            return f"pyperformance is not installed: {SETUP_HINT}"
        return None

    def _command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "pyperformance", *args]

    def prepare(self, ctx: PrepareContext) -> None:
        # Creating the benchmark environment downloads from PyPI: done here, untimed, and reused.
        import subprocess

        directory = cache_dir()
        directory.mkdir(parents=True, exist_ok=True)
        ctx.raw_dir.mkdir(parents=True, exist_ok=True)
        log = ctx.raw_dir / "pyperformance-venv.log"
        with open(log, "wb") as out:
            proc = subprocess.run(
                self._command("venv", "create", "-b", self.params.selection()),
                cwd=directory,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        text = log.read_text(errors="replace")
        if proc.returncode != 0 and "already exists" not in text:
            raise WorkloadFailed(
                f"pyperformance could not create its benchmark environment in {directory} "
                f"(see {log}): {text.strip().splitlines()[-1:] or ''}"
            )

    def run(self, ctx: ExecutionContext) -> list[Measurement]:
        ctx.raw_dir.mkdir(parents=True, exist_ok=True)
        output = ctx.raw_dir / "pyperformance.json"
        argv = self._command("run", "-b", self.params.selection(), "-o", str(output))
        if self.params.fast:
            argv.append("--fast")
        if self.params.rigorous:
            argv.append("--rigorous")
        directory = cache_dir()
        directory.mkdir(parents=True, exist_ok=True)
        result = ctx.run_command(argv, cwd=directory, log_name="pyperformance", check=False)
        if not output.exists():
            from ccbench.workloads.base import tail

            raise WorkloadFailed(
                f"pyperformance wrote no results (exit {result.returncode}): "
                f"{tail(result.stderr, 5, 800) or tail(result.stdout, 5, 800)}"
            )
        try:
            document = json.loads(output.read_text())
        except ValueError as exc:
            raise WorkloadFailed(f"{output}: not pyperf JSON ({exc})") from None
        measurements = parse_results(document)
        if not measurements:
            raise WorkloadFailed(
                f"pyperformance ran no benchmark of {self.params.selection()!r}: see pyperformance.stdout in raw/"
            )
        if result.returncode != 0:
            # some benchmarks failed, others produced values: keep those, say which failed
            ran = {m.case["benchmark"] for m in measurements}
            for m in measurements:
                m.metadata["partial_run"] = True
            measurements[0].metadata["note"] = f"pyperformance exited {result.returncode}; ran {sorted(ran)}"
        measurements.append(
            Measurement(
                metric="wall_s",
                unit="s",
                value=result.wall_s,
                metadata={"note": "the whole pyperformance run, calibration and process starts included"},
            )
        )
        return measurements
