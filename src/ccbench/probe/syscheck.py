"""A before-run check of what makes measurements unstable (in the spirit of ``pyperf system show``).

Each check is ``{"name", "value", "ok", "advice"}``: ``ok`` is True (fine), False (likely to add
noise or bias: ``advice`` says what to change) or None (nothing to judge: not applicable here or
unreadable). Nothing is ever changed: ccbench prints the checks before a run and stores them in the
manifest; the user decides.

Reads sysfs and procfs under a root (default "/"), so fixtures and captured snapshots work; the
busy-process sample (psutil, over ``sample_s``) is taken on a live root only, or given as
``processes`` for a fixture. Given the probe document (``environment``), the lint's machine findings
(ccbench.probe.lint: a debug TEE; small bounce buffers when the plan moves data through devices) are
checks too, named "lint: <code>": printed like the others, never blocking the run.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

#: other processes' CPU (in CPUs) above which the machine is called busy; the same default as
#: ccbench.observe.interference.Thresholds.others_cpus, so the check and the per-execution flag agree
BUSY_CPUS = 0.25
#: a process is listed as busy above this share of one CPU during the sample
BUSY_PROCESS_CPUS = 0.05
STEAL_FRACTION = 0.05


def _read(root: Path, absolute: str) -> str | None:
    try:
        return (root / absolute.lstrip("/")).read_text(errors="replace").strip()
    except OSError:
        return None


def _check(name: str, value: Any, ok: bool | None, advice: str = "") -> dict[str, Any]:
    return {"name": name, "value": value, "ok": ok, "advice": advice}


def _selected(text: str) -> str:
    """The bracketed choice of a sysfs list like "always [madvise] never"."""
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
    return text


def check_governor(root: Path) -> dict[str, Any]:
    cpus = sorted((root / "sys/devices/system/cpu").glob("cpu[0-9]*"))
    governors = {}
    for cpu in cpus:
        value = _read(root, f"/sys/devices/system/cpu/{cpu.name}/cpufreq/scaling_governor")
        if value:
            governors[cpu.name] = value
    if not governors:
        return _check("cpu frequency governor", "no cpufreq (a VM or a fixed-frequency CPU)", None)
    kinds = sorted(set(governors.values()))
    value = (
        kinds[0]
        if len(kinds) == 1
        else ", ".join(f"{k} ({sum(v == k for v in governors.values())} CPUs)" for k in kinds)
    )
    if kinds == ["performance"]:
        return _check("cpu frequency governor", value, True)
    return _check(
        "cpu frequency governor",
        value,
        False,
        "set the performance governor for the run: cpupower frequency-set -g performance "
        "(or echo performance > /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor)",
    )


def check_boost(root: Path) -> dict[str, Any]:
    no_turbo = _read(root, "/sys/devices/system/cpu/intel_pstate/no_turbo")
    if no_turbo is not None:
        enabled = no_turbo == "0"
        where = "/sys/devices/system/cpu/intel_pstate/no_turbo"
        off = f"echo 1 > {where}"
    else:
        boost = _read(root, "/sys/devices/system/cpu/cpufreq/boost")
        if boost is None:
            return _check("cpu boost (turbo)", "not exposed (a VM or no boost control)", None)
        enabled = boost == "1"
        where = "/sys/devices/system/cpu/cpufreq/boost"
        off = f"echo 0 > {where}"
    if not enabled:
        return _check("cpu boost (turbo)", "disabled", True)
    return _check(
        "cpu boost (turbo)",
        "enabled",
        False,
        f"turbo frequency depends on temperature and on the other cores' load: for stable numbers "
        f"turn it off for the run ({off}) and back on after",
    )


def _meminfo(root: Path) -> dict[str, int]:
    values = {}
    for line in (_read(root, "/proc/meminfo") or "").splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[key] = int(parts[0]) * 1024
    return values


def check_swap(root: Path) -> dict[str, Any]:
    memory = _meminfo(root)
    if "SwapTotal" not in memory:
        return _check("swap in use", "unreadable", None)
    if memory["SwapTotal"] == 0:
        return _check("swap in use", "no swap", True)
    used = memory["SwapTotal"] - memory.get("SwapFree", 0)
    value = f"{used / 2**20:.0f} MiB of {memory['SwapTotal'] / 2**20:.0f} MiB"
    if used <= 0:
        return _check("swap in use", value, True)
    available = memory.get("MemAvailable")
    note = f" ({available / 2**30:.1f} GiB available now)" if available is not None else ""
    return _check(
        "swap in use",
        value,
        False,
        "pages were swapped out: a workload touching them waits for the disk. Free memory and run "
        f"swapoff -a && swapon -a to bring them back in{note}, or make sure the workload fits in RAM",
    )


def check_thp(root: Path) -> dict[str, Any]:
    enabled = _read(root, "/sys/kernel/mm/transparent_hugepage/enabled")
    if enabled is None:
        return _check("transparent huge pages", "not available", None)
    mode = _selected(enabled)
    defrag = _read(root, "/sys/kernel/mm/transparent_hugepage/defrag")
    value = mode + (f" (defrag {_selected(defrag)})" if defrag else "")
    if mode == "always":
        return _check(
            "transparent huge pages",
            value,
            False,
            "with THP always, khugepaged collapses pages in the background and allocations may "
            "compact memory: a source of run-to-run variance; for stable numbers use madvise "
            "(echo madvise > /sys/kernel/mm/transparent_hugepage/enabled), and record it either way",
        )
    return _check("transparent huge pages", value, True)


def _cpu_ticks(root: Path) -> tuple[int, int, int] | None:
    """(busy, steal, cpus) from <root>/proc/stat."""
    text = _read(root, "/proc/stat")
    if not text:
        return None
    busy = steal = cpus = 0
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            values = [int(v) for v in parts[1:]] + [0] * 10
            busy = values[0] + values[1] + values[2] + values[5] + values[6]
            steal = values[7]
        elif parts and parts[0].startswith("cpu") and parts[0][3:].isdigit():
            cpus += 1
    return busy, steal, cpus


def own_processes() -> set[int]:
    """ccbench's own processes (live): this one and its descendants, and the trees of the processes
    registered as its own (ccbench.basics.ownprocs: the fleet agent's connection), each by pid and start time."""
    import psutil

    from ccbench.basics import ownprocs

    roots = [psutil.Process()]
    for pid, start in ownprocs.registered(os.environ.get(ownprocs.ENV)):
        if ownprocs.start_ticks(pid) == start:
            try:
                roots.append(psutil.Process(pid))
            except psutil.Error:
                continue
    own = set()
    for root in roots:
        try:
            own |= {root.pid, *(child.pid for child in root.children(recursive=True))}
        except psutil.Error:
            continue
    return own


def sample_processes(sample_s: float, exclude: set[int] | None = None) -> tuple[list[dict[str, Any]], float]:
    """Per-process CPU over ``sample_s`` seconds (live, psutil): the busy ones, and everyone else's total
    in CPUs. ccbench's own processes (own_processes, as they are when the sample starts) are left out."""
    import psutil

    before: dict[int, tuple[psutil.Process, float]] = {}
    for process in psutil.process_iter():
        try:
            times = process.cpu_times()
            before[process.pid] = (process, times.user + times.system)
        except psutil.Error:
            continue
    # after the listing: a process of ccbench's started meanwhile is known as its own
    exclude = set(exclude or ()) | own_processes()
    start = time.monotonic()
    time.sleep(sample_s)
    elapsed = time.monotonic() - start
    busy, total = [], 0.0
    for pid, (process, cpu0) in before.items():
        if pid in exclude:
            continue
        try:
            with process.oneshot():
                times = process.cpu_times()
                used = (times.user + times.system - cpu0) / elapsed
                name = process.name()
        except psutil.Error:
            continue
        total += max(0.0, used)
        if used >= BUSY_PROCESS_CPUS:
            busy.append({"pid": pid, "name": name, "cpus": round(used, 3)})
    busy.sort(key=lambda p: -p["cpus"])
    return busy, round(total, 3)  # rounded as each process is, so the total is never below one of its parts


def check_busy_processes(
    root: Path, sample_s: float, processes: list[dict[str, Any]] | None, live: bool
) -> list[dict[str, Any]]:
    checks = []
    before = _cpu_ticks(root) if live else None
    if processes is None and live:
        processes, others = sample_processes(sample_s)
    elif processes is not None:
        others = sum(p["cpus"] for p in processes)
    else:
        return [_check("other busy processes", "not sampled (not the live machine)", None)]
    top = processes[:5]
    value = ", ".join(f"{p['name']} (pid {p['pid']}) {p['cpus']:.2f} CPUs" for p in top) or "none"
    summary = f"{others:.2f} CPUs used by other processes" + (f": {value}" if top else "")
    if others <= BUSY_CPUS:
        checks.append(_check("other busy processes", summary, True))
    else:
        checks.append(
            _check(
                "other busy processes",
                summary,
                False,
                "other work on this machine competes with the benchmark: stop it or wait for it "
                "(executions during which others use more than "
                f"{BUSY_CPUS} CPUs are flagged contended)",
            )
        )
    after = _cpu_ticks(root) if live else None
    if before and after and after[2]:
        hz = os.sysconf("SC_CLK_TCK")
        steal = (after[1] - before[1]) / hz / sample_s
        checks.append(
            _check(
                "cpu steal",
                f"{steal:.1%} of one CPU during the sample",
                steal <= STEAL_FRACTION,
                ""
                if steal <= STEAL_FRACTION
                else "the hypervisor ran other guests on this VM's CPUs: choose dedicated or "
                "isolated vCPUs, or expect noisier numbers (executions are flagged)",
            )
        )
    return checks


def check_load(root: Path) -> dict[str, Any]:
    text = _read(root, "/proc/loadavg")
    ticks = _cpu_ticks(root)
    if not text or not ticks or not ticks[2]:
        return _check("load average", "unreadable", None)
    load = float(text.split()[0])
    cpus = ticks[2]
    value = f"{load:.2f} (1 min) on {cpus} CPUs"
    if load < 0.5 * cpus:
        return _check("load average", value, True)
    return _check(
        "load average",
        value,
        False,
        "the run queue was busy in the last minute: wait for other work to finish before measuring",
    )


def check_library_aes(aes: dict[str, Any] | None) -> dict[str, Any]:
    """OpenSSL's AES-GCM speed on its default path against its other paths (see probe.crypto.openssl_aes_speed)."""
    name = "TLS library AES (OpenSSL AES-256-GCM)"
    if aes is None:
        return _check(name, "not measured", None)
    if "reason" in aes:
        return _check(name, aes["reason"], None)
    speeds = ", ".join(f"{k} {v:.0f} MB/s" for k, v in aes["MBps"].items() if v)
    if aes.get("accelerated") and aes.get("default_share_of_best", 0) >= 0.2:
        return _check(name, speeds, True)
    return _check(
        name,
        speeds,
        False,
        aes.get("verdict", "") + ". Transport (TLS) costs measured now would not be those of a machine "
        "whose AES instructions run at full speed; measure again later or elsewhere, or pin OpenSSL's path "
        "(OPENSSL_ia32cap, see docs/trust.md) and say so",
    )


def check_lint(environment: dict[str, Any] | None, device_io: bool | None) -> list[dict[str, Any]]:
    """The lint's findings on this machine as checks (ok None for what could not be checked)."""
    from ccbench.probe.lint import INFO, lint_machine

    if environment is None:
        return []
    findings = lint_machine(environment, device_io)
    if not findings:
        return [_check("lint (docs/trust.md, Lint)", "no findings", True)]
    return [
        _check(
            f"lint: {finding.code}",
            finding.what,
            None if finding.severity == INFO else False,
            f"{finding.advice} (source: {finding.source})",
        )
        for finding in findings
    ]


def system_check(
    root: str | Path = "/",
    *,
    sample_s: float = 0.5,
    processes: list[dict[str, Any]] | None = None,
    aes: dict[str, Any] | None | bool = True,
    environment: dict[str, Any] | None = None,
    device_io: bool | None = None,
) -> list[dict[str, Any]]:
    """Every check, in a fixed order. ``processes`` (``{"pid", "name", "cpus"}``) replaces the live sample;
    ``aes``: True measures OpenSSL's AES paths on a live root (about 3 s), False skips it, a dict
    (``probe.crypto.assess_aes_speed``) is used as given. ``environment`` (the probe document) adds
    the lint's findings on this machine; ``device_io``: whether the plan moves data through devices
    (None: not known, the bounce-buffer check is left out)."""
    root = Path(root)
    live = root.resolve() == Path("/")
    checks = [check_governor(root), check_boost(root), check_swap(root), check_thp(root), check_load(root)]
    checks.extend(check_busy_processes(root, sample_s, processes, live))
    if aes is True:
        from ccbench.probe.crypto import openssl_aes_speed

        aes = openssl_aes_speed() if live else None
    if aes is not False:
        checks.append(check_library_aes(aes if isinstance(aes, dict) else None))
    checks.extend(check_lint(environment, device_io))
    return checks


def format_checks(checks: list[dict[str, Any]]) -> str:
    """Lines for the console: a mark, the name, the value, and the advice under a check that is not ok."""
    marks = {True: "ok  ", False: "WARN", None: "--  "}
    lines = []
    for check in checks:
        lines.append(f"{marks[check['ok']]} {check['name']}: {check['value']}")
        if check["ok"] is not True and check["advice"]:
            lines.append(f"       -> {check['advice']}")
    return "\n".join(lines)
