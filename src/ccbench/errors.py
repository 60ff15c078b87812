"""Errors that the CLI turns into a one-line message and exit code 2 (no traceback)."""


class CCBenchError(Exception):
    """A user-facing error: the message says what was wrong, where, and what to do."""

    exit_code = 2


class PlanError(CCBenchError):
    """The plan file is malformed (syntax, unknown key, wrong type)."""


class BundleError(CCBenchError):
    """A result bundle cannot be read (missing manifest, unknown format, corrupt line)."""


class EnvironmentProblem(CCBenchError):
    """The machine lacks something required (a tool, root, a writable directory)."""
