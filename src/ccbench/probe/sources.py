"""Where the probe reads from: a root directory (live "/", a captured snapshot, or a test fixture)."""

from __future__ import annotations

import os
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Sources:
    root: Path = Path("/")
    #: a kernel log file; None on a live machine means "ask dmesg"
    dmesg_file: Path | None = None
    #: False when probing a root other than "/": CPUID and MSR describe *this* CPU, not the snapshot
    live: bool = True
    problems: list[str] = field(default_factory=list)

    def path(self, absolute: str) -> Path:
        return self.root / absolute.lstrip("/")

    def read_text(self, absolute: str) -> str | None:
        try:
            return self.path(absolute).read_text(errors="replace")
        except OSError:
            return None

    def exists(self, absolute: str) -> bool:
        try:
            return os.path.lexists(self.path(absolute))
        except OSError:
            return False

    _kernel_log: str | None = None
    _kernel_log_read: bool = False

    def kernel_log(self) -> tuple[str | None, str]:
        """The kernel log and where it came from (or why it is missing)."""
        if self._kernel_log_read:
            return self._kernel_log, self._kernel_log_origin
        self._kernel_log_read = True
        if self.dmesg_file is not None:
            try:
                self._kernel_log = Path(self.dmesg_file).read_text(errors="replace")
                self._kernel_log_origin = str(self.dmesg_file)
            except OSError as exc:
                self._kernel_log_origin = f"{self.dmesg_file}: {exc.strerror}"
        elif self.live:
            try:
                done = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10)
                if done.returncode == 0 and done.stdout:
                    self._kernel_log = done.stdout
                    self._kernel_log_origin = "dmesg"
                else:
                    self._kernel_log_origin = f"dmesg: {done.stderr.strip() or 'no output'} (needs root?)"
            except (OSError, subprocess.TimeoutExpired) as exc:
                self._kernel_log_origin = f"dmesg unavailable: {exc}"
        else:
            self._kernel_log_origin = "no kernel log given (use --dmesg FILE)"
        return self._kernel_log, self._kernel_log_origin


class CpuidReader:
    """CPUID through the Linux cpuid driver (/dev/cpu/0/cpuid, root): pread at offset leaf | subleaf << 32."""

    def __init__(self, device: str = "/dev/cpu/0/cpuid"):
        self.device = device
        self.error: str | None = None
        self._fd: int | None = None
        try:
            self._fd = os.open(device, os.O_RDONLY)
        except OSError as exc:
            self.error = f"{device}: {exc.strerror} (load the cpuid module and run as root)"

    def __call__(self, leaf: int, subleaf: int = 0) -> tuple[int, int, int, int] | None:
        if self._fd is None:
            return None
        try:
            data = os.pread(self._fd, 16, leaf | (subleaf << 32))
        except OSError:
            return None
        if len(data) != 16:
            return None
        return struct.unpack("<4I", data)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_msr(register: int, device: str = "/dev/cpu/0/msr") -> tuple[int | None, str | None]:
    try:
        fd = os.open(device, os.O_RDONLY)
    except OSError as exc:
        return None, f"{device}: {exc.strerror} (load the msr module and run as root)"
    try:
        data = os.pread(fd, 8, register)
        return struct.unpack("<Q", data)[0], None
    except OSError as exc:
        return None, f"{device} register {register:#x}: {exc.strerror}"
    finally:
        os.close(fd)
