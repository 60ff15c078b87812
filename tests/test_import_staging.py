"""An import writes only inside --out, and only whole bundles: names from a source become path
components through one function; a killed import leaves nothing a later command takes for a bundle,
and the next import removes what it can prove a dead import left."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import DATA, REPO, run_ccbench
from hypothesis import given, settings
from hypothesis import strategies as st

from ccbench.bundle import read_bundle
from ccbench.results.importers import safe_component
from ccbench.results.importers.staging import OWNER_SUFFIX, STAGING

PYPERF = DATA / "pyperf" / "timeit-sum-range.json"


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_safe_component_keeps_any_name_one_component_inside(name):
    root = Path("/bundle/raw")
    safe = safe_component(name)
    assert safe not in ("", ".", "..") and not safe.startswith(".")
    assert "/" not in safe and "\0" not in safe and len(safe) <= 80
    assert (root / safe).parent == root
    if safe == name:
        assert len(name) <= 80
    else:  # changed names keep a digest of the original: two names stay two
        assert safe_component(name + "x") != safe


def test_safe_component_tells_names_apart():
    names = ["../x", "..\\x", "a/b", "a_b", "x" * 200, "x" * 201, "ǅ", "$HOME", "*", "?"]
    assert len({safe_component(n) for n in names}) == len(names)


def test_a_hostile_benchmark_name_and_label_write_only_inside_out(tmp_path):
    document = json.loads(PYPERF.read_text())
    document["metadata"]["name"] = "../../../../../../escaped"
    source = tmp_path / "src" / "..hostile name $x.json"
    source.parent.mkdir()
    source.write_text(json.dumps(document))
    out = tmp_path / "deep" / "out"
    before = _files(tmp_path)
    done = run_ccbench("import", "pyperf", source, "--out", out, "--label", "../../../evil")
    assert done.returncode == 0, done.stderr
    created = _files(tmp_path) - before
    assert created and all(out in p.parents or p == out or p in (out.parent,) for p in created), created
    [bundle] = [p for p in out.iterdir() if (p / "manifest.json").exists()]
    loaded = read_bundle(bundle)
    assert {s["params"]["benchmark"] for s in loaded.samples} == {document["metadata"]["name"]}
    assert run_ccbench("verify", bundle).returncode == 0


def _big_pyperf(path: Path, values: int) -> Path:
    """A pyperf suite of many benchmarks (the shape pyperformance writes), ``values`` values in all."""
    rng = random.Random(1)
    document = json.loads(PYPERF.read_text())
    template = document["benchmarks"][0]
    per_run, runs = 50, 20
    benchmarks = []
    for number in range(values // (per_run * runs)):
        benchmarks.append(
            {
                "metadata": {"name": f"bench_{number}", "loops": 8},
                "runs": [template["runs"][0]]
                + [
                    {
                        "metadata": {"date": "2026-11-23 04:15:15.043262"},
                        "warmups": [[8, 1e-3]],
                        "values": [rng.uniform(1e-3, 2e-3) for _ in range(per_run)],
                    }
                    for _ in range(runs)
                ],
            }
        )
    document["metadata"].pop("name")
    document["benchmarks"] = benchmarks
    path.write_text(json.dumps(document))
    return path


def test_a_killed_import_leaves_no_bundle_and_the_next_import_cleans_it(tmp_path):
    source = _big_pyperf(tmp_path / "big.json", 200_000)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO / "src"))}
    process = subprocess.Popen(
        [sys.executable, "-m", "ccbench", "import", "pyperf", str(source), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    staged = None
    deadline = time.monotonic() + 120
    while staged is None and time.monotonic() < deadline and process.poll() is None:
        found = list((out / STAGING).glob("*/samples.jsonl")) if (out / STAGING).is_dir() else []
        staged = found[0].parent if found and found[0].stat().st_size > 0 else None
        time.sleep(0.005)
    assert staged is not None, "the import ended before it could be killed mid-write"
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    # nothing in out is a bundle; what is staged says it is not complete
    assert not [p for p in out.iterdir() if (p / "manifest.json").exists()]
    assert json.loads((staged / "manifest.json").read_text())["status"] == "importing"
    assert (out / STAGING / f"{staged.name}{OWNER_SUFFIX}").exists()

    done = run_ccbench("import", "pyperf", PYPERF, "--out", out)
    assert done.returncode == 0, done.stderr
    assert not (out / STAGING).exists()  # the dead import's leftovers are gone
    bundles = [p for p in out.rglob("manifest.json")]
    assert len(bundles) == 1 and json.loads(bundles[0].read_text())["status"] == "complete"


def test_leftovers_are_removed_only_when_their_import_is_provably_gone(tmp_path):
    out = tmp_path / "out"
    staging = out / STAGING
    staging.mkdir(parents=True)
    me = psutil.Process()
    dead = subprocess.Popen(["true"])
    dead.wait()
    owners = {
        "alive": {"pid": me.pid, "create_time": me.create_time()},
        "dead": {"pid": dead.pid, "create_time": time.time() - 5},
        "recycled": {"pid": me.pid, "create_time": me.create_time() - 3600},  # same pid, another process
    }
    for name, owner in owners.items():
        (staging / name).mkdir()
        (staging / name / "manifest.json").write_text('{"status": "importing"}')
        (staging / f"{name}{OWNER_SUFFIX}").write_text(json.dumps(owner))
    (staging / "unowned").mkdir()  # no owner record: nothing proves whose it is
    done = run_ccbench("import", "pyperf", PYPERF, "--out", out)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in staging.iterdir() if p.is_dir()) == ["alive", "unowned"]


def test_the_staged_manifest_says_importing_until_the_end(tmp_path, monkeypatch):
    """The manifest's final status is written last: while the journals and their Parquet copy are
    written, a reader finds "importing"; an interruption there leaves nothing behind."""
    from ccbench.results.importers import import_results

    seen = []

    def interrupted(bundle):
        seen.append(json.loads((Path(bundle) / "manifest.json").read_text())["status"])
        raise KeyboardInterrupt

    monkeypatch.setattr("ccbench.bundle.columnar.write_bundle_parquet", interrupted)
    with pytest.raises(KeyboardInterrupt):
        import_results("pyperf", [PYPERF], tmp_path / "out")
    assert seen == ["importing"]
    assert not list((tmp_path / "out").rglob("*"))


def test_an_out_that_cannot_be_written_is_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = run_ccbench("import", "pyperf", PYPERF, "--out", blocker / "out")
    assert done.returncode == 2 and "cannot write under" in done.stderr and "--out" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_a_hang_up_or_sigterm_ends_an_import_through_its_clean_up_in_one_line(tmp_path, sig):
    """The session that started an import drops (SIGHUP) or it is killed politely (SIGTERM) while it
    reads its input: one line on stderr, exit 128 + the signal, no traceback, nothing under --out.
    (On main before this, both signals ended the process on the spot, with no word.) The input is a
    FIFO, so the test knows the import is inside its read when the signal arrives."""
    fifo = tmp_path / "results.json"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "ccbench", "import", "pyperf", str(fifo), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 300
    writer = None
    while writer is None:
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        try:  # a writer can open a FIFO without blocking only once its reader has it open
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            time.sleep(0.05)
    process.send_signal(sig)
    # CPython runs a handler between bytecodes: a signal that lands just before the blocking read
    # starts waits for that read to return (seen about once in 15 on a loaded machine). The input
    # ending, as any real input does, lets it return; a handler that already ran has stopped the read.
    time.sleep(0.5)
    os.close(writer)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + sig, stderr
    assert stderr.strip() == (
        f"ccbench: stopped by {signal.Signals(sig).name} before the command finished; run it again"
    )
    assert not out.exists() or not [p for p in out.rglob("*") if p.is_file()]
