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
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import special

from ccbench.analysis import format as fmt
from ccbench.analysis.statistics.pooling import heterogeneity, row_standard_errors, sign_test_p
from ccbench.analysis.statistics.stats import CONFIDENCE

#: Cochran's Q is taken as heterogeneous below this p value, or I^2 at or above I2_LIMIT
Q_LEVEL = 0.10
I2_LIMIT = 0.5
#: the fewest rows with one value a side that are pooled across (a sign test on fewer cannot reach 5%)
MIN_POOLED = 6
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

#: kinds of judgement
POOLED = "pooled"  # one figure (significant rows of one direction, not heterogeneous)
SIZES = "sizes differ"  # one direction, heterogeneous sizes: a range
DISAGREE = "disagree"  # significant rows of both directions: a range with directions
ACROSS = "pooled across benchmarks"  # one value each, sign test and geometric mean found a difference
UNCLEAR = "not distinguishable"  # one value each, pooled, the sign test or the interval allows no change
NONE_SEEN = "no cost seen"  # nothing significant: no cost above the MDE
LEFT_OUT = "all left out"  # every row marked implausible: no figure

#: above this bound (a fraction: 25%) "no cost above X" is said as inconclusive: the run could not see a
#: cost a user would care about
WEAK_BOUND = 0.25
#: what a "no cost above X%" rests on: the rows' minimum detectable effects; the target of cases a
#: run settled as "no cost above" it (ccbench.analysis.settling.settled); the costs the settle
#: intervals of cases left unsettled exclude
BOUND_MDE, BOUND_SETTLED, BOUND_EXCLUDED = "mde", "settled", "excluded"
#: the words of each bound; {interval} is the settle interval's (ccbench.analysis.labels.interval_phrase)
BOUND_WORDS = {
    BOUND_MDE: "the smallest it could see",
    BOUND_SETTLED: "settled: the run's {interval} excludes every cost above it",
    BOUND_EXCLUDED: "what the {interval} excludes; not settled at the run's target",
}


def bound_words(bound: str) -> str:
    """The words of a bound (bound_of): a settled or excluded bound names its interval, written after
    the kind ("settled: repeated interval, limit 10"; the kind alone: the anytime-valid one)."""
    from ccbench.analysis.labels import ANYTIME, interval_phrase

    kind, _, interval = bound.partition(": ")
    return BOUND_WORDS[kind].format(interval=interval_phrase(interval or ANYTIME))


@dataclass
class Judgement:
    kind: str
    #: the figure (time-equivalent) and its interval, where one is given
    typical: float = math.nan
    low: float = math.nan
    high: float = math.nan
    comparisons: int = 0
    significant: int = 0
    slower: int = 0
    faster: int = 0
    #: the smallest and largest significant (or, across benchmarks, all) time-equivalent effects and
    #: the names of the rows they come from
    least: float = math.nan
    most: float = math.nan
    least_name: str = ""
    most_name: str = ""
    mde: float = math.nan
    #: Cochran's Q p value and I^2 over the rows with an interval; the sign test's p value
    q_p: float = math.nan
    i2: float = math.nan
    #: of the rows pooled across benchmarks, how many distinct benchmarks they are (one benchmark on two
    #: machines is two rows of one benchmark)
    benchmarks: int = 0
    #: a layer's workloads pooled across benchmarks of one value each without a finding (combine)
    unclear_in: list[str] = field(default_factory=list)
    sign_p: float = math.nan
    #: the rows left out as implausible: "name (reason)"
    left_out: list[str] = field(default_factory=list)
    #: where the difference was seen, when only one of a layer's workloads shows one: its name, and
    #: how many others showed none
    only_in: str = ""
    others: int = 0
    #: with LEFT_OUT: how many rows were left out
    left_count: int = 0
    #: what ``mde`` is (BOUND_WORDS)
    bound: str = BOUND_MDE
    #: with nothing significant and no MDE: the outer ends of the rows' 95% intervals (what the
    #: comparisons could not tell apart), NaN where no row has one
    span_low: float = math.nan
    span_high: float = math.nan
    #: a scope a run settled by layer (ccbench.analysis.settling.layer_settle): what its figure rests on
    settled_on: str = ""
    #: SIZES because the pooled interval was too wide to state one figure (pool_supported): the range
    #: is said, and why
    too_wide: bool = False

    def _where(self) -> str:
        if not self.only_in:
            return ""
        return f" in {self.only_in} (none significant in {self.others} other{'s' if self.others != 1 else ''})"

    @property
    def holds_significant(self) -> bool:
        """Whether the scope shows a difference: a significant row, or pooled across benchmarks."""
        return self.significant > 0 or self.kind == ACROSS

    @property
    def direction(self) -> str | None:
        """ "slower", "faster", "both" or None (nothing seen)."""
        if self.kind == DISAGREE:
            return "both"
        if self.kind in (POOLED, SIZES, ACROSS):
            return "slower" if self.typical >= 1 or (math.isnan(self.typical) and self.slower) else "faster"
        return None

    def test_named(self) -> str:
        """The test behind the judgement, as a reader needs it."""
        if self.settled_on:
            return self.settled_on
        if self.kind in (ACROSS, UNCLEAR):
            return f"sign test {_p(self.sign_p)}"
        if not math.isnan(self.q_p):
            return f"Cochran's Q {_p(self.q_p)}, I2 {self.i2 * 100:.0f}%"
        return ""

    def _unclear_why(self) -> str:
        """Why a pooled difference is no finding: too few to tell, an interval that holds no change, or the
        sign test."""
        if self.comparisons < MIN_POOLED:
            return f"too few to tell: a sign test on {self.comparisons} cannot reach 5%, it needs {MIN_POOLED}"
        if not math.isnan(self.low) and self.low <= 1 <= self.high:
            return f"the interval holds no change; sign test {_p(self.sign_p)}"
        return f"sign test {_p(self.sign_p)}"

    def named_range(self) -> str:
        """Both ends with their names and directions: "4k randread 22x slower ... 4k randwrite 7.8x faster"."""
        return f"{self.most_name} {fmt.effect(self.most)} ... {self.least_name} {fmt.effect(self.least)}"

    def phrase(self, where: bool = True) -> str:
        """The judgement in words (no counts): "2.9x slower [2.6x, 3.3x]", "slower, 1.5x to 340x
        (sizes differ)", "1m randread 340x slower ... 4k randwrite 2.9x faster", "faster in 90 of 92
        benchmarks, 1.30x faster [1.27x, 1.33x]", "no cost above 4.1% (the smallest it could see)"."""
        if self.kind == LEFT_OUT:
            which = "its one comparison" if self.left_count == 1 else f"all {self.left_count} comparisons"
            return f"no figure: {which} left out (the reasons below)"
        if self.kind == POOLED:
            return fmt.effect(self.typical, self.low, self.high) + (self._where() if where else "")
        if self.kind == SIZES:
            word = "slower" if self.typical >= 1 else "faster"
            ends = sorted((self.least, self.most), key=lambda v: abs(math.log(v)))
            why = f" (sizes differ: I2 {self.i2 * 100:.0f}%)" if not math.isnan(self.i2) and self.i2 >= I2_LIMIT else ""
            if self.too_wide:
                why = " (the range; pooled, the interval is too wide for one figure)"
            span = _range(ends, word)
            # one significant row (or ends that print alike) is one figure, not a range
            head = f"{word}, {span}" if " to " in span else fmt.effect(ends[-1])
            return f"{head}{why}{self._where() if where else ''}"
        if self.kind == DISAGREE:
            return (
                f"{self.most_name} {fmt.effect(self.most)} ... {self.least_name} {fmt.effect(self.least)} "
                f"({self.slower} slower, {self.faster} faster of {self.comparisons})"
            )
        if self.kind in (ACROSS, UNCLEAR):
            word = "faster" if self.typical < 1 else "slower"
            count = self.faster if self.typical < 1 else self.slower
            # the geometric mean in the one convention ("1.30x faster [1.02x, 1.64x]", pyperf compare_to's
            # "1.30x faster"); "comparisons" where one benchmark stands on several machines
            ratio = fmt.effect(self.typical, self.low, self.high) if not math.isnan(self.low) else ""
            unit = "benchmarks" if self.benchmarks >= self.comparisons else "comparisons"
            head = f"{word} in {count} of {self.comparisons} {unit}, {ratio}".rstrip(", ")
            if self.kind == UNCLEAR:
                return f"not distinguishable across {unit} ({head}; {self._unclear_why()})"
            return head + (self._where() if where else "")
        if math.isnan(self.mde):
            if math.isnan(self.span_low):
                if self.unclear_in:
                    return (
                        f"not distinguishable across benchmarks in {', '.join(self.unclear_in)} "
                        "(each workload's line says why)"
                    )
                return "not distinguishable from noise (no interval: too few values)"
            ends = f"{fmt.effect(self.span_low)} to {fmt.effect(self.span_high)}"
            what = "its 95% interval" if self.comparisons == 1 else "the 95% intervals span"
            return f"not distinguishable from noise ({what} {ends}: too few values to bound the cost)"
        bound = f"no cost above {fmt.mde(self.mde)} ({bound_words(self.bound)})"
        if self.bound == BOUND_MDE and self.mde > WEAK_BOUND:
            # not a clean bill: a cost smaller than the bound would not have shown in this run
            return f"inconclusive: {bound}; a smaller cost would not have shown"
        return bound


def _p(value: float) -> str:
    """A p value for a reader, with its relation: "p=0.034", "p<0.001" ("p=-" when missing)."""
    if math.isnan(value):
        return "p=-"
    return "p<0.001" if value < 0.001 else f"p={value:.2g}"


def _range(ends: list[float], word: str) -> str:
    first, last = (fmt.effect(v).rsplit(" ", 1)[0] for v in ends)
    return first if first == last else f"{first} to {last}"


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
    significant; None otherwise (open, cases that disagree, rows of another run or none: judged as
    rows)."""
    from ccbench.analysis.labels import COST, GAIN, NO_COST_ABOVE

    if rows.empty or "layer_settled" not in rows:
        return None
    heads = rows["layer_settled"].tolist()
    head = heads[0]
    if not isinstance(head, dict) or any(h != head for h in heads) or head.get("estimate") is None:
        return None
    significant = rows["significant"].fillna(False).astype(bool).to_numpy()
    te = rows["te"].to_numpy(dtype=float)
    cases = int(head.get("cases") or len(rows))
    on = (
        f"settled by the run on its paired rounds: mean of {cases} case{'s' if cases != 1 else ''}, "
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
    return None
