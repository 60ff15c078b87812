"""ccbench env: what this machine is, and which TEE and storage protection it has."""

from __future__ import annotations

from typing import Any

import click

from ccbench.basics.errors import CCBenchError


@click.command()
@click.option(
    "--root",
    type=click.Path(file_okay=False),
    default="/",
    show_default=True,
    help="Read every file (proc, sys, dev, etc) under this directory: a snapshot or fixture.",
)
@click.option("--dmesg", type=click.Path(dir_okay=False), help="Read the kernel log from this file instead of dmesg.")
@click.option(
    "--cpuid",
    "cpuid_file",
    type=click.Path(dir_okay=False),
    help="With --root: the snapshot machine's CPUID, as 'cpuid -r -1' printed it there.",
)
@click.option(
    "--bench-dir",
    type=click.Path(),
    default=".",
    show_default=True,
    help="Directory whose storage protection is reported.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the full probe document as JSON.")
@click.option(
    "--lint",
    "lint",
    is_flag=True,
    help="Also check this machine for the known traps (docs/trust.md, Lint): a debug TEE; with --plan, "
    "small bounce buffers under an I/O-heavy plan. With --json: the findings under the key 'lint'.",
)
@click.option(
    "--plan", "plan_name", help="With --lint: the plan (a file or bundled name) whose needs the checks consider."
)
def command(root, dmesg, cpuid_file, bench_dir, as_json, lint, plan_name) -> None:
    """Probe this machine: CPU, memory, kernel, virtualization, TEE technology with evidence, storage protection.

    With --root (and optionally --dmesg) the probe reads a captured snapshot instead: the MSRs are
    not consulted, and CPUID only as --cpuid recorded it. On a live machine CPUID is executed here
    (no root needed). The TEE is "none" only on positive evidence (bare metal, CPUID, the SEV status
    MSR, a kernel log from boot); with none either way it is "unknown".
    """
    import json
    from pathlib import Path

    from ccbench.probe import probe

    if not Path(root).is_dir():
        raise CCBenchError(f"--root {root}: no such directory")
    if dmesg and not Path(dmesg).is_file():
        raise CCBenchError(f"--dmesg {dmesg}: no such file")
    if cpuid_file and not Path(cpuid_file).is_file():
        raise CCBenchError(f"--cpuid {cpuid_file}: no such file (record it on the machine with 'cpuid -r -1')")
    if plan_name and not lint:
        raise CCBenchError("--plan is an option of --lint: add --lint")
    device_io = None
    if plan_name:
        from ccbench.planning.plan import load_plan
        from ccbench.workloads import plan_device_io

        device_io = plan_device_io(load_plan(plan_name).model_dump(mode="json"))
    document = probe(root=root, dmesg=dmesg, bench_dir=bench_dir if root == "/" else None, cpuid=cpuid_file)
    findings = None
    if lint:
        from ccbench.probe.lint import lint_machine

        findings = lint_machine(document, device_io)
    if as_json:
        if findings is not None:
            document["lint"] = [finding.to_dict() for finding in findings]
        click.echo(json.dumps(document, indent=2, default=str))
        return
    print_environment(document)
    print_provenance(document.get("provenance"), document.get("machine_id"))
    if findings is not None:
        print_lint(findings, plan_name)


def print_lint(findings: list, plan_name: str | None) -> None:
    from ccbench.basics.console import say
    from ccbench.probe.lint import format_findings

    scope = f"this machine under plan {plan_name}" if plan_name else "this machine (add --plan for the plan's checks)"
    say(f"{'lint':<15} {scope}: docs/trust.md (Lint)", indent=16, key=15)
    say(format_findings(findings))


def print_provenance(provenance: dict[str, Any], machine_id: str | None = None, recorded: bool = True) -> None:
    """The CC provenance block (also used by ``ccbench show``, with the bundle's evidence read in);
    ``recorded`` False: the probe that made the document had no provenance yet (before probe version 2)."""
    from ccbench.attestation.provenance import describe
    from ccbench.basics.console import say

    if recorded:
        say(f"{'provenance':<15} machine id {machine_id or 'unknown'}", indent=16, key=15)
    else:
        say(
            f"{'provenance':<15} not recorded by this bundle's probe (imported, or made before ccbench had it)",
            indent=16,
            key=15,
        )
    for name, text in describe(provenance):
        say(f"  {name:<17} {text}", indent=20)


def print_environment(document: dict[str, Any]) -> None:
    """The probe document as aligned lines (also used by ``ccbench show``)."""
    from ccbench.basics.console import say

    cpu = document.get("cpu", {})
    memory = document.get("memory", {}).get("total_bytes")
    tee = document.get("tee", {})
    storage = document.get("storage", {})
    lines = [
        ("host", document.get("hostname")),
        ("cpu", _cpu_line(cpu)),
        ("memory", f"{memory / 2**30:.1f} GiB" if memory else "unknown"),
        ("kernel", document.get("kernel", {}).get("release")),
        ("os", document.get("os", {}).get("pretty_name")),
        (
            "virtualization",
            (document.get("virtualization") or "unknown")
            + (f" ({document['cloud']})" if document.get("cloud") else ""),
        ),
        ("tee", tee.get("technology")),
    ]
    for key, value in lines:
        say(f"{key:<15} {value}", indent=16, key=15)
    for item in tee.get("evidence", []):
        say(f"{'':<15}   evidence: {item['source']}: {item['signal']} -> {item['indicates']}", indent=22)
    for note in tee.get("notes", []):
        say(f"{'':<15}   note: {note}", indent=22)
    detail = ", ".join(f"{k}={v}" for k, v in storage.items() if k not in ("path", "protection"))
    say(f"{'storage':<15} {storage.get('protection')} at {storage.get('path')} ({detail})", indent=16, key=15)


def _cpu_line(cpu: dict) -> str:
    """ "Intel Xeon (2 cores, 2 threads)", and "unknown" for what the probe could not read (never "None")."""
    counts = ", ".join(f"{cpu[key]} {key}" for key in ("cores", "threads") if cpu.get(key) is not None)
    model = cpu.get("model") or "unknown"
    return f"{model} ({counts})" if counts else f"{model} (cores and threads unknown)"
