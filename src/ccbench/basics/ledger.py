"""Record before make: the durable list of what ccbench made outside its own files.

Anything that mounts, attaches, creates a namespace or starts a server writes an entry here
*before* it acts, so that a run killed at any point leaves a list that the next run (or
``ccbench cleanup``) can undo. Storage variants, emulated hosts and the microservices chain each
keep one ledger file; what an entry means, and how to undo it, is theirs to say.

The file is JSON, replaced atomically on every change: ``{"entries": [...], ...header}``. Older
state files that were a bare list of entries are read too.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ccbench.basics.fsutil import write_json_atomic


def read_entries(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(entries, header) of a ledger file; a missing or unreadable file is an empty ledger, since a
    run can be killed before or while it writes its first entry."""
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return [], {}
    if isinstance(document, list):
        return [e for e in document if isinstance(e, dict)], {}
    if not isinstance(document, dict):
        return [], {}
    entries = document.get("entries", [])
    header = {k: v for k, v in document.items() if k != "entries"}
    return [e for e in entries if isinstance(e, dict)], header


class Ledger:
    """The entries of one file, kept in memory and written through on every change (thread-safe:
    the parties of a federation are started from several threads)."""

    def __init__(self, path: Path, header: Mapping[str, Any] | None = None, *, load: bool = False):
        self.path = Path(path)
        self.header: dict[str, Any] = dict(header or {})
        self.entries: list[dict[str, Any]] = []
        self._mutex = threading.RLock()
        if load:
            self.entries, stored = read_entries(self.path)
            self.header = {**stored, **self.header}

    def save(self) -> None:
        with self._mutex:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.path, {**self.header, "entries": self.entries}, indent=1)

    def record(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Append ``entry`` and make it durable; call this before making the thing it names."""
        with self._mutex:
            self.entries.append(entry)
            self.save()
            return entry

    def update(self, entry: dict[str, Any], **fields: Any) -> None:
        """Add what became known after making it (a pid, a device name)."""
        with self._mutex:
            entry.update(fields)
            self.save()

    def set_header(self, **fields: Any) -> None:
        with self._mutex:
            self.header.update(fields)
            self.save()

    def forget(self, matches: Callable[[dict[str, Any]], bool]) -> None:
        """Drop the entries of things that are gone (undone on purpose)."""
        with self._mutex:
            self.entries = [e for e in self.entries if not matches(e)]
            self.save()

    def of_kind(self, *kinds: str) -> list[dict[str, Any]]:
        return [e for e in self.entries if e.get("kind") in kinds]

    def undo(self, undo_entry: Callable[[dict[str, Any]], list[str]]) -> list[str]:
        """Undo every entry, newest first (what was made last may depend on what came before);
        returns what was done. One entry failing does not keep the others from being undone."""
        done: list[str] = []
        with self._mutex:
            for entry in reversed(self.entries):
                try:
                    done += undo_entry(entry)
                except OSError as exc:
                    done.append(f"could not undo {entry.get('kind', 'entry')}: {exc}")
            self.entries = []
            self.save()
        return done
