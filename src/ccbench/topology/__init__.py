"""Emulated hosts on this machine: network namespaces joined by a bridge, with shaped links.

Workloads that place parties on separate machines (federated learning, microservices) and the
fleet tests (SSH servers standing in for remote hosts) build them here::

    from ccbench.topology import Topology, LinkShape
    with Topology(workdir, name="fl") as topo:      # state under <workdir>/topology/fl-<rid>/
        agg = topo.add_host("agg")                  # a network namespace with loopback up
        col = topo.add_host("col1")
        topo.connect([agg, col], shape=LinkShape(rate="1gbit", delay="0.2ms"))
        proc = agg.popen(["python3", "-m", "http.server", "8000"])
        col.run(["curl", f"http://{agg.address}:8000/"])

Every host is a network namespace ``cc<rid>-<i>-<host>``; every ``connect`` call is one segment: a
bridge ``c<rid>b<s>`` in the root namespace, one veth pair per host (``c<rid>s<s>h<i>`` on the
bridge, ``ccnet<s>`` inside the host) and a /24 from 10.204.0.0/16 (204 = 0xCC: ccbench's own
range). The root namespace gets an address on a segment (``.1``) only when asked
(``root_access=True``), e.g. so that an Ansible controller can reach SSH servers in the hosts.

Shaping (``tc``) is per host link: the host's egress gets the delay (so the one-way delay between
two hosts is ``delay`` and the RTT twice that), both directions get the rate. Delay, jitter and
loss need the kernel's ``sch_netem``; a rate alone falls back to ``tbf`` where netem is missing.
``available(shape)`` says beforehand whether a shape can be applied here (both in ``shaping.py``).

Safety: each namespace, bridge and veth is written to ``state.json`` before it is made; processes
started in a host are recorded with their pid, and at teardown everything still running in a
host's namespace is killed (``ip netns pids``), so a child that escaped its parent goes too.
``teardown`` runs on ``__exit__``, at interpreter exit, and on SIGTERM (turned into SystemExit
inside the ``with`` block; SIGINT arrives as KeyboardInterrupt). The owner holds a lock on
``owner.lock`` while alive. Before anything is made, the topology also enters itself in a
machine-wide index under /run (``records.py``: a copy of every record, with a lock of its own), so
``cleanup_stale`` removes the topologies whose owner is gone (a SIGKILLed run) whatever work
directory they were made under, and never a live one.
"""

from __future__ import annotations

import atexit
import fcntl
import ipaddress
import os
import re
import secrets
import shutil
import signal
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ccbench.basics.errors import CCBenchError
from ccbench.basics.ledger import Ledger
from ccbench.topology.records import (
    INDEX_ENV,
    LOCK_FILE,
    STATE_FILE,
    _process_start_time,
    _undo,
    cleanup_stale,
    enter_index,
    index_root,
    leave_index,
    own_network_namespace,
)
from ccbench.topology.shaping import LinkShape, TopologyError, _shape_commands, available

__all__ = [
    "ADDRESS_RANGE",
    "Host",
    "LinkShape",
    "Segment",
    "Topology",
    "TopologyError",
    "available",
    "cleanup_stale",
]

#: 10.204.0.0/16 (204 = 0xCC); each segment takes one /24 of it
ADDRESS_RANGE = ipaddress.ip_network("10.204.0.0/16")
#: serialises subnet choice across topologies (the root namespace's routes must not overlap)
GLOBAL_LOCK = Path("/run/lock/ccbench-topology.lock")
IFNAMSIZ = 15
_HOST_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$", re.IGNORECASE)
_TOPO_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,15}$", re.IGNORECASE)


def _run(argv: Sequence[str], *, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise TopologyError(f"`{' '.join(argv)}` failed: {(done.stderr or done.stdout).strip()[-300:]}")
    return done


# ------------------------------------------------------------------------------------- hosts, links


class Host:
    """One emulated host: a network namespace. ``address`` is its IPv4 address on the first
    segment it was connected to (None before ``connect``); ``addresses`` maps segment index to address."""

    def __init__(self, topology: Topology, name: str, index: int, netns: str):
        self.topology = topology
        self.name = name
        self.index = index
        self.netns = netns
        self.addresses: dict[int, str] = {}
        self.interfaces: dict[int, str] = {}

    @property
    def address(self) -> str | None:
        return self.addresses[min(self.addresses)] if self.addresses else None

    def address_on(self, segment: Segment) -> str:
        return self.addresses[segment.index]

    def command(self, argv: Sequence[str], *, binds: dict[str, str] | None = None) -> list[str]:
        """The argv that runs ``argv`` inside this host (``ip netns exec``); with ``binds``
        ({target: source}) also in a private mount namespace where each source directory is
        bind-mounted over its target (e.g. a host's own /root), seen only by this process tree."""
        prefix = ["ip", "netns", "exec", self.netns]
        if not binds:
            return prefix + list(argv)
        mounts: list[str] = []
        for target, source in binds.items():
            mounts += [str(source), str(target)]
        script = 'while [ "$1" != "--" ]; do mount --bind "$1" "$2" || exit 126; shift 2; done; shift; exec "$@"'
        return prefix + [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "sh",
            *mounts,
            "--",
            *argv,
        ]

    def popen(self, argv: Sequence[str], *, binds: dict[str, str] | None = None, **popen_kwargs) -> subprocess.Popen:
        """Start ``argv`` inside this host; killed at teardown (with anything else left in the
        namespace). Runs in its own session unless start_new_session=False is passed."""
        popen_kwargs.setdefault("start_new_session", True)
        process = subprocess.Popen(self.command(argv, binds=binds), **popen_kwargs)
        self.topology._record_process(self, process, argv)
        return process

    def run(
        self, argv: Sequence[str], *, binds: dict[str, str] | None = None, **run_kwargs
    ) -> subprocess.CompletedProcess:
        """subprocess.run of ``argv`` inside this host."""
        return subprocess.run(self.command(argv, binds=binds), **run_kwargs)

    def __repr__(self) -> str:
        return f"Host({self.name!r}, netns={self.netns!r}, address={self.address!r})"


@dataclass
class Segment:
    """One bridge and the hosts on it."""

    index: int
    bridge: str
    subnet: ipaddress.IPv4Network
    hosts: list[Host]
    shape: LinkShape | None
    root_address: str | None = None


class Topology:
    """A set of emulated hosts owned by this process. Use as a context manager; ``teardown()``
    may also be called directly (it is idempotent)."""

    def __init__(self, workdir: str | os.PathLike, name: str = "topo"):
        if not _TOPO_NAME.match(name):
            raise CCBenchError(f"topology name {name!r}: use up to 16 letters, digits, '-' or '_'")
        self.name = name
        self._workdir = Path(workdir).resolve()
        self._new_rid()
        self.hosts: list[Host] = []
        self.segments: list[Segment] = []
        self._lock_handle = None
        self._index: Ledger | None = None
        self._index_lock = None
        self._started = False
        self._closed = False
        self._previous_sigterm = None
        self._mutex = threading.RLock()

    # -- lifecycle
    def start(self) -> Topology:
        if self._started:
            return self
        reason = available()
        if reason:
            raise TopologyError(reason)
        self._enter_index()
        try:
            self.directory.mkdir(parents=True, exist_ok=False)
            self._lock_handle = open(self.directory / LOCK_FILE, "w")
            fcntl.flock(self._lock_handle, fcntl.LOCK_EX)
            self._lock_handle.write(str(os.getpid()))
            self._lock_handle.flush()
            self._save()
        except BaseException:
            leave_index(self._index.path.parent, self._index_lock)  # nothing was made yet
            self._index = None
            raise
        self._started = True
        atexit.register(self.teardown)
        return self

    def __enter__(self) -> Topology:
        self.start()
        if threading.current_thread() is threading.main_thread():
            self._previous_sigterm = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGTERM, self._on_sigterm)
        return self

    def _on_sigterm(self, signum, frame):
        previous = self._previous_sigterm
        if callable(previous):
            previous(signum, frame)
        raise SystemExit(128 + signum)

    def __exit__(self, *exc) -> None:
        try:
            self.teardown()
        finally:
            if self._previous_sigterm is not None and threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, self._previous_sigterm)
                self._previous_sigterm = None

    def teardown(self) -> list[str]:
        """Kill the hosts' processes and remove namespaces, veths and bridges; returns what was done."""
        with self._mutex:
            if not self._started or self._closed:
                return []
            self._closed = True
            removed = _undo(self._ledger.entries)
            shutil.rmtree(self.directory, ignore_errors=True)
            if self._lock_handle:
                self._lock_handle.close()
            if self._index is not None:
                leave_index(self._index.path.parent, self._index_lock)
            atexit.unregister(self.teardown)
            return removed

    # -- building
    def add_host(self, name: str) -> Host:
        """A new network namespace with loopback up."""
        self._ensure_open()
        if not _HOST_NAME.match(name):
            raise CCBenchError(f"host name {name!r}: use up to 32 letters, digits, '-' or '_'")
        if any(h.name == name for h in self.hosts):
            raise CCBenchError(f"topology {self.name}: host {name!r} exists already")
        index = len(self.hosts)
        netns = f"cc{self.rid}-{index}-{name}"[:IFNAMSIZ]
        self._record("netns", netns, host=name)
        _run(["ip", "netns", "add", netns])
        host = Host(self, name, index, netns)
        self.hosts.append(host)
        _run(host.command(["ip", "link", "set", "lo", "up"]))
        return host

    def connect(self, hosts: Sequence[Host], shape: LinkShape | None = None, *, root_access: bool = False) -> Segment:
        """Join ``hosts`` on a new bridge (one /24 from 10.204.0.0/16), each through its own veth,
        its link shaped by ``shape``. ``root_access=True`` gives the root namespace the segment's
        ``.1`` address (for a controller in the root namespace, e.g. Ansible)."""
        self._ensure_open()
        hosts = list(hosts)
        if not hosts:
            raise CCBenchError("connect needs at least one host")
        if len(hosts) > 250:
            raise CCBenchError("a segment holds at most 250 hosts")
        if shape is not None and not shape.empty:
            reason = available(shape)
            if reason:
                raise TopologyError(f"cannot shape links as {shape}: {reason}")
        index = len(self.segments)
        bridge = f"c{self.rid}b{index}"
        with _global_lock():
            subnet = self._free_subnet()
            self._record("bridge", bridge, subnet=str(subnet))
            _run(["ip", "link", "add", "name", bridge, "type", "bridge", "stp_state", "0", "forward_delay", "0"])
            # keep the host's firewall (br_netfilter) out of ccbench's own bridge
            _run(
                [
                    "ip",
                    "link",
                    "set",
                    bridge,
                    "type",
                    "bridge",
                    "nf_call_iptables",
                    "0",
                    "nf_call_ip6tables",
                    "0",
                    "nf_call_arptables",
                    "0",
                ],
                check=False,
            )
            segment = Segment(index, bridge, subnet, hosts, shape)
            addresses = list(subnet.hosts())
            if root_access:
                segment.root_address = str(addresses[0])
                _run(["ip", "addr", "add", f"{addresses[0]}/{subnet.prefixlen}", "dev", bridge])
            _run(["ip", "link", "set", bridge, "up"])
        inside = f"ccnet{index}"
        for position, host in enumerate(hosts):
            outer = f"c{self.rid}s{index}h{host.index}"
            peer = f"c{self.rid}s{index}p{host.index}"
            if len(outer) > IFNAMSIZ:
                raise TopologyError(f"interface name {outer} longer than {IFNAMSIZ} characters")
            self._record("veth", outer, host=host.name, segment=index)
            _run(["ip", "link", "add", outer, "type", "veth", "peer", "name", peer])
            _run(["ip", "link", "set", peer, "netns", host.netns])
            _run(host.command(["ip", "link", "set", peer, "name", inside]))
            address = addresses[position + 1]
            _run(host.command(["ip", "addr", "add", f"{address}/{subnet.prefixlen}", "dev", inside]))
            _run(["ip", "link", "set", outer, "master", bridge])
            _run(["ip", "link", "set", outer, "up"])
            _run(host.command(["ip", "link", "set", inside, "up"]))
            if shape is not None:
                for argv in _shape_commands(inside, shape, with_delay=True):
                    _run(host.command(argv))
                for argv in _shape_commands(outer, shape, with_delay=False):
                    _run(argv)
            host.addresses[index] = str(address)
            host.interfaces[index] = inside
        self.segments.append(segment)
        self._save()
        return segment

    # -- internals
    def _ensure_open(self) -> None:
        if self._closed:
            raise TopologyError(f"topology {self.name}-{self.rid} was torn down")
        if not self._started:
            self.start()

    def _free_subnet(self) -> ipaddress.IPv4Network:
        routes = _run(["ip", "-4", "route", "show"], check=False).stdout
        used = {ipaddress.ip_network(w, strict=False) for w in re.findall(r"\b\d+\.\d+\.\d+\.\d+/\d+\b", routes)}
        used |= {s.subnet for s in self.segments}
        candidates = list(ADDRESS_RANGE.subnets(new_prefix=24))
        start = secrets.randbelow(len(candidates))
        for offset in range(len(candidates)):
            subnet = candidates[(start + offset) % len(candidates)]
            if not any(subnet.overlaps(u) for u in used):
                return subnet
        raise TopologyError("no free /24 left in 10.204.0.0/16 (tear down other topologies)")

    def _new_rid(self) -> None:
        self.rid = secrets.token_hex(3)
        self.directory = self._workdir / "topology" / f"{self.name}-{self.rid}"
        self._ledger = Ledger(
            self.directory / STATE_FILE, {"name": self.name, "rid": self.rid, "owner_pid": os.getpid()}
        )

    def _enter_index(self) -> None:
        """Enter this topology in the machine-wide index (records.py) before anything is made: a rid
        another topology holds is drawn again, since it names the interfaces."""
        for _ in range(16):
            header = {
                "name": self.name,
                "rid": self.rid,
                "owner_pid": os.getpid(),
                "state_directory": str(self.directory),
                "network_namespace": own_network_namespace(),
            }
            try:
                entered = enter_index(self.rid, header)
            except OSError as exc:
                raise TopologyError(
                    f"cannot enter the topology in the machine-wide index {index_root()} ({exc.strerror or exc}), "
                    f"which lets any later run remove what a killed one left; make it writable for root "
                    f"({INDEX_ENV} names another directory, which every run must then share)"
                ) from None
            if entered is not None:
                self._index = Ledger(entered[0] / STATE_FILE, header)
                self._index_lock = entered[1]
                return
            self._new_rid()
        raise TopologyError(
            f"no free topology id in {index_root()} after 16 draws (ccbench cleanup removes stale ones)"
        )

    def _record(self, kind: str, name: str, **extra) -> None:
        self._record_entry({"kind": kind, "name": name, **extra})

    def _record_entry(self, entry: dict) -> None:
        """Written to the index's copy and to the state directory, before the thing is made."""
        self._index.record(dict(entry))
        self._ledger.record(entry)

    def _record_process(self, host: Host, process: subprocess.Popen, argv: Sequence[str]) -> None:
        self._record_entry(
            {
                "kind": "process",
                "pid": process.pid,
                "host": host.name,
                "argv0": str(argv[0]) if argv else "",
                "start_time": _process_start_time(process.pid),
            }
        )

    def _save(self) -> None:
        hosts = {h.name: {"netns": h.netns, "addresses": h.addresses} for h in self.hosts}
        self._ledger.set_header(owner_pid=os.getpid(), hosts=hosts)


class _global_lock:
    def __enter__(self):
        GLOBAL_LOCK.parent.mkdir(parents=True, exist_ok=True)
        self.handle = open(GLOBAL_LOCK, "a")
        fcntl.flock(self.handle, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()
