"""The report's notebook section over two real runs of a bundled notebook."""

import subprocess
import sys

import pytest

pytest.importorskip(
    "nbclient", reason="the datascience component is not installed: run 'bash scripts/setup.sh --with datascience'"
)

PLAN = """
name = "nb-report"
[defaults]
repetitions = 3
cooldown = 0
[[workloads]]
kind = "notebook"
name = "simple_prime"
notebook = "simple_prime"
size = "quick"
"""


def test_notebook_section_side_by_side_and_cells(tmp_path, ccbench):
    (tmp_path / "plan.toml").write_text(PLAN)
    bundles = []
    for name in ("a", "b"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ccbench",
                "run",
                str(tmp_path / "plan.toml"),
                "--out",
                str(tmp_path / name),
                "--workdir",
                str(tmp_path / "work"),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        bundles.append(next(p for p in (tmp_path / name).iterdir() if (p / "manifest.json").exists()))
    out = tmp_path / "report.md"
    done = ccbench("report", *bundles, "--label", f"{bundles[1]}=rerun", "-o", out)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    section = text.split("## Notebooks", 1)[1].split("\n## ", 1)[0]
    assert "| simple_prime |" in section
    assert "rerun / no TEE / disk (s)" in section
    assert "the cells that changed most" in section
    # cells are named by index and first line
    assert any(line.startswith("| simple_prime | ") and ": " in line.split("|")[2] for line in section.splitlines())
