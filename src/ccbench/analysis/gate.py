"""The gate's judgement: which primary metrics got worse, and the forms a CI page reads.

Input: comparison rows of a new run against its baseline (ccbench.results.gate builds them from
bundles or from a history store), each with ``workload``, ``case``, ``metric``, ``unit``,
``config``, ``better``, ``ratio``, ``ci_low``, ``ci_high``, ``overhead_percent`` (the
time-equivalent change, positive = worse), ``significant``, ``mde`` (a fraction) and the medians.

A row is a **regression** when its change is significant, worse, and larger than the threshold:
the one the user sets (``--threshold 5%``), or by default the row's own minimum detectable effect
(a significant change below what the comparison could reliably see is the kind that adjacent runs
do not share). Everything else passes; a row without an interval (too few executions) passes and
says so.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special

from ccbench.analysis import format as fmt
from ccbench.analysis.stats import CONFIDENCE, minimum_detectable_effect

REGRESSION = "regression"
PASSED = "passed"
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

    @property
    def name(self) -> str:
        """The case as a CI page names it: "fio 4k randread throughput on plain / disk"."""
        return " ".join(p for p in (self.workload, self.case, self.metric) if p) + f" on {self.config}"

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.workload, self.case, self.metric, self.config)

    @property
    def failed(self) -> bool:
        return self.status == REGRESSION and self.confirmation != NOT_REPRODUCED


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


def judge(rows: pd.DataFrame, threshold: float | None = None) -> list[CaseResult]:
    """A CaseResult per row; ``threshold`` a fraction (0.05 for 5%), None for each row's MDE."""
    out = []
    for _, row in rows.iterrows():
        change = float(row["overhead_percent"])
        mde = float(row["mde"]) * 100 if not fmt.missing(row.get("mde")) else math.nan
        low, high = _percent_interval(row) if not fmt.missing(row["ci_low"]) else (math.nan, math.nan)
        significant = bool(row["significant"])
        limit = threshold * 100 if threshold is not None else mde
        worse = significant and change > 0
        words = fmt.effect(1 + change / 100)
        if math.isnan(low):
            status, why = PASSED, "no interval (too few executions): not judged"
        elif worse and not math.isnan(limit) and change > limit:
            status = REGRESSION
            named = f"the threshold {threshold * 100:g}%" if threshold is not None else f"the MDE {fmt.mde(mde / 100)}"
            why = f"{words}, significant, beyond {named}"
        elif worse:
            named = f"the threshold {threshold * 100:g}%" if threshold is not None else f"the MDE {fmt.mde(mde / 100)}"
            status, why = PASSED, f"{words}, significant but within {named}"
        elif significant:
            status, why = PASSED, f"{words}: better"
        else:
            could = "" if math.isnan(mde) else f"; could have detected {mde:.1f}% or more"
            status, why = PASSED, f"no significant change{could}"
        out.append(
            CaseResult(
                workload=str(row["workload"]),
                case=row["case"] if isinstance(row["case"], str) else "",
                metric=str(row["metric"]),
                unit=str(row["unit"] or ""),
                config=str(row["config"]),
                baseline_median=float(row["baseline_median"]),
                median=float(row["median"]),
                change_percent=change,
                low_percent=low,
                high_percent=high,
                mde_percent=mde,
                significant=significant,
                status=status,
                why=why,
            )
        )
    return out


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
    by the settle rule's confidence sequence (ccbench.analysis.sequential.interval) at alpha / 2,
    the baseline's fixed mean by a t interval at alpha / 2 (it does not grow), their difference
    bounded by the union of the two (Bonferroni). CONFIRMED when the whole interval is worse and
    the change is beyond ``limit`` (a fraction: the gate's rule on this interval); NOT_REPRODUCED
    when the interval excludes every regression beyond ``limit``; else UNSETTLED."""
    from ccbench.analysis.sequential import interval

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


def failing_workloads(results: list[CaseResult]) -> list[str]:
    """The workloads with a failing case, in order: what ``ccbench run --only`` takes."""
    return list(dict.fromkeys(r.workload for r in results if r.failed))


def markdown(results: list[CaseResult], against: str, threshold: float | None) -> str:
    """A summary for a pull request: the verdict, then the failing cases, then every case."""
    failing = [r for r in results if r.failed]
    rule = f"worse by more than {threshold * 100:g}%" if threshold is not None else "worse beyond its own MDE"
    head = (
        f"**ccbench gate: {len(failing)} regression{'s' if len(failing) != 1 else ''}** of {len(results)} primary "
        f"metric case{'s' if len(results) != 1 else ''} against {against} (a regression: significant at 95%, {rule})"
        if failing
        else f"**ccbench gate: passed**: no regression among {len(results)} primary metric case"
        f"{'s' if len(results) != 1 else ''} against {against} (a regression: significant at 95%, {rule})"
    )
    slower = [r for r in results if not r.failed and r.significant and r.change_percent > 0]
    if slower:
        # a significant slow-down within the rule is no regression, but it is not "no change" either
        head += f"; {len(slower)} significantly slower within the rule: {', '.join(r.name for r in slower[:5])}"
        head += f" and {len(slower) - 5} more" if len(slower) > 5 else ""
    lines = [head, ""]
    if failing:
        lines += [f"Rerun only these: `ccbench run PLAN --only {','.join(failing_workloads(results))}`", ""]
    lines += [
        "| case | baseline | new | change [95% interval] | MDE | result |",
        "|---|---|---|---|---|---|",
    ]
    for r in sorted(results, key=lambda r: (not r.failed, r.name)):
        change = fmt.effect(1 + r.change_percent / 100, 1 + r.low_percent / 100, 1 + r.high_percent / 100)
        result = r.status if r.confirmation is None else f"{r.status}, {r.confirmation}"
        if r.confirmation_why:
            result += f" ({r.confirmation_why})"
        lines.append(
            f"| {r.name} | {fmt.number(r.baseline_median, r.unit)} | {fmt.number(r.median, r.unit)} | "
            f"{change} | "
            f"{fmt.mde(r.mde_percent / 100)} | {result}: {r.why} |"
        )
    return "\n".join(lines) + "\n"


def junit(results: list[CaseResult], against: str) -> str:
    """A JUnit XML document: one testcase per primary metric case, a failure for each regression."""
    suite = ElementTree.Element(
        "testsuite",
        name="ccbench gate",
        tests=str(len(results)),
        failures=str(sum(r.failed for r in results)),
        errors="0",
        skipped="0",
    )
    ElementTree.SubElement(ElementTree.SubElement(suite, "properties"), "property", name="against", value=against)
    for r in results:
        case = ElementTree.SubElement(suite, "testcase", classname=f"ccbench.{r.workload}", name=r.name, time="0")
        if r.failed:
            failure = ElementTree.SubElement(case, "failure", message=r.why, type="regression")
            failure.text = (
                f"{r.name}: {fmt.number(r.baseline_median, r.unit)} -> {fmt.number(r.median, r.unit)} "
                f"({fmt.effect(1 + r.change_percent / 100, 1 + r.low_percent / 100, 1 + r.high_percent / 100)}, "
                f"95% interval; MDE {fmt.mde(r.mde_percent / 100)})" + (f"; {r.confirmation}" if r.confirmation else "")
            )
        else:
            ElementTree.SubElement(case, "system-out").text = r.why
    testsuites = ElementTree.Element("testsuites", name="ccbench")
    testsuites.append(suite)
    ElementTree.indent(testsuites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(testsuites, encoding="unicode") + "\n"
