"""The fleet agent's actions that prepare a host (run by ``python -m ccbench.fleet.remote``): the
shipped set-up scripts per component (``setup``), whether apt's mirror answers (``mirror``), and a
serving host's services (``serve``, ``unserve``: recorded in services.json, each ended by itself
at its bound). Standard library and ccbench only, as the agent."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

SERVICES = "services.json"


def _apt_endpoints() -> list[str]:
    """The places apt would download from: its proxy when one is set, else every source's URI."""
    try:
        dump = subprocess.run(["apt-config", "dump"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        dump = ""
    proxies = [
        line.split('"')[1]
        for line in dump.splitlines()
        if line.startswith(("Acquire::http::Proxy ", "Acquire::https::Proxy ")) and line.count('"') >= 2
    ]
    proxies = [p for p in proxies if p.lower() not in ("", "false", "direct")]
    if proxies:
        return proxies
    uris = []
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]
    for path in sources:
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            words = line.split("#", 1)[0].split()
            if words and words[0] in ("deb", "deb-src"):
                words = [w for w in words[1:] if not (w.startswith("[") or w.endswith("]") or "=" in w)]
                uris += words[:1]
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if line.lower().startswith("uris:"):
                uris += line.split(":", 1)[1].split()
    return uris


def mirror(timeout_s: float = 4.0) -> str:
    """'reachable' when apt's proxy or one of its sources accepts a connection within timeout_s
    (a ``file:`` source: when its directory exists), else why not. Nothing is downloaded, nothing
    on the host changes: a fleet host checks this before it would call apt at all."""
    import socket
    import threading
    from urllib.parse import urlsplit

    endpoints = _apt_endpoints()
    if not endpoints:
        return "no apt sources configured"
    reasons = []
    tried = set()
    for uri in dict.fromkeys(endpoints):
        parts = urlsplit(uri)
        where = (parts.scheme, parts.hostname, parts.port, parts.path if parts.scheme == "file" else "")
        if where in tried:
            continue  # one answer per mirror (debian and debian-security usually share one)
        tried.add(where)
        if parts.scheme == "file":
            if Path(parts.path).is_dir():
                return "reachable"
            reasons.append(f"{uri}: no such directory")
            continue
        if parts.scheme not in ("http", "https") or not parts.hostname:
            reasons.append(f"{uri}: not checked")
            continue
        port = parts.port or (443 if parts.scheme == "https" else 80)
        outcome: list[str] = []

        def connect(host=parts.hostname, port=port, outcome=outcome):
            try:
                with socket.create_connection((host, port), timeout=timeout_s):
                    outcome.append("reachable")
            except OSError as exc:
                outcome.append(exc.strerror or str(exc))

        # a host without DNS can take long to fail a lookup: the thread is not waited for beyond timeout_s
        worker = threading.Thread(target=connect, daemon=True)
        worker.start()
        worker.join(timeout_s + 0.5)
        if outcome and outcome[0] == "reachable":
            return "reachable"
        reasons.append(f"{parts.hostname}:{port}: {outcome[0] if outcome else 'timed out'}")
    return "; ".join(reasons)


def setup(scripts: Path, venv: Path, components: list[str], run_dir: Path, record: Path | None = None) -> dict:
    """Run the shipped set-up scripts for each component in fleet-host mode (``setup.sh --host
    --with NAME``: system packages only, no apt call when they are all there, none either when no
    mirror answers). One component's failure does not stop the others; each one's log is kept in
    ``run_dir/setup/NAME.log``. When every one is ok, the results go to ``record`` (the playbook's
    connect task reads it: later runs of this wheelhouse asking for the same components skip the
    set-up and report these results, marked ``earlier``)."""
    results = {}
    logs = run_dir / "setup"
    logs.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name in components:
        if not list((scripts / "setup.d").glob(f"[0-9]*-{name}.sh")):
            results[name] = {"status": "unavailable", "reason": f"no set-up component '{name}' in the shipped scripts"}
            continue
        started = time.monotonic()
        try:
            done = subprocess.run(
                ["bash", str(scripts / "setup.sh"), "--host", "--with", name],
                env={**os.environ, "CCBENCH_VENV": str(venv), "DEBIAN_FRONTEND": "noninteractive"},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=3600,
            )
            code, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            code, output = 124, f"{exc.stdout or ''}{exc.stderr or ''}\n[setup] error: timed out after 3600 s"
        output = output.replace("\033[1m", "").replace("\033[0m", "")
        (logs / f"{name}.log").write_text(output)
        errors = [line.split("error: ", 1)[1] for line in output.splitlines() if line.startswith("[setup] error: ")]
        # a command that failed under `set -e` (sudo asking for a password, ...) leaves no error line
        last = [line.strip() for line in output.splitlines() if line.strip()][-1:]
        results[name] = {
            "status": "ok" if code == 0 else "unavailable",
            "reason": None
            if code == 0
            else (errors[-1] if errors else f"setup.sh exited {code}" + (f": {last[0][:300]}" if last else "")),
            # apt_install logs each apt-get call before making it
            "apt_called": any(line.startswith("[setup] apt-get") for line in output.splitlines()),
            "seconds": round(time.monotonic() - started, 2),
        }
    if record is not None and all(r["status"] == "ok" for r in results.values()):
        partial = record.with_name(record.name + ".partial")
        try:
            partial.write_text(json.dumps({"asked": components, "components": results}))
            os.replace(partial, record)
        except OSError:
            pass  # only a shortcut for the next run: without it the next run sets them up again
    return {"components": results}


def serve(run_dir: Path, services: list[list[str]], seconds: float) -> dict:
    """Start each service (an argv that listens until stopped) detached, under ``timeout seconds``
    so that it ends by itself even if no one stops it; each is recorded in services.json before it
    starts. Services a previous call left are stopped first. A service that has exited after a
    second is reported with the end of its output."""
    from ccbench.basics.ledger import Ledger

    run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    unserve(run_dir)
    ledger = Ledger(run_dir / SERVICES, {"bound_s": seconds})
    started = []
    for index, argv in enumerate(services):
        entry = ledger.record({"argv": argv})
        log = open(run_dir / f"service-{index}.log", "ab")
        process = subprocess.Popen(
            ["timeout", "-k", "10", str(int(seconds)), *argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        ledger.update(entry, pid=process.pid, create_time=_create_time(process.pid))
        started.append((argv, process, run_dir / f"service-{index}.log"))
    time.sleep(1.0)
    failed = [
        {"argv": argv, "exit": process.returncode, "log_tail": log.read_text(errors="replace")[-300:]}
        for argv, process, log in started
        if process.poll() is not None
    ]
    return {"served": [argv for argv, process, _ in started if process.poll() is None], "failed": failed}


def _create_time(pid: int) -> float | None:
    from ccbench.basics.procs import same_process

    process = same_process(pid)
    return process.create_time() if process else None


def unserve(run_dir: Path) -> dict:
    """Stop the services services.json lists (pid and start time checked) and remove it."""
    from ccbench.basics.ledger import read_entries
    from ccbench.basics.procs import same_process, stop_tree

    entries, _ = read_entries(run_dir / SERVICES)
    stopped = []
    for entry in reversed(entries):
        process = same_process(entry.get("pid"), entry.get("create_time"))
        if process is not None and stop_tree(process, grace=3.0):
            stopped.append(entry.get("argv"))
    (run_dir / SERVICES).unlink(missing_ok=True)
    return {"stopped": stopped}
