"""Errors that the CLI turns into a one-line message and their exit code (2, bad input, unless the
error says otherwise), without a traceback."""


class CCBenchError(Exception):
    """A user-facing error: the message says what was wrong, where, and what to do."""

    exit_code = 2


class PlanError(CCBenchError):
    """The plan file is malformed (syntax, unknown key, wrong type)."""


class BundleError(CCBenchError):
    """A result bundle cannot be read (missing manifest, unknown format, corrupt line)."""


class EnvironmentProblem(CCBenchError):
    """The machine lacks something required (a tool, root, a writable directory)."""


#: the exit code of a command that found what it needs busy (sysexits.h EX_TEMPFAIL: try again later)
EXIT_BUSY = 75


class Busy(CCBenchError):
    """What the command needs is in use by another ccbench (a work directory another run holds):
    nothing was wrong with the input; waiting, or another --workdir, makes it work."""

    exit_code = EXIT_BUSY


class Stopped(BaseException):
    """SIGTERM or SIGHUP arrived in a command without a handler of its own (the runner and the
    fleet have theirs). Raised so that every ``finally`` and ``with`` on the way out runs: an
    import's staging directory, an export's temporary file. A BaseException, like
    KeyboardInterrupt, so that ``except Exception`` cannot swallow it."""

    def __init__(self, signum: int):
        import signal

        super().__init__(signal.Signals(signum).name)
        self.signum = signum
