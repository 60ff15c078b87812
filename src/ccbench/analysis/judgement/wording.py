"""How a scope's judgement (ccbench.analysis.judgement.semantics) is said: its kinds, the record of
one (Judgement) and its words in the one convention ("2.9x slower [2.6x, 3.3x]", "no cost above 4.1%
(the smallest it could see)"), a scope where only some rows differ naming them and the rest ("1 of 4
significant: 4k randread 68.5% slower (the other 3 comparisons not significant)"). Nothing here reads
rows: semantics.judge fills the record, every output renders its words."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ccbench.analysis import format as fmt

#: I^2 at or above this is heterogeneous (semantics: with Cochran's Q below Q_LEVEL)
I2_LIMIT = 0.5
#: the fewest rows with one value a side that are pooled across (a sign test on fewer cannot reach 5%)
MIN_POOLED = 6
#: a scope where only some rows differ names at most this many of them, else gives their range
SHOWN = 3

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


def settled_counts(significant: int, comparisons: int, workloads: int) -> str:
    """The counts beside a figure the run settled by layer: "settled on the mean of 4 cases in 2
    workloads, none called on its own" (a case is called on its own only by e-BH across the layer, so
    "none of 4 significant" beside the settled figure would read as a contradiction)."""
    cases = f"{comparisons} case{'s' if comparisons != 1 else ''}"
    where = f" in {workloads} workload{'s' if workloads != 1 else ''}"
    return f"settled on the mean of {cases}{where}, {called_on_own(significant)}"


def called_on_own(significant: int) -> str:
    """ "none called on its own", "3 called on their own": the cases e-BH called across the layer."""
    return f"{'none' if significant == 0 else significant} called on {'its' if significant <= 1 else 'their'} own"


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
    #: of its comparisons, how many are not significant (the rest beside the significant ones)
    rest: int = 0
    #: its significant rows, the largest first (at most SHOWN): (name, time-equivalent, low, high); a
    #: scope where only some rows differ names these rather than a figure for the whole (partial)
    shown: list[tuple[str, float, float, float]] = field(default_factory=list)
    #: with ``only_in``: how many of that workload's own comparisons are not significant (``rest`` counts
    #: the whole scope's)
    only_rest: int = 0

    @property
    def partial(self) -> bool:
        """Whether only some of its comparisons differ, all in one direction: its words then name the
        ones that do and count the rest, never a figure that reads as the whole scope's."""
        return self.kind in (POOLED, SIZES) and not self.settled_on and self.significant > 0 and self.rest > 0

    def _partial_phrase(self, where: bool) -> str:
        """ "1 of 4 significant: 4k randread 68.5% slower [40.1%, 99.0%] (the other 3 comparisons not
        significant)"; more than SHOWN rows: their range ("5 of 12 significant: slower, 1.2x to 3.0x
        (...)"); with the one workload of a layer that shows them: "... in fio: ... ; none significant
        in 1 other workload)"."""
        rest = self.only_rest if where and self.only_in else self.rest
        total = self.significant + rest
        if self.shown and len(self.shown) == self.significant:
            if len(self.shown) == 1:
                name, te, low, high = self.shown[0]
                rows = f"{name} {fmt.effect(te, low, high)}".strip()
            else:
                rows = ", ".join(f"{name} {fmt.effect(te)}".strip() for name, te, _, _ in self.shown)
        else:
            rows = self._sizes_head()
        place = f" in {self.only_in}" if where and self.only_in else ""
        others = ""
        if where and self.only_in:
            others = f"; none significant in {self.others} other workload{'s' if self.others != 1 else ''}"
        if not rest:  # every comparison of the one workload differs: its others are the rest
            return f"{self.significant} of {total} significant{place}: {rows}{f' ({others[2:]})' if others else ''}"
        said = "the other comparison not significant" if rest == 1 else f"the other {rest} comparisons not significant"
        return f"{self.significant} of {total} significant{place}: {rows} ({said}{others})"

    def _sizes_head(self) -> str:
        """ "slower, 1.5x to 340x", or one figure where the ends print alike."""
        word = "slower" if self.typical >= 1 else "faster"
        ends = sorted((self.least, self.most), key=lambda v: abs(math.log(v)))
        span = _range(ends, word)
        return f"{word}, {span}" if " to " in span else fmt.effect(ends[-1])

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
        if self.partial:
            return self._partial_phrase(where)
        if self.kind == POOLED:
            return fmt.effect(self.typical, self.low, self.high) + (self._where() if where else "")
        if self.kind == SIZES:
            why = f" (sizes differ: I2 {self.i2 * 100:.0f}%)" if not math.isnan(self.i2) and self.i2 >= I2_LIMIT else ""
            if self.too_wide:
                why = " (the range; pooled, the interval is too wide for one figure)"
            # one significant row (or ends that print alike) is one figure, not a range
            return f"{self._sizes_head()}{why}{self._where() if where else ''}"
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
        if self.mde <= 0 and self.bound != BOUND_MDE:
            # a settle interval wholly on the faster side, its case not called a gain: it excludes every
            # cost ("no cost above 0.0%" read as a figure of a case that was 7.9x faster)
            return f"no cost at all ({bound_words(self.bound)})"
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
