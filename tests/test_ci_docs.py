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
