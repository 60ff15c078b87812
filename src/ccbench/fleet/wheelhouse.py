"""The wheelhouse shipped to fleet hosts: ccbench built from this checkout plus the Python
packages a remote ``ccbench run`` needs, pinned to the versions resolved in the controller's
environment, installed once on the controller into a staging tree, packed as one tar of the
installed files and cached on the controller.

Remote hosts often have no internet (confidential VMs are locked down; the test hosts have
none), so everything comes in this tar. It holds only what running a plan needs (click, rich,
pydantic, psutil, orjson, numpy, cryptography; scipy only when a host's plan has a precision or
detect target, for its intervals), not the rest of the analysis stack (pandas, matplotlib,
pyarrow, DuckDB: compare, report and the Parquet conversion run on the controller), plus the
Python packages of the set-up components a host asks for (``ccbench_components``) where the
package has such an extra, and the set-up scripts (``scripts/setup.sh``, ``scripts/setup.d/``)
that hosts run in fleet-host mode for their components, plus the programs built here that the
plan's workloads need (``Workload.shipped_tools``), each in ``tools/``
with its SHA-256 in ``tools.json``, checked by ``install.py`` on arrival and installed as
``<venv>/libexec/ccbench/<name>``.

Installed, not as wheels: a host does no pip run, unpacks no wheel and compiles nothing (the
controller's pip did the work once per wheelhouse; ``hostinstall``, shipped as ``install.py``, moves
the files into the host's venv). pip on the host checked that the wheels suit it; the playbook's
connect task checks instead what ``host_needs`` records in the tar (``requires.json``, its first
member): the platform, the Python implementation and version, and the newest glibc the wheels'
manylinux tags ask. The price: the tar holds the installed bytes (about 3x the wheels' for a plan
without scipy), which the copy to each host carries.

Cache: ``$CCBENCH_CACHE`` or ``~/.cache/ccbench``, under ``fleet/``: downloaded wheels in
``wheels/`` (kept across versions), the pinned packages installed once per pin set in
``installed-<key>/`` (the two most recently used kept), one ``wheelhouse-<key>.tar`` per key (the
four most recently used kept), the key covering the
Python version, the platform, the pins and a digest of ccbench's source and those scripts, and each
shipped tool's name and SHA-256 (so an edited checkout or a rebuilt tool ships again and an
unchanged one never rebuilds).
"""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import parse_wheel_filename

from ccbench.basics.errors import EnvironmentProblem
from ccbench.basics.fsutil import atomic_target
from ccbench.fleet import hostinstall

#: what `ccbench run` imports on a host (checked by the fleet tests, which run plans with only these)
# cryptography: the per-run CA of TLS variants. No pyarrow and no DuckDB (80 of the 143 MB the
# wheelhouse had, most of a cold host's install time): a host's run keeps its samples in the
# journal (samples.jsonl, in the digest list) and writes no samples.parquet; the controller
# converts the journal when it gathers the bundle (engine: Controller._columnar)
RUNNER_REQUIREMENTS = (
    "click",
    "rich",
    "pydantic",
    "psutil",
    "orjson",
    "packaging",
    "numpy",
    "cryptography",
)
#: only for plans with a precision or detect target (the t and noncentral t distributions of
#: ccbench.analysis.statistics.precision): scipy is 113 of the 203 MB a host installs and more than half its files
PRECISION_REQUIREMENTS = ("scipy",)
#: pip, among the installed files: the host's venv is made without ensurepip (which byte-compiled pip
#: and took most of a cold host's install), and a venv without pip would surprise its user
INSTALLER_REQUIREMENTS = ("pip",)


#: what the tar holds: the files installed once by the controller (site-packages/, prefix/, install.py)
LAYOUT = "installed-tree-1"


@dataclass
class Wheelhouse:
    key: str
    tar: Path
    pins: dict[str, str]
    python: str
    built: bool  # False when it came from the cache
    #: what a host needs for these installed files: {"platform", "implementation", "glibc" ("" for none)}
    requires: dict[str, str]
    #: the shipped tools: name -> {"sha256", "bytes"} (installed as <venv>/libexec/ccbench/<name>)
    tools: dict[str, dict] = field(default_factory=dict)

    def play_vars(self) -> dict[str, str]:
        """The playbook's view: the tar to copy, its key, and what the connect task checks the host against."""
        return {"python": self.python, "wheelhouse_tar": str(self.tar), "wheelhouse_key": self.key, **self.requires}


def cache_root() -> Path:
    return Path(os.environ.get("CCBENCH_CACHE") or Path.home() / ".cache" / "ccbench") / "fleet"


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(roots: list[str], extras: dict[str, list[str]] | None = None) -> dict[str, str]:
    """{distribution: version} for ``roots`` and everything they require, as installed here."""
    environment = {"extra": ""}
    seen: dict[str, str] = {}
    stack = list(roots)
    while stack:
        name = stack.pop()
        key = _normal(name)
        if key in seen:
            continue
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise EnvironmentProblem(
                f"{name} (needed on fleet hosts) is not installed on the controller; "
                "install ccbench's dependencies first (bash scripts/setup.sh)"
            ) from None
        seen[key] = distribution.version
        for text in distribution.requires or []:
            requirement = Requirement(text)
            if requirement.marker and not requirement.marker.evaluate(environment):
                continue
            stack.append(requirement.name)
    return seen


def component_requirements(components: list[str]) -> list[str]:
    """Python requirements of ccbench's extras named like the components (``datascience``, ...)."""
    try:
        requires = metadata.distribution("ccbench").requires or []
    except metadata.PackageNotFoundError:
        return []
    found = []
    for text in requires:
        requirement = Requirement(text)
        if requirement.marker is None:
            continue
        for component in components:
            if requirement.marker.evaluate({"extra": component}) and not requirement.marker.evaluate({"extra": ""}):
                found.append(requirement.name)
    return found


def plan_extras() -> set[str]:
    """Set-up components whose Python extra joins the wheelhouse whenever a host's plan needs one of
    their workloads (Workload.ships_python_extra); others, such as torch ("ml", gigabytes) or OpenFL
    (its own environment on the host), go in only when named in ccbench_components."""
    from ccbench.workloads import shipped_python_extras

    return shipped_python_extras()


def wheelhouse_components(requested: list[str], planned: list[str]) -> tuple[list[str], dict[str, str]]:
    """The components whose Python packages go into the wheelhouse: every requested one (a host's
    ccbench_components), and each planned one of plan_extras() whose packages the controller has; the
    planned ones it lacks, with the reason (their workloads are then skipped on the hosts)."""
    chosen = set(requested)
    left_out = {}
    for component in sorted(set(planned) & plan_extras() - chosen):
        try:
            closure(component_requirements([component]))
        except EnvironmentProblem as exc:
            left_out[component] = (
                f"its Python packages are not in the wheelhouse: {exc.args[0].split(' (')[0]} is not installed on "
                f"the controller (bash scripts/setup.sh --with {component} there, then run again); the "
                "hosts skip the workloads that need them"
            )
        else:
            chosen.add(component)
    return sorted(chosen), left_out


def checkout_root() -> Path:
    """The source checkout this ccbench runs from (pyproject.toml beside src/ccbench)."""
    package = Path(__file__).resolve().parents[1]  # src/ccbench, this module being src/ccbench/fleet/wheelhouse.py
    root = package.parent.parent
    if not (root / "pyproject.toml").is_file() or package.parent.name != "src":
        raise EnvironmentProblem(
            f"ccbench at {package} is not a source checkout: run `ccbench fleet` from a "
            "checkout (it builds the wheel it ships from the source)"
        )
    return root


def source_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted((root / "src" / "ccbench").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith((".pyc", ".tmp")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    for name in ("pyproject.toml",):
        digest.update(name.encode() + b"\0" + (root / name).read_bytes())
    for path in setup_scripts(root):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def setup_scripts(root: Path) -> list[Path]:
    """The set-up scripts shipped to hosts beside the wheels (scripts/setup.sh, scripts/setup.d/*.sh)."""
    return [root / "scripts" / "setup.sh", *sorted((root / "scripts" / "setup.d").glob("*.sh"))]


def python_tag() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def plan_needs_precision(plan) -> bool:
    """Whether a plan's run repeats towards a precision or detect target (then hosts need scipy)."""
    return any(w.precision is not None or w.detect is not None for w in plan.workloads)


def host_requirements(components: list[str], *, precision: bool) -> list[str]:
    """The distributions a host's wheelhouse starts from (their dependencies are added by closure)."""
    extra = list(PRECISION_REQUIREMENTS) if precision else []
    return list(RUNNER_REQUIREMENTS) + extra + list(INSTALLER_REQUIREMENTS) + component_requirements(components)


#: a shipped tool's name: one file name under libexec/ccbench/
_TOOL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


def tool_records(tools: dict[str, Path]) -> dict[str, dict]:
    """{name: {"sha256", "bytes"}} of the tools to ship (a name that is no plain file name refused)."""
    records = {}
    for name, path in sorted(tools.items()):
        if not _TOOL_NAME.fullmatch(name):
            raise EnvironmentProblem(
                f"shipped tool name {name!r} is not a plain file name (a workload's shipped_tools)"
            )
        try:
            records[name] = {"sha256": hostinstall.sha256(str(path)), "bytes": path.stat().st_size}
        except OSError as exc:
            raise EnvironmentProblem(f"cannot read {path}, the {name} the hosts need: {exc.strerror}") from None
    return records


def wheelhouse_key(pinned: list[str], source: str, tools: dict[str, dict]) -> str:
    """The cache key: the pins (with the layout, Python and platform), the source's digest, each tool's."""
    keyed = [*pinned, source, *[f"tool {name} {record['sha256']}" for name, record in sorted(tools.items())]]
    return hashlib.sha256("\n".join(keyed).encode()).hexdigest()[:16]


def build(
    components: list[str] | None = None, *, precision: bool = True, log=None, tools: dict[str, Path] | None = None
) -> Wheelhouse:
    """The wheelhouse for these components (with scipy when ``precision``: a plan with a precision or
    detect target) and these tools (name -> this machine's file), from the cache when it is there."""
    components = sorted(set(components or []))
    tools = dict(tools or {})
    shipped = tool_records(tools)
    root = checkout_root()
    pins = closure(host_requirements(components, precision=precision))
    pinned = [LAYOUT, python_tag(), sysconfig.get_platform(), *[f"{k}=={v}" for k, v in sorted(pins.items())]]
    key = wheelhouse_key(pinned, source_digest(root), shipped)
    cache = cache_root()
    tar = cache / f"wheelhouse-{key}.tar"
    if tar.is_file():
        os.utime(tar)  # recently used: the pruning keeps the newest
        return Wheelhouse(key, tar, pins, python_tag(), built=False, requires=_read_requires(tar), tools=shipped)
    cache.mkdir(parents=True, exist_ok=True)
    wheels = cache / "wheels"
    wheels.mkdir(exist_ok=True)
    _download(wheels, pins, log)
    dependencies = [_cached_wheel(wheels, name, version) for name, version in sorted(pins.items())]
    # the pinned packages installed once per pin set (an edited checkout reinstalls only ccbench)
    installed = cache / f"installed-{hashlib.sha256(chr(10).join(pinned).encode()).hexdigest()[:16]}"
    if not installed.is_dir():
        if log:
            log(f"installing {len(dependencies)} wheel(s) once for the fleet hosts (they receive the installed files)")
        with tempfile.TemporaryDirectory(prefix=".installing-", dir=cache) as staging:
            _prepare(dependencies, Path(staging) / "prefix")
            try:
                os.replace(Path(staging) / "prefix", installed)
            except OSError:
                if not installed.is_dir():  # not another build's, finished first
                    raise
    os.utime(installed)
    with tempfile.TemporaryDirectory(prefix="ccbench-wheel-") as temporary:
        own = _ccbench_wheel(root, Path(temporary))
        _prepare([own], Path(temporary) / "prefix")
        requires = host_needs([own, *dependencies])
        with atomic_target(tar) as partial, tarfile.open(partial, "w") as archive:
            # first member: what the host needs, read back from the cache without a scan of the tar
            needs = Path(temporary) / "requires.json"
            needs.write_text(json.dumps(requires))
            archive.add(needs, arcname="requires.json")
            for prefix in (installed, Path(temporary) / "prefix"):
                site = _site(prefix)
                for entry in sorted(site.iterdir()):
                    archive.add(entry, arcname=f"site-packages/{entry.name}")
                for entry in sorted(prefix.iterdir()):
                    if entry != site.parents[1]:  # lib/, holding pythonX.Y/site-packages only
                        archive.add(entry, arcname=f"prefix/{entry.name}")
            archive.add(Path(hostinstall.__file__), arcname="install.py")
            # the hosts run these in fleet-host mode for the set-up components (scripts/ inside the tar)
            for script in setup_scripts(root):
                archive.add(script, arcname=str(script.relative_to(root)))
            add_tools(archive, tools, shipped, Path(temporary))
    _prune(cache, "wheelhouse-*.tar", keep=4)
    _prune(cache, "installed-*", keep=2)
    return Wheelhouse(key, tar, pins, python_tag(), built=True, requires=requires, tools=shipped)


def add_tools(archive: tarfile.TarFile, tools: dict[str, Path], records: dict[str, dict], temporary: Path) -> None:
    """The tools as ``tools/<name>`` (executable) and their digests as ``tools.json`` (install.py checks
    each against it before installing anything)."""
    if not tools:
        return
    listing = temporary / "tools.json"
    listing.write_text(json.dumps(records, sort_keys=True))
    archive.add(listing, arcname="tools.json")
    for name, path in sorted(tools.items()):
        member = archive.gettarinfo(str(path), arcname=f"tools/{name}")
        member.mode = 0o755
        with open(path, "rb") as handle:
            archive.addfile(member, handle)
        if hostinstall.sha256(str(path)) != records[name]["sha256"]:
            raise EnvironmentProblem(f"{path} changed while the wheelhouse was packed: build it again, then run again")


def _download(wheels: Path, pins: dict[str, str], log) -> None:
    """The pinned wheels not in the cache yet, from PyPI (the controller needs it once)."""
    missing = [
        f"{name}=={version}" for name, version in sorted(pins.items()) if not _cached_wheel(wheels, name, version)
    ]
    if not missing:
        return
    if log:
        log(f"downloading {len(missing)} wheel(s) for the fleet hosts into {wheels}")
    done = _pip(["download", "--only-binary=:all:", "--no-deps", "-d", str(wheels), *missing], timeout=900)
    if done.returncode != 0:
        raise EnvironmentProblem(
            f"cannot download the wheels fleet hosts install ({', '.join(missing[:4])}...): "
            f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'pip download failed'}; "
            "the controller needs PyPI once (the wheels are cached in " + str(wheels) + ")"
        )


def _ccbench_wheel(root: Path, temporary: Path) -> Path:
    """ccbench's wheel, built from a copy of the checkout (an in-tree build would leave build/ and
    *.egg-info in it)."""
    source = temporary / "source"
    shutil.copytree(root / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (root / name).is_file():
            shutil.copy2(root / name, source / name)
    out = temporary / "dist"
    done = _pip(["wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(source)], timeout=600)
    if done.returncode != 0:
        raise EnvironmentProblem(
            f"building the ccbench wheel failed: {done.stderr.strip()[-300:]} "
            "(needs setuptools and wheel in this environment)"
        )
    return next(out.glob("ccbench-*.whl"))


def _prune(cache: Path, pattern: str, keep: int) -> None:
    """The newest ``keep`` of these cache entries stay (a tar just used was just written or read)."""
    entries = sorted(cache.glob(pattern), key=lambda p: p.stat().st_mtime, reverse=True)
    for stale in entries[keep:]:
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)


#: glibc versions of the manylinux tags named before PEP 600 (manylinux_X_Y)
_LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def host_needs(wheels: list[Path]) -> dict[str, str]:
    """What a host must have for the files these wheels install: this platform and Python
    implementation, and the newest glibc any wheel's manylinux tags ask (a wheel tagged for several
    needs the oldest of them; "" when none asks one). pip on the host checked this; the installed
    files are checked by the playbook's connect task instead."""
    needed: tuple[int, int] | None = None
    for wheel in wheels:
        _, _, _, tags = parse_wheel_filename(wheel.name)
        versions = []
        for tag in tags:
            legacy = _LEGACY_MANYLINUX.get(tag.platform.split("_", 1)[0])
            match = re.fullmatch(r"manylinux_(\d+)_(\d+)_\w+", tag.platform)
            if legacy or match:
                versions.append(legacy or (int(match.group(1)), int(match.group(2))))
            else:
                versions = []  # a tag without a glibc floor ("any", "linux_x86_64"): this wheel asks none
                break
        if versions and (needed is None or min(versions) > needed):
            needed = min(versions)
    return {
        "platform": sysconfig.get_platform(),
        "implementation": sys.implementation.name,
        "glibc": f"{needed[0]}.{needed[1]}" if needed else "",
    }


def _read_requires(tar: Path) -> dict[str, str]:
    with tarfile.open(tar) as archive:
        first = archive.next()
        handle = archive.extractfile(first) if first is not None and first.name == "requires.json" else None
        if handle is None:
            raise EnvironmentProblem(f"{tar} is not a wheelhouse of this ccbench (no requires.json first): delete it")
        return json.loads(handle.read())


#: pip's launcher for an interpreter path too long for a shebang line: three lines, then the script
_SH_LAUNCHER = b"#!/bin/sh\n'''exec' "


def _prepare(wheels: list[Path], prefix: Path) -> None:
    """Installs the wheels into a staging prefix with this environment's pip (the wheelhouse is
    built for this Python and platform, and the connect task holds hosts to both); the first line
    of the scripts in its ``bin/`` becomes the placeholder the host replaces with its venv's python
    (hostinstall)."""
    done = _pip(
        [
            "install",
            "--no-index",
            "--no-deps",
            "--no-compile",
            "--ignore-installed",
            "--no-warn-script-location",
            "--prefix",
            str(prefix),
            *map(str, wheels),
        ],
        timeout=900,
    )
    if done.returncode != 0:
        raise EnvironmentProblem(
            f"installing the fleet hosts' wheels into a staging tree failed: {done.stderr.strip()[-300:]}"
        )
    _site(prefix)  # exactly one site-packages, or say so now
    for script in sorted((prefix / "bin").glob("*")):
        content = script.read_bytes()
        if content.startswith(_SH_LAUNCHER):
            body = content.split(b"\n", 3)[3]
        elif content.startswith(b"#!") and b"python" in content.split(b"\n", 1)[0]:
            body = content.split(b"\n", 1)[1]
        else:
            continue
        script.write_bytes(hostinstall.SHEBANG_PLACEHOLDER + body)


def _site(prefix: Path) -> Path:
    """The one site-packages directory pip laid out under a staging prefix (lib/pythonX.Y/site-packages;
    the lib/ holding it holds nothing else)."""
    sites = sorted(prefix.glob("lib*/python*/site-packages"))
    if len(sites) != 1:
        raise EnvironmentProblem(f"pip --prefix made {len(sites)} site-packages directories in {prefix}, not one")
    return sites[0]


def _pip(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    """This environment's pip, quiet, its output captured."""
    command = [sys.executable, "-m", "pip", args[0], "--quiet", "--disable-pip-version-check", *args[1:]]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def _cached_wheel(wheels: Path, name: str, version: str) -> Path | None:
    stem = re.sub(r"[-_.]+", "_", name).lower()
    for candidate in wheels.glob("*.whl"):
        parts = candidate.name.split("-")
        if len(parts) >= 2 and re.sub(r"[-_.]+", "_", parts[0]).lower() == stem and parts[1] == version:
            return candidate
    return None
