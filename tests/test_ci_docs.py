"""docs/ci.md's GitHub Actions and GitLab CI jobs: valid YAML that runs the quick plan, then the gate."""

from __future__ import annotations

import re
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


def test_gitlab_job_runs_the_quick_plan_then_the_gate_and_reports_junit():
    gitlab = next(b for b in _yaml_blocks() if "stages" in b)
    job = gitlab["ccbench-gate"]
    assert job["stage"] in gitlab["stages"]
    _runs_then_gates(job["script"])
    assert any("ccbench run quick" in line for line in job["script"])
    assert job["artifacts"]["reports"]["junit"] == "gate.xml"


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
