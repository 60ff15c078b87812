"""Others' results as bundles: one adapter per format, behind one small interface.

Every source becomes executions of a bundle that ``show``, ``compare`` and ``report`` read like any
other. Nothing is invented: each sample says it was imported and from which file; the manifest says
what is unknown (no TEE evidence, no CPU model when the source lacks it) and what the user stated
(``--tee``, ``--kernel-cmdline``: see ``stated``); the source files are copied into the bundle's
``raw/sources/``, so the bundle holds what it was made from.

**The adapter interface.** ``REGISTRY`` maps a format's name to the module that implements it; the
module exposes ``ADAPTER``, an object with

- ``name: str``: the format's name (``ccbench import NAME``);
- ``description: str``: one line for ``ccbench import --help``;
- ``collect(paths: list[Path], label: str | None) -> list[Imported]``: read every source (absolute
  paths that exist) and return one ``Imported`` per bundle to write, raising ``ImportProblem`` (one
  line: which file, what is wrong, what to do) for a source it cannot read. One bundle is one
  machine: sources stating different machines are separate bundles, or an error under one label.

A format of one file per source uses ``base.FileFormat(name, description, read)``, where
``read(path) -> list[Execution]``; it expands directories and groups files by machine.
``Execution`` carries ``measurements`` (``ccbench.model.Measurement``) or, for many values,
``series`` (``base.Series``: values sharing metric, case and metadata, written without one object per
value). Names from a source become path components only through ``base.safe_component``. Tools'
native outputs are parsed in ``ccbench.formats`` (shared with ccbench's own workloads), not here.

``import_results(format_name, paths, out, label)`` reads everything first (a bad file stops the
import before anything is written), then writes each bundle through ``staging.write_bundle``
(invisible until complete: one rename).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from ccbench.results.importers.base import Execution, Imported, ImportProblem, Statements, safe_component

__all__ = [
    "REGISTRY",
    "Adapter",
    "Execution",
    "ImportProblem",
    "Imported",
    "adapter",
    "collect",
    "formats",
    "import_results",
    "safe_component",
]

#: format name -> module exposing ADAPTER (imported when used)
REGISTRY: dict[str, str] = {
    "fio": "ccbench.results.importers.fio",
    "pyperf": "ccbench.results.importers.pyperf",
    "hyperfine": "ccbench.results.importers.hyperfine",
    "seed000": "ccbench.results.importers.seed000",
    "iperf3": "ccbench.results.importers.iperf3",
    "ping": "ccbench.results.importers.ping",
    "cloud-hypervisor": "ccbench.results.importers.cloudhypervisor",
    "pts": "ccbench.results.importers.pts",
}


class Adapter(Protocol):
    name: str
    description: str

    def collect(self, paths: list[Path], label: str | None) -> list[Imported]: ...


def adapter(format_name: str) -> Adapter:
    if format_name not in REGISTRY:
        raise ImportProblem(f"unknown format {format_name!r}: choose one of {', '.join(REGISTRY)}")
    return importlib.import_module(REGISTRY[format_name]).ADAPTER


def formats() -> dict[str, str]:
    """{format name: its one-line description}, in the registry's order."""
    return {name: adapter(name).description for name in REGISTRY}


def collect(format_name: str, paths: Iterable[Path], label: str | None) -> list[Imported]:
    """Read every source; one Imported per bundle to write."""
    chosen = adapter(format_name)
    paths = [Path(p).absolute() for p in paths]
    if label is not None and ("," in label or "=" in label or not label.strip()):
        raise ImportProblem(f"--label {label!r}: one label, without ',' or '='")
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise ImportProblem(f"{missing[0]}: no such file or directory")
    return chosen.collect(paths, label)


def import_results(
    format_name: str,
    paths: Iterable[Path],
    out: Path,
    label: str | None = None,
    stated: dict[str, Any] | Statements | None = None,
    report: Callable[[str], None] | None = None,
) -> list[Path]:
    """Read everything first, then write one bundle per Imported; ``stated`` holds the facts the user
    stated: one dict for every bundle (``stated.stated_facts``), or ``stated.Statements`` (some per
    label: a label no bundle has is refused before anything is written); ``report`` is told what each
    bundle's sources say a reader must know (runs left out, and why; logs taken as one machine)."""
    from ccbench.results.importers.staging import write_bundle
    from ccbench.results.importers.stated import check_vendor

    bundles = collect(format_name, paths, label)
    statements = stated if isinstance(stated, Statements) else Statements(common=dict(stated or {}))
    statements.check(imported.label for imported in bundles)
    for imported in bundles:
        check_vendor(imported, statements)  # a TEE the stated CPU cannot run: refused before anything is written
    written = []
    for imported in bundles:
        written.append(write_bundle(imported, Path(out), statements.for_label(imported.label)))
        if imported.storage_protection and "storage_protection" not in statements.for_label(imported.label):
            if report:
                report(
                    f"{written[-1].name}: storage protection {imported.storage_protection}, "
                    f"{imported.storage_protection_source}"
                )
        for note in imported.notes if report else ():
            report(f"{written[-1].name}: {note}")
        for execution in imported.executions:
            for note in execution.notes if report else ():
                report(f"{written[-1].name}: {execution.workload} rep {execution.repetition}: {note}")
    return written
