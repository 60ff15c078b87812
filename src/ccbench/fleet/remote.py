"""The fleet's agent on a remote host: starts ``ccbench run`` detached, reports its state, stops it.

Run by the shipped playbook as ``<venv>/bin/python -m ccbench.fleet.remote ACTION --run-dir DIR``.
Standard library only, one JSON line out per call (the playbook parses it; the controller's
progress line is built from it). A run directory holds::

    ccbench.pid     pid of the `ccbench run` process (its own session: pgid = pid)
    exit            its exit status, written when it ends
    run.log         its stdout and stderr
    out/            the --out directory: one bundle inside
    bundle.tar      the bundle packed for fetching (``pack``)

The run outlives the SSH session (own session, stdio on files): a dropped connection does not
stop a measurement; ``stop`` sends SIGINT, which ccbench turns into a clean stop that keeps what
it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def _bundle(run_dir: Path) -> Path | None:
    out = run_dir / "out"
    found = sorted((p for p in out.glob("*/manifest.json")), key=lambda p: p.stat().st_mtime) if out.is_dir() else []
    return found[-1].parent if found else None


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as handle:
            return sum(1 for line in handle if line.strip())
    except OSError:
        return 0


def _first_started_at(path: Path) -> str | None:
    try:
        with open(path, "rb") as handle:
            first = handle.readline()
        return json.loads(first).get("started_at") if first.strip() else None
    except (OSError, ValueError):
        return None


def _planned_executions(manifest: dict) -> int:
    total = 0
    for workload in (manifest.get("plan") or {}).get("workloads", []):
        if workload.get("skip_reason"):
            continue
        variants = workload.get("variants") or {}
        combinations = 1
        for values in variants.values():
            combinations *= max(len(values), 1)
        total += (int(workload.get("repetitions", 0)) + int(workload.get("warmup", 0))) * combinations
    return total


def status(run_dir: Path) -> dict:
    pid = _read_int(run_dir / "ccbench.pid")
    exit_code = _read_int(run_dir / "exit")
    running = exit_code is None and _alive(pid)
    bundle = _bundle(run_dir)
    document = {"state": "running" if running else ("done" if exit_code is not None else ("lost" if pid else "absent")),
                "exit_code": exit_code, "bundle": str(bundle) if bundle else None,
                "executions_done": 0, "executions_total": 0, "first_started_at": None, "bundle_status": None}
    if bundle:
        try:
            manifest = json.loads((bundle / "manifest.json").read_text())
        except (OSError, ValueError):
            manifest = {}
        document["executions_total"] = _planned_executions(manifest)
        document["bundle_status"] = manifest.get("status")
        document["executions_done"] = _count_lines(bundle / "executions.jsonl")
        document["first_started_at"] = _first_started_at(bundle / "executions.jsonl")
    if not running:
        tail = (run_dir / "run.log").read_text(errors="replace")[-600:] if (run_dir / "run.log").exists() else ""
        document["log_tail"] = tail
    return document


def start(run_dir: Path, ccbench_args: list[str], plan_file: str | None = None, plan_content: str | None = None) -> dict:
    """Start `ccbench run ...` detached; idempotent (a live run is left as it is). With a plan
    file's name and content, the file is written into the run directory first."""
    run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    if plan_file and plan_content is not None:
        (run_dir / Path(plan_file).name).write_text(plan_content)
    pid = _read_int(run_dir / "ccbench.pid")
    if _read_int(run_dir / "exit") is None and _alive(pid):
        return {"started": False, **status(run_dir)}
    (run_dir / "exit").unlink(missing_ok=True)
    # the supervisor (this module's `supervise`) waits for ccbench and writes its exit status
    log = open(run_dir / "run.log", "ab")
    subprocess.Popen([sys.executable, "-m", "ccbench.fleet.remote", "supervise", "--run-dir", str(run_dir), "--", *ccbench_args],
                     stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _read_int(run_dir / "ccbench.pid") in (None, pid):
        time.sleep(0.05)
    return {"started": True, **status(run_dir)}


def supervise(run_dir: Path, ccbench_args: list[str]) -> int:
    process = subprocess.Popen([sys.executable, "-m", "ccbench", *ccbench_args], stdin=subprocess.DEVNULL,
                               start_new_session=True, env={**os.environ, "COLUMNS": "120", "TERM": "dumb"})
    (run_dir / "ccbench.pid").write_text(str(process.pid))
    # a SIGINT/SIGTERM meant for the run reaches it through `stop`; the supervisor must outlive it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    code = process.wait()
    temporary = run_dir / "exit.tmp"
    temporary.write_text(str(code if code >= 0 else 128 - code))
    os.replace(temporary, run_dir / "exit")
    return 0


def stop(run_dir: Path, grace_s: float) -> dict:
    """SIGINT to the run (ccbench stops cleanly and keeps its samples); SIGTERM, then SIGKILL to its
    process group if it is still there after grace_s."""
    pid = _read_int(run_dir / "ccbench.pid")
    signals_sent = []
    if _alive(pid) and _read_int(run_dir / "exit") is None:
        for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                break
            signals_sent.append(signal.Signals(sig).name)
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.1)
            if not _alive(pid):
                break
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _read_int(run_dir / "exit") is None:
            time.sleep(0.05)
    return {"signals": signals_sent, **status(run_dir)}


def pack(run_dir: Path) -> dict:
    """The bundle as one uncompressed tar (fetching one file is far faster than a tree of them;
    compression would cost more CPU than it saves on a fast link)."""
    bundle = _bundle(run_dir)
    if bundle is None:
        return {"packed": None, **status(run_dir)}
    target = run_dir / "bundle.tar"
    temporary = run_dir / "bundle.tar.tmp"
    with tarfile.open(temporary, "w", format=tarfile.PAX_FORMAT) as archive:
        archive.add(bundle, arcname=bundle.name)
    os.replace(temporary, target)
    return {"packed": str(target), "bytes": target.stat().st_size, **status(run_dir)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ccbench.fleet.remote", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["start", "supervise", "status", "stop", "pack"])
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--grace", type=float, default=120.0, help="seconds a SIGINTed run may take to stop")
    parser.add_argument("--plan-file", help="name of the plan file to write into the run directory (start)")
    parser.add_argument("--plan-content", help="its content (start)")
    argv = list(sys.argv[1:] if argv is None else argv)
    # everything after "--" is ccbench's own command line, passed on untouched
    ccbench_args = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.ccbench_args = ccbench_args
    run_dir = args.run_dir.expanduser()
    if args.action == "supervise":
        return supervise(run_dir, args.ccbench_args)
    if args.action == "start":
        result = start(run_dir, args.ccbench_args, args.plan_file, args.plan_content)
    elif args.action == "status":
        result = status(run_dir)
    elif args.action == "stop":
        result = stop(run_dir, args.grace)
    else:
        result = pack(run_dir)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
