"""The README's examples are the real output of the commands they show: each sh block followed by a
text block is run as written (from a directory where the repository's tests/ is at hand), and its
last command's output has the example's lines: the same lines and labels, numbers free to differ.
The quick run's example takes minutes and is checked against a real run in test_quick.py."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO

#: an sh block, then (blank lines apart) the text block of what its last command printed
EXAMPLE = re.compile(r"```sh\n(?P<commands>(?:(?!```).)*?)```\s*```text\n(?P<output>.*?)```", re.S)
#: examples checked elsewhere (a run of minutes): test_quick.py
ELSEWHERE = ("run quick", "scripts/setup.sh")


def readme_examples() -> list[tuple[list[str], str]]:
    text = (REPO / "README.md").read_text()
    found = []
    for match in EXAMPLE.finditer(text):
        commands = [line for line in match.group("commands").splitlines() if line.strip()]
        if not any(marker in line for line in commands for marker in ELSEWHERE):
            found.append((commands, match.group("output")))
    return found


def shape(output: str) -> list[str]:
    """The lines, each with its numbers masked (a figure may differ from one version to the next)."""
    return [re.sub(r"\d[\d,.]*", "N", line.rstrip()) for line in output.splitlines() if line.strip()]


def test_every_readme_example_prints_what_the_readme_shows(tmp_path):
    examples = readme_examples()
    assert examples, "README.md: no example (an sh block followed by its output in a text block)"
    (tmp_path / "tests").symlink_to(REPO / "tests")
    for commands, shown in examples:
        assert all(line.startswith(".venv/bin/ccbench ") for line in commands), commands
        for line in commands:
            command = line.replace(".venv/bin/ccbench", f"{sys.executable} -m ccbench", 1)
            done = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, f"{line}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        assert shape(done.stdout) == shape(shown), "\n".join(["README:", shown, "real:", done.stdout])


def test_the_plans_table_and_ccbench_plans_give_each_plans_own_time():
    """One source for a plan's time: its own `time` key. `ccbench plans` prints it, and the README's
    plans table starts its time column with it ("not measured" where the plan declares none)."""
    from conftest import run_ccbench

    from ccbench.planning.plan import bundled_plans, load_plan

    text = (REPO / "README.md").read_text()
    table = text[text.index("## Plans") :]
    rows = dict(re.findall(r"^\| `([\w-]+)` \|[^|\n]*\| ([^|\n]*) \|$", table, re.M))
    listed: list[str] = []
    for line in run_ccbench("plans").stdout.splitlines():  # each plan's wrapped line read whole
        if listed and line.startswith(" ") and line.strip():
            listed[-1] += " " + line.strip()
        else:
            listed.append(line)
    for name in bundled_plans():
        time = load_plan(name).time
        assert name in rows, f"README.md: no row for the plan {name!r}"
        if time:
            assert rows[name].startswith(time), (name, time, rows[name])
            (line,) = [line for line in listed if line.split()[0] == name]
            assert f"({time} as written" in line, line
        else:
            assert rows[name].startswith("not measured"), (name, rows[name])


#: the most words a README table cell may hold: a cell is read at a glance, details go to the docs
CELL_WORDS = 60


def test_every_exit_code_a_commands_help_names_is_in_the_readme():
    """`compare --help` says a bundle that fails its digests is refused with exit 3, `verify --help`
    gives 5: the README's exit codes, where a user looks them up, name every one."""
    from conftest import run_ccbench

    text = (REPO / "README.md").read_text()
    codes = text[text.index("Exit codes, the same for every command") : text.index("## Plans")]
    named = set()
    for command in ("run", "compare", "report", "gate", "export", "history", "verify", "import", "machines"):
        shown = " ".join(run_ccbench(command, "--help").stdout.split())
        named |= {a or b for a, b in re.findall(r"[Ee]xit (?:code:? )?(\d+)|\(exit (\d+)\)", shown)}
    assert {"3", "5"} <= named
    missing = sorted(code for code in named if not re.search(rf"\b{code}\b", codes))
    assert not missing, f"README.md's exit codes do not name {missing}"


def test_no_readme_table_cell_is_a_paragraph():
    for number, line in enumerate((REPO / "README.md").read_text().splitlines(), start=1):
        if line.startswith("|"):
            for cell in line.strip().strip("|").split("|"):
                assert len(cell.split()) <= CELL_WORDS, f"README.md:{number}: a cell of {len(cell.split())} words"


def test_every_statistic_the_readme_examples_print_is_a_word_the_readme_explains():
    """A statistic's name in an example's output (I2, MDE, ...; the names ccbench.basics.wrap keeps
    with their values) has its row in the README's words table, in plain words."""
    from ccbench.basics.wrap import _STAT

    text = (REPO / "README.md").read_text()
    printed = set()
    for block in re.findall(r"```text\n(.*?)```", text, re.S):
        printed |= {word for word in re.findall(r"[A-Za-z0-9²]+", block) if len(word) > 1 and _STAT.match(word)}
    assert "I2" in printed  # the quick run's example: "(sizes differ: I2 64%)"
    explained = set(re.findall(r"^\| \*\*([^*]+)\*\* \|", text, re.M))
    assert printed <= explained, f"README.md's words table does not explain {sorted(printed - explained)}"
