"""Emulated hosts: real network namespaces, bridges, veths and tc on this machine (root)."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from ccbench import topology
from ccbench.basics.errors import CCBenchError
from ccbench.basics.ledger import read_entries
from ccbench.topology import LinkShape, Topology

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(topology.available() is not None, reason=f"emulated hosts unavailable: {topology.available()}"),
]

PYTHON = sys.executable

# a TCP server that answers each connection with `size` bytes (0 = accept and close)
SERVER = textwrap.dedent("""
    import socket, sys
    size = int(sys.argv[2])
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(16)
    print("listening", flush=True)
    payload = b"x" * size
    while True:
        c, _ = s.accept()
        if size:
            c.sendall(payload)
        c.close()
""")

# connects `count` times and prints the median connect time, or reads everything and prints seconds
CLIENT = textwrap.dedent("""
    import socket, statistics, sys, time
    host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode == "rtt":
        times = []
        for _ in range(7):
            t = time.perf_counter(); s = socket.create_connection((host, port), timeout=10)
            times.append(time.perf_counter() - t); s.close()
        print(statistics.median(times))
    else:
        t = time.perf_counter(); s = socket.create_connection((host, port), timeout=10); n = 0
        while chunk := s.recv(1 << 16):
            n += len(chunk)
        print(time.perf_counter() - t, n)
""")


def _start_server(host, port, size=0):
    process = host.popen([PYTHON, "-c", SERVER, str(port), str(size)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "listening"
    return process


def _client(host, address, port, mode):
    done = host.run([PYTHON, "-c", CLIENT, address, str(port), mode], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [float(x) for x in done.stdout.split()]


def _egress(host, device: str) -> dict:
    """The root qdisc of ``device`` in ``host``'s namespace: its rate limit (None: unshaped) and bytes sent."""
    shown = host.run(["tc", "-s", "qdisc", "show", "dev", device], capture_output=True, text=True, check=True).stdout
    rate = re.search(r"\brate (\S+)", shown.split("\n", 1)[0])  # the qdisc's own line, not its statistics
    sent = re.search(r"Sent (\d+) bytes", shown)
    return {"rate": rate.group(1) if rate else None, "sent": int(sent.group(1)) if sent else 0, "shown": shown}


def _alive(pid: int) -> bool:
    """Running, not a zombie (a killed orphan waits for whoever reaps it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _leftovers(rid: str) -> dict:
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = os.listdir("/sys/class/net")
    return {
        "netns": [line.split()[0] for line in netns.splitlines() if rid in line],
        "links": [name for name in links if rid in name],
    }


def test_two_hosts_reach_each_other_and_the_root_only_when_asked(workdir):
    with Topology(workdir, name="t") as topo:
        a, b = topo.add_host("a"), topo.add_host("b")
        segment = topo.connect([a, b], root_access=True)
        assert a.address != b.address and a.address.startswith("10.204.")
        assert all(len(name) <= 15 for name in (a.netns, b.netns, segment.bridge, *a.interfaces.values()))
        _start_server(b, 7001)
        _start_server(a, 7002)
        assert _client(a, b.address, 7001, "rtt")[0] > 0
        assert _client(b, a.address, 7002, "rtt")[0] > 0
        # the root namespace reaches the hosts through the bridge's .1 address
        assert segment.root_address.endswith(".1")
        reply = subprocess.run(
            [PYTHON, "-c", CLIENT, a.address, "7002", "rtt"], capture_output=True, text=True, timeout=60
        )
        assert reply.returncode == 0, reply.stderr
        # a second segment without root access: no address of the root namespace on its bridge
        c = topo.add_host("c")
        isolated = topo.connect([c])
        assert isolated.root_address is None and isolated.subnet != segment.subnet
        bridge_addresses = subprocess.run(
            ["ip", "-4", "-o", "addr", "show", "dev", isolated.bridge], capture_output=True, text=True
        ).stdout
        assert "inet " not in bridge_addresses
        _start_server(c, 7003)
        # c is on its own segment: a cannot reach it either
        assert a.run([PYTHON, "-c", CLIENT, c.address, "7003", "rtt"], capture_output=True, timeout=60).returncode != 0
        rid = topo.rid
        assert _leftovers(rid)["netns"]
    assert _leftovers(rid) == {"netns": [], "links": []}
    assert not (workdir / "topology" / f"t-{rid}").exists()


def test_rate_shaping_slows_a_transfer(workdir):
    size = 3_000_000  # 24 Mbit: ~1.2 s at 20 Mbit/s, far less on an unshaped veth
    with Topology(workdir, name="rate") as topo:
        server, fast, slow = topo.add_host("srv"), topo.add_host("fast"), topo.add_host("slow")
        topo.connect([server, fast])
        topo.connect([server, slow], shape=LinkShape(rate="20mbit"))
        _start_server(server, 7010, size)
        seconds_fast, received_fast = _client(fast, server.addresses[0], 7010, "bytes")
        seconds_slow, received_slow = _client(slow, server.addresses[1], 7010, "bytes")
        shaped = _egress(server, server.interfaces[1])
        unshaped = _egress(server, server.interfaces[0])
    assert received_fast == received_slow == size
    # the mechanism: the shaped link's egress queue is a rate limiter at 20 Mbit that carried the
    # transfer; the unshaped link has none
    assert shaped["rate"] == "20Mbit" and shaped["sent"] >= size, shaped
    assert unshaped["rate"] is None, unshaped
    # a ceiling a slow machine cannot cross: the shaped transfer never ran faster than about its rate
    assert size * 8 / seconds_slow < 2 * 20e6


@pytest.mark.skipif(
    topology.available(LinkShape(delay="1ms")) is not None,
    reason=f"link delay unavailable here: {topology.available(LinkShape(delay='1ms'))}",
)
def test_delay_shows_as_a_larger_round_trip(workdir):
    with Topology(workdir, name="delay") as topo:
        server, near, far = topo.add_host("srv"), topo.add_host("near"), topo.add_host("far")
        topo.connect([server, near])
        topo.connect([server, far], shape=LinkShape(delay="40ms"))
        _start_server(server, 7020)
        near_rtt = _client(near, server.addresses[0], 7020, "rtt")[0]
        far_rtt = _client(far, server.addresses[1], 7020, "rtt")[0]
    # the far host's egress holds each SYN 40 ms: a floor under its connect time that no machine,
    # however loaded, can go below (the near one is not compared: its time is the machine's speed)
    assert far_rtt >= 0.039 and near_rtt > 0


def test_unavailable_delay_is_refused_with_the_reason(workdir):
    reason = topology.available(LinkShape(delay="1ms"))
    if reason is None:
        pytest.skip("this kernel has netem: the refusal path cannot be exercised")
    with Topology(workdir, name="nodelay") as topo:
        host = topo.add_host("a")
        with pytest.raises(topology.TopologyError, match="netem"):
            topo.connect([host], shape=LinkShape(delay="1ms"))


def test_teardown_kills_every_process_in_the_namespace(workdir):
    with Topology(workdir, name="procs") as topo:
        host = topo.add_host("a")
        topo.connect([host])
        direct = host.popen(["sleep", "300"])
        # a daemon that leaves its parent: recorded by nobody, still in the namespace
        host.run(["sh", "-c", "setsid sleep 301 >/dev/null 2>&1 < /dev/null &"], check=True)
        time.sleep(0.2)
        escaped = [p for p in topology.records._pids_in_netns(host.netns) if p != direct.pid]
        assert escaped
        rid = topo.rid
    assert direct.wait(timeout=10) is not None
    for pid in escaped:
        assert not _alive(pid)
    assert _leftovers(rid) == {"netns": [], "links": []}


def test_failure_inside_the_block_still_tears_down(workdir):
    with pytest.raises(RuntimeError):
        with Topology(workdir, name="fail") as topo:
            topo.connect([topo.add_host("a"), topo.add_host("b")])
            rid = topo.rid
            raise RuntimeError("boom")
    assert _leftovers(rid) == {"netns": [], "links": []}


OWNER = textwrap.dedent("""
    import sys, time
    from ccbench.topology import Topology
    topo = Topology(sys.argv[1], name="own")
    topo.__enter__()
    a, b = topo.add_host("a"), topo.add_host("b")
    topo.connect([a, b], root_access=True)
    proc = a.popen(["sleep", "300"])
    print(topo.rid, proc.pid, flush=True)
    time.sleep(300)
""")


#: every owner process a test started (the index fixture kills what a failed test left running)
_OWNERS: list[subprocess.Popen] = []


def _start_owner(workdir):
    owner = subprocess.Popen([PYTHON, "-c", OWNER, str(workdir)], stdout=subprocess.PIPE, text=True)
    _OWNERS.append(owner)
    rid, pid = owner.stdout.readline().split()
    return owner, rid, int(pid)


def test_cleanup_stale_removes_what_a_killed_owner_left_and_spares_a_live_one(workdir):
    live, live_rid, _ = _start_owner(workdir)
    dead, dead_rid, dead_sleep = _start_owner(workdir)
    try:
        dead.send_signal(signal.SIGKILL)
        dead.wait(timeout=10)
        assert _leftovers(dead_rid)["netns"] and _alive(dead_sleep)
        removed = topology.cleanup_stale(workdir)
        assert any(dead_rid in line for line in removed)
        assert _leftovers(dead_rid) == {"netns": [], "links": []}
        assert not _alive(dead_sleep)
        # the live owner's topology is untouched
        assert len(_leftovers(live_rid)["netns"]) == 2
        assert not any(live_rid in line for line in removed)
    finally:
        live.send_signal(signal.SIGTERM)
        live.wait(timeout=30)
    # SIGTERM made the live owner tear down its own topology
    assert _leftovers(live_rid) == {"netns": [], "links": []}
    assert list((workdir / "topology").iterdir()) == []


def test_ccbench_cleanup_command_removes_a_killed_owners_topology(workdir, ccbench):
    owner, rid, _ = _start_owner(workdir)
    owner.send_signal(signal.SIGKILL)
    owner.wait(timeout=10)
    done = ccbench("cleanup", "--workdir", workdir)
    assert done.returncode == 0, done.stderr
    assert rid in done.stdout
    assert _leftovers(rid) == {"netns": [], "links": []}


def test_state_is_written_before_things_are_made(workdir):
    with Topology(workdir, name="state") as topo:
        host = topo.add_host("a")
        topo.connect([host])
        state = json.loads((topo.directory / "state.json").read_text())
        kinds = [entry["kind"] for entry in state["entries"]]
        assert kinds == ["netns", "bridge", "veth"]
        assert state["owner_pid"] == os.getpid()


def test_bad_shapes_and_names_are_one_line_errors(workdir):
    for bad in (dict(rate="fast"), dict(delay="10"), dict(loss="5"), dict(jitter="1ms")):
        with pytest.raises(CCBenchError):
            LinkShape(**bad)
    with pytest.raises(CCBenchError):
        Topology(workdir, name="a name with spaces")
    with Topology(workdir, name="names") as topo:
        topo.add_host("a")
        with pytest.raises(CCBenchError):
            topo.add_host("a")
        with pytest.raises(CCBenchError):
            topo.add_host("bad/name")


# ------------------------------------------------------------------- the machine-wide index (records.py)


@pytest.fixture
def index(tmp_path, monkeypatch):
    """An index of this test's own (the owners started from here inherit it), so that the sweeps
    below neither see nor touch the entries of other runs on this machine."""
    path = tmp_path / "index"
    monkeypatch.setenv(topology.records.INDEX_ENV, str(path))
    yield path
    # a failed test may leave a killed owner's topology behind (or a live one): undone here from the
    # index's own records, without the sweep's checks (they may be what failed)
    while _OWNERS:
        owner = _OWNERS.pop()
        if owner.poll() is None:
            owner.kill()
            owner.wait(timeout=10)
    for entry in sorted(path.glob("*/state.json")):
        topology.records._undo(read_entries(entry)[0])
        shutil.rmtree(entry.parent)


def test_the_index_is_under_run_unless_moved(monkeypatch):
    monkeypatch.delenv(topology.records.INDEX_ENV, raising=False)
    assert topology.records.index_root() == Path("/run/ccbench/topologies")
    monkeypatch.setenv(topology.records.INDEX_ENV, "/elsewhere/index")
    assert topology.records.index_root() == Path("/elsewhere/index")


def test_a_topology_is_in_the_index_while_it_lives(tmp_path, index):
    with Topology(tmp_path / "a", name="idx") as topo:
        host = topo.add_host("a")
        topo.connect([host])
        entry = index / topo.rid
        recorded = json.loads((entry / "state.json").read_text())
        assert recorded["state_directory"] == str(topo.directory)
        assert [e["kind"] for e in recorded["entries"]] == ["netns", "bridge", "veth"]
        assert recorded["entries"] == json.loads((topo.directory / "state.json").read_text())["entries"]
    assert list(index.iterdir()) == []


def test_a_killed_owners_topology_is_swept_from_another_workdir(tmp_path, index):
    dead, rid, sleeper = _start_owner(tmp_path / "a")
    dead.send_signal(signal.SIGKILL)
    dead.wait(timeout=10)
    assert len(_leftovers(rid)["netns"]) == 2 and _alive(sleeper)
    assert (index / rid).is_dir()
    removed = topology.cleanup_stale(tmp_path / "b")  # a workdir that never saw this topology
    assert any(rid in line and str(tmp_path / "a") in line for line in removed), removed
    assert _leftovers(rid) == {"netns": [], "links": []}
    assert not _alive(sleeper)
    assert list(index.iterdir()) == []
    assert list((tmp_path / "a" / "topology").iterdir()) == []


def test_ccbench_cleanup_in_another_workdir_removes_a_killed_owners_topology(tmp_path, index, ccbench):
    dead, rid, _ = _start_owner(tmp_path / "a")
    dead.send_signal(signal.SIGKILL)
    dead.wait(timeout=10)
    refused = ccbench("cleanup", "--workdir", tmp_path / "b")  # a work directory that does not exist
    assert refused.returncode == 2 and "no such directory" in refused.stderr, refused.stdout + refused.stderr
    (tmp_path / "b").mkdir()
    done = ccbench("cleanup", "--workdir", tmp_path / "b")
    assert done.returncode == 0, done.stderr
    assert f"removed {tmp_path / 'a' / 'topology'}" in done.stdout and rid in done.stdout
    assert _leftovers(rid) == {"netns": [], "links": []}
    assert list(index.iterdir()) == []


def test_the_index_copy_undoes_a_topology_whose_workdir_was_deleted(tmp_path, index):
    dead, rid, sleeper = _start_owner(tmp_path / "a")
    dead.send_signal(signal.SIGKILL)
    dead.wait(timeout=10)
    shutil.rmtree(tmp_path / "a")  # e.g. pytest dropping an old basetemp
    removed = topology.cleanup_stale(tmp_path / "b")
    assert any(rid in line and "was gone" in line for line in removed), removed
    assert _leftovers(rid) == {"netns": [], "links": []}
    assert not _alive(sleeper)
    assert list(index.iterdir()) == []


def test_a_live_topology_in_another_workdir_is_left_alone(tmp_path, index):
    live, rid, sleeper = _start_owner(tmp_path / "a")
    try:
        assert topology.cleanup_stale(tmp_path / "b") == []
        assert topology.records.sweep_index() == []
        assert len(_leftovers(rid)["netns"]) == 2 and _alive(sleeper)
        assert (index / rid / "owner.lock").exists()
    finally:
        live.send_signal(signal.SIGTERM)
        live.wait(timeout=30)
    # its owner tore it down and took its entry out of the index
    assert _leftovers(rid) == {"netns": [], "links": []}
    assert list(index.iterdir()) == []


def test_a_sweep_from_another_network_namespace_leaves_the_entry_alone(tmp_path, index):
    """Inside an emulated host the root namespace's bridges and veths are out of sight: a sweep from
    there would drop index entries whose links still exist."""
    dead, rid, _ = _start_owner(tmp_path / "a")
    dead.send_signal(signal.SIGKILL)
    dead.wait(timeout=10)
    with Topology(tmp_path / "b", name="inside") as topo:
        host = topo.add_host("h")
        sweep = "from ccbench.topology import records; print(records.sweep_index())"
        done = host.run([PYTHON, "-c", sweep], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
        assert (index / rid).is_dir() and _leftovers(rid)["links"]
        assert any(rid in line for line in topology.records.sweep_index())
    assert _leftovers(rid) == {"netns": [], "links": []}
    assert list(index.iterdir()) == []


def test_a_workdir_sweep_takes_the_index_entry_along(workdir, index):
    dead, rid, _ = _start_owner(workdir)
    dead.send_signal(signal.SIGKILL)
    dead.wait(timeout=10)
    removed = topology.records._sweep_state_directory(next((workdir / "topology").iterdir()))
    assert any(rid in line for line in removed)
    assert _leftovers(rid) == {"netns": [], "links": []}
    assert list(index.iterdir()) == []


def test_a_taken_id_is_drawn_again_and_an_unwritable_index_refused(tmp_path, index, monkeypatch):
    with Topology(tmp_path / "a", name="one") as first:
        # the id names the interfaces: a second topology whose first draw is taken draws again
        draws = iter([first.rid, "0cc0cc"])
        with monkeypatch.context() as patch:
            patch.setattr(topology.secrets, "token_hex", lambda _: next(draws))
            second = Topology(tmp_path / "b", name="two").start()
        with second:
            assert second.rid == "0cc0cc" and second.directory.name == "two-0cc0cc"
            assert sorted(p.name for p in index.iterdir()) == sorted([first.rid, "0cc0cc"])
        assert [p.name for p in index.iterdir()] == [first.rid]
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(topology.records.INDEX_ENV, str(tmp_path / "file" / "index"))
    with pytest.raises(topology.TopologyError, match="machine-wide index"):
        Topology(tmp_path / "c", name="nowhere").start()
    assert not (tmp_path / "c" / "topology").exists()


def test_an_entry_never_finished_goes_once_it_is_old(index):
    index.mkdir()
    young, old = index / ".abcdef.young", index / ".abcdef.old"
    for staging in (young, old):
        staging.mkdir()
        (staging / "owner.lock").write_text("")
    os.utime(old, (time.time() - 120, time.time() - 120))
    assert topology.records.sweep_index() == [f"removed {old} (an index entry never finished)"]
    assert [p.name for p in index.iterdir()] == [young.name]


def test_sweeps_while_topologies_are_being_made_touch_none_of_them(tmp_path, index):
    removed: list[str] = []
    sweeps = []
    done = threading.Event()

    def sweep():
        while not done.is_set():
            removed.extend(topology.cleanup_stale(tmp_path / "sweeper"))
            sweeps.append(1)

    sweeper = threading.Thread(target=sweep)
    sweeper.start()
    owners = [
        subprocess.Popen([PYTHON, "-c", OWNER, str(tmp_path / f"w{i}")], stdout=subprocess.PIPE, text=True)
        for i in range(4)
    ]
    try:
        started = [owner.stdout.readline().split() for owner in owners]
        done.set()
        sweeper.join()
        assert removed == [] and len(sweeps) > 10
        for rid, sleeper in started:
            assert len(_leftovers(rid)["netns"]) == 2 and _alive(int(sleeper))
        assert sorted(p.name for p in index.iterdir()) == sorted(rid for rid, _ in started)
    finally:
        done.set()
        sweeper.join()
        for owner in owners:
            owner.send_signal(signal.SIGTERM)
        for owner in owners:
            owner.wait(timeout=30)
    assert list(index.iterdir()) == []
    assert all(_leftovers(rid) == {"netns": [], "links": []} for rid, _ in started)
