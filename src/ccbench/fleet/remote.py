"""The fleet's agent on a remote host: starts ``ccbench run`` detached, reports its state, stops it.

Run by the shipped playbook as ``<venv>/bin/python -m ccbench.fleet.remote ACTION --run-dir DIR``.
Standard library and ccbench only, one JSON line out per call (the playbook parses it; the controller's
progress line is built from it). A run directory holds::

    ccbench.pid     pid of the `ccbench run` process (its own session: pgid = pid)
    exit            its exit status, written when it ends
    run.log         its stdout and stderr
    out/            the --out directory: one bundle inside
    setup/NAME.log  the set-up script's output per component (``setup``)
    bundle.tar      under become, or without a streaming connection: the bundle packed for fetching
                    (``pack``; removed by the fetch); otherwise the controller streams it (``pack --stream``)
    fetch-dir       under become: where ``pack`` put the archive for the login user (recorded first)
    services.json   on a serving host (``serve``): the services started for the fleet's run, each
                    recorded before it starts; ``unserve`` stops them (each ends by itself at its bound)

The run outlives the SSH session (own session, stdio on files): a dropped connection does not
stop a measurement; ``stop`` sends SIGINT, which ccbench turns into a clean stop that keeps what
it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from ccbench.basics import ownprocs
from ccbench.basics.fsutil import atomic_target, write_text_atomic
from ccbench.fleet.remote_host import mirror, serve, setup, unserve

#: the environment variable a served host's run finds its serving host's address in
PEER_ENV = "CCBENCH_PEER"


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
    # the run has ended when its supervisor has written the exit status: between ccbench's end (a
    # zombie until reaped) and that write the supervisor is still alive, and the run is not lost
    supervisor = _read_int(run_dir / "supervisor.pid")
    running = exit_code is None and (_alive(pid) or _alive(supervisor))
    bundle = _bundle(run_dir)
    document = {
        "state": "running" if running else ("done" if exit_code is not None else ("lost" if pid else "absent")),
        "exit_code": exit_code,
        "bundle": str(bundle) if bundle else None,
        "executions_done": 0,
        "executions_total": 0,
        "first_started_at": None,
        "bundle_status": None,
    }
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


def start(
    run_dir: Path,
    ccbench_args: list[str],
    plan_file: str | None = None,
    plan_content: str | None = None,
    peer: str | None = None,
) -> dict:
    """Start `ccbench run ...` detached; idempotent (a live run is left as it is). With a plan
    file's name and content, the file is written into the run directory first; with ``peer`` (the
    serving host's address, from ccbench_peer) the run gets it as $CCBENCH_PEER."""
    run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    if plan_file and plan_content is not None:
        write_text_atomic(run_dir / Path(plan_file).name, plan_content)
    pid = _read_int(run_dir / "ccbench.pid")
    if _read_int(run_dir / "exit") is None and _alive(pid):
        return {"started": False, **status(run_dir)}
    (run_dir / "exit").unlink(missing_ok=True)
    # the supervisor (this module's `supervise`) waits for ccbench and writes its exit status
    log = open(run_dir / "run.log", "ab")
    subprocess.Popen(
        [sys.executable, "-m", "ccbench.fleet.remote", "supervise", "--run-dir", str(run_dir), "--", *ccbench_args],
        env={**os.environ, PEER_ENV: peer} if peer else None,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
        close_fds=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _read_int(run_dir / "ccbench.pid") in (None, pid):
        time.sleep(0.05)
    return {"started": True, **status(run_dir)}


def supervise(run_dir: Path, ccbench_args: list[str]) -> int:
    write_text_atomic(run_dir / "supervisor.pid", str(os.getpid()))
    # the run counts the agent's calls (their connection, registered by each call) as its own, not as neighbours
    own = str(run_dir / ownprocs.FILE_NAME)
    process = subprocess.Popen(
        [sys.executable, "-m", "ccbench", *ccbench_args],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "COLUMNS": "120", "TERM": "dumb", ownprocs.ENV: own},
    )
    write_text_atomic(run_dir / "ccbench.pid", str(process.pid))
    # a SIGINT/SIGTERM meant for the run reaches it through `stop`; the supervisor must outlive it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    code = process.wait()
    write_text_atomic(run_dir / "exit", str(code if code >= 0 else 128 - code))
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


def _listing(bundle: Path) -> tuple[int, int]:
    """(regular files, their bytes) under the bundle: what the controller checks after unpacking."""
    files = size = 0
    for path in bundle.rglob("*"):
        if path.is_file() and not path.is_symlink():
            files += 1
            size += path.stat().st_size
    return files, size


def pack(run_dir: Path, readable_by: str | None = None, stream: bool = False) -> dict:
    """What the controller fetches: with ``stream``, no archive at all, only the bundle's listing
    (its files and their bytes, which the controller checks the stream against) and ``send``,
    the command that writes the bundle as one tar to its standard output (GNU tar where present,
    ``send`` of this module otherwise), which the controller runs through the connection and
    unpacks as it arrives. Otherwise the bundle as one uncompressed tar file, for one fetch (one
    file moves far faster than a tree of them; compression costs more CPU than it saves on the
    links measured: results are mostly raw tool output and random-looking payloads), packed by
    GNU tar where present (several times faster than Python's tarfile), tarfile otherwise.

    The archive goes to ``run_dir/bundle.tar``. With ``readable_by`` (the SSH login user, when the
    play runs with become and the run directory is someone else's), it goes to a directory of its
    own in the system's temporary directory instead, owned by that user, so that the fetch can run
    as the login user; that directory's path is written to ``run_dir/fetch-dir`` before it is made.
    The fetch removes the archive (and that directory) when done; the bundle itself always stays."""
    started = time.monotonic()
    bundle = _bundle(run_dir)
    if bundle is None:
        return {"packed": None, **status(run_dir)}
    tar = shutil.which("tar")
    if stream and not readable_by:
        files, size = _listing(bundle)
        send = (
            [tar, "-c", "-f", "-", "--format=pax", "-C", str(bundle.parent), "--", bundle.name]
            if tar
            else [sys.executable, "-m", "ccbench.fleet.remote", "send", "--run-dir", str(run_dir)]
        )
        return {
            "packed": str(bundle),
            "stream": True,
            "send": send,
            "remove": None,
            "bytes": None,
            "files": files,
            "file_bytes": size,
            "packer": "tar" if tar else "tarfile",
            "pack_s": round(time.monotonic() - started, 3),
            **status(run_dir),
        }
    owner = None
    if readable_by:
        entry = pwd.getpwnam(readable_by)
        owner = (entry.pw_uid, entry.pw_gid)
    if owner and owner[0] != os.geteuid():
        # the name is recorded before the directory is made; a leftover one is replaced
        name = f"ccbench-fetch-{run_dir.parent.name}-{run_dir.name}-{owner[0]}"
        where = Path(tempfile.gettempdir()) / name
        write_text_atomic(run_dir / "fetch-dir", str(where) + "\n")
        if where.is_dir() and not where.is_symlink():
            shutil.rmtree(where)  # never follows a link inside it
        where.mkdir(mode=0o700)
        os.chown(where, *owner)
        target = where / "bundle.tar"
        remove = where
    else:
        target = run_dir / "bundle.tar"
        remove = target
    files, size = _listing(bundle)
    with atomic_target(target) as temporary:
        if tar:
            done = subprocess.run(
                [tar, "-c", "-f", str(temporary), "--format=pax", "-C", str(bundle.parent), "--", bundle.name],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise SystemExit(f"tar of {bundle} failed: {done.stderr.strip()[-300:]}")
        else:
            with tarfile.open(temporary, "w", format=tarfile.PAX_FORMAT) as archive:
                archive.add(bundle, arcname=bundle.name)
        if owner:
            os.chown(temporary, *owner)
    return {
        "packed": str(target),
        "remove": str(remove),
        "bytes": target.stat().st_size,
        "files": files,
        "file_bytes": size,
        "packer": "tar" if tar else "tarfile",
        "pack_s": round(time.monotonic() - started, 3),
        **status(run_dir),
    }


def send(run_dir: Path) -> int:
    """The bundle as one tar on standard output (Python's tarfile: where the host has no GNU tar)."""
    bundle = _bundle(run_dir)
    if bundle is None:
        print(f"no bundle under {run_dir / 'out'}", file=sys.stderr)
        return 1
    with tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.PAX_FORMAT, bufsize=1 << 20) as archive:
        archive.add(bundle, arcname=bundle.name)
    sys.stdout.buffer.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ccbench.fleet.remote", description=__doc__.splitlines()[0])
    parser.add_argument(
        "action",
        choices=["start", "supervise", "status", "stop", "pack", "send", "setup", "mirror", "serve", "unserve"],
    )
    parser.add_argument("--run-dir", type=Path)
    parser.add_argument("--scripts", type=Path, help="the shipped scripts/ directory (setup)")
    parser.add_argument("--venv", type=Path, help="the host's ccbench venv (setup)")
    parser.add_argument("--record", type=Path, help="where the results go when every component is ok (setup)")
    parser.add_argument("--grace", type=float, default=120.0, help="seconds a SIGINTed run may take to stop")
    parser.add_argument("--plan-file", help="name of the plan file to write into the run directory (start)")
    parser.add_argument("--plan-content", help="its content (start)")
    parser.add_argument(
        "--pack", action="store_true", help="status, stop: pack the bundle as well once the run has ended"
    )
    parser.add_argument("--readable-by", help="user the packed archive is given to (pack, under become)")
    parser.add_argument(
        "--stream", action="store_true", help="pack: no archive, the listing and the command that streams the bundle"
    )
    parser.add_argument("--peer", help="the serving host's address, given to the run as $CCBENCH_PEER (start)")
    parser.add_argument("--services", help="a JSON list of argv lists to serve (serve)")
    parser.add_argument("--seconds", type=float, default=3600.0, help="how long the services may run (serve)")
    argv = list(sys.argv[1:] if argv is None else argv)
    # everything after "--" is ccbench's own command line, passed on untouched
    ccbench_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    args.ccbench_args = ccbench_args
    if args.action == "mirror":
        print(mirror())
        return 0
    if args.run_dir is None:
        parser.error("--run-dir is required")
    run_dir = args.run_dir.expanduser()
    if args.action == "setup":
        print(json.dumps(setup(args.scripts, args.venv, ccbench_args, run_dir, args.record)))
        return 0
    if args.action == "supervise":
        return supervise(run_dir, args.ccbench_args)
    if args.action == "send":
        return send(run_dir)
    if args.action == "start":
        run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    if args.action in ("start", "status", "stop") and run_dir.is_dir():
        # before the work: the run's contention check must know this call's processes as ccbench's own
        ownprocs.register_connection(run_dir / ownprocs.FILE_NAME)
    if args.action == "serve":
        result = serve(run_dir, json.loads(args.services or "[]"), args.seconds)
    elif args.action == "unserve":
        result = unserve(run_dir)
    elif args.action == "start":
        result = start(run_dir, args.ccbench_args, args.plan_file, args.plan_content, args.peer or None)
    elif args.action == "pack":
        result = pack(run_dir, args.readable_by or None, args.stream)
    else:
        result = status(run_dir) if args.action == "status" else stop(run_dir, args.grace)
        # the last status poll (or the stop) packs in the same call: one Ansible task less per gathering
        if args.pack and result["state"] != "running":
            signals = {"signals": result["signals"]} if "signals" in result else {}
            result = {**pack(run_dir, args.readable_by or None, args.stream), **signals}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
