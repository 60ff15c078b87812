"""mechanisms: one case per mechanism behind a confidential VM's cost (docs/mechanisms.md), each
measured alone on this machine, so that the breakdown (ccbench.analysis.rows.breakdown) can set a count
against a unit cost and a reader can compare machines mechanism by mechanism:

* ``exits``: the round trip of an instruction the hypervisor (or the TEE's firmware) serves: CPUID of
  a leaf an SEV-SNP CPUID table or the TDX module serves alone (0x0), of one that reaches the
  hypervisor on SEV-SNP (0xB) and on TDX (0x40000000), and a write to port 0x80 (in a child process,
  never in a TDX guest, where it faults); ns and TSC cycles per operation with the empty loop
  subtracted (ccmech, crates/ccmech), each with who serves it on this machine (``served_by``, from
  the probe: parse.served_by);
* ``memory``: STREAM copy and triad bandwidth and the latency of a dependent load chased in random
  order, over buffers four times the last-level cache, on 4K and on 2M pages (the share the kernel
  backed with 2M pages recorded; ccmech);
* ``first-touch``: a fresh region touched page by page, time per 4K and per 2M page, with the memory
  the kernel accepted meanwhile (nr_unaccepted) where it has unaccepted memory (ccmech);
* ``wakeup``: timer wake-up latency from cyclictest (rt-tests), one thread, a bounded run, with the
  machine's idle states left as they are (``--laptop``: /dev/cpu_dma_latency untouched), where
  halt exits and haltpoll show;
* ``cross-wakeup``: one thread waking another pinned on another vCPU through a futex (ping-pong: ns
  per wake-up) and a pool of one worker per vCPU fanned out and joined (ns per round), swept over the
  vCPU counts this process may use (1, 2, 4, ... and all; at 1 every thread shares the CPU), with the
  RES and CAL IPIs and the halts (non-POLL cpuidle entries) per wake-up on the CPUs in use (ccmech
  wake; wakeups.py);
* ``evidence``: the time to obtain a fresh attestation report or quote through configfs-tsm where the
  guest can (evidence.py), else named as missing with what was looked for.

ccmech is found by binary.find (``$CCBENCH_CCMECH``, the checkout's build, the copy the fleet ships
to hosts and study guests: ``shipped_tools``), and every figure it gave records its version and where
it was found (``metadata.ccmech``).

Every execution also records ``missing_figures``: how many figures it could not give, each with the
reason in the sample's metadata (port I/O without ioperm, no unaccepted memory, ...).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from ccbench.attestation.evidence import TsmProvider
from ccbench.model import Measurement
from ccbench.workloads.base import ExecutionContext, Workload, WorkloadFailed, WorkloadParams, missing_tools, size_bytes
from ccbench.workloads.mechanisms import binary, parse, wakeups
from ccbench.workloads.mechanisms.binary import INSTALL_HINT
from ccbench.workloads.mechanisms.evidence import evidence_latency

#: the checkout's build of ccmech (binary.find looks there second)
BINARY = binary.CHECKOUT
CASES = ("exits", "memory", "first-touch", "wakeup", "cross-wakeup", "evidence")
Case = Literal["exits", "memory", "first-touch", "wakeup", "cross-wakeup", "evidence"]
#: the floor of an automatic buffer size, and the size where the last-level cache cannot be read
FLOOR_BYTES, UNKNOWN_CACHE_BYTES = 64 * 2**20, 256 * 2**20


def last_level_cache_bytes(root: Path = Path("/")) -> int | None:
    """The largest cache of CPU 0 as sysfs reports it (its last level), or None."""
    caches = root / "sys/devices/system/cpu/cpu0/cache"
    sizes = []
    for index in sorted(caches.glob("index*")):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        match = re.fullmatch(r"(\d+)([KMG]?)", text)
        if match:
            sizes.append(int(match.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2)])
    return max(sizes) if sizes else None


class MechanismsParams(WorkloadParams):
    cases: list[Case] = Field(default_factory=lambda: list(CASES))
    pages: list[Literal["4k", "2m"]] = Field(default_factory=lambda: ["4k", "2m"])
    #: operations per timed batch of each exit case, and batches (the median batch is the figure)
    exit_iterations: int = Field(20_000, ge=100)
    exit_batches: int = Field(5, ge=1, le=100)
    #: bytes per array (and of the chased buffer): "auto" is four times the last-level cache, at least 64M
    memory_size: str = "auto"
    memory_passes: int = Field(3, ge=1, le=50)
    touch_size: str = "256M"
    wakeup_seconds: int = Field(5, ge=1, le=600)
    wakeup_interval_us: int = Field(1000, ge=50)
    #: cyclictest's SCHED_FIFO priority; 0 keeps the normal scheduler (no real-time rights needed)
    wakeup_priority: int = Field(0, ge=0, le=99)
    #: the histogram's range in us (wake-ups beyond it are counted as overflows)
    wakeup_histogram_us: int = Field(5000, ge=10)
    #: the cross-vCPU case's vCPU counts (empty: 1, 2, 4, ... up to the CPUs this process may use, and
    #: that number), its round trips and fan-out rounds per batch, and batches (the median is the figure)
    cross_wakeup_vcpus: list[int] = Field(default_factory=list)
    cross_wakeup_round_trips: int = Field(5000, ge=10)
    cross_wakeup_rounds: int = Field(2000, ge=10)
    cross_wakeup_batches: int = Field(5, ge=1, le=100)
    #: fresh reports the evidence case obtains (the median is the figure; the first is kept apart)
    evidence_reports: int = Field(3, ge=1, le=100)

    @field_validator("cross_wakeup_vcpus")
    @classmethod
    def _vcpus(cls, value: list[int]) -> list[int]:
        if any(count < 1 for count in value):
            raise ValueError(f"cross_wakeup_vcpus {value} holds a count below 1")
        return value

    @field_validator("memory_size", "touch_size")
    @classmethod
    def _size(cls, value: str) -> str:
        if value != "auto" and not re.fullmatch(r"\d+[KkMmGg]?", value):
            raise ValueError(f"size {value!r} is not like 64M or 1G (or auto for memory_size)")
        return value


class Mechanisms(Workload):
    kind = "mechanisms"
    description = (
        "one case per confidential-VM mechanism: exit round trips (CPUID, port I/O), encrypted-memory bandwidth "
        "and latency on 4K/2M pages, first touch, timer wake-up, cross-vCPU futex wake-ups with their IPIs and halts, "
        "attestation evidence latency (ccmech, cyclictest, configfs-tsm)"
    )
    Params = MechanismsParams
    setup_component = "mechanisms"
    matrix_params = frozenset({"cases", "pages"})
    #: each case's own figure: the unit costs the breakdown reads
    primary_metrics = (
        "exit_ns",
        "copy_bandwidth",
        "load_latency",
        "first_touch_ns",
        "wakeup_avg",
        "cross_wakeup_ns",
        "evidence_ms",
    )

    #: the cases ccmech measures (the timer wake-up runs cyclictest, the evidence case reads configfs-tsm)
    CCMECH_CASES = frozenset({"exits", "memory", "first-touch", "cross-wakeup"})

    @classmethod
    def shipped_tools(cls) -> dict[str, Path | str]:
        """ccmech, which hosts and guests cannot build (no source checkout there): this machine's, by
        the same lookup the workload makes, or why there is none."""
        try:
            return {binary.NAME: binary.find().path}
        except binary.NotFound as exc:
            return {binary.NAME: str(exc)}

    def requirements(self) -> str | None:
        """Skip only when no case can run: without ccmech the wake-up case still runs (the others are
        then named as missing, with the install hint), without cyclictest the ccmech cases do. The
        evidence case needs no tool (without a TEE it names its figure as missing), so it keeps the
        workload running only where it is the one case asked."""
        asked = [case for case in self.params.cases if case != "evidence"] or self.params.cases
        runnable = [case for case in asked if self._unavailable(case) is None]
        if not runnable:
            return "; ".join(dict.fromkeys(self._unavailable(case) for case in asked))
        return None

    def _unavailable(self, case: str) -> str | None:
        if case == "wakeup":
            return f"cyclictest (rt-tests) is not installed: {INSTALL_HINT}" if missing_tools("cyclictest") else None
        if case == "evidence":
            return None
        try:
            binary.find()
        except binary.NotFound as exc:
            return str(exc)
        return None

    def run(self, ctx: ExecutionContext) -> list[Measurement]:
        measurements: list[Measurement] = []
        missing: list[parse.Missing] = []
        for case in self.params.cases:
            reason = self._unavailable(case)
            if reason:
                missing.append({"figure": case, "why": reason})
                continue
            found, lacking = getattr(self, "_" + case.replace("-", "_"))(ctx)
            if case in self.CCMECH_CASES:
                for measurement in found:
                    measurement.metadata["ccmech"] = self._ccmech_used()
            measurements += found
            missing += lacking
        measurements.append(
            Measurement(
                metric="missing_figures", unit="figures", better=None, value=len(missing), metadata={"missing": missing}
            )
        )
        return measurements

    def _ccmech_used(self) -> dict[str, str]:
        """The ccmech this execution runs: its path, where it was found, its version (asked once)."""
        if getattr(self, "_used", None) is None:
            found = binary.find()
            self._used = {"path": str(found.path), "found": found.source, "version": binary.version(found.path)}
        return self._used

    def _ccmech(self, ctx: ExecutionContext, log_name: str, *args: str) -> dict:
        done = ctx.run_command([self._ccmech_used()["path"], *args], log_name=log_name)
        try:
            return json.loads(done.stdout)
        except ValueError as exc:
            raise WorkloadFailed(f"ccmech {args[0]} printed no JSON document ({exc}): see {log_name}.stdout") from None

    def _exits(self, ctx: ExecutionContext):
        """Every case ccmech printed before it ended counts, however it ended (a case that killed it is
        named as missing with the signal); who serves each exit comes from the machine's probe."""
        p = self.params
        argv = [
            self._ccmech_used()["path"],
            "exits",
            "--iterations",
            str(p.exit_iterations),
            "--batches",
            str(p.exit_batches),
        ]
        done = ctx.run_command(argv, log_name="ccmech-exits", check=False)
        document, lost = parse.exit_document(done.stdout, done.returncode, done.stderr)
        environment = ctx.environment or {}
        flags = (environment.get("cpu") or {}).get("flags")
        hypervisor = "hypervisor" in flags if isinstance(flags, list | set | tuple) else None
        found, missing = parse.exit_measurements(document, environment.get("tee") or {}, hypervisor)
        return found, missing + lost

    def _memory_bytes(self) -> int:
        if self.params.memory_size != "auto":
            return size_bytes(self.params.memory_size)
        cache = last_level_cache_bytes()
        return max(4 * cache, FLOOR_BYTES) if cache else UNKNOWN_CACHE_BYTES

    def _memory(self, ctx: ExecutionContext):
        size, out, missing = str(self._memory_bytes()), [], []
        for pages in self.params.pages:
            document = self._ccmech(
                ctx,
                f"ccmech-memory-{pages}",
                "memory",
                "--pages",
                pages,
                "--array-bytes",
                size,
                "--chase-bytes",
                size,
                "--passes",
                str(self.params.memory_passes),
            )
            found, lacking = parse.memory_measurements(document)
            out, missing = out + found, missing + lacking
        return out, missing

    def _first_touch(self, ctx: ExecutionContext):
        out, missing = [], []
        for pages in self.params.pages:
            document = self._ccmech(
                ctx,
                f"ccmech-touch-{pages}",
                "touch",
                "--pages",
                pages,
                "--bytes",
                str(size_bytes(self.params.touch_size)),
            )
            found, lacking = parse.first_touch_measurements(document)
            out, missing = out + found, missing + lacking
        return out, missing

    def _wakeup(self, ctx: ExecutionContext):
        p = self.params
        report = ctx.raw_dir / "cyclictest.json"
        argv = ["cyclictest", "-D", f"{p.wakeup_seconds}s", "-i", str(p.wakeup_interval_us), "-t", "1", "-q"]
        argv += ["-h", str(p.wakeup_histogram_us), f"--json={report}", "--laptop"]
        if p.wakeup_priority:
            argv += ["-p", str(p.wakeup_priority)]
        ctx.run_command(argv, log_name="cyclictest")
        try:
            document = json.loads(report.read_text())
        except (OSError, ValueError) as exc:
            raise WorkloadFailed(f"cyclictest wrote no readable --json report ({exc})") from None
        return parse.wakeup_measurements(document, p.wakeup_interval_us)

    def _cross_wakeup(self, ctx: ExecutionContext):
        p = self.params
        out, missing = [], []
        for vcpus in wakeups.sweep(len(os.sched_getaffinity(0)), p.cross_wakeup_vcpus):
            document = self._ccmech(
                ctx,
                f"ccmech-wake-{vcpus}",
                "wake",
                "--vcpus",
                str(vcpus),
                "--round-trips",
                str(p.cross_wakeup_round_trips),
                "--rounds",
                str(p.cross_wakeup_rounds),
                "--batches",
                str(p.cross_wakeup_batches),
            )
            found, lacking = wakeups.wake_measurements(document)
            out, missing = out + found, missing + lacking
        return out, missing

    def _evidence(self, ctx: ExecutionContext):
        return evidence_latency(TsmProvider(), self.params.evidence_reports, (ctx.environment or {}).get("tee"))
