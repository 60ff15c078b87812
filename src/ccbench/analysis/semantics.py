"""What a scope of comparison rows (a layer, a workload, a case) may be said to cost, in words that
never contradict its rows (docs/analysis.md, Verdict semantics).

A scope's rows are time-equivalent (``te`` > 1: takes more time, with ``te_low``/``te_high``),
``significant`` or not. The judgement, in order:

- rows marked ``implausible`` (a non-empty reason, ccbench.analysis.lint's plausibility checks) are
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
  a run settled, ccbench.analysis.settled, its target, or the cost an unsettled case's settle
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
from ccbench.analysis.stats import CONFIDENCE

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
]

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
#: run settled as "no cost above" it (ccbench.analysis.settled); the costs the settle
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
            return f"no figure: all {self.left_count} comparisons left out (the reasons below)"
        if self.kind == POOLED:
            return fmt.effect(self.typical, self.low, self.high) + (self._where() if where else "")
        if self.kind == SIZES:
            word = "slower" if self.typical >= 1 else "faster"
            ends = sorted((self.least, self.most), key=lambda v: abs(math.log(v)))
            why = f" (sizes differ: I2 {self.i2 * 100:.0f}%)" if not math.isnan(self.i2) and self.i2 >= I2_LIMIT else ""
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


def _heterogeneity(logs: np.ndarray, se: np.ndarray) -> tuple[float, float, float, float, float]:
    """Fixed-effect pooling of log effects with standard errors: (pooled, low, high, Q's p, I^2)."""
    weights = 1 / se**2
    pooled = float((weights * logs).sum() / weights.sum())
    pooled_se = float(math.sqrt(1 / weights.sum()))
    z = float(special.ndtri(0.5 + CONFIDENCE / 2))
    q = float((weights * (logs - pooled) ** 2).sum())
    df = len(logs) - 1
    q_p = float(special.chdtrc(df, q)) if df > 0 else 1.0
    i2 = max(0.0, (q - df) / q) if q > 0 and df > 0 else 0.0
    return pooled, pooled - z * pooled_se, pooled + z * pooled_se, q_p, i2


def row_standard_errors(rows: pd.DataFrame, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Each row's standard error of its log ratio: its own (``se``, from the statistics that made it: Welch's
    at its degrees of freedom, the paired rounds' of a settled case) where the row carries one, widened for
    having been estimated (dof / (dof - 2)); else its interval's width over 2 x 1.96 (rows made elsewhere).
    An interval's width is not that: an anytime-valid interval is 2-7x a fixed one, so its width read as
    1.96 standard errors makes rows that disagree look alike."""
    with np.errstate(divide="ignore", invalid="ignore"):
        from_width = (np.log(high) - np.log(low)) / (2 * float(special.ndtri(0.5 + CONFIDENCE / 2)))
    if "se" not in rows:
        return from_width
    own = pd.to_numeric(rows["se"], errors="coerce").to_numpy(dtype=float)
    dof = (
        pd.to_numeric(rows["dof"], errors="coerce").to_numpy(dtype=float)
        if "dof" in rows
        else np.full(len(own), np.inf)
    )
    # an estimated standard error varies with it: a t statistic's variance is dof / (dof - 2) times a
    # normal one's, so each is widened by that much (at 2 degrees of freedom or fewer the width stands)
    with np.errstate(divide="ignore", invalid="ignore"):
        widened = own * np.sqrt(np.where(np.isfinite(dof), dof / (dof - 2), 1.0))
    usable = np.isfinite(widened) & (widened > 0) & ~(np.isfinite(dof) & (dof <= 2))
    return np.where(usable, widened, from_width)


def judge(rows: pd.DataFrame, label=name_of) -> Judgement:
    """The judgement of one scope's rows (columns ``te``, ``te_low``, ``te_high``, ``significant``,
    optionally ``mde`` and ``implausible``); ``label`` names a row for the ranges."""
    dropped = left_out(rows) if "workload" in rows else []
    rows = rows[~implausible_mask(rows)]
    rows = rows[np.isfinite(rows["te"].to_numpy(dtype=float)) & (rows["te"].to_numpy(dtype=float) > 0)]
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
            _, _, _, base.q_p, base.i2 = _heterogeneity(np.log(te[has_ci]), se[has_ci])
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
                pooled, lo, hi, _, _ = _heterogeneity(np.log(te[has_ci]), se[has_ci])
                base.typical, base.low, base.high = math.exp(pooled), math.exp(lo), math.exp(hi)
            else:
                only = int(np.flatnonzero(has_ci)[0])
                base.typical, base.low, base.high = float(te[only]), float(low[only]), float(high[only])
            # the pooled figure must lie on the side its significant rows are on
            if (base.typical >= 1) == bool(base.slower):
                base.kind = POOLED
                return base
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


def bound_of(rows: pd.DataFrame) -> str:
    """What the rows' ``mde`` values are: BOUND_SETTLED where every row with one is a case its run
    settled as "no cost above" (on the run's interval, ccbench.analysis.settled), BOUND_EXCLUDED
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


def sign_test_p(slower: int, faster: int) -> float:
    """The two-sided sign test's p-value of ``slower`` against ``faster`` (ties left out): what
    scipy.stats.binomtest(slower, slower + faster, 0.5) gives, from the binomial distribution function
    (scipy.special.bdtr) directly. At p = 0.5 the distribution is symmetric, so the outcomes as
    unlikely as the one seen are both tails: twice the smaller one, 1 at an even split. (Loading
    scipy.stats for this took a third of a second of every compare and report.)"""
    n = slower + faster
    smaller = min(slower, faster)
    if n == 0 or 2 * smaller == n:
        return 1.0
    return min(1.0, 2 * float(special.bdtr(smaller, n, 0.5)))


def with_time_equivalent(comparison: pd.DataFrame) -> pd.DataFrame:
    """A copy of comparison rows with ``te``, ``te_low``, ``te_high`` (a throughput's ratio inverted)."""
    data = comparison.copy()
    higher = (data["better"] == "higher").to_numpy()
    ratio = data["ratio"].to_numpy(dtype=float)
    low, high = data["ci_low"].to_numpy(dtype=float), data["ci_high"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        data["te"] = np.where(higher, 1 / ratio, ratio)
        data["te_low"] = np.where(higher, 1 / high, low)
        data["te_high"] = np.where(higher, 1 / low, high)
    return data


def _ends(workload: str, judgement: Judgement) -> list[tuple[float, str]]:
    """The effects a workload shows, named "workload case", for a range across workloads."""
    if judgement.kind == POOLED:
        return [(judgement.typical, workload)]
    if judgement.kind in (ACROSS,):
        return [(judgement.typical, f"{workload} (geometric mean of {judgement.comparisons})")]
    if judgement.kind in (SIZES, DISAGREE):
        return [
            (judgement.least, f"{workload} {judgement.least_name}".strip()),
            (judgement.most, f"{workload} {judgement.most_name}".strip()),
        ]
    return []


def _common_bound(judgements: list[Judgement]) -> str:
    bounds = {j.bound for j in judgements}
    if len(bounds) == 1:
        return bounds.pop()
    kinds = {bound.partition(": ")[0] for bound in bounds}
    if kinds != {BOUND_SETTLED, BOUND_EXCLUDED}:
        return BOUND_MDE
    return _on_intervals(BOUND_EXCLUDED, {bound.partition(": ")[2] for bound in bounds})


def combine(parts: list[tuple[str, Judgement]]) -> Judgement:
    """A layer's judgement from its workloads' (each judged on its own rows): one figure only where
    the workloads that show a difference agree in direction and, pooled, are not heterogeneous
    (Cochran's Q over the workloads' pooled intervals); else the range, with directions where they
    differ. A layer with nothing significant anywhere: no cost above the median MDE."""
    if len(parts) == 1:
        return parts[0][1]
    judgements = [j for _, j in parts]
    mdes = [j.mde for j in judgements if not math.isnan(j.mde)]
    out = Judgement(
        kind=NONE_SEEN,
        comparisons=sum(j.comparisons for j in judgements),
        significant=sum(j.significant for j in judgements),
        slower=sum(j.slower for j in judgements if j.kind not in (ACROSS, UNCLEAR)),
        faster=sum(j.faster for j in judgements if j.kind not in (ACROSS, UNCLEAR)),
        mde=float(np.median(mdes)) if mdes else math.nan,
        left_out=[x for j in judgements for x in j.left_out],
        bound=_common_bound([j for j in judgements if not math.isnan(j.mde)]),
    )
    shown = [(w, j) for w, j in parts if j.holds_significant]
    if not shown:
        # workloads pooled across their benchmarks without a finding: the layer says so, never "no interval"
        out.unclear_in = [w for w, j in parts if j.kind == UNCLEAR]
        return out
    ends = [end for w, j in shown for end in _ends(w, j)]
    directions = {j.direction for _, j in shown}
    out.least, out.least_name = min(ends)
    out.most, out.most_name = max(ends)
    if len(directions) > 1 or "both" in directions:
        out.kind = DISAGREE
        out.slower = sum(1 for te, _ in ends if te > 1)
        out.faster = sum(1 for te, _ in ends if te < 1)
        return out
    if len(shown) == 1:
        workload, only = shown[0]
        out.kind, out.typical, out.low, out.high = only.kind, only.typical, only.low, only.high
        out.only_in, out.others = workload, len(parts) - 1
        out.q_p, out.i2, out.sign_p = only.q_p, only.i2, only.sign_p
        if only.kind in (ACROSS,):
            out.slower, out.faster, out.comparisons = only.slower, only.faster, only.comparisons
        for attr in ("least", "most"):
            setattr(out, attr + "_name", f"{workload} {getattr(only, attr + '_name')}".strip())
            setattr(out, attr, getattr(only, attr))
        return out
    pooled = [j for _, j in shown if j.kind == POOLED and not math.isnan(j.low)]
    if len(pooled) == len(shown):
        z = 2 * float(special.ndtri(0.5 + CONFIDENCE / 2))
        logs = np.log([j.typical for j in pooled])
        se = np.array([(math.log(j.high) - math.log(j.low)) / z for j in pooled])
        if (se > 0).all():
            mean, lo, hi, out.q_p, out.i2 = _heterogeneity(logs, se)
            if out.q_p >= Q_LEVEL and out.i2 < I2_LIMIT:
                out.kind, out.typical, out.low, out.high = POOLED, math.exp(mean), math.exp(lo), math.exp(hi)
                return out
    out.kind = SIZES
    out.typical = float(np.exp(np.mean(np.log([te for te, _ in ends]))))
    if math.isnan(out.i2):
        # a workload whose own rows differ in size: the layer's sizes differ by as much
        inside = [j.i2 for _, j in shown if not math.isnan(j.i2)]
        out.i2 = max(inside) if inside else math.nan
    return out
