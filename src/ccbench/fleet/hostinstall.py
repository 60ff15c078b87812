"""Installs a prepared wheelhouse into a fleet host's venv: the host's side of ``wheelhouse.build``.

The controller installs the wheels once per wheelhouse (its own pip, ``--prefix`` into a staging
tree) and ships the installed files: ``site-packages/`` (what goes into the venv's purelib),
``prefix/`` (the rest: ``bin/``, ``share/``, ...) and this file as ``install.py``. On the host,
``python3 install.py VENV TREE`` makes the venv when there is none (``--without-pip``: pip comes in
the tree), empties its site-packages when it holds an earlier wheelhouse (no package of that one
stays behind), and moves the tree's files in: renames on one file system, no unpacking of wheels,
no compiling (Python compiles what a run imports, on first import). Scripts in ``bin/`` get the
venv's python as their interpreter (the controller wrote a placeholder there). Programs built on
the controller that workloads need (``Workload.shipped_tools``) come in ``tools/`` with their
SHA-256 in ``tools.json``; each is checked before anything moves (a copy that differs is refused,
the venv untouched) and installed as ``VENV/libexec/ccbench/<name>``, replacing an earlier
wheelhouse's tools.

Standard library only: it runs with the host's python3 before ccbench is installed there.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys

#: the first line of the scripts in the tree's prefix/bin/, replaced by the venv's python on the host
SHEBANG_PLACEHOLDER = b"#!@CCBENCH_VENV_PYTHON@\n"
#: where the shipped tools go, under the venv (the workload that declared a tool looks for it there)
TOOLS_DIR = os.path.join("libexec", "ccbench")


class DamagedTool(Exception):
    """A shipped tool whose bytes are not the ones the controller sent."""


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_tools(tree: str) -> dict[str, str]:
    """{name: file} of the tree's shipped tools, each checked against the SHA-256 in tools.json."""
    listing = os.path.join(tree, "tools.json")
    if not os.path.exists(listing):
        return {}
    with open(listing) as handle:
        expected = json.load(handle)
    files = {}
    for name, record in sorted(expected.items()):
        path = os.path.join(tree, "tools", name)
        got = sha256(path) if os.path.isfile(path) else "nothing"
        if got != record["sha256"]:
            raise DamagedTool(
                f"{name} arrived with SHA-256 {got[:16]}, the controller sent {record['sha256'][:16]} "
                f"({path}): the copy was damaged or changed on the way, nothing was installed"
            )
        files[name] = path
    return files


def _install_tools(venv: str, files: dict[str, str]) -> None:
    target = os.path.join(venv, TOOLS_DIR)
    shutil.rmtree(target, ignore_errors=True)  # an earlier wheelhouse's tools go
    if not files:
        return
    os.makedirs(target)
    for name, path in files.items():
        os.replace(path, os.path.join(target, name))
        os.chmod(os.path.join(target, name), 0o755)


def purelib(python: str) -> str:
    """The venv's site-packages, as the venv's own python finds it (distributions patch sysconfig)."""
    asked = "import sysconfig; print(sysconfig.get_path('purelib'))"
    return subprocess.run([python, "-c", asked], check=True, capture_output=True, text=True).stdout.strip()


def _move_tree(source: str, target: str) -> None:
    """Moves every file under ``source`` to the same place under ``target`` (replacing a file there)."""
    for directory, subdirectories, files in os.walk(source):
        relative = os.path.relpath(directory, source)
        destination = os.path.normpath(os.path.join(target, relative))
        os.makedirs(destination, exist_ok=True)
        for name in files:
            os.replace(os.path.join(directory, name), os.path.join(destination, name))
        for name in subdirectories:
            link = os.path.join(directory, name)
            if os.path.islink(link):
                os.replace(link, os.path.join(destination, name))


def _point_scripts(bin_dir: str, python: str) -> None:
    """Gives the tree's scripts (their first line the placeholder) the venv's python."""
    if not os.path.isdir(bin_dir):
        return
    for name in os.listdir(bin_dir):
        path = os.path.join(bin_dir, name)
        with open(path, "rb") as handle:
            content = handle.read()
        if content.startswith(SHEBANG_PLACEHOLDER):
            with open(path, "wb") as handle:
                handle.write(b"#!" + python.encode() + b"\n" + content[len(SHEBANG_PLACEHOLDER) :])


def install(venv: str, tree: str) -> None:
    venv = os.path.abspath(venv)
    tools = check_tools(tree)  # before the venv changes
    python = os.path.join(venv, "bin", "python")
    if not os.access(python, os.X_OK):
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", venv], check=True, capture_output=True, text=True
        )
    site = purelib(python)
    os.makedirs(site, exist_ok=True)
    # an earlier wheelhouse: its packages go (the venv's own directories beside site-packages, such
    # as the federated or Otava venvs a component set up, stay)
    for name in os.listdir(site):
        path = os.path.join(site, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    staged_prefix = os.path.join(tree, "prefix")
    _point_scripts(os.path.join(staged_prefix, "bin"), python)
    _move_tree(os.path.join(tree, "site-packages"), site)
    if os.path.isdir(staged_prefix):
        _move_tree(staged_prefix, venv)
    _install_tools(venv, tools)
    for leftover in ("site-packages", "prefix", "tools"):
        shutil.rmtree(os.path.join(tree, leftover), ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: install.py VENV TREE", file=sys.stderr)
        return 2
    try:
        install(args[0], args[1])
    except DamagedTool as exc:
        print(f"install.py: refused: {exc}; run the fleet again (it copies the wheelhouse anew)", file=sys.stderr)
        return 1
    except (OSError, subprocess.CalledProcessError) as exc:
        why = exc.stderr.strip().splitlines()[-1] if getattr(exc, "stderr", None) else str(exc)
        print(
            f"install.py: cannot install the wheelhouse {args[1]} into {args[0]} on this host: {why}; "
            "check its free space and that the login user can write there, then run the fleet again",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
