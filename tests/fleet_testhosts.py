"""SSH hosts emulated on this machine, for the fleet's tests and benchmark (test support: not
shipped in the package; ``benchmarks/bench_fleet.py`` puts this directory on its path to import it).

Each host is a network namespace (``ccbench.topology``) running Debian's OpenSSH server
(``sshd -D -f <its own config>``) with its own host key, in a private mount namespace where the
host's own directory is bind-mounted over ``/root``: a remote ccbench installs into and runs
under that host's home and nobody else's (``/tmp`` stays shared: the test's own files live there). The client key is generated here; the
root namespace reaches the hosts through an address on the topology's bridge. The hosts have no
route to anything but each other and the controller (no internet).

``without_packages`` makes a host that lacks some Debian packages although this machine has them
(the hosts share this machine's /usr): in the host's private mount namespace a copy of dpkg's
status file without those packages is bind-mounted over ``/var/lib/dpkg/status``, and an empty,
non-executable file over each program they ship in a bin directory. Nothing changes outside that
namespace.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from ccbench.basics.errors import EnvironmentProblem
from ccbench.topology import Host, Topology, available

SSHD = "/usr/sbin/sshd"


def unavailable() -> str | None:
    """None when SSH test hosts can be made here, else why not."""
    reason = available()
    if reason:
        return reason
    for tool, package in (
        (SSHD, "openssh-server"),
        ("ssh", "openssh-client"),
        ("ssh-keygen", "openssh-client"),
        ("unshare", "util-linux"),
    ):
        if not shutil.which(tool):
            return f"{tool} is not installed (apt-get install {package})"
    return None


def marks() -> list:
    """What a test module of real fleet runs is marked with: root, slow, and skipped with the reason
    where Ansible or the SSH test hosts are missing."""
    import importlib.util

    import pytest

    return [
        pytest.mark.root,
        pytest.mark.slow,
        pytest.mark.skipif(
            importlib.util.find_spec("ansible") is None,
            reason="Ansible (ansible-core) is not installed: run 'bash scripts/setup.sh --with fleet'",
        ),
        pytest.mark.skipif(unavailable() is not None, reason=f"SSH test hosts unavailable: {unavailable()}"),
    ]


def _keygen(path: Path, comment: str) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], check=True, capture_output=True
    )
    return path.with_suffix(".pub").read_text().strip() if path.suffix else Path(str(path) + ".pub").read_text().strip()


DPKG_STATUS = Path("/var/lib/dpkg/status")
BIN_DIRS = ("/usr/bin/", "/usr/sbin/", "/bin/", "/sbin/", "/usr/local/bin/")


def _hide_packages(packages: list[str], directory: Path) -> dict[str, str]:
    """Binds ({target: source}) that make ``packages`` absent inside a host's mount namespace."""
    stanzas = DPKG_STATUS.read_text().split("\n\n")
    kept = [s for s in stanzas if not any(s.startswith(f"Package: {p}\n") for p in packages)]
    if len(stanzas) - len(kept) < len(packages):
        raise EnvironmentProblem(f"cannot hide {', '.join(packages)}: not all of them are installed here")
    status = directory / "dpkg-status"
    status.write_text("\n\n".join(kept))
    empty = directory / "hidden-program"
    empty.write_bytes(b"")
    empty.chmod(0o644)
    binds = {str(DPKG_STATUS): str(status)}
    for package in packages:
        lists = sorted(Path("/var/lib/dpkg/info").glob(f"{package}.list")) + sorted(
            Path("/var/lib/dpkg/info").glob(f"{package}:*.list")
        )
        for listing in lists:
            for line in listing.read_text().splitlines():
                path = Path(line)
                if line.startswith(BIN_DIRS) and path.is_file():
                    binds[str(path.resolve())] = str(empty)
    return binds


class SSHHost:
    def __init__(self, name: str, host: Host, directory: Path):
        self.name = name
        self.host = host
        self.directory = directory
        self.home = directory / "root"
        self.config = directory / "sshd_config"
        self.host_key = directory / "ssh_host_ed25519_key"
        self.process: subprocess.Popen | None = None
        self.binds: dict[str, str] = {"/root": str(self.home)}

    @property
    def address(self) -> str:
        return self.host.address


class SSHHosts:
    """``with SSHHosts(workdir, ["h1", "h2"]) as hosts: hosts.write_inventory(path)``."""

    def __init__(
        self,
        workdir: str | Path,
        names: list[str],
        *,
        name: str = "fleet",
        without_packages: dict[str, list[str]] | None = None,
    ):
        self.workdir = Path(workdir).resolve()
        self.names = names
        self.without_packages = without_packages or {}
        self.topology = Topology(self.workdir, name=name)
        self.hosts: dict[str, SSHHost] = {}
        self.client_key = self.workdir / "client_ed25519"
        self.known_hosts = self.workdir / "known_hosts"

    def __enter__(self) -> SSHHosts:
        reason = unavailable()
        if reason:
            raise EnvironmentProblem(f"SSH test hosts cannot be made here: {reason}")
        self.topology.__enter__()
        try:
            self._build()
        except BaseException:
            self.topology.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.topology.__exit__(*exc)

    def _build(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if not self.client_key.exists():
            _keygen(self.client_key, "ccbench-fleet-test-client")
        client_public = Path(str(self.client_key) + ".pub").read_text().strip()
        namespaces = [self.topology.add_host(name) for name in self.names]
        self.segment = self.topology.connect(namespaces, root_access=True)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
        known = []
        for name, namespace in zip(self.names, namespaces):
            directory = self.workdir / "hosts" / name
            host = SSHHost(name, namespace, directory)
            (host.home / ".ssh").mkdir(parents=True, exist_ok=True)
            host.home.chmod(0o700)
            (directory / "authorized_keys").write_text(client_public + "\n")
            if not host.host_key.exists():
                _keygen(host.host_key, f"ccbench-fleet-test-{name}")
            host.config.write_text(
                "\n".join(
                    [
                        "Port 22",
                        f"ListenAddress {namespace.address}",
                        f"HostKey {host.host_key}",
                        f"PidFile {directory / 'sshd.pid'}",
                        f"AuthorizedKeysFile {directory / 'authorized_keys'}",
                        "PermitRootLogin prohibit-password",
                        "PasswordAuthentication no",
                        "KbdInteractiveAuthentication no",
                        "UsePAM no",
                        "StrictModes no",
                        "MaxSessions 50",
                        "MaxStartups 50",
                        "LogLevel ERROR",
                        "Subsystem sftp internal-sftp",
                        "",
                    ]
                )
            )
            if name in self.without_packages:
                host.binds.update(_hide_packages(self.without_packages[name], directory))
            public = Path(str(host.host_key) + ".pub").read_text().split()
            known.append(f"{namespace.address} {public[0]} {public[1]}")
            self.hosts[name] = host
            self.start_sshd(name)
        self.known_hosts.write_text("\n".join(known) + "\n")

    def start_sshd(self, name: str) -> None:
        host = self.hosts[name]
        log = open(host.directory / "sshd.log", "ab")
        host.process = host.host.popen(
            [SSHD, "-D", "-e", "-f", str(host.config)],
            binds=host.binds,
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )
        # generous: sshd answers at once on a quiet machine; a loaded one may take seconds
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if host.process.poll() is not None:
                raise EnvironmentProblem(
                    f"sshd for test host {name} exited: {(host.directory / 'sshd.log').read_text()[-300:]}"
                )
            try:
                with socket.create_connection((host.address, 22), timeout=1) as connection:
                    if connection.recv(4).startswith(b"SSH-"):
                        return
            except OSError:
                time.sleep(0.1)
        raise EnvironmentProblem(f"sshd for test host {name} does not answer on {host.address}:22")

    def stop_sshd(self, name: str) -> None:
        """Stop the host's sshd and every session it started (the host becomes unreachable)."""
        host = self.hosts[name]
        from ccbench import topology

        for pid in topology.records._pids_in_netns(host.host.netns):
            try:
                if Path(f"/proc/{pid}/exe").resolve() == Path(SSHD).resolve():
                    subprocess.run(["kill", "-TERM", str(pid)], check=False)
            except OSError:
                pass
        if host.process:
            host.process.wait(timeout=20)
            host.process = None

    def inventory_text(
        self,
        *,
        baseline: str | None = None,
        labels: dict[str, str] | None = None,
        known_hosts: Path | None = None,
        extra: str = "",
    ) -> str:
        """An INI inventory for these hosts."""
        labels = labels or {}
        lines = ["[ccbench]"]
        for name, host in self.hosts.items():
            parts = [name, f"ansible_host={host.address}"]
            if name in labels:
                parts.append(f"ccbench_label={labels[name]}")
            if name == baseline:
                parts.append("ccbench_baseline=true")
            lines.append(" ".join(parts))
        known = known_hosts or self.known_hosts
        lines += [
            "",
            "[ccbench:vars]",
            "ansible_user=root",
            f"ansible_ssh_private_key_file={self.client_key}",
            f"ansible_ssh_common_args='-o UserKnownHostsFile={known} -o GlobalKnownHostsFile=/dev/null'",
            "ansible_python_interpreter=/usr/bin/python3",
            extra,
            "",
        ]
        return "\n".join(lines)
