"""The mechanisms workload (ccbench.workloads.mechanisms): its parsers on recorded tool documents, and
a live run of the bundled plan's workload with tiny sizes through the CLI (the real ccmech and
cyclictest), whose figures must be in the bundle with units and sane relations, and every figure it
could not give named with its reason. (tests/test_mechanisms.py is about the shared mechanisms:
procs, ledger, fsutil.)"""

import json
import os
import platform
import shutil
import sys
import tomllib

import pytest

from ccbench.planning.plan import bundled_plans
from ccbench.workloads.mechanisms import BINARY, binary, last_level_cache_bytes, parse, wakeups

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
    monkeypatch.setattr(binary, "CHECKOUT", tmp_path / "no-checkout" / "ccmech")
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "no-venv"))
    alone = Mechanisms("m", MechanismsParams(cases=["exits", "memory"]))
    reason = alone.requirements()
    assert "ccmech is not built" in reason and "setup.sh --with mechanisms" in reason
    both = Mechanisms("m", MechanismsParams())
    if shutil.which("cyclictest"):
        assert both.requirements() is None
        assert both._unavailable("first-touch") == reason and both._unavailable("wakeup") is None
    else:
        assert "rt-tests" in both.requirements() and "ccmech" in both.requirements()


def _stand_in(path, version="9.9.9"):
    """A stand-in ccmech (a shell script) that answers --version."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && echo 'ccmech {version}'\n")
    path.chmod(0o755)
    return path


def test_ccmech_is_found_in_the_environment_then_the_checkout_then_the_shipped_copy(tmp_path):
    named = _stand_in(tmp_path / "named" / "ccmech", "1.0.0")
    checkout = _stand_in(tmp_path / "checkout" / "ccmech", "2.0.0")
    prefix = tmp_path / "venv"
    shipped = _stand_in(binary.shipped(prefix), "3.0.0")
    assert shipped == prefix / "libexec" / "ccbench" / "ccmech"
    environ = {"CCBENCH_CCMECH": str(named)}
    assert binary.find(environ, checkout, prefix) == binary.Found(named, "$CCBENCH_CCMECH")
    assert binary.find({}, checkout, prefix) == binary.Found(checkout, "checkout")
    # a name in the variable that is no file passes on to the next place
    assert binary.find({"CCBENCH_CCMECH": str(tmp_path / "gone")}, checkout, prefix).source == "checkout"
    checkout.unlink()
    found = binary.find({}, checkout, prefix)
    assert found == binary.Found(shipped, "shipped") and binary.version(found.path) == "3.0.0"
    shipped.unlink()
    with pytest.raises(binary.NotFound) as caught:
        binary.find({"CCBENCH_CCMECH": str(tmp_path / "gone")}, checkout, prefix)
    message = str(caught.value)
    assert "\n" not in message
    for place in (str(tmp_path / "gone"), str(checkout), str(shipped), "setup.sh --with mechanisms"):
        assert place in message, (place, message)
    assert "$CCBENCH_CCMECH is unset" in str(pytest.raises(binary.NotFound, binary.find, {}, checkout, prefix).value)


def test_a_ccmech_without_version_flag_is_recorded_as_unknown(tmp_path):
    older = tmp_path / "ccmech"
    older.write_text("#!/bin/sh\necho 'ccmech: unknown subcommand' >&2\nexit 2\n")
    older.chmod(0o755)
    assert binary.version(older).startswith("unknown (") and "--version" in binary.version(older)


@pytest.mark.skipif(not BINARY.is_file(), reason=f"{BINARY} is not built")
def test_the_built_ccmech_states_the_crates_version():
    crate = tomllib.loads((BINARY.parents[2] / "Cargo.toml").read_text())["workspace"]["package"]["version"]
    assert binary.version(BINARY) == crate


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
cross_wakeup_round_trips = 300
cross_wakeup_rounds = 100
cross_wakeup_batches = 2
evidence_reports = 1
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
    # each ccmech figure says which ccmech measured it: its version (the crate's) and where it was found
    used = {json.dumps(s["metadata"]["ccmech"], sort_keys=True) for s in by["copy_bandwidth"] + by["first_touch_ns"]}
    assert len(used) == 1 and json.loads(used.pop())["version"] == binary.version(binary.find().path)
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
    # cross-vCPU wake-ups at each vCPU count this process may use, with the IPIs per wake-up (or why not)
    counts = wakeups.sweep(len(os.sched_getaffinity(0)))
    wake = {(s["params"]["pattern"], s["params"]["vcpus"]): s for s in by["cross_wakeup_ns"] + by["fanout_join_ns"]}
    assert set(wake) == {(pattern, n) for pattern in ("ping-pong", "fan-out") for n in counts}
    assert all(s["value"] > 0 and s["unit"] == "ns" for s in wake.values())
    assert "shares CPU" in wake["ping-pong", 1]["metadata"]["shared_cpu"]
    ipis = {(s["params"]["pattern"], s["params"]["vcpus"]): s for s in by.get("ipis_per_wakeup", [])}
    for pattern, n in wake:
        assert (pattern, n) in ipis or f"IPIs per wake-up ({pattern}, {n} vCPUs)" in figures
    halts = {(s["params"]["pattern"], s["params"]["vcpus"]) for s in by.get("halts_per_wakeup", [])}
    assert all(key in halts or f"halts per wake-up ({key[0]}, {key[1]} vCPUs)" in figures for key in wake)
    if not os.path.isdir("/sys/kernel/config/tsm/report"):
        assert "none exists" in figures["evidence latency"] or "present" in figures["evidence latency"]
    # the kind's declaration is in the manifest, for the analysis without workload code
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert "exit_ns" in json.dumps(manifest)


def _wake_document(vcpus, idle):
    part = {"cpus": [0, vcpus - 1], "wakeups": 1000, "slept": 900, "counts": {"ipis": {"res": 950, "cal": 50}}}
    part["counts"]["idle"] = idle
    return {
        "vcpus": vcpus,
        "cpus": list(range(vcpus)),
        "idle_driver": "haltpoll" if idle else None,
        "ping_pong": {**part, "round_trips": 500, "ns_per_wakeup": [40.0, 30.0, 90.0]},
        "fan_out": {**part, "workers": vcpus, "rounds": 100, "ns_per_round": [70.0, 50.0, 60.0]},
    }


def test_the_cross_vcpu_wakeups_give_ipis_and_halts_per_wakeup_or_say_why_not():
    from ccbench.workloads.mechanisms import wakeups

    found, missing = wakeups.wake_measurements(_wake_document(2, {"POLL": 100, "haltpoll idle": 300}))
    by = {(m.metric, m.case["pattern"]): m for m in found}
    assert by["cross_wakeup_ns", "ping-pong"].value == 40.0  # the median batch
    assert by["cross_wakeup_ns", "ping-pong"].metadata["round_trip_ns"] == 80.0
    assert by["fanout_join_ns", "fan-out"].value == 60.0
    ipis = by["ipis_per_wakeup", "ping-pong"]
    assert (
        ipis.value == 1.0 and ipis.metadata["res_per_wakeup"] == 0.95 and "/proc/interrupts" in ipis.metadata["source"]
    )
    halts = by["halts_per_wakeup", "fan-out"]
    assert halts.value == 0.3 and halts.metadata["polls_per_wakeup"] == 0.1  # POLL never halts
    assert {m.case["vcpus"] for m in found} == {2} and missing == []
    assert by["cross_wakeup_ns", "ping-pong"].metadata["shared_cpu"] is None
    # no cpuidle (no idle driver): the halts are named as missing, per pattern; one vCPU says it shares
    found, missing = wakeups.wake_measurements(_wake_document(1, {}))
    assert [m["figure"] for m in missing] == [
        "halts per wake-up (ping-pong, 1 vCPUs)",
        "halts per wake-up (fan-out, 1 vCPUs)",
    ]
    assert "no cpuidle states" in missing[0]["why"]
    assert "shares CPU 0" in found[0].metadata["shared_cpu"]
    found, missing = wakeups.wake_measurements({"vcpus": 8, "skipped": "8 vCPUs asked, this process may run on 2"})
    assert found == [] and missing == [
        {"figure": "cross-vCPU wake-ups at 8 vCPUs", "why": "8 vCPUs asked, this process may run on 2"}
    ]
    assert wakeups.sweep(2) == [1, 2] and wakeups.sweep(6) == [1, 2, 4, 6] and wakeups.sweep(6, [3, 1, 3]) == [1, 3]


class MockTsm:
    """A MOCK configfs-tsm (no TEE here): the kernel's report entry as a directory of files a test
    fills in, read by the real TsmProvider; what configfs would do on mkdir and rmdir done by hand."""

    def __init__(self, root, provider="tdx_guest"):
        from ccbench.attestation.evidence import TsmProvider

        class Provider(TsmProvider):
            def _make_entry(inner):
                entry = super()._make_entry()
                for name, value in (("generation", b"1"), ("provider", provider.encode()), ("outblob", b"Q" * 5000)):
                    (entry / name).write_bytes(value)
                return entry

            def attest(inner, report_data):
                try:
                    return super().attest(report_data)
                finally:
                    for entry in inner.root.iterdir():
                        shutil.rmtree(entry)

        self.provider = Provider(root)


def test_the_evidence_latency_is_timed_through_configfs_tsm_or_named_as_missing(tmp_path):
    from ccbench.attestation.evidence import TsmProvider
    from ccbench.workloads.mechanisms.evidence import evidence_latency

    tsm = tmp_path / "sys/kernel/config/tsm/report"
    tsm.mkdir(parents=True)
    (found,), missing = evidence_latency(MockTsm(tsm).provider, 3)
    assert missing == [] and found.metric == "evidence_ms" and found.unit == "ms" and found.value > 0
    assert found.case == {"mechanism": "evidence", "interface": "configfs-tsm", "provider": "tdx_guest"}
    assert len(found.metadata["times_ms"]) == 3 and found.metadata["evidence_bytes"] == 5000
    assert found.metadata["technology"] == "tdx" and list(tsm.iterdir()) == []  # every entry removed
    # an unsupported provider: named as missing with the provider
    found, missing = evidence_latency(MockTsm(tsm, "arm_cca_guest").provider, 2)
    assert found == [] and "arm_cca_guest" in missing[0]["why"] and "after 0 reports" in missing[0]["why"]
    # no configfs-tsm: what was looked for, and a device node present said as not driven
    found, missing = evidence_latency(TsmProvider(tmp_path / "absent"), 2, {"technology": "none"}, root=tmp_path)
    assert found == [] and missing[0]["figure"] == "evidence latency"
    assert "/dev/sev-guest, /dev/tdx-guest: none exists" in missing[0]["why"]
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/sev-guest").write_text("")
    _, missing = evidence_latency(TsmProvider(tmp_path / "absent"), 2, {"technology": "sev-snp"}, root=tmp_path)
    assert "/dev/sev-guest present, but ccbench obtains evidence through configfs-tsm only" in missing[0]["why"]
    assert "sev-snp guest needs Linux 6.7+" in missing[0]["why"]
