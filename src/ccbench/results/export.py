"""ccbench export: every sample of some bundles as one table, joined with its machine's facts,
written as Parquet or CSV for pandas, DuckDB, R (arrow), Spark or BigQuery. The columns are
documented in docs/bundle-format.md ("Export")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ccbench.bundle import Bundle
from ccbench.errors import CCBenchError

FORMATS = ("parquet", "csv")


def machine_facts(bundle: Bundle) -> dict[str, Any]:
    """The machine facts joined to each of the bundle's samples (docs/bundle-format.md, Export)."""
    probe = bundle.probe
    return {
        "tee_technology": (probe.get("tee") or {}).get("technology") or "unknown",
        "cpu_model": (probe.get("cpu") or {}).get("model"),
        "cpu_threads": (probe.get("cpu") or {}).get("threads"),
        "memory_bytes": (probe.get("memory") or {}).get("total_bytes"),
        "kernel_release": (probe.get("kernel") or {}).get("release"),
        "virtualization": probe.get("virtualization"),
        "storage_protection": (probe.get("storage") or {}).get("protection"),
        "hostname": probe.get("hostname"),
        "ccbench_version": (bundle.manifest.get("tool") or {}).get("version"),
        "bundle_started_at": bundle.manifest.get("started_at"),
        "imported": bool(bundle.manifest.get("imported")),
        **provenance_columns(bundle),
    }


#: export columns of whole numbers that may be missing (nullable Int64, not float)
INTEGER_COLUMNS = ("cpu_threads", "memory_bytes", "swiotlb_bytes", "page_size", "hugepages_total", "vcpus", "snp_vmpl")
#: flags that may be missing in every row (a bundle without evidence): boolean all the same
BOOLEAN_COLUMNS = (
    "smt",
    "tee_evidence_verified",
    "tee_debug",
    "snp_smt_allowed",
    "snp_migrate_ma",
    "snp_platform_smt",
    "snp_platform_tsme",
    "tdx_sept_ve_disable",
)


def provenance_columns(bundle: Bundle) -> dict[str, Any]:
    """The bundle's CC provenance (probe and evidence, docs/bundle-format.md) as flat columns."""
    import json

    from ccbench.attestation.provenance import bundle_provenance

    provenance = bundle_provenance(bundle.path, bundle.probe)
    swiotlb, thp = provenance["swiotlb"] or {}, provenance["thp"] or {}
    evidence = provenance["tee_evidence"] or {}
    snp = evidence if evidence.get("technology") == "sev-snp" else {}
    tdx = evidence if evidence.get("technology") == "tdx" else {}
    policy, platform, attributes = (
        snp.get("policy") or {},
        snp.get("platform_info") or {},
        tdx.get("td_attributes") or {},
    )

    def tcb(value):
        return json.dumps(value, sort_keys=True) if value else None

    return {
        "kernel_cmdline": provenance["kernel_cmdline"],
        "swiotlb_bytes": swiotlb.get("bytes"),
        "swiotlb_source": swiotlb.get("source"),
        "page_size": provenance["page_size"],
        "thp_enabled": thp.get("enabled"),
        "thp_defrag": thp.get("defrag"),
        "hugepages_total": provenance["hugepages_total"],
        "vcpus": provenance["vcpus"],
        "smt": provenance["smt"],
        "microcode": provenance["microcode"],
        "hypervisor": provenance["hypervisor"],
        "tdx_idle": provenance["tdx_idle"],
        "tee_evidence_verified": evidence.get("verified"),
        "tee_debug": policy.get("debug") if snp else attributes.get("debug"),
        "snp_policy": policy.get("raw"),
        "snp_smt_allowed": policy.get("smt"),
        "snp_migrate_ma": policy.get("migrate_ma"),
        "snp_vmpl": snp.get("vmpl"),
        "snp_reported_tcb": tcb(snp.get("reported_tcb")),
        "snp_current_tcb": tcb(snp.get("current_tcb")),
        "snp_platform_info": platform.get("raw"),
        "snp_platform_smt": platform.get("smt_enabled"),
        "snp_platform_tsme": platform.get("tsme_enabled"),
        "tdx_tee_tcb_svn": tdx.get("tee_tcb_svn"),
        "tdx_mrseam": tdx.get("mrseam"),
        "tdx_td_attributes": attributes.get("raw"),
        "tdx_sept_ve_disable": attributes.get("sept_ve_disable"),
    }


def export_table(paths, labels: dict[str, str] | None = None) -> pd.DataFrame:
    """The samples of every bundle under ``paths`` (warmups included, flagged), one row each."""
    from ccbench.analysis.load import frame_from_bundles, load_bundles

    bundles = load_bundles(distinct_bundles(paths), samples=False)
    frame = frame_from_bundles(bundles, labels or {})
    facts = pd.DataFrame([{"bundle": str(b.path), **machine_facts(b)} for b in bundles])
    frame = frame.merge(facts, on="bundle", how="left", validate="many_to_one")
    frame.insert(0, "label", frame.pop("machine"))
    frame = frame.drop(columns=["tee"])  # the same as tee_technology, which says what it is
    for name in INTEGER_COLUMNS:
        frame[name] = frame[name].astype("Int64")
    for name in BOOLEAN_COLUMNS:
        frame[name] = frame[name].astype("boolean")
    for name in ("timestamp", "bundle_started_at"):
        frame[name] = pd.to_datetime(frame[name], utc=True, format="ISO8601", errors="coerce")
    return _typed(frame.reset_index(drop=True))


def distinct_bundles(paths) -> list[Path]:
    """The finished bundles under ``paths``, each once (named twice, or named and found under a
    directory also named), in the order first given."""
    from ccbench.bundle import find_bundles

    seen: dict[Path, Path] = {}
    for path in find_bundles(paths, finished_only=True):
        seen.setdefault(path.resolve(), path)
    if not seen:
        raise CCBenchError(f"{', '.join(map(str, paths))}: no finished bundle in it")
    return list(seen.values())


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Every column with one type, also where all its values are missing (a column of None would
    otherwise reach Parquet as the null type, which R and Spark read badly): flags as nullable
    booleans, everything else of Python objects as text."""
    for name in frame.columns:
        if frame[name].dtype != object:
            continue
        present = frame[name].dropna()
        if len(present) and all(isinstance(v, bool) for v in present):
            frame[name] = frame[name].astype("boolean")
        else:
            frame[name] = frame[name].astype("string")
    return frame


def check_output(out: Path, format_name: str, force: bool) -> Path:
    """Refuse an output that would replace a file unasked, land in a bundle, or cannot be written."""
    from ccbench.bundle import bundle_holding

    if format_name not in FORMATS:
        raise CCBenchError(f"--format {format_name!r}: choose parquet or csv")
    out = Path(out)
    if out.is_dir():
        raise CCBenchError(f"-o {out}: is a directory; give a file name (e.g. samples.{format_name})")
    if not out.parent.exists():
        raise CCBenchError(f"-o {out}: the directory {out.parent} does not exist")
    holder = bundle_holding(out.parent)
    if holder is not None:
        raise CCBenchError(f"-o {out}: inside the bundle {holder}, which must stay as it was: write it elsewhere")
    if out.exists() and not force:
        raise CCBenchError(f"-o {out}: exists; give another name, or --force to replace it")
    return out


def write(frame: pd.DataFrame, out: Path, format_name: str, force: bool = False) -> Path:
    """Write to a temporary file of this process beside ``out`` and make it ``out`` by one rename
    (or one hard link without ``force``, so of two exports to one new name one wins whole and the
    other is refused): never half a table, never two tables mixed. A killed export's temporary file
    is removed by the next export to that directory."""
    import pyarrow as pa

    from ccbench.fsutil import staged_file

    out = check_output(out, format_name, force)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    # plain UTF-8 strings (pandas hands Arrow its 64-bit-offset variant, which older readers lack)
    table = table.cast(
        pa.schema([pa.field(f.name, pa.string() if pa.types.is_large_string(f.type) else f.type) for f in table.schema])
    )
    try:
        with staged_file(out, replace=force) as temporary:
            if format_name == "parquet":
                import pyarrow.parquet as pq

                pq.write_table(table, temporary, compression="zstd")
            else:
                import pyarrow.csv as pcsv

                pcsv.write_csv(table, temporary)
    except FileExistsError:
        raise CCBenchError(f"-o {out}: another process wrote it meanwhile; give another name, or --force") from None
    except OSError as exc:
        raise CCBenchError(f"-o {out}: cannot write it ({exc.strerror or exc})") from None
    return out
