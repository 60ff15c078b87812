"""Terminal output: the consoles and small table helpers (the run's progress display is in
ccbench.run.progress, so that compare and report do not import the runner), and the switch a command
sets to end without the interpreter's teardown (read by ccbench.cli, set by compare and report)."""

from __future__ import annotations

import sys

from rich.console import Console

from ccbench.basics.wrap import fit_block, terminal_width


class _Console(Console):
    """rich's Console, but a reader that closes the pipe early (``ccbench compare ... | head -1``)
    is no failure: rich exits 1 there, the code of a failed gate or run; ccbench's main exits 0 on it."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise BrokenPipeError


console = _Console(stderr=True, highlight=False, soft_wrap=True)
stdout = _Console(highlight=False, soft_wrap=False)
if not stdout.is_terminal and not __import__("os").environ.get("COLUMNS", "").isdigit():
    # logs and CI: wide enough that tables do not wrap (a width the user set with $COLUMNS is kept)
    stdout.width = max(stdout.width, 200)


def say(text: str, to: Console | None = None, *, indent: int | None = None, key: int = 0, style: str = "bold") -> None:
    """Prose on ``to`` (stdout by default): each of its lines a paragraph wrapped to the terminal's
    width ($COLUMNS, 100 for a pipe) by the one wrapper (ccbench.basics.wrap; ``indent``: the column its
    further lines start at), never cut inside a figure, a flag or a path; printed as it is (no markup,
    no further wrapping by rich), its first ``key`` characters in ``style`` (a key before its value)."""
    from rich.text import Text

    shown = Text(fit_block(text, terminal_width(), indent))
    if key:
        shown.stylize(style, 0, key)
    (to or stdout).print(shown, highlight=False, soft_wrap=True)


_warned: set[str] = set()


def warn(message: object) -> None:
    """A warning for the user: one plain line on stderr, ``warning: <message>``, wrapped as prose; a
    message said before by this command is not said again (a bundle read twice warns once)."""
    text = str(message)
    if text in _warned:
        return
    _warned.add(text)
    say(f"warning: {text}", console)


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """warnings.showwarning for the command line (ccbench.cli.main sets it): a Python warning said as
    warn says it, never in Python's form with the file, line and source line that raised it."""
    warn(message)


def forget_warnings() -> None:
    """A new command: every warning may be said again (ccbench.cli.main, at each command's end)."""
    _warned.clear()


def is_interactive() -> bool:
    return sys.stderr.isatty()


_skip_teardown = False


def skip_teardown() -> None:
    """Let the process end as soon as the command returns, without the interpreter's teardown.

    After compare or report over a large result set, freeing every object one by one and
    unloading pandas, scipy and matplotlib takes a tenth of the command's time (0.4 s at 100,000
    samples) and achieves nothing. Only for commands that have written and closed all their output,
    stopped their helper processes and own no temporary files; only when ccbench runs as the program
    (ccbench.cli.main() without argv), never when called in-process.
    """
    global _skip_teardown
    _skip_teardown = True


def teardown_skipped() -> bool:
    """Whether a command asked to end without the interpreter's teardown (ccbench.cli.main reads it)."""
    return _skip_teardown
