"""What a scope of comparison rows (a layer, a workload, a case) may be said to cost, in words that
never contradict its rows (docs/analysis.md, Verdict semantics).

A scope's rows are time-equivalent (``te`` > 1: takes more time, with ``te_low``/``te_high``),
``significant`` or not. The judgement, in order:

- rows marked ``implausible`` (a non-empty reason, ccbench.analysis.judgement.lint's plausibility checks) are
  left out and named;
- a scope with a significant row is never "no cost", "within the noise" or "not distinguishable":
  its significant rows all slower (or all faster) and the rows with an interval not heterogeneous
  (Cochran's Q at the 10% level and I^2 under 50%): one pooled figure, the inverse-variance
  weighted geometric mean with its interval ("2.9x slower [2.6x, 3.3x]"); of one direction but
  heterogeneous: the direction and the range of sizes; of both directions: the range with each
  end's direction ("1m randread 340x slower ... 4k randwrite 2.9x faster");
- no significant row, but two or more rows with one value a side (no interval each: one value per
  benchmark): pooled across them with a sign test (two-sided binomial) and the geometric mean with
  a t interval from the spread between them ("faster in 90 of 92 benchmarks, 1.30x faster [1.27x, 1.33x]"),
  the geometric mean ``pyperf compare_to`` prints for two benchmarks or more; only when both the
  sign test and the interval exclude no change is that a finding (never below MIN_POOLED rows);
- otherwise "no cost above X%" (X: the median minimum detectable effect of its rows; for the cases
  a run settled, ccbench.analysis.settling.settled, its target, or the cost an unsettled case's settle
  interval excludes, and said so), or "not distinguishable from noise" where no row could say (no
  interval, too few values).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import special

from ccbench.analysis.judgement.wording import (
    ACROSS,
    BOUND_EXCLUDED,
    BOUND_MDE,
    BOUND_SETTLED,
    BOUND_WORDS,
    DISAGREE,
    I2_LIMIT,
    LEFT_OUT,
    MIN_POOLED,
    NONE_SEEN,
    POOLED,
    SHOWN,
    SIZES,
    UNCLEAR,
    WEAK_BOUND,
    Judgement,
    bound_words,
)
from ccbench.analysis.statistics.pooling import heterogeneity, row_standard_errors, sign_test_p
from ccbench.analysis.statistics.stats import CONFIDENCE

__all__ = [
    "ACROSS",
    "BOUND_EXCLUDED",
    "BOUND_MDE",
    "BOUND_SETTLED",
    "BOUND_WORDS",
    "DISAGREE",
    "I2_LIMIT",
    "LEFT_OUT",
    "MIN_POOLED",
    "NONE_SEEN",
    "POOLED",
    "SHOWN",
    "SIZES",
    "UNCLEAR",
    "WEAK_BOUND",
    "Judgement",
    "bound_words",
    "judge",
]

#: Cochran's Q is taken as heterogeneous below this p value, or I^2 at or above I2_LIMIT (wording)
Q_LEVEL = 0.10
#: the fewest whose geometric mean is stated (as pyperf compare_to does), as not distinguishable below MIN_POOLED
MIN_ACROSS = 2
SIGN_LEVEL = 0.05

#: the columns a judgement reads
COLUMNS = [
    "workload",
    "case",
    "metric",
    "config",
    "te",
    "te_low",
    "te_high",
    "significant",
    "mde",
    "implausible",
    "interval",
    "settled",
    "se",
    "dof",
    "layer_settled",
]

#: a pooled interval wider than this (its upper end over its lower) states no figure, nor one that holds
#: no change beside significant rows: two cases pooled gave "13x slower [13x faster, 2,159x slower]"
WIDE_POOL = 100.0


def name_of(row) -> str:
    """A row's name in a scope: its case, else its metric; with the configuration where several."""
    case = row.get("case")
    return case if isinstance(case, str) and case else str(row.get("metric", ""))


def implausible_mask(rows: pd.DataFrame) -> np.ndarray:
    """Rows the plausibility lint marked (a non-empty ``implausible`` reason); none when absent."""
    if "implausible" not in rows:
        return np.zeros(len(rows), dtype=bool)
    return rows["implausible"].map(lambda v: isinstance(v, str) and bool(v.strip())).to_numpy(dtype=bool)


def left_out_parts(rows: pd.DataFrame) -> list[tuple[str, str, str]]:
    """The implausible rows as (names, reason, configuration), one per configuration and reason;
    names "fio 4k randread, 4k randwrite" (a workload named once, its cases after it)."""
    mask = implausible_mask(rows)
    groups: dict[tuple[str, str], dict[str, list[str]]] = {}
    for _, row in rows[mask].iterrows():
        key = (str(row["config"]), row["implausible"].strip())
        cases = groups.setdefault(key, {}).setdefault(str(row["workload"]), [])
        name = name_of(row)
        if name not in cases:
            cases.append(name)
    return [
        ("; ".join(f"{w} " + ", ".join(c) for w, c in workloads.items()), reason, config)
        for (config, reason), workloads in groups.items()
    ]


def left_out(rows: pd.DataFrame) -> list[str]:
    """The implausible rows, one entry per configuration and reason: "fio 4k randread, 4k randwrite
    on x / fscrypt (direct I/O served buffered)"."""
    return [f"{names} on {config} ({reason})" for names, reason, config in left_out_parts(rows)]


class _Names:
    """names[i]: the label of the i-th of ``rows``, made only for the rows asked for."""

    def __init__(self, rows: pd.DataFrame, label) -> None:
        self.rows, self.label = rows, label

    def __getitem__(self, index: int) -> str:
        return self.label(self.rows.iloc[int(index)])


def judge(rows: pd.DataFrame, label=name_of) -> Judgement:
    """The judgement of one scope's rows (columns ``te``, ``te_low``, ``te_high``, ``significant``,
    optionally ``mde`` and ``implausible``); ``label`` names a row for the ranges. Rows a run settled by
    layer (``layer_settled``: its headline) are judged as the run settled them (settled_judgement)."""
    dropped = left_out(rows) if "workload" in rows else []
    rows = rows[~implausible_mask(rows)]
    rows = rows[np.isfinite(rows["te"].to_numpy(dtype=float)) & (rows["te"].to_numpy(dtype=float) > 0)]
    settled = settled_judgement(rows, dropped)
    if settled is not None:
        return settled
    te = rows["te"].to_numpy(dtype=float)
    significant = rows["significant"].fillna(False).astype(bool).to_numpy()
    mde_values = rows["mde"].to_numpy(dtype=float) if "mde" in rows else np.array([])
    mde_values = mde_values[np.isfinite(mde_values)]
    base = Judgement(
        kind=NONE_SEEN,
        comparisons=len(rows),
        significant=int(significant.sum()),
        slower=int((te[significant] > 1).sum()),
        faster=int((te[significant] < 1).sum()),
        mde=float(np.median(mde_values)) if len(mde_values) else math.nan,
        left_out=dropped,
        bound=bound_of(rows),
        rest=int((~significant).sum()),
    )
    if rows.empty:
        return base
    low = rows["te_low"].to_numpy(dtype=float)
    high = rows["te_high"].to_numpy(dtype=float)
    se = row_standard_errors(rows, low, high)
    has_ci = np.isfinite(se) & (se > 0)
    if significant.any():
        sig_te = te[significant]
        chosen = rows[significant]
        # only the two ends are named: found by position, then labelled (a fleet's thousands of rows)
        names = _Names(chosen, label)
        if has_ci.sum() >= 2:
            _, _, _, base.q_p, base.i2 = heterogeneity(np.log(te[has_ci]), se[has_ci])
        if base.slower and base.faster:
            top, bottom = int(np.argmax(sig_te)), int(np.argmin(sig_te))
            base.kind = DISAGREE
            base.most, base.most_name = float(sig_te[top]), names[top]
            base.least, base.least_name = float(sig_te[bottom]), names[bottom]
            return base
        order = np.argsort(np.abs(np.log(sig_te)))
        base.least, base.least_name = float(sig_te[order[0]]), names[order[0]]
        base.most, base.most_name = float(sig_te[order[-1]]), names[order[-1]]
        if len(sig_te) <= SHOWN:
            sig_low, sig_high = low[significant], high[significant]
            base.shown = [(names[i], float(sig_te[i]), float(sig_low[i]), float(sig_high[i])) for i in order[::-1]]
        heterogeneous = has_ci.sum() >= 2 and (base.q_p < Q_LEVEL or base.i2 >= I2_LIMIT)
        if has_ci.sum() >= 1 and not heterogeneous:
            if has_ci.sum() >= 2:
                pooled, lo, hi, _, _ = heterogeneity(np.log(te[has_ci]), se[has_ci])
                base.typical, base.low, base.high = math.exp(pooled), math.exp(lo), math.exp(hi)
            else:
                only = int(np.flatnonzero(has_ci)[0])
                base.typical, base.low, base.high = float(te[only]), float(low[only]), float(high[only])
            # the pooled figure must lie on the side its significant rows are on, its interval too
            pooled_rows = has_ci.sum() >= 2
            side = (base.typical >= 1) == bool(base.slower)
            if pool_supported(base.typical, base.low, base.high, bool(base.slower)) if pooled_rows else side:
                base.kind = POOLED
                return base
            base.too_wide = pooled_rows and side
        base.kind = SIZES
        base.typical = float(np.exp(np.log(sig_te).mean()))
        base.low = base.high = math.nan
        return base
    single = te[~has_ci]
    if len(single) >= MIN_ACROSS and len(single) * 2 >= len(te):
        logs = np.log(single)
        slower, faster = int((single > 1).sum()), int((single < 1).sum())
        base.sign_p = sign_test_p(slower, faster)
        mean = float(logs.mean())
        spread = float(logs.std(ddof=1)) / math.sqrt(len(logs))
        t = float(special.stdtrit(len(logs) - 1, 0.5 + CONFIDENCE / 2))
        base.typical, base.low, base.high = math.exp(mean), math.exp(mean - t * spread), math.exp(mean + t * spread)
        base.slower, base.faster = slower, faster
        base.comparisons = len(single)
        pooled = rows[~has_ci]
        cases = pooled["case"].tolist() if "case" in pooled else [""] * len(pooled)
        metrics = pooled["metric"].tolist() if "metric" in pooled else [""] * len(pooled)
        base.benchmarks = len({c if isinstance(c, str) and c else m for c, m in zip(cases, metrics, strict=True)})
        order = np.argsort(single)
        ordered = rows[~has_ci].iloc[order]
        base.least, base.least_name = float(single[order[0]]), label(ordered.iloc[0])
        base.most, base.most_name = float(single[order[-1]]), label(ordered.iloc[-1])
        found = len(single) >= MIN_POOLED and base.sign_p < SIGN_LEVEL and not (base.low <= 1 <= base.high)
        base.kind = ACROSS if found else UNCLEAR
        return base
    if has_ci.any():
        base.span_low, base.span_high = float(low[has_ci].min()), float(high[has_ci].max())
    return base


def pool_supported(typical: float, low: float, high: float, slower: bool) -> bool:
    """Whether a pooled figure may be stated beside significant rows of one direction (``slower``):
    it lies on their side, its interval holds no change of the other direction or none at all, and
    is no wider than WIDE_POOL (a t or random-effects interval on two cases can span 9,052x faster to
    13,373,301x slower)."""
    if (typical >= 1) != slower:
        return False
    if math.isnan(low) or math.isnan(high):
        return True  # one row's own figure, no interval of a pool
    clear = low > 1 if slower else high < 1
    return clear and high / low <= WIDE_POOL


def bound_of(rows: pd.DataFrame) -> str:
    """What the rows' ``mde`` values are: BOUND_SETTLED where every row with one is a case its run
    settled as "no cost above" (on the run's interval, ccbench.analysis.settling.settled), BOUND_EXCLUDED
    where every one is on such an interval but not all settled, else BOUND_MDE; a settled or
    excluded bound on one interval other than the anytime-valid one says which ("settled: repeated
    interval, limit 10"; bound_words)."""
    from ccbench.analysis.labels import NO_COST_ABOVE, is_settle_interval

    if "interval" not in rows or "mde" not in rows:
        return BOUND_MDE
    with_mde = rows[np.isfinite(rows["mde"].to_numpy(dtype=float))]
    if with_mde.empty or not with_mde["interval"].map(is_settle_interval).all():
        return BOUND_MDE
    kind = BOUND_SETTLED if (with_mde["settled"] == NO_COST_ABOVE).all() else BOUND_EXCLUDED
    return _on_intervals(kind, set(with_mde["interval"]))


#: the interval named where a bound's rows are on different settle intervals
MIXED_INTERVALS = "anytime-valid or repeated interval"


def _on_intervals(kind: str, intervals: set[str]) -> str:
    """A settled or excluded bound on these intervals (the kind alone: the anytime-valid one only)."""
    from ccbench.analysis.labels import ANYTIME

    if intervals <= {ANYTIME, ""}:
        return kind
    return f"{kind}: {intervals.pop() if len(intervals) == 1 else MIXED_INTERVALS}"


def settled_judgement(rows: pd.DataFrame, dropped: list[str]) -> Judgement | None:
    """The judgement of rows a run settled by layer, all under one headline (the mean of the layer's
    paired log costs per round, ccbench.analysis.settling.layer_settle): the headline's figure and interval where
    it settled a cost or a gain; "no cost above" its target where it settled that and no row is
    significant; "no cost above" its headline's upper end where it is open and no row is significant
    (what the run's open line says); None otherwise (open with a case called, cases that disagree,
    rows of another run or none, or fewer rows
    than the headline pooled: one workload's, or those left once implausible rows are left out: judged
    as rows)."""
    from ccbench.analysis.labels import COST, GAIN, NO_COST_ABOVE

    if rows.empty or "layer_settled" not in rows:
        return None
    heads = rows["layer_settled"].tolist()
    head = heads[0]
    if not isinstance(head, dict) or any(h != head for h in heads) or head.get("estimate") is None:
        return None
    cases, workloads = int(head.get("cases") or len(rows)), int(head.get("workloads") or 1)
    if len(rows) < cases:
        # the headline pooled cases this judgement does not hold (left out as implausible, or another
        # workload's): it is no figure of these rows, which are judged as they are
        return None
    significant = rows["significant"].fillna(False).astype(bool).to_numpy()
    te = rows["te"].to_numpy(dtype=float)
    within = f" in {workloads} workloads" if workloads > 1 else ""
    on = (
        f"settled by the run on its paired rounds: mean of {cases} case{'s' if cases != 1 else ''}{within}, "
        f"{head.get('interval') or 'anytime-valid'}, after {head.get('rounds')} rounds"
    )
    base = Judgement(
        kind=NONE_SEEN,
        comparisons=len(rows),
        significant=int(significant.sum()),
        slower=int((te[significant] > 1).sum()),
        faster=int((te[significant] < 1).sum()),
        left_out=dropped,
        settled_on=on,
    )
    state = head.get("state")
    if state in (COST, GAIN) and head.get("low") is not None and head.get("high") is not None:
        base.kind = POOLED
        base.typical, base.low, base.high = 1 + head["estimate"], 1 + head["low"], 1 + head["high"]
        # the headline is the layer's finding: it counts as one where no case row is significant on its own
        base.significant = max(base.significant, 1)
        if state == COST:
            base.slower = max(base.slower, 1)
        else:
            base.faster = max(base.faster, 1)
        return base
    if state == NO_COST_ABOVE and not significant.any():
        base.mde, base.bound = float(head["target"]), f"{BOUND_SETTLED}: {head.get('interval') or ''}".rstrip(": ")
        return base
    if state in (None, "open") and not significant.any() and (head.get("high") or 0) > 0:
        # open, no case called: the bound is the one the run's open line gives, its headline's upper
        # end ("open, so far 4.2% slower [2.4x faster, 2.6x slower]": no cost above 2.6x), not the
        # median of its cases' own (a bound on a typical case, 4.7x, said nowhere else)
        interval = head.get("interval") or "anytime-valid interval"
        base.mde, base.bound = float(head["high"]), f"{BOUND_EXCLUDED}: {interval} on the mean of its cases"
        base.settled_on = on.replace("settled by the run", "open: the run's headline")
        return base
    return None
