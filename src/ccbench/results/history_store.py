"""The history store's declared schema and its two forms: one DuckDB file, or a directory of
Parquet files partitioned by date and machine label (``DIR/date=YYYY-MM-DD/label=NAME/<run>.parquet``).

The columns and their types are written here, never inferred from the first bundle added (an
imported bundle, whose kernel and CPU are unknown, would otherwise fix them as the null type). A
store records its schema version: the DuckDB file in a ``ccbench_history`` table, the directory in
``ccbench-history.json``. A store made before versions (version 1: the first 20 columns, types
inferred) is read as version 2 and migrated when something is next added to it.

What a reader takes in: only committed rows (DuckDB, one transaction per ``history add``) and only
partition files named ``<run id>.parquet`` in ``date=``/``label=`` directories (each added by one
link of a staged, fsynced file; a killed add's staged file is a dot file, cleaned by the next add
once its writer is provably gone). File names and run ids are checked as what they must be
(hex digests), never used as patterns.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from ccbench.errors import CCBenchError, EnvironmentProblem

SCHEMA_VERSION = 3
#: the store's marker file (Parquet form) and table (DuckDB form)
MARKER = "ccbench-history.json"
META_TABLE = "ccbench_history"
#: columns of version 1, the layout before versions
V1_COLUMNS = [
    "run_id", "bundle", "label", "config", "workload", "case", "params", "metric", "unit", "better",
    "started_at", "median", "n", "contended", "kernel_release", "ccbench_version", "cpu_model",
    "microcode", "tee_technology", "plan",
]  # fmt: skip
#: the CC provenance of the run (docs/bundle-format.md, "provenance"; the export's columns), as text:
#: what a change point names when it moved
PROVENANCE = [
    "kernel_cmdline", "swiotlb_bytes", "swiotlb_source", "page_size", "thp_enabled", "thp_defrag",
    "hugepages_total", "vcpus", "smt", "hypervisor", "tdx_idle", "tee_debug", "snp_policy",
    "snp_smt_allowed", "snp_migrate_ma", "snp_vmpl", "snp_reported_tcb", "snp_current_tcb",
    "snp_platform_info", "snp_platform_smt", "snp_platform_tsme", "tdx_tee_tcb_svn", "tdx_mrseam",
    "tdx_td_attributes", "tdx_sept_ve_disable", "clocksource", "swiotlb_dynamic",
]  # fmt: skip
_TYPES = {"started_at": "TIMESTAMPTZ", "median": "DOUBLE", "n": "BIGINT", "contended": "BOOLEAN"}
#: every column of version 2 with its DuckDB type (text unless named in _TYPES)
SCHEMA = {name: _TYPES.get(name, "VARCHAR") for name in [*V1_COLUMNS, *PROVENANCE]}
COLUMNS = list(SCHEMA)
#: a run id: the bundle's digest over its files, or its journal's SHA-256, recomputed by ccbench
RUN_ID = re.compile(r"^(bundle|journal)-[0-9a-f]{64}$")
_DATE_DIR = re.compile(r"^date=(\d{4}-\d{2}-\d{2}|unknown)$")
_REQUIRED_V1 = {"run_id", "label", "config", "workload", "case", "metric", "unit", "started_at", "median"}
#: what makes one series: the machine label, the plan, the fingerprint (the plan's name, the workload
#: and its parameters: prime with n = 30000 is another series than with n = 100000), the
#: configuration, the case and the metric; runs of another plan or parameters never join a series
SERIES_KEY = ["label", "plan", "fingerprint", "config", "workload", "case", "metric"]


def arrow_schema():
    import pyarrow as pa

    kinds = {
        "VARCHAR": pa.string(),
        "DOUBLE": pa.float64(),
        "BIGINT": pa.int64(),
        "BOOLEAN": pa.bool_(),
        "TIMESTAMPTZ": pa.timestamp("us", tz="UTC"),
    }
    return pa.schema([pa.field(name, kinds[kind]) for name, kind in SCHEMA.items()])


def conform(table):
    """An Arrow table of the declared schema from one of any older or partial shape: present columns
    cast, missing ones null, extra ones dropped."""
    import pyarrow as pa

    columns = []
    for field in arrow_schema():
        if field.name in table.column_names:
            column = table.column(field.name)
            if pa.types.is_timestamp(field.type) and pa.types.is_string(column.type):
                column = pa.array(pd.to_datetime(column.to_pandas(), utc=True), type=field.type)
            columns.append(column.cast(field.type))
        else:
            columns.append(pa.nulls(len(table), field.type))
    return pa.Table.from_arrays(columns, schema=arrow_schema())


def points_table(points: pd.DataFrame):
    import pyarrow as pa

    frame = points.reindex(columns=COLUMNS)
    frame["started_at"] = pd.to_datetime(frame["started_at"], utc=True)
    return pa.Table.from_pandas(frame, schema=arrow_schema(), preserve_index=False)


def fingerprint(plan, workload, params) -> str:
    """The series' identity beyond its names: a digest of the plan's name, the workload's name and
    its parameters (JSON read and written again with sorted keys, so that the spelling of one
    store's writer does not split a series); 12 hex digits."""
    import hashlib
    import json

    try:
        parsed = json.loads(params) if isinstance(params, str) else params
    except ValueError:
        parsed = params
    text = json.dumps([_key_text(plan), _key_text(workload), parsed], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _key_text(value) -> str:
    return value if isinstance(value, str) else ""


def with_series_key(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with its series key columns as text ("" where a store of an older writer has no
    value: such rows form series of their own) and its ``fingerprint``."""
    out = frame.copy()
    for column in ("label", "plan", "config", "workload", "case", "metric"):
        out[column] = out[column].map(_key_text) if len(out) else out[column].astype(object)
    out["fingerprint"] = [
        fingerprint(plan, workload, params)
        for plan, workload, params in zip(out["plan"], out["workload"], out["params"], strict=True)
    ]
    return out


def empty_frame() -> pd.DataFrame:
    return arrow_schema().empty_table().to_pandas()


def _duckdb():
    try:
        import duckdb
    except ImportError:
        raise EnvironmentProblem(
            "the history store needs DuckDB, which is not installed: bash scripts/setup.sh --with history"
        ) from None
    return duckdb


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class Store:
    """A DuckDB file, or (a path ending in '/', or an existing directory) Parquet partitions."""

    def __init__(self, path: Path | str):
        text = str(path)
        self.path = Path(text)
        self.partitioned = text.endswith("/") or self.path.is_dir()

    # ----------------------------------------------------------------------------------- checks
    def check(self) -> int | None:
        """The store's schema version (None: nothing there yet); a one-line error for a path that is
        not a history store, so nothing is ever written into someone else's directory or database."""
        from ccbench.bundle import bundle_holding

        holder = bundle_holding(self.path if self.path.exists() else self.path.parent)
        if holder is not None:
            raise CCBenchError(f"--store {self.path}: inside the bundle {holder}; give a store outside bundles")
        if self.partitioned:
            return self._check_directory()
        if not self.path.exists():
            return None
        with self._connect(read_only=True) as db:
            return self._check_database(db)

    def _check_directory(self) -> int | None:
        import json

        if not self.path.exists():
            return None
        if not self.path.is_dir():
            raise CCBenchError(f"--store {self.path}: a file, not a directory of Parquet partitions")
        marker = self.path / MARKER
        if marker.exists():
            try:
                document = json.loads(marker.read_text(encoding="utf-8"))
                version = int(document["schema_version"])
            except (OSError, ValueError, KeyError, TypeError):
                raise CCBenchError(f"{marker}: unreadable; is {self.path} a ccbench history store?") from None
            return self._known_version(version)
        foreign = sorted(n for n in (p.name for p in self.path.iterdir()) if not _DATE_DIR.match(n))
        if foreign:
            raise CCBenchError(
                f"--store {self.path}: not a ccbench history store (it holds {foreign[0]!r}, no {MARKER}); "
                "give a new or empty directory"
            )
        return 1 if any(self.path.iterdir()) else None

    def _check_database(self, db) -> int | None:
        tables = {row[0] for row in db.execute("select table_name from information_schema.tables").fetchall()}
        if not tables:
            return None  # made by an add that never committed: still empty
        if "runs" not in tables:
            raise CCBenchError(
                f"--store {self.path}: a DuckDB file of something else (tables: {', '.join(sorted(tables))}); "
                "give another path"
            )
        columns = {row[0] for row in db.execute("select column_name from information_schema.columns "
                                                 "where table_name = 'runs'").fetchall()}  # fmt: skip
        missing = sorted(_REQUIRED_V1 - columns)
        if missing:
            raise CCBenchError(
                f"--store {self.path}: its runs table is not a history store's (no {', '.join(missing)})"
            )
        if META_TABLE not in tables:
            return 1
        rows = db.execute(f"select value from {META_TABLE} where key = 'schema_version'").fetchall()
        try:
            return self._known_version(int(rows[0][0]))
        except (TypeError, ValueError, IndexError):
            raise CCBenchError(f"--store {self.path}: its schema version is unreadable") from None

    def _known_version(self, version: int) -> int:
        if version > SCHEMA_VERSION or version < 1:
            raise CCBenchError(
                f"--store {self.path}: schema version {version}, this ccbench reads up to {SCHEMA_VERSION}; "
                "upgrade ccbench"
            )
        return version

    def _connect(self, read_only: bool = False):
        duckdb = _duckdb()
        try:
            return duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.IOException as exc:
            text = _first_line(exc)
            if "lock" in text.lower():
                raise CCBenchError(f"--store {self.path}: in use by another process; try again") from None
            raise CCBenchError(f"--store {self.path}: not a ccbench history store ({text})") from None
        except duckdb.Error as exc:
            raise CCBenchError(f"--store {self.path}: not a ccbench history store ({_first_line(exc)})") from None

    # ----------------------------------------------------------------------------------- reading
    def partition_files(self) -> list[Path]:
        """Exactly the committed partition files: ``date=<day>/label=<name>/<run id>.parquet``."""
        files = []
        for label in self._partition_dirs():
            files += [f for f in sorted(label.iterdir()) if f.suffix == ".parquet" and RUN_ID.match(f.stem)]
        return files

    def _partition_dirs(self) -> list[Path]:
        if not self.path.is_dir():
            return []
        days = [d for d in sorted(self.path.iterdir()) if d.is_dir() and _DATE_DIR.match(d.name)]
        return [p for d in days for p in sorted(d.iterdir()) if p.is_dir() and p.name.startswith("label=")]

    def run_ids(self) -> set[str]:
        self.check()
        if self.partitioned:
            return {f.stem for f in self.partition_files()}
        if not self.path.exists():
            return set()
        with self._connect(read_only=True) as db:
            if self._check_database(db) is None:
                return set()
            return {row[0] for row in db.execute("select distinct run_id from runs").fetchall()}

    def frame(self) -> pd.DataFrame:
        """Every row of the store in the declared schema, whatever version wrote it."""
        import pyarrow as pa

        version = self.check()
        if version is None:
            return empty_frame()
        if self.partitioned:
            tables = [conform(self._read_partition(f)) for f in self.partition_files()]
            return pa.concat_tables(tables).to_pandas() if tables else empty_frame()
        with self._connect(read_only=True) as db:
            return conform(db.sql(self._select_declared(db)).to_arrow_table()).to_pandas()

    def _read_partition(self, path: Path):
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            return pq.read_table(path)
        except (OSError, pa.ArrowException) as exc:
            raise CCBenchError(
                f"{path}: not a readable partition ({_first_line(exc)}); move it out of the store"
            ) from None

    @staticmethod
    def _select_declared(db, table: str = "runs") -> str:
        """The SQL that reads ``table`` (of any version) as the declared columns and types."""
        present = {row[0] for row in db.execute("select column_name from information_schema.columns "
                                                 f"where table_name = '{table}'").fetchall()}  # fmt: skip
        parts = [
            (f'TRY_CAST("{name}" AS {kind})' if name in present else f"CAST(NULL AS {kind})") + f' AS "{name}"'
            for name, kind in SCHEMA.items()
        ]
        return f"select {', '.join(parts)} from {table}"

    # ----------------------------------------------------------------------------------- writing
    def add(self, tables: list) -> int:
        """Add runs (one Arrow table of the declared schema each); returns how many were new (a run
        another process added meanwhile is not added twice)."""
        if self.partitioned:
            return self._add_parquet(tables)
        return self._add_duckdb(tables)

    def _add_duckdb(self, tables: list) -> int:
        import pyarrow as pa

        self.check()
        if not tables:
            return 0
        if not self.path.parent.exists():
            raise CCBenchError(f"--store {self.path}: the directory {self.path.parent} does not exist")
        duckdb = _duckdb()
        with self._connect() as db:
            try:
                db.begin()
                self._declare(db)
                known = {row[0] for row in db.execute("select distinct run_id from runs").fetchall()}
                new = [t for t in tables if t.column("run_id")[0].as_py() not in known]
                if new:
                    db.register("points", pa.concat_tables(new))
                    db.execute("insert into runs select * from points")
                db.commit()
            except duckdb.Error as exc:
                db.rollback()
                raise CCBenchError(f"--store {self.path}: cannot add to it ({_first_line(exc)})") from None
        return len(new)

    def _declare(self, db) -> None:
        """Make the runs table of the declared schema, or migrate one of an older version (1: before
        the declared schema; 2: without the clock source and the dynamic swiotlb) in the caller's
        transaction: either all of it happens or none."""
        version = self._check_database(db)
        if version == SCHEMA_VERSION:
            return
        columns = ", ".join(f'"{name}" {kind}' for name, kind in SCHEMA.items())
        if version is not None:
            db.execute("alter table runs rename to runs_old")
            db.execute(f"create table runs ({columns})")
            db.execute(f"insert into runs {self._select_declared(db, 'runs_old')}")
            db.execute("drop table runs_old")
        else:
            db.execute(f"create table runs ({columns})")
        db.execute(f"create table if not exists {META_TABLE} (key VARCHAR PRIMARY KEY, value VARCHAR)")
        db.execute(f"insert or replace into {META_TABLE} values ('schema_version', '{SCHEMA_VERSION}')")

    def _add_parquet(self, tables: list) -> int:
        import pyarrow.parquet as pq

        from ccbench.fsutil import remove_stale_staged, staged_file, write_json_atomic

        version = self.check()
        for directory in self._partition_dirs():
            remove_stale_staged(directory)  # what killed adds left, once their writers are gone
        if not tables:
            return 0
        if not self.path.parent.exists():
            raise CCBenchError(f"--store {self.path}: the directory {self.path.parent} does not exist")
        self.path.mkdir(exist_ok=True)
        if version != SCHEMA_VERSION:  # new, or an older version (its files are read through conform())
            write_json_atomic(self.path / MARKER, {"format": "ccbench history store", "schema_version": SCHEMA_VERSION})
        added = 0
        for table in tables:
            run_id = table.column("run_id")[0].as_py()
            if not RUN_ID.match(run_id):
                raise ValueError(f"not a run id: {run_id!r}")  # made by ccbench: a bug if it happens
            started = table.column("started_at")[0].as_py()
            day = started.strftime("%Y-%m-%d") if started is not None else "unknown"
            directory = self.path / f"date={day}" / f"label={_safe(table.column('label')[0].as_py())}"
            directory.mkdir(parents=True, exist_ok=True)
            try:
                with staged_file(directory / f"{run_id}.parquet", replace=False) as temporary:
                    pq.write_table(table, temporary)
                added += 1
            except FileExistsError:
                pass  # another add of the same bundle won the race
        return added


def _safe(text) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(text))
