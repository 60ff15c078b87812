"""The shared mechanisms: stopping process trees, the record-before-make ledger, the atomic writer,
free ports and the TLS facts, the per-run certificate authority. Unit tests with real processes,
real files and a real TLS server on loopback."""

import json
import signal
import socket
import ssl
import subprocess
import sys
import threading

import psutil
import pytest

from ccbench.basics import fsutil, netutil, procs
from ccbench.basics.ledger import Ledger, read_entries
from ccbench.basics.pki import RunCA

# a parent that starts a child ignoring SIGTERM, so only SIGKILL ends the tree
STUBBORN_TREE = (
    "import signal, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import signal, time\\n"
    'signal.signal(signal.SIGTERM, signal.SIG_IGN)\\nprint("ready", flush=True)\\ntime.sleep(600)\'],'
    " stdout=sys.stdout)\n"
    "time.sleep(600)\n"
)


def _start_tree():
    parent = subprocess.Popen([sys.executable, "-c", STUBBORN_TREE], stdout=subprocess.PIPE, text=True)
    assert parent.stdout.readline().strip() == "ready"
    children = psutil.Process(parent.pid).children(recursive=True)
    assert children
    return parent, children


def test_stop_tree_ends_a_child_that_ignores_sigterm_and_reaps_the_parent():
    parent, children = _start_tree()
    assert procs.stop_tree(parent, grace=0.5) is True
    assert parent.returncode == -signal.SIGTERM  # the Popen was reaped by Popen, code kept
    for child in children:
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    assert procs.stop_tree(parent) is False  # nothing left to stop


def test_stop_all_shares_one_grace_and_ends_every_tree(monkeypatch):
    # each tree's child ignores SIGTERM, so it outlives the grace: one grace shared by the three trees
    # is one SIGTERM round, one wait of the grace and one SIGKILL round that takes every stubborn
    # child at once (one grace each would wait three times); counted, not timed, so a loaded machine
    # cannot make it fail
    waits, rounds = [], []
    wait_many, send = procs._wait_many, procs._send

    def counted_wait(processes, children, timeout):
        waits.append(timeout)
        return wait_many(processes, children, timeout)

    def counted_send(processes, sig):
        processes = list(processes)
        rounds.append((sig, {p.pid for p in processes}))
        return send(processes, sig)

    monkeypatch.setattr(procs, "_wait_many", counted_wait)
    monkeypatch.setattr(procs, "_send", counted_send)
    grace = 1.5
    trees = [_start_tree() for _ in range(3)]
    procs.stop_all([parent for parent, _ in trees], grace=grace)
    assert waits.count(grace) == 1, waits
    stubborn = {c.pid for _, children in trees for c in children}
    assert [sig for sig, _ in rounds] == [signal.SIGTERM, signal.SIGKILL], rounds
    assert stubborn <= rounds[1][1], rounds
    for parent, children in trees:
        assert parent.poll() is not None
        assert all(not c.is_running() or c.status() == psutil.STATUS_ZOMBIE for c in children)


def test_same_process_refuses_a_recycled_pid():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = psutil.Process(sleeper.pid).create_time()
        assert procs.same_process(sleeper.pid, started) is not None
        assert procs.same_process(sleeper.pid, started - 100) is None  # another process under that pid
    finally:
        procs.stop_tree(sleeper)
    assert procs.same_process(sleeper.pid, started) is None
    assert procs.same_process(None) is None


def test_describe_exit():
    assert procs.describe_exit(3) == "exited with status 3"
    assert procs.describe_exit(-9) == "was killed by SIGKILL"


def test_atomic_json_write_replaces_whole_documents(tmp_path):
    path = tmp_path / "state.json"
    fsutil.write_json_atomic(path, {"a": 1})
    fsutil.write_json_atomic(path, {"b": [1, 2]})
    assert json.loads(path.read_text()) == {"b": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temporary left behind


def test_atomic_target_replaces_on_success_and_keeps_the_old_file_on_failure(tmp_path):
    path = tmp_path / "bundle.tar"
    path.write_text("old")
    with pytest.raises(RuntimeError):
        with fsutil.atomic_target(path) as temporary:
            temporary.write_text("half")
            raise RuntimeError("the writer failed")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["bundle.tar"]
    with fsutil.atomic_target(path) as temporary, fsutil.atomic_target(path) as other:
        assert temporary != other and temporary.parent == other.parent == tmp_path  # two writers, two files
        temporary.write_text("new")
        other.write_text("newer")
        assert path.read_text() == "old"  # nothing is visible before the block ends
    assert path.read_text() in ("new", "newer") and [p.name for p in tmp_path.iterdir()] == ["bundle.tar"]


def test_ledger_records_before_and_undoes_newest_first(tmp_path):
    path = tmp_path / "ledger.json"
    ledger = Ledger(path, {"owner_pid": 1})
    first = ledger.record({"kind": "mount", "name": "a"})
    ledger.record({"kind": "loop", "name": "b"})
    ledger.update(first, device="/dev/loop9")
    # what a killed run leaves is readable without the writer
    entries, header = read_entries(path)
    assert [e["name"] for e in entries] == ["a", "b"] and entries[0]["device"] == "/dev/loop9"
    assert header == {"owner_pid": 1}
    order = []
    done = Ledger(path, load=True).undo(lambda entry: order.append(entry["name"]) or [f"undid {entry['name']}"])
    assert order == ["b", "a"] and done == ["undid b", "undid a"]
    assert read_entries(path)[0] == []


def test_ledger_forgets_and_reads_old_and_broken_files(tmp_path):
    path = tmp_path / "ledger.json"
    ledger = Ledger(path)
    ledger.record({"kind": "dir", "directory": "/x"})
    ledger.record({"kind": "dir", "directory": "/y"})
    ledger.forget(lambda entry: entry["directory"] == "/x")
    assert [e["directory"] for e in read_entries(path)[0]] == ["/y"]
    path.write_text('[{"kind": "dir", "directory": "/old"}]')  # the bare-list format of older versions
    assert read_entries(path)[0] == [{"kind": "dir", "directory": "/old"}]
    path.write_text('{"entries": [{"kind": "di')  # cut by a crash of an older writer
    assert read_entries(path) == ([], {})
    assert read_entries(tmp_path / "missing.json") == ([], {})


def test_free_ports_are_distinct_and_bindable():
    ports = netutil.free_ports(5)
    assert len(set(ports)) == 5
    assert not any(netutil.listening("127.0.0.1", port) for port in ports)


@pytest.mark.parametrize("key_type", ["ec-p256", "rsa-3072"])
def test_run_ca_certificates_serve_mutual_tls_on_loopback(tmp_path, key_type):
    ca = RunCA.create(key_type=key_type)
    ca_file = ca.write_certificate(tmp_path / "ca.pem")
    server_cert, server_key = ca.issue("127.0.0.1", names=["127.0.0.1", "localhost"], server=True, client=True).write(
        tmp_path / "server.pem", tmp_path / "server-key.pem"
    )
    client_cert, client_key = ca.issue("collaborator1", names=["collaborator1"], server=False, client=True).write(
        tmp_path / "client.pem", tmp_path / "client-key.pem"
    )
    assert oct(server_key.stat().st_mode & 0o777) == "0o600"
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(server_cert, server_key)
    context.load_verify_locations(ca_file)
    context.verify_mode = ssl.CERT_REQUIRED  # mutual TLS: the client's certificate is checked too
    port = netutil.free_port()
    listener = context.wrap_socket(socket.create_server(("127.0.0.1", port)), server_side=True)
    seen = {}

    def serve():
        connection, _ = listener.accept()
        seen["client"] = connection.getpeercert()["subject"]
        connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        cipher, version = netutil.negotiated_tls(
            "127.0.0.1", port, cafile=ca_file, certfile=client_cert, keyfile=client_key
        )
        thread.join(10)
    finally:
        listener.close()
    assert version == "TLSv1.3" and cipher.startswith("TLS_")
    assert seen["client"] == ((("commonName", "collaborator1"),),)


def test_run_ca_certificate_is_refused_by_a_client_that_trusts_another_ca(tmp_path):
    ca, other = RunCA.create(), RunCA.create()
    cert, key = ca.issue("127.0.0.1", names=["127.0.0.1"]).write(tmp_path / "s.pem", tmp_path / "s.key")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    port = netutil.free_port()
    listener = context.wrap_socket(socket.create_server(("127.0.0.1", port)), server_side=True)

    def serve():
        try:
            listener.accept()[0].close()
        except (OSError, ssl.SSLError):
            pass

    threading.Thread(target=serve, daemon=True).start()
    try:
        with pytest.raises(ssl.SSLCertVerificationError):
            netutil.negotiated_tls("127.0.0.1", port, cafile=other.write_certificate(tmp_path / "other.pem"))
    finally:
        listener.close()
