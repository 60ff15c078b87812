"""A cloud run's life: sweep what killed runs left, make the shared resources and the arms (each
create journaled before its call), hand the arms to the caller, and tear everything down in a
``finally`` and on SIGINT, SIGTERM and SIGHUP. During the teardown the deletions are sent with the
stop signals held back; a second signal then only stops the waiting for them, never the deleting. What
a ``kill -9`` leaves, ``sweep`` finds by the run's tag: a run whose journal on this host is no longer
locked, or any run past its expiry. Nothing without the run tag is touched."""

from __future__ import annotations

import secrets
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ccbench.machines.cloud import journal as journals
from ccbench.machines.cloud.access import Access
from ccbench.machines.cloud.provider import CloudError, Found, Launched, Provider, RunContext, StopWaiting
from ccbench.stopping import STOP_SIGNALS, catch_stop_signals, restore_signals

Echo = Callable[[str], None]


def new_run_id() -> str:
    """Short, lowercase and label-safe (GCP labels, Azure group names, EC2 key names)."""
    return time.strftime("%Y%m%d%H%M", time.gmtime()) + "-" + secrets.token_hex(3)


def provider_for(cloud) -> Provider:
    if cloud.provider == "aws":
        from ccbench.machines.cloud.aws import Aws

        return Aws(cloud)
    if cloud.provider == "gcp":
        from ccbench.machines.cloud.gcp import Gcp

        return Gcp(cloud)
    from ccbench.machines.cloud.azure import Azure

    return Azure(cloud)


def context(
    study, run_id: str, ssh_public_key: str, now: float | None = None, ssh_from: str | None = None
) -> RunContext:
    now = time.time() if now is None else now
    lifetime = int(study.cloud.max_lifetime_h * 3600)
    ctx = RunContext(run_id, study.cloud.owner, int(now) + lifetime, lifetime, ssh_public_key)
    where = ssh_from or study.cloud.ssh_from
    return replace(ctx, ssh_from=where) if where else ctx


class _Stops:
    """The stop signals' handler for one run: before the teardown a signal stops the run (KeyboardInterrupt
    for Ctrl-C, SystemExit otherwise, both reaching the ``finally``); during it, one stops the waiting."""

    def __init__(self, echo: Echo) -> None:
        self.echo, self.tearing_down, self.waiting, self.stop_waiting = echo, False, False, False

    def __call__(self, signum, frame) -> None:
        if not self.tearing_down:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(128 + signum)
        self.stop_waiting = True
        self.echo("ccbench cloud: stop signal during the teardown: every deletion is sent; not waiting for them")
        if self.waiting:
            raise StopWaiting


def teardown(provider: Provider, run_id: str, echo: Echo, stops: _Stops | None = None) -> list[Found]:
    """Delete everything carrying this run's tag; returns what is left (for the sweep)."""
    stops = stops or _Stops(echo)
    stops.tearing_down = True
    mine = [f for f in provider.tagged() if f.run_id == run_id]
    instances = [f for f in mine if f.kind == "instance"]
    others = [f for f in mine if f.kind != "instance"]
    _destroy(provider, instances, echo)
    if stops.stop_waiting:
        return others
    try:
        stops.waiting = True
        provider.settle(instances)
    except StopWaiting:
        return others
    finally:
        stops.waiting = False
    _destroy(provider, others, echo)
    return []


def _destroy(provider: Provider, found: list[Found], echo: Echo) -> None:
    """Delete ``found`` with the stop signals held back: a Ctrl-C may stop the waiting, never a deletion."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, set(STOP_SIGNALS))
    try:
        for line in provider.destroy(found):
            echo(line)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def run_arms(
    study,
    provider: Provider,
    body: Callable[[list[Launched]], Any],
    echo: Echo,
    state: Path,
    access: Access,
    ssh_from: str = "",
    run_id: str = "",
) -> Any:
    """Launch every arm (replicas included), call ``body`` with them, and tear everything down
    whatever happens. Sweeps the study's region first. ``access`` gets the run's client key and a
    host key per instance (ccbench.machines.cloud.access); its private keys go with the teardown."""
    for line in sweep([provider], state, dry_run=False):
        echo(line)
    run_id = run_id or new_run_id()
    access.make(run_id)
    ctx = context(study, run_id, access.public_key, ssh_from=ssh_from)
    for arm in study.arms:
        for replica in range(1, arm.replicas + 1):
            name = provider.instance_name(run_id, arm.name, replica)
            ctx.host_keys[name] = access.host_key(name)
    cloud = study.cloud
    header = {
        "provider": cloud.provider,
        "region": cloud.region,
        "zone": cloud.zone,
        "account": cloud.account,
        "expiry": ctx.expiry,
        "access": str(access.directory),
    }
    log = journals.Journal(state, run_id, header)
    stops = _Stops(echo)
    previous = catch_stop_signals(stops)
    outcome = "failed"
    try:
        provider.prepare(ctx, log)
        launched = [provider.launch(arm, r, ctx, log) for arm in study.arms for r in range(1, arm.replicas + 1)]
        result = body(launched)
        outcome = "done"
        return result
    finally:
        try:
            left = teardown(provider, run_id, echo, stops)
            log.write({"op": "left", "ids": [f.id for f in left]} if left else {"op": "teardown"})
            if left:
                echo(f"ccbench cloud: {len(left)} resource(s) of run {run_id} left for `ccbench cloud sweep`")
            log.close("torn down" if not left else outcome)
        finally:
            ctx.host_keys.clear()
            gone = access.forget()
            if gone:
                echo(f"ccbench cloud: deleted the run's {len(gone)} private key(s) in {access.directory}")
            restore_signals(previous)


def sweep(providers: list[Provider], state: Path, dry_run: bool, now: float | None = None) -> list[str]:
    """Delete what runs that are gone left: tagged resources of a run whose journal here is unlocked,
    or of any run past its expiry. A live run's and an unexpired foreign run's are listed, not touched."""
    now = time.time() if now is None else now
    known = journals.runs(state)
    lines = []
    for provider in providers:
        by_run: dict[str, list[Found]] = {}
        for found in provider.tagged():
            if found.run_id:
                by_run.setdefault(found.run_id, []).append(found)
        for run_id, found in sorted(by_run.items()):
            record = known.get(run_id)
            expired = all(f.expiry and f.expiry < now for f in found)
            if record and record["live"]:
                lines.append(f"{provider.name}: run {run_id} is live (pid {record['pid']}): left alone")
                continue
            if not record and not expired:
                until = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(max(f.expiry for f in found)))
                lines.append(f"{provider.name}: run {run_id} is not from this host and expires {until}: left alone")
                continue
            why = "its run is gone" if record else "expired"
            names = ", ".join(f"{f.kind} {f.id}" for f in found)
            if dry_run:
                lines.append(f"{provider.name}: would delete ({why}): {names}")
                continue
            lines.append(f"{provider.name}: run {run_id} ({why}):")
            instances = [f for f in found if f.kind == "instance"]
            lines += provider.destroy(instances)
            provider.settle(instances)
            lines += provider.destroy([f for f in found if f.kind != "instance"])
            if record and record.get("access"):
                gone = Access(Path(record["access"])).forget()
                lines += [f"{provider.name}: deleted the run's {len(gone)} private key(s)"] if gone else []
    return lines


def journal_clouds(state: Path) -> list[dict[str, Any]]:
    """The provider, region, zone and account of each run journaled here (where a sweep looks)."""
    seen, out = set(), []
    for record in journals.runs(state).values():
        key = (record.get("provider"), record.get("region"), record.get("zone"), record.get("account"))
        if key not in seen and key[0]:
            seen.add(key)
            out.append(dict(zip(("provider", "region", "zone", "account"), key, strict=True)))
    return out


__all__ = ["CloudError", "run_arms", "sweep", "teardown"]
