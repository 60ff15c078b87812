"""A ``--storage-path NAME=DIR`` variant is layered by what DIR was found to be (its recorded
``storage_protection``), not by NAME (docs/storage.md, "Your own directory"): ``tmpfs`` on a plain
directory is no protection, and the lint says the name and the directory disagree; ``tmpfs`` on a
real tmpfs mount is in-memory storage, said nothing of; a record from before ``storage_protection``
keeps the reading by name."""

import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_scheduling import Messages, ScriptedExecutor, measured

from ccbench.analysis.comparison import comparison
from ccbench.analysis.judgement.lint_run import misnamed_storage_paths
from ccbench.analysis.rows.baselines import protection_count
from ccbench.analysis.rows.layers import storage_layer
from ccbench.analysis.samples.load import storage_label
from ccbench.planning.plan import plan_from_dict
from ccbench.run.runner import Runner
from ccbench.run.schedule import Order


def own(name: str, protection: str | None = None, **more) -> dict:
    variant = {"storage": name, "storage_mechanism": "user-path", "storage_path": f"/data/{name}", **more}
    return variant if protection is None else {**variant, "storage_protection": protection}


def layered(variant: dict) -> tuple[str, int]:
    label = storage_label(variant)
    return storage_layer(label), protection_count(pd.Series({"tee": "none", "storage": label, "transport": None}))


@pytest.mark.parametrize(
    ("variant", "layer", "count"),
    [
        # the name says memory, the directory is a plain one: no protection, never "in-memory storage"
        (own("tmpfs", "plain"), "own path, no protection: tmpfs (own path, plain)", 0),
        (own("tmpfs", "tmpfs"), "in-memory storage: tmpfs (own path, tmpfs)", 1),
        (own("tmpfs", "ramfs"), "in-memory storage: tmpfs (own path, ramfs)", 1),
        # the name says a cipher, the directory is a plain one
        (own("encrypted", "plain"), "own path, no protection: encrypted (own path, plain)", 0),
        (own("encrypted:luks", "dm-crypt"), "storage encryption: encrypted:luks (own path, dm-crypt)", 1),
        (own("encrypted", "fuse"), "storage encryption: encrypted (own path, fuse)", 1),
        # the name says a plain disk, the directory is encrypted: the cipher's layer
        (own("disk", "fscrypt"), "storage encryption: disk (own path, fscrypt)", 1),
        (own("disk", "plain"), "own path, no protection: disk (own path, plain)", 0),
        (own("ext4-loop", "plain"), "own path, no protection: ext4-loop (own path, plain)", 0),
        # nothing found (unknown) or nothing recorded (a bundle from before storage_protection): by the name
        (own("tmpfs", "unknown"), "in-memory storage: tmpfs (own path)", 1),
        (own("tmpfs"), "in-memory storage: tmpfs (own path)", 1),
        (own("encrypted"), "storage encryption: encrypted (own path)", 1),
        (own("ext4-loop"), "loop file, no cipher: ext4-loop (own path)", 1),
        (own("disk"), "own path, no protection: disk (own path)", 0),
        # ccbench's own mechanisms keep their labels
        ({"storage": "tmpfs", "storage_mechanism": "tmpfs"}, "in-memory storage: tmpfs", 1),
        ({"storage": "encrypted", "storage_mechanism": "luks2"}, "storage encryption: luks2", 1),
        ({"storage": "ext4-loop", "storage_mechanism": "ext4-loop"}, "loop file, no cipher: ext4-loop", 1),
    ],
)
def test_an_own_path_is_layered_by_what_its_directory_is(variant, layer, count):
    assert layered(variant) == (layer, count)


def test_the_run_and_show_tables_name_an_own_path_as_compare_does():
    """issue 55 trial: the run's table said "storage=tmpfs (user-path)" where compare said "tmpfs (own
    path, plain)"; one name now, what the directory was found to be."""
    from ccbench.run.summary import _variant_label

    assert _variant_label(own("tmpfs", "plain")) == "storage=tmpfs (own path, plain)"
    assert _variant_label(own("tmpfs", "tmpfs", transport="tls")) == "storage=tmpfs (own path, tmpfs),transport=tls"
    assert _variant_label({"storage": "encrypted", "storage_mechanism": "fscrypt"}) == "storage=encrypted (fscrypt)"


def test_the_lint_says_where_a_name_and_its_directory_disagree():
    machine = {"b": "vm"}
    [finding] = misnamed_storage_paths({"b": [own("tmpfs", "plain", storage_fstype="ext4")]}, machine)
    assert (finding.code, finding.severity) == ("misnamed-storage-path", "medium")
    assert finding.what.startswith("vm: the storage variant tmpfs ran in /data/tmpfs, found to be a plain directory")
    assert "not the memory its name says" in finding.what and "'tmpfs (own path, plain)'" in finding.what
    assert "mount -t tmpfs" in finding.advice and "compare two unprotected directories" in finding.advice
    assert "--storage-path disk=" not in finding.advice  # the run's baseline has that name already
    [named_disk] = misnamed_storage_paths({"b": [own("disk", "dm-crypt")]}, machine)
    assert "storage encryption" in named_disk.what and "--storage-path encrypted=/data/disk" in named_disk.advice
    [named_cipher] = misnamed_storage_paths({"b": [own("encrypted:gocryptfs", "tmpfs")]}, machine)
    assert "not the encrypted storage its name says" in named_cipher.what
    # quiet where they agree, where a loop file looks plain, and where nothing was found or recorded
    agreeing = [own("tmpfs", "tmpfs"), own("tmpfs", "ramfs"), own("encrypted", "fuse"), own("disk", "plain")]
    quiet = [*agreeing, own("ext4-loop", "plain"), own("tmpfs", "unknown"), own("tmpfs")]
    assert misnamed_storage_paths({"b": quiet}, machine) == []


@pytest.fixture
def tmpfs_mount(tmp_path):
    """A real tmpfs mounted under tmp_path, unmounted after the test."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    point = tmp_path / "memory"
    point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "ccbench-test", str(point)], check=True)
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], check=True)


def run_own_paths(tmp_path, monkeypatch, paths: dict[str, Path]):
    """One scripted run of a command workload on the storage variants ``paths`` (the runner sets
    them up for real: describe_path finds what each directory is), tmpfs 3x slower than disk."""
    import ccbench.probe.syscheck

    monkeypatch.setattr(ccbench.probe.syscheck, "system_check", lambda **options: [])
    document = {
        "name": "own",
        "defaults": {"repetitions": 3, "warmup": 0, "cooldown": 0, "variants": {"storage": list(paths)}},
        "workloads": [{"kind": "command", "name": "c", "command": "true"}],
    }

    def answer(job):
        rng = np.random.default_rng([list(paths).index(job.variant["storage"]), job.repetition])
        return measured((3.0 if job.variant["storage"] == "tmpfs" else 1.0) * rng.lognormal(0, 0.01))

    runner = Runner(
        plan_from_dict(document, "test"),
        out=tmp_path / "out",
        workdir=tmp_path / "work",
        storage_paths={value: str(path) for value, path in paths.items()},
        reporter=Messages(),
        environment={},
        executor=ScriptedExecutor(answer),
        order=Order("random", 11),
    )
    return comparison([runner.run().bundle])


def _plain_directory(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    from ccbench.probe.storage import describe_path

    if describe_path(path)["protection"] != "plain":
        pytest.skip(f"{tmp_path} is no plain directory here ({describe_path(path)['protection']})")
    return path


def test_tmpfs_on_a_plain_directory_is_no_protection_and_the_lint_says_so(tmp_path, monkeypatch):
    disk, fake = _plain_directory(tmp_path, "disk"), _plain_directory(tmp_path, "fake")
    compared = run_own_paths(tmp_path, monkeypatch, {"disk": disk, "tmpfs": fake})
    assert compared.baseline.endswith(" / disk (own path, plain)"), compared.baseline
    assert [v.layer for v in compared.verdicts()] == ["own path, no protection: tmpfs (own path, plain)"]
    [finding] = [f for f in compared.findings() if f.code == "misnamed-storage-path"]
    assert f"the storage variant tmpfs ran in {fake}, found to be a plain directory" in finding.what


def test_tmpfs_on_a_tmpfs_mount_is_in_memory_storage_and_nothing_is_said(tmp_path, monkeypatch, tmpfs_mount):
    disk = _plain_directory(tmp_path, "disk")
    compared = run_own_paths(tmp_path, monkeypatch, {"disk": disk, "tmpfs": tmpfs_mount})
    assert compared.baseline.endswith(" / disk (own path, plain)"), compared.baseline
    assert [v.layer for v in compared.verdicts()] == ["in-memory storage: tmpfs (own path, tmpfs)"]
    assert not [f for f in compared.findings() if f.code == "misnamed-storage-path"]


def test_storage_paths_that_could_be_read_two_ways_are_one_line_errors(tmp_path, capsys):
    """The user trial: an empty DIR ran three failed executions; a name no workload runs was ignored;
    a name given twice kept the last. Each is now a one-line error before anything runs."""
    from conftest import ccbench_in_process

    plan = tmp_path / "p.toml"
    plan.write_text(
        '[defaults]\nrepetitions = 1\nvariants = { storage = ["disk", "tmpfs"] }\n'
        '[[workloads]]\nkind = "command"\nname = "c"\ncommand = "true"\n'
    )
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    cases = [
        (["tmpfs="], "--storage-path 'tmpfs=': expected VARIANT=DIR"),
        ([f"disk={a}", f"disk={b}"], f"--storage-path disk: given twice ('{a}' and '{b}'); give it once"),
        (
            [f"encrypted={a}"],
            "no workload of the plan runs the storage variant 'encrypted' (its storage variants: disk, tmpfs)",
        ),
        ([f"tmpfs={plan}"], f"--storage-path tmpfs={plan}: not a directory; name the directory"),
    ]
    for given, said in cases:
        out = tmp_path / "out"
        args = [f"--storage-path={value}" for value in given]
        code, _, err = ccbench_in_process(
            capsys, "run", str(plan), "--out", str(out), "--workdir", str(tmp_path), *args
        )
        assert code == 2 and len(err.strip().splitlines()) == 1 and said in err, (given, err)
        assert not out.exists()


def test_a_resumed_run_measures_where_its_run_did(tmp_path, monkeypatch):
    """The user trial: `run --resume` without --storage-path measured the rest of the run in ccbench's
    own tmpfs and disk, under the same names. It takes the bundle's directories; others are refused."""
    import ccbench.probe.syscheck
    from ccbench.basics.errors import CCBenchError
    from ccbench.bundle import read_bundle
    from ccbench.model import ExecutionStatus
    from ccbench.run.runner import Interrupted
    from ccbench.run.supervise import Attempt

    monkeypatch.setattr(ccbench.probe.syscheck, "system_check", lambda **options: [])
    paths = {"disk": _plain_directory(tmp_path, "disk"), "tmpfs": _plain_directory(tmp_path, "fake")}
    document = {
        "name": "own",
        "defaults": {"repetitions": 3, "warmup": 0, "cooldown": 0, "variants": {"storage": list(paths)}},
        "workloads": [{"kind": "command", "name": "c", "command": "true"}],
    }
    cut = {"done": False}

    def answer(job):
        if job.repetition == 1 and not cut["done"]:
            cut["done"] = True
            return Attempt(ExecutionStatus.INTERRUPTED, "interrupted by a signal", interruption=Interrupted(2))
        return measured(1.0)

    def runner(storage_paths, resume=None, messages=None):
        return Runner(
            plan_from_dict(document, "test"),
            out=tmp_path / "out",
            workdir=tmp_path / "work",
            storage_paths=storage_paths,
            reporter=messages or Messages(),
            environment={},
            executor=ScriptedExecutor(answer),
            order=Order("random", 11),
            resume=resume,
        )

    first = runner({value: str(path) for value, path in paths.items()}).run()
    assert first.interrupted
    with pytest.raises(
        CCBenchError, match="its run measured with --storage-path disk=.* a resumed run measures where it did"
    ):
        runner({"disk": str(paths["disk"])}, resume=first.bundle).check_inputs()
    messages = Messages()
    resumed = runner({}, resume=first.bundle, messages=messages).run()
    assert not resumed.interrupted
    assert f"resumed with the bundle's --storage-path tmpfs={paths['tmpfs'].resolve()}" in messages.lines
    samples = read_bundle(first.bundle).samples
    assert len(samples) == 6 and all(s["variant"].get("storage_mechanism") == "user-path" for s in samples), [
        s["variant"] for s in samples
    ]
