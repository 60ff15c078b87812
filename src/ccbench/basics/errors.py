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

#: every exit code a ccbench command returns, and what it means: the one table, printed at the end of
#: ``ccbench --help`` and repeated word for word in README.md, docs/commands.md and docs/ci.md
#: (tests/test_exit_codes.py compares them); a code is here only if some command returns it
EXIT_CODES: tuple[tuple[str, str], ...] = (
    ("0", "success; `gate`: passed, building the baseline, or nothing could be judged (each case not judged "
     "named, and `<skipped/>` in JUnit)"),
    ("1", "`run`: an execution failed or timed out (the run went on); `fleet run`, `machines run`: a host's or "
          "an arm's run failed, or a cloud study not launched (answered no at its price); `gate`: failed (a "
          "regression, a case lost, or a new run that did not end)"),
    ("2", "bad input, one line `ccbench: error: what, where, what to do` (a missing path, a bad plan, study, "
          "inventory or option; `gate`: a run against itself, a baseline of another configuration, runs of "
          "different plans); "
          "`machines check`, `cloud check`: a host or cloud that cannot launch an arm"),
    ("3", "a bundle that does not verify (changed, missing or extra files, or no digest list: a run still going "
          "or killed); `--allow-unverified` reads it and says so"),
    ("4", "`verify`: TEE evidence that fails or cannot be verified; `attest`: no evidence could be made here"),
    ("5", "`verify --require-attestation`: no real evidence"),
    ("75", "busy: another run holds the work directory (wait for it, or pass another `--workdir`)"),
    ("130", "interrupted by Ctrl-C (`run` and `fleet run`: also by SIGTERM or SIGHUP); a run's bundle keeps what "
            "it measured: `ccbench run --resume BUNDLE` finishes it"),
    ("129, 143", "stopped by SIGHUP or SIGTERM (128 + the signal's number) in any other command, after its "
                 "clean-up"),
)  # fmt: skip


def exit_codes_markdown() -> str:
    """EXIT_CODES as the Markdown table the docs carry."""
    return "\n".join(["| exit | meaning |", "|---|---|", *(f"| {code} | {meaning} |" for code, meaning in EXIT_CODES)])


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
