"""The gate's judgement: which primary metrics got worse, and the forms a CI page reads.

Input: comparison rows of a new run against its baseline (ccbench.results.gate builds them from
bundles or from a history store), each with ``workload``, ``case``, ``metric``, ``unit``,
``config``, ``better``, ``ratio``, ``ci_low``, ``ci_high``, ``overhead_percent`` (the
time-equivalent change, positive = worse), ``significant``, ``mde`` (a fraction) and the medians.

A row is a **regression** when its change is significant, worse, and larger than the threshold:
the one the user sets (``--threshold 5%``), or by default the row's own minimum detectable effect
(a significant change below what the comparison could reliably see is the kind that adjacent runs
do not share). A row the source judged already (``judgement``: "lost", "not judged", with its
``reason``) keeps that: a case the baseline has and the new run lacks is LOST, a failure; one
that cannot be judged (too few executions, building the baseline, a median of 0) is NOT_JUDGED,
which fails nothing and which the JUnit file marks <skipped/> with the reason. Everything else
passes.

The verdict (Verdict) is said the same in its three forms: one line for stdout, a Markdown summary
for a pull request, a JUnit file for a CI page (those two in ccbench.analysis.settling.gate_pages). Exit status (docs/ci.md): 0 passed or nothing
judged (cases that could not be judged, building the baseline among them, are named and skipped),
1 failed (a regression, a case lost, or a new run that did not end); 2 (bad input, a run against
itself) and 3 (a bundle that does not verify) come before any page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import special

from ccbench.analysis import format as fmt
from ccbench.analysis.statistics.stats import CONFIDENCE, minimum_detectable_effect

REGRESSION = "regression"
PASSED = "passed"
#: a case of the baseline the new run lacks (a failure), and one that cannot be judged (skipped)
LOST = "lost"
NOT_JUDGED = "not judged"
CONFIRMED = "confirmed"
NOT_REPRODUCED = "not reproduced"
#: a --confirm that reached its budget (or its count of runs) before the case was settled
UNSETTLED = "unsettled"


@dataclass
class CaseResult:
    """One primary metric case of the gate."""

    workload: str
    case: str
    metric: str
    unit: str
    config: str
    baseline_median: float
    median: float
    change_percent: float
    low_percent: float
    high_percent: float
    mde_percent: float
    significant: bool
    status: str
    why: str
    #: after --confirm: CONFIRMED, NOT_REPRODUCED or UNSETTLED (still failing), and its numbers
    confirmation: str | None = None
    confirmation_why: str = ""
    #: executions of the new run (against a store: the run, 0 or 1) and of the baseline (against a
    #: store: earlier runs) flagged contended, and how many there were
    contended: int = 0
    contended_baseline: int = 0
    n: int = 0
    n_baseline: int = 0
    #: whether a higher or a lower value is better (which way the medians move for a slower run)
    better: str = "lower"

    @property
    def medians_against(self) -> bool:
        """Whether the medians move the other way from the change (a ratio of geometric means)."""
        if not (math.isfinite(self.change_percent) and self.change_percent and self.baseline_median > 0):
            return False
        step = self.median - self.baseline_median
        slower = step > 0 if self.better != "higher" else step < 0
        return step != 0 and slower != (self.change_percent > 0)

    #: against a store: ``contended`` is the new run's flag and the baseline's counts are earlier runs
    per_run: bool = False

    @property
    def name(self) -> str:
        """The case as a CI page names it: "fio 4k randread throughput on plain / disk"."""
        return " ".join(p for p in (self.workload, self.case, self.metric) if p) + f" on {self.config}"

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.workload, self.case, self.metric, self.config)

    @property
    def failed(self) -> bool:
        return self.status == LOST or (self.status == REGRESSION and self.confirmation != NOT_REPRODUCED)

    @property
    def contention(self) -> str:
        """What of this case ran beside other work: "2 of 5 new executions contended", "" for none."""
        parts = []
        if self.contended:
            parts.append(
                "the new run contended" if self.per_run else f"{self.contended} of {self.n} new executions contended"
            )
        if self.contended_baseline:
            unit = "earlier runs" if self.per_run else "baseline executions"
            parts.append(f"{self.contended_baseline} of {self.n_baseline} {unit} contended")
        return "; ".join(parts)


@dataclass
class Prediction:
    """One new run's median against the medians of earlier runs of its series, on logs: the ratio to
    their geometric mean, its 95% prediction interval (se = s * sqrt(1 + 1/m), m - 1 degrees of
    freedom: the spread from run to run, for one more run) and its minimum detectable effect."""

    ratio: float
    low: float
    high: float
    mde: float

    @property
    def significant(self) -> bool:
        return self.low > 1 or self.high < 1


def predict(past_logs: np.ndarray, new_log: float) -> Prediction:
    """The new run (its median's log) against ``past_logs`` (earlier run medians' logs, at least 2)."""
    m = len(past_logs)
    diff = float(new_log - past_logs.mean())
    se = float(past_logs.std(ddof=1)) * math.sqrt(1 + 1 / m)
    if se == 0:
        return Prediction(math.exp(diff), math.exp(diff), math.exp(diff), 0.0)
    t = float(special.stdtrit(m - 1, 0.5 + CONFIDENCE / 2))
    mde = float(minimum_detectable_effect(se, m - 1))
    return Prediction(math.exp(diff), math.exp(diff - t * se), math.exp(diff + t * se), mde)


def _percent_interval(row: pd.Series) -> tuple[float, float]:
    """The interval of the time-equivalent change in percent (a throughput ratio's is inverted)."""
    low, high = float(row["ci_low"]), float(row["ci_high"])
    if row.get("better") == "higher":
        low, high = (1 / high if high else math.inf), (1 / low if low else math.inf)
    return (low - 1) * 100, (high - 1) * 100


def _count(row: pd.Series, column: str) -> int:
    value = row.get(column)
    return 0 if fmt.missing(value) else int(value)


def judge(rows: pd.DataFrame, threshold: float | None = None, store: bool = False) -> list[CaseResult]:
    """A CaseResult per row; ``threshold`` a fraction of the time-equivalent change (0.05 for 5%
    slower), None for each row's MDE; ``store``: the rows are against a history store (the
    baseline's counts are runs, the new side is one run)."""
    out = []
    for _, row in rows.iterrows():
        status, why = _status(row, threshold)
        result = CaseResult(
            workload=str(row["workload"]),
            case=row["case"] if isinstance(row["case"], str) else "",
            metric=str(row["metric"]),
            unit=str(row["unit"] or ""),
            config=str(row["config"]),
            baseline_median=float(row["baseline_median"]),
            median=float(row["median"]),
            change_percent=_float(row.get("overhead_percent")),
            low_percent=math.nan,
            high_percent=math.nan,
            mde_percent=_float(row.get("mde")) * 100,
            significant=bool(row.get("significant")) if not fmt.missing(row.get("significant")) else False,
            status=status,
            why=why,
            contended=_count(row, "contended"),
            contended_baseline=_count(row, "contended_baseline"),
            n=_count(row, "n"),
            n_baseline=_count(row, "n_baseline"),
            better="higher" if row.get("better") == "higher" else "lower",
        )
        if not fmt.missing(row.get("ci_low")):
            result.low_percent, result.high_percent = _percent_interval(row)
        result.per_run = store
        if result.failed and result.contention:
            result.why += f"; {result.contention}: a busy machine may have made it slower (--exclude-contended)"
        out.append(result)
    return out


def _float(value) -> float:
    return math.nan if fmt.missing(value) else float(value)


def _status(row: pd.Series, threshold: float | None) -> tuple[str, str]:
    """The case's status and why."""
    judgement = row.get("judgement") if isinstance(row.get("judgement"), str) else ""
    if judgement == LOST:
        return LOST, str(row.get("reason") or "not measured in the new run")
    if judgement == NOT_JUDGED:
        return NOT_JUDGED, f"not judged: {row.get('reason')}"
    if fmt.missing(row.get("ci_low")):
        return NOT_JUDGED, (
            f"not judged: no interval ({_count(row, 'n')} new and {_count(row, 'n_baseline')} baseline "
            "executions; it needs 2 or more on each side)"
        )
    change = _float(row.get("overhead_percent"))
    mde = _float(row.get("mde")) * 100
    significant = not fmt.missing(row.get("significant")) and bool(row["significant"])
    limit = threshold * 100 if threshold is not None else mde
    words = fmt.effect(1 + change / 100)
    named = f"the threshold {threshold * 100:g}% slower" if threshold is not None else f"the MDE {fmt.mde(mde / 100)}"
    if significant and change > 0 and not math.isnan(limit) and change > limit:
        return REGRESSION, f"{words}, significant, beyond {named}"
    if significant and change > 0:
        return PASSED, f"{words}, significant but within {named}"
    if significant:
        return PASSED, f"{words}: better"
    could = "" if math.isnan(mde) else f"; could have detected {fmt.mde(mde / 100)} or more"
    return PASSED, f"no significant change{could}"


@dataclass
class Settled:
    """A failing case's confirmation: its state (CONFIRMED, NOT_REPRODUCED, UNSETTLED), the
    time-equivalent change of the confirmation runs against the baseline as a fraction, its
    anytime-valid interval (None while not finite) and the confirmation executions it rests on."""

    state: str
    change: float | None
    low: float | None
    high: float | None
    executions: int
    limit: float

    def describe(self) -> str:
        if self.change is None:
            return f"no interval yet ({self.executions} confirmation executions)"
        if self.low is None or self.high is None:
            return f"{self.change:+.1%}, interval not yet finite ({self.executions} confirmation executions)"
        bounds = (
            f"{self.change:+.1%} [{self.low:+.1%}, {self.high:+.1%}] over {self.executions} confirmation executions"
        )
        if self.state == CONFIRMED:
            return f"{bounds}: worse, beyond {self.limit:.1%}"
        if self.state == NOT_REPRODUCED:
            return f"{bounds}: no regression above {self.limit:.1%}"
        return f"{bounds}: neither settled"


def settle_confirmation(new_logs, base_logs, better: str | None, limit: float, alpha: float = 0.05) -> Settled:
    """Whether the confirmation runs (``new_logs``: the log values of every confirmation execution
    of one case, looked at after each run) confirm a regression against the baseline's
    (``base_logs``, fixed), an interval valid however often it is looked at: the new side's mean
    by the settle rule's confidence sequence (ccbench.analysis.statistics.sequential.interval) at alpha / 2,
    the baseline's fixed mean by a t interval at alpha / 2 (it does not grow), their difference
    bounded by the union of the two (Bonferroni). CONFIRMED when the whole interval is worse and
    the change is beyond ``limit`` (a fraction: the gate's rule on this interval); NOT_REPRODUCED
    when the interval excludes every regression beyond ``limit``; else UNSETTLED."""
    from ccbench.analysis.statistics.sequential import interval

    new, base = np.asarray(new_logs, dtype=float), np.asarray(base_logs, dtype=float)
    if len(new) < 2 or len(base) < 2:
        return Settled(UNSETTLED, None, None, None, len(new), limit)
    sign = -1.0 if better == "higher" else 1.0
    low_new, high_new = (float(x) for x in interval(len(new), new.sum(), (new**2).sum(), alpha / 2))
    t = float(special.stdtrit(len(base) - 1, 1 - alpha / 4))
    half = t * float(base.std(ddof=1)) / math.sqrt(len(base))
    change = sign * (float(new.mean()) - float(base.mean()))
    # the difference of the means lies between these; the change (worse > 0) is it with the direction's sign
    ends = sorted(sign * d for d in (low_new - float(base.mean()) - half, high_new - float(base.mean()) + half))
    if not all(math.isfinite(e) for e in ends):
        return Settled(UNSETTLED, math.expm1(change), None, None, len(new), limit)
    state = UNSETTLED
    if ends[0] > 0 and math.expm1(change) > limit:
        state = CONFIRMED
    elif ends[1] < math.log1p(limit):
        state = NOT_REPRODUCED
    return Settled(state, math.expm1(change), math.expm1(ends[0]), math.expm1(ends[1]), len(new), limit)


#: why a lost case is lost where the new run's plan has none of its workload (the runs' plans differ)
NOT_IN_PLAN = "the new run's plan has no such workload"
#: ... or has it with other parameters or variants (its reason names them): running it again would not
#: measure the case either
OTHER_PLAN = "the new run's plan measures the workload otherwise"


def failing_workloads(results: list[CaseResult]) -> list[str]:
    """The workloads with a failing case, in order: what ``ccbench run --only`` takes (a workload the
    new run's plan does not hold is none: running that plan again would not measure it)."""
    return list(
        dict.fromkeys(r.workload for r in results if r.failed and NOT_IN_PLAN not in r.why and OTHER_PLAN not in r.why)
    )


#: the reason of a not-judged case whose series has too few earlier runs in a history store, and how
#: many earlier runs a series needs (ccbench.results.gate uses both)
BUILDING = "building the baseline"
MIN_HISTORY = 3


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


@dataclass
class Verdict:
    """Every case of one gate, against what, by which rule, and what the new run was."""

    results: list[CaseResult]
    against: str
    threshold: float | None
    #: the new bundles whose run did not end ("<bundle> (status 'interrupted')"): a failure
    interrupted: list[str] = field(default_factory=list)
    #: what else a reader must know (the new run already in the store, contended runs left out)
    notes: list[str] = field(default_factory=list)
    #: the formats the new run was imported from (hyperfine, fio...): a run ccbench did not make is
    #: measured again with its own tool, not with ``ccbench run --only``
    imported: list[str] = field(default_factory=list)
    #: the plan the new run ran (ccbench.results.gate_runs.plan_of), for the rerun line
    plan: str = ""

    def rerun(self, plan: str | None = None) -> str | None:
        """How to measure the failing cases again, or None when nothing failed."""
        workloads = failing_workloads(self.results)
        if not workloads:
            return None
        if self.imported:
            tools = ", ".join(self.imported)
            return (
                f"measure {', '.join(workloads)} again with the tool that made the new run ({tools}) and "
                f"import it (ccbench import {self.imported[0]} FILE)"
            )
        return f"ccbench run {plan or self.plan or 'PLAN'} --only {','.join(workloads)}"

    @property
    def failing(self) -> list[CaseResult]:
        return [r for r in self.results if r.failed]

    @property
    def not_judged(self) -> list[CaseResult]:
        return [r for r in self.results if r.status == NOT_JUDGED]

    @property
    def judged(self) -> list[CaseResult]:
        return [r for r in self.results if r.status not in (NOT_JUDGED, LOST)]

    @property
    def slower_within(self) -> list[CaseResult]:
        """Judged cases significantly slower but within the rule (the threshold, else each one's
        MDE): no regression, and not "no change" either."""
        return [r for r in self.results if r.status == PASSED and r.significant and r.change_percent > 0]

    def slower_words(self, most: int = 3) -> str:
        """The cases significantly slower within the rule in words, "" for none: "1 significantly
        slower within its MDE (prime time on no TEE: 3.0% slower, its MDE 4.1%)"."""
        cases = self.slower_within
        if not cases:
            return ""
        if self.threshold is not None:
            within = f"the threshold {self.threshold * 100:g}%"
            named = [f"{r.name}: {fmt.effect(1 + r.change_percent / 100)}" for r in cases[:most]]
        else:
            within = "its MDE" if len(cases) == 1 else "their MDEs"
            named = [
                f"{r.name}: {fmt.effect(1 + r.change_percent / 100)}, its MDE {fmt.mde(r.mde_percent / 100)}"
                for r in cases[:most]
            ]
        more = f"; and {len(cases) - most} more" if len(cases) > most else ""
        return f"{len(cases)} significantly slower within {within} ({'; '.join(named)}{more})"

    def not_judged_words(self, most: int = 3, named: bool = True) -> str:
        """The cases not judged in words, by reason: "1 not judged (skipped): 2 executions in the new
        run: too few to judge, the gate needs 3 (1 case: probe wall_time on no TEE / disk)"; without
        ``named``, no count first (every case is one of them)."""
        groups = self.grouped(self.not_judged, lambda r: r.why.removeprefix("not judged: "), most)
        said = "; ".join(f"{reason} ({cases})" for reason, cases in groups[:most])
        said += f"; and {len(groups) - most} other reasons" if len(groups) > most else ""
        return f"{len(self.not_judged)} not judged (skipped): {said}" if named else f"skipped: {said}"

    @property
    def building(self) -> int | None:
        """Against a store where no case could be judged yet for want of earlier runs: the most
        earlier runs any series has (None otherwise)."""
        skipped = self.not_judged
        if self.judged or not skipped or not all(BUILDING in r.why for r in skipped):
            return None
        return max(r.n_baseline for r in skipped)

    @property
    def exit_code(self) -> int:
        return 1 if self.failing or self.interrupted else 0

    @property
    def rule(self) -> str:
        worse = (
            f"{self.threshold * 100:g}% slower or more (a throughput: its time-equivalent)"
            if self.threshold is not None
            else "worse beyond its own MDE"
        )
        return f"a regression: significant at 95%, {worse}"

    def parts(self) -> tuple[str, str]:
        """The verdict's word (failed, building the baseline, passed) and what it rests on."""
        total = _plural(len(self.results), "primary metric case")
        regressions = sum(r.status == REGRESSION for r in self.failing)
        lost = sum(r.status == LOST for r in self.failing)
        if self.interrupted or self.failing:
            parts = [f"the new run did not end: {'; '.join(self.interrupted)}"] if self.interrupted else []
            parts += [_plural(regressions, "regression")] if regressions else []
            parts += [f"{_plural(lost, 'case')} lost (in the baseline, not measured in the new run)"] if lost else []
            parts += [self.slower_words()] if self.slower_within else []
            parts += [self.not_judged_words()] if self.not_judged else []
            return "failed", f"{', '.join(parts)}; of {total} against {self.against} ({self.rule})"
        if self.building is not None:
            return BUILDING, (
                f"{self.building} of {MIN_HISTORY} runs in {self.against}; none of {total} judged yet (each series "
                f"needs {MIN_HISTORY} earlier runs; runs of another plan or parameters do not count): add this run to the store"
            )
        if not self.judged:
            return "not judged", (
                f"none of {total} against {self.against} could be judged ({self.not_judged_words(named=False)}); "
                "nothing failed"
            )
        skipped = f"; {self.not_judged_words()}" if self.not_judged else ""
        slower = f"; {self.slower_words()}" if self.slower_within else ""
        judged = _plural(len(self.judged), "judged primary metric case")
        return (
            "passed",
            f"no regression among {judged} against {self.against} ({self.rule}){slower}{skipped}{self._blind()}",
        )

    def _blind(self) -> str:
        """Where the judged cases could not have seen a change a user cares about (their median MDE over
        25%, or over the threshold), a pass says so: it is a pass on what this run could see, no more."""
        mdes = sorted(r.mde_percent for r in self.judged if r.mde_percent is not None and math.isfinite(r.mde_percent))
        if not mdes:
            return ""
        median = mdes[len(mdes) // 2]
        limit = 25.0 if self.threshold is None else min(25.0, self.threshold * 100)
        if median <= limit:
            return ""
        return (
            f"; weak: half the judged cases could not have seen a change under {fmt.mde(median / 100)} "
            "(their MDE): more repetitions, or a quieter machine, to see smaller ones"
        )

    def headline(self) -> str:
        """The verdict in one line (stdout's first)."""
        return "ccbench gate: {}: {}".format(*self.parts())

    def contended(self) -> list[CaseResult]:
        return [r for r in self.results if r.contention]

    @staticmethod
    def grouped(results: list[CaseResult], reason, most: int = 10) -> list[tuple[str, str]]:
        """(a reason, the cases that share it named: the first ``most`` and how many more), in order
        of first appearance: 25 cases building their baseline are one line, not 25."""
        groups: dict[str, list[str]] = {}
        for r in results:
            groups.setdefault(reason(r), []).append(r.name)
        out = []
        for why, names in groups.items():
            more = f" and {len(names) - most} more" if len(names) > most else ""
            out.append((why, f"{len(names)} case{'s' if len(names) != 1 else ''}: {', '.join(names[:most])}{more}"))
        return out
