"""The first run answers (issue 40): the bundled ``quick`` plan compares storage variants, ``ccbench
run``'s closing summary prints their verdict and the next command, and the README's next step works
as written after it. The whole plan takes about 4 minutes, so the run here is a shortened copy of the
bundled plan file (its variants and workloads, shorter fio jobs): every shortening is checked to
apply, so a change to the plan shows here."""

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from conftest import REPO, only_bundle, run_ccbench

from ccbench.variants.storage import choose_mechanism

QUICK = REPO / "src" / "ccbench" / "plans" / "quick.toml"
#: (what the bundled plan says, what the shortened copy says instead)
SHORTER = [
    ('blocksizes = ["4k", "1m"]', 'blocksizes = ["4k"]'),
    ('size = "128M"', 'size = "16M"'),
    ("runtime = 3", "runtime = 1"),
    ("n = 100000", "n = 20000"),
]


def test_the_quick_plan_compares_disk_tmpfs_and_encrypted_storage():
    plan = tomllib.loads(QUICK.read_text())
    fio = {w.get("name", "fio"): w for w in plan["workloads"] if w["kind"] == "fio"}
    # direct I/O, and the page cache's path that every variant serves alike; each with the loop file
    # without a cipher, so that the cipher's cost is told from the loop file's
    assert [w["variants"]["storage"] for w in fio.values()] == [["disk", "tmpfs", "encrypted", "ext4-loop"]] * 2
    assert fio["fio-cold"]["direct"] is False and fio["fio-cold"]["time_based"] is False and fio["fio-cold"]["sync"]


def readme_next_step() -> list[str]:
    """The commands the README gives after ``run quick``: the sh block under "Then compare and report"."""
    text = (REPO / "README.md").read_text()
    block = re.search(r"Then compare and report[^\n]*\n\n```sh\n(.*?)```", text, re.S)
    assert block, "README.md: no sh block under 'Then compare and report'"
    lines = [line for line in block.group(1).splitlines() if line.strip()]
    assert lines and all(line.startswith(".venv/bin/ccbench ") for line in lines), lines
    return lines


def test_a_shortened_quick_run_answers_and_the_readme_next_step_works(tmp_path):
    text = QUICK.read_text()
    for bundled, shorter in SHORTER:
        assert text.count(bundled) >= 1, f"quick.toml no longer says {bundled!r}: update this test"
        text = text.replace(bundled, shorter)
    plan = tmp_path / "quick.toml"
    plan.write_text(text)

    done = run_ccbench("run", plan, "--out", "results", "--workdir", "work", "--repeat", "3", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    bundle = only_bundle(tmp_path / "results")
    # the closing summary: the verdict of the variants just run, then the next command
    assert "verdict of this run against vm" in out or "verdict of this run against " in out, out[-3000:]
    verdict = out[out.index("verdict of this run against") :]
    assert re.search(r"^  in-memory storage: tmpfs: ", verdict, re.M), verdict
    assert f"next: ccbench compare {Path('results') / bundle.name} --summary" in verdict, verdict
    mechanism, passed_over = choose_mechanism()
    if mechanism is None:
        # no root or no storage component: the variant is skipped with its reason, the run goes on
        assert re.search(r"^fio: storage=encrypted skipped: .+", out, re.M), out[-3000:]
        assert "storage encryption" not in verdict
    else:
        assert re.search(r"^  storage encryption: ", verdict, re.M), verdict

    # the README's example of this closing summary has the shape of the real one: its lines, in
    # order, each as its indentation and first word (the figures differ from machine to machine)
    example = re.search(r"## What you get.*?```text\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert example, "README.md: no text block under 'What you get'"
    heads = [re.match(r"\s*\S+", line).group() for line in example.group(1).splitlines() if line.strip()]
    # a layer's second line with its workloads' own words is there only where they differ, which
    # the numbers decide (a busy run printed "tmpfs: faster, 3.1x to 25x ... in fio-cold" on one
    # line): such lines are not the shape; the rows left out ("left") are, given the mechanism
    heads = [h for h in heads if not (h.startswith("    ") and not h.startswith("     ") and h.strip() != "left")]
    # a line too long for the width goes on, indented by 4 under its own (headline.fit): where it breaks
    # depends on the figures, so those continuations are not the shape either ("next:"'s own lines,
    # aligned under it with 6 spaces, are)
    heads = [h for h in heads if not (len(h) - len(h.lstrip()) in (6, 8) and h.strip() != "ccbench")]
    if mechanism is None:  # the example ran with the encrypted variant
        heads = [h for h in heads if h.strip() not in ("storage", "left", "[high]")]
    real = iter(re.match(r"\s*\S+", line).group() for line in out[out.index("bundle: ") :].splitlines() if line.strip())
    shown = out[out.index("bundle: ") :]
    assert all(head in real for head in heads), "\n".join(["README:", *heads, "run:", shown])

    # the README's next step, as written, from the directory the run was made in
    for line in readme_next_step():
        command = line.replace(".venv/bin/ccbench", f"{sys.executable} -m ccbench", 1)
        step = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert step.returncode == 0, f"{line}: {step.stdout[-2000:]}{step.stderr[-2000:]}"

    if mechanism == "fscrypt":
        # fio asked the kernel: it serves O_DIRECT on the fscrypt file as buffered I/O (statx)
        samples = [json.loads(line) for line in (bundle / "samples.jsonl").read_text().splitlines()]
        served = {
            (s["variant"].get("storage"), s["metadata"]["direct_served"], s["metadata"]["direct_effective"])
            for s in samples
            if s["workload"] == "fio"
        }
        assert ("encrypted", "buffered", False) in served and not any(
            storage == "encrypted" and how != "buffered" for storage, how, _ in served
        ), served
    if mechanism in ("fscrypt", "gocryptfs"):
        # a real fio run on a mechanism whose O_DIRECT the kernel serves buffered: flagged
        rows = [json.loads(line) for line in run_ccbench("compare", bundle, "--json", cwd=tmp_path).stdout.splitlines()]
        encrypted = [row for row in rows if "config" in row and row["config"].endswith(f"/ {mechanism}")]
        direct = [row for row in encrypted if row["workload"] == "fio"]
        assert direct and all(row["implausible"] == f"direct I/O served buffered on {mechanism}" for row in direct)
        assert any(row.get("finding") == "implausible" for row in rows)
        # the cold buffered reads and synchronous writes are the same path on every variant: they
        # stand, so the verdict has a figure for the encryption (it said "no figure" before them)
        cold = [row for row in encrypted if row["workload"] == "fio-cold"]
        assert cold and not any(row["implausible"] for row in cold), cold
        assert not re.search(r"^  storage encryption: [^\n]*no figure", verdict, re.M), verdict
    if mechanism in ("fscrypt", "luks"):
        # a cipher on a loop file stands against the same loop file without it
        assert re.search(r"^  storage encryption: \S+ \(against ext4-loop\): ", verdict, re.M), verdict
        assert re.search(r"^  loop file, no cipher: ext4-loop: ", verdict, re.M), verdict
