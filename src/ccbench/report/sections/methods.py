"""Methods: how the numbers were made."""

from __future__ import annotations

import pandas as pd

from ccbench.report.sections import ReportContext, Section, Table

ORDER = 90


def build(ctx: ReportContext) -> Section | None:
    samples = ctx.samples
    if samples.empty:
        return None
    counts = samples.groupby("config").agg(samples=("value", "size"), warmup=("warmup", "sum")).reset_index()
    counts["measured"] = counts["samples"] - counts["warmup"]
    intro = (
        "Each execution ran in its own worker process; configurations were interleaved (A B A B) with a cooldown "
        "between executions. Warmup executions are recorded in the bundles and excluded here. "
        "Intervals: Welch's t interval on log values (ratio of geometric means), 95%; validated by simulation "
        "(A/A false-positive rate at most 5%, a 5% slowdown at 1% CV found in over 90% of trials at n = 10). "
        "Significant = the interval excludes 1. Flags: noisy (CV > 5%), not enough samples (n < 3). "
        "Bar charts show medians with the interquartile range."
    )
    return Section(title="Methods", intro=intro, tables=[Table(title="samples per configuration", frame=pd.DataFrame(counts))])
