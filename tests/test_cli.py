import pytest


@pytest.mark.parametrize("command", ["run", "plans", "env", "show"])
def test_every_command_has_help(ccbench, command):
    done = ccbench(command, "--help")
    assert done.returncode == 0 and "Usage:" in done.stdout


def test_plans_lists_bundled_plans(ccbench):
    done = ccbench("plans")
    assert done.returncode == 0
    names = [line.split()[0] for line in done.stdout.splitlines()]
    assert "quick" in names and "standard" in names


#: what -> (the arguments of ``ccbench run``, with {tmp} for the test's directory, which holds
#: ``a-file`` and ``a-dir``; a word of the one-line error)
BAD_INPUTS = {
    "output under /proc": (["quick", "--out", "/proc/x"], "cannot create the result bundle"),
    "output that is a file": (["quick", "--out", "{tmp}/a-file"], "cannot create the result bundle"),
    "output under a file": (["quick", "--out", "{tmp}/a-file/sub"], "cannot create the result bundle"),
    "missing plan": (["{tmp}/missing.toml"], "missing.toml"),
    "missing resume bundle": (["--resume", "{tmp}/no-bundle"], "no-bundle"),
    "resume bundle that is a file": (["--resume", "{tmp}/a-file"], "a-file"),
    "missing storage path": (["quick", "--storage-path", "disk={tmp}/none"], "no such directory"),
    "unknown storage variant": (["quick", "--storage-path", "floppy={tmp}/a-dir"], "floppy"),
    "missing notebook": (["--notebook", "{tmp}/none.ipynb"], "none.ipynb"),
    "notebook that is a directory": (["--notebook", "{tmp}/a-dir"], "a-dir"),
    "work directory under a file": (["quick", "--workdir", "{tmp}/a-file/work"], "work directory"),
    "work directory that is a file": (["quick", "--workdir", "{tmp}/a-file"], "work directory"),
    "CPUs that are not there": (["quick", "--pin", "999"], "not available"),
}


@pytest.mark.parametrize("what", BAD_INPUTS)
def test_bad_input_is_one_line_before_anything_else_is_printed(tmp_path, ccbench, what):
    (tmp_path / "a-file").write_text("")
    (tmp_path / "a-dir").mkdir()
    arguments, word = BAD_INPUTS[what]
    arguments = [argument.format(tmp=tmp_path) for argument in arguments]
    if "--out" not in arguments:
        arguments += ["--out", str(tmp_path / "out")]
    if "--workdir" not in arguments:
        arguments += ["--workdir", str(tmp_path / "work")]
    done = ccbench("run", *arguments)
    assert done.returncode == 2, (what, done.stdout, done.stderr)
    assert word in done.stderr and done.stderr.count("\n") == 1, (what, done.stderr)
    assert "Traceback" not in done.stderr
    assert "system check" not in done.stdout + done.stderr, what
    assert done.stdout.strip() == "", what
    assert not (tmp_path / "out").exists(), what
