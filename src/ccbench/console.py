"""Terminal output: the progress display for runs and small table helpers."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ccbench.runner import Execution, Reporter

console = Console(stderr=True, highlight=False, soft_wrap=True)
stdout = Console(highlight=False, soft_wrap=False)
if not stdout.is_terminal:
    # logs and CI: wide enough that tables do not wrap
    stdout.width = max(stdout.width, 200)


class RichReporter(Reporter):
    """A progress bar on a terminal; one line per execution otherwise (logs, CI)."""

    def __init__(self) -> None:
        self.interactive = console.is_terminal
        self.progress: Progress | None = None
        self.task = None

    def start(self, total: int) -> None:
        if self.interactive:
            self.progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                console=console, transient=False,
            )
            self.progress.start()
            self.task = self.progress.add_task("starting", total=total)
        self.total = total

    def execution_started(self, execution: Execution, index: int) -> None:
        label = f"{execution.spec.name} [{execution.variant_key}] {'warmup' if execution.warmup else 'rep'} {execution.repetition + 1}"
        if self.progress is not None:
            self.progress.update(self.task, description=label, completed=index - 1)
        else:
            console.print(escape(f"[{index}/{self.total}] {label}"))

    def execution_finished(self, execution: Execution, status: str, detail: str = "") -> None:
        if self.progress is not None:
            self.progress.advance(self.task)
        if status != "ok":
            console.print(f"  [red]{escape(execution.spec.name)}: {status}[/red]: {escape(detail[:300])}")

    def cooldown(self, seconds: float) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=f"cooling down {seconds:g} s")

    def message(self, text: str) -> None:
        console.print(escape(text))

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def fmt_number(value: float | None) -> str:
    if value is None:
        return "-"
    magnitude = abs(value)
    if magnitude >= 1e9 or (magnitude and magnitude < 1e-3):
        return f"{value:.3g}"
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 1:
        return f"{value:.3g}" if magnitude < 10 else f"{value:.1f}"
    return f"{value:.4f}"


def is_interactive() -> bool:
    return sys.stderr.isatty()
