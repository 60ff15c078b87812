"""The progress display of ``ccbench run``: a progress bar on a terminal, a line per execution otherwise."""

from __future__ import annotations

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ccbench.basics.console import console
from ccbench.run.runner import Execution, Reporter


class RichReporter(Reporter):
    """A progress bar on a terminal; one line per execution otherwise (logs, CI)."""

    def __init__(self) -> None:
        self.interactive = console.is_terminal
        self.progress: Progress | None = None
        self.task = None

    def start(self, total: int) -> None:
        if self.interactive:
            self.progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=False,
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

    def extend(self, more: int) -> None:
        """More executions than planned (precision rounds)."""
        self.total += more
        if self.progress is not None:
            self.progress.update(self.task, total=self.total)

    def reached(self, position: int) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=position)

    def cooldown(self, seconds: float) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=f"cooling down {seconds:g} s")

    def message(self, text: str) -> None:
        console.print(escape(text))

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
