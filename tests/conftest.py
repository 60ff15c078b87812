"""Shared test scaffolding: the real CLI in a subprocess, inline plan files, and the pieces of the
interruption tests (start a run in the background, wait until it has done something, find its bundle)."""

import os
import pwd
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

# What the suite assumes about how it was started, stated here rather than inherited from whatever
# started it. A process started by nohup, as a background job of a script or by some CI runners
# inherits SIGINT and SIGHUP ignored, and its children (the ccbench commands the tests start and
# interrupt) would inherit that too; the shell's COLUMNS, locale and umask vary from one user to the
# next. Each test that is about one of these sets it itself.
signal.signal(signal.SIGINT, signal.default_int_handler)  # a child's Python then installs KeyboardInterrupt
signal.signal(signal.SIGHUP, signal.SIG_DFL)
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)  # rich lays out 80 columns where its output is no terminal
os.environ["LC_ALL"] = "C.UTF-8"  # the tools' output (fio, iperf3, ping) with '.' decimals, English words
os.umask(0o022)
os.environ.setdefault("HOME", pwd.getpwuid(os.getuid()).pw_dir)

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
#: [defaults] of the inline plans: fast, no warmup, no cooldown
FAST_DEFAULTS = "repetitions = 2\nwarmup = 0\ncooldown = 0\ntimeout = 60\n"


def run_ccbench(*args, cwd=None, timeout=600, env=None):
    """Run the real CLI in a subprocess, as a user would."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "ccbench", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env=full_env,
    )


def ccbench_in_process(capsys, *args) -> tuple[int, str, str]:
    """The CLI's ``main`` in this process (no interpreter to start: for commands that read bundles or a
    store, not for runs): (exit code, stdout, stderr)."""
    from ccbench.cli import main

    code = 0
    try:
        main([str(a) for a in args])
    except SystemExit as ended:
        code = ended.code if isinstance(ended.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def start_run(plan, out, workdir, *extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE) -> subprocess.Popen:
    """``ccbench run PLAN`` in the background (to be interrupted by the test)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ccbench",
            "run",
            str(plan),
            "--out",
            str(out),
            "--workdir",
            str(workdir),
            *map(str, extra),
        ],
        stdout=stdout,
        stderr=stderr,
        text=True,
    )


#: how long a wait for something that will happen may take before the test fails: generous, because
#: a loaded 2-core machine (the suite beside a CPU hog) is slow, and a wait that succeeds returns at once
PATIENCE_S = 300


def wait_until(condition: Callable[[], object], timeout: float = PATIENCE_S, what: str = "the condition") -> object:
    """Poll ``condition`` until it returns something true; fail the test after ``timeout`` seconds
    (a bound for something that never happens, not a measure of speed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout:g} s")


def wait_for_samples(bundle_parent: Path, count: int, timeout: float = PATIENCE_S) -> Path:
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


def tmpfs_as_cipher(monkeypatch) -> None:
    """Let the variant ``tmpfs`` read as fscrypt, a cipher on a loop file, to settling and compare (a
    scripted run mounts nothing): it is then set against its ``ext4-loop`` twin, the control."""
    import ccbench.analysis.samples.load

    real = ccbench.analysis.samples.load.storage_label
    monkeypatch.setattr(
        ccbench.analysis.samples.load, "storage_label", lambda v: "fscrypt" if v.get("storage") == "tmpfs" else real(v)
    )


def own_path_layer(name: str, directory: Path) -> str:
    """The layer compare names a ``--storage-path NAME=DIR`` variant by: what DIR is on this machine
    ("own path, no protection: tmpfs (own path, plain)" where the tests' directories are on a disk,
    in-memory storage where the temporary directory is a tmpfs), whatever the name."""
    from ccbench.analysis.labels import own_path_label
    from ccbench.analysis.rows.layers import storage_layer
    from ccbench.probe.storage import describe_path

    return storage_layer(own_path_label(name, describe_path(directory)["protection"]))


def mounts_under(path: Path) -> list[str]:
    return [
        line.split()[4]
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
        if line.split()[4].startswith(str(path))
    ]


#: How scripts/test.sh runs the suite: two workers (pytest-xdist, ``-n 2 --dist loadfile``), each test
#: file whole on one worker (its module fixtures made once), the slowest files handed out first so no
#: worker is left alone with a long file at the end, and the other file that boots guests
#: (test_machines_sweep.py) last, so it does not boot its guests beside test_machines_lifecycle.py's (two
#: TCG guests at once on 2 cores each crawl). ``--dist loadgroup`` does not group here: pytest 9 keeps a
#: node's id where xdist 3.8 no longer writes its group into it. The ranks come from a whole run's
#: durations (2026-12-03, two workers: seconds beside other work; a rank, not a promise); a file not named here
#: follows them in its collection order. Tests marked ``alone`` need the machine to themselves (they
#: measure a quiet interval) and run after the others, on one worker (scripts/test.sh's second pass).
SLOWEST_FIRST = (
    "test_machines_lifecycle.py",  # 482 s
    "test_fleet.py",  # 224
    "test_federated.py",  # 220
    "test_history.py",  # 197
    "test_gate.py",  # 120
    "test_microservices.py",  # 112
    "test_notebook.py",  # 112
    "test_quick.py",  # 95
    "test_network_fleet.py",  # 77
    "test_report.py",  # 71
    "test_one_answer.py",  # 59
    "test_runner.py",  # 59
    "test_impact.py",  # 52
    "test_lint.py",  # 45
    "test_fleet_settle.py",  # 43
    "test_interference.py",  # 42
    "test_baselines.py",  # 38
    "test_verdict_semantics.py",  # 36
    "test_ci_docs.py",  # 33
    "test_storage.py",  # 33
    "test_cloud_fleet.py",  # 33
)
LAST = ("test_machines_sweep.py",)  # 22


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """On xdist's workers (``--dist loadfile``): the slowest files first, the guests' second file last.
    (A worker's ``dist`` option reads "no": xdist resets it there; ``workerinput`` names a worker.)"""
    if not hasattr(config, "workerinput"):
        return
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    rank.update({name: len(rank) + 1 + i for i, name in enumerate(LAST)})
    for item in items:
        item.stash[_GROUP_RANK] = rank.get(item.path.name, len(SLOWEST_FIRST))
    items.sort(key=lambda item: item.stash[_GROUP_RANK])  # stable: collection order within a rank


_GROUP_RANK = pytest.StashKey[int]()


@pytest.fixture(autouse=True)
def _own_machine_indexes(tmp_path, monkeypatch):
    """Each test's own machine-wide indexes of topologies and guests (ccbench's runs sweep what a killed
    run left there): a test beside another on the other worker never sees the other's entries, so a
    test that leaves a killed run's topology for its next run to undo finds it still there. A test
    about the default index sets or removes the variable itself."""
    monkeypatch.setenv("CCBENCH_TOPOLOGY_INDEX", str(tmp_path / "topology-index"))
    monkeypatch.setenv("CCBENCH_GUEST_INDEX", str(tmp_path / "guest-index"))


@pytest.fixture(autouse=True, scope="session")
def _no_inherited_width():
    """COLUMNS and LINES unset once more when the session starts: readline, initialised by pytest's own
    plugins after this file ran, exports the terminal's size into the C environment (which os.environ does
    not see, but every child started without env= inherits), and ccbench wraps its lines to COLUMNS."""
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)
        os.unsetenv(name)


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

    def write(
        body: str, defaults: str = FAST_DEFAULTS, name: str = "t", top: str = "", filename: str = "plan.toml"
    ) -> Path:
        path = tmp_path / filename
        path.write_text(f'name = "{name}"\n[defaults]\n{defaults}\n{top}\n{body}')
        return path

    return write


def others_can_read(path: Path) -> bool:
    """Whether a user who is neither the owner nor in the group can reach and read ``path``
    (execute permission on every directory above it; read, and execute for a directory, on it)."""
    path = Path(path).resolve()
    try:
        if any(not os.stat(parent).st_mode & 0o001 for parent in path.parents):
            return False
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return bool(mode & 0o004) and (not path.is_dir() or bool(mode & 0o001))


def python_path_for_other_users(modules: list[str], destination: Path) -> str:
    """A PYTHONPATH from which another user (e.g. nobody) can import ``modules`` and all they import.

    A checkout (and its .venv) in a directory other users cannot enter, such as /root or a
    ``mktemp -d`` directory, is invisible to them; each third-party package the imports load from
    such a place is copied into ``destination`` (made readable to all), which is the path returned.
    The standard library is the interpreter's own and is never copied.
    """
    listing = subprocess.run(
        [
            sys.executable,
            "-c",
            "import importlib, json, sys\n"
            f"for name in {modules!r}: importlib.import_module(name)\n"
            "print(json.dumps({n: getattr(m, '__file__', None) for n, m in sys.modules.items() if '.' not in n}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    import json
    import shutil

    destination.mkdir(parents=True, exist_ok=True)
    for name, file in json.loads(listing.stdout).items():
        if not file or name in sys.stdlib_module_names or others_can_read(Path(file)):
            continue
        source = Path(file)
        if source.name == "__init__.py":
            shutil.copytree(
                source.parent, destination / name, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True
            )
        else:
            shutil.copy2(source, destination / source.name)
    for path in [destination, *destination.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return str(destination)
