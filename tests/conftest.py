import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run_ccbench(*args, cwd=None, timeout=600, env=None):
    """Run the real CLI in a subprocess, as a user would."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "ccbench", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env=full_env)


@pytest.fixture
def ccbench():
    return run_ccbench


@pytest.fixture
def workdir(tmp_path):
    path = tmp_path / "work"
    path.mkdir()
    return path
