"""The breakdown of a cross-machine cost by mechanism (ccbench.analysis.rows.breakdown): a planted
bounce-buffer share in synthetic bundles (a plain VM, its swiotlb=force twin, an SEV-SNP VM) is found
within its interval, through ``ccbench compare --json`` as a user runs it; a twin that differs from the
baseline in CPU model is flagged; counts times unit costs explain a planted time."""

import json
import math

import numpy as np
import pytest
from bundles import SAPPHIRE_RAPIDS, provenance_probe, sample, seal, write_environment

from ccbench.analysis.rows import breakdown

#: issue 31's shape of a published CVM study: the plain VM's UDP receive rate 1.0, the plain VM with
#: forced bounce buffers 0.75, the SEV-SNP VM 0.17
RATES = {"plain": 1.0, "twin": 0.75, "snp": 0.17}
#: the share of the SNP VM's lost rate the twin explains: (1 - 0.75) / (1 - 0.17), about a third
PLANTED = (1 - 0.75) / (1 - 0.17)
#: the same on the log scale of the ratio (each part's log_share): log(1/0.75) / log(1/0.17)
PLANTED_LOG = math.log(1 / 0.75) / math.log(1 / 0.17)


def machine(host, tee, cmdline="console=ttyS0", **facts):
    probe = provenance_probe(host, tee, **facts)
    probe["provenance"]["kernel_cmdline"] = cmdline
    return probe


def rate_samples(rate, rng, n=10):
    return [
        sample(
            workload="net",
            kind="command",
            variant={},
            metric="receive_rate",
            unit="Gbit/s",
            better="higher",
            value=float(rate * 9.4 * np.exp(noise)),
            repetition=rep,
        )
        for rep, noise in enumerate(rng.normal(0, 0.03, n))
    ]


def three_machines(tmp_path, twin_facts=None):
    rng = np.random.default_rng(31)
    probes = {
        "plain": machine("plain", "none"),
        "twin": machine("twin", "none", "console=ttyS0 swiotlb=262144,force", **(twin_facts or {})),
        "snp": machine("snp", "sev-snp"),
    }
    return [write_environment(tmp_path, probes[host], rate_samples(RATES[host], rng)) for host in probes]


def json_rows(done):
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return [r for r in lines if "finding" not in r], [r for r in lines if "finding" in r]


def test_a_planted_bounce_buffer_share_is_found_within_its_interval(tmp_path, ccbench):
    paths = three_machines(tmp_path)
    rows, findings = json_rows(ccbench("compare", *paths, "--baseline", "plain", "--json"))
    snp = next(r for r in rows if r["config"].startswith("snp"))
    parts = {p["mechanism"]: p for p in snp["breakdown"]}
    assert set(parts) == {"bounce-buffers", "unexplained"}, snp["breakdown"]
    bounce = parts["bounce-buffers"]
    assert bounce["source"] == "twin" and bounce["basis"].startswith("twin")
    assert bounce["ci_low"] <= PLANTED <= bounce["ci_high"], (PLANTED, bounce)
    assert abs(bounce["share"] - PLANTED) < 0.03
    assert abs(bounce["log_share"] - PLANTED_LOG) < 0.03
    assert 0 < bounce["ci_low"] < bounce["ci_high"] < 0.5
    rest = parts["unexplained"]
    assert rest["source"] == "rest" and rest["ci_low"] <= 1 - PLANTED <= rest["ci_high"]
    # the twin's own row compares plain machines: no breakdown; nor does anything lint the twin
    twin = next(r for r in rows if r["config"].startswith("twin"))
    assert twin["breakdown"] == []
    assert not [f for f in findings if f["finding"] == "confounded-twin"]


def test_a_twin_that_differs_in_cpu_model_is_flagged(tmp_path, ccbench):
    paths = three_machines(tmp_path, twin_facts={"cpu": SAPPHIRE_RAPIDS})
    rows, findings = json_rows(ccbench("compare", *paths, "--baseline", "plain", "--json"))
    (flagged,) = [f for f in findings if f["finding"] == "confounded-twin"]
    assert "bounce-buffers twin" in flagged["what"] and "CPU model" in flagged["what"]
    assert flagged["severity"] == "high"
    # the breakdown is still given (the finding says how to read it)
    snp = next(r for r in rows if r["config"].startswith("snp"))
    assert any(p["mechanism"] == "bounce-buffers" for p in snp["breakdown"])


def test_a_twin_named_by_the_user_and_a_bad_twin_option(tmp_path, ccbench):
    rng = np.random.default_rng(5)
    # the twin's command line was not recorded (an imported result): only --twin makes it one
    probes = {"plain": machine("plain", "none"), "forced": machine("forced", "none"), "cvm": machine("cvm", "unknown")}
    rates = {"plain": 1.0, "forced": 0.75, "cvm": 0.17}
    paths = [write_environment(tmp_path, probes[h], rate_samples(rates[h], rng)) for h in probes]
    rows, _ = json_rows(ccbench("compare", *paths, "--baseline", "plain", "--json"))
    cvm = next(r for r in rows if r["config"].startswith("cvm"))
    assert [p["mechanism"] for p in cvm["breakdown"]] == ["unexplained"]
    rows, _ = json_rows(ccbench("compare", *paths, "--baseline", "plain", "--json", "--twin", "bounce-buffers=forced"))
    cvm = next(r for r in rows if r["config"].startswith("cvm"))
    bounce = cvm["breakdown"][0]
    assert bounce["mechanism"] == "bounce-buffers" and bounce["ci_low"] <= PLANTED <= bounce["ci_high"]
    for bad in ("bounce=forced", "bounce-buffers=nosuch"):
        done = ccbench("compare", *paths, "--twin", bad)
        assert done.returncode == 2 and "--twin" in done.stderr and "Traceback" not in done.stderr, done.stderr
    # the text output names the breakdown too
    done = ccbench("compare", *paths, "--baseline", "plain", "--twin", "bounce-buffers=forced")
    assert done.returncode == 0, done.stderr
    assert "breakdown of the cost by mechanism" in done.stdout and "bounce-buffers" in done.stdout


def test_twins_are_recognised_from_the_kernel_command_line_of_plain_machines_only():
    assert breakdown.twin_mechanisms(machine("a", "none", "ro swiotlb=force")) == {"bounce-buffers"}
    # idle=poll takes halt exits away: a CVM booted with it is the idle twin; a plain VM with it is none
    assert breakdown.twin_mechanisms(machine("a", "none", "ro swiotlb=65536,force idle=poll")) == {"bounce-buffers"}
    assert breakdown.twin_mechanisms(machine("a", "tdx", "ro idle=poll")) == {"idle"}
    assert breakdown.twin_mechanisms(machine("a", "none", "ro swiotlb=noforce")) == set()
    # what follows "--" is init's; a CVM bounces anyway: neither is a twin
    assert breakdown.twin_mechanisms(machine("a", "none", "ro -- swiotlb=force")) == set()
    assert breakdown.twin_mechanisms(machine("a", "sev-snp", "ro swiotlb=force")) == set()
    # an imported result that states its command line and no TEE
    assert breakdown.twin_mechanisms(machine("a", "unknown", "swiotlb=force")) == {"bounce-buffers"}


def test_an_imported_twin_whose_tee_is_unknown_is_a_twin_and_gets_no_breakdown_of_its_own(tmp_path, ccbench):
    rng = np.random.default_rng(8)
    probes = {
        "plain": machine("plain", "unknown"),
        "forced": machine("forced", "unknown", "swiotlb=force"),
        "cvm": machine("cvm", "unknown"),
    }
    rates = {"plain": 1.0, "forced": 0.75, "cvm": 0.17}
    paths = [write_environment(tmp_path, probes[h], rate_samples(rates[h], rng)) for h in probes]
    rows, _ = json_rows(ccbench("compare", *paths, "--baseline", "plain", "--json"))
    forced = next(r for r in rows if r["config"].startswith("forced"))
    assert forced["breakdown"] == []
    cvm = next(r for r in rows if r["config"].startswith("cvm"))
    bounce = cvm["breakdown"][0]
    assert bounce["mechanism"] == "bounce-buffers" and bounce["ci_low"] <= PLANTED <= bounce["ci_high"]


def test_counts_times_unit_costs_explain_a_planted_time():
    """A CVM execution of 2.0 s against 1.0 s on the plain VM, 0.5 s of it bounce copies: the share of
    the second the CVM adds that they explain is 0.5 (log(2/1.5)/log(2) on the log scale)."""
    rng = np.random.default_rng(3)
    values = {"base": np.exp(rng.normal(0, 0.01, 20)), "cvm": 2.0 * np.exp(rng.normal(0, 0.01, 20))}
    parts = breakdown.row_breakdown(values, "base", "cvm", "lower", {}, {"bounce-buffers": (0.5, "counted")})
    share = {p.mechanism: p for p in parts}
    expected = 0.5
    assert share["bounce-buffers"].source == "counts"
    assert share["bounce-buffers"].log_share == pytest.approx(math.log(2 / 1.5) / math.log(2), abs=0.02)
    assert share["bounce-buffers"].ci_low <= expected <= share["bounce-buffers"].ci_high
    assert share["unexplained"].share == pytest.approx(1 - share["bounce-buffers"].share, abs=1e-9)
    # a CVM that is not worse has no cost to split
    assert breakdown.row_breakdown({"base": values["cvm"], "cvm": values["base"]}, "base", "cvm", "lower", {}) == []


def test_the_report_draws_the_breakdown_as_a_stacked_bar_per_workload(tmp_path, ccbench):
    paths = three_machines(tmp_path / "bundles")
    html = tmp_path / "report.html"
    done = ccbench("report", *paths, "--baseline", "plain", "-o", html, "--figures", tmp_path / "figures")
    assert done.returncode == 0, done.stderr
    page = html.read_text()
    assert "Why the machines differ: the cost by mechanism" in page
    # one bar for the SNP machine: a bounce-buffer segment and the unexplained rest
    assert 'id="mechanism:bounce-buffers:0"' in page and 'id="mechanism:unexplained:0"' in page
    assert (tmp_path / "figures" / "breakdown.svg").is_file()
    markdown = tmp_path / "report.md"
    assert ccbench("report", *paths, "--baseline", "plain", "-o", markdown).returncode == 0
    text = markdown.read_text()
    row = next(line for line in text.splitlines() if "bounce-buffers" in line and "twin" in line)
    assert "30%" in row or "29%" in row or "31%" in row, row


def test_counts_from_execution_records_times_the_mechanism_workloads_unit_cost(tmp_path, ccbench):
    """A CVM whose job takes 2.0 s against 1.0 s, and whose executions each accepted 250,000 pages
    (nr_unaccepted fell by that much) at 2,000 ns per accepted page (the mechanisms workload's
    accept_ns_per_page, from touches that accepted; the plain machine accepts nothing): 0.5 s of the
    second the CVM adds, a share of 0.5. The first touch's time per page (faults and zeroing, 700 ns
    against 500) is no unit of acceptance and must not be used."""
    from ccbench.bundle import BundleWriter

    rng = np.random.default_rng(11)
    paths = []
    for host, tee, seconds, touch_ns in (("plain", "none", 1.0, 500.0), ("cvm", "sev-snp", 2.0, 700.0)):
        writer = BundleWriter.create(tmp_path / host, {"plan": {"name": "t"}, "environment": machine(host, tee)})
        samples = []
        for rep, noise in enumerate(rng.normal(0, 0.01, 8)):
            common = {"variant": {}, "repetition": rep, "execution": f"job|-|rep|{rep}"}
            samples.append(sample(workload="job", metric="time", value=seconds * float(np.exp(noise)), **common))
            writer.append_execution(
                {
                    "key": f"job|-|rep|{rep}",
                    "workload": "job",
                    "variant": {},
                    "repetition": rep,
                    "warmup": False,
                    "status": "ok",
                    "counters": {"vmstat.nr_unaccepted": -250_000 if tee != "none" else 0, "vmstat.pgfault": 9},
                }
            )
            samples.append(
                sample(
                    workload="mechanisms",
                    kind="mechanisms",
                    variant={},
                    metric="first_touch_ns",
                    unit="ns",
                    params={"mechanism": "first-touch", "pages": "4k"},
                    metadata={"case": {"mechanism": "first-touch", "pages": "4k"}},
                    value=touch_ns * float(np.exp(noise)),
                    repetition=rep,
                )
            )
            if tee != "none":
                case = {"mechanism": "page-acceptance", "pages": "4k"}
                samples.append(
                    sample(
                        workload="mechanisms",
                        kind="mechanisms",
                        variant={},
                        metric="accept_ns_per_page",
                        unit="ns",
                        params=case,
                        metadata={"case": case},
                        value=2000.0 * float(np.exp(noise)),
                        repetition=rep,
                    )
                )
        writer.append_samples(samples)
        writer.close()
        paths.append(seal(writer.path))
    rows, _ = json_rows(ccbench("compare", *paths, "--baseline", "plain", "--json"))
    job = next(r for r in rows if r["workload"] == "job")
    parts = {p["mechanism"]: p for p in job["breakdown"]}
    expected = 0.5
    accepted = parts["page-acceptance"]
    assert accepted["source"] == "counts" and "vmstat.nr_unaccepted" in accepted["basis"]
    assert accepted["ci_low"] <= expected <= accepted["ci_high"], accepted
    assert abs(accepted["share"] - expected) < 0.03
    # the unit cost's own row is not a cost to split
    unit = next(r for r in rows if r["workload"] == "mechanisms")
    assert unit["breakdown"] == []


def test_a_cvm_booted_with_idle_poll_is_the_idle_twin_that_takes_the_mechanism_away(tmp_path, ccbench):
    """A job taking 1.0 s on the plain VM, 1.5 s on the TD and 1.2 s on the same TD booted with
    idle=poll: halting explains 1 - 0.2/0.5 = 0.6 of the time the TD adds."""
    rng = np.random.default_rng(2)
    probes = {
        "plain": machine("plain", "none"),
        "td": machine("td", "tdx"),
        "tdpoll": machine("tdpoll", "tdx", "idle=poll"),
    }
    seconds = {"plain": 1.0, "td": 1.5, "tdpoll": 1.2}
    paths = []
    for host, probe in probes.items():
        values = seconds[host] * np.exp(rng.normal(0, 0.01, 10))
        samples = [
            sample(workload="job", variant={}, metric="time", value=float(v), repetition=i)
            for i, v in enumerate(values)
        ]
        paths.append(write_environment(tmp_path, probe, samples))
    rows, findings = json_rows(ccbench("compare", *paths, "--baseline", "plain", "--json"))
    td = next(r for r in rows if r["config"].startswith("td /"))
    idle = next(p for p in td["breakdown"] if p["mechanism"] == "idle")
    expected = 1 - 0.2 / 0.5
    assert idle["source"] == "twin" and idle["basis"].startswith("tdpoll")
    assert idle["ci_low"] <= expected <= idle["ci_high"], idle
    # the twin with idle=poll is a TD too: its own row is split on its own (no idle twin for it)
    poll = next(r for r in rows if r["config"].startswith("tdpoll"))
    assert [p["mechanism"] for p in poll["breakdown"]] == ["unexplained"]
    assert not [f for f in findings if f["finding"] == "confounded-twin"]


def test_the_report_leaves_the_breakdown_out_where_nothing_explains_anything(tmp_path, ccbench):
    rng = np.random.default_rng(4)
    probes = {"plain": machine("plain", "none"), "snp": machine("snp", "sev-snp")}
    paths = [write_environment(tmp_path, probes[h], rate_samples(RATES[h], rng)) for h in probes]
    markdown = tmp_path / "report.md"
    done = ccbench("report", *paths, "--baseline", "plain", "-o", markdown)
    assert done.returncode == 0, done.stderr
    assert "the cost by mechanism" not in markdown.read_text()


# --- issue 39: a bounce-buffer share only with evidence that the twin bounced ------------------------

VIRTIO = [{"name": "virtio0", "type": "net", "access_platform": True}, {"name": "virtio1", "type": "block"}]


def bounce_study(tmp_path, twin_devices=None, twin_counts=None, twin_swiotlb=512 * 2**20, params=None):
    """plain, its swiotlb=force twin and an SEV-SNP VM (issue 31's rates); the twin's virtio devices,
    the swiotlb:swiotlb_bounced count of each of its executions (None: no counters, an import), its
    pool, and the samples' params (the network workload's hosts)."""
    from ccbench.bundle import BundleWriter

    rng = np.random.default_rng(31)
    probes = {
        "plain": machine("plain", "none"),
        "twin": machine("twin", "none", "console=ttyS0 swiotlb=262144,force", swiotlb_bytes=twin_swiotlb),
        "snp": machine("snp", "sev-snp"),
    }
    if twin_devices is not None:
        probes["twin"]["virtio_devices"] = twin_devices
    paths = []
    for host, probe in probes.items():
        writer = BundleWriter.create(tmp_path / host, {"plan": {"name": "t"}, "environment": probe})
        samples = rate_samples(RATES[host], rng)
        if params is not None:
            samples = [s.model_copy(update={"params": params}) for s in samples]
        writer.append_samples(samples)
        if host == "twin" and twin_counts is not None:
            for rep, count in enumerate(twin_counts):
                record = {"key": f"net|-|rep|{rep}", "workload": "net", "variant": {}, "repetition": rep}
                record |= {"warmup": False, "status": "ok", "counters": {"trace.swiotlb:swiotlb_bounced": count}}
                writer.append_execution(record)
        writer.close()
        paths.append(seal(writer.path))
    return paths


def snp_parts(ccbench, paths):
    rows, findings = json_rows(ccbench("compare", *paths, "--baseline", "plain", "--json"))
    snp = next(r for r in rows if r["config"].startswith("snp"))
    return {p["mechanism"]: p for p in snp["breakdown"]}, findings


def test_a_twin_whose_virtio_devices_lack_access_platform_is_refused_with_a_finding(tmp_path, ccbench):
    lacking = [{"name": "virtio0", "type": "net", "access_platform": False}, *VIRTIO[1:]]
    parts, findings = snp_parts(ccbench, bounce_study(tmp_path, twin_devices=lacking))
    assert "bounce-buffers" not in parts and set(parts) == {"unexplained"}, parts
    (refused,) = [f for f in findings if f["finding"] == "twin-bounces-nothing"]
    assert "virtio0 (net)" in refused["what"] and "iommu_platform=on" in refused["advice"]


def test_a_twin_that_counted_no_bounces_is_refused_and_one_without_counters_is_marked(tmp_path, ccbench):
    parts, findings = snp_parts(ccbench, bounce_study(tmp_path / "zero", twin_devices=VIRTIO, twin_counts=[0, 0, 0]))
    assert "bounce-buffers" not in parts
    assert any(f["finding"] == "twin-bounces-nothing" and "counted no" in f["what"] for f in findings), findings
    # counters that saw bounces: used as it is
    parts, _ = snp_parts(ccbench, bounce_study(tmp_path / "some", twin_devices=VIRTIO, twin_counts=[900, 950, 1000]))
    assert parts["bounce-buffers"]["basis"].startswith("twin") and "assumed" not in parts["bounce-buffers"]["basis"]
    # no counters at all (an imported twin): used, and the basis says what it rests on
    parts, findings = snp_parts(ccbench, bounce_study(tmp_path / "none"))
    bounce = parts["bounce-buffers"]
    assert bounce["basis"].endswith("(assumed to bounce: no counters)"), bounce
    assert bounce["ci_low"] <= PLANTED <= bounce["ci_high"]
    assert not [f for f in findings if f["finding"] == "twin-bounces-nothing"]


def test_a_twin_with_a_smaller_pool_than_the_cvm_is_a_finding(tmp_path, ccbench):
    parts, findings = snp_parts(ccbench, bounce_study(tmp_path, twin_swiotlb=64 * 2**20))
    assert "bounce-buffers" in parts
    (pool,) = [f for f in findings if f["finding"] == "confounded-twin" and "swiotlb pool" in f["what"]]
    assert "64 MiB" in pool["what"] and "512 MiB" in pool["what"] and "swiotlb=262144,force" in pool["advice"]


def test_rows_measured_between_emulated_hosts_never_carry_a_bounce_buffer_share(tmp_path, ccbench):
    parts, _ = snp_parts(ccbench, bounce_study(tmp_path / "emulated", params={"hosts": "emulated", "test": "udp"}))
    assert set(parts) == {"unexplained"}, parts
    parts, _ = snp_parts(ccbench, bounce_study(tmp_path / "peer", params={"hosts": "peer", "test": "udp"}))
    assert "bounce-buffers" in parts


def test_the_device_io_check_is_for_workloads_whose_data_crosses_a_device():
    from ccbench.workloads import plan_device_io

    def plan(**params):
        return {"workloads": [{"kind": "network", "params": params}]}

    assert plan_device_io(plan(hosts="emulated")) is False
    assert plan_device_io(plan()) is False  # emulated is the default
    assert plan_device_io(plan(hosts="peer")) is True


def test_the_idle_twin_is_the_cvm_with_idle_poll_in_the_docs_as_in_the_code():
    from pathlib import Path

    assert breakdown.TWIN_MARKERS["idle"][1] == "removed"
    docs = (Path(__file__).parents[1] / "docs" / "mechanisms.md").read_text()
    (row,) = [line for line in docs.splitlines() if line.startswith("| idle |")]
    assert "on the CVM only" in row and "on both" not in row, row


def test_the_idle_share_carries_the_ipis_of_the_cvm_and_of_its_twin(tmp_path, ccbench):
    from ccbench.bundle import BundleWriter

    rng = np.random.default_rng(2)
    probes = {
        "plain": machine("plain", "none"),
        "td": machine("td", "tdx"),
        "tdpoll": machine("tdpoll", "tdx", "idle=poll"),
    }
    seconds = {"plain": 1.0, "td": 1.5, "tdpoll": 1.2}
    reschedules = {"plain": 100, "td": 5000, "tdpoll": 300}
    paths = []
    for host, probe in probes.items():
        writer = BundleWriter.create(tmp_path / host, {"plan": {"name": "t"}, "environment": probe})
        values = seconds[host] * np.exp(rng.normal(0, 0.01, 6))
        writer.append_samples(
            [
                sample(workload="job", variant={}, metric="time", value=float(v), repetition=i)
                for i, v in enumerate(values)
            ]
        )
        for rep in range(6):
            record = {"key": f"job|-|rep|{rep}", "workload": "job", "variant": {}, "repetition": rep, "warmup": False}
            record |= {"status": "ok", "counters": {"interrupts.RES": reschedules[host], "interrupts.CAL": 40}}
            writer.append_execution(record)
        writer.close()
        paths.append(seal(writer.path))
    rows, _ = json_rows(ccbench("compare", *paths, "--baseline", "plain", "--json"))
    td = next(r for r in rows if r["config"].startswith("td /"))
    idle = next(p for p in td["breakdown"] if p["mechanism"] == "idle")
    assert idle["ipis"] == {"RES": {"cvm": 5000, "twin": 300}, "CAL": {"cvm": 40, "twin": 40}}, idle
