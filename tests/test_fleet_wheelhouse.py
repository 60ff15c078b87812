"""What goes into the fleet's wheelhouse: the Python packages of the components hosts need, read
from the controller's installed distributions, and how a host installs the files (no SSH needed:
the playbook's platform check runs with Ansible's local connection)."""

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from ccbench.fleet import hostinstall, wheelhouse


def _missing(*distributions: str) -> list[str]:
    absent = []
    for name in distributions:
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            absent.append(name)
    return absent


def test_a_plans_datascience_workloads_bring_their_python_packages():
    """A notebook in the plan puts the datascience extra's packages in the wheelhouse without the
    inventory naming it; torch (ml) and OpenFL (federated) only when a host asks for them."""
    absent = _missing("nbclient", "nbformat", "ipykernel", "pyperformance")
    if absent:
        pytest.skip(
            f"the datascience component is not installed here ({', '.join(absent)}): "
            "bash scripts/setup.sh --with datascience"
        )
    chosen, left_out = wheelhouse.wheelhouse_components([], ["core", "datascience", "federated", "ml"])
    assert chosen == ["datascience"] and left_out == {}
    pins = wheelhouse.closure(wheelhouse.component_requirements(chosen))
    assert {"nbclient", "nbformat", "ipykernel", "pyperformance"} <= set(pins)
    chosen, _ = wheelhouse.wheelhouse_components(["ml"], ["core"])
    assert chosen == ["ml"]


def test_a_planned_extra_the_controller_lacks_is_left_out_with_the_reason(monkeypatch):
    real = wheelhouse.component_requirements

    def requirements(components):
        # the controller as if datascience's set-up had never run here: one of its packages absent
        return ["ccbench-absent-package"] if components == ["datascience"] else real(components)

    monkeypatch.setattr(wheelhouse, "component_requirements", requirements)
    chosen, left_out = wheelhouse.wheelhouse_components(["storage"], ["datascience", "storage"])
    assert chosen == ["storage"]
    reason = left_out["datascience"]
    assert "ccbench-absent-package is not installed on the controller" in reason
    assert "bash scripts/setup.sh --with datascience" in reason and "skip" in reason


def test_scipy_goes_to_hosts_only_for_a_plan_with_a_precision_or_detect_target(tmp_path):
    """scipy (more than half of what a host installs) serves only the precision rule's t intervals;
    pip goes in always (the host's venv is made without ensurepip: pip comes with the installed files)."""
    from ccbench.planning.plan import load_plan

    base = 'name = "p"\n[[workloads]]\nkind = "command"\ncommand = "true"\n'
    fixed, precise, detecting = (tmp_path / f"{n}.toml" for n in ("fixed", "precise", "detect"))
    fixed.write_text(base)
    precise.write_text(base + 'precision = "2%"\n')
    detecting.write_text(base + 'detect = "5%"\n')
    needs = [wheelhouse.plan_needs_precision(load_plan(str(p))) for p in (fixed, precise, detecting)]
    assert needs == [False, True, True]
    without = wheelhouse.closure(wheelhouse.host_requirements([], precision=False))
    assert "scipy" not in without and {"numpy", "pip", "cryptography"} <= set(without)
    assert "scipy" in wheelhouse.closure(wheelhouse.host_requirements([], precision=True))


@pytest.mark.parametrize(
    "names, glibc",
    [
        # a wheel tagged for several platforms needs the oldest of them; the wheelhouse, its newest
        (
            [
                "numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
                "cryptography-50.0.2-cp311-abi3-manylinux_2_34_x86_64.whl",
                "psutil-7.2.2-cp36-abi3-manylinux2010_x86_64.manylinux_2_12_x86_64.manylinux_2_28_x86_64.whl",
            ],
            "2.34",
        ),
        (
            [
                "orjson-3.13.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                "cffi-2.1.1-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
                "old-1-cp311-cp311-manylinux1_x86_64.whl",
            ],
            "2.17",
        ),
        (["click-8.5.1-py3-none-any.whl", "local-1.0-cp311-cp311-linux_x86_64.whl"], ""),
    ],
)
def test_what_a_host_needs_is_read_from_the_wheels_tags(names, glibc):
    needs = wheelhouse.host_needs([Path(name) for name in names])
    assert needs["glibc"] == glibc
    assert needs["implementation"] == sys.implementation.name and needs["platform"].startswith("linux-")


def _tree(root: Path, packages: dict[str, str], script: str | None = None) -> Path:
    """A wheelhouse's installed files as the controller ships them (site-packages/, prefix/bin/)."""
    for name, text in packages.items():
        (root / "site-packages" / name).mkdir(parents=True)
        (root / "site-packages" / name / "__init__.py").write_text(text)
    if script:
        (root / "prefix" / "bin").mkdir(parents=True)
        (root / "prefix" / "bin" / script).write_bytes(
            hostinstall.SHEBANG_PLACEHOLDER + b"import sys\nprint(sys.prefix)\n"
        )
        (root / "prefix" / "bin" / script).chmod(0o755)
    return root


def test_a_host_install_moves_the_files_in_and_a_new_wheelhouse_replaces_every_earlier_package(tmp_path):
    venv = tmp_path / "venv"
    python3 = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    first = _tree(tmp_path / "first", {"alpha": "VERSION = 1", "gone": "VERSION = 1"}, script="alpha-cli")
    subprocess.run([python3, hostinstall.__file__, str(venv), str(first)], check=True)
    python = venv / "bin" / "python"
    asked = "import alpha, gone; print(alpha.VERSION, gone.VERSION)"
    assert subprocess.run([python, "-c", asked], capture_output=True, text=True, check=True).stdout.split() == [
        "1",
        "1",
    ]
    # the script runs with the venv's python (its first line was the controller's placeholder)
    cli = venv / "bin" / "alpha-cli"
    assert cli.read_bytes().startswith(b"#!" + str(python).encode() + b"\n")
    assert subprocess.run([cli], capture_output=True, text=True, check=True).stdout.strip() == str(venv)
    assert not (first / "site-packages").exists()  # moved, not copied
    # a component's own environment inside the venv (federated, Otava) stays across wheelhouses
    (venv / "federated").mkdir()
    second = _tree(tmp_path / "second", {"alpha": "VERSION = 2"})
    subprocess.run([python3, hostinstall.__file__, str(venv), str(second)], check=True)
    assert (
        subprocess.run(
            [python, "-c", "import alpha; print(alpha.VERSION)"], capture_output=True, text=True
        ).stdout.strip()
        == "2"
    )
    assert subprocess.run([python, "-c", "import gone"], capture_output=True).returncode != 0
    assert (venv / "federated").is_dir()


def test_a_host_install_that_cannot_write_says_so_in_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    tree = _tree(tmp_path / "tree", {"alpha": "VERSION = 1"})
    python3 = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    done = subprocess.run(
        [python3, hostinstall.__file__, str(blocker / "venv"), str(tree)], capture_output=True, text=True
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert str(blocker / "venv") in lines[0] and "free space" in lines[0], lines[0]


def _tool_tree(tmp_path: Path) -> tuple[Path, bytes]:
    """A wheelhouse tar with one shipped tool (a made-up shell script named like ccmech), packed by the
    controller's code and unpacked as a host's tar -x does."""
    import tarfile

    tool = tmp_path / "built" / "ccmech"
    tool.parent.mkdir()
    content = b"#!/bin/sh\necho 'ccmech 0.0.1'\n"
    tool.write_bytes(content)
    tool.chmod(0o644)  # the tar makes it executable
    tar = tmp_path / "wheelhouse.tar"
    with tarfile.open(tar, "w") as archive:
        archive.add(_tree(tmp_path / "staged", {"alpha": "VERSION = 1"}) / "site-packages", arcname="site-packages")
        wheelhouse.add_tools(archive, {"ccmech": tool}, wheelhouse.tool_records({"ccmech": tool}), tmp_path)
    tree = tmp_path / "unpacked"
    tree.mkdir()
    subprocess.run(["tar", "--no-same-owner", "-xf", str(tar), "-C", str(tree)], check=True)
    return tree, content


def test_a_shipped_tool_is_installed_under_libexec_after_its_digest_is_checked(tmp_path):
    tree, content = _tool_tree(tmp_path)
    assert json.loads((tree / "tools.json").read_text())["ccmech"]["bytes"] == len(content)
    venv = tmp_path / "venv"
    python3 = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    subprocess.run([python3, hostinstall.__file__, str(venv), str(tree)], check=True)
    installed = venv / "libexec" / "ccbench" / "ccmech"
    assert installed.read_bytes() == content and os.access(installed, os.X_OK)
    assert subprocess.run([installed], capture_output=True, text=True).stdout == "ccmech 0.0.1\n"
    # the workload's lookup finds it there when neither the variable nor a checkout's build is
    from ccbench.workloads.mechanisms import binary

    assert binary.find({}, tmp_path / "no-checkout", venv) == binary.Found(installed, "shipped")


def test_a_shipped_tool_that_arrived_changed_is_refused_in_one_line_and_nothing_installed(tmp_path):
    tree, _ = _tool_tree(tmp_path)
    (tree / "tools" / "ccmech").write_bytes(b"#!/bin/sh\necho tampered\n")
    venv = tmp_path / "venv"
    python3 = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    done = subprocess.run([python3, hostinstall.__file__, str(venv), str(tree)], capture_output=True, text=True)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "ccmech arrived with SHA-256" in lines[0] and "run the fleet again" in lines[0], lines[0]
    assert not venv.exists()  # checked before the venv was made or changed


def test_a_shipped_tool_changes_the_wheelhouse_and_a_bad_name_is_refused(tmp_path):
    tool = tmp_path / "ccmech"
    tool.write_bytes(b"one")
    first = wheelhouse.tool_records({"ccmech": tool})
    tool.write_bytes(b"two")
    second = wheelhouse.tool_records({"ccmech": tool})
    assert second["ccmech"]["sha256"] != first["ccmech"]["sha256"]
    keys = {wheelhouse.wheelhouse_key(["pins"], "source", tools) for tools in ({}, first, second)}
    assert len(keys) == 3  # a rebuilt tool ships again, as an edited checkout does
    with pytest.raises(wheelhouse.EnvironmentProblem, match="not a plain file name"):
        wheelhouse.tool_records({"../ccmech": tool})


def _ansible_playbook() -> Path:
    found = Path(sys.executable).with_name("ansible-playbook")
    if not found.exists():
        pytest.skip("ansible-playbook is not in this environment (bash scripts/setup.sh installs it)")
    return found


def test_a_host_of_another_platform_is_refused_before_anything_is_installed(tmp_path):
    """The installed files suit the controller's platform only: the playbook's connect step says so
    in one line, and no venv is made on the host."""
    fleet = {
        "action": "run",
        "run_id": "r",
        "python": wheelhouse.python_tag(),
        "wheelhouse_tar": str(tmp_path / "none.tar"),
        "wheelhouse_key": "k",
        "platform": "linux-aarch64",
        "implementation": sys.implementation.name,
        "glibc": "2.17",
        "plan_content": "",
        "plan_suffix": "",
        "stop_flag": str(tmp_path / "flag"),
        "poll_s": 1,
        "max_polls": 1,
        "stop_grace_s": 1,
        "hosts": {
            "localhost": {
                "label": "l",
                "round": "run",
                "dest": str(tmp_path / "d"),
                "target": str(tmp_path / "t"),
                "components": [],
                "ccbench_args": [],
                "peer_address": "",
            }
        },
    }
    home = tmp_path / "home"
    (tmp_path / "inventory").write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={sys.executable} ccbench_workdir={home}\n"
    )
    (tmp_path / "vars.json").write_text(json.dumps({"ccbench_fleet": fleet}))
    playbook = Path(wheelhouse.__file__).with_name("playbook.yml")
    done = subprocess.run(
        [_ansible_playbook(), "-i", tmp_path / "inventory", "-e", f"@{tmp_path / 'vars.json'}", playbook],
        capture_output=True,
        text=True,
        timeout=300,
        # python3 on the "host" is this Python (the connect task runs python3 from PATH)
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "ANSIBLE_NOCOLOR": "1"},
    )
    assert done.returncode != 0, done.stdout
    assert "wheelhouse was installed on the controller for linux-aarch64" in done.stdout, done.stdout
    assert not (home / "venv").exists()


def test_the_cache_keeps_the_newest_wheelhouses_and_installed_trees(tmp_path):
    """Two checkouts taking turns must not evict each other: the pruning goes by last use."""
    for age, name in enumerate(
        ["wheelhouse-a.tar", "wheelhouse-b.tar", "wheelhouse-c.tar", "installed-x", "installed-y"]
    ):
        path = tmp_path / name
        path.mkdir() if name.startswith("installed-") else path.write_bytes(b"t")
        os.utime(path, (1_000_000 - age * 100, 1_000_000 - age * 100))  # a the newest
    wheelhouse._prune(tmp_path, "wheelhouse-*.tar", keep=2)
    wheelhouse._prune(tmp_path, "installed-*", keep=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["installed-x", "wheelhouse-a.tar", "wheelhouse-b.tar"]
