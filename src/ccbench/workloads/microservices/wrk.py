"""wrk, the closed-loop load generator: its command line, the Lua script that plays the request mix
and prints a JSON summary, and the parser of that summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ccbench.workloads.base import WorkloadFailed, tail
from ccbench.workloads.microservices.params import OPERATIONS


def wrk_script(mix: dict[str, int], users: int) -> str:
    """wrk's Lua: each request picks an operation by weight (as DeathStarBench's wrk2 scripts do) and
    done() prints the latency distribution and errors as JSON."""
    entries = []
    for op, weight in sorted(mix.items()):
        if weight <= 0:
            continue
        path = OPERATIONS[op].replace("\\?", "?")
        entries.append(f'{{w={weight}, op="{op}", path="{path}"}}')
    return f"""-- made by ccbench: the microservices request mix for wrk
local ops = {{ {", ".join(entries)} }}
local total = 0
for _, o in ipairs(ops) do total = total + o.w end
local users = {users}
local function fill(path)
  path = path:gsub("USER", function() return tostring(math.random(0, users - 1)) end)
  path = path:gsub("%[a%-z%]{{32}}", function()
    local t = {{}}
    for i = 1, 32 do t[i] = string.char(math.random(97, 122)) end
    return table.concat(t)
  end)
  return path
end
request = function()
  local r = math.random() * total
  for _, o in ipairs(ops) do
    r = r - o.w
    if r <= 0 then return wrk.format("GET", fill(o.path)) end
  end
  return wrk.format("GET", fill(ops[#ops].path))
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('CCBENCH {{"requests": %d, "duration_us": %d, "connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d, "p50": %d, "p90": %d, "p99": %d, "p999": %d, "max": %d, "mean": %f}}\\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9), latency.max, latency.mean))
end
"""


def parse_wrk(text: str) -> dict[str, Any]:
    line = next((ln for ln in text.splitlines() if ln.startswith("CCBENCH ")), None)
    if line is None:
        raise WorkloadFailed(f"wrk printed no summary: {tail(text, 3, 400)}")
    doc = json.loads(line[len("CCBENCH ") :])
    seconds = doc["duration_us"] / 1e6
    errors = doc["connect"] + doc["read"] + doc["write"] + doc["timeout"]
    ok = doc["requests"] - doc["status"]
    return {
        "ok": ok,
        "status_errors": doc["status"],
        "transport_errors": errors,
        "error_kinds": {k: doc[k] for k in ("connect", "read", "write", "status", "timeout") if doc[k]},
        "duration_s": seconds,
        # wrk's requests count non-2xx/3xx responses too: achieved throughput is the successful
        # ones, as for oha (a tier answering 502 fast must not look like capacity)
        "throughput": ok / seconds if seconds else 0.0,
        "p50": doc["p50"] / 1000,
        "p90": doc["p90"] / 1000,
        "p99": doc["p99"] / 1000,
        "p99.9": doc["p999"] / 1000,
        "max": doc["max"] / 1000,
        "mean": doc["mean"] / 1000,
    }


def wrk_argv(url: str, *, script: Path, threads: int, connections: int, duration: float, timeout: float) -> list[str]:
    """wrk's command line for a closed-loop run of ``script`` (see wrk_script) against ``url``."""
    return [
        "wrk",
        "-t",
        str(threads),
        "-c",
        str(connections),
        "-d",
        f"{duration:g}s",
        "--timeout",
        f"{timeout:g}s",
        "-s",
        str(script),
        url,
    ]
