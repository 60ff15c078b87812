"""Re-record the real tool output that tests/test_microservices_parsers.py parses (see README.md here).

Starts the workload's own chain on 127.0.0.1 (nginx with the workload's nginx_config in front of the Go
tier, memcached, Redis and PostgreSQL), drives it with oha and wrk built by the workload's own wrappers,
and copies what the tools printed and nginx logged into this directory. Needs the microservices set-up
component; run it from the checkout: `.venv/bin/python tests/data/microservices/record.py`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "src"))

from ccbench.basics.netutil import free_port  # noqa: E402
from ccbench.workloads.base import PrepareContext  # noqa: E402
from ccbench.workloads.microservices import (  # noqa: E402
    DEFAULT_MIX,
    ChainState,
    Microservices,
    MicroservicesParams,
    mix_url_regex,
    oha_argv,
    state_file,
    wrk_argv,
    wrk_script,
)
from ccbench.workloads.microservices.state import stop_server  # noqa: E402

#: one timeline read of a user that exists, or a path nginx does not serve (404): status errors in oha's JSON
WITH_MISSING_PATH = r"(/wrk2-api/home-timeline/read\?user_id=[0-9]{3}&start=0&stop=10|/not-served)"


def run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    print(f"  {Path(argv[0]).name} exited with {done.returncode}", file=sys.stderr)
    return done.stdout


def record_chain(work: Path) -> dict:
    params = MicroservicesParams(rates=[50], closed_loop=True)
    workload = Microservices("record", params)
    reason = workload.requirements()
    if reason:
        raise SystemExit(reason)
    ctx = PrepareContext("record", work / "work", work / "raw" / "prepare", {"transport": "plain"})
    ctx.workdir.mkdir(parents=True)
    workload.prepare(ctx)
    try:
        info = json.loads((ctx.raw_dir / "chain.json").read_text())
        base = info["base_url"]
        windows = {}
        start = time.time()
        oha = oha_argv(
            mix_url_regex(base, params.mix, params.users), rate=50, duration=3, connections=8, timeout=5, cacert=None
        )
        (HERE / "oha-open-loop.json").write_text(run(oha))
        windows["oha-open-loop"] = [start, time.time()]
        oha = oha_argv(base + WITH_MISSING_PATH, rate=40, duration=2, connections=4, timeout=5, cacert=None)
        (HERE / "oha-status-errors.json").write_text(run(oha))
        script = HERE / "mix.lua"
        script.write_text(wrk_script(DEFAULT_MIX, params.users))
        start = time.time()
        # one connection for one second: a few hundred requests keep the recorded access log small
        wrk = wrk_argv(base, script=script, threads=1, connections=1, duration=1, timeout=5)
        (HERE / "wrk-mix.txt").write_text(run(wrk))
        windows["wrk-mix"] = [start, time.time()]
        time.sleep(0.7)  # nginx flushes its access log every 500 ms
        shutil.copy(info["access_log"], HERE / "access.log")
        # the application tier stopped: nginx answers 502, which wrk counts as status errors (after the
        # access log was copied: wrk makes thousands of 502s a second)
        stop_server(ChainState.load(state_file(ctx.workdir)).server("app"))
        start = time.time()
        (HERE / "wrk-app-stopped.txt").write_text(run(wrk))
        windows["wrk-app-stopped"] = [start, time.time()]
        shutil.copy(Path(info["access_log"]).parents[1] / "nginx.conf", HERE / "nginx.conf")
        return {"base_url": base, "windows": windows}
    finally:
        workload.cleanup(ctx)


def record_refused() -> None:
    """oha against a port where nothing listens: transport errors only (wrk gives up at once there,
    printing nothing on stdout)."""
    closed = f"http://127.0.0.1:{free_port()}"
    oha = oha_argv(closed + "/wrk2-api/user/follow", rate=20, duration=1, connections=2, timeout=1, cacert=None)
    (HERE / "oha-refused.json").write_text(run(oha))


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="ccbench-record-") as work:
        recorded = record_chain(Path(work))
    record_refused()
    (HERE / "recorded.json").write_text(json.dumps(recorded, indent=1) + "\n")
    print(f"recorded into {HERE}", file=sys.stderr)


if __name__ == "__main__":
    main()
