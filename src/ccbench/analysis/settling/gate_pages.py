"""The gate's verdict as a CI page reads it: a Markdown summary for a pull request or a job page,
and a JUnit file (one testcase per primary metric case). ccbench.analysis.settling.gate judges."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

from ccbench.analysis import format as fmt
from ccbench.analysis.settling.gate import LOST, NOT_JUDGED, CaseResult, Verdict


def markdown(results: list[CaseResult], against: str, threshold: float | None = None, **more) -> str:
    """A summary for a pull request: the verdict, what it rests on, then every case (``more``:
    Verdict's interrupted and notes)."""
    verdict = Verdict(results, against, threshold, **more)
    # a significant slow-down within the rule is no regression, but not "no change" either: the verdict says it
    lines = ["**ccbench gate: {}**: {}".format(*verdict.parts()), ""]
    results = verdict.results
    lost = [r for r in results if r.status == LOST]
    if lost:
        lines += [f"Lost: {'; '.join(f'{r.name}: {r.why}' for r in lost)}.", ""]
    for reason, named in verdict.grouped(verdict.not_judged, lambda r: r.why.removeprefix("not judged: ")):
        lines += [f"Not judged (skipped in JUnit), {reason}: {named}.", ""]
    for contention, named in verdict.grouped(verdict.contended(), lambda r: r.contention):
        lines += [
            f"Contended, {contention}: {named}; executions that ran beside other work are slower "
            "(gate --exclude-contended leaves them out).",
            "",
        ]
    lines += [f"Note: {note}." for note in verdict.notes] + ([""] if verdict.notes else [])
    rerun = verdict.rerun()
    if rerun and verdict.imported:
        lines += [f"Rerun only these: {rerun}.", ""]
    elif rerun:
        lines += [f"Rerun only these: `{rerun}`", ""]
    against = sum(r.medians_against for r in results)
    if against:
        lines += [
            f"In {against} case{'s' if against != 1 else ''} the medians move the other way from the change "
            "(a ratio of geometric means, as its interval is): a few executions carry the difference.",
            "",
        ]
    lines += [
        "| case | baseline median | new median | change [95% interval] | MDE | result |",
        "|---|---|---|---|---|---|",
    ]
    for r in sorted(results, key=lambda r: (not r.failed, r.status == NOT_JUDGED, r.name)):
        result = r.status if r.confirmation is None else f"{r.status}, {r.confirmation}"
        if r.confirmation_why:
            result += f" ({r.confirmation_why})"
        lines.append(
            f"| {r.name} | {fmt.number(r.baseline_median, r.unit)} | {fmt.number(r.median, r.unit)} | "
            f"{_change(r)} | {fmt.mde(r.mde_percent / 100)} | {result}: {r.why.removeprefix(result + ': ')} |"
        )
    return "\n".join(lines) + "\n"


def _change(r: CaseResult) -> str:
    return fmt.effect(1 + r.change_percent / 100, 1 + r.low_percent / 100, 1 + r.high_percent / 100)


def junit(results: list[CaseResult], against: str, threshold: float | None = None, **more) -> str:
    """A JUnit XML document: one testcase per primary metric case, a failure for each regression
    and each case lost, <skipped/> with the reason for each case not judged, and one testcase
    failing for a new run that did not end (``more``: Verdict's interrupted and notes)."""
    verdict = Verdict(results, against, threshold, **more)
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
