"""The workload: requirements, the chain's life per variant (prepare, cleanup, and what a killed run
left), and each execution's load (oha's open-loop rates and wrk's closed loop)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from ccbench.basics.fsutil import write_json_atomic
from ccbench.model import Measurement
from ccbench.workloads.base import (
    ExecutionContext,
    PrepareContext,
    Workload,
    WorkloadFailed,
    missing_tools,
    tail,
)
from ccbench.workloads.microservices.accounting import measurements, tier_cpu_seconds
from ccbench.workloads.microservices.chain import Chain
from ccbench.workloads.microservices.nginx import read_access_log
from ccbench.workloads.microservices.oha import mix_url_regex, oha_argv, oha_binary, parse_oha
from ccbench.workloads.microservices.params import MicroservicesParams
from ccbench.workloads.microservices.state import (
    ChainState,
    cleanup_stale,
    run_workdir,
    server_process,
    state_file,
    stop_chain,
)
from ccbench.workloads.microservices.tiers import pg_bin, socialnet_binary
from ccbench.workloads.microservices.wrk import parse_wrk, wrk_argv, wrk_script

#: one load generator's run: (case, parsed summary, start, stop, tiers' CPU seconds before, after)
LoadRun = tuple[dict[str, Any], dict[str, Any], float, float, dict[str, float], dict[str, float]]


def run_metadata(info: dict[str, Any]) -> dict[str, Any]:
    """What every sample of an execution carries about the chain it measured (from its state's info)."""
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
    return common


class Microservices(Workload):
    kind = "microservices"
    description = (
        "seed 002: a DeathStarBench-like social network (nginx -> Go -> memcached/Redis -> PostgreSQL) "
        "under open-loop (oha) and closed-loop (wrk) load: latency percentiles per rate and per tier"
    )
    Params = MicroservicesParams
    variant_axes = frozenset({"transport", "storage"})
    matrix_params = frozenset({"rates", "rate_fractions"})
    #: a request's latency at each offered rate (and under closed-loop load); throughput follows the
    #: offered rate, and the tiers' CPU and latency shares explain the result
    primary_metrics = ("latency_p50", "latency_p99")
    setup_component: ClassVar[str | None] = "microservices"

    def __init__(self, name: str, params: MicroservicesParams):
        super().__init__(name, params)
        #: the chains this (runner-side) instance started, by work directory: stopped in cleanup
        self._chains: dict[str, Chain] = {}

    def requirements(self) -> str | None:
        hint = "run 'bash scripts/setup.sh --with microservices'"
        missing = missing_tools("nginx", "redis-server", "memcached")
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

    @classmethod
    def cleanup_stale(cls, workdir: Path) -> list[str]:
        """Stop the servers and remove the directories that a killed run's chains left under workdir."""
        return cleanup_stale(workdir)

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
        ctx.register_servers(server.pid for server in chain.state.servers)
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
            # read by every later variant's prepare, also after a resumed run: never half written
            write_json_atomic(shared, capacity, indent=1)
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
        state = self._running_chain(ctx)
        info = state.info
        self._check_alive(state)
        common = run_metadata(info)
        access_log = Path(info["access_log"])
        offset = access_log.stat().st_size if access_log.exists() else 0
        runs: list[LoadRun] = []
        cores = len(os.sched_getaffinity(0))
        failures: list[str] = []
        url_regex = mix_url_regex(info["base_url"], p.mix, p.users)
        client = info.get("client_prefix") or []
        for rate in info.get("rates", []):
            argv = oha_argv(
                url_regex,
                rate=rate,
                duration=p.duration,
                connections=p.connections,
                timeout=p.request_timeout,
                cacert=info.get("cacert"),
            )
            case = {"mode": "open", "rate": rate}
            failures += self._drive(
                ctx, state, runs, client, argv, f"oha-rate-{rate:g}", parse_oha, case, f"{rate:g} req/s"
            )
        if p.closed_loop:
            script = ctx.raw_dir / "mix.lua"
            script.write_text(wrk_script(p.mix, p.users))
            argv = wrk_argv(
                info["base_url"],
                script=script,
                threads=p.wrk_threads,
                connections=p.wrk_connections,
                duration=p.wrk_duration,
                timeout=p.request_timeout,
            )
            case = {"mode": "closed", "connections": p.wrk_connections}
            failures += self._drive(ctx, state, runs, client, argv, "wrk", parse_wrk, case, "the closed-loop run")
        # nginx flushes its access log every 500 ms
        time.sleep(0.7)
        rows, _ = read_access_log(access_log, offset)
        samples: list[Measurement] = []
        for case, summary, start, stop, before, after in runs:
            samples += measurements(case, summary, start, stop, before, after, rows, cores, common)
        (ctx.raw_dir / "summary.json").write_text(
            json.dumps([{"case": c, **s} for c, s, *_ in runs], indent=1, default=str)
        )
        if failures:
            raise WorkloadFailed(
                "; ".join(failures) + f" (samples of every rate kept in {ctx.raw_dir / 'summary.json'})"
            )
        return samples

    @staticmethod
    def _running_chain(ctx: ExecutionContext) -> ChainState:
        path = state_file(ctx.workdir)
        if not path.exists():
            raise WorkloadFailed(f"the chain is not running (no {path}); prepare did not start it")
        return ChainState.load(path)

    def _drive(
        self,
        ctx: ExecutionContext,
        state: ChainState,
        runs: list[LoadRun],
        client: list[str],
        argv: list[str],
        log_name: str,
        parse: Callable[[str], dict[str, Any]],
        case: dict[str, Any],
        where: str,
    ) -> list[str]:
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

    def _check_alive(self, state: ChainState) -> list[str]:
        dead = [s.name for s in state.servers if server_process(s) is None]
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
            dead = [s.name for s in state.servers if server_process(s) is None]
            if dead:
                problems.append(f"tier(s) no longer running: {', '.join(dead)}")
        return problems
