"""Shared test scaffolding: the real CLI in a subprocess, inline plan files, and the pieces of the
interruption tests (start a run in the background, wait until it has done something, find its bundle)."""

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
#: [defaults] of the inline plans: fast, no warmup, no cooldown
FAST_DEFAULTS = "repetitions = 2\nwarmup = 0\ncooldown = 0\ntimeout = 60\n"


def run_ccbench(*args, cwd=None, timeout=600, env=None):
    """Run the real CLI in a subprocess, as a user would."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "ccbench", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env=full_env)


def start_run(plan, out, workdir, *extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE) -> subprocess.Popen:
    """``ccbench run PLAN`` in the background (to be interrupted by the test)."""
    return subprocess.Popen([sys.executable, "-m", "ccbench", "run", str(plan), "--out", str(out),
                             "--workdir", str(workdir), *map(str, extra)], stdout=stdout, stderr=stderr, text=True)


def wait_until(condition: Callable[[], object], timeout: float = 60, what: str = "the condition") -> object:
    """Poll ``condition`` until it returns something true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout:g} s")


def wait_for_samples(bundle_parent: Path, count: int, timeout: float = 60) -> Path:
    """The bundle under ``bundle_parent`` once it holds ``count`` sample lines."""
    def ready():
        for samples in bundle_parent.glob("*/samples.jsonl"):
            if len(samples.read_text().splitlines()) >= count:
                return samples.parent
        return None

    return wait_until(ready, timeout, f"{count} samples in a bundle under {bundle_parent}")


def only_bundle(out: Path) -> Path:
    bundles = [p for p in Path(out).iterdir() if (p / "manifest.json").exists()]
    assert len(bundles) == 1, bundles
    return bundles[0]


def mounts_under(path: Path) -> list[str]:
    return [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if line.split()[4].startswith(str(path))]


@pytest.fixture
def ccbench():
    return run_ccbench


@pytest.fixture
def workdir(tmp_path):
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def write_plan(tmp_path):
    """write_plan(body, defaults=FAST_DEFAULTS, name="t", top="") -> the path of an inline TOML plan:
    ``top`` goes before [defaults] is closed (e.g. a [storage] table after it), ``body`` holds the
    [[workloads]] tables."""
    def write(body: str, defaults: str = FAST_DEFAULTS, name: str = "t", top: str = "",
              filename: str = "plan.toml") -> Path:
        path = tmp_path / filename
        path.write_text(f'name = "{name}"\n[defaults]\n{defaults}\n{top}\n{body}')
        return path

    return write
