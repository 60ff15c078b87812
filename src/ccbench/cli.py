"""The ccbench command line. Commands only: the work lives in the modules they call."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import click

from ccbench import __version__
from ccbench.errors import CCBenchError


class _Group(click.Group):
    """Discovers extra commands in ccbench.commands (one module per command, exporting ``command``)."""

    def _extra(self) -> dict[str, click.Command]:
        import ccbench.commands as package

        found = {}
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"ccbench.commands.{info.name}")
            command = getattr(module, "command", None)
            if isinstance(command, click.Command):
                found[command.name] = command
        return found

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self._extra()))

    def get_command(self, ctx, name):
        return super().get_command(ctx, name) or self._extra().get(name)


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


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="ccbench", standalone_mode=False)
    except CCBenchError as exc:
        click.echo(f"ccbench: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("ccbench: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if exc.exit_code == 1 else exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(0)


if __name__ == "__main__":
    main()
