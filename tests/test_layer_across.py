"""Settling a layer across workloads (ccbench.run.settle_layers; docs/analysis.md "Settling a layer"):
the same variant against the same pair in two workloads is one layer, its headline the mean of all
of its cases in both, and the run, compare's rows, its verdict and the record give one answer. With
the scripted executor of test_scheduling (no workload runs), then once through the CLI with real
worker processes."""

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import ccbench_in_process, only_bundle, own_path_layer, run_ccbench, tmpfs_as_cipher
from test_scheduling import Messages, ScriptedExecutor, measured

from ccbench.analysis import format as fmt
from ccbench.commands.run import settled_block
from ccbench.planning.plan import plan_from_dict
from ccbench.run.runner import Runner
from ccbench.run.schedule import Order

VALUES = ("disk", "tmpfs", "ext4-loop")


def two_workloads(tmp_path, monkeypatch, answer, resume=None, **defaults):
    """Two command workloads, a and b, on three storage variants (the test's own directories);
    ``resume``: the bundle of an earlier run of them to finish."""
    import ccbench.probe.syscheck

    monkeypatch.setattr(ccbench.probe.syscheck, "system_check", lambda **options: [])
    paths = {value: str(tmp_path / f"dir-{value}") for value in VALUES}
    for path in paths.values():
        Path(path).mkdir(exist_ok=True)
    document = {
        "name": "across",
        "defaults": {"repetitions": 3, "warmup": 0, "cooldown": 0, "variants": {"storage": list(VALUES)}, **defaults},
        "workloads": [{"kind": "command", "name": name, "command": "true"} for name in ("a", "b")],
    }
    messages = Messages()
    runner = Runner(
        plan_from_dict(document, "test"),
        out=tmp_path / "out",
        workdir=tmp_path / "work",
        storage_paths=paths,
        reporter=messages,
        environment={},
        executor=ScriptedExecutor(answer),
        order=Order("random", 11),
        resume=resume,
    )
    return runner.run(), messages


def scripted(job):
    """tmpfs 10x slower in a, no cost in b; ext4-loop no cost in either; 1% noise (from the seed,
    the workload, the variant and the round, whatever order was drawn)."""
    value = job.variant["storage"]
    scale = 10.0 if (job.name, value) == ("a", "tmpfs") else 1.0
    rng = np.random.default_rng([ord(job.name), VALUES.index(value), job.repetition])
    return measured(scale * rng.lognormal(0, 0.01))


def test_a_layer_in_two_workloads_settles_once_on_the_mean_of_all_its_cases(tmp_path, monkeypatch, capsys):
    result, messages = two_workloads(
        tmp_path, monkeypatch, scripted, settle="2%", max_repetitions=12, settle_by="layer"
    )
    a, b = (result.outcomes[name].settled for name in ("a", "b"))
    assert a["by"] == b["by"] == "layer" and a["limit"] == b["limit"] == 12
    # one layer, one headline in both records: the mean of a's 10x and b's no cost, sqrt(10)x
    tmpfs_a, tmpfs_b = a["variants"]["storage=tmpfs"]["layer"], b["variants"]["storage=tmpfs"]["layer"]
    assert tmpfs_a == tmpfs_b and tmpfs_a["state"] == "cost" and tmpfs_a["workloads"] == ["a", "b"]
    assert tmpfs_a["headline"]["estimate"] == pytest.approx(math.sqrt(10) - 1, rel=0.02)
    assert set(tmpfs_a["cases"]) == {"a: wall_time", "b: wall_time"} and tmpfs_a["costliest"] == "a: wall_time"
    # settled at the repetitions: neither workload ran a round for it (per workload, b's tmpfs, no
    # cost at 1% against a 2% target, would have run rounds of its own)
    for record in (a, b):
        assert not any("storage=tmpfs" in entry["variants"] for entry in record["settle_rounds"])
    # the layer that runs on runs in both workloads, round for round
    rounds = [
        [e["round"] for e in record["settle_rounds"] if "storage=ext4-loop" in e["variants"]] for record in (a, b)
    ]
    assert rounds[0] == rounds[1] and rounds[0], rounds
    assert a["variants"]["storage=ext4-loop"]["layer"] == b["variants"]["storage=ext4-loop"]["layer"]
    # the running answer: one line per layer, naming both workloads
    said = [line for line in messages.lines if line.startswith(("settled after", "open after")) and "tmpfs" in line]
    assert len(said) == 1 and said[0].startswith("settled after round 3, "), said
    # the variants are the test's own directories: layered by what they are (plain, on a disk), not by name
    tmpfs_layer = own_path_layer("tmpfs", tmp_path)
    assert f": a, b: {tmpfs_layer}: " in said[0] and "mean of 2 cases in 2 workloads" in said[0]
    # compare remakes the title from the samples with today's rule, not the record's (a record from an
    # older version names a plain directory called tmpfs "in-memory storage")
    from ccbench.analysis.settling.layer_settle import with_layers
    from ccbench.analysis.settling.recorded import bundle_settlements
    from ccbench.bundle import read_bundle

    bundle = read_bundle(result.bundle)
    stale = bundle_settlements(bundle)
    for record in stale.values():
        record["variants"]["storage=tmpfs"]["layer"] = {"title": "in-memory storage: tmpfs (own path)"}
    assert {r["variants"]["storage=tmpfs"]["layer"]["title"] for r in with_layers(bundle, stale).values()} == {
        tmpfs_layer
    }
    # the run's closing lines give the layer line once (not once per workload), then each workload's case
    block = settled_block({"a": a, "b": b})
    [layer_line] = [line for line in block if line.startswith(f"{tmpfs_layer} against storage=disk, in a, b: ")]
    assert "x slower [" in layer_line
    assert any(line.startswith("  a: wall_time: ") for line in block)
    assert any(line.startswith("  b: wall_time: ") for line in block)
    # the verdict renders the run's headline: one judged result (compare's rows and its layer line)
    from ccbench.analysis.comparison import comparison

    compared = comparison([result.bundle])
    [tmpfs] = [v for v in compared.verdicts() if "tmpfs" in v.layer]
    head = tmpfs_a["headline"]
    assert tmpfs.typical == pytest.approx(1 + head["estimate"], rel=1e-6), (tmpfs.words(), head)
    assert (tmpfs.low, tmpfs.high) == pytest.approx((1 + head["low"], 1 + head["high"]), rel=1e-6)
    assert "mean of 2 cases in 2 workloads" in tmpfs.judgement.test_named()
    # no workload's own line beside the run's figure for both (its cases on their own read as another
    # answer), and the long sentence rests on the run's rounds, not on a test of the rows it never made
    assert tmpfs.workload_judgements == []
    sentence = tmpfs.sentence()
    assert " called on " in sentence and "comparisons significant across" not in sentence, sentence
    assert "not heterogeneous" not in sentence
    # and in the words of compare's text, its --json and the report: the run's figure
    figure = fmt.effect(1 + head["estimate"], 1 + head["low"], 1 + head["high"])
    assert figure in layer_line
    code, text, err = ccbench_in_process(capsys, "compare", str(result.bundle), "--summary")
    assert code == 0, err
    verdict_line = next(line for line in text.splitlines() if "tmpfs" in line and "slower" in line)
    assert figure in " ".join(text.split()), (figure, verdict_line)
    # beside the settled figure, its cases' counts say what settled it, never "none of 2 significant"
    # (a case is called on its own only by e-BH across the layer)
    said = " ".join(text.split("settled in ")[0].split())
    assert f"{figure}; settled on the mean of 2 cases in 2 workloads, " in said, said
    assert "none of 2 significant" not in said
    # its settled cases: one header, each layer's line once (not once per workload), and no state
    # said twice ("open: open, so far"); --summary: no line per case, compare: its cases workload by
    # workload under each layer
    loop_label = own_path_layer("ext4-loop", tmp_path).partition(": ")[2]
    for summary in (True, False):
        if not summary:
            code, text, err = ccbench_in_process(capsys, "compare", str(result.bundle))
            assert code == 0, err
        settled = text[text.index("settled in ") :]
        flat = " ".join(settled.split())
        assert text.count("settled in ") == 1, text
        assert flat.count(f"{tmpfs_layer} against storage=disk, in a, b: cost: ") == 1, text
        assert flat.count(f"{loop_label} against storage=disk, in a, b: no cost above 2.0% ") == 1, text
        assert ("a: wall_time: so far: " in flat and "b: wall_time: so far: " in flat) is not summary, settled
        assert not any(f"{word}: {word}" in flat for word in ("open", "no cost above", "disagree")), text
        if summary:  # the header and the two layers' lines, each wrapped onto at most 4 lines
            said = [line for line in settled.splitlines() if line.startswith("  ") and not line.startswith("    ")]
            assert len(said) == 2 and len(settled.splitlines()) <= 9, settled
    code, text, err = ccbench_in_process(capsys, "compare", str(result.bundle), "--json")
    rows = [json.loads(line) for line in text.splitlines()]
    heads = [r["layer_settled"] for r in rows if r.get("metric") == "wall_time" and "tmpfs" in r["config"]]
    assert len(heads) == 2 and heads[0] == heads[1] and heads[0]["estimate"] == pytest.approx(head["estimate"])
    report = tmp_path / "r.md"
    code, _, err = ccbench_in_process(capsys, "report", str(result.bundle), "-o", str(report))
    assert code == 0, err
    assert figure in " ".join(report.read_text().split())
    # a copy cut short: compare reads it twice (the rows, then the settled section), says so once,
    # in one plain line of its own (never Python's UserWarning with its source line)
    copy = tmp_path / "cut"
    shutil.copytree(result.bundle, copy)
    journal = copy / "samples.jsonl"
    journal.write_bytes(journal.read_bytes()[:-30])
    done = run_ccbench("compare", copy, "--summary", "--allow-unverified")
    assert done.returncode == 0 and "settled in cut" in done.stdout, done.stderr
    assert " ".join(done.stderr.split()).count("samples.jsonl: the last line") == 1, done.stderr
    assert "UserWarning" not in done.stderr and "_check_lines" not in done.stderr, done.stderr


def test_a_real_two_workload_run_through_the_cli_says_one_layer_line_everywhere(tmp_path, ccbench, workdir):
    """Real worker processes: two commands that sleep what their variant's directory says (tmpfs
    slower in both, by different amounts); settled by layer at the repetitions (the round limit),
    the run's running answer names both workloads and both records hold the one headline."""
    paths = {}
    for value, delays in (("disk", ("0.01", "0.01")), ("tmpfs", ("0.2", "0.1"))):
        paths[value] = tmp_path / f"dir-{value}"
        paths[value].mkdir()
        for name, delay in zip(("slow", "less"), delays):
            (paths[value] / name).write_text(delay)
    plan = tmp_path / "plan.toml"
    workloads = "".join(
        f'[[workloads]]\nkind = "command"\nname = "{name}"\ncommand = "sleep $(cat ../{name})"\n'
        for name in ("slow", "less")
    )
    plan.write_text(
        'name = "across"\n[defaults]\nrepetitions = 3\nwarmup = 0\ncooldown = 0\nmax_repetitions = 3\n'
        f'variants = {{ storage = ["disk", "tmpfs"] }}\n{workloads}'
    )
    out = tmp_path / "out"
    paths_args = [f"--storage-path={value}={path}" for value, path in paths.items()]
    done = ccbench(
        "run", plan, "--out", out, "--workdir", workdir, *paths_args, "--settle", "5%", "--settle-by", "layer"
    )
    assert done.returncode == 0, done.stderr
    text = " ".join((done.stdout + done.stderr).split())  # the output wraps; the running answer is on stderr
    assert "settled after round 3, " in text and f": slow, less: {own_path_layer('tmpfs', tmp_path)}: " in text
    manifest = json.loads((only_bundle(out) / "manifest.json").read_text())
    layers = [manifest["outcomes"][name]["settled"]["variants"]["storage=tmpfs"]["layer"] for name in ("slow", "less")]
    assert layers[0] == layers[1] and layers[0]["state"] == "cost", layers


def test_a_headline_is_no_figure_of_fewer_rows_than_it_pooled():
    """The user trial: fscrypt's headline pooled 8 cases, 4 of them fio rows the verdict leaves out as
    implausible, and the verdict still gave the headline's 3.1x. A judgement holding fewer of the
    headline's rows than it pooled (the rest left out, or another workload's) is judged on its rows."""
    import pandas as pd

    from ccbench.analysis.judgement import semantics

    head = {"state": "cost", "estimate": 2.1, "low": 0.3, "high": 6.4, "cases": 3, "workloads": 2, "rounds": 3}
    rows = pd.DataFrame(
        {
            "te": [1.2, 1.1, 1.3],
            "te_low": [0.9, 0.8, 1.0],
            "te_high": [1.6, 1.5, 1.7],
            "significant": [False, False, False],
            "layer_settled": [head, head, head],
        }
    )
    whole = semantics.settled_judgement(rows, [])
    assert (
        whole is not None
        and whole.typical == pytest.approx(3.1)
        and "mean of 3 cases in 2 workloads" in whole.settled_on
    )
    assert semantics.settled_judgement(rows.iloc[:2], []) is None  # one case left out, or in another workload
    judged = semantics.judge(rows.iloc[:2])
    assert not judged.settled_on and judged.typical != pytest.approx(3.1)


def test_settle_by_without_anything_to_settle_is_one_line(capsys, tmp_path):
    """The user trial: --settle-by layer without --settle ran the fixed design and said nothing."""
    from conftest import ccbench_in_process

    out = tmp_path / "out"
    code, stdout, err = ccbench_in_process(capsys, "run", "quick", "--settle-by", "layer", "--out", out)
    assert code == 2 and err.startswith("ccbench: error: --settle-by layer: nothing to settle: give --settle")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and not out.exists()


def test_a_plan_settled_by_layer_without_a_target_is_one_line(capsys, tmp_path):
    """The user trial: a plan's settle_by = "layer" with no settle target ran the fixed design silently."""
    from conftest import ccbench_in_process

    from ccbench.commands.run import check_settle_by
    from ccbench.planning.plan import load_plan

    plan = tmp_path / "by-layer.toml"
    plan.write_text(
        '[defaults]\nsettle_by = "layer"\nvariants = { storage = ["disk", "tmpfs"] }\n'
        '[[workloads]]\nkind = "command"\nname = "c"\ncommand = "true"\n'
    )
    out = tmp_path / "out"
    code, _, err = ccbench_in_process(capsys, "run", str(plan), "--out", out)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(
        f'ccbench: error: {plan}: workload c: settle_by = "layer" (its own or [defaults]\') without'
    ), err
    assert "--settle 5%" in err and not out.exists()
    # a target from the command line is what the plan lacked
    assert check_settle_by(load_plan(str(plan)).with_settle("5%")).workloads[0].settle == pytest.approx(0.05)


def test_a_cut_in_the_rounds_leaves_the_settled_layer_in_the_bundle_as_the_run_said_it(tmp_path, monkeypatch, capsys):
    """Ctrl-C in a round after a layer settled: the held workloads' records are in the manifest (the
    settled layer as printed, the open one stopped by the cut), and compare reads the printed figure."""
    from ccbench.bundle import read_bundle
    from ccbench.model import ExecutionStatus
    from ccbench.run.runner import Interrupted
    from ccbench.run.supervise import Attempt

    def answer(job):
        if (job.name, job.repetition, job.variant["storage"]) == ("b", 5, "ext4-loop"):
            return Attempt(ExecutionStatus.INTERRUPTED, "interrupted by a signal", interruption=Interrupted(2))
        return scripted(job)

    result, messages = two_workloads(tmp_path, monkeypatch, answer, settle="2%", max_repetitions=12, settle_by="layer")
    assert result.interrupted
    said = [line for line in messages.lines if line.startswith(("settled after", "open after"))]
    [tmpfs_line] = [line for line in said if "tmpfs" in line]
    assert tmpfs_line.startswith("settled after round 3, ") and "x slower [" in tmpfs_line
    assert any(line.startswith("open after round 5, ") and "ext4-loop" in line for line in said), said
    manifest = read_bundle(result.bundle).manifest  # as written to disk
    for name in ("a", "b"):
        record = manifest["outcomes"][name]["settled"]
        assert record["by"] == "layer" and record["rounds"] == 5, record
        assert record["variants"]["storage=tmpfs"]["layer"]["state"] == "cost"
        assert record["variants"]["storage=ext4-loop"]["stopped_by"] == "interrupted"
    head = manifest["outcomes"]["a"]["settled"]["variants"]["storage=tmpfs"]["layer"]["headline"]
    figure = fmt.effect(1 + head["estimate"], 1 + head["low"], 1 + head["high"])
    assert figure in tmpfs_line
    from ccbench.analysis.comparison import comparison

    compared = comparison([result.bundle])
    verdicts = compared.verdicts()
    # the open layer's rows say "open" (their --json), not a null read as "no answer"
    loop_rows = compared.table[compared.table["config"].str.contains("ext4-loop")]
    assert {head["state"] for head in loop_rows["layer_settled"].dropna()} == {"open"}
    [tmpfs] = [v for v in verdicts if "tmpfs" in v.layer]
    assert tmpfs.typical == pytest.approx(1 + head["estimate"], rel=1e-6), tmpfs.words()
    # the open layer: the verdict's bound is the open line's upper end (its headline's), no other figure
    [open_line] = [line for line in said if line.startswith("open after") and "ext4-loop" in line]
    loop = manifest["outcomes"]["a"]["settled"]["variants"]["storage=ext4-loop"]["layer"]["headline"]
    [ext4] = [v for v in verdicts if "ext4-loop" in v.layer]
    upper = fmt.mde(loop["high"])
    assert fmt.effect(1 + loop["estimate"], 1 + loop["low"], 1 + loop["high"]) in open_line
    assert f"no cost above {upper} (what the " in ext4.words() and "on the mean of its cases" in ext4.words()
    # resumed, the rounds go on from the cut one (its done executions skipped), and are counted so
    resumed, again = two_workloads(
        tmp_path, monkeypatch, scripted, resume=result.bundle, settle="2%", max_repetitions=12, settle_by="layer"
    )
    assert not resumed.interrupted
    said = [line for line in again.lines if line.startswith(("settled after", "open after"))]
    assert said and all(int(line.split()[3].rstrip(",")) >= 5 for line in said), said
    assert all("into the resumed run: " in line for line in said), said


def test_a_control_holds_no_round_once_its_cipher_is_settled(tmp_path, monkeypatch, capsys):
    """The loop file without a cipher is a control: a cipher on a loop file is set against it. Here
    tmpfs stands in for such a cipher (the scripted run mounts nothing), 10x slower than the loop
    file, settled at the first look; the loop file costs 4% against the disk with 6% noise, open
    then. The run ends with its repetitions (no round for the control alone: it failed before, the
    rounds ran on for the loop file up to the limit), and every output says the control open, so far,
    and why."""
    from ccbench.run.settle_layers import CONTROL

    tmpfs_as_cipher(monkeypatch)
    scale = {"disk": 1.0, "ext4-loop": 1.04, "tmpfs": 10.4}

    def answer(job):
        value = job.variant["storage"]
        rng = np.random.default_rng([ord(job.name), VALUES.index(value), job.repetition])
        return measured(scale[value] * rng.lognormal(0, 0.06 if value == "ext4-loop" else 0.01))

    result, messages = two_workloads(tmp_path, monkeypatch, answer, settle="5%", max_repetitions=10, settle_by="layer")
    for name in ("a", "b"):
        record = result.outcomes[name].settled
        cipher, loop = record["variants"]["storage=tmpfs"], record["variants"]["storage=ext4-loop"]
        assert cipher["against"] == "storage=ext4-loop" and cipher["layer"]["state"] == "cost", cipher["layer"]
        assert record["settle_rounds"] == [] and record["rounds"] == 3, record["settle_rounds"]
        assert loop["stopped_by"] == CONTROL and loop["layer"]["state"] is None, loop
        assert {case["claim"] for case in loop["cases"].values()} == {"so far"}
    said = [line for line in messages.lines if line.startswith(("settled after", "open after"))]
    assert [line.split(",")[0] for line in said] == ["settled after round 3", "open after round 3"], said
    assert said[1].endswith(f"({CONTROL})") and " so far " in said[1], said
    block = " ".join(" ".join(settled_block({n: result.outcomes[n].settled for n in ("a", "b")})).split())
    assert f"; stopped: {CONTROL}" in block, block
