"""nginx, the chain's front end: its configuration, its command line and its access log.

The access log's format (``ccbench``) carries what the tier accounting needs per request: when it
ended, its status, nginx's total and upstream times and the application's Server-Timing header.
"""

from __future__ import annotations

import re
from pathlib import Path


def nginx_config(
    directory: Path, host: str, port: int, app_address: str, workers: int, cert: Path | None, key: Path | None
) -> str:
    temp = directory / "nginx-temp"
    tls = ""
    if cert:
        tls = (
            f"        ssl_certificate {cert};\n        ssl_certificate_key {key};\n"
            "        ssl_protocols TLSv1.3;\n        ssl_session_cache shared:ccbench:1m;\n"
        )
    return f"""# made by ccbench for one run of the microservices workload
worker_processes {workers};
pid {directory}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
    # one line per request: when it ended, status, total and upstream time (s), the application's
    # per-tier Server-Timing, the path
    log_format ccbench '$msec $status $request_time $upstream_response_time "$upstream_http_server_timing" $uri';
    access_log {directory}/logs/access.log ccbench buffer=256k flush=500ms;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    keepalive_requests 1000000;
    upstream app {{
        server {app_address};
        keepalive 64;
    }}
    server {{
        listen {host}:{port}{" ssl" if cert else ""};
{tls}        location /wrk2-api/ {{
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
        # a static response: what the load generator sustains without the chain (benchmarks/bench_loadgen.py)
        location = /static {{
            access_log off;
            default_type text/plain;
            return 200 "ok\\n";
        }}
    }}
}}
"""


def nginx_argv(conf: Path, prefix: Path, error_log: Path) -> list[str]:
    """nginx in the foreground with ccbench's configuration, its prefix and error log in the chain's directory."""
    return ["nginx", "-c", str(conf), "-p", str(prefix), "-e", str(error_log), "-g", "daemon off;"]


def make_temp_dirs(directory: Path) -> None:
    """The temporary directories nginx_config names (nginx does not create them itself)."""
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (directory / "nginx-temp" / sub).mkdir(parents=True, exist_ok=True)


TIMING = re.compile(r"(\w+);dur=([0-9.]+)")


def read_access_log(
    path: Path, offset: int
) -> tuple[list[tuple[float, int, float, float | None, dict[str, float]]], int]:
    """Lines of the access log from offset: (end time, status, request s, upstream s, Server-Timing ms)."""
    rows = []
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except OSError:
        return rows, offset
    end = data.rfind(b"\n") + 1
    for line in data[:end].decode(errors="replace").splitlines():
        parts = line.split(" ", 4)
        if len(parts) < 5:
            continue
        try:
            msec, status, request_time = float(parts[0]), int(parts[1]), float(parts[2])
        except ValueError:
            continue
        upstream = None
        try:
            upstream = (
                sum(float(x) for x in re.split(r"[ ,:]+", parts[3]) if x and x != "-") if parts[3] != "-" else None
            )
        except ValueError:
            pass
        timing = {name: float(value) for name, value in TIMING.findall(parts[4])}
        rows.append((msec, status, request_time, upstream, timing))
    return rows, offset + end
