"""Kernel messages printed while a run goes on: /dev/kmsg read onward from where the log stood when the
run's counters opened, counting the lines that name a trap. What a device driver makes of a failed
mapping (a dropped packet, an I/O error) never says "swiotlb"; the kernel's own warning does.

kernel/dma/swiotlb.c, swiotlb_tbl_map_single, when no slots are free (dev_warn_ratelimited, so a
storm of them is thinned to about 10 lines each 5 s):
``<driver> <device>: swiotlb buffer is full (sz: %zd bytes), total %lu (slots), used %lu (slots)``
(before 5.0 without the totals). The count is a lower bound of the failed mappings.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

#: counter name (``kmsg.<name>``) -> the line it counts
PATTERNS = {"swiotlb_full": re.compile(r"swiotlb buffer is full \(sz: \d+ bytes\)")}


class KernelMessages:
    """Counts of the lines each pattern names since the reader opened (a running total: the counter
    session records its change over each execution). ``error`` says why nothing can be read."""

    def __init__(
        self,
        dev_root: str | Path = "/dev",
        patterns: dict[str, re.Pattern[str]] | None = None,
        missing: dict[str, str] | None = None,
    ):
        """``missing``: where to say, under "kmsg", why the log cannot be read (a counter session's)."""
        self.patterns = PATTERNS if patterns is None else patterns
        self.counts = dict.fromkeys(self.patterns, 0)
        self.error: str | None = None
        self.fd: int | None = None
        path = Path(dev_root) / "kmsg"
        try:
            self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            os.lseek(self.fd, 0, os.SEEK_END)  # what was printed before the run is not the run's
        except OSError as exc:
            self.close()
            self.error = (
                f"{path}: {exc.strerror} (reading the kernel log needs root or CAP_SYSLOG where "
                "kernel.dmesg_restrict is 1)"
            )
            if missing is not None:
                missing["kmsg"] = self.error

    def read(self) -> dict[str, float]:
        """Read every record printed since the last read; the running count per pattern."""
        while self.fd is not None:
            try:
                record = os.read(self.fd, 8192)  # /dev/kmsg: one record per read
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    continue  # records were overwritten before they were read: the next read goes on
                break
            if not record:
                break
            self._count(record.decode("utf-8", "replace"))
        if self.fd is None:
            return {}
        return {f"kmsg.{name}": float(count) for name, count in self.counts.items()}

    def _count(self, chunk: str) -> None:
        """Each record's text ("prio,seq,usec,flags;text"; its " KEY=value" continuation lines skipped)."""
        for line in chunk.splitlines():
            if line.startswith(" ") or ";" not in line:
                continue
            text = line.split(";", 1)[1]
            for name, pattern in self.patterns.items():
                if pattern.search(text):
                    self.counts[name] += 1

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
