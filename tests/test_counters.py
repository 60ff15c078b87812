"""Mechanism counters: /proc tables read from fixture files, the live sources of this machine (a
tracepoint counted through a tracefs instance of ccbench's own, a perf software event, the reasons for
what this guest cannot count), their mounts undone at the end or after a kill, and a real run's
execution records."""

from __future__ import annotations

import json
import os

import pytest

from ccbench.observe.counters import (
    CounterSession,
    PerfCounters,
    cleanup_stale,
    counter_samples,
    differences,
    read_proc,
)

INTERRUPTS = """           CPU0       CPU1
  0:         40          0   IO-APIC   2-edge      timer
 24:        100        200  PCI-MSIX-0000:00:03.0   0-edge      virtio1-req.0
 25:          7          0  PCI-MSIX-0000:00:04.0   0-edge      virtio2-input.0
NMI:          0          0   Non-maskable interrupts
LOC:       5000       6000   Local timer interrupts
RES:         30         40   Rescheduling interrupts
ERR:          0
"""
SOFTIRQS = """                    CPU0       CPU1
          HI:          1          0
       TIMER:        100        200
      NET_RX:         10         20
"""


def _proc(root, faults, unaccepted, loc, net_rx):
    root.mkdir(parents=True, exist_ok=True)
    (root / "vmstat").write_text(
        f"nr_free_pages 1000\nnr_unaccepted {unaccepted}\npgfault {faults}\npgmajfault 3\nthp_fault_alloc 2\n"
    )
    (root / "stat").write_text("cpu  1 2 3 4\nintr 900 1 2\nctxt 5000\nprocesses 70\nsoftirq 400 1 2\n")
    (root / "interrupts").write_text(INTERRUPTS.replace("5000", str(loc)))
    (root / "softirqs").write_text(SOFTIRQS.replace("10         20", f"{net_rx}         20"))
    return root


def test_proc_tables_by_kind_and_their_differences(tmp_path):
    before = read_proc(_proc(tmp_path / "a", faults=100, unaccepted=4096, loc=5000, net_rx=10))
    after = read_proc(_proc(tmp_path / "b", faults=250, unaccepted=1024, loc=5600, net_rx=60))
    assert before["interrupts.virtio1-req.0"] == 300 and before["interrupts.LOC"] == 11000
    assert before["interrupts.timer"] == 40 and before["softirqs.TIMER"] == 300
    assert before["stat.ctxt"] == 5000 and before["stat.intr"] == 900
    assert "vmstat.nr_free_pages" not in before  # only the mechanisms' counters
    change = differences(before, after)
    assert change["vmstat.pgfault"] == 150 and change["vmstat.pgmajfault"] == 0
    # a level: where it ended and how it moved (3072 pages accepted during the execution)
    assert change["vmstat.nr_unaccepted.end"] == 1024 and change["vmstat.nr_unaccepted"] == -3072
    assert change["interrupts.LOC"] == 600 and change["softirqs.NET_RX"] == 50
    # interrupt kinds that did not move are left out; softirqs and the rest are kept at zero
    assert "interrupts.virtio1-req.0" not in change and change["softirqs.HI"] == 0


def test_missing_proc_files_give_no_counters(tmp_path):
    assert read_proc(tmp_path) == {}
    assert differences({}, {"vmstat.pgfault": 3.0}) == {}


def test_a_software_perf_event_counts_and_a_missing_pmu_says_why():
    # the perf_event_open plumbing, with a software event every kernel has (context switches)
    perf = PerfCounters({"context-switches": (1, 3)})
    try:
        if perf.missing:
            pytest.skip(f"perf events are not permitted here: {perf.missing}")
        before = perf.read()["context-switches"]
        for _ in range(20):
            os.sched_yield()
            os.read(os.open("/proc/self/stat", os.O_RDONLY), 10)
        import time

        time.sleep(0.05)
        assert perf.read()["context-switches"] > before
    finally:
        perf.close()
    hardware = PerfCounters({"cycles": (0, 0)})
    try:
        if hardware.missing:
            assert "perf_event_open(cycles)" in hardware.missing["cycles"]
        else:
            assert hardware.read()["cycles"] > 0
    finally:
        hardware.close()


def _our_mounts(pid: int | str | None = None) -> list[str]:
    """The counters' mounts of one process (this test's own by default: another ccbench running on
    the machine meanwhile, a second suite or a study, has its own and is none of this test's)."""
    mark = f"ccbench-counters-{os.getpid() if pid is None else pid}-"
    return [line for line in open("/proc/self/mountinfo") if mark in line.split()[4]]


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting tracefs needs root")


@needs_root
def test_a_tracepoint_is_counted_and_every_mount_is_undone(tmp_path):
    before_mounts = _our_mounts()
    session = CounterSession(tmp_path, tracepoints=("syscalls:sys_enter_getppid", "nosuch:event"))
    session.open()
    try:
        if "trace.syscalls:sys_enter_getppid" in session.missing:
            pytest.skip(session.missing["trace.syscalls:sys_enter_getppid"])
        assert session.missing["trace.nosuch:event"] == "this kernel has no nosuch:event tracepoint"
        assert "exits" in session.missing and "hypervisor" in session.missing["exits"]
        ledger = json.loads((tmp_path / "counters" / "mounts.json").read_text())["entries"]
        assert any(e["kind"] == "trace-instance" for e in ledger)
        start = session.snapshot()
        for _ in range(5000):
            os.getppid()
        counted = differences(start, session.snapshot())["trace.syscalls:sys_enter_getppid"]
        # at least ours (another process's getppid counts too: the counters are the machine's)
        assert counted >= 5000
    finally:
        session.close()
    assert json.loads((tmp_path / "counters" / "mounts.json").read_text())["entries"] == []
    assert _our_mounts() == before_mounts


@needs_root
def test_what_a_killed_run_left_is_undone_by_the_next_run(tmp_path):
    before_mounts = _our_mounts()
    session = CounterSession(tmp_path, tracepoints=("syscalls:sys_enter_getppid",)).open()
    instances = [path for path in session.traces.values()]
    if not instances:
        session.close()
        pytest.skip(f"no tracepoint could be counted here: {session.missing}")
    # killed: nothing closed; the ledger knows, and the next run's (or ccbench cleanup's) clean-up reads it
    from ccbench.run.workdir import cleanup_stale as next_run_cleans_up

    session.perf.close()
    done = next_run_cleans_up(tmp_path)
    assert any("trace instance" in line for line in done), done
    assert _our_mounts() == before_mounts
    assert not (tmp_path / "counters" / "mounts.json").exists()
    assert cleanup_stale(tmp_path) == []


def test_a_runs_records_carry_the_counters_and_a_plan_can_turn_them_off(tmp_path, ccbench, workdir, write_plan):
    body = '[[workloads]]\nkind = "command"\nname = "{name}"\nrepetitions = 2\ncommand = "ls -R /usr/lib > /dev/null"\n'
    path = write_plan(body.format(name="counted") + body.format(name="quiet") + "counters = false\n")
    out = tmp_path / "out"
    done = ccbench("run", path, "--out", out, "--workdir", workdir)
    assert done.returncode == 0, done.stderr
    bundle = next(out.iterdir())
    records = [json.loads(line) for line in (bundle / "executions.jsonl").read_text().splitlines()]
    counted = [r for r in records if r["workload"] == "counted"]
    assert counted and all("counters" not in r for r in records if r["workload"] == "quiet")
    for record in counted:
        assert record["counters"]["stat.ctxt"] > 0 and record["counters"]["vmstat.pgfault"] > 0
        assert "exits" in record["counters_missing"]
        # the kernel's "swiotlb buffer is full" lines of the execution (none here), or why they cannot be read
        assert (
            record["counters"].get("kmsg.swiotlb_full") == 0 or "dmesg_restrict" in record["counters_missing"]["kmsg"]
        )
    # the workload's samples hold no counter; the counters read as samples of their own
    samples = [json.loads(line) for line in (bundle / "samples.jsonl").read_text().splitlines()]
    assert samples and not any(s["metric"].startswith("mech.") for s in samples)
    mech = list(counter_samples(bundle))
    assert {s["execution"] for s in mech} == {r["key"] for r in counted}
    assert all(s["metric"].startswith("mech.") for s in mech)
    assert any(s["metric"] == "mech.stat.ctxt" and s["value"] > 0 for s in mech)
    # the run undid its mounts
    assert (
        not (workdir / "counters" / "mounts.json").exists()
        or json.loads((workdir / "counters" / "mounts.json").read_text())["entries"] == []
    )


def test_defaults_turn_the_counters_off_for_every_workload_unless_one_says_otherwise():
    from ccbench.basics.errors import PlanError
    from ccbench.planning.plan import plan_from_dict

    document = {
        "defaults": {"counters": False},
        "workloads": [
            {"kind": "command", "name": "a", "command": "true"},
            {"kind": "command", "name": "b", "command": "true", "counters": True},
        ],
    }
    plan = plan_from_dict(document, "inline")
    assert [spec.counters for spec in plan.workloads] == [False, True]
    assert all(spec.counters for spec in plan_from_dict({"workloads": document["workloads"][:1]}, "x").workloads)
    with pytest.raises(PlanError):
        plan_from_dict({"defaults": {"counters": "sometimes"}, "workloads": []}, "inline")


def test_the_run_flag_turns_the_counters_off(tmp_path, ccbench, workdir, write_plan):
    path = write_plan('[[workloads]]\nkind = "command"\nname = "c"\nrepetitions = 1\ncommand = "true"\n')
    done = ccbench("run", path, "--out", tmp_path / "out", "--workdir", workdir, "--no-counters")
    assert done.returncode == 0, done.stderr
    records = (next((tmp_path / "out").iterdir()) / "executions.jsonl").read_text().splitlines()
    assert records and all("counters" not in json.loads(line) for line in records)


def test_idle_states_are_summed_over_cpus_and_unmountable_sources_say_why(tmp_path):
    sys_root = tmp_path / "sys"
    for cpu in (0, 1):
        for index, name in enumerate(("POLL", "haltpoll idle")):
            state = sys_root / f"devices/system/cpu/cpu{cpu}/cpuidle/state{index}"
            state.mkdir(parents=True)
            (state / "name").write_text(name + "\n")
            (state / "usage").write_text(f"{10 * (cpu + 1) * index}\n")
            (state / "time").write_text(f"{1000 * (cpu + 1) * index}\n")
    proc = _proc(tmp_path / "proc", faults=1, unaccepted=0, loc=1, net_rx=1)
    # no work directory: nothing may be mounted, so debugfs and tracefs say why they are missing
    session = CounterSession(None, proc_root=proc, sys_root=sys_root).open()
    try:
        values = session.snapshot()
        assert values["cpuidle.haltpoll idle.usage"] == 30 and values["cpuidle.haltpoll idle.time_us"] == 3000
        assert values["cpuidle.POLL.usage"] == 0
        assert "mounting it needs root" in session.missing["debugfs"]
        assert session.missing["swiotlb"].startswith("debugfs unavailable")
        assert session.missing["trace.swiotlb:swiotlb_bounced"].startswith("tracefs unavailable")
    finally:
        session.close()


@needs_root
def test_a_dead_runs_mounts_and_instances_are_swept_by_the_next_session_anywhere(tmp_path):
    import subprocess
    import sys

    # a run that dies with its session open, in a work directory nothing runs in again
    script = (
        "import os, sys\nfrom pathlib import Path\nfrom ccbench.observe.counters import CounterSession\n"
        "s = CounterSession(Path(sys.argv[1]), tracepoints=('syscalls:sys_enter_getppid',)).open()\n"
        "print(os.getpid(), *[str(p) for p in s.traces.values()], flush=True)\nos._exit(0)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "dead")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    pid, *instances = done.stdout.split()
    if not instances:
        pytest.skip("no tracepoint could be counted here")
    assert _our_mounts(pid)
    session = CounterSession(tmp_path / "next", tracepoints=("syscalls:sys_enter_getppid",)).open()
    try:
        tracefs = next(iter(session.traces.values())).parent.parent
        assert not (tracefs / "instances" / os.path.basename(instances[0])).exists()
    finally:
        session.close()
    assert not _our_mounts(pid)
