"""The fleet's own overhead, on emulated SSH hosts (network namespaces running OpenSSH, root needed).

Measures, in one run:
  * time from `ccbench fleet run` to the first remote execution on a cold host (nothing installed:
    the wheelhouse is copied and installed first; the install time is reported) and on a warm host
    (installed by an earlier run); target for warm: at most 10 s per host;
  * the same with two warm hosts at once (parallel mode);
  * gathering speed of a 100 MB bundle over the veth link: the agent's listing, then one Ansible
    task streaming the bundle as tar through the play's ssh connection into the controller's
    checked unpack, each time beside a plain `ssh cat` of the same bytes (the floor) and their
    ratio; target at least 100 MB/s.

Usage: python benchmarks/bench_fleet.py [--size-mb 100] [--gather-runs 5] [--gather-only] [--cold-only N] [--out DIR]
The wheelhouse is built (or taken from the cache) before the timed runs, as a user's second
`fleet run` would find it; the first-ever build (a few MB from PyPI) is reported separately.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ccbench.fleet import wheelhouse
from ccbench.fleet.ansible_env import PLAYBOOK, ansible_environment
from ccbench.fleet.inventory import ansible_tool

# the emulated SSH hosts are test support (tests/fleet_testhosts.py), not part of the package: this
# benchmark runs from a checkout and takes them from its tests directory
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import fleet_testhosts as testhosts  # noqa: E402

PLAN = """
name = "bench-fleet"
description = "one short command: the first execution is what is timed"
[defaults]
repetitions = 1
warmup = 0
cooldown = 0.0
timeout = 60
[[workloads]]
kind = "command"
command = "true"
"""


def fleet_run(plan: Path, inventory: Path, out: Path, *extra: str) -> tuple[dict, float]:
    started = time.time()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ccbench",
            "fleet",
            "run",
            str(plan),
            "--inventory",
            str(inventory),
            "--out",
            str(out),
            "--no-report",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    wall = time.time() - started
    if done.returncode != 0:
        raise SystemExit(f"fleet run failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    directory = sorted(out.glob("fleet-*"), key=lambda p: p.stat().st_mtime)[-1]
    return json.loads((directory / "fleet.json").read_text()), wall


def timings(manifest: dict) -> dict[str, dict]:
    return {label: host["rounds"]["run"]["timings"] for label, host in manifest["hosts"].items()}


def gather(hosts: testhosts.SSHHosts, inventory: Path, key: str, size_mb: int, work: Path) -> dict:
    """Gather a bundle of size_mb through the shipped playbook's stop action (nothing running: it
    lists the bundle and the fetch streams it into the controller's checked unpack); beside it, a
    plain `ssh cat` of the same payload (a fresh SSH connection, the cipher list the fleet uses) as
    the floor.

    gathering = the agent's listing (pack_s, inside the run's last status poll) + the fetch, which
    streams, unpacks and checks (both from Ansible's own event stream); unpack_s is what is left
    on the controller after the playbook (none: the fetch did it)."""
    host = hosts.hosts["h1"]
    run_id = f"bench-gather-{time.time_ns()}"
    bundle = _remote_bundle(host, run_id, size_mb)
    destination = work / "gathered" / run_id / "received.json"
    target = work / "gathered" / run_id / "h1"
    env, done = _stop_playbook(inventory, key, run_id, destination, target, work)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    starts = {e["task"]: e["time"] for e in events if e["event"] == "host_task_start"}
    ends = {e["task"]: e for e in events if e["event"] == "ok"}
    if "ccbench:fetch" not in ends or not destination.exists():
        raise SystemExit(f"gathering failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    packed = json.loads(ends["ccbench:stop"]["result"]["stdout"])
    fetched = json.loads(ends["ccbench:fetch"]["result"]["stdout"])
    checks = fetched["checks"]
    size = checks["bytes"]
    pack_s = ends["ccbench:stop"]["time"] - starts["ccbench:stop"]
    fetch_s = ends["ccbench:fetch"]["time"] - starts["ccbench:fetch"]
    unpack_s = 0.0
    if (Path(fetched["bundle"]) / "raw" / "payload.bin").stat().st_size != size_mb << 20:
        raise SystemExit("the gathered payload differs in size from the host's")
    leftovers = [p for p in (host.home / ".ccbench-fleet" / "runs" / run_id / "run").iterdir() if p.name != "out"]
    if leftovers:
        raise SystemExit(f"gathering left files on the host: {leftovers}")
    ssh_s = _ssh_cat_seconds(hosts, host, env, bundle / "raw" / "payload.bin")
    shutil.rmtree(host.home / ".ccbench-fleet" / "runs" / run_id)
    shutil.rmtree(work / "gathered" / run_id)
    mb = size / 1e6
    # what gathering adds to a run: the listing inside the run's last status poll (timed by the
    # agent), from the end of that task to the end of the fetch (the tasks between included)
    gather_s = packed["pack_s"] + ends["ccbench:fetch"]["time"] - ends["ccbench:stop"]["time"] + unpack_s
    # the interrupted path pays a task of its own for the stop that lists
    stop_path_s = ends["ccbench:fetch"]["time"] - starts["ccbench:stop"] + unpack_s
    return {
        "bytes": size,
        "files_checked": checks["files"],
        "pack_task_s": round(pack_s, 3),
        "pack_s": packed["pack_s"],
        "fetch_s": round(fetch_s, 3),
        "transfer_s": fetched["seconds"],
        "unpack_s": round(unpack_s, 3),
        "gather_s": round(gather_s, 3),
        "gather_MB_per_s": round(mb / gather_s, 1),
        "stop_path_MB_per_s": round(mb / stop_path_s, 1),
        "fetch_MB_per_s": round(mb / fetch_s, 1),
        "ssh_cat_MB_per_s": round(mb / ssh_s, 1),
        "gather_vs_ssh_cat": round(ssh_s / gather_s, 2),
        "way": fetched.get("way"),
    }


def _remote_bundle(host, run_id: str, size_mb: int) -> Path:
    """A finished-looking bundle of size_mb random bytes where a remote run of ``run_id`` leaves one."""
    bundle = host.home / ".ccbench-fleet" / "runs" / run_id / "run" / "out" / "bench-bundle"
    (bundle / "raw").mkdir(parents=True)
    (bundle / "manifest.json").write_text(json.dumps({"format_version": 1, "status": "complete"}))
    with open(bundle / "raw" / "payload.bin", "wb") as handle:
        for _ in range(size_mb):
            handle.write(os.urandom(1 << 20))
    return bundle


def _stop_playbook(
    inventory: Path, key: str, run_id: str, destination: Path, target: Path, work: Path
) -> tuple[dict[str, str], subprocess.CompletedProcess]:
    """The shipped playbook's stop action for h1 in the environment `ccbench fleet run` gives Ansible
    (ANSIBLE_SSH_TRANSFER_METHOD etc. from ours); the environment and the finished playbook."""
    extra = {
        "ccbench_fleet": {
            "action": "stop",
            "run_id": run_id,
            "python": wheelhouse.python_tag(),
            "wheelhouse_tar": "",
            "wheelhouse_key": key,
            "controller_python": sys.executable,
            "plan_content": "",
            "plan_suffix": "",
            "poll_s": 1,
            "max_polls": 1,
            "stop_grace_s": 5,
            "stop_flag": str(work / "no-stop-flag"),
            "hosts": {
                "h1": {
                    "label": "h1",
                    "round": "run",
                    "dest": str(destination),
                    "target": str(target),
                    "components": [],
                    "ccbench_args": [],
                }
            },
        }
    }
    extra_file = work / "gather-vars.json"
    extra_file.write_text(json.dumps(extra))
    control_dir = Path(tempfile.mkdtemp(prefix="ccbench-ssh-"))
    env = ansible_environment(mode="parallel", accept_new_host_keys=False, control_dir=control_dir)
    try:
        done = subprocess.run(
            [
                ansible_tool("ansible-playbook"),
                "-i",
                str(inventory),
                "--limit",
                "h1",
                "-e",
                f"@{extra_file}",
                str(PLAYBOOK),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
    finally:
        for socket_path in control_dir.iterdir():
            subprocess.run(
                ["ssh", "-o", f"ControlPath={socket_path}", "-O", "exit", "x"], capture_output=True, timeout=30
            )
        shutil.rmtree(control_dir, ignore_errors=True)
    return env, done


def _ssh_cat_seconds(hosts: testhosts.SSHHosts, host, env: dict[str, str], payload: Path) -> float:
    """The same bytes through one plain ssh stream: the floor."""
    started = time.perf_counter()
    subprocess.run(
        [
            "ssh",
            *env["ANSIBLE_SSH_ARGS"].split(),
            "-o",
            "ControlMaster=no",
            "-i",
            str(hosts.client_key),
            "-o",
            f"UserKnownHostsFile={hosts.known_hosts}",
            f"root@{host.address}",
            f"cat {payload}",
        ],
        stdout=subprocess.DEVNULL,
        check=True,
        timeout=600,
    )
    return time.perf_counter() - started


def gather_series(hosts, inventory: Path, key: str, size_mb: int, work: Path, repetitions: int) -> list[dict]:
    """Gatherings and their ssh-cat floors, each pair measured back to back (the machine is noisy)."""
    results = []
    for index in range(repetitions):
        result = gather(hosts, inventory, key, size_mb, work)
        results.append(result)
        print(
            f"gather {index + 1}/{repetitions}: {result['bytes'] / 1e6:.0f} MB, list {result['pack_s']:.2f} s + fetch "
            f"{result['fetch_s']:.2f} s (stream and checked unpack {result['transfer_s']:.2f} s): "
            f"{result['gather_MB_per_s']} MB/s | ssh cat {result['ssh_cat_MB_per_s']} MB/s | ratio "
            f"{result['gather_vs_ssh_cat']} | stop path (a task of its own for the pack) {result['stop_path_MB_per_s']} MB/s",
            flush=True,
        )
    rates = [r["gather_MB_per_s"] for r in results]
    floors = [r["ssh_cat_MB_per_s"] for r in results]
    ratios = [r["gather_vs_ssh_cat"] for r in results]
    stop_path = [r["stop_path_MB_per_s"] for r in results]
    print(
        f"gathering (median of {repetitions}): {statistics.median(rates)} MB/s | ssh cat floor "
        f"{statistics.median(floors)} MB/s | ratio {statistics.median(ratios)} (target >= 100 MB/s); "
        f"stop path {statistics.median(stop_path)} MB/s"
    )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--warm-runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--gather-only", action="store_true", help="only the gathering measurement")
    parser.add_argument("--gather-runs", type=int, default=5, help="gatherings (each beside its ssh cat)")
    parser.add_argument(
        "--cold-only",
        type=int,
        metavar="N",
        default=0,
        help="only N cold starts, each on a host whose ccbench directory was removed first (to compare "
        "revisions: run this script with PYTHONPATH set to each revision's src, in turns)",
    )
    args = parser.parse_args()
    reason = testhosts.unavailable()
    if reason:
        raise SystemExit(f"cannot make SSH test hosts here: {reason}")
    started = time.time()
    # the wheelhouse this plan's hosts get (no precision target: no scipy, where the revision under
    # measurement knows that distinction), built before the timed runs
    precision = {"precision": False} if hasattr(wheelhouse, "plan_needs_precision") else {}
    built = wheelhouse.build(**precision)
    print(
        f"wheelhouse {built.key}: {built.tar.stat().st_size / 1e6:.1f} MB, "
        f"{'built' if built.built else 'from the cache'} in {time.time() - started:.1f} s"
    )
    with tempfile.TemporaryDirectory(prefix="ccbench-bench-fleet-") as temporary:
        work = Path(args.out or temporary)
        work.mkdir(parents=True, exist_ok=True)
        plan = work / "plan.toml"
        plan.write_text(PLAN)
        with testhosts.SSHHosts(work / "hosts", ["h1", "h2"]) as hosts:
            inventory = work / "hosts.ini"
            inventory.write_text(hosts.inventory_text(baseline="h1"))
            if args.cold_only:
                cold = []
                for number in range(args.cold_only):
                    shutil.rmtree(hosts.hosts["h1"].home / ".ccbench-fleet", ignore_errors=True)
                    manifest, wall = fleet_run(plan, inventory, work / f"cold{number}", "--limit", "h1")
                    cold.append(timings(manifest)["h1"])
                    print(
                        f"cold host: first remote execution {cold[-1]['first_execution_s']:.1f} s after the command "
                        f"(install {cold[-1].get('install_s', 0):.1f} s), whole run {wall:.1f} s"
                    )
                print(json.dumps({"cold": cold}))
                return
            if args.gather_only:
                fleet_run(plan, inventory, work / "cold", "--limit", "h1")  # installs the agent that packs
                results = gather_series(hosts, inventory, built.key, args.size_mb, work, args.gather_runs)
                print(json.dumps({"gather": results}, indent=1))
                return
            cold, cold_wall = fleet_run(plan, inventory, work / "cold", "--limit", "h1")
            cold_t = timings(cold)["h1"]
            print(
                f"cold host: first remote execution {cold_t['first_execution_s']:.1f} s after the command "
                f"(install {cold_t.get('install_s', 0):.1f} s), whole run {cold_wall:.1f} s"
            )
            warm = []
            for _ in range(args.warm_runs):
                manifest, wall = fleet_run(plan, inventory, work / "warm", "--limit", "h1")
                warm.append(timings(manifest)["h1"]["first_execution_s"])
            print(
                f"warm host: first remote execution {statistics.median(warm):.1f} s after the command "
                f"(median of {len(warm)}: {', '.join(f'{w:.1f}' for w in warm)}; target <= 10 s)"
            )
            # h2 installed once (cold), then both warm at once
            fleet_run(plan, inventory, work / "cold2", "--limit", "h2")
            both, _ = fleet_run(plan, inventory, work / "both")
            both_t = {label: t["first_execution_s"] for label, t in timings(both).items()}
            print(
                f"two warm hosts in parallel: first remote execution {', '.join(f'{k} {v:.1f} s' for k, v in both_t.items())}"
            )
            gathered = gather_series(hosts, inventory, built.key, args.size_mb, work, args.gather_runs)
            print(
                json.dumps(
                    {
                        "cold": cold_t,
                        "cold_wall_s": round(cold_wall, 1),
                        "warm_first_execution_s": warm,
                        "parallel_first_execution_s": both_t,
                        "gather": gathered,
                    },
                    indent=1,
                )
            )


if __name__ == "__main__":
    main()
