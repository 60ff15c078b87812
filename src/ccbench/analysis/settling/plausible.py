"""The cases a settling run leaves out of a layer's headline: those the comparison will leave out of
its verdict as implausible (ccbench.analysis.rows.plausibility: Little's law, direct I/O served
buffered, faster than tmpfs), found from one workload's samples as they stand at a look. So the
run's settled line, the bundle's settle record and compare's verdict pool the same cases, and no
implausible case is named the layer's costliest.

The checks read each side's medians of a storage benchmark's case (the series that report ``iops``
and ``clat_mean``, as fio's do) and each variant's storage label; a workload without such series
has nothing left out. The medians here are of the samples so far (every repetition of the case),
as the comparison takes them at the end.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

#: the one machine a run's samples are from (the ceiling check compares on the same machine)
HERE = "this machine"


def left_out(
    samples: Sequence[Any], baseline: str, keys: Sequence[str], against: Mapping[str, str], declared: Any = ()
) -> dict[str, dict[str, str]]:
    """{variant key: {case label (as paired_log_costs names it): why the comparison leaves it out}}
    for one workload's samples (ccbench.model.Sample), each variant against its pair (``against``,
    else ``baseline``); only the variants and cases with a reason."""
    from ccbench.analysis.rows.plausibility import CLAT, IOPS, THROUGHPUT, implausible
    from ccbench.analysis.samples.load import storage_label
    from ccbench.analysis.statistics.sequential import by_pair, paired_series
    from ccbench.analysis.statistics.stats import coefficient_of_variation
    from ccbench.model import ExecutionKey

    def _cv(values: list[float]) -> float:  # the project's one CV (as compare gives it), NaN for none
        cv = coefficient_of_variation(values)
        return float("nan") if cv is None else cv

    mine = [s for s in samples if not s.warmup and s.execution and s.metric in (IOPS, CLAT, THROUGHPUT)]
    values: dict[tuple[str, str, str], list[float]] = {}
    storage: dict[str, str | None] = {}
    for sample in mine:
        key = ExecutionKey.parse(sample.execution).variant
        params = json.dumps(sample.params, sort_keys=True)
        values.setdefault((params, sample.metric, key), []).append(float(sample.value))
        storage.setdefault(key, storage_label(dict(sample.variant or {})))
    if not {IOPS, CLAT} <= {metric for _, metric, _ in values}:
        return {}
    rows = []
    for pair, variants in by_pair(baseline, keys, against).items():
        for params, metric, key in values:
            if key in variants and (params, metric, pair) in values:
                rows.append(
                    {
                        "workload": "",
                        "params": params,
                        "case": params,
                        "metric": metric,
                        "baseline": pair,
                        "config": key,
                        "baseline_median": float(np.median(values[(params, metric, pair)])),
                        "median": float(np.median(values[(params, metric, key)])),
                        "cv_baseline": _cv(values[(params, metric, pair)]),
                        "cv": _cv(values[(params, metric, key)]),
                        "n_baseline": len(values[(params, metric, pair)]),
                        "n": len(values[(params, metric, key)]),
                    }
                )
    if not rows:
        return {}
    table = pd.DataFrame(rows)
    facts = pd.DataFrame({"config": list(storage), "machine": HERE, "storage": list(storage.values())})
    reasons = {
        (params, key): reason
        for params, key, reason in zip(table["params"], table["config"], implausible(table, facts), strict=True)
        if reason
    }
    if not reasons:
        return {}
    found: dict[str, dict[str, str]] = {}
    for pair, variants in by_pair(baseline, keys, against).items():
        for (_metric, params), label, _ in paired_series(samples, pair, [pair, *variants], declared):
            for key in variants:
                if (params, key) in reasons:
                    found.setdefault(key, {})[label] = reasons[(params, key)]
    return found
