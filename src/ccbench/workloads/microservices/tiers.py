"""One function per tier of the chain: PostgreSQL, Redis, memcached, the dataset, the Go application
tier and nginx, each started from the Debian packages' (or ccbench's own) binaries through
``Chain.start``, which records the server before it starts and waits until it listens."""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol

from ccbench.basics.pki import RunCA
from ccbench.workloads.base import WorkloadFailed, tail
from ccbench.workloads.microservices.nginx import make_temp_dirs, nginx_argv, nginx_config
from ccbench.workloads.microservices.params import MicroservicesParams
from ccbench.workloads.microservices.state import ChainState, Server


class Chain(Protocol):
    """What a tier's start reads and calls of the chain it belongs to
    (ccbench.workloads.microservices.chain.Chain, which imports this module: the tiers name only this)."""

    dir: Path
    params: MicroservicesParams
    transport: str
    state: ChainState
    hosts: dict[str, Any]
    address: dict[str, str]
    front_address: str

    def log_tail(self, server: Server) -> str: ...

    def start(self, server: Server, ready_timeout: float = 30.0, address: str = "127.0.0.1", **popen: Any) -> None: ...


REPO = Path(__file__).resolve().parents[4]
SERVICE_DIR = REPO / "services" / "socialnet"
PG_BIN_CANDIDATES = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
#: how long PostgreSQL may take after it listens until it accepts connections
PG_ACCEPT_TIMEOUT_S = 60


def socialnet_binary() -> Path:
    return Path(os.environ.get("CCBENCH_SOCIALNET", SERVICE_DIR / "bin" / "socialnet"))


def pg_bin() -> Path | None:
    for candidate in PG_BIN_CANDIDATES:
        if (candidate / "postgres").exists() and (candidate / "initdb").exists():
            return candidate
    return None


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


def app_args(p: MicroservicesParams, listen: str, pg_url: str, redis_address: str, memcached_address: str) -> list[str]:
    """The Go tier's `serve` subcommand: on loopback, on emulated hosts and in the Kubernetes Deployment."""
    return [
        "serve",
        "-listen",
        listen,
        "-pg",
        pg_url,
        "-redis",
        redis_address,
        "-memcached",
        memcached_address,
        "-pool",
        str(p.app_pool),
        "-timeout",
        f"{p.request_timeout:g}s",
    ]


# ---- PostgreSQL


def start_postgres(chain: Chain, port: int) -> tuple[str, Path]:
    """A fresh cluster (initdb) served on the chain's database address; (connection URL, data directory)."""
    address = chain.address["postgres"]
    pgdata, pg_user, pg_prefix = _postgres_directory(chain)
    bin_dir = pg_bin()
    assert bin_dir is not None
    _initdb(bin_dir, pgdata, pg_user)
    if chain.hosts:
        # the other tiers reach the database over the emulated hosts' segment
        with open(pgdata / "pg_hba.conf", "a") as hba:
            hba.write("host all all samenet trust\n")
    chain.start(
        Server(
            name="postgres",
            port=port,
            log=str(chain.dir / "logs" / "postgres.log"),
            user=pg_user,
            stop_signal=signal.SIGINT,
            argv=[
                *pg_prefix,
                str(bin_dir / "postgres"),
                "-D",
                str(pgdata),
                "-p",
                str(port),
                "-c",
                f"listen_addresses={address}",
                "-c",
                "unix_socket_directories=",
                "-c",
                "max_connections=200",
                "-c",
                "shared_buffers=128MB",
            ],
        ),
        address=address,
        cwd="/",
    )
    _wait_accepting(chain, bin_dir, address, port)
    return f"postgres://ccbench@{address}:{port}/postgres?sslmode=disable", pgdata


def _postgres_directory(chain: Chain) -> tuple[Path, str | None, list[str]]:
    """(data directory, the user PostgreSQL runs as, the prefix that runs it as that user).

    PostgreSQL refuses to run as root: as root it runs as the postgres (or nobody) user, in a
    directory that user can reach."""
    pgdata = chain.dir / "pgdata"
    if os.geteuid() != 0:
        return pgdata, None, []
    pg_user = "postgres" if _user_exists("postgres") else "nobody"
    entry = pwd.getpwnam(pg_user)
    if not _reachable_by(chain.dir, pg_user):
        base = Path(tempfile.mkdtemp(prefix="ccbench-pg-"))
        chain.state.extra_dirs.append(str(base))
        chain.state.save()
        os.chown(base, entry.pw_uid, entry.pw_gid)
        pgdata = base / "pgdata"
    pgdata.mkdir(mode=0o700, exist_ok=True)
    os.chown(pgdata, entry.pw_uid, entry.pw_gid)
    # setpriv execs (no extra process), inside the namespace when emulated
    return pgdata, pg_user, ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups"]


def _initdb(bin_dir: Path, pgdata: Path, pg_user: str | None) -> None:
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


def _wait_accepting(chain: Chain, bin_dir: Path, address: str, port: int) -> None:
    """Listening is not accepting: PostgreSQL refuses connections until its start-up has finished."""
    deadline = time.monotonic() + PG_ACCEPT_TIMEOUT_S
    while True:
        ready = subprocess.run(
            [str(bin_dir / "pg_isready"), "-q", "-h", address, "-p", str(port), "-U", "ccbench", "-d", "postgres"],
            capture_output=True,
        )
        if ready.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise WorkloadFailed(
                f"postgres did not accept connections within {PG_ACCEPT_TIMEOUT_S} s; its log ends: "
                f"{chain.log_tail(chain.state.server('postgres'))}"
            )
        time.sleep(0.1)


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


# ---- the caches


def start_redis(chain: Chain, port: int) -> None:
    address = chain.address["redis"]
    chain.start(
        Server(
            name="redis",
            port=port,
            log=str(chain.dir / "logs" / "redis.log"),
            argv=[
                "redis-server",
                "--port",
                str(port),
                "--bind",
                address,
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(chain.dir),
                "--daemonize",
                "no",
                "--protected-mode",
                "no",
            ],
        ),
        address=address,
    )


def start_memcached(chain: Chain, port: int) -> None:
    address = chain.address["memcached"]
    argv = ["memcached", "-l", address, "-p", str(port), "-U", "0", "-m", "256", "-t", "2", "-c", "4096"]
    if os.geteuid() == 0:
        argv += ["-u", "nobody"]
    chain.start(
        Server(name="memcached", port=port, log=str(chain.dir / "logs" / "memcached.log"), argv=argv), address=address
    )


# ---- the application tier


def load_dataset(chain: Chain, pg_url: str, redis_address: str) -> dict[str, Any]:
    """The seeded dataset loaded into PostgreSQL and Redis; the Go tier's summary of it."""
    seed = subprocess.run(
        [str(socialnet_binary()), *seed_args(chain.params, pg_url, redis_address)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if seed.returncode != 0:
        raise WorkloadFailed(f"loading the dataset failed: {tail(seed.stderr, 5, 800)}")
    return json.loads(seed.stdout.strip().splitlines()[-1])


def start_app(chain: Chain, port: int, pg_url: str, redis_address: str, memcached_address: str) -> None:
    address = chain.address["app"]
    chain.start(
        Server(
            name="app",
            port=port,
            log=str(chain.dir / "logs" / "app.log"),
            argv=[
                str(socialnet_binary()),
                *app_args(chain.params, f"{address}:{port}", pg_url, redis_address, memcached_address),
            ],
        ),
        address=address,
    )


# ---- the front end


def start_nginx(chain: Chain, port: int, app_address: str) -> Path | None:
    """nginx in front of the application tier, serving TLS 1.3 with transport = "tls"; the run CA's
    certificate that clients verify the server with (None for plain HTTP)."""
    ca = cert = key = None
    if chain.transport == "tls":
        ca, cert = make_certificate(chain.dir / "tls", chain.front_address)
        key = cert.with_name("key.pem")
    conf = chain.dir / "nginx.conf"
    listen = "0.0.0.0" if chain.hosts else "127.0.0.1"
    conf.write_text(nginx_config(chain.dir, listen, port, app_address, chain.params.nginx_workers, cert, key))
    make_temp_dirs(chain.dir)
    error_log = chain.dir / "logs" / "nginx-error.log"
    chain.start(
        Server(name="nginx", port=port, log=str(error_log), argv=nginx_argv(conf, chain.dir, error_log)),
        address=chain.front_address,
    )
    return ca


def make_certificate(directory: Path, host: str) -> tuple[Path, Path]:
    """A P-256 server certificate for this run (subject alternative names: host's IP address and
    localhost), signed by a CA made for this run whose key is never written, so nothing else is ever
    signed with it. Returns (CA certificate, the server's certificate); the server's key is beside
    them as key.pem. Clients verify against the CA (rustls refuses a CA certificate as the server's own)."""
    directory.mkdir(parents=True, exist_ok=True)
    authority = RunCA.create("ccbench run CA", key_type="ec-p256")
    ca_cert = authority.write_certificate(directory / "ca.pem")
    cert, _ = authority.issue(host, names=[host, "localhost"], server=True).write(
        directory / "cert.pem", directory / "key.pem"
    )
    return ca_cert, cert
