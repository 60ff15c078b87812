"""ccbench fleet run against real SSH hosts: network namespaces running Debian's OpenSSH server,
driven by real Ansible (ansible-core from the project's venv), with a wheelhouse for hosts that
have no internet. One set of hosts serves the whole module (started once, torn down at the end)."""

import json
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import fleet_testhosts as testhosts
import pytest
from conftest import PATIENCE_S

from ccbench import topology

pytestmark = testhosts.marks()

SECRET = "ccbench-sentinel-s3cr3t"

TINY_PLAN = """
name = "tiny"
description = "systeminfo and a short prime: the fleet tests' plan"
[defaults]
repetitions = 3
warmup = 0
cooldown = 0.0
timeout = 120
[[workloads]]
kind = "systeminfo"
repetitions = 1
[[workloads]]
kind = "prime"
n = 20000
"""

SLOW_PLAN = """
name = "slow"
description = "eight two-second commands: long enough to be interrupted"
[defaults]
repetitions = 8
warmup = 0
cooldown = 0.0
timeout = 60
[[workloads]]
kind = "command"
command = "sleep 2"
"""


COMPONENT_PLAN = """
name = "components"
description = "prime (no tool) and zstd compression (the storage component's zstd)"
[defaults]
repetitions = 1
warmup = 0
cooldown = 0.0
timeout = 120
[[workloads]]
kind = "prime"
n = 20000
[[workloads]]
kind = "compression"
size = "2M"
algorithms = ["zstd"]
"""


def _dpkg_installed(package: str) -> bool:
    done = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
    return done.returncode == 0 and "install ok installed" in done.stdout


#: h2 lacks zstd (its dpkg status and programs hidden in its own mount namespace) where this
#: machine has it: a host whose tool is absent and whose package mirror is unreachable
HIDE_ZSTD = _dpkg_installed("zstd")


def fleet(*args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "ccbench", "fleet", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    base = tmp_path_factory.mktemp("fleet-hosts")
    hidden = {"h2": ["zstd"]} if HIDE_ZSTD else {}
    with testhosts.SSHHosts(base, ["h1", "h2"], without_packages=hidden) as made:
        yield made


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    base = tmp_path_factory.mktemp("fleet-plans")
    (base / "tiny.toml").write_text(TINY_PLAN)
    (base / "slow.toml").write_text(SLOW_PLAN)
    return base


@pytest.fixture
def inventory(hosts, tmp_path):
    def write(known_hosts=None, extra_vars="", **kwargs):
        path = tmp_path / "hosts.ini"
        path.write_text(
            hosts.inventory_text(
                baseline="h1",
                labels={"h1": "plain", "h2": "confidential"},
                known_hosts=known_hosts,
                extra=f"ansible_become_password={SECRET}\n{extra_vars}",
                **kwargs,
            )
        )
        return path

    return write


def _fleet_dir(out: Path) -> Path:
    runs = sorted(out.glob("fleet-*"))
    assert len(runs) == 1, runs
    return runs[0]


def _remote_ccbench_processes(hosts) -> list[str]:
    found = []
    for host in hosts.hosts.values():
        for pid in topology.records._pids_in_netns(host.host.netns):
            try:
                command_line = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "ccbench" in command_line and "sshd" not in command_line:
                found.append(f"{host.name}: {command_line}")
    return found


def test_two_hosts_bring_back_two_bundles_and_one_report(hosts, inventory, plans, tmp_path):
    out = tmp_path / "out"
    store = tmp_path / "history.duckdb"
    done = fleet("run", plans / "tiny.toml", "--inventory", inventory(), "--out", out, "--history", store)
    assert done.returncode == 0, done.stdout + done.stderr
    directory = _fleet_dir(out)
    manifest = json.loads((directory / "fleet.json").read_text())
    assert manifest["status"] == "complete" and manifest["baseline"] == "plain"
    assert manifest["ansible_version"].startswith("2.19.")
    assert set(manifest["hosts"]) == {"plain", "confidential"}
    for label, host in manifest["hosts"].items():
        assert host["outcome"] == "ok", host
        bundle = directory / host["bundles"][0]
        assert bundle.parent == directory / label
        executions = (bundle / "executions.jsonl").read_text().splitlines()
        assert len(executions) == 4  # systeminfo once, prime three times
        assert host["probe"]["os"] and host["probe"]["bundle_status"] == "complete"
        # the remote ran from the venv the fleet installed in that host's own home
        remote = json.loads((bundle / "manifest.json").read_text())
        assert remote["environment"]["python"]["executable"] == "/root/.ccbench-fleet/venv/bin/python"
        assert "first_execution_s" in host["rounds"]["run"]["timings"]
    # each host has its own tree: the install happened in two different homes
    for host in hosts.hosts.values():
        venv = host.home / ".ccbench-fleet" / "venv"
        # the files the controller installed once, moved in: the entry point runs with the host's
        # venv python, pip is there (no ensurepip), and nothing was compiled ahead (a module no run
        # imports has no bytecode)
        launcher = (venv / "bin" / "ccbench").read_text().splitlines()[0]
        assert launcher == "#!/root/.ccbench-fleet/venv/bin/python", launcher
        pip = subprocess.run([venv / "bin" / "python", "-m", "pip", "--version"], capture_output=True, text=True)
        assert pip.returncode == 0 and str(venv) in pip.stdout, pip
        site = next((venv / "lib").glob("python3.*/site-packages"))
        assert (site / "pip" / "_internal" / "cli" / "main.py").is_file()
        assert not list((site / "pip" / "_internal" / "operations").rglob("*.pyc"))
    # over ssh the tar streamed into the host's tar -x (one task), the copy module was not used
    recorded = [json.loads(line) for line in (directory / ".ansible" / "events-run-run.jsonl").read_text().splitlines()]
    streamed = [e for e in recorded if e.get("task") == "ccbench:install stream" and e["event"] == "ok"]
    assert len(streamed) == 2 and all(json.loads(e["result"]["stdout"])["streamed"] for e in streamed), streamed
    copies = [
        e["event"]
        for e in recorded
        if e.get("task") == "ccbench:install copy" and "host" in e and e["event"] != "host_task_start"
    ]
    assert copies == ["skipped", "skipped"], copies
    report = (directory / "report.html").read_text()
    assert "plain" in report and "confidential" in report
    comparison = (directory / "compare.txt").read_text()
    assert "confidential" in comparison and "baseline: plain" in comparison
    # progress: one line per host and phase, executions counted from the event stream (how many
    # intermediate counts show depends on how fast the host ran: any count out of 4 is the behaviour)
    assert re.search(r"^plain: run [0-4]/4 ", done.stderr, re.MULTILINE), done.stderr
    # no secret from the inventory, no private key, anywhere in the output or the fleet directory
    private_key = hosts.client_key.read_text().splitlines()[1]
    for path in directory.rglob("*"):
        if path.is_file():
            text = path.read_bytes()
            assert SECRET.encode() not in text, path
            assert private_key.encode() not in text, path
    assert SECRET not in done.stdout + done.stderr
    # --history: both hosts' bundles went into the store under their labels
    assert "history" in done.stdout + done.stderr and "2 bundle(s) added" in done.stdout + done.stderr
    shown = subprocess.run(
        [sys.executable, "-m", "ccbench", "history", "show", "--store", str(store), "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert {json.loads(line)["label"] for line in shown.stdout.splitlines()} == {"plain", "confidential"}, shown


def test_host_key_checking_is_on_unless_new_keys_are_accepted(hosts, inventory, plans, tmp_path):
    known_hosts = tmp_path / "empty_known_hosts"
    known_hosts.write_text("")
    path = inventory(known_hosts=known_hosts)
    refused = fleet(
        "run", plans / "tiny.toml", "--inventory", path, "--out", tmp_path / "refused", "--limit", "h1", "--no-report"
    )
    assert refused.returncode == 1, refused.stdout + refused.stderr
    host = json.loads((_fleet_dir(tmp_path / "refused") / "fleet.json").read_text())["hosts"]["plain"]
    assert host["outcome"] == "unreachable" and "host key" in host["reason"].lower(), host
    accepted = fleet(
        "run",
        plans / "tiny.toml",
        "--inventory",
        path,
        "--out",
        tmp_path / "accepted",
        "--limit",
        "h1",
        "--no-report",
        "--accept-new-host-keys",
    )
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    # the new key was remembered (OpenSSH may hash the address; the key itself is there)
    host_key = Path(str(hosts.hosts["h1"].host_key) + ".pub").read_text().split()[1]
    assert host_key in known_hosts.read_text()


def test_unreachable_host_is_recorded_and_the_other_completes(hosts, inventory, plans, tmp_path):
    hosts.stop_sshd("h2")
    try:
        done = fleet(
            "run", plans / "tiny.toml", "--inventory", inventory(), "--out", tmp_path / "out", "--mode", "serial"
        )
    finally:
        hosts.start_sshd("h2")
    assert done.returncode == 1, done.stdout + done.stderr
    manifest = json.loads((_fleet_dir(tmp_path / "out") / "fleet.json").read_text())
    assert manifest["hosts"]["plain"]["outcome"] == "ok"
    assert manifest["hosts"]["confidential"]["outcome"] == "unreachable"
    assert manifest["hosts"]["confidential"]["reason"]
    assert "confidential: unreachable" in done.stdout + done.stderr


def test_interrupted_fleet_stops_remote_runs_and_resumes(hosts, inventory, plans, tmp_path):
    out = tmp_path / "out"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ccbench",
            "fleet",
            "run",
            str(plans / "slow.toml"),
            "--inventory",
            str(inventory()),
            "--out",
            str(out),
            "--no-report",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    seen, lines = set(), []
    deadline = time.monotonic() + PATIENCE_S
    for line in process.stdout:
        lines.append(line)
        for label in ("plain", "confidential"):
            # at least one execution done (a host's first progress line may say run 0/8)
            if re.match(rf"{label}: run [1-8]/8 ", line):
                seen.add(label)
        # both remote runs have measured something
        if seen == {"plain", "confidential"} or time.monotonic() > deadline:
            break
    assert seen == {"plain", "confidential"}, "".join(lines)
    process.send_signal(signal.SIGINT)
    rest, _ = process.communicate(timeout=300)
    output = "".join(lines) + rest
    assert process.returncode == 130, output
    directory = _fleet_dir(out)
    assert f"ccbench fleet run --resume {directory}" in output
    assert _remote_ccbench_processes(hosts) == []
    manifest = json.loads((directory / "fleet.json").read_text())
    assert manifest["status"] == "interrupted"
    for host in manifest["hosts"].values():
        assert host["outcome"] == "interrupted", (host, output)
        bundle = directory / host["bundles"][0]
        partial = [json.loads(e) for e in (bundle / "executions.jsonl").read_text().splitlines()]
        # what was measured before the stop came back; the run did not finish
        assert 1 <= len([e for e in partial if e["status"] == "ok"]) < 8, (partial, output)

    resumed = fleet("run", "--resume", directory, "--no-report")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    manifest = json.loads((directory / "fleet.json").read_text())
    assert manifest["status"] == "complete"
    for host in manifest["hosts"].values():
        assert host["outcome"] == "ok"
        bundle = directory / host["bundles"][0]
        executions = [json.loads(e) for e in (bundle / "executions.jsonl").read_text().splitlines()]
        done_keys = {e["key"] for e in executions if e["status"] == "ok"}
        assert len(done_keys) == 8
    assert _remote_ccbench_processes(hosts) == []


def test_components_are_set_up_by_the_shipped_scripts_or_skipped_with_the_reason(hosts, inventory, tmp_path):
    """The plan's compression needs the storage component; browser is asked for in the inventory.
    h1 has everything (the set-up scripts run and make no apt call); h2 lacks zstd and reaches no
    package mirror: the reason is recorded per component, its run skips the compression workload
    with the reason and runs the rest."""
    if not HIDE_ZSTD:
        pytest.skip("zstd is not installed here (dpkg): there is nothing to hide on h2")
    if not (_dpkg_installed("chromium") and _dpkg_installed("fonts-dejavu-core")):
        pytest.skip("the browser component is not installed here")
    plan = tmp_path / "components.toml"
    plan.write_text(COMPONENT_PLAN)
    out = tmp_path / "out"
    done = fleet(
        "run", plan, "--inventory", inventory(extra_vars="ccbench_components=browser"), "--out", out, "--no-report"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = json.loads((_fleet_dir(out) / "fleet.json").read_text())
    plain, confidential = manifest["hosts"]["plain"], manifest["hosts"]["confidential"]
    assert plain["setup_components"] == confidential["setup_components"] == ["browser", "storage"]
    # present everywhere it is needed: the scripts ran and called no apt
    for name in ("browser", "storage"):
        assert plain["component_setup"][name]["status"] == "ok", plain["component_setup"]
        assert plain["component_setup"][name]["apt_called"] is False
    assert confidential["component_setup"]["browser"]["status"] == "ok"
    storage = confidential["component_setup"]["storage"]
    assert storage["status"] == "unavailable" and storage["apt_called"] is False, storage
    assert "zstd" in storage["reason"] and "no package mirror answers" in storage["reason"], storage
    # the host's run went on: prime measured, compression skipped with the workload's own reason
    outcomes = {}
    for label in ("plain", "confidential"):
        assert manifest["hosts"][label]["outcome"] == "ok"
        bundle = _fleet_dir(out) / manifest["hosts"][label]["bundles"][0]
        remote = json.loads((bundle / "manifest.json").read_text())
        outcomes[label] = {name: o for name, o in remote["outcomes"].items()}
    by_kind = {label: {name.split("-")[0]: o for name, o in found.items()} for label, found in outcomes.items()}
    assert by_kind["plain"]["compression"]["status"] == "ok", by_kind["plain"]
    assert by_kind["confidential"]["compression"]["status"] == "skipped", by_kind["confidential"]
    assert "zstd" in by_kind["confidential"]["compression"]["reason"]
    assert by_kind["confidential"]["prime"]["status"] == "ok"
    # the gathered bundles were checked against what the hosts packed and their attestation.json
    for label in ("plain", "confidential"):
        gathered = manifest["hosts"][label]["rounds"]["run"]["gathered"]
        assert gathered["files"] > 3 and gathered["attestation"] == "match", gathered
    assert manifest["gathering"]["transfer_method"]
    # again, same wheelhouse and components: h1, where every one was ok, is not set up again (its
    # earlier results are reported, marked); h2, where storage was unavailable, is set up again
    again = tmp_path / "again"
    done = fleet(
        "run", plan, "--inventory", inventory(extra_vars="ccbench_components=browser"), "--out", again, "--no-report"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    second = json.loads((_fleet_dir(again) / "fleet.json").read_text())["hosts"]
    assert {n: r.get("earlier") for n, r in second["plain"]["component_setup"].items()} == {
        "browser": True,
        "storage": True,
    }, second["plain"]["component_setup"]
    assert second["plain"]["component_setup"]["storage"]["status"] == "ok"
    assert "earlier" not in second["confidential"]["component_setup"]["storage"]
    assert second["confidential"]["component_setup"]["storage"]["status"] == "unavailable"


def test_rounds_mode_runs_each_repetition_on_every_host_before_the_next(hosts, inventory, plans, tmp_path):
    plan = tmp_path / "two.toml"
    plan.write_text(TINY_PLAN.replace("repetitions = 3", "repetitions = 2"))
    done = fleet("run", plan, "--inventory", inventory(), "--out", tmp_path / "out", "--mode", "rounds")
    assert done.returncode == 0, done.stdout + done.stderr
    directory = _fleet_dir(tmp_path / "out")
    manifest = json.loads((directory / "fleet.json").read_text())
    assert manifest["rounds"] == ["round-1", "round-2"]
    ends, starts = {}, {}
    for label, host in manifest["hosts"].items():
        assert [Path(b).parts[:2] for b in host["bundles"]] == [(label, "round-1"), (label, "round-2")]
        for round_name in ("round-1", "round-2"):
            bundle = directory / host["rounds"][round_name]["bundle"]
            executions = [json.loads(e) for e in (bundle / "executions.jsonl").read_text().splitlines()]
            starts.setdefault(round_name, []).append(min(e["started_at"] for e in executions))
            ends.setdefault(round_name, []).append(max(e["started_at"] for e in executions))
    # every host's round 1 began before any host's round 2
    assert max(starts["round-1"]) < min(starts["round-2"])
    assert (directory / "report.html").exists()


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize(
    "case,text,expected",
    [
        ("syntax", "[hosts\nh1 ansible_host=10.204.0.9\n", "hosts.ini"),
        ("no address", "[hosts]\nccbench-no-such-host.invalid\n", "ccbench-no-such-host.invalid"),
        (
            "missing key",
            "[hosts]\nh1 ansible_host=10.204.0.9 ansible_ssh_private_key_file=/nonexistent/key\n",
            "/nonexistent/key",
        ),
        (
            "two baselines",
            "[hosts]\nh1 ansible_host=10.204.0.9 ccbench_baseline=true\nh2 ansible_host=10.204.0.8 ccbench_baseline=true\n",
            "h1 and h2",
        ),
        (
            # hosts sharing a label are replicas (tests/test_replicas.py); a label naming a path is not
            "label with a slash",
            "[hosts]\nh1 ansible_host=10.204.0.9 ccbench_label=a/b\nh2 ansible_host=10.204.0.8\n",
            "h1",
        ),
    ],
)
def test_bad_inventory_is_exit_2_before_anything_starts(tmp_path, plans, case, text, expected):
    path = _write(tmp_path, "hosts.ini", text)
    done = fleet("run", plans / "tiny.toml", "--inventory", path, "--out", tmp_path / "out", timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    message = done.stderr.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in message, message
    assert str(path) in message and expected in message, message
    assert not (tmp_path / "out").exists()


def test_bad_plan_and_missing_inventory_are_exit_2(tmp_path):
    inventory = _write(tmp_path, "hosts.ini", "[hosts]\nh1 ansible_host=10.204.0.9\n")
    done = fleet("run", "no-such-plan", "--inventory", inventory, "--out", tmp_path / "out", timeout=120)
    assert done.returncode == 2 and "no-such-plan" in done.stderr and "Traceback" not in done.stderr
    done = fleet("run", "quick", timeout=120)
    assert done.returncode == 2 and "--inventory" in done.stderr
    done = fleet("run", "--resume", tmp_path, timeout=120)
    assert done.returncode == 2 and "fleet.json" in done.stderr


def test_a_yaml_inventory_with_group_variables_is_read_like_ini(tmp_path):
    from ccbench.fleet.inventory import read_inventory

    path = _write(
        tmp_path,
        "hosts.yml",
        """
        all:
          children:
            study:
              hosts:
                plain: {ansible_host: 10.204.0.9, ccbench_baseline: true}
                snp: {ansible_host: 10.204.0.8, ccbench_label: sev-snp, ccbench_components: [storage]}
              vars:
                ansible_user: azureuser
                ansible_password: not-kept
        """,
    )
    inventory = read_inventory(path)
    assert [(h.name, h.label, h.user) for h in inventory.hosts] == [
        ("plain", "plain", "azureuser"),
        ("snp", "sev-snp", "azureuser"),
    ]
    assert inventory.baseline.label == "plain" and inventory.by_name("snp").components == ["storage"]
    assert "not-kept" not in str([h.public() for h in inventory.hosts])
    assert [h.name for h in read_inventory(path, limit="snp").hosts] == ["snp"]


def test_an_inventory_directory_with_a_local_host_and_old_spellings_runs_end_to_end(hosts, plans, tmp_path):
    """The shape projects ship: a hosts file beside group_vars/ (holding a cluster token), an SSH host
    written with the old ansible_ssh_* spellings and the controller itself as a local host. The first
    host listed is the baseline; the token reaches no file of the run and no output."""
    h1 = hosts.hosts["h1"]
    directory = tmp_path / "inventory"
    (directory / "group_vars").mkdir(parents=True)
    (directory / "group_vars" / "all.yml").write_text(
        f"k3s_token: {SECRET}\nansible_python_interpreter: /usr/bin/python3\n"
    )
    (directory / "hosts").write_text(
        textwrap.dedent(
            f"""
            [cluster]
            h1 ansible_ssh_host={h1.address} ansible_ssh_user=root ansible_ssh_port=22 ccbench_label=plain
            [cluster:vars]
            ansible_ssh_private_key_file={hosts.client_key}
            ansible_ssh_common_args='-o UserKnownHostsFile={hosts.known_hosts} -o GlobalKnownHostsFile=/dev/null'

            [deployment]
            controller ansible_connection=local ccbench_label=local ccbench_workdir={tmp_path / "controller-home"}
            """
        )
    )
    out = tmp_path / "out"
    done = fleet("run", plans / "tiny.toml", "--inventory", directory, "--out", out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "baseline plain" in done.stdout + done.stderr
    fleet_dir = _fleet_dir(out)
    manifest = json.loads((fleet_dir / "fleet.json").read_text())
    assert manifest["baseline"] == "plain"
    assert {label: host["outcome"] for label, host in manifest["hosts"].items()} == {"plain": "ok", "local": "ok"}
    assert manifest["hosts"]["plain"]["user"] == "root" and manifest["hosts"]["local"]["connection"] == "local"
    assert (tmp_path / "controller-home" / "venv" / "bin" / "ccbench").exists()
    assert "baseline: plain" in (fleet_dir / "compare.txt").read_text()
    for path in fleet_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in done.stdout + done.stderr


def test_hosts_sharing_a_label_run_as_replicas_each_in_its_own_directory(hosts, plans, tmp_path):
    """Two hosts with one ccbench_label: both run, each keeps its record and bundle directory
    (<label>/<host>), and with one label only there is no second configuration to compare."""
    path = tmp_path / "hosts.ini"
    path.write_text(hosts.inventory_text(baseline="h1", labels={"h1": "plain", "h2": "plain"}))
    out = tmp_path / "out"
    done = fleet("run", plans / "tiny.toml", "--inventory", path, "--out", out)
    assert done.returncode == 0, done.stdout + done.stderr
    directory = _fleet_dir(out)
    manifest = json.loads((directory / "fleet.json").read_text())
    assert set(manifest["hosts"]) == {"plain/h1", "plain/h2"} and manifest["baseline"] == "plain"
    for key, host in manifest["hosts"].items():
        assert host["outcome"] == "ok" and host["label"] == "plain", host
        assert (directory / host["bundles"][0]).parent == directory / key
    assert "fewer than two labels brought back a bundle" in manifest["analysis_error"]
    # one configuration: the summary names no baseline (nothing is compared against it)
    said = done.stdout + done.stderr
    assert "plain/h1: ok" in said and "(baseline)" not in said, said
