"""Where the probe reads from: a root directory (live "/", a captured snapshot, or a test fixture)."""

from __future__ import annotations

import ctypes
import mmap
import os
import platform
import re
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
    #: a recorded CPUID dump of the snapshot's machine (``cpuid -r -1``), read where not live
    cpuid_file: Path | None = None
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


class UserCpuid:
    """CPUID executed by this process (unprivileged: user space may run CPUID; in a TDX or SEV-ES/SNP
    guest the guest kernel serves the #VE or #VC it raises): a few bytes of machine code in an
    executable anonymous mapping, called through ctypes."""

    #: push rbx; mov eax,edi; mov ecx,esi; mov r8,rdx; cpuid; mov [r8],eax; mov [r8+4],ebx;
    #: mov [r8+8],ecx; mov [r8+12],edx; pop rbx; ret (System V: leaf, subleaf, pointer to 4 u32)
    CODE = bytes.fromhex("5389f889f14989d00fa241890041895804418948084189500c5bc3")

    def __init__(self) -> None:
        self.error: str | None = None
        self._function = None
        self._map: mmap.mmap | None = None
        if platform.machine() not in ("x86_64", "AMD64"):
            self.error = f"CPUID is an x86 instruction (this is {platform.machine()})"
            return
        try:
            self._map = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
            self._map.write(self.CODE)
            address = ctypes.addressof(ctypes.c_char.from_buffer(self._map))
            prototype = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32))
            self._function = prototype(address)
        except (OSError, ValueError, TypeError) as exc:
            self.error = f"CPUID from user space unavailable: {exc} (an executable mapping refused?)"

    def __call__(self, leaf: int, subleaf: int = 0) -> tuple[int, int, int, int] | None:
        if self._function is None:
            return None
        registers = (ctypes.c_uint32 * 4)()
        self._function(leaf, subleaf, registers)
        return tuple(registers)  # type: ignore[return-value]

    def close(self) -> None:
        self._function = None  # the mapping stays until the process ends: a callable may still point at it


#: one line of ``cpuid -r -1`` (Todd Allen's cpuid): "   0x00000000 0x00: eax=0x... ebx=0x... ecx=0x... edx=0x..."
_CPUID_DUMP_LINE = re.compile(
    r"^\s*(0x[0-9a-fA-F]+) (0x[0-9a-fA-F]+): eax=(0x[0-9a-fA-F]+) ebx=(0x[0-9a-fA-F]+) "
    r"ecx=(0x[0-9a-fA-F]+) edx=(0x[0-9a-fA-F]+)"
)


class RecordedCpuid:
    """CPUID answers recorded on the machine a snapshot comes from, as ``cpuid -r -1`` prints them (the
    first CPU's block only: the leaves that tell a TEE are the same on every CPU)."""

    def __init__(self, path: Path):
        self.error: str | None = None
        self.answers: dict[tuple[int, int], tuple[int, int, int, int]] = {}
        try:
            text = Path(path).read_text(errors="replace")
        except OSError as exc:
            self.error = f"{path}: {exc.strerror}"
            return
        for line in text.splitlines():
            if re.match(r"^CPU \d+:", line) and self.answers and not line.startswith("CPU 0:"):
                break
            match = _CPUID_DUMP_LINE.match(line)
            if match:
                leaf, subleaf, *registers = (int(group, 16) for group in match.groups())
                self.answers.setdefault((leaf, subleaf), tuple(registers))  # type: ignore[arg-type]
        if not self.answers:
            self.error = f"{path}: no 'cpuid -r' lines (like '0x00000000 0x00: eax=0x... ebx=...')"

    def __call__(self, leaf: int, subleaf: int = 0) -> tuple[int, int, int, int] | None:
        return self.answers.get((leaf, subleaf))

    def close(self) -> None:
        return None


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
