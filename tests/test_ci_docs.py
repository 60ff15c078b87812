"""docs/ci.md's GitHub Actions and GitLab CI jobs: valid YAML that runs the quick plan, then the gate,
then adds every finished run to the store; the GitHub job's own steps run night after night from an
empty store to a judged gate; the exit codes the page gives are the ones the gate returns."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import yaml

CI_DOC = Path(__file__).parents[1] / "docs" / "ci.md"


def _yaml_blocks() -> list[dict]:
    blocks = re.findall(r"```yaml\n(.*?)```", CI_DOC.read_text(), flags=re.S)
    return [yaml.safe_load(block) for block in blocks]


def _runs_then_gates(commands: list[str]) -> None:
    runs = [i for i, c in enumerate(commands) if "ccbench run " in c]
    gates = [i for i, c in enumerate(commands) if "ccbench gate " in c]
    assert runs and gates and runs[0] < gates[0], commands
    gate = " ".join(commands[gates[0]].split())
    assert "--against" in gate and "--junit gate.xml" in gate and "--markdown gate.md" in gate


def test_github_actions_job_runs_the_quick_plan_then_the_gate():
    github = next(b for b in _yaml_blocks() if "jobs" in b)
    # YAML reads the bare key "on" as True
    assert "schedule" in (github.get("on") or github.get(True))
    job = github["jobs"]["benchmark"]
    assert "runs-on" in job and isinstance(job["steps"], list)
    assert all("run" in step or "uses" in step for step in job["steps"])
    commands = [step["run"] for step in job["steps"] if "run" in step]
    _runs_then_gates(commands)
    assert "ccbench run quick" in commands[1]
    uploads = [step for step in job["steps"] if str(step.get("uses", "")).startswith("actions/upload-artifact")]
    assert uploads and "gate.xml" in uploads[0]["with"]["path"]
    # every finished run reaches the store, whatever the gate said, after the gate; and a run that exited 1
    # (some executions failed) is gated: the gate judges what it lost, the job does not stop before it
    adds = [i for i, step in enumerate(job["steps"]) if "ccbench history add" in step.get("run", "")]
    gate = next(i for i, step in enumerate(job["steps"]) if "ccbench gate " in step.get("run", ""))
    assert adds and adds[0] > gate and job["steps"][adds[0]].get("if") == "!cancelled()"
    assert job["steps"][gate].get("if") == "!cancelled()"


def test_gitlab_job_runs_the_quick_plan_then_the_gate_and_reports_junit():
    gitlab = next(b for b in _yaml_blocks() if "stages" in b)
    job = gitlab["ccbench-gate"]
    assert job["stage"] in gitlab["stages"]
    _runs_then_gates(job["script"])
    assert any("ccbench run quick" in line for line in job["script"])
    # a run that exited 1 goes on to the gate (GitLab ends the script at a line that fails)
    assert any("ccbench run quick" in line and line.endswith("|| ran=$?") for line in job["script"])
    assert job["artifacts"]["reports"]["junit"] == "gate.xml"
    # after_script runs whether the script passed or failed: every finished run reaches the store
    assert any("ccbench history add results/nightly" in line for line in job["after_script"])
    assert not any("history add" in line for line in job["script"])


def _run_step(command: str, workspace: Path, env: dict[str, str], plan: Path, work: Path) -> int:
    """One step's shell command as the runner would run it, ccbench being this checkout's and the quick
    plan a tiny one."""
    command = command.replace(".venv/bin/ccbench", f"{sys.executable} -m ccbench")
    command = command.replace("ccbench run quick", f"ccbench run {plan} --workdir {work}")
    command = command.replace("--confirm quick", f"--confirm {plan} --workdir {work}")
    done = subprocess.run(["bash", "-e", "-c", command], cwd=workspace, env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode


def _gitlab_night(tmp_path: Path, env: dict[str, str], plan: Path) -> tuple[int, Path]:
    """The GitLab job's script, as its runner runs it (one shell, a failing line ends it), on a fresh
    workspace: (its exit code, the workspace)."""
    gitlab = next(b for b in _yaml_blocks() if "stages" in b)
    lines = [line for line in gitlab["ccbench-gate"]["script"] if "setup.sh" not in line]
    workspace = tmp_path / "gitlab"
    workspace.mkdir()
    return _run_step("\n".join(lines), workspace, env, plan, tmp_path / "work"), workspace


def test_the_github_job_fills_an_empty_store_and_then_judges(tmp_path, write_plan):
    """The documented job's own steps (setup and actions left out), night after night on a fresh
    workspace with one store: three nights building the baseline (exit 0, Markdown and JUnit written,
    every case skipped), the fourth judged, on a night whose command failed in every execution: the run
    exits 1, and the gate still runs (GitHub's steps, and GitLab's script), fails and names the lost
    case and why. Before: the gate exited 2 without files while the store was short, the summary step
    failed, and the store took a run only after a gate passed: it never filled; and a run that exited
    1 ended the job before its gate."""
    github = next(b for b in _yaml_blocks() if "jobs" in b)
    job = github["jobs"]["benchmark"]
    flag = tmp_path / "fail-the-command"
    plan = write_plan(
        f'[[workloads]]\nkind = "prime"\nn = 3000\n[[workloads]]\nkind = "command"\nname = "probe"\n'
        f'command = "test ! -e {flag}"\n',
        defaults="repetitions = 3\nwarmup = 0\ncooldown = 0\n",
    )
    store = tmp_path / "store" / "history.duckdb"
    store.parent.mkdir()
    env = {**os.environ, **job["env"], "CCBENCH_STORE": str(store)}
    steps = [s for s in job["steps"] if "run" in s and "setup.sh" not in s["run"]]
    lost = "probe wall_time on no TEE / disk: its 3 executions failed in the new run (exit 1, no output)"
    for night in range(4):
        if night == 3:
            flag.touch()  # the command fails from tonight on
            # the GitLab job's script on this night first (its after_script, history add, left out)
            code, gitlab = _gitlab_night(tmp_path, env, plan)
            assert code == 1 and "Lost: probe wall_time" in (gitlab / "gate.md").read_text(), code
        workspace = tmp_path / f"night{night}"  # actions/checkout cleans the workspace each night
        workspace.mkdir()
        env["GITHUB_STEP_SUMMARY"] = str(workspace / "summary.md")
        failed, codes = False, {}
        for step in steps:
            condition = step.get("if", "success()")
            if condition in ("always()", "!cancelled()") or (condition == "success()" and not failed):
                codes[step["name"]] = code = _run_step(step["run"], workspace, env, plan, tmp_path / "work")
                failed = failed or code != 0
        run = next(name for name in codes if name.startswith("Run"))
        gate = next(name for name in codes if name.startswith("Gate"))
        summary = (workspace / "gate.md").read_text()
        suite = ElementTree.parse(workspace / "gate.xml").getroot().find("testsuite")
        assert (workspace / "summary.md").read_text() == summary
        assert codes[next(name for name in codes if "history store" in name and name != gate)] == 0, codes
        if night < 3:
            assert codes[run] == codes[gate] == 0, (night, codes)
            assert summary.startswith(f"**ccbench gate: building the baseline**: {night} of 3 runs"), summary
            assert suite.get("skipped") == suite.get("tests") == "2"
        else:
            # the run lost the command's case (exit 1); the gate judged it: failed, the case named with why
            assert codes[run] == 1 and codes[gate] == 1, codes
            # (prime judged beside it: a noisy night may make it a regression too)
            assert re.match(r"\*\*ccbench gate: failed\*\*: (1 regression, )?1 case lost", summary), summary
            assert f"Lost: {lost}." in summary, summary
            assert suite.get("skipped") == "0" and suite.get("tests") == "2"
            probe = next(c for c in suite.iter("testcase") if c.get("name") == "probe wall_time on no TEE / disk")
            assert probe.find("failure").get("type") == "lost"
    shown = subprocess.run([sys.executable, "-m", "ccbench", "history", "show", "--store", str(store), "--json"],
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    runs = {json.loads(line)["workload"]: len(json.loads(line)["runs"]) for line in shown.stdout.splitlines()}
    # every night reached the store, the failed one too (with what it measured: prime)
    assert runs["prime"] == 4 and runs["probe"] == 3, runs


def test_the_exit_codes_the_page_gives_are_the_gates():
    """docs/ci.md's verdicts and ccbench gate --help name the same codes, 0, 1, 2 and 3, each in the one
    table of exit codes (tests/test_exit_codes.py); 75 is not the gate's: a --confirm run that cannot
    start leaves its cases failing (exit 1)."""
    from click.testing import CliRunner

    from ccbench.basics.errors import EXIT_CODES
    from ccbench.commands.gate import command

    text = CI_DOC.read_text()
    verdicts = set(re.findall(r"^- (?:\*\*[a-z ]+\*\*|no verdict), exit (\d+)", text, flags=re.M))
    assert verdicts == {"0", "1", "2", "3"}, verdicts
    assert verdicts <= {code for code, _ in EXIT_CODES}
    help_text = " ".join(CliRunner().invoke(command, ["--help"]).output.split())
    for words in ("exit 0 passed", "1 failed", "2 bad input", "3 a bundle that does not verify"):
        assert words in help_text, (words, help_text)
    assert "75" not in help_text


def test_the_fresh_machine_check_runs_the_readmes_two_commands_and_refuses_what_it_should(tmp_path):
    """scripts/fresh-check.sh takes its commands from the README (the same two CI's .ci/run matches) and
    refuses, in one line with exit code 2, a directory that exists or an unknown option, before cloning."""
    import subprocess

    root = Path(__file__).parents[1]
    script = root / "scripts" / "fresh-check.sh"
    readme = (root / "README.md").read_text()
    block = re.search(r"## Quickstart.*?```sh\n(.*?)```", readme, flags=re.S).group(1)
    commands = [line for line in block.splitlines() if line.strip()]
    assert len(commands) == 2 and commands[1] in (root / ".ci" / "run").read_text()
    for args, said in (([str(tmp_path)], "exists"), (["--only", "3"], "--only"), (["--bogus"], "unknown option")):
        done = subprocess.run(["bash", str(script), *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and said in done.stderr and len(done.stderr.strip().splitlines()) == 1, done
    assert list(tmp_path.iterdir()) == []
