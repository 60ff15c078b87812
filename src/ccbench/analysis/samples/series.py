"""What a SampleSet (ccbench.analysis.samples.engine) measured, per series: the measured series the
lints read, and the raw directories behind each group and configuration (compare --sources)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ccbench.analysis.samples.engine import SampleSet


def measured_series(engine: SampleSet) -> pd.DataFrame:
    """The distinct (workload, params, case, metric, config) with measured samples: which cases each
    configuration measured (the lint's unpaired cases read it), from the engine's codes."""
    width = max(len(engine.configs), 1)
    codes = np.unique(
        engine.measured.column("grp").to_numpy().astype(np.int64) * width
        + engine.measured.column("cfg").to_numpy().astype(np.int64)
    )
    groups = pd.DataFrame(engine.groups, columns=["workload", "params", "case", "metric"], dtype=object)
    series = groups.iloc[codes // width].reset_index(drop=True)
    return series.assign(config=np.array(engine.configs, dtype=object)[codes % width])


def raw_sources(engine: SampleSet) -> dict[tuple[str, str, str, str], list[str]]:
    """{(workload, params, metric, config): the raw directories (bundle-relative, sorted, each once)
    of its measured samples} for bundles of format 2, so that a number in ``compare --json`` leads to
    the tool's own output in one hop. Worked out on the engine's codes: one sort of the distinct
    (group, configuration, directory) codes, and one list per distinct set of directories, shared by
    the keys that have the same set (a fleet's thousands of series measured by the same executions)."""
    codes = engine.sources
    if not len(codes):
        return {}
    # a group is (workload, params, case, metric); the directories are per (workload, params, metric)
    keys: dict[tuple, int] = {}
    key_of_group = np.array([keys.setdefault((g[0], g[1], g[3]), len(keys)) for g in engine.groups], dtype=np.int64)
    sizes = (len(keys), len(engine.configs), len(engine.raws))
    rank = np.empty(len(engine.raws), dtype=np.int64)
    rank[sorted(range(len(engine.raws)), key=engine.raws.__getitem__)] = np.arange(len(engine.raws))
    by_rank = np.array(sorted(engine.raws), dtype=object)
    if sizes[0] * sizes[1] * sizes[2] < 2**62:
        # one int64 per (key, configuration, directory's rank): one sort orders and deduplicates them
        combined = np.sort((key_of_group[codes[:, 0]] * sizes[1] + codes[:, 1]) * sizes[2] + rank[codes[:, 2]])
        combined = combined[np.r_[True, combined[1:] != combined[:-1]]]
        pair, ranks = np.divmod(combined, sizes[2])
    else:
        frame = pd.DataFrame({"pair": key_of_group[codes[:, 0]] * sizes[1] + codes[:, 1], "rank": rank[codes[:, 2]]})
        frame = frame.drop_duplicates().sort_values(["pair", "rank"])
        pair, ranks = frame["pair"].to_numpy(), frame["rank"].to_numpy()
    starts = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]])
    ends = np.r_[starts[1:], len(pair)]
    described = list(keys)
    lists: dict[bytes, list[str]] = {}
    out = {}
    for start, end, number in zip(starts.tolist(), ends.tolist(), pair[starts].tolist(), strict=True):
        segment = ranks[start:end]
        found = lists.get(segment.tobytes())
        if found is None:
            found = lists[segment.tobytes()] = by_rank[segment].tolist()
        out[(*described[number // sizes[1]], engine.configs[number % sizes[1]])] = found
    return out


def tail_series(engine: SampleSet) -> pd.DataFrame:
    """The (workload, params, case, metric, config, operations) of each measured series whose
    samples record the operations their percentile rests on (fio's and YCSB's latencies): the
    fewest in any of its executions."""
    tails = engine.tail_operations
    columns = ["workload", "params", "case", "metric", "config", "operations"]
    if tails is None or tails.empty:
        return pd.DataFrame(columns=columns)
    groups = pd.DataFrame(engine.groups, columns=["workload", "params", "case", "metric"], dtype=object)
    found = groups.iloc[tails["grp"].to_numpy(dtype=np.int64)].reset_index(drop=True)
    configs = np.array(engine.configs, dtype=object)[tails["cfg"].to_numpy(dtype=np.int64)]
    return found.assign(config=configs, operations=tails["operations"].to_numpy(dtype=np.int64))[columns]
