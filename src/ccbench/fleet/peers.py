"""Serving hosts: a fleet host whose ``ccbench_peer`` names another host of the inventory measures
against that host (a network workload's client here, its server there).

The serving host runs no plan of its own. Before the measured hosts start, one playbook run
(action ``serve``) installs ccbench and the plan's set-up components there and starts the services
the plan's workloads declare (``Workload.peer_services``: argvs that listen until stopped), each
recorded on the host before it starts and run under ``timeout`` for at most the plan's bound (every
execution's timeout and cooldown, plus set-up time), so that a controller that dies leaves nothing
running past it. After the measured hosts are done, interrupted or failed, a second playbook run
(action ``unserve``) stops them. The measured host's run finds its peer's address in
``$CCBENCH_PEER`` (the fleet's ``--peer`` to the remote agent's ``start``).

Generic: this module knows no workload kind; the registry says what to serve.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ccbench.fleet import events
from ccbench.fleet import inventory as inventory_module
from ccbench.fleet.ansible_env import PLAYBOOK
from ccbench.fleet.records import FleetRun, one_line

#: time a serving host's services get on top of the plan's executions: the measured hosts'
#: install, set-up and probe come first
SETUP_ALLOWANCE_S = 1800.0


def serving_hosts(fleet: FleetRun) -> list[str]:
    """The inventory hostnames that serve a measured host."""
    return sorted({host["peer"] for host in fleet.hosts.values() if host.get("peer")})


def plan_services(plan: Any) -> list[list[str]]:
    from ccbench.workloads import peer_services

    return peer_services((w.kind, w.name, w.params) for w in plan.workloads if not w.skip_reason)


def plan_bound_s(plan: Any, settling: dict | None = None) -> float:
    """The most seconds the plan's executions can take on one host, plus the set-up allowance. With
    a settling record (rounds mode, ccbench.fleet.settling) each workload may run up to its round
    limit, its warmups in every round."""
    total = 0.0
    for workload in plan.workloads:
        if workload.skip_reason:
            continue
        combinations = 1
        for values in (workload.variants or {}).values():
            combinations *= max(len(values), 1)
        executions = workload.repetitions + workload.warmup
        if settling and workload.name in settling["workloads"]:
            executions = settling["workloads"][workload.name]["max_rounds"] * (1 + workload.warmup)
        total += executions * combinations * (workload.timeout + workload.cooldown)
    return total + SETUP_ALLOWANCE_S


@contextmanager
def serving(controller, fleet: FleetRun, wheelhouse) -> Iterator[None]:
    """Serve the plan's peer services on the serving hosts for the duration of the block."""
    names = serving_hosts(fleet)
    if not names:
        yield
        return
    from ccbench.planning.plan import load_plan

    plan = load_plan(fleet.plan)
    services = plan_services(plan)
    if not services:
        controller.echo(f"ccbench_peer: no workload of the plan serves anything; {', '.join(names)} stay idle")
        yield
        return
    bound = plan_bound_s(plan, fleet.settling)
    controller.echo(f"serving on {', '.join(names)}: {len(services)} service(s), for at most {bound:.0f} s")
    _play(controller, fleet, wheelhouse, names, "serve", services, bound)
    try:
        yield
    finally:
        _play(controller, fleet, wheelhouse, names, "unserve", services, bound)


def _host_vars(fleet: FleetRun, name: str, services: list[list[str]], bound: float) -> dict[str, Any]:
    components = sorted(
        {c for host in fleet.hosts.values() if host.get("peer") == name for c in host.get("setup_components", [])}
    )
    return {
        "label": name,
        "round": "peer",
        "dest": "",
        "target": "",
        "components": components,
        "ccbench_args": [],
        "services": services,
        "serve_s": int(bound),
    }


def _play(controller, fleet: FleetRun, wheelhouse, names: list[str], action: str, services, bound: float) -> None:
    """One playbook run of ``action`` on the serving hosts; what failed is said, never fatal (the
    measured hosts' executions then fail with the reason)."""
    state = fleet.directory / ".ansible"
    state.mkdir(exist_ok=True)
    extra = {
        "ccbench_fleet": {
            "action": action,
            "run_id": fleet.run_id,
            "hosts": {name: _host_vars(fleet, name, services, bound) for name in names},
            **wheelhouse.play_vars(),
            "plan_content": "",
            "plan_suffix": "",
            # a serving host is never stopped through the flag: unserve follows whatever happens
            "stop_flag": str(state / "peers-are-never-flagged"),
            "poll_s": 1,
            "max_polls": 1,
            "stop_grace_s": 1,
        }
    }
    extra_file = state / f"extra-vars-{action}-peers.json"
    extra_file.write_text(json.dumps(extra))
    argv = [
        inventory_module.ansible_tool("ansible-playbook"),
        *("-i", str(fleet.inventory), "--limit", ",".join(names), "--forks", str(max(1, fleet.forks))),
        *("-e", f"@{extra_file}", str(PLAYBOOK)),
    ]
    with open(state / f"events-{action}-peers.jsonl", "a") as log, open(state / "ansible-stderr.log", "a") as errors:
        done = subprocess.run(
            argv,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env=controller._environment(fleet),
            start_new_session=True,
            cwd=str(state),
        )
        log.write(done.stdout)
    for problem in _problems(done.stdout, action):
        controller.echo(problem)


def _problems(stream: str, action: str) -> list[str]:
    """What went wrong on the serving hosts, one line each, from the playbook's event stream."""
    problems = []
    for line in stream.splitlines():
        event = events.parse_event(line)
        if not event or "host" not in event:
            continue
        result = event.get("result") or {}
        if event.get("event") in ("failed", "unreachable"):
            reason = result.get("msg") or result.get("stderr") or event.get("event")
            problems.append(f"peer {event['host']} ({action}): {one_line(str(reason))}")
        elif event.get("event") == "ok" and event.get("task") == "ccbench:serve":
            try:
                failed = json.loads(result.get("stdout") or "{}").get("failed", [])
            except ValueError:
                failed = []
            for service in failed:
                problems.append(
                    f"peer {event['host']}: {' '.join(service['argv'])} exited ({service['exit']}): "
                    f"{one_line(service.get('log_tail', ''))}"
                )
    return problems
