"""The Go application tier's own unit tests (services/socialnet/*_test.go: request routing and handlers
without stores, the seeded dataset), run by `go test` so that the Python suite and CI cover them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SERVICE = Path(__file__).resolve().parents[1] / "services" / "socialnet"


def _go() -> str | None:
    # the set-up installs Go under /usr/local/go when the machine has none on PATH
    return shutil.which("go") or shutil.which("go", path="/usr/local/go/bin")


@pytest.mark.skipif(_go() is None, reason="go is not installed (set-up component microservices)")
def test_go_unit_tests_of_the_application_tier_pass():
    # -mod=readonly: the module cache the set-up filled is used; nothing is written to go.mod or go.sum
    env = {**os.environ, "GOFLAGS": "-mod=readonly"}
    done = subprocess.run(
        [_go(), "test", "-count=1", "./..."], cwd=SERVICE, capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok  \tccbench/socialnet" in done.stdout
