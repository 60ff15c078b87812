"""One arm's guest: launched, waited for, stopped, and found again after a controller that died.

Before QEMU starts, the guest is entered in a machine-wide index (``/run/ccbench/guests/<rid>.json``,
``$CCBENCH_GUEST_INDEX`` elsewhere) with its run directory, and the owner holds a lock on the entry
while it lives. QEMU runs in a session of its own (a Ctrl-C in the terminal reaches ccbench, which
stops the guest itself) and writes its pid file into the run directory. ``stop`` ends QEMU
(SIGTERM: QEMU quits as on its monitor's ``quit``; SIGKILL after a grace period), removes the
overlay, the sockets and the fw_cfg files, and leaves the index; the console log and QEMU's own log
stay in the run directory. ``sweep`` does the same for every entry whose lock nobody holds, and kills
a process only when its command line names that entry's run directory (so a pid reused by another
program is never touched). Networking is QEMU's user mode: no tap, bridge or lease exists to clean.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ccbench.basics.errors import EnvironmentProblem
from ccbench.basics.fsutil import write_json_atomic

INDEX_ROOT = Path("/run/ccbench/guests")
INDEX_ENV = "CCBENCH_GUEST_INDEX"
READY = "ccbench-guest: ready"
#: what stop removes from a run directory (the console and QEMU logs stay)
SCRATCH = ("overlay.qcow2", "qemu.pid", "fw_cfg")
#: seconds a monitor command may take (stop, cont and query-cpus-fast answer at once)
QMP_TIMEOUT_S = 30.0


def index_root() -> Path:
    """The machine-wide index (root), or the user's own: a user who is not root can launch guests
    under TCG too, and cannot write /run/ccbench."""
    given = os.environ.get(INDEX_ENV)
    if given:
        return Path(given)
    if os.geteuid() == 0:
        return INDEX_ROOT
    return Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()) / f"ccbench-{os.geteuid()}" / "guests"


#: the SSH forward of ``info usernet`` (QEMU's user-mode network): "TCP[HOST_FORWARD] FD host-address
#: host-port guest-address 22 ..."
_HOST_FORWARD = re.compile(r"TCP\[HOST_FORWARD\]\s+\d+\s+(\S+)\s+(\d+)\s+\S+\s+22\b")


def forwarded_port(usernet: str) -> int | None:
    """The host port QEMU bound for the guest's SSH (``info usernet``); None when it lists none."""
    match = _HOST_FORWARD.search(usernet)
    return int(match.group(2)) if match and int(match.group(2)) else None


@dataclass
class Guest:
    name: str
    run_dir: Path
    #: the host's loopback port forwarded to the guest's SSH: QEMU binds one itself (port 0), read back
    #: by ``read_ssh_port`` (no port is probed free and released before QEMU binds it: another program
    #: could take it meanwhile)
    ssh_port: int = 0
    #: the work directory of the study that launched it: ``ccbench cleanup --workdir`` stops only its own
    workdir: Path | None = None
    rid: str = field(default_factory=lambda: secrets.token_hex(3))
    process: subprocess.Popen | None = None
    started: float = 0.0
    ready_s: float | None = None
    _lock: IO | None = None

    @property
    def serial_log(self) -> Path:
        return self.run_dir / "console.log"

    @property
    def qmp_socket(self) -> Path:
        """QEMU's monitor socket: in a short directory of its own (a socket path has at most 107
        bytes, and a study's run directory can be longer)."""
        return socket_dir(self.rid) / "qmp.sock"

    @property
    def entry(self) -> Path:
        return index_root() / f"{self.rid}.json"

    def record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "run_dir": str(self.run_dir.resolve()),
            "ssh_port": self.ssh_port,
            "pid": self.process.pid if self.process else None,
            "owner_pid": os.getpid(),
            "workdir": str(self.workdir.resolve()) if self.workdir else None,
        }

    # -- life cycle
    def enter(self) -> None:
        """Recorded before anything is made."""
        index_root().mkdir(parents=True, exist_ok=True)
        self._lock = open(index_root() / f"{self.rid}.lock", "a+")
        fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        write_json_atomic(self.entry, self.record())
        socket_dir(self.rid).mkdir(mode=0o700, exist_ok=True)

    def start(self, argv: list[str]) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self._lock is None:
            self.enter()
        log = open(self.run_dir / "qemu.log", "ab")
        try:
            self.started = time.monotonic()
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, cwd=self.run_dir
            )
        finally:
            log.close()
        write_json_atomic(self.entry, self.record())

    def read_ssh_port(self, timeout_s: float = QMP_TIMEOUT_S) -> int:
        """The port QEMU bound for the SSH forward, asked over its monitor (``info usernet``) as soon
        as the monitor answers; kept in the guest's index entry."""
        deadline = time.monotonic() + timeout_s
        while True:
            self._exited_during_boot()
            if not self.qmp_socket.exists() and time.monotonic() < deadline:
                time.sleep(0.05)  # QEMU makes its monitor's socket as it starts (asking earlier logs errors)
                continue
            try:
                usernet = self.qmp("human-monitor-command", **{"command-line": "info usernet"})
            except EnvironmentProblem:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
                continue
            port = forwarded_port(usernet or "")
            if port is None:
                raise EnvironmentProblem(
                    f"guest {self.name}: QEMU lists no SSH forward in 'info usernet' ({(usernet or '').strip()[:200]!r})"
                )
            self.ssh_port = port
            write_json_atomic(self.entry, self.record())
            return port

    def _exited_during_boot(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise EnvironmentProblem(
                f"guest {self.name}: QEMU exited with {self.process.returncode} during boot: "
                f"{self._last_line(self.run_dir / 'qemu.log')}; its console's last line: "
                f"{self._last_line(self.serial_log)!r} (see {self.run_dir / 'qemu.log'} and {self.serial_log})"
            )

    def wait_ready(
        self, ssh: Callable[[], bool], timeout_s: float, on_wait: Callable[[float], None] | None = None
    ) -> float:
        """Seconds from start until the guest's init said ready and SSH answered; a guest that dies or
        never answers is an error naming its console's last line."""
        deadline = self.started + timeout_s
        said_ready = False
        while time.monotonic() < deadline:
            self._exited_during_boot()
            said_ready = said_ready or READY in self._console()
            if said_ready and ssh():
                self.ready_s = time.monotonic() - self.started
                return self.ready_s
            if on_wait:
                on_wait(time.monotonic() - self.started)
            time.sleep(0.5)
        what = "SSH did not answer" if said_ready else "its init never said ready"
        raise EnvironmentProblem(
            f"guest {self.name}: {what} within {timeout_s:.0f} s; its console's last line: "
            f"{self._last_line(self.serial_log)!r} (see {self.serial_log})"
        )

    def stop(self, grace_s: float = 10.0) -> list[str]:
        done = []
        if self.process is not None and self.process.poll() is None:
            _end(self.process.pid, grace_s, lambda: self.process.poll() is not None)
            done.append(f"stopped guest {self.name} (QEMU pid {self.process.pid})")
        _remove_scratch(self.run_dir)
        shutil.rmtree(socket_dir(self.rid), ignore_errors=True)
        if self._lock is not None:
            self.entry.unlink(missing_ok=True)
            Path(self._lock.name).unlink(missing_ok=True)
            self._lock.close()
            self._lock = None
        return done

    def qmp(self, command: str, **arguments: Any) -> Any:
        """One command on the guest's QEMU monitor (QMP, through the QEMU project's own client,
        qemu.qmp); its return value. A refusal or a monitor that does not answer is an error naming
        the guest."""
        try:
            from qemu.qmp import QMPError
            from qemu.qmp.legacy import QEMUMonitorProtocol
        except ImportError:
            raise EnvironmentProblem(
                "the QMP client (qemu.qmp) is not installed: run bash scripts/setup.sh --with machines"
            ) from None
        monitor = QEMUMonitorProtocol(str(self.qmp_socket))
        try:
            monitor.connect(negotiate=True)
            monitor.settimeout(QMP_TIMEOUT_S)
            return monitor.cmd(command, **arguments)
        except (QMPError, OSError, TimeoutError) as exc:
            raise EnvironmentProblem(f"guest {self.name}: QEMU's monitor refused {command}: {exc}") from None
        finally:
            try:
                monitor.close()
            except (QMPError, OSError, EOFError):
                pass  # a monitor that went away while closing has nothing more to say

    def _console(self) -> str:
        try:
            return self.serial_log.read_text(errors="replace")
        except OSError:
            return ""

    @staticmethod
    def _last_line(path: Path) -> str:
        try:
            lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return "no output"
        return lines[-1][:200] if lines else "no output"


def _end(pid: int, grace_s: float, gone: Callable[[], bool]) -> None:
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if gone():
                return
            time.sleep(0.05)


def socket_dir(rid: str) -> Path:
    return Path(tempfile.gettempdir()) / f"ccbench-guest-{rid}"


def _remove_scratch(run_dir: Path) -> None:
    for name in SCRATCH:
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _names(pid: int, run_dir: str) -> bool:
    """Whether process ``pid`` is a QEMU of this run directory (its command line names it)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(run_dir.encode() in part for part in argv)


def _pid_of(record: dict[str, Any]) -> int | None:
    pid = record.get("pid")
    if pid is None:
        try:
            pid = int((Path(record["run_dir"]) / "qemu.pid").read_text().strip())
        except (OSError, ValueError):
            return None
    return int(pid)


def sweep(workdir: Path) -> list[str]:
    """Stop the guests (and remove the overlays) of entries whose owner is gone and which ``workdir``
    owns: their record names it, or no work directory (an entry of an older ccbench, which nothing
    else would ever claim). Guests of another work directory's studies are left to that one."""
    root = index_root()
    removed: list[str] = []
    if not root.is_dir():
        return removed
    for entry in sorted(root.glob("*.json")):
        try:
            owned_by = json.loads(entry.read_text()).get("workdir")
        except (OSError, ValueError, AttributeError):
            owned_by = None  # unreadable: swept below if its owner is gone
        if owned_by is not None and owned_by != str(workdir.resolve()):
            continue
        lock_path = entry.with_suffix(".lock")
        with open(lock_path, "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its owner lives
            try:
                record = json.loads(entry.read_text())
            except (OSError, ValueError):
                record = None
            if record:
                pid = _pid_of(record)
                if pid and _names(pid, record["run_dir"]):
                    _end(pid, 10.0, lambda pid=pid: not Path(f"/proc/{pid}").exists() or _zombie(pid))
                    removed.append(f"stopped guest {record.get('name')} (QEMU pid {pid}) left by a run that died")
                _remove_scratch(Path(record["run_dir"]))
            shutil.rmtree(socket_dir(entry.stem), ignore_errors=True)
            entry.unlink(missing_ok=True)
        lock_path.unlink(missing_ok=True)
    return removed


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


def ssh_probe(port: int, key: Path, known_hosts: Path) -> Callable[[], bool]:
    """A check that the guest's sshd answers with the host key it was given (strict checking)."""

    def answer() -> bool:
        done = subprocess.run(
            [*ssh_command(port, key, known_hosts), "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
        )
        return done.returncode == 0

    return answer


def ssh_options(key: Path, known_hosts: Path) -> list[str]:
    return [
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        f"UserKnownHostsFile={known_hosts}",
        "-o",
        "ConnectTimeout=5",
        "-i",
        str(key),
    ]


def ssh_command(port: int, key: Path, known_hosts: Path) -> list[str]:
    return ["ssh", "-q", *ssh_options(key, known_hosts), "-p", str(port), "root@127.0.0.1"]


def keygen(path: Path, comment: str) -> str:
    """An ed25519 key pair at ``path``; its public line."""
    path.unlink(missing_ok=True)
    Path(f"{path}.pub").unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], check=True, capture_output=True
    )
    return Path(f"{path}.pub").read_text().strip()
