"""The guest image every arm of a study boots: ccbench's own, built from Debian's packages, or a
user's qcow2 with its kernel and initrd.

ccbench's own image (``debian-12``) is Debian 12 ("bookworm") made by ``debootstrap --variant=minbase``
with Python (for Ansible and ccbench's venv), OpenSSH's server, Debian's cloud kernel (the virtio,
SEV and swiotlb options a CVM guest needs are in it) and the tools the bundled plans run (fio,
fscrypt, zstd); its init is ``guest/init.py`` (fw_cfg in, sshd up: no systemd, about 7-12 s to SSH
under software emulation). The root file system is written into an ext4 image by ``mke2fs -d``
(no loop device, no mount) and converted to qcow2; the kernel and initrd are taken out for direct
kernel boot. Every arm boots a copy-on-write overlay of it, so the image is never written.

Cached by content under ``$CCBENCH_CACHE/images`` (default ``~/.cache/ccbench/images``): the key
covers the recipe (suite, packages, the init script); a built image is kept with ``image.json``
(the SHA-256 of the disk, kernel and initrd, the package versions), and that digest goes into every
bundle through the launch record. Building takes about a minute with a mirror on the network and
needs root (debootstrap).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccbench.basics.errors import EnvironmentProblem
from ccbench.basics.fsutil import write_json_atomic
from ccbench.bundle.digests import sha256_file

OWN_IMAGE = "debian-12"
SUITE = "bookworm"
#: what the image holds beyond minbase (guest/packages.txt says why each)
PACKAGES_FILE = Path(__file__).parent / "guest" / "packages.txt"


def packages() -> tuple[str, ...]:
    lines = PACKAGES_FILE.read_text().splitlines()
    return tuple(line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#"))


#: bumped when the way the image is made changes (not only its inputs)
RECIPE_VERSION = 1
DISK_SIZE = "4G"
INIT_PATH = "/usr/local/sbin/ccbench-guest-init"
BASE_APPEND = f"root=/dev/vda rw console=ttyS0 init={INIT_PATH} quiet"
TOOLS = {"debootstrap": "debootstrap", "mke2fs": "e2fsprogs", "qemu-img": "qemu-utils"}


@dataclass(frozen=True)
class GuestImage:
    """A bootable image: its disk (never written: arms boot overlays), kernel, initrd, the kernel
    command line it needs, and its digests."""

    name: str
    disk: Path
    kernel: Path
    initrd: Path | None
    base_append: str
    #: SHA-256 of the disk file (what a bundle records as the image's identity)
    digest: str
    disk_format: str = "qcow2"
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def kernel_config(self) -> str | None:
        """The kernel's build configuration, where the image keeps it (ccbench's own does)."""
        path = self.kernel.parent / "kernel.config"
        return path.read_text(errors="replace") if path.is_file() else None

    def record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "disk_sha256": self.digest,
            "kernel_sha256": self.facts.get("kernel_sha256"),
            "initrd_sha256": self.facts.get("initrd_sha256"),
            "recipe": self.facts.get("recipe"),
        }


def cache_root() -> Path:
    return Path(os.environ.get("CCBENCH_CACHE") or Path.home() / ".cache" / "ccbench") / "images"


def init_script() -> bytes:
    return (Path(__file__).parent / "guest" / "init.py").read_bytes()


def recipe() -> dict[str, Any]:
    return {
        "version": RECIPE_VERSION,
        "suite": SUITE,
        "variant": "minbase",
        "packages": list(packages()),
        "disk_size": DISK_SIZE,
        "init_sha256": hashlib.sha256(init_script()).hexdigest(),
    }


def recipe_key() -> str:
    return hashlib.sha256(json.dumps(recipe(), sort_keys=True).encode()).hexdigest()[:16]


def debian_mirror(sources: Path = Path("/etc/apt")) -> str:
    """The Debian mirror to build from: ``$CCBENCH_DEBIAN_MIRROR``, else the one this machine's apt
    uses for the main archive (one-line and deb822 sources)."""
    given = os.environ.get("CCBENCH_DEBIAN_MIRROR")
    if given:
        return given
    candidates = [sources / "sources.list", *sorted((sources / "sources.list.d").glob("*.list"))]
    for path in candidates:
        for line in _lines(path):
            match = re.match(r"deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", line)
            if match and _main_archive(match.group(1), match.group(2)):
                return match.group(1)
    for path in sorted((sources / "sources.list.d").glob("*.sources")):
        for stanza in re.split(r"\n\s*\n", path.read_text(errors="replace")):
            fields = dict(re.findall(r"^(\w[\w-]*):\s*(.*)$", stanza, re.M))
            if "deb" not in fields.get("Types", "").split():
                continue
            for uri in fields.get("URIs", "").split():
                if any(_main_archive(uri, suite) for suite in fields.get("Suites", "").split()):
                    return uri
    raise EnvironmentProblem(
        f"no Debian mirror for {SUITE} in {sources}/sources.list*: set CCBENCH_DEBIAN_MIRROR to one "
        "(a URL of Debian's archive) or give the study a qcow2 image of your own"
    )


def _lines(path: Path) -> list[str]:
    try:
        return [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError:
        return []


def _main_archive(uri: str, suite: str) -> bool:
    return suite == SUITE and "security" not in uri


def ensure_image(name: str = OWN_IMAGE, *, echo: Callable[[str], None] = lambda _t: None) -> GuestImage:
    """ccbench's own image, built once per recipe (under a lock: two studies at once build it once)."""
    if name != OWN_IMAGE:
        raise EnvironmentProblem(f"image {name!r}: ccbench builds only {OWN_IMAGE!r}; give a qcow2 of your own instead")
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    directory = root / f"{OWN_IMAGE}-{recipe_key()}"
    with open(root / ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (directory / "image.json").exists():
            _build(directory, echo)
            _prune(root, keep=directory)
    return load_built(directory)


def _prune(root: Path, keep: Path, count: int = 2) -> None:
    """Keep the ``count`` most recently built images (another checkout may use the older recipe)."""
    built = sorted(
        (d for d in root.glob(f"{OWN_IMAGE}-*") if (d / "image.json").exists() and d != keep),
        key=lambda d: (d / "image.json").stat().st_mtime,
        reverse=True,
    )
    for old in built[count - 1 :]:
        shutil.rmtree(old, ignore_errors=True)


def load_built(directory: Path) -> GuestImage:
    facts = json.loads((directory / "image.json").read_text())
    return GuestImage(
        name=facts["name"],
        disk=directory / "disk.qcow2",
        kernel=directory / "vmlinuz",
        initrd=directory / "initrd.img",
        base_append=facts["base_append"],
        digest=facts["disk_sha256"],
        facts=facts,
    )


def missing_tools() -> list[str]:
    return [f"{tool} (apt-get install {package})" for tool, package in TOOLS.items() if not shutil.which(tool)]


def _build(directory: Path, echo: Callable[[str], None]) -> None:
    missing = missing_tools()
    if missing:
        raise EnvironmentProblem(
            f"cannot build the {OWN_IMAGE} guest image: missing {', '.join(missing)}; "
            "run 'bash scripts/setup.sh --with machines'"
        )
    if os.geteuid() != 0:
        raise EnvironmentProblem(f"building the {OWN_IMAGE} guest image needs root (debootstrap); run as root once")
    staging = directory.with_name(directory.name + f".build-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        started = time.monotonic()
        tree = staging / "root"
        mirror = debian_mirror()
        echo(f"building the {OWN_IMAGE} guest image (debootstrap {SUITE} from {mirror}; about a minute) ...")
        _step(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(packages())}",
                SUITE,
                str(tree),
                mirror,
            ],
            staging / "debootstrap.log",
            "debootstrap",
        )
        _prepare_tree(tree)
        versions = _package_versions(tree)
        kernel = sorted((tree / "boot").glob("vmlinuz-*"))
        initrd = sorted((tree / "boot").glob("initrd.img-*"))
        if not kernel or not initrd:
            raise EnvironmentProblem(f"the {OWN_IMAGE} image has no kernel or initrd in {tree}/boot")
        shutil.copyfile(kernel[-1], staging / "vmlinuz")
        shutil.copyfile(initrd[-1], staging / "initrd.img")
        for config in sorted((tree / "boot").glob("config-*"))[-1:]:
            shutil.copyfile(config, staging / "kernel.config")
        raw = staging / "disk.raw"
        _step(
            ["mke2fs", "-q", "-F", "-t", "ext4", "-L", "ccbench", "-d", str(tree), str(raw), DISK_SIZE], None, "mke2fs"
        )
        shutil.rmtree(tree)
        _step(["qemu-img", "convert", "-O", "qcow2", str(raw), str(staging / "disk.qcow2")], None, "qemu-img convert")
        raw.unlink()
        for name in ("disk.qcow2", "vmlinuz", "initrd.img", "kernel.config"):
            (staging / name).chmod(0o444)
        facts = {
            "name": OWN_IMAGE,
            "recipe": recipe(),
            "base_append": BASE_APPEND,
            "kernel_release": kernel[-1].name.removeprefix("vmlinuz-"),
            "disk_sha256": sha256_file(staging / "disk.qcow2"),
            "kernel_sha256": sha256_file(staging / "vmlinuz"),
            "initrd_sha256": sha256_file(staging / "initrd.img"),
            "packages": versions,
            "built_s": round(time.monotonic() - started, 1),
        }
        write_json_atomic(staging / "image.json", facts)
        shutil.rmtree(directory, ignore_errors=True)
        staging.rename(directory)
        echo(f"built the {OWN_IMAGE} guest image in {facts['built_s']:.0f} s: {directory}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _step(argv: list[str], log: Path | None, what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if log is not None:
        log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise EnvironmentProblem(f"building the guest image: {what} failed (exit {done.returncode}): {tail[0][:300]}")


def _prepare_tree(tree: Path) -> None:
    """The init, no host keys baked in (each arm gets its own through fw_cfg), an empty machine id."""
    init = tree / INIT_PATH.lstrip("/")
    init.parent.mkdir(parents=True, exist_ok=True)
    init.write_bytes(init_script())
    init.chmod(0o755)
    for key in (tree / "etc" / "ssh").glob("ssh_host_*"):
        key.unlink()
    (tree / "etc" / "machine-id").write_text("")
    (tree / "root" / ".ssh").mkdir(mode=0o700, exist_ok=True)


def _package_versions(tree: Path) -> dict[str, str]:
    done = subprocess.run(
        ["dpkg-query", f"--admindir={tree}/var/lib/dpkg", "-W", "-f", "${Package}\t${Version}\n", *packages()],
        capture_output=True,
        text=True,
    )
    return dict(line.split("\t", 1) for line in done.stdout.splitlines() if "\t" in line)


def user_image(disk: Path, kernel: Path, initrd: Path | None, append: str, disk_format: str = "qcow2") -> GuestImage:
    """A user's image: its digests are computed (once per file version: cached by path, size and time);
    the initrd is optional (a kernel that mounts its root itself)."""
    for what, path in (("disk", disk), ("kernel", kernel), ("initrd", initrd)):
        if path is not None and not path.is_file():
            raise EnvironmentProblem(
                f"the study's image {what} {path} does not exist: give the path of an existing file"
            )
    return GuestImage(
        name=disk.name,
        disk=disk.resolve(),
        kernel=kernel.resolve(),
        initrd=initrd.resolve() if initrd is not None else None,
        base_append=append,
        digest=_cached_digest(disk),
        disk_format=disk_format,
        facts={
            "kernel_sha256": _cached_digest(kernel),
            "initrd_sha256": _cached_digest(initrd) if initrd is not None else None,
            "recipe": None,
            "kernel_release": kernel.name.removeprefix("vmlinuz-"),
        },
    )


def _cached_digest(path: Path) -> str:
    stat = path.stat()
    key = hashlib.sha256(f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()[:24]
    store = cache_root() / "digests"
    entry = store / key
    if entry.exists():
        return entry.read_text().strip()
    digest = sha256_file(path)
    store.mkdir(parents=True, exist_ok=True)
    entry.write_text(digest + "\n")
    return digest
