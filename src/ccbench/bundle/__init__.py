"""The result bundle: one directory per run.

Layout (documented in docs/bundle-format.md)::

    <out>/<hostname>-<UTC timestamp>/
        manifest.json      format version, tool version, plan as run, probe, times, outcomes
        samples.jsonl      one Sample per line, appended and fsynced as measured (the journal)
        samples.parquet    the same samples as typed columns, written when the run ends
        executions.jsonl   one line per execution (ok / failed / timeout), used to resume
        raw/               each tool's own output and logs

The package's rooms: ``layout`` (the files' names, the format versions), ``journal`` (writing: the
journal and the manifest, resume), ``reader`` (reading, upgrading older formats, finding bundles),
``columnar`` (samples.parquet: the conversion from the journal, the columnar cache, the row-for-row
check) and ``digests`` (a file's SHA-256, the journal's). The names callers use are re-exported
here; ``columnar`` is not (it imports pyarrow: ``from ccbench.bundle.columnar import ...`` where it
is needed).
"""

from __future__ import annotations

from ccbench.bundle.journal import BundleWriter, bundle_dir_name, cut_torn_line, finish_samples, unused_path
from ccbench.bundle.layout import (
    CHUNK,
    EXECUTIONS,
    FINISHED_STATUSES,
    FORMAT_HISTORY,
    MANIFEST,
    RAW,
    SAMPLE_FIELDS,
    SAMPLES,
    SAMPLES_PARQUET,
)
from ccbench.bundle.reader import Bundle, bundle_holding, find_bundles, read_bundle

__all__ = [
    "CHUNK",
    "EXECUTIONS",
    "FINISHED_STATUSES",
    "FORMAT_HISTORY",
    "MANIFEST",
    "RAW",
    "SAMPLES",
    "SAMPLES_PARQUET",
    "SAMPLE_FIELDS",
    "Bundle",
    "BundleWriter",
    "bundle_dir_name",
    "bundle_holding",
    "cut_torn_line",
    "find_bundles",
    "finish_samples",
    "read_bundle",
    "unused_path",
]
