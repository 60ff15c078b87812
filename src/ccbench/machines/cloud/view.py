"""What `ccbench machines check` and `machines run --dry-run` print for a cloud study: each arm's
exact request, the price, and how each arm's request differs from the baseline's (only the CC
fields, if the arms are matched); and the cost guard."""

from __future__ import annotations

import json
from typing import Any

from ccbench.machines.cloud import pricing
from ccbench.machines.cloud.provider import Provider, RunContext

#: the run id and key the printed requests show (a real run makes its own)
SAMPLE_RUN = "<run-id>"
SAMPLE_KEY = "<the run's own SSH public key>"


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else key))
        return out
    if isinstance(value, list):
        out = {}
        for index, item in enumerate(value):
            out.update(_flatten(item, f"{prefix}[{index}]"))
        return out
    return {prefix: value}


def _neutral(request: dict[str, Any], arm: str, name: str) -> dict[str, Any]:
    """The request with what only names the arm (its name, its instance's name) put aside."""
    text = json.dumps(request).replace(json.dumps(name)[1:-1], "<instance>").replace(f'"{arm}"', '"<arm>"')
    return json.loads(text.replace(f"-{arm}-", "-<arm>-"))


def differences(provider: Provider, study, ctx: RunContext) -> dict[str, list[str]]:
    """Per arm but the baseline: each field its request sets differently from the baseline's."""
    base = next(a for a in study.arms if a.name == study.baseline)
    flat_base = _flatten(
        _neutral(provider.request(base, 1, ctx), base.name, provider.instance_name(ctx.run_id, base.name, 1))
    )
    out = {}
    for arm in study.arms:
        if arm.name == base.name:
            continue
        name = provider.instance_name(ctx.run_id, arm.name, 1)
        flat = _flatten(_neutral(provider.request(arm, 1, ctx), arm.name, name))
        lines = []
        for key in sorted(set(flat) | set(flat_base)):
            if flat.get(key, "<absent>") != flat_base.get(key, "<absent>"):
                lines.append(f"{key}: {flat_base.get(key, '(absent)')} -> {flat.get(key, '(absent)')}")
        out[arm.name] = lines
    return out


def cost(study) -> tuple[list[tuple[str, float]], float, float]:
    """Each instance's price per hour, their sum, and the estimate (sum x expected hours)."""
    rates = [(f"{a.name}#{r}", pricing.hourly(a.size, a.kind)) for a in study.arms for r in range(1, a.replicas + 1)]
    per_hour = sum(rate for _, rate in rates)
    return rates, per_hour, pricing.estimate([rate for _, rate in rates], study.cloud.expected_hours)


def guard(study, yes: bool, interactive: bool) -> str | None:
    """None to go on, "ask" to ask the user, or the one-line reason the launch is refused."""
    _, per_hour, estimate = cost(study)
    budget = study.cloud.budget_usd
    if estimate > budget:
        return (
            f"estimate ${estimate:.2f} (${per_hour:.4f}/h x {study.cloud.expected_hours:g} h) is over "
            f"budget_usd ${budget:.2f}; raise the budget or lower expected_hours in [cloud]"
        )
    if yes:
        return None
    if not interactive:
        return f"estimate ${estimate:.2f}: not on a terminal, so nothing is launched without --yes"
    return "ask"


def render(provider: Provider, study, ctx: RunContext) -> list[str]:
    c = study.cloud
    lines = [
        f"cloud study {study.name}: {c.provider} {c.zone or c.region}, plan {study.plan}, {study.rounds} round(s) "
        f"{study.order}, baseline {study.baseline}, lifetime cap {c.max_lifetime_h:g} h",
    ]
    for arm in study.arms:
        lines.append(
            f"arm {arm.name}: kind {arm.kind}, {arm.size.name} ({arm.size.vcpus} vCPU, {arm.size.memory_gib:g} GiB, {arm.size.cpu}), image {arm.image}, {arm.replicas} instance(s)"
        )
        lines.append(f"  request ({_api(c.provider)}):")
        body = json.dumps(provider.request(arm, 1, ctx), indent=2, sort_keys=True)
        lines += ["    " + line for line in body.splitlines()]
    lines.append(f"differences from the baseline '{study.baseline}' (only the CC mode may differ):")
    for arm, diffs in differences(provider, study, ctx).items():
        lines.append(f"  {arm}: " + ("; ".join(diffs) if diffs else "none (the same request)"))
    rates, per_hour, estimate = cost(study)
    region = pricing.REFERENCE_REGION[c.provider]
    lines.append(
        f"price: {', '.join(f'{n} ${r:.4f}/h' for n, r in rates)}; ${per_hour:.4f}/h in all at {region} on-demand list "
        f"prices of {pricing.PRICES_DATE} ({pricing.SOURCES[c.provider]})"
    )
    lines.append(f"estimate: ${per_hour:.4f}/h x {c.expected_hours:g} h = ${estimate:.2f} (budget ${c.budget_usd:.2f})")
    return lines


def _api(provider: str) -> str:
    return {"aws": "EC2 RunInstances", "gcp": "compute instances.insert", "azure": "virtualMachines createOrUpdate"}[
        provider
    ]


def show(study, echo) -> None:
    """Print the study's requests, differences and price (no SDK, no credentials, no call)."""
    from ccbench.machines.cloud.lifecycle import context, provider_for

    provider = provider_for(study.cloud)
    for line in render(provider, study, context(study, SAMPLE_RUN, SAMPLE_KEY)):
        echo(line)


def run_cloud_study(study, dry_run: bool, yes: bool, interactive: bool, echo, refuse, confirm, **where) -> int:
    """`ccbench machines run` for a cloud study: the requests and price, then the cost guard (a dry
    run too is refused over budget), the address SSH may come from (--ssh-from or [cloud] ssh_from:
    never the world by default), and the run (ccbench.machines.cloud.studyrun)."""
    show(study, echo)
    verdict = guard(study, yes or dry_run, interactive)
    if verdict is not None and verdict != "ask":
        refuse(f"ccbench: error: refused: {verdict}")
        return 2
    if dry_run:
        echo("dry run: nothing launched; the cost guard passes (budget_usd)")
        return 0
    from ccbench.machines.cloud.model import cidr
    from ccbench.machines.study import StudyError

    try:
        ssh_from = cidr(where["ssh_from"], "--ssh-from") if where.get("ssh_from") else study.cloud.ssh_from
    except StudyError as bad:
        refuse(f"ccbench: error: refused: {bad}")
        return 2
    if not ssh_from:
        refuse(
            "ccbench: error: refused: say which addresses SSH to the instances may come from: "
            "--ssh-from 203.0.113.7/32 (your own address) or ssh_from in [cloud]; nothing was launched"
        )
        return 2
    if ssh_from == "0.0.0.0/0":
        echo("ssh from 0.0.0.0/0, as asked: the instances' SSH is open to every address")
    if verdict == "ask" and not confirm(
        f"launch {sum(a.replicas for a in study.arms)} instance(s) at the estimate above?"
    ):
        refuse("ccbench: not launched: answered no at the price estimate")
        return 1
    from ccbench.machines.cloud import studyrun
    from ccbench.machines.cloud.journal import state_dir
    from ccbench.machines.cloud.lifecycle import provider_for

    out = where.get("out") or "results"
    return studyrun.run(study, provider_for(study.cloud), out, echo, state_dir(), ssh_from, where.get("workdir"))
