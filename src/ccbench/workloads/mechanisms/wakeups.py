"""The cross-vCPU wake-up case's figures from ``ccmech wake``'s document (crates/ccmech/src/wake.rs):
per vCPU count, the time per futex wake-up of a ping-pong between two pinned threads and per fan-out
and join of a pool of one worker per vCPU, with the rescheduling (RES) and function-call (CAL) IPIs
and the halts (entries into a non-POLL cpuidle state) per wake-up on the CPUs in use. Pure functions:
each returns the measurements and the figures it could not give, each with the reason."""

from __future__ import annotations

import statistics
from typing import Any

from ccbench.model import Measurement

Missing = dict[str, str]
MECHANISM = "cross-vcpu-wakeup"
INTERRUPTS_SOURCE = "/proc/interrupts (the Rescheduling and Function call rows: RES and CAL on x86)"
IDLE_SOURCE = "/sys/devices/system/cpu/cpu<N>/cpuidle/state<K>/usage (entries into each idle state)"
#: the idle state that never halts (the kernel's polling loop, haltpoll's and ACPI's state 0)
POLL_STATE = "POLL"


def sweep(allowed: int, asked: list[int] | None = None) -> list[int]:
    """The vCPU counts to measure: those asked, else 1, 2, 4, ... up to the CPUs this process may
    use, and that number itself."""
    if asked:
        return sorted(set(asked))
    counts = {allowed}
    count = 1
    while count < allowed:
        counts.add(count)
        count *= 2
    return sorted(counts)


def wake_measurements(document: dict[str, Any]) -> tuple[list[Measurement], list[Missing]]:
    """Both patterns of one vCPU count; a count the process cannot use is named as missing."""
    vcpus = document.get("vcpus")
    if "skipped" in document:
        return [], [{"figure": f"cross-vCPU wake-ups at {vcpus} vCPUs", "why": document["skipped"]}]
    out: list[Measurement] = []
    missing: list[Missing] = []
    shared = None
    if vcpus == 1:
        shared = (
            f"one vCPU: every thread shares CPU {document['cpus'][0]}, a wake-up is a context switch there (no IPI)"
        )
    for pattern, key, metric, per in (
        ("ping-pong", "ping_pong", "cross_wakeup_ns", "ns_per_wakeup"),
        ("fan-out", "fan_out", "fanout_join_ns", "ns_per_round"),
    ):
        part = document[key]
        case = {"mechanism": MECHANISM, "pattern": pattern, "vcpus": vcpus}
        metadata = {
            "cpus": part["cpus"],
            "batches_ns": part[per],
            "wakeups": part["wakeups"],
            # hand-offs that found the other side asleep in FUTEX_WAIT (the rest found it not yet waiting)
            "slept_share": part["slept"] / part["wakeups"] if part["wakeups"] else None,
            "shared_cpu": shared,
        }
        if pattern == "ping-pong":
            metadata["round_trip_ns"] = 2 * statistics.median(part[per])
            metadata["per"] = "wake-up (half a round trip between two threads)"
        else:
            metadata["workers"] = part["workers"]
            metadata["per"] = f"round: {part['workers']} workers woken by one FUTEX_WAKE, the coordinator by the last"
        out.append(
            Measurement(metric=metric, unit="ns", value=statistics.median(part[per]), case=case, metadata=metadata)
        )
        found, lacking = _per_wakeup(part, case, document.get("idle_driver"))
        out += found
        missing += lacking
    return out, missing


def _per_wakeup(
    part: dict[str, Any], case: dict[str, Any], driver: str | None
) -> tuple[list[Measurement], list[Missing]]:
    """IPIs and halts per wake-up over the pattern's batches, on the CPUs in use."""
    wakeups = part["wakeups"] or 1
    counts = part.get("counts") or {}
    label = f"{case['pattern']}, {case['vcpus']} vCPUs"
    out: list[Measurement] = []
    missing: list[Missing] = []
    ipis = counts.get("ipis")
    if ipis is None:
        missing.append(
            {
                "figure": f"IPIs per wake-up ({label})",
                "why": "/proc/interrupts has no Rescheduling or Function call interrupts row on this kernel",
            }
        )
    else:
        out.append(
            Measurement(
                metric="ipis_per_wakeup",
                unit="IPIs",
                better=None,
                value=(ipis["res"] + ipis["cal"]) / wakeups,
                case=case,
                metadata={
                    "res_per_wakeup": ipis["res"] / wakeups,
                    "cal_per_wakeup": ipis["cal"] / wakeups,
                    "res": ipis["res"],
                    "cal": ipis["cal"],
                    "source": f"{INTERRUPTS_SOURCE}, columns of CPUs {part['cpus']}",
                },
            )
        )
    idle = counts.get("idle") or {}
    if not idle:
        missing.append(
            {
                "figure": f"halts per wake-up ({label})",
                "why": "no cpuidle states in sysfs for the CPUs in use (no idle driver: the kernel halts in "
                "default_idle without counting; the host counts those halts as HLT exits, a guest cannot)",
            }
        )
    else:
        halts = sum(v for name, v in idle.items() if name != POLL_STATE)
        out.append(
            Measurement(
                metric="halts_per_wakeup",
                unit="halts",
                better=None,
                value=halts / wakeups,
                case=case,
                metadata={
                    "idle_entries": idle,
                    "polls_per_wakeup": idle.get(POLL_STATE, 0) / wakeups,
                    "idle_driver": driver,
                    "source": f"{IDLE_SOURCE}, the states other than {POLL_STATE} (each entry a halt), CPUs {part['cpus']}",
                },
            )
        )
    return out, missing
