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
