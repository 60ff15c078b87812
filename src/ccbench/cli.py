"""The ccbench command line. Commands only: the work lives in the modules they call."""

from __future__ import annotations

import importlib
import os
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
                # the module's name is the command's name (commands/compare.py -> "ccbench compare")
                name = info.name.replace("_", "-")
                command.name = name
                found[name] = command
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



def _parse_pin(value: str | None) -> list[int] | None:
    if not value:
        return None
    cpus: set[int] = set()
    try:
        for part in value.split(","):
            if "-" in part:
                low, high = part.split("-", 1)
                cpus.update(range(int(low), int(high) + 1))
            else:
                cpus.add(int(part))
    except ValueError:
        raise CCBenchError(f"--pin {value!r}: expected CPU numbers like 0 or 0,2 or 0-3") from None
    import os

    available = os.sched_getaffinity(0)
    missing = sorted(cpus - available)
    if missing:
        raise CCBenchError(f"--pin {value!r}: CPU(s) {missing} are not available here (available: {sorted(available)})")
    return sorted(cpus)


def _parse_pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    result = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CCBenchError(f"{option} {item!r}: expected NAME=VALUE")
        result[key] = value
    return result


def _notebook_plan(notebook: str, params: dict[str, str], repeat: int | None):
    from pathlib import Path

    from ccbench.errors import PlanError
    from ccbench.plan import plan_from_dict
    from ccbench.workloads import REGISTRY

    if "notebook" not in REGISTRY:
        raise PlanError("the notebook workload is not built in this version; install the datascience component")
    if not Path(notebook).exists():
        raise PlanError(f"--notebook {notebook}: no such file")

    def typed(value: str):
        import json

        try:
            return json.loads(value)
        except ValueError:
            return value

    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(notebook).stem) or "notebook"
    document = {
        "name": f"notebook-{name}",
        "description": f"ad-hoc plan for {notebook}",
        "defaults": {"repetitions": repeat or 3, "warmup": 0},
        "workloads": [{"kind": "notebook", "name": name, "notebook": str(Path(notebook).resolve()),
                       "parameters": {k: typed(v) for k, v in params.items()}}],
    }
    return plan_from_dict(document, f"--notebook {notebook}")


@cli.command()
@click.argument("plan", required=False, default=None)
@click.option("--out", "out", type=click.Path(file_okay=False), default="results", show_default=True,
              help="Directory that receives the result bundle (<out>/<host>-<UTC time>/).")
@click.option("--repeat", type=click.IntRange(min=1), help="Override every workload's number of repetitions.")
@click.option("--only", "only", multiple=True, metavar="NAME[,NAME...]",
              help="Run only these workloads (by name; a name defaults to the kind). Repeatable, or comma-separated.")
@click.option("--pin", metavar="CPUS", help="Pin each measured process to these CPUs, e.g. 1 or 0,2 or 0-3.")
@click.option("--workdir", type=click.Path(file_okay=False), default=".ccbench/work", show_default=True,
              help="ccbench's own work directory (the 'disk' storage variant lives here; loop files and mounts too).")
@click.option("--storage-path", "storage_paths", multiple=True, metavar="VARIANT=DIR",
              help="Use your own prepared directory for a storage variant, e.g. encrypted=/mnt/secure.")
@click.option("--notebook", type=click.Path(dir_okay=False), help="Run this one notebook instead of a plan.")
@click.option("--param", "params", multiple=True, metavar="K=V", help="Parameter injected into --notebook (repeatable).")
@click.option("--resume", type=click.Path(file_okay=False), metavar="BUNDLE",
              help="Continue an interrupted run in its bundle, skipping executions already recorded.")
def run(plan, out, repeat, only, pin, workdir, storage_paths, notebook, params, resume) -> None:
    """Run PLAN (a .toml or seed-000 .csv file, or a bundled plan name; default: quick).

    Each execution runs in its own process; samples are on disk before the next one starts.
    Ctrl-C stops after cleaning up and prints how to resume. Exit code: 0 when everything ran,
    1 when an execution failed or timed out, 2 for bad input, 130 when interrupted.
    """
    from pathlib import Path

    from ccbench.bundle import read_bundle
    from ccbench.console import console
    from ccbench.progress import RichReporter
    from ccbench.plan import Plan, load_plan
    from ccbench.runner import Runner

    if params and not notebook:
        raise CCBenchError("--param only applies to --notebook")
    if notebook and plan:
        raise CCBenchError("give either a PLAN or --notebook, not both")
    if resume:
        bundle = read_bundle(resume)
        the_plan = Plan(**bundle.manifest["plan"])
        out = str(Path(resume).parent)
    elif notebook:
        the_plan = _notebook_plan(notebook, _parse_pairs(params, "--param"), repeat)
    else:
        the_plan = load_plan(plan or "quick")
        if only:
            the_plan = the_plan.select([name.strip() for item in only for name in item.split(",") if name.strip()])
        if repeat:
            the_plan = the_plan.with_repetitions(repeat)
    runner = Runner(
        the_plan, out=Path(out), workdir=Path(workdir), pin=_parse_pin(pin),
        storage_paths=_parse_pairs(storage_paths, "--storage-path"), reporter=RichReporter(),
        command_line=["ccbench", *sys.argv[1:]], resume=Path(resume) if resume else None,
    )
    console.print(f"plan [bold]{the_plan.name}[/bold]: {len(the_plan.workloads)} workload(s)")
    result = runner.run()
    _print_run_summary(result)
    if result.interrupted:
        console.print(f"interrupted. Resume with:  ccbench run --resume {result.bundle}")
        sys.exit(130)
    sys.exit(1 if result.failed else 0)


def _print_run_summary(result) -> None:
    from rich.table import Table

    from ccbench.console import fmt_number, stdout
    from ccbench.runner import summarize

    table = Table(title="summary (measured executions; warmups excluded)", title_justify="left")
    for column in ("workload", "status", "variant", "case", "metric", "median", "CV %", "n"):
        table.add_column(column, justify="right" if column in ("median", "CV %", "n") else "left")
    rows = summarize(result.samples)
    for name, outcome in result.outcomes.items():
        mine = [r for r in rows if r["workload"] == name]
        status = outcome.status + (f" ({outcome.executions_failed} failed)" if outcome.executions_failed else "")
        if not mine:
            table.add_row(name, status, "-", "-", outcome.reason or "-", "-", "-", "-")
        for row in mine:
            table.add_row(name, status, row["variant"], row["case"], row["metric"],
                          f"{fmt_number(row['median'])} {row['unit']}", (f"{row['cv_percent']:.1f}" if row["cv_percent"] is not None else "-"), str(row["n"]))
            name, status = "", ""
    stdout.print(table)
    for name, outcome in result.outcomes.items():
        for variant, reason in outcome.skipped_variants.items():
            stdout.print(f"{name}: {variant} skipped: {reason}")
    stdout.print(f"bundle: {result.bundle}")


@cli.command()
def plans() -> None:
    """List the bundled plans, one line each."""
    from ccbench.plan import bundled_plans, plan_summary

    for name, path in bundled_plans().items():
        click.echo(f"{name:<14} {plan_summary(path)}")


@cli.command()
@click.option("--root", type=click.Path(file_okay=False), default="/", show_default=True,
              help="Read every file (proc, sys, dev, etc) under this directory: a snapshot or fixture.")
@click.option("--dmesg", type=click.Path(dir_okay=False), help="Read the kernel log from this file instead of dmesg.")
@click.option("--bench-dir", type=click.Path(), default=".", show_default=True,
              help="Directory whose storage protection is reported.")
@click.option("--json", "as_json", is_flag=True, help="Print the full probe document as JSON.")
def env(root, dmesg, bench_dir, as_json) -> None:
    """Probe this machine: CPU, memory, kernel, virtualization, TEE technology with evidence, storage protection.

    With --root (and optionally --dmesg) the probe reads a captured snapshot instead, and CPUID
    and MSRs are not consulted.
    """
    import json
    from pathlib import Path

    from ccbench.probe import probe

    if not Path(root).is_dir():
        raise CCBenchError(f"--root {root}: no such directory")
    if dmesg and not Path(dmesg).is_file():
        raise CCBenchError(f"--dmesg {dmesg}: no such file")
    document = probe(root=root, dmesg=dmesg, bench_dir=bench_dir if root == "/" else None)
    if as_json:
        click.echo(json.dumps(document, indent=2, default=str))
        return
    _print_environment(document)


def _print_environment(document) -> None:
    from ccbench.console import stdout

    cpu = document.get("cpu", {})
    memory = document.get("memory", {}).get("total_bytes")
    tee = document.get("tee", {})
    storage = document.get("storage", {})
    lines = [
        ("host", document.get("hostname")),
        ("cpu", f"{cpu.get('model')} ({cpu.get('cores')} cores, {cpu.get('threads')} threads)"),
        ("memory", f"{memory / 2**30:.1f} GiB" if memory else "unknown"),
        ("kernel", document.get("kernel", {}).get("release")),
        ("os", document.get("os", {}).get("pretty_name")),
        ("virtualization", document.get("virtualization") + (f" ({document['cloud']})" if document.get("cloud") else "")),
        ("tee", tee.get("technology")),
    ]
    for key, value in lines:
        stdout.print(f"[bold]{key:<15}[/bold] {value}")
    for item in tee.get("evidence", []):
        stdout.print(f"{'':<15}   evidence: {item['source']}: {item['signal']} -> {item['indicates']}")
    for note in tee.get("notes", []):
        stdout.print(f"{'':<15}   note: {note}")
    detail = ", ".join(f"{k}={v}" for k, v in storage.items() if k not in ("path", "protection"))
    stdout.print(f"[bold]{'storage':<15}[/bold] {storage.get('protection')} at {storage.get('path')} ({detail})")


@cli.command()
@click.argument("bundle", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the summary rows as JSON.")
def show(bundle, as_json) -> None:
    """Show a bundle: the machine facts, the outcome per workload and a summary table of its samples."""
    import json

    from rich.table import Table

    from ccbench.bundle import read_bundle
    from ccbench.console import fmt_number, stdout
    from ccbench.model import Sample
    from ccbench.runner import summarize

    data = read_bundle(bundle)
    samples = [Sample(**s) for s in data.samples]
    rows = summarize(samples)
    if as_json:
        click.echo(json.dumps({"bundle": str(data.path), "status": data.manifest.get("status"),
                               "outcomes": data.manifest.get("outcomes", {}), "summary": rows}, indent=2, default=str))
        return
    manifest = data.manifest
    stdout.print(f"[bold]bundle[/bold] {data.path}  (ccbench {manifest.get('tool', {}).get('version')}, "
                 f"plan {manifest.get('plan', {}).get('name')}, status {manifest.get('status')})")
    stdout.print(f"started {manifest.get('started_at')}, ended {manifest.get('ended_at') or '- (interrupted or still running)'}")
    _print_environment(data.probe)
    table = Table(title=f"{len(samples)} samples ({sum(1 for s in samples if s.warmup)} warmup)", title_justify="left")
    for column in ("workload", "variant", "case", "metric", "median", "CV %", "n"):
        table.add_column(column, justify="right" if column in ("median", "CV %", "n") else "left")
    for row in rows:
        table.add_row(row["workload"], row["variant"], row["case"], row["metric"],
                      f"{fmt_number(row['median'])} {row['unit']}", (f"{row['cv_percent']:.1f}" if row["cv_percent"] is not None else "-"), str(row["n"]))
    stdout.print(table)
    for name, outcome in manifest.get("outcomes", {}).items():
        if outcome.get("status") != "ok":
            stdout.print(f"{name}: {outcome.get('status')}" + (f": {outcome['reason']}" if outcome.get("reason") else ""))
    failures = [e for e in data.executions if e.get("status") not in ("ok",)]
    for record in failures[:10]:
        stdout.print(f"{record['workload']} [{record.get('variant')}] rep {record.get('repetition')}: "
                     f"{record['status']}: {record.get('error', '')[:200]}")


_skip_teardown = False


def skip_teardown() -> None:
    """Let the process end as soon as the command returns, without the interpreter's teardown.

    After compare or report over a large result set, freeing every object one by one and
    unloading pandas, scipy and matplotlib takes a tenth of the command's time (0.4 s at 100,000
    samples) and achieves nothing. Only for commands that have written and closed all their output,
    stopped their helper processes and own no temporary files; only when ccbench runs as the program
    (main() without argv), never when called in-process.
    """
    global _skip_teardown
    _skip_teardown = True


def _end_now() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="ccbench", standalone_mode=False)
        if _skip_teardown and argv is None:
            _end_now()
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
    except OSError as exc:
        # permissions, a full disk, a vanished file: say which file and what to do, without a traceback
        where = f" ({exc.filename})" if exc.filename else ""
        click.echo(f"ccbench: error: {exc.strerror or exc}{where}; check the path and its permissions", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
