"""docs/machines.md's walkthrough stays true: its study and plan files load as written, and what it
shows `ccbench machines check` print for them is what the command prints."""

from pathlib import Path

from conftest import run_ccbench

from ccbench.machines.studyfile import load_study
from ccbench.planning.plan import load_plan

DOC = Path(__file__).parents[1] / "docs" / "machines.md"


def _blocks(kind: str) -> list[str]:
    """The fenced blocks of one info string ("" for none), fences paired in order."""
    blocks, current, info = [], None, None
    for line in DOC.read_text().splitlines():
        if line.startswith("```"):
            if current is None:
                current, info = [], line[3:].strip()
            else:
                if info == kind:
                    blocks.append("\n".join(current) + "\n")
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def _first_study(tmp_path: Path) -> Path:
    files = {block.splitlines()[0].lstrip("# ").strip(): block for block in _blocks("toml")}
    for name in ("study.toml", "tiny.toml"):
        (tmp_path / name).write_text(files[name])
    return tmp_path / "study.toml"


def test_the_first_studys_files_load_as_the_walkthrough_writes_them(tmp_path):
    study = load_study(_first_study(tmp_path))
    assert [arm.name for arm in study.arms] == ["plain", "plain+bounce"] and study.baseline == "plain"
    assert load_plan(str(tmp_path / "tiny.toml")).name == "tiny-disk"
    (cvm,) = [block for block in _blocks("toml") if 'name = "snp-breakdown"' in block]
    (tmp_path / "cvm.toml").write_text(cvm)
    assert [arm.kind for arm in load_study(tmp_path / "cvm.toml").arms] == ["plain", "plain", "sev-snp", "sev-snp"]


def test_the_arms_lines_the_walkthrough_shows_are_what_machines_check_prints(tmp_path):
    done = run_ccbench("machines", "check", _first_study(tmp_path))
    assert done.returncode in (0, 2), done.stderr
    shown = next(block for block in _blocks("") if block.startswith("study bounce:"))
    arms = [line for line in shown.splitlines() if line.startswith("  ")]
    assert arms and all(line in done.stdout.splitlines() for line in arms), (arms, done.stdout)


def test_the_launch_time_study_loads_as_section_12_writes_it(tmp_path):
    (block,) = [block for block in _blocks("toml") if 'name = "launch-memory"' in block]
    (tmp_path / "launch.toml").write_text(block)
    study = load_study(tmp_path / "launch.toml")
    assert study.rounds == 0 and study.sweep.memory_mib == (512, 2048) and study.sweep.launches == 2
