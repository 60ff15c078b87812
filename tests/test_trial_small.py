"""Small frictions a user trial found (issue "One answer everywhere"): each failed on main before."""

from __future__ import annotations

from conftest import run_ccbench


def test_plans_leaves_a_gap_after_the_longest_name():
    done = run_ccbench("plans")
    assert done.returncode == 0
    line = next(line for line in done.stdout.splitlines() if line.startswith("federated-paper"))
    assert line.startswith("federated-paper  seed 001"), line  # it ran into its description


def test_env_on_a_snapshot_says_unknown_never_none_or_this_hosts_name(tmp_path):
    (tmp_path / "proc").mkdir()
    done = run_ccbench("env", "--root", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "None" not in done.stdout
    host = next(line for line in done.stdout.splitlines() if line.startswith("host"))
    assert host.split()[-1] == "unknown", host
    assert "cores and threads unknown" in done.stdout


def test_verify_of_a_directory_that_is_no_bundle_is_bad_input_not_tampering(tmp_path):
    done = run_ccbench("verify", tmp_path)
    assert done.returncode == 2 and "not a ccbench bundle" in done.stderr and done.stderr.count("\n") == 1


def test_export_refuses_a_file_name_it_would_not_write_as_named(tmp_path):
    from conftest import DATA

    imported = run_ccbench(
        "import", "pyperf", DATA / "import" / "pyperf-2.11-python3.11-one-value.json", "--out", tmp_path
    )
    assert imported.returncode == 0, imported.stderr
    done = run_ccbench("export", tmp_path, "-o", tmp_path / "azure.xlsx")
    assert (
        done.returncode == 2 and "Parquet or CSV, not .xlsx" in done.stderr and not (tmp_path / "azure.xlsx").exists()
    )
