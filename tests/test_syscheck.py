"""The before-run system check: fixture roots (a tuned and an untuned machine) and the live machine."""

import os
import signal
import subprocess
import sys

from ccbench.probe.crypto import assess_aes_speed
from ccbench.probe.syscheck import format_checks, sample_processes, system_check


def _root(tmp_path, name, files):
    root = tmp_path / name
    for path, text in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return root


STAT = "cpu  100 0 50 1000 0 0 0 0 0 0\ncpu0 50 0 25 500 0 0 0 0 0 0\ncpu1 50 0 25 500 0 0 0 0 0 0\n"


def test_an_untuned_machine_gets_advice_for_each_problem(tmp_path):
    root = _root(
        tmp_path,
        "untuned",
        {
            "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "powersave\n",
            "/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor": "powersave\n",
            "/sys/devices/system/cpu/intel_pstate/no_turbo": "0\n",
            "/proc/meminfo": "MemTotal: 8000000 kB\nMemAvailable: 1000000 kB\nSwapTotal: 2097148 kB\nSwapFree: 1048574 kB\n",
            "/sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never\n",
            "/sys/kernel/mm/transparent_hugepage/defrag": "always defer [madvise] never\n",
            "/proc/loadavg": "3.10 2.00 1.00 4/300 999\n",
            "/proc/stat": STAT,
        },
    )
    slow_vaes = assess_aes_speed(
        "aes-256-gcm", {"default": 61.0, "without VAES": 2951.0, "software (no AES-NI)": 300.0}
    )
    checks = {
        c["name"]: c
        for c in system_check(
            root,
            processes=[{"pid": 42, "name": "backup", "cpus": 0.9}, {"pid": 43, "name": "sshd", "cpus": 0.01}],
            aes=slow_vaes,
        )
    }
    assert checks["cpu frequency governor"]["value"] == "powersave" and checks["cpu frequency governor"]["ok"] is False
    assert "performance" in checks["cpu frequency governor"]["advice"]
    assert checks["cpu boost (turbo)"]["ok"] is False and "no_turbo" in checks["cpu boost (turbo)"]["advice"]
    assert checks["swap in use"]["ok"] is False and checks["swap in use"]["value"].startswith("1024 MiB")
    assert checks["transparent huge pages"]["value"] == "always (defrag madvise)"
    assert checks["transparent huge pages"]["ok"] is False
    assert checks["load average"]["ok"] is False
    busy = checks["other busy processes"]
    assert busy["ok"] is False and "backup (pid 42)" in busy["value"]
    library = checks["TLS library AES (OpenSSL AES-256-GCM)"]
    assert library["ok"] is False and "48x slower than without VAES" in library["advice"]
    assert all(c["advice"] for c in checks.values() if c["ok"] is False)
    text = format_checks(list(checks.values()))
    assert "WARN cpu frequency governor: powersave" in text and "-> set the performance governor" in text


def test_a_tuned_machine_passes_and_missing_controls_are_not_judged(tmp_path):
    root = _root(
        tmp_path,
        "tuned",
        {
            "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "performance\n",
            "/sys/devices/system/cpu/cpufreq/boost": "0\n",
            "/proc/meminfo": "MemTotal: 8000000 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n",
            "/sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n",
            "/proc/loadavg": "0.10 0.20 0.30 1/300 999\n",
            "/proc/stat": STAT,
        },
    )
    fast = assess_aes_speed("aes-256-gcm", {"default": 3000.0, "without VAES": 2900.0, "software (no AES-NI)": 300.0})
    checks = {c["name"]: c for c in system_check(root, processes=[], aes=fast)}
    assert all(c["ok"] is True for c in checks.values()), checks
    assert checks["cpu boost (turbo)"]["value"] == "disabled"
    empty = {c["name"]: c for c in system_check(_root(tmp_path, "empty", {"/x": ""}))}
    assert empty["TLS library AES (OpenSSL AES-256-GCM)"]["ok"] is None  # not measured for a snapshot
    assert empty["cpu frequency governor"]["ok"] is None and empty["swap in use"]["ok"] is None
    assert empty["other busy processes"]["value"].startswith("not sampled")


def test_the_live_check_finds_a_busy_process_started_by_the_test():
    # a neighbour, not a child of this process (which plays ccbench: its own children are left out):
    # started by a shell that exits, so that it is reparented away
    started = subprocess.run(
        ["sh", "-c", f"{sys.executable} -c 'while True: pass' >/dev/null 2>&1 & echo $!"],
        capture_output=True,
        text=True,
        check=True,
    )
    hog = int(started.stdout)
    try:
        busy, others = sample_processes(0.5)
        checks = system_check(sample_s=0.2, aes=False)
    finally:
        os.kill(hog, signal.SIGKILL)
    assert hog in [p["pid"] for p in busy], busy
    assert others >= next(p["cpus"] for p in busy if p["pid"] == hog)
    names = [c["name"] for c in checks]
    assert names[:5] == [
        "cpu frequency governor",
        "cpu boost (turbo)",
        "swap in use",
        "transparent huge pages",
        "load average",
    ]
    assert "other busy processes" in names
    assert all(set(c) == {"name", "value", "ok", "advice"} for c in checks)


def test_a_run_keeps_the_lint_with_its_system_check(tmp_path, ccbench, workdir, write_plan):
    from ccbench.bundle import find_bundles, read_bundle

    plan = write_plan('[[workloads]]\nkind = "command"\nname = "true"\nrepetitions = 1\ncommand = "true"\n')
    done = ccbench("run", plan, "--out", tmp_path / "out", "--workdir", workdir)
    assert done.returncode == 0, done.stderr
    (bundle,) = find_bundles([tmp_path / "out"])
    checks = read_bundle(bundle, samples=False).manifest["system_check"]
    lint_checks = [c for c in checks if c["name"].startswith("lint")]
    # this development machine is no TEE guest: the lint ran and had nothing to say
    assert lint_checks == [{"name": "lint (docs/trust.md, Lint)", "value": "no findings", "ok": True, "advice": ""}]
    assert "lint (docs/trust.md, Lint): no findings" in done.stderr
