"""The ccbench command line: wiring only. Each command is a module in ccbench.commands (one per
command, exporting ``command``), found here by name."""

from __future__ import annotations

import importlib
import os
import pkgutil
import signal
import sys
import warnings

import click

from ccbench.basics.errors import EXIT_CODES, CCBenchError, Stopped
from ccbench.basics.stopping import catch_stop_signals, restore_signals
from ccbench.basics.version import __version__


class _Group(click.Group):
    """Discovers the commands in ccbench.commands (one module per command, exporting ``command``;
    the module's name is the command's name: commands/compare.py -> "ccbench compare")."""

    @staticmethod
    def _load(module_name: str) -> click.Command | None:
        command = getattr(importlib.import_module(f"ccbench.commands.{module_name}"), "command", None)
        if not isinstance(command, click.Command):
            return None
        command.name = module_name.replace("_", "-")
        return command

    @staticmethod
    def _module_names() -> list[str]:
        import ccbench.commands as package

        return [info.name for info in pkgutil.iter_modules(package.__path__)]

    def list_commands(self, ctx):
        found = {name.replace("_", "-") for name in self._module_names() if self._load(name) is not None}
        return sorted(set(super().list_commands(ctx)) | found)

    def format_epilog(self, ctx, formatter) -> None:
        """The exit codes every command shares (basics.errors.EXIT_CODES), after the commands."""
        super().format_epilog(ctx, formatter)
        with formatter.section("Exit codes"):
            formatter.write_dl(EXIT_CODES, col_max=10)

    def get_command(self, ctx, name):
        module_name = name.replace("-", "_")
        if module_name in self._module_names():  # only the command asked for is imported
            return self._load(module_name)
        return super().get_command(ctx, name)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ccbench")
def cli() -> None:
    """Measure what confidential computing costs your workloads, and which protection layer causes it.

    \b
    Typical use:
      ccbench env                       what this machine is, and which TEE protects it
      ccbench run quick                 run the bundled quick plan into ./results/
      ccbench show results/<bundle>     the machine facts and a summary of the samples
      ccbench compare A B --baseline X  ratios with 95% intervals between configurations
      ccbench report A B -o r.html      a self-contained HTML report
    """


def _end_now() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


def _stop(signum, frame) -> None:
    raise Stopped(signum)


def _catch_termination() -> dict:
    """SIGTERM and SIGHUP (the terminal or SSH session went away) end any command through its
    clean-up rather than on the spot; a SIGHUP ignored at start (``nohup``) stays ignored. Ctrl-C
    is Python's KeyboardInterrupt already. Returns the dispositions found, to put back."""
    return catch_stop_signals(_stop, (signal.SIGTERM, signal.SIGHUP))


def _sentence(message: str) -> str:
    """Click's message as a clause of the one error line: "Missing argument 'NEW...'." -> "missing
    argument 'NEW...'" (a leading acronym kept)."""
    message = " ".join(message.split()).rstrip(".")
    if len(message) > 1 and message[0].isupper() and message[1].islower():
        message = message[0].lower() + message[1:]
    return message


def usage_error(exc: click.UsageError, argv: list[str] | None = None) -> str:
    """A usage error in one line, naming the command's usage and its help: "missing argument 'NEW...'
    (usage: ccbench gate [OPTIONS] NEW...; see 'ccbench gate --help')". An option's error carries no
    command (click's parser raises it without one): the command is found from the arguments."""
    message = _sentence(exc.format_message())
    ctx = exc.ctx or _context_of(sys.argv[1:] if argv is None else argv)
    usage = " ".join(ctx.get_usage().split()).removeprefix("Usage: ")
    return f"{message} (usage: {usage}; see '{ctx.command_path} --help')"


def _context_of(argv: list[str]) -> click.Context:
    """The context of the (sub)command ``argv`` names: its words up to the first that names no command."""
    ctx = click.Context(cli, info_name="ccbench")
    for word in argv:
        if not isinstance(ctx.command, click.Group) or word.startswith("-"):
            break
        command = ctx.command.get_command(ctx, word)
        if command is None:
            break
        ctx = click.Context(command, info_name=word, parent=ctx)
    return ctx


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A Python warning (a bundle's cut last line, ...) as one plain line from ccbench, once: the
    console's, loaded only when a command warns."""
    from ccbench.basics.console import show_warning

    show_warning(message, category, filename, lineno, file, line)


def main(argv: list[str] | None = None) -> None:
    previous = _catch_termination()
    shown_by = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        cli.main(args=argv, prog_name="ccbench", standalone_mode=False)
        # only a command that imported the console can have set its switch; the others keep rich unloaded
        console = sys.modules.get("ccbench.basics.console")
        if console is not None and console.teardown_skipped() and argv is None:
            _end_now()
    except CCBenchError as exc:
        click.echo(f"ccbench: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("ccbench: aborted", err=True)
        sys.exit(130)
    except click.UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # a group without its command: click prints its help
            exc.show()
        else:
            click.echo(f"ccbench: error: {usage_error(exc, argv)}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"ccbench: error: {_sentence(exc.format_message())}", err=True)
        sys.exit(2 if exc.exit_code == 1 else exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except Stopped as exc:
        try:
            click.echo(
                f"ccbench: stopped by {exc} before the command finished; run it again",
                err=True,
            )
        except OSError:
            pass  # the terminal went away with the session
        sys.exit(128 + exc.signum)
    except OSError as exc:
        # permissions, a full disk, a vanished file: say which file and what to do, without a traceback
        where = f" ({exc.filename})" if exc.filename else ""
        click.echo(f"ccbench: error: {exc.strerror or exc}{where}; check the path and its permissions", err=True)
        sys.exit(2)
    finally:
        restore_signals(previous)
        warnings.showwarning = shown_by
        console = sys.modules.get("ccbench.basics.console")
        if console is not None:
            console.forget_warnings()


if __name__ == "__main__":
    main()
