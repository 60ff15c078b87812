"""Terminal output: the consoles and small table helpers (the run's progress display is in
ccbench.progress, so that compare and report do not import the runner)."""

from __future__ import annotations

import sys

from rich.console import Console

console = Console(stderr=True, highlight=False, soft_wrap=True)
stdout = Console(highlight=False, soft_wrap=False)
if not stdout.is_terminal:
    # logs and CI: wide enough that tables do not wrap
    stdout.width = max(stdout.width, 200)


def is_interactive() -> bool:
    return sys.stderr.isatty()
