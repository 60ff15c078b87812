import pytest
from conftest import run_ccbench

from ccbench.basics.errors import PlanError
from ccbench.planning.plan import load_plan


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_toml_plan_with_defaults_and_overrides(tmp_path):
    path = write(
        tmp_path,
        "p.toml",
        """
name = "t"
description = "a test plan"
[defaults]
repetitions = 4
warmup = 1
cooldown = 0.5
timeout = 30
[[workloads]]
kind = "prime"
n = 1000
[[workloads]]
kind = "fio"
name = "fio-small"
repetitions = 2
blocksizes = ["4k"]
patterns = ["randrw"]
""",
    )
    plan = load_plan(str(path))
    assert plan.name == "t"
    prime, fio = plan.workloads
    assert (prime.name, prime.repetitions, prime.warmup, prime.cooldown, prime.timeout) == ("prime", 4, 1, 0.5, 30)
    assert prime.params == {"n": 1000}
    assert fio.repetitions == 2 and fio.params["blocksizes"] == ["4k"] and fio.params["patterns"] == ["randrw"]
    # fio honours the storage axis: with none listed it runs on plain disk, and says so
    assert fio.variants == {"storage": ["disk"]}
    assert prime.variants == {}


@pytest.mark.parametrize(
    "text, message",
    [
        ("name = \n", "TOML syntax error"),
        ('[[workloads]]\nkind = "nope"\n', "unknown workload kind 'nope'"),
        ('[[workloads]]\nkind = "prime"\nnumber = 3\n', "unknown parameter 'number'"),
        ('[[workloads]]\nkind = "prime"\nn = "many"\n', "'n'"),
        ('[[workloads]]\nkind = "fio"\npatterns = ["sideways"]\n', "patterns"),
        ('colour = 1\n[[workloads]]\nkind = "prime"\n', "unknown top-level key(s) colour"),
        ('[defaults]\nrepetition = 2\n[[workloads]]\nkind = "prime"\n', "unknown parameter 'repetition'"),
        ('[[workloads]]\nkind = "prime"\nvariants = { storage = ["disk"] }\n', "does not use the storage axis"),
        ('[[workloads]]\nkind = "fio"\nvariants = { storage = ["floppy"] }\n', "unknown storage variant 'floppy'"),
        ('[[workloads]]\nkind = "prime"\n[[workloads]]\nkind = "prime"\n', "used twice: prime"),
        ('name = "x"\n', "lists no workloads"),
    ],
)
def test_toml_errors_name_the_problem(tmp_path, text, message):
    path = write(tmp_path, "bad.toml", text)
    with pytest.raises(PlanError) as info:
        load_plan(str(path))
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_seed_csv_standard_plan_maps_every_line():
    plan = load_plan("standard")
    names = [w.name for w in plan.workloads]
    assert names[0] == "systeminfo"
    fio = {w.name: w for w in plan.workloads if w.kind == "fio"}
    assert len(fio) == 12
    assert fio["fio_4k_randomwrite"].params["blocksizes"] == ["4k"]
    assert fio["fio_4k_randomwrite"].params["patterns"] == ["randwrite"]
    assert fio["fio_1m_sequentialread"].params["patterns"] == ["read"]
    assert fio["fio_64k_sequentialread"].cooldown == 10 and fio["fio_64k_sequentialread"].repetitions == 1
    prime = next(w for w in plan.workloads if "SimplePrime" in w.name)
    assert prime.kind == "notebook" and prime.repetitions == 5 and prime.cooldown == 20
    pyperf = plan.workloads[-1]
    assert pyperf.kind == "pyperformance"
    # kinds this build cannot run are listed with a reason, never dropped
    assert len(plan.workloads) == 25
    for spec in plan.workloads:
        assert spec.skip_reason is None or "not built" in spec.skip_reason or "cannot be loaded" in spec.skip_reason


def test_csv_comments_blank_lines_and_unknown_benchmarks(tmp_path):
    path = write(tmp_path, "plan.csv", "# header\n\nsysteminfo,standard,,5,1\nmystery_tool,standard,,1,2\n")
    plan = load_plan(str(path))
    assert [w.kind for w in plan.workloads] == ["systeminfo", "mystery_tool"]
    assert "not a benchmark ccbench knows (line 4)" in plan.workloads[1].skip_reason


def test_csv_wrong_field_count_names_file_and_line(tmp_path):
    path = write(tmp_path, "plan.csv", "systeminfo,standard,,5,1\nairline-delay-notebook.ipynb,...,20,1\n")
    with pytest.raises(PlanError) as info:
        load_plan(str(path))
    assert f"{path}:2" in str(info.value) and "expected 5" in str(info.value) and "found 4" in str(info.value)


def test_csv_bad_numbers(tmp_path):
    path = write(tmp_path, "plan.csv", "systeminfo,standard,,soon,1\n")
    with pytest.raises(PlanError, match=r"plan.csv:1: waittime_in_seconds"):
        load_plan(str(path))


def test_missing_plan_is_an_error():
    with pytest.raises(PlanError, match="no such plan file, and not a bundled plan") as refused:
        load_plan("/nonexistent/plan.toml")
    assert "did you mean" not in str(refused.value)
    # a bundled plan's name mistyped: the nearest one named
    with pytest.raises(PlanError, match="did you mean 'quick'"):
        load_plan("quik")


def test_bundled_quick_plan_loads():
    plan = load_plan("quick")
    assert [w.kind for w in plan.workloads] == ["systeminfo", "prime", "fio", "fio"]
    assert [w.name for w in plan.workloads][2:] == ["fio", "fio-cold"]


def test_select_and_repeat():
    plan = load_plan("quick").select(["prime"]).with_repetitions(7)
    assert [(w.name, w.repetitions) for w in plan.workloads] == [("prime", 7)]
    with pytest.raises(PlanError, match="no such workload"):
        load_plan("quick").select(["nothing"])


def test_precision_keys_in_defaults_and_per_workload(tmp_path):
    path = write(
        tmp_path,
        "p.toml",
        """
[defaults]
repetitions = 3
precision = "2%"
max_time = "1h30m"
[contention]
others_cpus = 0.5
steal_fraction = 0.1
[[workloads]]
kind = "prime"
max_repetitions = 12
[[workloads]]
kind = "command"
command = "true"
precision = 0.05
max_time = 90
""",
    )
    plan = load_plan(str(path))
    prime, command = plan.workloads
    assert (prime.precision, prime.max_repetitions, prime.max_time) == (0.02, 12, 5400.0)
    assert (command.precision, command.max_repetitions, command.max_time) == (0.05, None, 90.0)
    assert plan.contention == {"others_cpus": 0.5, "steal_fraction": 0.1}
    assert plan.with_precision("3%").workloads[1].precision == 0.03
    # without the keys: a fixed count, as before
    plain = load_plan("quick")
    assert all(w.precision is None and w.max_repetitions is None for w in plain.workloads)


@pytest.mark.parametrize(
    "text, message",
    [
        ('[defaults]\nprecision = "tight"\n', "[defaults]: 'precision': Value error, precision 'tight'"),
        ('[defaults]\nprecision = "100%"\n', "must be above 0% and below 100%"),
        ("[defaults]\nprecision = -1\n", "precision"),
        ('[defaults]\nmax_time = "soon"\n', "'max_time'"),
        ("[defaults]\nmax_time = 0\n", "must be positive"),
        ("[defaults]\nmax_repetitions = 0\n", "'max_repetitions'"),
        ("[defaults]\nrepetitions = 5\nmax_repetitions = 3\n", "max_repetitions (3) is below repetitions (5)"),
        ("[contention]\nothers_cpu = 1\n", "[contention]: unknown contention threshold(s) others_cpu"),
        ("[contention]\nsteal_fraction = -1\n", "must be a non-negative number"),
        ("contention = 3\n", "[contention] must be a table"),
    ],
)
def test_precision_and_contention_errors_name_the_key(tmp_path, text, message):
    path = write(tmp_path, "bad.toml", text + '[[workloads]]\nkind = "prime"\n')
    with pytest.raises(PlanError) as info:
        load_plan(str(path))
    assert message in str(info.value) and "bad.toml" in str(info.value)


def test_precision_errors_per_workload_name_the_workload(tmp_path):
    path = write(tmp_path, "bad.toml", '[[workloads]]\nkind = "prime"\nprecision = "2 percent"\n')
    with pytest.raises(PlanError, match=r"workloads\[1\] \(prime\): 'precision'"):
        load_plan(str(path))


def test_a_mistyped_key_gets_the_key_it_is_closest_to(tmp_path):
    """`repetitons` in a workload, `workload` for `workloads`, `blocksize` for fio's `blocksizes`."""
    for text, expected in (
        (
            '[[workloads]]\nkind = "prime"\nrepetitons = 3\n',
            "unknown parameter 'repetitons' (did you mean 'repetitions'?)",
        ),
        ('[[workload]]\nkind = "prime"\n', "unknown top-level key(s) workload (did you mean 'workloads'?)"),
        ('[defaults]\nwarmpu = 1\n[[workloads]]\nkind = "prime"\n', "(did you mean 'warmup'?)"),
    ):
        path = tmp_path / "plan.toml"
        path.write_text(text)
        with pytest.raises(PlanError) as raised:
            load_plan(str(path))
        assert expected in str(raised.value)


def test_run_quick_beside_a_quick_folder_runs_the_bundled_plan_and_says_so(tmp_path):
    """A ./quick folder (a run's output, say) is not a plan: `ccbench run quick` runs the bundled one."""
    (tmp_path / "quick").mkdir()
    done = run_ccbench(
        "run", "quick", "--only", "prime", "--repeat", "1", "--out", "out", "--workdir", "work", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "is a directory" not in done.stderr
    assert f"the bundled plan 'quick' ({tmp_path / 'quick'} is a directory, not a plan file)" in done.stdout
    assert [p for p in (tmp_path / "out").iterdir() if (p / "manifest.json").exists()]


def test_a_file_named_like_a_bundled_plan_is_run_and_says_it_is_not_the_bundled_one(tmp_path):
    """A file ./quick of the user's own wins over the bundled plan of that name, and the run says so
    (the trial's user ran their own 'quick' and read it as the bundled plan's results)."""
    (tmp_path / "quick").write_text(
        'name = "mine"\n[defaults]\nrepetitions = 1\nwarmup = 0\ncooldown = 0\n[[workloads]]\nkind = "prime"\n'
    )
    done = run_ccbench("run", "quick", "--out", "out", "--workdir", "work", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"plan: the file {tmp_path / 'quick'}, not the bundled plan 'quick' (that one: ccbench run " in done.stdout
    assert "ccbench/plans/quick.toml)" in done.stdout
