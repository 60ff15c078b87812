"""The fleet's event reducer and records, on event streams recorded from real fleet runs against the
SSH test hosts (tests/data/fleet/: the ccbench_events callback's JSON lines as the controller kept
them in .ansible/events-run-run.jsonl, and each host's round as that run's fleet.json recorded it).
No SSH, no Ansible needed."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from ccbench.fleet import events
from ccbench.fleet.records import FleetRun, HostRun

DATA = Path(__file__).parent / "data" / "fleet"


def _replay(name: str) -> tuple[dict[str, HostRun], dict, dict[str, str]]:
    expected = json.loads((DATA / f"{name}.expected.json").read_text())
    context = events.Context(
        action="run", command_started=expected.get("command_started", 0.0), first_round=True, now=0.0
    )
    # as the controller sets each host before the playbook starts
    runs = {host: HostRun(round="run", phase="connect") for host in expected["hosts"]}
    failures: dict[str, str] = {}
    for line in (DATA / f"{name}.events.jsonl").read_text().splitlines():
        event = events.parse_event(line)
        assert event is not None, line
        if event.get("host") in runs:
            runs[event["host"]], failure = events.advance(runs[event["host"]], event, context)
            if failure:
                failures[event["host"]] = failure
    return runs, expected, failures


def _record(run: HostRun) -> dict:
    """The round as fleet.json records it, less what gathering adds after the stream (the unpacked
    bundle, its checks, the unpack time)."""
    return {k: v for k, v in json.loads(json.dumps(run.record())).items() if k not in ("bundle", "gathered")}


@pytest.mark.parametrize("name", ["two-hosts", "unreachable"])
def test_a_recorded_stream_replays_to_the_states_the_real_run_recorded(name):
    runs, expected, _ = _replay(name)
    for host, want in expected["hosts"].items():
        assert _record(runs[host]) == want["run"], host


def test_the_recorded_run_reads_as_two_completed_hosts_with_their_phases_timed():
    runs, _, failures = _replay("two-hosts")
    assert failures == {}
    for run in runs.values():
        assert run.outcome == "ok" and run.exit_code == 0 and run.started
        assert (run.executions_done, run.executions_total) == (4, 4)
        assert run.packed["files"] > 0 and run.remote_bundle
        assert {"connect_s", "install_s", "run_s", "fetch_s", "first_execution_s"} <= set(run.timings)


def test_an_unreachable_host_keeps_ssh_s_reason_and_starts_nothing():
    runs, _, _ = _replay("unreachable")
    down = runs["h2"]
    assert down.outcome == "unreachable" and down.phase == "unreachable"
    assert "Connection refused" in down.reason and not down.started
    assert runs["h1"].outcome == "ok"


def test_advance_leaves_the_given_state_unchanged():
    run = HostRun(round="run", phase="connect", phase_started={"connect": 10.0})
    before = copy.deepcopy(run)
    context = events.Context(action="run", command_started=0.0, first_round=True, now=99.0)
    after, _ = events.advance(run, {"event": "host_task_start", "host": "h", "task": "ccbench:install"}, context)
    assert run == before
    assert after.phase == "install" and after.timings == {"connect_s": 89.0}


def _ok(task: str, **state) -> dict:
    return {"event": "ok", "host": "h", "task": task, "time": 5.0, "result": {"stdout": json.dumps(state)}}


@pytest.mark.parametrize(
    ("state", "outcome", "reason"),
    [
        ({"state": "done", "exit_code": 0}, "ok", None),
        ({"state": "done", "exit_code": 130}, "interrupted", "the remote run was interrupted"),
        ({"state": "done", "exit_code": None}, "failed", "ended without an exit status"),
        ({"state": "done", "exit_code": 3, "log_tail": "x\nplan broken\n"}, "failed", "exited 3: plan broken"),
        ({"state": "running", "executions_done": 1}, "pending", None),
    ],
)
def test_the_run_tasks_last_state_decides_the_outcome(state, outcome, reason):
    context = events.Context(action="run", command_started=0.0, first_round=True, now=0.0)
    after, _ = events.advance(HostRun(round="run", phase="run"), _ok("ccbench:run", **state), context)
    assert after.outcome == outcome
    assert (after.reason is None) if reason is None else (reason in after.reason)


def test_a_failed_task_carries_its_stderr_when_ansible_says_only_non_zero_return_code():
    event = {
        "event": "failed",
        "host": "h",
        "task": "ccbench:install pip",
        "result": {"msg": "non-zero return code", "stderr": "pip: no matching distribution\n"},
    }
    context = events.Context(action="run", command_started=0.0, first_round=True, now=0.0)
    after, failure = events.advance(HostRun(round="run"), event, context)
    assert failure == "ccbench:install pip failed: non-zero return code: pip: no matching distribution"
    assert after.outcome == "failed" and after.reason == failure


def test_a_stop_playbook_passes_install_and_run_tasks_without_changing_the_phase():
    context = events.Context(action="stop", command_started=0.0, first_round=True, now=1.0)
    run = HostRun(round="run", phase="connect")
    for task in ("ccbench:install", "ccbench:start", "ccbench:stop"):
        run, _ = events.advance(run, {"event": "host_task_start", "host": "h", "task": task}, context)
    assert run.phase == "stop"


def test_lines_that_are_not_events_are_ignored():
    assert events.parse_event("[WARNING]: something") is None
    assert events.parse_event("[1, 2]") is None
    assert events.parse_event("{not json") is None
    assert events.parse_event('{"event": "ok"}') == {"event": "ok"}


def test_fleet_json_round_trips_for_resume_keeping_only_the_rounds_that_ended_ok(tmp_path):
    runs, _, _ = _replay("unreachable")
    fleet = FleetRun(
        directory=tmp_path,
        plan="quick",
        plan_file=None,
        inventory=tmp_path / "hosts.ini",
        mode="parallel",
        forks=10,
        limit=None,
        accept_new_host_keys=False,
        run_id="fleet-x",
        rounds=["run"],
        hosts={"plain": {"inventory_hostname": "h1"}, "confidential": {"inventory_hostname": "h2"}},
        runs={"plain": {"run": runs["h1"]}, "confidential": {"run": runs["h2"]}},
        baseline="plain",
        started_at="2026-01-01T00:00:00+00:00",
    )
    fleet.save()
    document = json.loads((tmp_path / "fleet.json").read_text())
    assert document["hosts"]["confidential"]["outcome"] == "unreachable"
    resumed = FleetRun.from_json(tmp_path, document, forks=None, accept_new_host_keys=True)
    assert resumed.runs["plain"]["run"].outcome == "ok"
    assert (
        resumed.runs["confidential"]["run"].outcome == "pending" and resumed.runs["confidential"]["run"].reason is None
    )
    assert resumed.hosts["confidential"] == {"inventory_hostname": "h2"} and resumed.accept_new_host_keys
    assert resumed.forks == 10


def test_settle_and_budget_reach_every_hosts_run_and_survive_a_resume(tmp_path):
    """``fleet run --settle 5% --budget 20m``: the arguments each host's ``ccbench run`` gets (a unit
    test of the arguments: the SSH test hosts of tests/test_fleet.py are not needed to see them)."""
    from ccbench.commands.fleet import _run_args
    from ccbench.fleet.engine import Controller
    from ccbench.fleet.start import FleetOptions

    args = _run_args("5%", "20m", "parallel", None)
    assert args == ("--settle", "5%", "--budget", "20m")
    fleet = FleetRun(
        directory=tmp_path,
        plan="quick",
        plan_file=None,
        inventory=tmp_path / "hosts.ini",
        mode="parallel",
        forks=10,
        limit=None,
        accept_new_host_keys=False,
        run_id="fleet-x",
        rounds=["run"],
        hosts={"plain": {"inventory_hostname": "h1"}},
        runs={"plain": {"run": HostRun(round="run")}},
        baseline="plain",
        started_at="2026-01-01T00:00:00+00:00",
        run_args=list(args),
    )
    controller = Controller(FleetOptions(plan="quick", inventory=None, run_args=args), print)
    command = controller._ccbench_args(fleet, fleet.runs["plain"]["run"])
    assert command[:2] == ["run", "quick"] and command[-4:] == ["--settle", "5%", "--budget", "20m"]
    fleet.save()
    resumed = FleetRun.from_json(
        tmp_path, json.loads((tmp_path / "fleet.json").read_text()), forks=None, accept_new_host_keys=False
    )
    assert resumed.run_args == list(args)  # a host not yet started when it was interrupted still settles
    assert _run_args(None, None, "rounds", None) == ()


@pytest.mark.parametrize(
    ("settle", "budget", "mode", "resume", "words"),
    [
        ("200%", None, "parallel", None, "--settle 200%: "),
        (None, "soon", "parallel", None, "--budget soon: expected seconds"),
        ("5%", None, "parallel", "fleet-x", "continues a fleet run as it was started"),
    ],
)
def test_bad_settle_or_budget_for_a_fleet_is_one_line(settle, budget, mode, resume, words):
    from ccbench.basics.errors import CCBenchError
    from ccbench.commands.fleet import _run_args

    with pytest.raises(CCBenchError, match=re.escape(words)) as caught:
        _run_args(settle, budget, mode, resume)
    assert len(str(caught.value).splitlines()) == 1


@pytest.mark.parametrize(
    ("settle", "budget", "max_rounds", "mode", "words"),
    [
        ("200%", None, None, "rounds", "--settle 200%: "),
        ("5%", "soon", None, "rounds", "--budget soon: expected seconds"),
        (None, "20m", None, "rounds", "--budget with --mode rounds bounds the rounds of --settle"),
        ("5%", None, 4, "parallel", "--max-rounds N limits the rounds of --mode rounds --settle"),
    ],
)
def test_bad_settling_across_labels_is_one_line(settle, budget, max_rounds, mode, words):
    """--settle in rounds mode is the controller's (ccbench.fleet.settling), checked before any host."""
    from ccbench.basics.errors import CCBenchError
    from ccbench.commands.fleet import _settle_across

    with pytest.raises(CCBenchError, match=re.escape(words)) as caught:
        _settle_across(settle, budget, max_rounds, mode, None)
    assert len(str(caught.value).splitlines()) == 1
    assert _settle_across("5%", "20m", 6, "rounds", None) == {"target": 0.05, "budget_s": 1200.0, "max_rounds": 6}
    assert _settle_across("5%", None, None, "parallel", None) is None  # each host's own rule, as before
