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


def test_cleanup_refuses_a_work_directory_that_does_not_exist_in_one_line(tmp_path, ccbench):
    """issue 59, item 7: a mistyped --workdir was "cleaned" with exit 0; now it is bad input."""
    done = ccbench("cleanup", "--workdir", tmp_path / "no-such-work")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("ccbench: error: --workdir ") and done.stderr.count("\n") == 1, done.stderr
    assert "no-such-work" in done.stderr and "Traceback" not in done.stderr


def test_a_work_directory_held_by_another_run_is_busy_not_bad_input(tmp_path, ccbench):
    """issue 59, item 10: another run's work directory is exit 75 (busy: try again), not 2 (bad input),
    for run and for cleanup alike, in one line."""
    import fcntl

    work = tmp_path / "work"
    work.mkdir()
    with open(work / ".lock", "w") as held:  # what a live run holds
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        plan = tmp_path / "plan.toml"
        plan.write_text('name = "t"\n[defaults]\nrepetitions = 1\n[[workloads]]\nkind = "command"\ncommand = "true"\n')
        for args in (["run", plan, "--out", tmp_path / "out", "--workdir", work], ["cleanup", "--workdir", work]):
            done = ccbench(*args)
            assert done.returncode == 75, (args, done.stdout, done.stderr)
            errors = [line for line in done.stderr.splitlines() if line.startswith("ccbench: error:")]
            assert len(errors) == 1 and "another ccbench run is using the work directory" in errors[0], done.stderr
            assert "Traceback" not in done.stderr


def test_an_interrupted_runs_resume_line_keeps_its_work_directory(tmp_path):
    """issue 59, item 10: "Resume with: ccbench run --resume <bundle>" dropped the --workdir given, so
    the resumed run would clean up and look for what the run left in another work directory."""
    import shlex
    import signal

    from conftest import start_run, wait_for_samples

    plan = tmp_path / "plan.toml"
    plan.write_text(
        'name = "t"\n[defaults]\nrepetitions = 50\nwarmup = 0\ncooldown = 0\n'
        '[[workloads]]\nkind = "command"\ncommand = "sleep 0.2"\n'
    )
    work, out = tmp_path / "my [work]", tmp_path / "out"  # a space and brackets (no markup) kept
    process = start_run(plan, out, work)
    bundle = wait_for_samples(out, 1)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stdout + stderr
    line = next(line for line in (stdout + stderr).splitlines() if "Resume with:" in line)
    command = shlex.split(line.split("Resume with:", 1)[1])
    assert command == ["ccbench", "run", "--resume", str(bundle), "--workdir", str(work)], line
    assert line == f"interrupted. Resume with: {shlex.join(command)}", line  # one space between words


@pytest.mark.parametrize(
    ("argv", "said", "usage"),
    [
        (["gate"], "missing argument 'NEW...'", "ccbench gate [OPTIONS] NEW..."),
        (["history", "add"], "missing argument 'BUNDLE...'", "ccbench history add [OPTIONS] BUNDLE..."),
        # an option's error carries no command from click's parser: found from the arguments
        (["compare", "--baseline"], "option '--baseline' requires an argument", "ccbench compare [OPTIONS] BUNDLES..."),
        (["no-such-command"], "no such command 'no-such-command'", "ccbench [OPTIONS] COMMAND [ARGS]..."),
    ],
)
def test_a_usage_error_is_one_line_naming_the_commands_usage_and_help(capsys, argv, said, usage):
    from ccbench.cli import main

    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    captured = capsys.readouterr()
    command = usage.split(" [")[0]
    assert captured.err == f"ccbench: error: {said} (usage: {usage}; see '{command} --help')\n", captured.err
    assert captured.out == ""


#: bad input across subcommands (click's usage errors, ccbench's own, a cloud study's refusal), with
#: {tmp} for the test's directory; a word of the one-line error
PREFIX_CASES = [
    (["gate", "{tmp}", "--bogus"], "--bogus"),
    (["gate", "{tmp}/none", "--against", "{tmp}/none"], "none"),
    (["gate", "{tmp}", "--against", "{tmp}", "--threshold", "0.05"], "--threshold"),
    (["history", "add"], "BUNDLE"),
    (["compare"], "BUNDLE"),
    (["run", "--repeat", "x"], "--repeat"),
    (["cleanup", "--workdir", "{tmp}/none"], "--workdir"),
    (["machines", "check", "{tmp}/none.toml"], "none.toml"),
    (["machines", "run", "{data}/cloud/gcp-study.toml", "--yes"], "--ssh-from"),
    (["no-such-command"], "no-such-command"),
]


@pytest.mark.parametrize(
    "args, word", PREFIX_CASES, ids=[" ".join(a[:2]) + f" {i}" for i, (a, _) in enumerate(PREFIX_CASES)]
)
def test_every_error_line_has_the_one_prefix(tmp_path, capsys, args, word):
    """issue 59: one error form, `ccbench: error: ...`, for every command (machines and cloud said
    "ccbench machines:" and "ccbench cloud:", click's usage errors "Error:" under a usage block)."""
    from pathlib import Path

    from conftest import ccbench_in_process

    data = Path(__file__).parent / "data"
    argv = [a.format(tmp=tmp_path, data=data) for a in args]
    code, out, err = ccbench_in_process(capsys, *argv)
    assert code == 2, (argv, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ccbench: error: ") and word in lines[0], (argv, err)


def test_show_of_a_directory_of_bundles_names_them_and_the_command_that_shows_one(tmp_path, ccbench):
    """On the old code: "DIR/manifest.json: missing manifest; is DIR a ccbench bundle?" for the directory
    compare takes."""
    from bundles import write_bundle

    paths = [write_bundle(tmp_path, host, "none", {(): [1.0, 1.1, 1.05]}) for host in ("a", "b")]
    done = ccbench("show", tmp_path)
    line = done.stderr.strip()
    assert done.returncode == 2 and line.count("\n") == 0 and "Traceback" not in line, done.stderr
    assert line.startswith(f"ccbench: error: {tmp_path} holds 2 bundles ("), line
    assert all(path.name in line for path in paths) and f"ccbench show {sorted(paths)[0]}" in line, line
    assert "missing manifest" not in line
    assert ccbench("show", sorted(paths)[0]).returncode == 0


def test_a_report_named_for_a_format_it_does_not_write_is_one_line_and_nothing_written(tmp_path, capsys):
    """On the old code `report -o r.pdf` wrote HTML into r.pdf without a word."""
    from bundles import write_bundle
    from conftest import ccbench_in_process

    bundles = [
        write_bundle(tmp_path, host, tee, {(): [v, v * 1.1, v * 1.05]})
        for host, tee, v in (("a", "none", 1.0), ("b", "sev-snp", 2.0))
    ]
    for name in ("r.pdf", "r.txt", "r.html.gz"):
        out = tmp_path / name
        code, stdout, err = ccbench_in_process(capsys, "report", *bundles, "-o", out, "--figures", tmp_path / "figs")
        assert code == 2 and stdout == "", err
        [line] = err.splitlines()
        assert line.startswith(f"ccbench: error: -o {out}: ccbench report writes HTML or Markdown, not ."), line
        assert ".html" in line and ".md" in line and "--format" in line, line
        assert not out.exists() and not (tmp_path / "figs").exists()
    # --format says what to write, whatever the name
    code, _, err = ccbench_in_process(capsys, "report", *bundles, "-o", tmp_path / "r.txt", "--format", "md", "-j", "1")
    assert code == 0 and (tmp_path / "r.txt").read_text().startswith("# "), err
