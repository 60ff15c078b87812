"""ccbench show: a bundle's machine facts, outcomes and a summary of its samples."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("bundle", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the summary rows as JSON.")
@click.option(
    "--allow-unverified",
    is_flag=True,
    help="Show a bundle whose files do not match their digest list (attestation.json), or that has none; "
    "a warning line says so. Without it such a bundle is refused (exit 3), unless its run has not ended.",
)
def command(bundle, as_json, allow_unverified) -> None:
    """Show a bundle: the machine facts, the outcome per workload and a summary table of its samples
    (one row per workload, variant and case).

    The bundle is checked first, as compare checks it: one whose files differ from its digest list
    (attestation.json), or that has none, is refused in one line (exit 3) unless --allow-unverified,
    which shows it with a warning line. A bundle whose run has not ended (a run going on, or killed)
    is shown, with a warning line that its files are unchecked."""
    import json

    from ccbench.attestation.onread import check_before_showing
    from ccbench.attestation.provenance import bundle_provenance
    from ccbench.basics.console import stdout, warn
    from ccbench.bundle import MANIFEST, read_bundle
    from ccbench.commands.env import print_environment, print_provenance
    from ccbench.run.summary import not_measured, summarize, summary_table

    _refuse_a_directory_of_bundles(bundle)
    # a path that is no bundle is read_bundle's one line (what it is not, and what to pass)
    unverified = check_before_showing(bundle, allow_unverified) if (Path(bundle) / MANIFEST).is_file() else None
    if unverified:
        warn(unverified)
    data = read_bundle(bundle)
    samples = data.samples  # the journal's lines as plain dicts: no object per sample
    rows = summarize(samples)
    provenance = bundle_provenance(data.path, data.probe)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "bundle": str(data.path),
                    "status": data.manifest.get("status"),
                    "outcomes": data.manifest.get("outcomes", {}),
                    "imported": data.manifest.get("imported"),
                    "machine_id": data.probe.get("machine_id"),
                    "provenance": provenance,
                    "unverified": unverified,
                    "summary": rows,
                    "not_measured": not_measured(samples),
                },
                indent=2,
                default=str,
            )
        )
        return
    manifest = data.manifest
    stdout.print(
        f"[bold]bundle[/bold] {data.path}  (ccbench {manifest.get('tool', {}).get('version')}, "
        f"plan {manifest.get('plan', {}).get('name')}, status {manifest.get('status')}"
        + (", UNVERIFIED: see the warning)" if unverified else ")")
    )
    stdout.print(
        f"started {manifest.get('started_at')}, ended {manifest.get('ended_at') or '- (interrupted or still running)'}"
    )
    imported = manifest.get("imported")
    if imported:
        # the machine facts of an imported bundle are mostly unknown: say so rather than print None
        stdout.print(
            f"[bold]imported[/bold] from {imported.get('format')} results, not measured by ccbench: "
            + ", ".join(imported.get("sources", [])[:5])
        )
        stdout.print(imported_machine(data.probe), markup=False)
        for line in data.probe.get("unknown", []):
            stdout.print(f"unknown         {line}", markup=False)
    else:
        print_environment(data.probe)
    print_provenance(provenance, data.probe.get("machine_id"), recorded=isinstance(data.probe.get("provenance"), dict))
    warmups = sum(1 for s in samples if s["warmup"])
    stdout.print(summary_table(rows, f"{len(samples)} samples ({warmups} warmup)"))
    for line in not_measured(samples):
        stdout.print(line, markup=False, highlight=False)
    for name, outcome in manifest.get("outcomes", {}).items():
        if outcome.get("status") != "ok":
            stdout.print(
                f"{name}: {outcome.get('status')}" + (f": {outcome['reason']}" if outcome.get("reason") else "")
            )
    contended = [e for e in data.executions if e.get("contended")]
    if contended:
        stdout.print(_contention_line(contended, len(data.executions)), markup=False, highlight=False)
    failures = [e for e in data.executions if e.get("status") not in ("ok",)]
    for record in failures[:10]:
        stdout.print(
            f"{record['workload']} [{record.get('variant')}] rep {record.get('repetition')}: "
            f"{record['status']}: {record.get('error', '')[:200]}"
        )


def _refuse_a_directory_of_bundles(path: str) -> None:
    """One line for a directory holding bundles (as compare takes): show shows one bundle, so name them
    and the command that shows one."""
    from ccbench.basics.errors import BundleError
    from ccbench.bundle import MANIFEST, find_bundles

    directory = Path(path)
    if not directory.is_dir() or (directory / MANIFEST).exists():
        return
    try:
        bundles = find_bundles([directory])
    except BundleError:
        return  # no bundle under it: read_bundle says what it is not
    names = ", ".join(b.relative_to(directory).as_posix() for b in bundles[:5])
    more = f" and {len(bundles) - 5} more" if len(bundles) > 5 else ""
    plural = "s" if len(bundles) != 1 else ""
    raise BundleError(
        f"{directory} holds {len(bundles)} bundle{plural} ({names}{more}), and show shows one: "
        f"ccbench show {bundles[0]} (or ccbench compare {directory} to compare them)"
    )


def imported_machine(probe: dict) -> str:
    """The machine facts an imported bundle's source states: host, CPU and its count, memory."""
    from ccbench.probe.lint import gib

    source_host = probe.get("source_hostname")
    host = f"{probe.get('hostname')}" + (f" (the source names the host {source_host!r})" if source_host else "")
    cpu = probe.get("cpu") or {}
    counts = [f"{cpu['threads']} logical CPUs"] if cpu.get("threads") else []
    counts += [f"{cpu['cores']} cores"] if cpu.get("cores") else []
    memory = (probe.get("memory") or {}).get("total_bytes")
    lines = [
        f"host            {host}",
        f"cpu             {cpu.get('model') or 'unknown'}" + (f" ({', '.join(counts)})" if counts else ""),
    ]
    return "\n".join(lines + ([f"memory          {gib(memory)}"] if memory else []))


def _contention_line(contended: list[dict], executions: int) -> str:
    """How many executions were contended and by what: each kind of reason once, its figures as the
    range they took ("other processes used 1.01-1.85 CPUs on average"), then the busiest execution of
    the commonest kind in its own words; never cut."""
    import re

    figure = re.compile(r"[0-9][0-9.,]*%?")

    def head(reason: str) -> str:
        return " ".join(re.sub(r"\s*\(.*", "", reason).split())

    def kind(reason: str) -> str:
        return figure.sub("#", head(reason))

    def value(text: str) -> float:
        try:
            return float(text.rstrip("%").replace(",", ""))
        except ValueError:
            return 0.0

    def first_number(reason: str) -> float:
        return float((re.findall(r"[0-9]+\.[0-9]+|[0-9]+", reason) or ["0"])[0])

    def ranged(same_kind: list[str]) -> str:
        """The kind's words with each figure the range it took over these reasons."""
        columns = zip(*(figure.findall(head(r)) for r in same_kind), strict=False)
        spans = []
        for column in columns:
            low, high = min(column, key=value), max(column, key=value)
            spans.append(low if value(low) == value(high) else f"{low.rstrip('%')}-{high}")
        words = iter(spans)
        return figure.sub(lambda _: next(words, "#"), head(same_kind[0]))

    reasons = [r for e in contended for r in e.get("contended_reasons", [])]
    kinds = list(dict.fromkeys(kind(r) for r in reasons))
    # the busiest execution of the commonest kind (figures of different kinds do not compare)
    common = max(kinds, key=lambda k: sum(kind(r) == k for r in reasons), default="")
    worst = max((r for r in reasons if kind(r) == common), key=first_number, default="")
    shown = [ranged([r for r in reasons if kind(r) == k]) for k in kinds[:3]]
    said = "; ".join(shown) + (f" (+{len(kinds) - 3} more kinds)" if len(kinds) > 3 else "")
    return f"{len(contended)} of {executions} executions ran while other work used the machine (contended): {said}" + (
        f"; the busiest: {worst}" if worst else ""
    )
