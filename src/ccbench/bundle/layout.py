"""What a bundle is on disk: its files' names and the format versions a reader upgrades from.

The layout itself is drawn in the package's docstring (ccbench.bundle) and in docs/bundle-format.md.
"""

from __future__ import annotations

MANIFEST = "manifest.json"
SAMPLES = "samples.jsonl"
EXECUTIONS = "executions.jsonl"
#: the samples as Parquet, written when a run ends (ccbench.bundle.columnar)
SAMPLES_PARQUET = "samples.parquet"
#: records parsed at once when a bundle's samples are read in chunks
CHUNK = 16384
RAW = "raw"

#: what each bundle format version changed (also in docs/bundle-format.md)
FORMAT_HISTORY = {
    1: "first format: manifest.json, samples.jsonl, executions.jsonl, raw/",
    2: "every sample names its execution ('execution': the execution key) and that execution's raw "
    "directory relative to the bundle ('raw'), and says whether it was measured on a busy machine "
    "('contended'); execution records may carry 'interference', 'contended', 'contended_reasons'",
}

#: the fields every sample record of the journal has
SAMPLE_FIELDS = ("workload", "params", "variant", "metric", "unit", "value", "repetition", "warmup", "timestamp")

#: manifest statuses of a bundle whose run has ended (a bundle without one predates the status)
FINISHED_STATUSES = ("complete", "failed", None)
