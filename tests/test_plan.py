import pytest

from ccbench.errors import PlanError
from ccbench.plan import load_plan


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_toml_plan_with_defaults_and_overrides(tmp_path):
    path = write(tmp_path, "p.toml", """
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
""")
    plan = load_plan(str(path))
    assert plan.name == "t"
    prime, fio = plan.workloads
    assert (prime.name, prime.repetitions, prime.warmup, prime.cooldown, prime.timeout) == ("prime", 4, 1, 0.5, 30)
    assert prime.params == {"n": 1000}
    assert fio.repetitions == 2 and fio.params["blocksizes"] == ["4k"] and fio.params["patterns"] == ["randrw"]
    # fio honours the storage axis: with none listed it runs on plain disk, and says so
    assert fio.variants == {"storage": ["disk"]}
    assert prime.variants == {}


@pytest.mark.parametrize("text, message", [
    ("name = \n", "TOML syntax error"),
    ("[[workloads]]\nkind = \"nope\"\n", "unknown workload kind 'nope'"),
    ("[[workloads]]\nkind = \"prime\"\nnumber = 3\n", "unknown parameter 'number'"),
    ("[[workloads]]\nkind = \"prime\"\nn = \"many\"\n", "'n'"),
    ("[[workloads]]\nkind = \"fio\"\npatterns = [\"sideways\"]\n", "patterns"),
    ("colour = 1\n[[workloads]]\nkind = \"prime\"\n", "unknown top-level key(s) colour"),
    ("[defaults]\nrepetition = 2\n[[workloads]]\nkind = \"prime\"\n", "unknown parameter 'repetition'"),
    ("[[workloads]]\nkind = \"prime\"\nvariants = { storage = [\"disk\"] }\n", "does not use the storage axis"),
    ("[[workloads]]\nkind = \"fio\"\nvariants = { storage = [\"floppy\"] }\n", "unknown storage variant 'floppy'"),
    ("[[workloads]]\nkind = \"prime\"\n[[workloads]]\nkind = \"prime\"\n", "used twice: prime"),
    ("name = \"x\"\n", "lists no workloads"),
])
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
    with pytest.raises(PlanError, match="no such plan file, and not a bundled plan"):
        load_plan("/nonexistent/plan.toml")


def test_bundled_quick_plan_loads():
    plan = load_plan("quick")
    assert [w.kind for w in plan.workloads] == ["systeminfo", "prime", "fio"]


def test_select_and_repeat():
    plan = load_plan("quick").select(["prime"]).with_repetitions(7)
    assert [(w.name, w.repetitions) for w in plan.workloads] == [("prime", 7)]
    with pytest.raises(PlanError, match="no such workload"):
        load_plan("quick").select(["nothing"])
