"""The mechanisms workload (ccbench.workloads.mechanisms): its parsers on recorded tool documents, and
a live run of the bundled plan's workload with tiny sizes through the CLI (the real ccmech and
cyclictest), whose figures must be in the bundle with units and sane relations, and every figure it
could not give named with its reason. (tests/test_mechanisms.py is about the shared mechanisms:
procs, ledger, fsutil.)"""

import json
import os
import platform
import shutil
import tomllib

import pytest

from ccbench.planning.plan import bundled_plans
from ccbench.workloads.mechanisms import BINARY, last_level_cache_bytes, parse

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_the_exit_figures_subtract_the_empty_loop_and_name_what_was_skipped():
    document = {
        "iterations": 1000,
        "batches": 3,
        "cases": [
            {"name": "empty", "ns_per_op": [0.3, 0.2, 0.4], "cycles_per_op": [1.0, 0.5, 2.0]},
            {"name": "cpuid", "leaf": "0x0", "ns_per_op": [90, 100, 300], "cycles_per_op": [250, 260, 800]},
            {"name": "port_io", "port": "0x80", "skipped": "ioperm(0x80): Operation not permitted"},
        ],
    }
    found, missing = parse.exit_measurements(document)
    by_metric = {m.metric: m for m in found}
    assert by_metric["exit_ns"].value == pytest.approx(100 - 0.3)  # median batch less the median empty one
    assert by_metric["exit_cycles"].value == pytest.approx(260 - 1.0)
    assert by_metric["exit_ns"].case == {"mechanism": "exits", "instruction": "cpuid", "leaf": "0x0"}
    assert missing == [{"figure": "exit out 0x80", "why": "ioperm(0x80): Operation not permitted"}]


def test_the_wakeup_quantiles_come_from_the_histogram_or_are_missing_with_the_overflows():
    thread = {"cycles": 100, "min": 3, "max": 9000, "avg": 120.5, "histogram": {"3": 40, "5": 40, "8": 15}}
    found, missing = parse.wakeup_measurements({"thread": {"0": thread}}, 1000)
    values = {m.metric: m.value for m in found}
    assert values == {"wakeup_min": 3, "wakeup_avg": 120.5, "wakeup_max": 9000, "wakeup_p50": 5.0}
    # 5 of 100 wake-ups lie beyond the histogram: its 99th percentile is among them
    assert missing == [{"figure": "wakeup_p99", "why": "beyond the histogram's range (5 overflows)"}]
    assert all(m.unit == "us" for m in found)


def test_the_last_level_cache_is_read_from_sysfs(tmp_path):
    for index, (level, size) in enumerate([(1, "48K"), (2, "2048K"), (3, "105M")]):
        folder = tmp_path / f"sys/devices/system/cpu/cpu0/cache/index{index}"
        folder.mkdir(parents=True)
        (folder / "level").write_text(f"{level}\n")
        (folder / "size").write_text(f"{size}\n")
    assert last_level_cache_bytes(tmp_path) == 105 * 2**20
    assert last_level_cache_bytes(tmp_path / "nowhere") is None


def test_the_bundled_plan_runs_every_case_within_its_time_budget():
    plan = tomllib.loads(bundled_plans()["mechanisms"].read_text())
    (workload,) = [w for w in plan["workloads"] if w["kind"] == "mechanisms"]
    runs = plan["defaults"]["repetitions"] + plan["defaults"]["warmup"]
    # about 15 s per execution on 2 quiet cores at the defaults (5 s of it cyclictest): under 5 minutes
    assert runs * 15 + plan["defaults"]["cooldown"] * runs < 300
    assert "cases" not in workload  # every case


def test_without_ccmech_only_the_wakeup_case_runs_and_the_others_say_why(monkeypatch, tmp_path):
    from ccbench.workloads.mechanisms import Mechanisms, MechanismsParams

    monkeypatch.setenv("CCBENCH_CCMECH", str(tmp_path / "absent" / "ccmech"))
    alone = Mechanisms("m", MechanismsParams(cases=["exits", "memory"]))
    reason = alone.requirements()
    assert "ccmech is not built" in reason and "setup.sh --with mechanisms" in reason
    both = Mechanisms("m", MechanismsParams())
    if shutil.which("cyclictest"):
        assert both.requirements() is None
        assert both._unavailable("first-touch") == reason and both._unavailable("wakeup") is None
    else:
        assert "rt-tests" in both.requirements() and "ccmech" in both.requirements()


def _samples(bundle):
    return [json.loads(line) for line in (bundle / "samples.jsonl").read_text().splitlines()]


@pytest.mark.skipif(
    not BINARY.is_file(), reason=f"{BINARY} is not built: run 'bash scripts/setup.sh --with mechanisms'"
)
def test_the_mechanisms_workload_records_each_figure_with_its_unit_or_why_not(tmp_path, ccbench, write_plan):
    plan = write_plan(
        """
[[workloads]]
kind = "mechanisms"
repetitions = 1
warmup = 0
exit_iterations = 2000
exit_batches = 3
memory_size = "8M"
memory_passes = 2
touch_size = "8M"
wakeup_seconds = 1
"""
    )
    out = tmp_path / "out"
    done = ccbench("run", plan, "--out", out, "--workdir", tmp_path / "work")
    assert done.returncode == 0, done.stderr
    (bundle,) = [p for p in out.iterdir() if (p / "manifest.json").exists()]
    samples = [s for s in _samples(bundle) if s["workload"] == "mechanisms"]
    by = {}
    for s in samples:
        by.setdefault(s["metric"], []).append(s)
    # every figure carries its unit and direction
    units = {"copy_bandwidth": "GB/s", "load_latency": "ns"}
    units |= {"first_touch_ns": "ns", "huge_page_share": "fraction", "missing_figures": "figures"}
    for metric, unit in units.items():
        assert by[metric] and {s["unit"] for s in by[metric]} == {unit}, metric
    assert {s["better"] for s in by["copy_bandwidth"] + by["triad_bandwidth"]} == {"higher"}
    assert {s["unit"] for s in by.get("exit_ns", [])} <= {"ns"} and {s["unit"] for s in by.get("exit_cycles", [])} <= {
        "cycles"
    }
    figures = {item["figure"]: item["why"] for item in by["missing_figures"][0]["metadata"]["missing"]}
    if platform.machine() != "x86_64":
        assert "x86_64" in figures["exits"] and "exit_ns" not in by
        return
    # CPUID exits to the hypervisor on this KVM guest: its cost with the empty loop subtracted is positive
    leaves = {s["params"]["leaf"]: s["value"] for s in by["exit_ns"] if s["params"]["instruction"] == "cpuid"}
    assert set(leaves) == {"0x0", "0xb", "0x40000000"} and all(v > 0 for v in leaves.values()), leaves
    cpuid_meta = next(s["metadata"] for s in by["exit_ns"] if s["params"].get("leaf") == "0x0")
    assert cpuid_meta["ns_per_op_raw"] > cpuid_meta["empty_loop_ns"]
    # who serves each exit is derived from the run's own probe of this machine, not a constant
    environment = json.loads((bundle / "manifest.json").read_text())["environment"]
    on_hypervisor = "hypervisor" in environment["cpu"]["flags"]
    for s in by["exit_ns"]:
        case = s["params"].get("leaf") or "port"
        assert s["metadata"]["served_by"] == parse.served_by(environment["tee"], case, on_hypervisor), s
    # both page sizes, and what the kernel gave recorded; a 2M first touch costs more than a 4K one
    assert {s["params"]["pages"] for s in by["load_latency"]} == {"4k", "2m"}
    touch = {s["params"]["pages"]: s for s in by["first_touch_ns"]}
    assert touch["2m"]["value"] > touch["4k"]["value"] > 0
    share = {s["params"]["pages"]: s["value"] for s in by["huge_page_share"]}
    assert share["4k"] == 0 and 0 <= share["2m"] <= 1
    # the figures this machine cannot give are named with their reason, one per missing figure
    (missing,) = by["missing_figures"]
    reasons = missing["metadata"]["missing"]
    assert missing["value"] == len(reasons)
    figures = {item["figure"]: item["why"] for item in reasons}
    if "Unaccepted" not in open("/proc/meminfo").read():
        assert any("accepted" in f for f in figures) and all(figures.values())
    if os.geteuid() != 0:
        assert "port I/O needs root" in figures["exit out 0x80"]
    if "exit out 0x80" not in figures:
        assert any(s["params"].get("port") == "0x80" for s in by["exit_ns"])
    if shutil.which("cyclictest"):
        wake = {m: by[m][0]["value"] for m in ("wakeup_min", "wakeup_avg", "wakeup_max")}
        assert 0 < wake["wakeup_min"] <= wake["wakeup_avg"] <= wake["wakeup_max"]
        assert (bundle / "raw").rglob("cyclictest.json")
    else:
        assert "rt-tests" in figures["wakeup"]
    # the kind's declaration is in the manifest, for the analysis without workload code
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert "exit_ns" in json.dumps(manifest)
