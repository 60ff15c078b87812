"""The fleet's own overhead, on emulated SSH hosts (network namespaces running OpenSSH, root needed).

Measures, in one run:
  * time from `ccbench fleet run` to the first remote execution on a cold host (nothing installed:
    the wheelhouse is copied and installed first; the install time is reported) and on a warm host
    (installed by an earlier run); target for warm: at most 10 s per host;
  * the same with two warm hosts at once (parallel mode);
  * gathering speed of a 100 MB bundle over the veth link: the pack (tar on the host) and the
    Ansible fetch, beside a plain `ssh cat` of the same bytes for scale; target at least 100 MB/s.

Usage: python benchmarks/bench_fleet.py [--size-mb 100] [--out DIR]
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

from ccbench.fleet import testhosts, wheelhouse
from ccbench.fleet.engine import PLAYBOOK, ansible_environment
from ccbench.fleet.inventory import ansible_tool

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
    done = subprocess.run([sys.executable, "-m", "ccbench", "fleet", "run", str(plan), "--inventory", str(inventory),
                           "--out", str(out), "--no-report", *extra], capture_output=True, text=True, timeout=900)
    wall = time.time() - started
    if done.returncode != 0:
        raise SystemExit(f"fleet run failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    directory = sorted(out.glob("fleet-*"), key=lambda p: p.stat().st_mtime)[-1]
    return json.loads((directory / "fleet.json").read_text()), wall


def timings(manifest: dict) -> dict[str, dict]:
    return {label: host["rounds"]["run"]["timings"] for label, host in manifest["hosts"].items()}


def gather(hosts: testhosts.SSHHosts, inventory: Path, key: str, size_mb: int, work: Path) -> dict:
    """Pack and fetch a bundle of size_mb through the shipped playbook's stop action (nothing
    running: it packs and fetches), timed from Ansible's own event stream."""
    host = hosts.hosts["h1"]
    run_id = f"bench-gather-{int(time.time())}"
    bundle = host.home / ".ccbench-fleet" / "runs" / run_id / "run" / "out" / "bench-bundle"
    (bundle / "raw").mkdir(parents=True)
    (bundle / "manifest.json").write_text(json.dumps({"format_version": 1, "status": "complete"}))
    with open(bundle / "raw" / "payload.bin", "wb") as handle:
        for _ in range(size_mb):
            handle.write(os.urandom(1 << 20))
    destination = work / "gathered" / run_id / "bundle.tar"
    extra = {"ccbench_fleet": {
        "action": "stop", "run_id": run_id, "python": wheelhouse.python_tag(), "wheelhouse_tar": "", "wheelhouse_key": key,
        "plan_content": "", "plan_suffix": "", "poll_s": 1, "max_polls": 1, "stop_grace_s": 5,
        "stop_flag": str(work / "no-stop-flag"),
        "hosts": {"h1": {"label": "h1", "round": "run", "dest": str(destination), "system_packages": [], "ccbench_args": []}},
    }}
    extra_file = work / "gather-vars.json"
    extra_file.write_text(json.dumps(extra))
    # the environment `ccbench fleet run` gives Ansible (ANSIBLE_SSH_TRANSFER_METHOD etc. from ours)
    control_dir = Path(tempfile.mkdtemp(prefix="ccbench-ssh-"))
    env = ansible_environment(mode="parallel", accept_new_host_keys=False, control_dir=control_dir)
    try:
        done = subprocess.run([ansible_tool("ansible-playbook"), "-i", str(inventory), "--limit", "h1", "-e",
                               f"@{extra_file}", str(PLAYBOOK)], capture_output=True, text=True, env=env, timeout=600)
    finally:
        for socket_path in control_dir.iterdir():
            subprocess.run(["ssh", "-o", f"ControlPath={socket_path}", "-O", "exit", "x"], capture_output=True, timeout=30)
        shutil.rmtree(control_dir, ignore_errors=True)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    starts = {e["task"]: e["time"] for e in events if e["event"] == "host_task_start"}
    ends = {e["task"]: e["time"] for e in events if e["event"] == "ok"}
    if "ccbench:fetch" not in ends or not destination.exists():
        raise SystemExit(f"gathering failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    size = destination.stat().st_size
    pack_s = ends["ccbench:pack"] - starts["ccbench:pack"]
    fetch_s = ends["ccbench:fetch"] - starts["ccbench:fetch"]
    # the same bytes through one plain ssh stream, for scale
    started = time.perf_counter()
    subprocess.run(["ssh", *env["ANSIBLE_SSH_ARGS"].split(), "-o", "ControlMaster=no", "-i", str(hosts.client_key),
                    "-o", f"UserKnownHostsFile={hosts.known_hosts}",
                    f"root@{host.address}", f"cat {bundle}/raw/payload.bin"], stdout=subprocess.DEVNULL, check=True,
                   timeout=600)
    ssh_s = time.perf_counter() - started
    mb = size / 1e6
    return {"bytes": size, "pack_s": round(pack_s, 2), "fetch_s": round(fetch_s, 2),
            "fetch_MB_per_s": round(mb / fetch_s, 1), "pack_and_fetch_MB_per_s": round(mb / (pack_s + fetch_s), 1),
            "ssh_cat_MB_per_s": round(size / 1e6 / ssh_s, 1), "fetch_vs_ssh_cat": round(ssh_s / fetch_s, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--warm-runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--gather-only", action="store_true", help="only the gathering measurement")
    args = parser.parse_args()
    reason = testhosts.unavailable()
    if reason:
        raise SystemExit(f"cannot make SSH test hosts here: {reason}")
    started = time.time()
    built = wheelhouse.build()
    print(f"wheelhouse {built.key}: {built.tar.stat().st_size / 1e6:.1f} MB, "
          f"{'built' if built.built else 'from the cache'} in {time.time() - started:.1f} s")
    with tempfile.TemporaryDirectory(prefix="ccbench-bench-fleet-") as temporary:
        work = Path(args.out or temporary)
        work.mkdir(parents=True, exist_ok=True)
        plan = work / "plan.toml"
        plan.write_text(PLAN)
        with testhosts.SSHHosts(work / "hosts", ["h1", "h2"]) as hosts:
            inventory = work / "hosts.ini"
            inventory.write_text(hosts.inventory_text(baseline="h1"))
            if args.gather_only:
                fleet_run(plan, inventory, work / "cold", "--limit", "h1")  # installs the agent that packs
                for _ in range(3):
                    print(json.dumps(gather(hosts, inventory, built.key, args.size_mb, work)))
                return
            cold, cold_wall = fleet_run(plan, inventory, work / "cold", "--limit", "h1")
            cold_t = timings(cold)["h1"]
            print(f"cold host: first remote execution {cold_t['first_execution_s']:.1f} s after the command "
                  f"(install {cold_t.get('install_s', 0):.1f} s), whole run {cold_wall:.1f} s")
            warm = []
            for _ in range(args.warm_runs):
                manifest, wall = fleet_run(plan, inventory, work / "warm", "--limit", "h1")
                warm.append(timings(manifest)["h1"]["first_execution_s"])
            print(f"warm host: first remote execution {statistics.median(warm):.1f} s after the command "
                  f"(median of {len(warm)}: {', '.join(f'{w:.1f}' for w in warm)}; target <= 10 s)")
            # h2 installed once (cold), then both warm at once
            fleet_run(plan, inventory, work / "cold2", "--limit", "h2")
            both, _ = fleet_run(plan, inventory, work / "both")
            both_t = {label: t["first_execution_s"] for label, t in timings(both).items()}
            print(f"two warm hosts in parallel: first remote execution {', '.join(f'{k} {v:.1f} s' for k, v in both_t.items())}")
            result = gather(hosts, inventory, built.key, args.size_mb, work)
            print(f"gathering a {result['bytes'] / 1e6:.0f} MB bundle: pack {result['pack_s']} s, fetch {result['fetch_s']} s "
                  f"= {result['fetch_MB_per_s']} MB/s fetch, {result['pack_and_fetch_MB_per_s']} MB/s pack+fetch "
                  f"(plain ssh cat: {result['ssh_cat_MB_per_s']} MB/s; target >= 100 MB/s)")
            print(json.dumps({"cold": cold_t, "cold_wall_s": round(cold_wall, 1), "warm_first_execution_s": warm,
                              "parallel_first_execution_s": both_t, "gather": result}, indent=1))


if __name__ == "__main__":
    main()
