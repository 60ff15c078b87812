"""Mechanism counters: what the guest can count of the mechanisms behind a TEE's cost, per execution.

Around each execution (the worker's whole life, like the interference watch) the supervisor takes
two snapshots and records their differences in the execution record (docs/mechanisms.md):

- ``vmstat.*``: page faults, major faults, transparent huge pages, migrations (/proc/vmstat);
  ``vmstat.nr_unaccepted`` is a level (pages not yet accepted by a TDX or SEV-SNP guest): its value
  at the end is recorded as ``vmstat.nr_unaccepted.end`` beside the change;
- ``stat.*``: context switches, interrupts, softirqs and forks (/proc/stat);
- ``interrupts.*``: interrupts per kind (/proc/interrupts: LOC, RES, CAL, TLB... and each device's
  action name), summed over CPUs, those that moved;
- ``softirqs.*``: softirqs per kind (/proc/softirqs), summed over CPUs;
- ``swiotlb.used.end``, ``swiotlb.hiwater.end``: bounce-buffer slabs in use at the end (about 0 once
  the I/O stopped) and the high-water mark of the execution (debugfs ``swiotlb/io_tlb_used``,
  ``io_tlb_used_hiwater``: reset to 0 at the start of each execution where the file is writable,
  else the mark since boot, said in ``counters_missing``); a value above the pool
  (``io_tlb_nslabs`` plus the transient slabs) is rejected with the reason (some 6.5-6.8 kernels
  read 18446744073709551615 after an underflow); ``swiotlb.transient_nslabs`` (.end and change):
  the slabs of dynamic pools (CONFIG_SWIOTLB_DYNAMIC), each a private-to-shared conversion in a CVM;
  ``swiotlb.nslabs`` (.end and change): the pool's slabs; ``kmsg.swiotlb_full``: the kernel's "swiotlb
  buffer is full" lines (ccbench.probe.kmsg: /dev/kmsg, root), each a mapping the pool could not take;
- ``cpuidle.<state>.usage``, ``cpuidle.<state>.time_us``: how often the CPUs entered each idle
  state and how long they stayed, summed over CPUs (the halts behind idle exits; POLL never halts);
- ``trace.<event>``: how often a tracepoint fired (``swiotlb:swiotlb_bounced``,
  ``tdx:tdx_virtualization_exception``), from a tracefs instance of ccbench's own per event
  (events written plus overwritten in a tiny ring buffer: counting, never reading the events);
- ``pmu.cycles``, ``pmu.instructions``: hardware counters over the online CPUs
  (/sys/devices/system/cpu/online), where a PMU exists.

All of them count the whole machine, as the guest sees it. What cannot be read says why in
``counters_missing`` (name -> reason): no PMU, no bounce-buffer pool, a tracepoint this kernel lacks,
kernel lockdown (/sys/kernel/security/lockdown: debugfs then refuses its writable files, such as the
high-water mark), and exits, which only the host counts.

debugfs and tracefs are mounted, where they are not already, at private mount points of this run
(never on /sys/kernel/*, which other tools may mount and unmount), each recorded in the run's ledger
(``<workdir>/counters/mounts.json``) before it is made and undone at the run's end, or by the next
run and ``ccbench cleanup`` after a kill (``cleanup_stale``).

Records, not samples in samples.jsonl: the counters are facts about the machine during an
execution, never the workload's result, so they stay out of the workload's metrics, tables and
verdicts; ``counter_samples`` gives them as samples (metric ``mech.<name>``) for the analysis that
wants them (the mechanism breakdown).

The rooms, bottom up: ``proc`` (the plain readers and shared names), ``perf`` (hardware counters),
``mounts`` (private mounts and the ledger), ``session`` (one run's session, its records and samples).
"""

from ccbench.counters.mounts import MOUNT_PREFIX, cleanup_stale, sweep_orphans
from ccbench.counters.perf import PerfCounters
from ccbench.counters.proc import (
    EXITS_REASON,
    LEDGER,
    LEVELS,
    METRIC_PREFIX,
    PMU_EVENTS,
    TRACEPOINTS,
    differences,
    lockdown_mode,
    online_cpus,
    read_proc,
)
from ccbench.counters.session import CounterSession, counter_samples, execution_fields

__all__ = [
    "CounterSession",
    "EXITS_REASON",
    "LEDGER",
    "LEVELS",
    "METRIC_PREFIX",
    "MOUNT_PREFIX",
    "PMU_EVENTS",
    "PerfCounters",
    "TRACEPOINTS",
    "cleanup_stale",
    "counter_samples",
    "differences",
    "execution_fields",
    "lockdown_mode",
    "online_cpus",
    "read_proc",
    "sweep_orphans",
]
