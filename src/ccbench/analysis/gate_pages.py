"""The gate's verdict and its pages: one line for stdout, a Markdown summary for a pull request,
a JUnit file for a CI page; all three say the same (ccbench.analysis.gate judges the cases).

Exit status (docs/ci.md): 0 passed (cases that could not be judged, building the baseline among
them, are named and marked skipped), 1 failed (a regression, a case lost, or a new run that did not
end); 2 (bad input, a run against itself) and 3 (a bundle that does not verify) come before any page.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field

from ccbench.analysis import format as fmt
from ccbench.analysis.gate import LOST, NOT_JUDGED, REGRESSION, CaseResult, failing_workloads

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
            return "failed", f"{', '.join(parts)}; of {total} against {self.against} ({self.rule})"
        if self.building is not None:
            return BUILDING, (
                f"{self.building} of {MIN_HISTORY} runs in {self.against}; none of {total} judged yet (each series "
                f"needs {MIN_HISTORY} earlier runs; runs of another plan or parameters do not count): add this run to the store"
            )
        if not self.judged:
            return "not judged", (
                f"none of {total} against {self.against} could be judged (each is named, skipped in JUnit); "
                "nothing failed"
            )
        skipped = f"; {len(self.not_judged)} not judged (skipped)" if self.not_judged else ""
        judged = _plural(len(self.judged), "judged primary metric case")
        return "passed", f"no regression among {judged} against {self.against} ({self.rule}){skipped}"

    def headline(self) -> str:
        """The verdict in one line (stdout's first)."""
        return "ccbench gate: {}: {}".format(*self.parts())

    def contended(self) -> list[CaseResult]:
        return [r for r in self.results if r.contention]


def markdown(verdict: Verdict) -> str:
    """A summary for a pull request: the verdict, what it rests on, then every case."""
    lines = ["**ccbench gate: {}**: {}".format(*verdict.parts())]
    results = verdict.results
    slower = [r for r in results if not r.failed and r.significant and r.change_percent > 0]
    if slower:
        # a significant slow-down within the rule is no regression, but it is not "no change" either
        more = f" and {len(slower) - 5} more" if len(slower) > 5 else ""
        lines[0] += f"; {len(slower)} significantly slower within the rule: {', '.join(r.name for r in slower[:5])}{more}"
    lines.append("")
    lost = [r for r in results if r.status == LOST]
    if lost:
        lines += [f"Lost: {', '.join(r.name for r in lost)} (in the baseline, not measured in the new run).", ""]
    if verdict.not_judged:
        named = ", ".join(f"{r.name} ({r.why.removeprefix('not judged: ')})" for r in verdict.not_judged[:10])
        more = f" and {len(verdict.not_judged) - 10} more" if len(verdict.not_judged) > 10 else ""
        lines += [f"Not judged (skipped in JUnit): {named}{more}.", ""]
    contended = verdict.contended()
    if contended:
        lines += [
            f"Contended: {', '.join(f'{r.name} ({r.contention})' for r in contended)}; their executions ran beside "
            "other work, which makes them slower (gate --exclude-contended leaves them out).",
            "",
        ]
    lines += [f"Note: {note}." for note in verdict.notes] + ([""] if verdict.notes else [])
    workloads = failing_workloads(results)
    if workloads:
        lines += [f"Rerun only these: `ccbench run PLAN --only {','.join(workloads)}`", ""]
    lines += ["| case | baseline | new | change [95% interval] | MDE | result |", "|---|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: (not r.failed, r.status == NOT_JUDGED, r.name)):
        result = r.status if r.confirmation is None else f"{r.status}, {r.confirmation}"
        if r.confirmation_why:
            result += f" ({r.confirmation_why})"
        lines.append(
            f"| {r.name} | {fmt.number(r.baseline_median, r.unit)} | {fmt.number(r.median, r.unit)} | "
            f"{_change(r)} | {fmt.mde(r.mde_percent / 100)} | {result}: {r.why} |"
        )
    return "\n".join(lines) + "\n"


def _change(r: CaseResult) -> str:
    return fmt.effect(1 + r.change_percent / 100, 1 + r.low_percent / 100, 1 + r.high_percent / 100)


def junit(verdict: Verdict) -> str:
    """A JUnit XML document: one testcase per primary metric case, a failure for each regression
    and each case lost, <skipped/> with the reason for each case not judged, and one testcase
    failing for a new run that did not end."""
    results = verdict.results
    failures = len(verdict.failing) + bool(verdict.interrupted)
    suite = ElementTree.Element(
        "testsuite",
        name="ccbench gate",
        tests=str(len(results) + bool(verdict.interrupted)),
        failures=str(failures),
        errors="0",
        skipped=str(len(verdict.not_judged)),
    )
    properties = ElementTree.SubElement(suite, "properties")
    ElementTree.SubElement(properties, "property", name="against", value=verdict.against)
    ElementTree.SubElement(properties, "property", name="verdict", value=verdict.headline())
    if verdict.interrupted:
        case = ElementTree.SubElement(suite, "testcase", classname="ccbench.run", name="the new run ended", time="0")
        failure = ElementTree.SubElement(case, "failure", message="the new run did not end", type="interrupted")
        failure.text = "; ".join(verdict.interrupted) + ": finish it with ccbench run --resume, or run the plan again"
    for r in results:
        case = ElementTree.SubElement(suite, "testcase", classname=f"ccbench.{r.workload}", name=r.name, time="0")
        if r.failed:
            failure = ElementTree.SubElement(case, "failure", message=r.why, type=r.status)
            failure.text = (
                f"{r.name}: {fmt.number(r.baseline_median, r.unit)} -> {fmt.number(r.median, r.unit)} "
                f"({_change(r)}, 95% interval; MDE {fmt.mde(r.mde_percent / 100)})"
                + (f"; {r.confirmation}" if r.confirmation else "")
                + (f"; {r.contention}" if r.contention else "")
            )
        elif r.status == NOT_JUDGED:
            ElementTree.SubElement(case, "skipped", message=r.why)
        else:
            ElementTree.SubElement(case, "system-out").text = r.why + (f"; {r.contention}" if r.contention else "")
    testsuites = ElementTree.Element("testsuites", name="ccbench")
    testsuites.append(suite)
    ElementTree.indent(testsuites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(testsuites, encoding="unicode") + "\n"
