"""The analysis engine: the bundles' samples read once as columns, reduced in DuckDB.

Each bundle's Parquet file (its own, or the cache's: ccbench.bundle.columnar) is read by Arrow with
its string and JSON columns dictionary-encoded. What a row means beyond its numbers (its
configuration label, its case text, its group) depends only on a few distinct values: the bundle
(machine label, TEE) and the distinct variant, params and metadata texts. Those are described once
each, in Python, and every row gets small integer codes by indexing (no Python loop over rows). The
measured rows then form one narrow Arrow table (row number, bundle, group, configuration, unit and
direction codes, value, contended and summary flags) that DuckDB aggregates: medians, variances and
the per-machine level of ``compare``, the quartiles of the summary, on all cores.

What the consumers need besides those aggregates is kept small as it is read: the configurations'
facts (machine, TEE, layers, what served them), the distinct executions (contended or not), the
raw directories per group. The report's per-sample sections (charts of distributions, latency
percentiles, the overhead model's bootstrap) get ``sample``: every sample up to SAMPLE_BUDGET of
them, above that a systematic sample (every k-th sample of each group and configuration of each
bundle), so that a fleet's ten million samples never become one pandas frame.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ccbench.analysis.samples import load as loading
from ccbench.analysis.samples.codes import (
    DIRECTED,
    EXECUTION_COLUMNS,
    FACT_COLUMNS,
    MEASURED_SCHEMA,
    Codes,
    Columns,
    RowCodes,
    concat_frames,
    first_rows,
    summed_counts,
)
from ccbench.basics.helper import Helper, outcome
from ccbench.bundle import Bundle
from ccbench.bundle.columnar import columnar_file, is_converted, read_samples
from ccbench.bundle.journal_stream import connect
from ccbench.probe import facts

#: per-sample rows the report's sections get at most (beyond it a systematic sample)
SAMPLE_BUDGET = 250_000
#: what the engine reads of a bundle's Parquet file
READ = [*loading.READ_COLUMNS]
#: what it reads when no per-sample frame is made
READ_REDUCED = [name for name in READ if name not in ("kind", "timestamp")]


@dataclass
class SampleSet:
    """The samples of some bundles, as the analysis needs them (see the module's docstring)."""

    bundles: list[Bundle]
    #: measured (non-warmup) rows: row, bundle, grp, cfg, unit, better (codes), value, contended, summary
    measured: pa.Table
    #: grp code -> (workload, params, case, metric)
    groups: list[tuple]
    #: cfg code -> configuration label
    configs: list[str]
    #: unit and better codes -> their text (None where missing)
    strings: list[Any]
    #: per bundle and distinct (configuration, layers, causes): the facts, with ``first`` (the first
    #: measured row with a direction) and ``first_quiet`` (the same among uncontended rows)
    facts: pd.DataFrame
    #: the distinct (bundle, execution, workload, config, repetition, warmup, contended) rows
    executions: pd.DataFrame
    #: the distinct measured (grp, cfg, raw) codes of the rows with a raw directory, one row each
    #: (int64, shape (n, 3)); ``raws``: raw code -> the directory (bundle-relative)
    sources: np.ndarray
    #: every sample, warmups included
    total: int
    #: the per-sample frame (ccbench.analysis.samples.load's columns), every ``stride``-th sample of each
    #: group and configuration of each bundle (1: every sample)
    sample: pd.DataFrame
    stride: int = 1
    #: per bundle path: machine_id
    machine_ids: dict[str, str] = field(default_factory=dict)
    #: per configuration, in order of appearance: samples, warmup, measured, contended (all samples)
    config_counts: pd.DataFrame = field(default_factory=pd.DataFrame)
    raws: list[str] = field(default_factory=list)
    #: per (grp, cfg) whose samples record the operations their percentile rests on: the fewest
    tail_operations: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def empty(self) -> bool:
        return self.total == 0

    def connection(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection with ``measured`` and the small tables registered."""
        connection = connect()
        connection.register("measured", self.measured)
        machines = pd.DataFrame(
            {
                "bundle": np.arange(len(self.bundles), dtype=np.int32),
                "machine_id": [self.machine_ids.get(str(b.path), str(b.path)) for b in self.bundles],
            }
        )
        connection.register("machines", machines)
        return connection

    def measured_frame(self, keep: Callable[[tuple], bool], firsts: bool = False) -> pd.DataFrame:
        """The measured samples (warmups left out) of the groups (workload, params, case, metric) that
        ``keep`` accepts, every one, with load's columns the engine knows (no kind, timestamp,
        repetition, execution, raw): what the verdict's application shares and the lint's cipher
        speeds read of a few metrics, without a per-sample frame. ``firsts``: only the first such
        sample of each bundle and configuration."""
        wanted = np.fromiter((bool(keep(group)) for group in self.groups), dtype=bool, count=len(self.groups))
        table = self.measured.filter(pa.array(wanted[self.measured.column("grp").to_numpy()]))
        if firsts and table.num_rows:
            table = table.take(pa.array(first_rows(table.column("bundle").to_numpy(), table.column("cfg").to_numpy())))
        groups = pd.DataFrame(self.groups, columns=["workload", "params", "case", "metric"], dtype=object)
        strings = np.array([*self.strings, None], dtype=object)
        frame = (
            groups.iloc[table.column("grp").to_numpy()]
            .reset_index(drop=True)
            .assign(
                bundle=np.array([str(b.path) for b in self.bundles], dtype=object)[table.column("bundle").to_numpy()],
                config=np.array(self.configs, dtype=object)[table.column("cfg").to_numpy()],
                unit=strings[table.column("unit").to_numpy()],
                better=strings[table.column("better").to_numpy()],
                value=table.column("value").to_numpy(),
                warmup=False,
                contended=table.column("contended").to_numpy(zero_copy_only=False),
            )
        )
        # a sample's facts are its (bundle, configuration)'s: the first such row
        facts = self.facts.drop_duplicates(["bundle", "config"]).drop(columns=["first", "first_quiet"])
        return frame.merge(facts, on=["bundle", "config"], how="left")

    def counts(self) -> pd.DataFrame:
        """Per configuration (in order of appearance among measured rows): measured samples and how
        many of them are contended."""
        connection = self.connection()
        try:
            table = connection.sql(
                "SELECT cfg, count(*) AS measured, sum(contended::INT) AS contended, min(row) AS first "
                "FROM measured GROUP BY cfg ORDER BY first"
            ).df()
        finally:
            connection.close()
        table["config"] = [self.configs[c] for c in table["cfg"]]
        return table[["config", "measured", "contended"]]


def sample_set(
    bundles: list[Bundle], labels: dict[str, str] | None = None, helper: Helper | None = None, frame: bool = True
) -> SampleSet:
    """The SampleSet of ``bundles`` (read with samples=False, or with their samples in memory); with
    frame=False its ``sample`` frame is left empty (compare needs none)."""
    labels = labels or {}
    _convert_missing(bundles, helper)
    # the stride of the per-sample frame needs the total before reading (without a frame: none)
    stride = max(1, math.ceil(sum(map(_rows, bundles)) / SAMPLE_BUDGET)) if frame else 0
    reader = _Reader(labels, stride)
    total = 0
    for index, bundle in enumerate(bundles):
        total += reader.read(index, bundle, total)
    return reader.result(bundles, total, stride or max(1, math.ceil(total / SAMPLE_BUDGET)))


def _rows(bundle: Bundle) -> int:
    if bundle.samples is not None:
        return len(bundle.samples)
    return pq.ParquetFile(columnar_file(bundle)).metadata.num_rows


def _convert_missing(bundles: list[Bundle], helper: Helper | None) -> None:
    """Bundles without a current Parquet file are converted into the cache, half of them by the
    helper process (the conversion is the one step of a first load that is not already parallel)."""
    if helper is None or not helper.enabled:
        return
    pending = [b for b in bundles if b.samples is None and not is_converted(b)]
    if len(pending) < 2:
        return
    futures = [helper.submit(_convert_in_helper, bundle) for bundle in pending[1::2]]
    for bundle in pending[0::2]:
        columnar_file(bundle)
    for bundle, future in zip(pending[1::2], futures):
        outcome(future, lambda bundle=bundle: columnar_file(bundle))


def _convert_in_helper(bundle: Bundle) -> str:
    return str(columnar_file(bundle))


class _Reader:
    """Reads bundles one after another into the SampleSet's parts, numbering values as it goes."""

    def __init__(self, labels: dict[str, str], stride: int):
        self.labels = labels
        self.stride = stride
        self.groups = Codes()
        self.configs = Codes()
        self.strings = Codes()
        self.measured: list[pa.Table] = []
        self.facts: list[pd.DataFrame] = []
        self.executions: list[pd.DataFrame] = []
        self.sources: list[np.ndarray] = []
        self.raws = Codes()
        self.frames: list[pd.DataFrame] = []
        self.counts: list[pd.DataFrame] = []
        self.tails: list[pd.DataFrame] = []
        self.machine_ids: dict[str, str] = {}

    def read(self, index: int, bundle: Bundle, offset: int) -> int:
        """Reads the bundle (its rows numbered from ``offset``); its number of samples."""
        table = read_samples(bundle, READ if self.stride else READ_REDUCED)
        if not table.num_rows:
            return 0
        machine, machine_id, tee = facts.machine_of(bundle.probe, bundle.path, self.labels)
        self.machine_ids[str(bundle.path)] = machine_id
        columns = Columns(table, machine, tee)
        rows = RowCodes(columns, self)
        self.measured.append(rows.measured_table(index, offset))
        self.facts.append(rows.facts(bundle, machine, machine_id, tee, offset))
        self.executions.append(rows.executions(bundle))
        self.sources.append(rows.sources())
        self.counts.append(rows.config_counts())
        self.tails.append(rows.tail_operations())
        if self.stride:
            kept = rows.kept(self.stride)
            part = table if kept is None else table.take(pa.array(kept))
            frame = loading.frame_of_table(bundle, part, self.labels)
            if frame is not None:
                self.frames.append(frame)
        return table.num_rows

    def result(self, bundles: list[Bundle], total: int, stride: int) -> SampleSet:
        schema = MEASURED_SCHEMA
        measured = pa.concat_tables(self.measured) if self.measured else schema.empty_table()
        frame = (
            pd.concat(self.frames, ignore_index=True)
            if len(self.frames) > 1
            else (self.frames[0] if self.frames else pd.DataFrame(columns=loading.COLUMNS))
        )
        return SampleSet(
            bundles=bundles,
            measured=measured,
            groups=self.groups.values,
            configs=self.configs.values,
            strings=self.strings.values,
            facts=concat_frames(self.facts, FACT_COLUMNS),
            executions=concat_frames(self.executions, EXECUTION_COLUMNS),
            sources=np.concatenate(self.sources) if self.sources else np.zeros((0, 3), dtype=np.int64),
            total=total,
            sample=frame[loading.COLUMNS] if len(frame.columns) else frame,
            stride=stride,
            machine_ids=self.machine_ids,
            config_counts=summed_counts(self.counts),
            raws=self.raws.values,
            tail_operations=concat_frames(self.tails, ["grp", "cfg", "operations"]),
        )


# -- the reductions ------------------------------------------------------------------------------

#: a value's log where it has one (DuckDB orders NaN above every number: it is excluded by name)
_POSITIVE = "coalesce(NOT isnan(value) AND value > 0, false)"


def group_statistics(connection: duckdb.DuckDBPyConnection, rows: str) -> pd.DataFrame:
    """Per (grp, cfg) of the relation ``rows`` (row, grp, cfg, unit, better, value, contended,
    summary, machine): n, median, mean, std, the mean and variance of the logs, whether a value was
    not positive, the contended count, whether a summary statistic is among them, the first row;
    the distinct machines, the mean over machines of each machine's mean log (m_log_mean) and the
    variance over machines of those means (m_log_var, NaN below 2 machines); and the group's unit
    and direction, those of its first row. In order of first appearance of (grp, cfg)."""
    sql = f"""
        WITH logged AS (
            SELECT *, CASE WHEN {_POSITIVE} THEN ln(value) END AS log, NOT {_POSITIVE} AS nonpositive FROM ({rows})
        ),
        per_machine AS (SELECT grp, cfg, machine, avg(log) AS m_log FROM logged GROUP BY grp, cfg, machine),
        machines AS (
            SELECT grp, cfg, count(*) AS machines, avg(m_log) AS m_log_mean, var_samp(m_log) AS m_log_var
            FROM per_machine GROUP BY grp, cfg
        ),
        labels AS (SELECT grp, arg_min(unit, row) AS unit, arg_min(better, row) AS better FROM logged GROUP BY grp),
        stats AS (
            SELECT grp, cfg, count(*) AS n, median(value) AS median, avg(value) AS mean, stddev_samp(value) AS std,
                avg(log) AS log_mean, var_samp(log) AS log_var, bool_or(nonpositive) AS nonpositive,
                sum(contended::BIGINT) AS contended, bool_or(summary) AS summary, min(row) AS first
            FROM logged GROUP BY grp, cfg
        )
        SELECT stats.*, machines.machines, machines.m_log_mean, machines.m_log_var, labels.unit, labels.better
        FROM stats JOIN machines USING (grp, cfg) JOIN labels USING (grp) ORDER BY first
    """
    return _floats(connection.sql(sql).df())


def summary_statistics(connection: duckdb.DuckDBPyConnection, rows: str) -> pd.DataFrame:
    """Per (grp, cfg, unit, better) of ``rows``: median, mean, std, n (values not missing), the
    quartiles (interpolated, as pandas' quantile), in order of first appearance."""
    sql = f"""
        SELECT grp, cfg, unit, better, median(value) AS median, avg(value) AS mean, stddev_samp(value) AS std,
            count(value) AS n, quantile_cont(value, 0.25) AS q1, quantile_cont(value, 0.75) AS q3, min(row) AS first
        FROM ({rows}) GROUP BY grp, cfg, unit, better ORDER BY first
    """
    return _floats(connection.sql(sql).df())


def _floats(table: pd.DataFrame) -> pd.DataFrame:
    """NULL statistics (one value: no variance) as NaN, as pandas gives them."""
    for name in ("median", "mean", "std", "log_mean", "log_var", "m_log_mean", "m_log_var", "q1", "q3"):
        if name in table:
            table[name] = table[name].astype(float)
    return table


def set_rows(samples: SampleSet, exclude_contended: bool, directed_only: bool = True) -> str:
    """The relation of group_statistics over a SampleSet's measured rows (its machine: machine_id)."""
    conditions = []
    if directed_only:
        codes = [i for i, value in enumerate(samples.strings) if value in DIRECTED]
        conditions.append(f"better IN ({', '.join(map(str, codes)) or '-1'})")
    if exclude_contended:
        conditions.append("NOT contended")
    where = " AND ".join(conditions) or "true"
    return f"SELECT m.*, machines.machine_id AS machine FROM measured m JOIN machines USING (bundle) WHERE {where}"


def frame_rows(data: pd.DataFrame, group: list[str]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A per-sample frame as the relation of group_statistics: its codes, and what they stand for
    (``groups``: grp -> the group columns' values of its first row, ``configs``, ``strings``)."""
    grp = data.groupby(group, sort=False, dropna=False).ngroup().to_numpy()
    cfg, configs = pd.factorize(data["config"], sort=False)
    strings = Codes()
    unit = np.array([strings.code(_none(v)) for v in data["unit"]], dtype=np.int32)
    better = np.array([strings.code(_none(v)) for v in data["better"]], dtype=np.int32)
    machine_column = next((c for c in ("machine_id", "bundle", "machine") if c in data), None)
    machine = pd.factorize(data[machine_column], sort=False)[0] if machine_column else np.zeros(len(data), int)
    summary = data[loading.SUMMARY_COLUMN] if loading.SUMMARY_COLUMN in data else np.zeros(len(data), bool)
    rows = pd.DataFrame(
        {
            "row": np.arange(len(data), dtype=np.int64),
            "grp": grp,
            "cfg": cfg,
            "unit": unit,
            "better": better,
            "value": data["value"].to_numpy(dtype=float),
            "contended": data["contended"].to_numpy(dtype=bool),
            "summary": np.asarray(summary, dtype=bool),
            "machine": machine,
        }
    )
    positions = pd.Series(grp).drop_duplicates().index.to_numpy()
    firsts = data.iloc[positions][group].itertuples(index=False)
    groups = {int(grp[p]): tuple(values) for p, values in zip(positions, firsts)}
    return rows, {"groups": groups, "configs": list(configs), "strings": strings.values}


def _none(value: Any) -> Any:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value
