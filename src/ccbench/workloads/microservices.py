"""microservices: seed 002's question (what does a TEE do to a service chain's latency?) with real servers.

A social network in the shape of DeathStarBench's: nginx (HTTP/1.1, or HTTPS with TLS 1.3 and a
certificate made per run) -> ccbench's Go application tier (``services/socialnet``: compose post,
home timeline, user timeline, follow) -> memcached and Redis -> PostgreSQL. ``prepare`` starts the
chain from the Debian packages' binaries in ccbench's own directory (free loopback ports, its own
PostgreSQL cluster; never the system's services), loads a seeded dataset (users, a follow graph with
a Zipf in-degree, posts, timelines) and, once per bundle, probes the chain's capacity. Each
execution then drives a request mix:

* open loop at constant rates (``oha -q RATE --latency-correction``: latency from each request's
  scheduled start, so a slow server cannot hide its queue), one case per rate of the sweep;
* closed loop with ``wrk`` (threads, connections, duration), as the seed did.

Per rate it records achieved throughput, latency p50/p90/p99/p99.9/max, errors (counted, never
dropped), each tier's CPU use (its process tree), each tier's mean share of the latency (nginx's
access log with ``$upstream_response_time`` and the application's ``Server-Timing`` header), the load
generator's own CPU and whether the client rather than the service was the bottleneck.

Every server is recorded in ``<workdir>/microservices/chain-*.json`` before it starts and stopped in cleanup;
``ccbench cleanup`` stops what a killed run left (``cleanup_stale``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import pwd
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any, Literal

import psutil
from pydantic import Field, field_validator, model_validator

from ccbench.model import Measurement
from ccbench.workloads.base import (
    ExecutionContext,
    PrepareContext,
    Workload,
    WorkloadFailed,
    WorkloadParams,
    missing_tools,
    tail,
)

REPO = Path(__file__).resolve().parents[3]
SERVICE_DIR = REPO / "services" / "socialnet"
#: chains' state files live in <the run's work directory>/microservices/, beside (not inside) the
#: storage variants' directories, which a stale-storage clean-up may remove first
REGISTRY_DIR = "microservices"
PG_BIN_CANDIDATES = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)

#: the request mix's operations and the URL (path and query; a rand_regex pattern) each one requests;
#: USER is replaced by a pattern over the dataset's user ids
OPERATIONS: dict[str, str] = {
    "home_timeline": r"/wrk2-api/home-timeline/read\?user_id=USER&start=0&stop=10",
    "user_timeline": r"/wrk2-api/user-timeline/read\?user_id=USER&start=0&stop=10",
    "compose_post": r"/wrk2-api/post/compose\?user_id=USER&text=[a-z]{32}",
    "follow": r"/wrk2-api/user/follow\?user_id=USER&followee_id=USER",
}
#: DeathStarBench social network's mixed workload: mostly timeline reads, some posts, a few follows
DEFAULT_MIX = {"home_timeline": 60, "user_timeline": 30, "compose_post": 9, "follow": 1}
TIERS = ("nginx", "app", "memcached", "redis", "postgres")


def socialnet_binary() -> Path:
    return Path(os.environ.get("CCBENCH_SOCIALNET", SERVICE_DIR / "bin" / "socialnet"))


def oha_binary() -> str | None:
    found = shutil.which("oha")
    if found:
        return found
    cargo = Path.home() / ".cargo" / "bin" / "oha"
    return str(cargo) if cargo.exists() else None


def pg_bin() -> Path | None:
    for candidate in PG_BIN_CANDIDATES:
        if (candidate / "postgres").exists() and (candidate / "initdb").exists():
            return candidate
    return None


class MicroservicesParams(WorkloadParams):
    #: "local": every tier on loopback (no root needed); "emulated": each tier on its own emulated host
    #: (network namespace) and the load generator on an "edge" host (needs root)
    hosts: Literal["local", "emulated"] = "local"
    #: the edge link (load generator <-> front end) with hosts = "emulated": one-way delay and rate in
    #: tc's units ("5ms", "100mbit"); unset for a LAN
    edge_delay: str | None = None
    edge_rate: str | None = None
    #: users in the dataset: a power of ten (ids 0..users-1 are drawn digit by digit by the load generator)
    users: int = Field(1000, ge=10)
    posts_per_user: int = Field(10, ge=1)
    mean_follows: int = Field(20, ge=1)
    #: Zipf exponent of how popular users are as followees (> 1; larger = a heavier head)
    follow_zipf: float = Field(1.2, gt=1.0)
    seed: int = 1
    #: operation -> integer weight (see OPERATIONS); DeathStarBench's mixed workload by default
    mix: dict[str, int] = Field(default_factory=lambda: dict(DEFAULT_MIX))
    #: absolute request rates (req/s) for the open-loop sweep; when empty, rate_fractions of a capacity
    #: probed in prepare (once per bundle, on the first variant prepared) are used
    rates: list[float] = Field(default_factory=list)
    rate_fractions: list[float] = Field(default_factory=lambda: [0.25, 0.5, 0.75, 0.9])
    capacity_seconds: float = Field(5.0, gt=0)
    #: seconds of load per rate
    duration: float = Field(10.0, gt=0)
    #: open-loop connections (oha -c): enough that queueing happens in the service, not in the client
    connections: int = Field(32, ge=1)
    #: a request not answered in this many seconds counts as an error
    request_timeout: float = Field(5.0, gt=0)
    #: also drive the chain closed-loop with wrk (as the seed did)
    closed_loop: bool = True
    wrk_threads: int = Field(2, ge=1)
    wrk_connections: int = Field(16, ge=1)
    wrk_duration: float = Field(10.0, gt=0)
    #: an execution fails when more than this share of a rate's requests failed (errors are recorded either way)
    max_error_ratio: float = Field(0.001, ge=0, le=1)
    nginx_workers: int = Field(1, ge=1)
    app_pool: int = Field(32, ge=1)

    @field_validator("users")
    @classmethod
    def _power_of_ten(cls, value: int) -> int:
        digits = len(str(value)) - 1
        if value != 10**digits:
            raise ValueError(f"users must be a power of ten (10, 100, 1000, ...), not {value}")
        return value

    @field_validator("mix")
    @classmethod
    def _known_operations(cls, value: dict[str, int]) -> dict[str, int]:
        unknown = sorted(set(value) - set(OPERATIONS))
        if unknown:
            raise ValueError(f"unknown mix key(s) {', '.join(unknown)}; known: {', '.join(OPERATIONS)}")
        if any(w < 0 for w in value.values()) or sum(value.values()) <= 0:
            raise ValueError("mix weights must be integers >= 0 with a positive sum")
        return value

    @field_validator("rates", "rate_fractions")
    @classmethod
    def _positive(cls, value: list[float]) -> list[float]:
        bad = [v for v in value if not (v > 0 and math.isfinite(v))]
        if bad:
            raise ValueError(f"rates must be positive request rates, not {', '.join(f'{v:g}' for v in bad)}")
        return value

    @model_validator(mode="after")
    def _edge_shape(self):
        if self.edge_delay or self.edge_rate:
            if self.hosts != "emulated":
                raise ValueError('edge_delay and edge_rate need hosts = "emulated"')
            from ccbench.errors import CCBenchError
            from ccbench.topology import LinkShape

            try:
                LinkShape(rate=self.edge_rate, delay=self.edge_delay)
            except CCBenchError as exc:
                raise ValueError(str(exc)) from None
        return self

    @model_validator(mode="after")
    def _some_load(self):
        if not self.rates and not self.rate_fractions and not self.closed_loop:
            raise ValueError("nothing to run: give rates or rate_fractions, or closed_loop = true")
        return self


# --------------------------------------------------------------------------------------------------
# the chain's servers: recorded before they start, stopped at cleanup or by cleanup_stale


@dataclass
class Server:
    name: str
    argv: list[str]
    log: str
    port: int
    pid: int | None = None
    create_time: float | None = None
    user: str | None = None
    #: the signal that shuts it down cleanly (postgres: SIGINT = fast shutdown)
    stop_signal: int = signal.SIGTERM


@dataclass
class ChainState:
    """What one started chain consists of; saved as JSON before each server starts."""

    path: Path
    servers: list[Server] = field(default_factory=list)
    #: directories outside the work directory that the chain made (PostgreSQL's, when root)
    extra_dirs: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    def save(self) -> None:
        doc = {"servers": [vars(s) for s in self.servers], "extra_dirs": self.extra_dirs, "info": self.info}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        os.replace(tmp, self.path)

    @classmethod
    def load(cls, path: Path) -> ChainState:
        doc = json.loads(path.read_text())
        return cls(
            path=path,
            servers=[Server(**s) for s in doc.get("servers", [])],
            extra_dirs=doc.get("extra_dirs", []),
            info=doc.get("info", {}),
        )

    def server(self, name: str) -> Server:
        for s in self.servers:
            if s.name == name:
                return s
        raise KeyError(name)


def _process(server: Server) -> psutil.Process | None:
    """The server's process if it is still the one that was started (pid and start time match)."""
    if not server.pid:
        return None
    try:
        proc = psutil.Process(server.pid)
        if server.create_time is not None and abs(proc.create_time() - server.create_time) > 1.0:
            return None
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except psutil.Error:
        return None


def _stop_server(server: Server, grace: float = 10.0) -> bool:
    """Stop one server and its descendants; True when something was running."""
    proc = _process(server)
    if proc is None:
        return False
    try:
        family = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        family = [proc]
    try:
        proc.send_signal(server.stop_signal)
        proc.wait(grace)
    except psutil.TimeoutExpired:
        pass
    except psutil.Error:
        pass
    for member in family:
        try:
            member.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(family, timeout=5)
    return True


def stop_chain(state: ChainState) -> list[str]:
    stopped = []
    for server in reversed(state.servers):
        if _stop_server(server):
            stopped.append(f"stopped {server.name} (pid {server.pid})")
    for directory in state.extra_dirs:
        if Path(directory).exists():
            shutil.rmtree(directory, ignore_errors=True)
            stopped.append(f"removed {directory}")
    return stopped


def seed_args(p: MicroservicesParams, pg_url: str, redis_address: str) -> list[str]:
    """The Go tier's `seed` subcommand with the plan's dataset: the same on loopback, on emulated hosts
    and in the rendered Kubernetes load Job."""
    return [
        "seed",
        "-pg",
        pg_url,
        "-redis",
        redis_address,
        "-users",
        str(p.users),
        "-posts",
        str(p.posts_per_user),
        "-follows",
        str(p.mean_follows),
        "-zipf",
        str(p.follow_zipf),
        "-seed",
        str(p.seed),
    ]


def state_file(workdir: Path) -> Path:
    """Where the state of the chain serving work directory ``workdir`` is recorded."""
    key = hashlib.sha1(str(Path(workdir).resolve()).encode()).hexdigest()[:12]
    return run_workdir(Path(workdir)) / REGISTRY_DIR / f"chain-{key}.json"


def cleanup_stale(workdir: Path) -> list[str]:
    """Stop the servers and remove the directories that a killed run's chains left under workdir."""
    removed: list[str] = []
    for path in sorted((Path(workdir) / REGISTRY_DIR).glob("chain-*.json")):
        try:
            state = ChainState.load(path)
        except (OSError, ValueError, TypeError):
            continue
        removed += stop_chain(state)
        path.unlink(missing_ok=True)
        removed.append(f"removed {path}")
    return removed


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


#: emulated hosts: tier -> host name (each tier on its own network namespace; the client on "edge")
PLACEMENT = {"nginx": "front", "app": "app", "memcached": "memcached", "redis": "redis", "postgres": "db"}


def run_workdir(path: Path) -> Path:
    """The run's work directory (the one holding the runner's .lock) above path, where `ccbench
    cleanup` looks for emulated hosts; path itself when there is none."""
    for candidate in [path, *path.parents]:
        if (candidate / ".lock").exists():
            return candidate
    return path


class Chain:
    """Starts the servers of one chain in ``directory`` and records them in its state file.

    ``hosts="local"``: every tier on 127.0.0.1. ``hosts="emulated"``: each tier in its own network
    namespace (ccbench.topology) on a back-end segment, nginx also on an edge segment with the load
    generator's host, whose links have the plan's ``edge_delay`` and ``edge_rate``."""

    def __init__(
        self,
        directory: Path,
        params: MicroservicesParams,
        transport: str,
        topology_workdir: Path | None = None,
        state_path: Path | None = None,
    ):
        self.dir = directory
        self.params = params
        self.transport = transport
        self.state = ChainState(path=state_path or directory / "chain-state.json")
        self.state.path.parent.mkdir(parents=True, exist_ok=True)
        self.topology_workdir = topology_workdir or directory
        self.topology = None
        self.hosts: dict[str, Any] = {}
        #: tier -> the address it listens on (and is reached at by the other tiers)
        self.address = {tier: "127.0.0.1" for tier in TIERS}
        self.front_address = "127.0.0.1"

    def _log_tail(self, server: Server) -> str:
        try:
            return tail(Path(server.log).read_text(errors="replace"), 8, 1200)
        except OSError:
            return "(no log)"

    def start(self, server: Server, ready_timeout: float = 30.0, address: str = "127.0.0.1", **popen: Any) -> None:
        self.state.servers.append(server)
        self.state.save()  # recorded before it starts
        host = self.hosts.get(PLACEMENT.get(server.name, ""))
        with open(server.log, "ab") as log:
            try:
                if host is not None:
                    proc = host.popen(
                        server.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **popen
                    )
                else:
                    proc = subprocess.Popen(
                        server.argv,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                        **popen,
                    )
            except OSError as exc:
                raise WorkloadFailed(f"{server.name} did not start: {exc}") from None
        server.pid = proc.pid
        try:
            server.create_time = psutil.Process(proc.pid).create_time()
        except psutil.Error:
            pass
        self.state.save()
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise WorkloadFailed(
                    f"{server.name} exited with {proc.returncode} at start; "
                    f"its log ({server.log}) ends: {self._log_tail(server)}"
                )
            if _listening(address, server.port):
                return
            time.sleep(0.05)
        raise WorkloadFailed(
            f"{server.name} did not listen on {address}:{server.port} within {ready_timeout:g} s; "
            f"its log ({server.log}) ends: {self._log_tail(server)}"
        )

    def _place(self) -> None:
        """Emulated hosts: one namespace per tier plus the edge client's; recorded by ccbench.topology."""
        from ccbench.topology import LinkShape, Topology

        p = self.params
        self.topology = Topology(self.topology_workdir, name="ms")
        self.topology.start()
        self.state.info["topology"] = str(self.topology.directory)
        self.state.save()
        for name in ["edge", *PLACEMENT.values()]:
            self.hosts[name] = self.topology.add_host(name)
        shape = LinkShape(rate=p.edge_rate, delay=p.edge_delay) if (p.edge_rate or p.edge_delay) else None
        # root_access: the runner (root namespace) checks readiness and loads the dataset over the segments
        edge = self.topology.connect([self.hosts["edge"], self.hosts["front"]], shape=shape, root_access=True)
        back = self.topology.connect([self.hosts[h] for h in PLACEMENT.values()], root_access=True)
        self.address = {tier: self.hosts[host].address_on(back) for tier, host in PLACEMENT.items()}
        self.front_address = self.hosts["front"].address_on(edge)

    def stop(self) -> list[str]:
        done = stop_chain(self.state)
        if self.topology is not None:
            done += self.topology.teardown()
            self.topology = None
        return done

    # ---- the tiers

    def start_all(self) -> dict[str, Any]:
        p = self.params
        self.dir.mkdir(parents=True, exist_ok=True)
        if p.hosts == "emulated":
            self._place()
        a = self.address
        nginx_port, app_port, mc_port, redis_port, pg_port = free_ports(5, "127.0.0.1")
        logs = self.dir / "logs"
        logs.mkdir(exist_ok=True)
        root = os.geteuid() == 0

        # PostgreSQL refuses to run as root: as root it runs as the postgres (or nobody) user, in a
        # directory that user can reach
        pg_user = None
        pgdata = self.dir / "pgdata"
        pg_prefix: list[str] = []
        if root:
            pg_user = "postgres" if _user_exists("postgres") else "nobody"
            entry = pwd.getpwnam(pg_user)
            if not _reachable_by(self.dir, pg_user):
                base = Path(tempfile.mkdtemp(prefix="ccbench-pg-"))
                self.state.extra_dirs.append(str(base))
                self.state.save()
                os.chown(base, entry.pw_uid, entry.pw_gid)
                pgdata = base / "pgdata"
            pgdata.mkdir(mode=0o700, exist_ok=True)
            os.chown(pgdata, entry.pw_uid, entry.pw_gid)
            # setpriv execs (no extra process), inside the namespace when emulated
            pg_prefix = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups"]
        bin_dir = pg_bin()
        assert bin_dir is not None
        initdb = subprocess.run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(pgdata),
                "-U",
                "ccbench",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ],
            capture_output=True,
            text=True,
            user=pg_user,
            cwd="/",
        )
        if initdb.returncode != 0:
            raise WorkloadFailed(f"postgres: initdb failed: {tail(initdb.stderr or initdb.stdout, 5, 800)}")
        if self.hosts:
            # the other tiers reach the database over the emulated hosts' segment
            with open(pgdata / "pg_hba.conf", "a") as hba:
                hba.write("host all all samenet trust\n")
        self.start(
            Server(
                name="postgres",
                port=pg_port,
                log=str(logs / "postgres.log"),
                user=pg_user,
                stop_signal=signal.SIGINT,
                argv=[
                    *pg_prefix,
                    str(bin_dir / "postgres"),
                    "-D",
                    str(pgdata),
                    "-p",
                    str(pg_port),
                    "-c",
                    f"listen_addresses={a['postgres']}",
                    "-c",
                    "unix_socket_directories=",
                    "-c",
                    "max_connections=200",
                    "-c",
                    "shared_buffers=128MB",
                ],
            ),
            address=a["postgres"],
            cwd="/",
        )
        pg_url = f"postgres://ccbench@{a['postgres']}:{pg_port}/postgres?sslmode=disable"
        # listening is not accepting: PostgreSQL refuses connections until its start-up has finished
        deadline = time.monotonic() + 60
        while True:
            ready = subprocess.run(
                [
                    str(bin_dir / "pg_isready"),
                    "-q",
                    "-h",
                    a["postgres"],
                    "-p",
                    str(pg_port),
                    "-U",
                    "ccbench",
                    "-d",
                    "postgres",
                ],
                capture_output=True,
            )
            if ready.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise WorkloadFailed(
                    f"postgres did not accept connections within 60 s; its log ends: "
                    f"{self._log_tail(self.state.server('postgres'))}"
                )
            time.sleep(0.1)

        self.start(
            Server(
                name="redis",
                port=redis_port,
                log=str(logs / "redis.log"),
                argv=[
                    "redis-server",
                    "--port",
                    str(redis_port),
                    "--bind",
                    a["redis"],
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(self.dir),
                    "--daemonize",
                    "no",
                    "--protected-mode",
                    "no",
                ],
            ),
            address=a["redis"],
        )
        memcached = [
            "memcached",
            "-l",
            a["memcached"],
            "-p",
            str(mc_port),
            "-U",
            "0",
            "-m",
            "256",
            "-t",
            "2",
            "-c",
            "4096",
        ]
        if root:
            memcached += ["-u", "nobody"]
        self.start(
            Server(name="memcached", port=mc_port, log=str(logs / "memcached.log"), argv=memcached),
            address=a["memcached"],
        )

        seed = subprocess.run(
            [str(socialnet_binary()), *seed_args(p, pg_url, f"{a['redis']}:{redis_port}")],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if seed.returncode != 0:
            raise WorkloadFailed(f"loading the dataset failed: {tail(seed.stderr, 5, 800)}")
        dataset = json.loads(seed.stdout.strip().splitlines()[-1])

        self.start(
            Server(
                name="app",
                port=app_port,
                log=str(logs / "app.log"),
                argv=[
                    str(socialnet_binary()),
                    "serve",
                    "-listen",
                    f"{a['app']}:{app_port}",
                    "-pg",
                    pg_url,
                    "-redis",
                    f"{a['redis']}:{redis_port}",
                    "-memcached",
                    f"{a['memcached']}:{mc_port}",
                    "-pool",
                    str(p.app_pool),
                    "-timeout",
                    f"{p.request_timeout:g}s",
                ],
            ),
            address=a["app"],
        )

        tls = self.transport == "tls"
        ca = cert = key = None
        if tls:
            ca, cert = make_certificate(self.dir / "tls", self.front_address)
            key = cert.with_name("key.pem")
        conf = self.dir / "nginx.conf"
        listen = "0.0.0.0" if self.hosts else "127.0.0.1"
        conf.write_text(
            nginx_config(self.dir, listen, nginx_port, f"{a['app']}:{app_port}", p.nginx_workers, cert, key)
        )
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.dir / "nginx-temp" / sub).mkdir(parents=True, exist_ok=True)
        self.start(
            Server(
                name="nginx",
                port=nginx_port,
                log=str(logs / "nginx-error.log"),
                argv=[
                    "nginx",
                    "-c",
                    str(conf),
                    "-p",
                    str(self.dir),
                    "-e",
                    str(logs / "nginx-error.log"),
                    "-g",
                    "daemon off;",
                ],
            ),
            address=self.front_address,
        )
        scheme = "https" if tls else "http"
        front = self.front_address
        info = {
            **self.state.info,
            "host": front,
            "port": nginx_port,
            "scheme": scheme,
            "base_url": f"{scheme}://{front}:{nginx_port}",
            "cacert": str(ca) if ca else None,
            "access_log": str(self.dir / "logs" / "access.log"),
            "dataset": dataset,
            "transport": self.transport,
            "hosts": p.hosts,
            "pgdata": str(pgdata),
            # False when the postgres user could not reach the work directory (a storage variant's
            # directory under a private parent): the database then is not on the variant's storage
            "pgdata_in_workdir": self.dir in pgdata.parents,
            # the load generator runs in the edge host when there is one
            "client_prefix": ["ip", "netns", "exec", self.hosts["edge"].netns] if self.hosts else [],
            "placement": {tier: {"host": PLACEMENT[tier], "address": a[tier]} for tier in TIERS}
            if self.hosts
            else None,
            "edge": {"delay": p.edge_delay, "rate": p.edge_rate} if self.hosts else None,
        }
        if tls:
            info["transport_cipher"], info["tls_version"] = negotiated_cipher(front, nginx_port, ca)
        self.state.info = info
        self.state.save()
        return info


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _reachable_by(directory: Path, user: str) -> bool:
    """Whether every parent of directory lets user through (PostgreSQL's data directory must be reachable)."""
    result = subprocess.run(["test", "-x", str(directory)], user=user, capture_output=True, cwd="/")
    return result.returncode == 0


def make_certificate(directory: Path, host: str) -> tuple[Path, Path]:
    """A P-256 server certificate for this run, signed by a CA made for this run (openssl CLI; never
    reused across runs). Returns (CA certificate, the server's certificate chain); the server's key is
    beside them as key.pem. Clients verify against the CA (rustls refuses a CA certificate as the
    server's own)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = directory / "ca.pem", directory / "ca-key.pem"
    cert, key, csr = directory / "cert.pem", directory / "key.pem", directory / "cert.csr"
    (directory / "server.ext").write_text(
        f"basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
        f"extendedKeyUsage=serverAuth\nsubjectAltName=IP:{host},DNS:localhost\n"
    )
    steps = [
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=ccbench run CA",
            "-keyout",
            str(ca_key),
            "-out",
            str(ca_cert),
        ],
        [
            "openssl",
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            f"/CN={host}",
            "-keyout",
            str(key),
            "-out",
            str(csr),
        ],
        [
            "openssl",
            "x509",
            "-req",
            "-in",
            str(csr),
            "-CA",
            str(ca_cert),
            "-CAkey",
            str(ca_key),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            str(directory / "server.ext"),
            "-out",
            str(cert),
        ],
    ]
    for argv in steps:
        result = subprocess.run(argv, capture_output=True, text=True)
        if result.returncode != 0:
            raise WorkloadFailed(f"openssl could not make the run's certificate: {tail(result.stderr, 3, 500)}")
    os.chmod(key, 0o600)
    ca_key.unlink()  # nothing else is ever signed with it
    return ca_cert, cert


def negotiated_cipher(host: str, port: int, cert: Path) -> tuple[str, str]:
    context = ssl.create_default_context(cafile=str(cert))
    with socket.create_connection((host, port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname=host) as tls:
            name, version, _ = tls.cipher()
            return name, version


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


# --------------------------------------------------------------------------------------------------
# the request mix


def user_pattern(users: int) -> str:
    return f"[0-9]{{{len(str(users)) - 1}}}"


def mix_url_regex(base_url: str, mix: dict[str, int], users: int) -> str:
    """A rand_regex pattern whose alternatives are the mix's operations, repeated by weight.

    Each repetition carries its own ``b=`` tag so that the alternatives stay distinct (rand_regex picks
    one of them uniformly)."""
    weights = {op: w for op, w in mix.items() if w > 0}
    divisor = reduce(math.gcd, weights.values())
    branches = []
    for op, weight in sorted(weights.items()):
        path = OPERATIONS[op].replace("USER", user_pattern(users))
        for i in range(weight // divisor):
            branches.append(f"{path}&b={op[0]}{i}")
    # oha's rand_regex treats '.' literally ("dot is disabled"); the base URL has no other metacharacter
    return base_url + "(" + "|".join(branches) + ")"


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


# --------------------------------------------------------------------------------------------------
# load generators


def oha_argv(
    url_regex: str, *, rate: float | None, duration: float, connections: int, timeout: float, cacert: str | None
) -> list[str]:
    oha = oha_binary() or "oha"
    # -w: requests still in flight at the deadline are waited for, not counted as aborted
    argv = [
        oha,
        "--no-tui",
        "--output-format",
        "json",
        "-z",
        f"{duration:g}s",
        "-w",
        "-c",
        str(connections),
        "-t",
        f"{timeout:g}s",
        "--rand-regex-url",
        url_regex,
    ]
    if rate is not None:
        argv[1:1] = ["-q", f"{rate:g}", "--latency-correction"]
    if cacert:
        argv[1:1] = ["--cacert", cacert]
    return argv


def parse_oha(text: str) -> dict[str, Any]:
    """oha's JSON summary -> requests, errors, throughput and latency percentiles (ms)."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise WorkloadFailed(f"oha printed no JSON summary: {exc}") from None
    statuses = {int(k): int(v) for k, v in (doc.get("statusCodeDistribution") or {}).items()}
    transport_errors = {str(k): int(v) for k, v in (doc.get("errorDistribution") or {}).items()}
    ok = sum(v for k, v in statuses.items() if 200 <= k < 400)
    bad_status = sum(v for k, v in statuses.items() if not 200 <= k < 400)
    summary = doc.get("summary", {})
    percentiles = doc.get("latencyPercentiles", {})

    def ms(value):
        return None if value is None else float(value) * 1000.0

    return {
        "ok": ok,
        "status_errors": bad_status,
        "transport_errors": sum(transport_errors.values()),
        "error_kinds": {**{f"HTTP {k}": v for k, v in statuses.items() if not 200 <= k < 400}, **transport_errors},
        "duration_s": float(summary.get("total") or 0.0),
        # oha's requestsPerSec counts failed requests too: achieved throughput is the successful ones
        "throughput": ok / float(summary["total"]) if summary.get("total") else 0.0,
        "attempted_per_s": float(summary.get("requestsPerSec") or 0.0),
        "p50": ms(percentiles.get("p50")),
        "p90": ms(percentiles.get("p90")),
        "p99": ms(percentiles.get("p99")),
        "p99.9": ms(percentiles.get("p99.9")),
        "max": ms(summary.get("slowest")),
        "mean": ms(summary.get("average")),
    }


def parse_wrk(text: str) -> dict[str, Any]:
    line = next((ln for ln in text.splitlines() if ln.startswith("CCBENCH ")), None)
    if line is None:
        raise WorkloadFailed(f"wrk printed no summary: {tail(text, 3, 400)}")
    doc = json.loads(line[len("CCBENCH ") :])
    seconds = doc["duration_us"] / 1e6
    errors = doc["connect"] + doc["read"] + doc["write"] + doc["timeout"]
    return {
        "ok": doc["requests"] - doc["status"],
        "status_errors": doc["status"],
        "transport_errors": errors,
        "error_kinds": {k: doc[k] for k in ("connect", "read", "write", "status", "timeout") if doc[k]},
        "duration_s": seconds,
        "throughput": doc["requests"] / seconds if seconds else 0.0,
        "p50": doc["p50"] / 1000,
        "p90": doc["p90"] / 1000,
        "p99": doc["p99"] / 1000,
        "p99.9": doc["p999"] / 1000,
        "max": doc["max"] / 1000,
        "mean": doc["mean"] / 1000,
    }


# --------------------------------------------------------------------------------------------------
# per-tier CPU and latency shares


def tier_cpu_seconds(state: ChainState) -> dict[str, float]:
    """CPU seconds (user + system) consumed so far by each tier's process tree."""
    result: dict[str, float] = {}
    for server in state.servers:
        proc = _process(server)
        if proc is None:
            continue
        total = 0.0
        try:
            members = [proc, *proc.children(recursive=True)]
        except psutil.Error:
            members = [proc]
        for member in members:
            try:
                times = member.cpu_times()
                total += times.user + times.system
            except psutil.Error:
                pass
        result[server.name] = total
    return result


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


def tier_latency_ms(rows, start: float, stop: float, client_mean_ms: float | None) -> dict[str, float]:
    """Mean time per request spent in each tier during [start, stop] (ms).

    nginx = request time - upstream time; network between nginx and app (and the app's HTTP stack) =
    upstream time - the app's own total; the app = its total less what it waited on the stores;
    postgres/redis/memcached = the app's waits on each (Server-Timing); client = the load generator's
    mean latency less nginx's request time (loopback or the edge link, and the client's queue)."""
    selected = [r for r in rows if start <= r[0] <= stop + 1.0 and r[3] is not None]
    if not selected:
        return {}
    n = len(selected)
    mean = lambda values: sum(values) / n  # noqa: E731
    request = mean([r[2] * 1000 for r in selected])
    upstream = mean([r[3] * 1000 for r in selected])
    app_total = mean([r[4].get("app", 0.0) for r in selected])
    stores = {
        name: mean([r[4].get(key, 0.0) for r in selected])
        for name, key in (("postgres", "pg"), ("redis", "redis"), ("memcached", "memcached"))
    }
    result = {
        "nginx": max(request - upstream, 0.0),
        "proxy_hop": max(upstream - app_total, 0.0),
        "app": max(app_total - sum(stores.values()), 0.0),
        **stores,
    }
    if client_mean_ms is not None:
        result["client"] = max(client_mean_ms - request, 0.0)
    return result


# --------------------------------------------------------------------------------------------------


class Microservices(Workload):
    kind = "microservices"
    description = (
        "seed 002: a DeathStarBench-like social network (nginx -> Go -> memcached/Redis -> PostgreSQL) "
        "under open-loop (oha) and closed-loop (wrk) load: latency percentiles per rate and per tier"
    )
    Params = MicroservicesParams
    variant_axes = frozenset({"transport", "storage"})
    matrix_params = frozenset({"rates", "rate_fractions"})

    def __init__(self, name: str, params: MicroservicesParams):
        super().__init__(name, params)
        #: the chains this (runner-side) instance started, by work directory: stopped in cleanup
        self._chains: dict[str, Chain] = {}

    def requirements(self) -> str | None:
        hint = "run 'bash scripts/setup.sh --with microservices'"
        missing = missing_tools("nginx", "redis-server", "memcached", "openssl")
        if self.params.closed_loop:
            missing += missing_tools("wrk")
        if oha_binary() is None:
            missing.append("oha")
        if pg_bin() is None:
            missing.append("postgresql (initdb, postgres)")
        if missing:
            return f"missing {', '.join(missing)}: {hint}"
        if not socialnet_binary().exists():
            return f"the application tier is not built ({socialnet_binary()}): {hint}"
        if self.params.hosts == "emulated":
            from ccbench.topology import LinkShape, available

            p = self.params
            reason = available(
                LinkShape(rate=p.edge_rate, delay=p.edge_delay) if (p.edge_rate or p.edge_delay) else None
            )
            if reason:
                return f'hosts = "emulated": {reason} (hosts = "local" runs every tier on loopback)'
            if os.geteuid() == 0 and shutil.which("setpriv") is None:
                return "setpriv is missing (util-linux): apt-get install util-linux"
        return None

    # ---- prepare / cleanup: the chain's life

    @staticmethod
    def _chain_dir(workdir: Path) -> Path:
        return workdir / "chain"

    def prepare(self, ctx: PrepareContext) -> None:
        transport = ctx.variant.get("transport", "plain")
        if transport not in ("plain", "tls"):
            raise WorkloadFailed(f"transport {transport!r} is not supported by the microservices workload (plain, tls)")
        directory = self._chain_dir(ctx.workdir)
        old = state_file(ctx.workdir)
        if old.exists():
            stop_chain(ChainState.load(old))
        shutil.rmtree(directory, ignore_errors=True)
        chain = Chain(directory, self.params, transport, topology_workdir=run_workdir(ctx.workdir), state_path=old)
        try:
            info = chain.start_all()
            info["rates"], info["capacity"] = self._rates(ctx, info)
            chain.state.info = info
            chain.state.save()
        except BaseException:
            chain.stop()
            raise
        self._chains[str(ctx.workdir)] = chain
        ctx.raw_dir.mkdir(parents=True, exist_ok=True)
        (ctx.raw_dir / "chain.json").write_text(json.dumps(info, indent=1))

    def _rates(self, ctx: PrepareContext, info: dict[str, Any]) -> tuple[list[float], dict[str, Any] | None]:
        """The sweep's rates: the plan's, or fractions of a capacity probed once per bundle (on the
        first variant prepared, so that every variant is driven at the same rates)."""
        p = self.params
        if p.rates:
            return sorted(p.rates), None
        if not p.rate_fractions:
            return [], None
        shared = ctx.raw_dir.parent / "capacity.json"
        if shared.exists():
            capacity = json.loads(shared.read_text())
        else:
            argv = info.get("client_prefix", []) + oha_argv(
                mix_url_regex(info["base_url"], p.mix, p.users),
                rate=None,
                duration=p.capacity_seconds,
                connections=p.connections,
                timeout=p.request_timeout,
                cacert=info.get("cacert"),
            )
            result = subprocess.run(argv, capture_output=True, text=True, timeout=p.capacity_seconds + 60)
            if result.returncode != 0:
                raise WorkloadFailed(
                    f"the capacity probe failed: oha exited with {result.returncode}: {tail(result.stderr, 3, 500)}"
                )
            summary = parse_oha(result.stdout)
            if summary["ok"] == 0:
                raise WorkloadFailed(f"the capacity probe got no successful response: {summary['error_kinds']}")
            capacity = {
                "rps": summary["throughput"],
                "variant": ctx.variant,
                "seconds": p.capacity_seconds,
                "connections": p.connections,
                "errors": summary["status_errors"] + summary["transport_errors"],
            }
            shared.parent.mkdir(parents=True, exist_ok=True)
            shared.write_text(json.dumps(capacity, indent=1))
        rates = sorted({max(1.0, round(capacity["rps"] * f)) for f in p.rate_fractions})
        return rates, capacity

    def cleanup(self, ctx: PrepareContext) -> None:
        chain = self._chains.pop(str(ctx.workdir), None)
        if chain is not None:
            chain.stop()
        path = state_file(ctx.workdir)
        if path.exists():
            stop_chain(ChainState.load(path))
            path.unlink(missing_ok=True)

    # ---- run: the load

    def run(self, ctx: ExecutionContext) -> list[Measurement]:
        p = self.params
        path = state_file(ctx.workdir)
        if not path.exists():
            raise WorkloadFailed(f"the chain is not running (no {path}); prepare did not start it")
        state = ChainState.load(path)
        info = state.info
        self._check_alive(state)
        common = {"transport": info["transport"], "hosts": info.get("hosts", "local")}
        if info.get("edge"):
            common["edge_delay"], common["edge_rate"] = info["edge"]["delay"], info["edge"]["rate"]
        if info.get("transport_cipher"):
            common["transport_cipher"] = info["transport_cipher"]
            common["tls_version"] = info.get("tls_version")
        if info.get("capacity"):
            common["capacity_rps"] = round(info["capacity"]["rps"], 1)
        if info.get("pgdata_in_workdir") is False:
            common["pgdata_outside_variant"] = info["pgdata"]
        access_log = Path(info["access_log"])
        offset = access_log.stat().st_size if access_log.exists() else 0
        runs: list[tuple[dict[str, Any], dict[str, Any], float, float, dict[str, float], dict[str, float]]] = []
        cores = len(os.sched_getaffinity(0))
        failures: list[str] = []
        url_regex = mix_url_regex(info["base_url"], p.mix, p.users)
        client = info.get("client_prefix") or []

        def load(argv: list[str], log_name: str, parse, case: dict[str, Any], where: str) -> list[str]:
            """Run one load generator, timed and with the tiers' CPU read around it; its failures."""
            before = tier_cpu_seconds(state)
            start = time.time()
            result = ctx.run_command(client + argv, log_name=log_name, check=False)
            stop = time.time()
            after = tier_cpu_seconds(state)
            if result.returncode != 0:
                raise WorkloadFailed(
                    f"{Path(argv[0]).name} exited with {result.returncode} at {where}: "
                    f"{tail(result.stderr or result.stdout, 3, 500)}"
                )
            summary = parse(result.stdout)
            summary["loadgen_cpu_s"] = result.user_s + result.sys_s
            summary["wall_s"] = result.wall_s
            runs.append((case, summary, start, stop, before, after))
            return self._error_check(summary, where, state)

        for rate in info.get("rates", []):
            argv = oha_argv(
                url_regex,
                rate=rate,
                duration=p.duration,
                connections=p.connections,
                timeout=p.request_timeout,
                cacert=info.get("cacert"),
            )
            failures += load(argv, f"oha-rate-{rate:g}", parse_oha, {"mode": "open", "rate": rate}, f"{rate:g} req/s")
        if p.closed_loop:
            script = ctx.raw_dir / "mix.lua"
            script.write_text(wrk_script(p.mix, p.users))
            failures += load(
                [
                    "wrk",
                    "-t",
                    str(p.wrk_threads),
                    "-c",
                    str(p.wrk_connections),
                    "-d",
                    f"{p.wrk_duration:g}s",
                    "--timeout",
                    f"{p.request_timeout:g}s",
                    "-s",
                    str(script),
                    info["base_url"],
                ],
                "wrk",
                parse_wrk,
                {"mode": "closed", "connections": p.wrk_connections},
                "the closed-loop run",
            )
        # nginx flushes its access log every 500 ms
        time.sleep(0.7)
        rows, _ = read_access_log(access_log, offset)
        measurements: list[Measurement] = []
        for case, summary, start, stop, before, after in runs:
            measurements += self._measurements(case, summary, start, stop, before, after, rows, cores, common)
        (ctx.raw_dir / "summary.json").write_text(
            json.dumps([{"case": c, **s} for c, s, *_ in runs], indent=1, default=str)
        )
        if failures:
            raise WorkloadFailed(
                "; ".join(failures) + f" (samples of every rate kept in {ctx.raw_dir / 'summary.json'})"
            )
        return measurements

    def _check_alive(self, state: ChainState) -> list[str]:
        dead = [s.name for s in state.servers if _process(s) is None]
        if dead:
            raise WorkloadFailed(f"tier(s) not running: {', '.join(dead)}")
        return dead

    def _error_check(self, summary: dict[str, Any], where: str, state: ChainState) -> list[str]:
        errors = summary["status_errors"] + summary["transport_errors"]
        total = errors + summary["ok"]
        problems = []
        if total == 0:
            problems.append(f"no request completed at {where}")
        elif errors / total > self.params.max_error_ratio:
            kinds = ", ".join(f"{k}: {v}" for k, v in sorted(summary["error_kinds"].items()))
            problems.append(f"{errors} of {total} requests failed at {where} ({kinds})")
        if problems:
            dead = [s.name for s in state.servers if _process(s) is None]
            if dead:
                problems.append(f"tier(s) no longer running: {', '.join(dead)}")
        return problems

    @staticmethod
    def _measurements(case, summary, start, stop, before, after, rows, cores, common) -> list[Measurement]:
        wall = max(stop - start, 1e-9)
        errors = summary["status_errors"] + summary["transport_errors"]
        meta = {**common, "requests_ok": summary["ok"], "error_kinds": summary["error_kinds"]}
        out = [
            Measurement(
                metric="throughput",
                unit="req/s",
                value=summary["throughput"],
                better="higher",
                case=case,
                metadata=meta,
            ),
            Measurement(metric="errors", unit="requests", value=errors, case=case, metadata=meta),
        ]
        for q in ("p50", "p90", "p99", "p99.9", "max"):
            if summary.get(q) is not None:
                out.append(Measurement(metric=f"latency_{q}", unit="ms", value=summary[q], case=case, metadata=meta))
        loadgen_util = summary["loadgen_cpu_s"] / max(summary["wall_s"], 1e-9)
        tier_util = {t: (after.get(t, 0.0) - before.get(t, 0.0)) / wall for t in after}
        for tier, util in sorted(tier_util.items()):
            out.append(
                Measurement(
                    metric="tier_cpu",
                    unit="cores",
                    value=util,
                    better=None,
                    case={**case, "tier": tier},
                    metadata=common,
                )
            )
        out.append(
            Measurement(metric="loadgen_cpu", unit="cores", value=loadgen_util, better=None, case=case, metadata=common)
        )
        shortfall = case.get("rate") is not None and summary["throughput"] < 0.95 * case["rate"]
        busiest = max(tier_util.values(), default=0.0)
        saturated = loadgen_util >= 0.9 * cores or (shortfall and loadgen_util > busiest)
        out.append(
            Measurement(
                metric="client_saturated",
                unit="bool",
                value=float(saturated),
                better=None,
                case=case,
                metadata={
                    **common,
                    "loadgen_cores": round(loadgen_util, 3),
                    "cores": cores,
                    "busiest_tier_cores": round(busiest, 3),
                    "rate_shortfall": bool(shortfall),
                },
            )
        )
        shares = tier_latency_ms(rows, start, stop, summary.get("mean"))
        total = sum(shares.values())
        for tier, value in sorted(shares.items()):
            out.append(
                Measurement(
                    metric="tier_latency",
                    unit="ms",
                    value=value,
                    case={**case, "tier": tier},
                    metadata={
                        **common,
                        "share": value / total if total else None,
                        "basis": "mean per request: nginx access log and Server-Timing",
                    },
                )
            )
        return out


# --------------------------------------------------------------------------------------------------
# the same chain as Kubernetes manifests, for confidential containers (rendered, validated offline, not run here)

K8S_PORTS = {"nginx": 8080, "app": 8080, "memcached": 11211, "redis": 6379, "postgres": 5432}
K8S_IMAGES = {"nginx": "nginx:1.27", "memcached": "memcached:1.6", "redis": "redis:7", "postgres": "postgres:15"}


def k8s_manifests(
    params: MicroservicesParams,
    *,
    app_image: str,
    loadgen_image: str,
    runtime_class: str | None,
    namespace: str = "ccbench-socialnet",
    transport: str = "plain",
    rate: float = 100.0,
    tls_secret: str = "socialnet-tls",
    images: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Deployments and Services for every tier (with ``runtimeClassName`` = runtime_class, e.g.
    ``kata-qemu-snp``), nginx's configuration as a ConfigMap, and a load Job (default runtime: the
    client stands for the edge device) that seeds the dataset, then runs oha open-loop at ``rate``
    with the plan's mix. ``app_image`` holds services/socialnet (see its Dockerfile); ``loadgen_image``
    an ``oha`` binary. With transport = "tls", nginx serves TLS 1.3 with the certificate and key of
    the Secret ``tls_secret`` (keys tls.crt and tls.key), which the user creates."""
    from ccbench.fleet import k8s

    if transport not in ("plain", "tls"):
        raise WorkloadFailed(f"transport {transport!r}: the manifests support plain and tls")
    if not (rate > 0 and math.isfinite(rate)):
        raise WorkloadFailed(f"rate must be a positive request rate, not {rate:g}")
    images = {**K8S_IMAGES, **(images or {})}
    p = params
    objects: list[dict[str, Any]] = [k8s.namespace(namespace)]
    if runtime_class:
        objects.append(k8s.runtime_class(runtime_class))
    tls = transport == "tls"
    cert = Path("/etc/ccbench/tls/tls.crt") if tls else None
    key = Path("/etc/ccbench/tls/tls.key") if tls else None
    conf = nginx_config(
        Path("/tmp/ccbench"), "0.0.0.0", K8S_PORTS["nginx"], f"app:{K8S_PORTS['app']}", p.nginx_workers, cert, key
    )
    objects.append(k8s.config_map("nginx-conf", namespace, {"nginx.conf": conf}))
    pg_url = f"postgres://ccbench@postgres:{K8S_PORTS['postgres']}/postgres?sslmode=disable"
    containers = {
        "postgres": k8s.container(
            "postgres",
            images["postgres"],
            ports=[K8S_PORTS["postgres"]],
            cpu="1",
            memory="1Gi",
            env={"POSTGRES_USER": "ccbench", "POSTGRES_DB": "postgres", "POSTGRES_HOST_AUTH_METHOD": "trust"},
        ),
        "redis": k8s.container(
            "redis",
            images["redis"],
            args=["--save", "", "--appendonly", "no", "--protected-mode", "no"],
            ports=[K8S_PORTS["redis"]],
            cpu="500m",
            memory="512Mi",
        ),
        "memcached": k8s.container(
            "memcached",
            images["memcached"],
            args=["-m", "256", "-t", "2", "-c", "4096"],
            ports=[K8S_PORTS["memcached"]],
            cpu="500m",
            memory="512Mi",
        ),
        "app": k8s.container(
            "app",
            app_image,
            args=[
                "serve",
                "-listen",
                f"0.0.0.0:{K8S_PORTS['app']}",
                "-pg",
                pg_url,
                "-redis",
                f"redis:{K8S_PORTS['redis']}",
                "-memcached",
                f"memcached:{K8S_PORTS['memcached']}",
                "-pool",
                str(p.app_pool),
                "-timeout",
                f"{p.request_timeout:g}s",
            ],
            ports=[K8S_PORTS["app"]],
            cpu="1",
            memory="512Mi",
        ),
        "nginx": k8s.container(
            "nginx",
            images["nginx"],
            command=["sh", "-c"],
            args=[
                "mkdir -p /tmp/ccbench/logs /tmp/ccbench/nginx-temp && "
                "exec nginx -c /etc/ccbench/nginx/nginx.conf -p /tmp/ccbench -g 'daemon off;'"
            ],
            ports=[K8S_PORTS["nginx"]],
            cpu="1",
            memory="256Mi",
            volume_mounts=[
                k8s.volume_mount("nginx-conf", "/etc/ccbench/nginx", read_only=True),
                k8s.volume_mount("scratch", "/tmp/ccbench"),
            ]
            + ([k8s.volume_mount("tls", "/etc/ccbench/tls", read_only=True)] if tls else []),
        ),
    }
    for tier in TIERS:
        volumes = None
        if tier == "nginx":
            volumes = [{"name": "nginx-conf", "configMap": {"name": "nginx-conf"}}, {"name": "scratch", "emptyDir": {}}]
            if tls:
                volumes.append({"name": "tls", "secret": {"secretName": tls_secret}})
        spec = k8s.pod_spec([containers[tier]], runtime_class=runtime_class, volumes=volumes)
        objects.append(k8s.deployment(tier if tier != "nginx" else "front", namespace, spec))
        objects.append(
            k8s.service(
                tier if tier != "nginx" else "front",
                namespace,
                selector={k8s.APP_LABEL: tier if tier != "nginx" else "front"},
                ports=[K8S_PORTS[tier]],
            )
        )
    base = f"{'https' if tls else 'http'}://front:{K8S_PORTS['nginx']}"
    load = k8s.container(
        "oha",
        loadgen_image,
        command=["oha"],
        args=[
            *oha_argv(
                mix_url_regex(base, p.mix, p.users),
                rate=rate,
                duration=p.duration,
                connections=p.connections,
                timeout=p.request_timeout,
                cacert=None,
            )[1:],
            *(["--insecure"] if tls else []),
        ],
        cpu="1",
        memory="256Mi",
    )
    seed = k8s.container(
        "seed",
        app_image,
        args=seed_args(p, pg_url, f"redis:{K8S_PORTS['redis']}"),
        cpu="500m",
        memory="256Mi",
    )
    load_spec = k8s.pod_spec([load])
    load_spec["initContainers"] = [seed]
    objects.append(k8s.job("load", namespace, load_spec, active_deadline_s=int(p.duration + 600)))
    return objects
