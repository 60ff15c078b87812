"""The network workload in a fleet: a host's ccbench_peer names the host that serves it; the fleet
starts the plan's peer services there for the run (bounded in time) and stops them. The remote
agent's serve/unserve on this machine, the inventory's checks, and one fleet run between two SSH
test hosts (network namespaces running OpenSSH, driven by real Ansible; slow: each host installs
ccbench from the wheelhouse)."""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
from pathlib import Path

import fleet_testhosts as testhosts
import psutil
import pytest
from conftest import PATIENCE_S, wait_until

from ccbench import topology
from ccbench.basics.procs import same_process
from ccbench.fleet.inventory import InventoryError, read_inventory
from ccbench.fleet.peers import plan_bound_s, plan_services
from ccbench.planning.plan import load_plan

NO_ANSIBLE = importlib.util.find_spec("ansible") is None
needs_ansible = pytest.mark.skipif(
    NO_ANSIBLE, reason="ansible-core is not installed (bash scripts/setup.sh --with fleet)"
)

PEER_PLAN = """
name = "peer"
description = "iperf3 TCP and UDP and sockperf latency against the serving host"
[defaults]
repetitions = 2
warmup = 0
cooldown = 0.0
timeout = 60
[[workloads]]
kind = "network"
hosts = "peer"
tests = ["tcp", "udp", "latency"]
duration_s = 1
interval_s = 0.5
udp_rate = "10M"
latency_duration_s = 1
"""


def remote(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "ccbench.fleet.remote", *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_remote_agent_serves_bounded_in_time_and_stops_what_it_served(tmp_path):
    run_dir = tmp_path / "peer"
    served = remote("serve", "--run-dir", str(run_dir), "--seconds", "60", "--services", '[["sleep", "300"]]')
    assert served["served"] == [["sleep", "300"]] and served["failed"] == []
    (entry,) = json.loads((run_dir / "services.json").read_text())["entries"]
    process = psutil.Process(entry["pid"])  # recorded with its start time
    assert abs(process.create_time() - entry["create_time"]) < 1
    assert remote("unserve", "--run-dir", str(run_dir))["stopped"] == [["sleep", "300"]]
    process.wait(10)
    assert not (run_dir / "services.json").exists()
    # the bound: a service nobody stops ends by itself
    remote("serve", "--run-dir", str(run_dir), "--seconds", "1", "--services", '[["sleep", "300"]]')
    (entry,) = json.loads((run_dir / "services.json").read_text())["entries"]
    wait_until(lambda: same_process(entry["pid"], entry["create_time"]) is None, 30, "the end at the bound")
    # a service that cannot start is reported with the end of its output
    failed = remote("serve", "--run-dir", str(run_dir), "--services", '[["sleep", "--no-such-flag"]]')["failed"]
    assert failed and failed[0]["argv"] == ["sleep", "--no-such-flag"] and "unrecognized" in failed[0]["log_tail"]


def test_what_a_serving_host_runs_comes_from_the_plan(tmp_path):
    (tmp_path / "plan.toml").write_text(PEER_PLAN)
    plan = load_plan(str(tmp_path / "plan.toml"))
    assert plan_services(plan) == [
        ["iperf3", "-s", "-p", "5201", "-i", "0.5"],
        ["sockperf", "server", "-i", "0.0.0.0", "-p", "11111"],
    ]
    assert plan_bound_s(plan) == 2 * 60 + 1800
    assert plan_services(load_plan("quick")) == []


INVENTORY = """[ccbench]
a ansible_host=10.0.0.1 {a}
b ansible_host=10.0.0.2 {b}
c ansible_host=10.0.0.3
"""


@needs_ansible
@pytest.mark.parametrize(
    "a, b, message",
    [
        ("ccbench_peer=a", "", "names the host itself"),
        ("ccbench_peer=zz", "", "not a host of the inventory"),
        ("ccbench_peer=b", "ccbench_peer=c", "either serves or is served"),
    ],
)
def test_a_bad_peer_is_an_inventory_error(tmp_path, a, b, message):
    (tmp_path / "hosts.ini").write_text(INVENTORY.format(a=a, b=b))
    with pytest.raises(InventoryError, match=message):
        read_inventory(tmp_path / "hosts.ini")


@needs_ansible
def test_a_peer_is_read_and_limit_must_keep_it(tmp_path):
    (tmp_path / "hosts.ini").write_text(INVENTORY.format(a="ccbench_peer=b", b=""))
    hosts = read_inventory(tmp_path / "hosts.ini").hosts
    assert [(h.name, h.peer) for h in hosts] == [("a", "b"), ("b", None), ("c", None)]
    assert hosts[0].public()["peer"] == "b"
    with pytest.raises(InventoryError, match="include it in --limit"):
        read_inventory(tmp_path / "hosts.ini", limit="a")


def _in_namespace(host, name: str) -> list[str]:
    found = []
    for pid in topology.records._pids_in_netns(host.host.netns):
        try:
            if psutil.Process(pid).name() == name:
                found.append(str(pid))
        except psutil.Error:
            pass
    return found


@pytest.fixture(scope="module")
def peer_hosts(tmp_path_factory):
    """A measured host and its serving host, shared by the fleet runs below (the second run finds
    ccbench installed)."""
    if NO_ANSIBLE or testhosts.unavailable() is not None:
        pytest.skip(f"no fleet test hosts here: {'ansible-core missing' if NO_ANSIBLE else testhosts.unavailable()}")
    with testhosts.SSHHosts(tmp_path_factory.mktemp("peer-hosts"), ["client", "server"], name="netfleet") as hosts:
        yield hosts


def _peer_inventory(hosts, path: Path) -> Path:
    text = hosts.inventory_text(labels={"client": "measured"})
    client = f"client ansible_host={hosts.hosts['client'].address}"
    path.write_text(text.replace(client, f"{client} ccbench_peer=server"))
    return path


def _fleet_run(plan: Path, inventory: Path, out: Path) -> list[str]:
    argv = [sys.executable, "-m", "ccbench", "fleet", "run", str(plan), "--inventory", str(inventory)]
    return argv + ["--out", str(out), "--no-report"]


def _services_left(server) -> list[str]:
    return _in_namespace(server, "iperf3") + _in_namespace(server, "sockperf")


@pytest.mark.root
@pytest.mark.slow
def test_a_fleet_host_measures_against_its_peer_which_serves_only_for_the_run(peer_hosts, tmp_path):
    hosts = peer_hosts
    (tmp_path / "peer.toml").write_text(PEER_PLAN)
    argv = _fleet_run(tmp_path / "peer.toml", _peer_inventory(hosts, tmp_path / "hosts.ini"), tmp_path / "out")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=PATIENCE_S * 3)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "serving on server: 2 service(s)" in done.stdout + done.stderr
    (directory,) = (tmp_path / "out").glob("fleet-*")
    manifest = json.loads((directory / "fleet.json").read_text())
    assert set(manifest["hosts"]) == {"measured"}  # the serving host runs no plan
    host = manifest["hosts"]["measured"]
    assert host["outcome"] == "ok", host
    bundle = directory / host["bundles"][0]
    samples = [json.loads(line) for line in (bundle / "samples.jsonl").read_text().splitlines()]
    results = [s for s in samples if s["metric"] == "throughput"]
    assert len(results) == 4  # tcp and udp, two repetitions
    assert {s["metadata"]["server"] for s in results} == {hosts.hosts["server"].address}
    assert {s["metadata"]["hosts"] for s in results} == {"peer"}
    assert [s for s in samples if s["metric"] == "interval_throughput"]  # the server's intervals came back
    assert [s for s in samples if s["metric"] == "latency_p50"]
    # stopped after the run: nothing of the services left on the serving host, nor their record
    server = hosts.hosts["server"]
    wait_until(lambda: not _services_left(server), 30, "the services' end")
    assert not list(Path(server.home).glob(".ccbench-fleet/runs/*/peer/services.json"))
    assert list(Path(server.home).glob(".ccbench-fleet/runs/*/peer/service-0.log"))


@pytest.mark.root
@pytest.mark.slow
def test_an_interrupted_fleet_stops_its_peers_services(peer_hosts, tmp_path):
    hosts = peer_hosts
    long_plan = PEER_PLAN.replace("duration_s = 1\n", "duration_s = 60\n").replace("timeout = 60", "timeout = 300")
    (tmp_path / "peer.toml").write_text(long_plan)
    argv = _fleet_run(tmp_path / "peer.toml", _peer_inventory(hosts, tmp_path / "hosts.ini"), tmp_path / "out")
    controller = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    server, client = hosts.hosts["server"], hosts.hosts["client"]

    def measuring():
        assert controller.poll() is None, controller.communicate()[0]
        return _services_left(server) and _in_namespace(client, "iperf3")

    wait_until(measuring, PATIENCE_S * 2, "the measured host's iperf3 against its peer")
    controller.send_signal(signal.SIGINT)
    output = controller.communicate(timeout=PATIENCE_S)[0]
    assert controller.returncode == 130, output
    wait_until(lambda: not _services_left(server), 30, "the services' end")
    assert not list(Path(server.home).glob(".ccbench-fleet/runs/*/peer/services.json"))


class _Controller:
    """The controller as peers.serving sees it: where it says things (the playbook runs are the
    boundary replaced here: the fleet run above drives real ones)."""

    def __init__(self):
        self.said = []

    def echo(self, text):
        self.said.append(text)


def _fleet(tmp_path, plan_text: str, peer: str | None = "server"):
    from ccbench.fleet.records import FleetRun

    (tmp_path / "plan.toml").write_text(plan_text)
    return FleetRun(
        directory=tmp_path, plan=str(tmp_path / "plan.toml"), plan_file=str(tmp_path / "plan.toml"),
        inventory=tmp_path / "hosts.ini", mode="parallel", forks=2, limit=None, accept_new_host_keys=False,
        run_id="fleet-x", rounds=["run"], hosts={"measured": {"peer": peer, "setup_components": ["network"]}},
        runs={}, baseline="measured", started_at="now",
    )  # fmt: skip


@pytest.mark.parametrize("ending", [None, KeyboardInterrupt, RuntimeError])
def test_serving_hosts_stop_serving_however_the_rounds_end(tmp_path, monkeypatch, ending):
    from ccbench.fleet import peers

    plays = []
    monkeypatch.setattr(peers, "_play", lambda c, f, w, names, action, services, bound: plays.append((action, names)))
    fleet = _fleet(tmp_path, PEER_PLAN)
    try:
        with peers.serving(_Controller(), fleet, wheelhouse=None):
            assert plays == [("serve", ["server"])]
            if ending:
                raise ending()
    except (KeyboardInterrupt, RuntimeError):
        pass
    assert plays == [("serve", ["server"]), ("unserve", ["server"])]
    host = peers._host_vars(fleet, "server", [["iperf3", "-s"]], 100.0)
    assert host["components"] == ["network"] and host["serve_s"] == 100 and host["round"] == "peer"


def test_no_serving_host_or_nothing_to_serve_plays_nothing(tmp_path, monkeypatch):
    from ccbench.fleet import peers

    plays = []
    monkeypatch.setattr(peers, "_play", lambda *args: plays.append(args))
    with peers.serving(_Controller(), _fleet(tmp_path, PEER_PLAN, peer=None), wheelhouse=None):
        pass
    controller = _Controller()
    quick = PEER_PLAN.replace('tests = ["tcp", "udp", "latency"]', 'tests = ["latency"]\nlatency_tool = "ping"')
    with peers.serving(controller, _fleet(tmp_path, quick), wheelhouse=None):
        pass
    assert plays == [] and "stay idle" in controller.said[0]


def test_the_event_stream_problems_of_a_serve_are_said_in_one_line_each():
    from ccbench.fleet.peers import _problems

    stream = "\n".join(
        json.dumps(event)
        for event in (
            {"event": "unreachable", "host": "s1", "task": "ccbench:connect", "result": {"msg": "ssh: timed out"}},
            {
                "event": "ok",
                "host": "s2",
                "task": "ccbench:serve",
                "result": {
                    "stdout": json.dumps({"failed": [{"argv": ["iperf3", "-s"], "exit": 1, "log_tail": "busy\n"}]})
                },
            },
        )
    )
    assert _problems(stream, "serve") == ["peer s1 (serve): ssh: timed out", "peer s2: iperf3 -s exited (1): busy"]
