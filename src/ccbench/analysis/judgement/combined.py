"""One judgement from several (ccbench.analysis.judgement.semantics): a layer's from its workloads' own,
never saying less than any of them, with the range across workloads where they differ."""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from ccbench.analysis.judgement.semantics import (
    ACROSS,
    BOUND_EXCLUDED,
    BOUND_MDE,
    BOUND_SETTLED,
    DISAGREE,
    I2_LIMIT,
    NONE_SEEN,
    POOLED,
    Q_LEVEL,
    SHOWN,
    SIZES,
    UNCLEAR,
    Judgement,
    _on_intervals,
    pool_supported,
)
from ccbench.analysis.statistics.pooling import heterogeneity
from ccbench.analysis.statistics.stats import CONFIDENCE


def _ends(workload: str, judgement: Judgement) -> list[tuple[float, str]]:
    """The effects a workload shows, named "workload case", for a range across workloads (of a workload
    where only some rows differ, theirs: never its pooled figure, which reads as the whole workload's)."""
    if judgement.kind == POOLED and not judgement.partial:
        return [(judgement.typical, workload)]
    if judgement.kind in (ACROSS,):
        return [(judgement.typical, f"{workload} (geometric mean of {judgement.comparisons})")]
    if judgement.kind in (SIZES, DISAGREE, POOLED):
        return [
            (judgement.least, f"{workload} {judgement.least_name}".strip()),
            (judgement.most, f"{workload} {judgement.most_name}".strip()),
        ]
    return []


def _named(workload: str, row: tuple[str, float, float, float]) -> tuple[str, float, float, float]:
    return (f"{workload} {row[0]}".strip(), *row[1:])


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
        rest=sum(j.rest for j in judgements),
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
        out.q_p, out.i2, out.sign_p, out.too_wide = only.q_p, only.i2, only.sign_p, only.too_wide
        out.shown, out.only_rest = only.shown, only.rest
        if only.kind in (ACROSS,):
            out.slower, out.faster, out.comparisons = only.slower, only.faster, only.comparisons
        for attr in ("least", "most"):
            setattr(out, attr + "_name", f"{workload} {getattr(only, attr + '_name')}".strip())
            setattr(out, attr, getattr(only, attr))
        return out
    out.shown = sorted((_named(w, row) for w, j in shown for row in j.shown), key=lambda r: -abs(math.log(r[1])))
    if len(out.shown) != out.significant or len(out.shown) > SHOWN:
        out.shown = []  # a workload with more than SHOWN rows: the range is said
    pooled = [j for _, j in shown if j.kind == POOLED and not j.partial and not math.isnan(j.low)]
    if len(pooled) == len(shown):
        z = 2 * float(special.ndtri(0.5 + CONFIDENCE / 2))
        logs = np.log([j.typical for j in pooled])
        se = np.array([(math.log(j.high) - math.log(j.low)) / z for j in pooled])
        if (se > 0).all():
            mean, lo, hi, out.q_p, out.i2 = heterogeneity(logs, se)
            if out.q_p >= Q_LEVEL and out.i2 < I2_LIMIT:
                typical, low, high = math.exp(mean), math.exp(lo), math.exp(hi)
                if pool_supported(typical, low, high, directions == {"slower"}):
                    out.kind, out.typical, out.low, out.high = POOLED, typical, low, high
                    return out
                out.too_wide = True
    out.kind = SIZES
    out.typical = float(np.exp(np.mean(np.log([te for te, _ in ends]))))
    if math.isnan(out.i2):
        # a workload whose own rows differ in size: the layer's sizes differ by as much
        inside = [j.i2 for _, j in shown if not math.isnan(j.i2)]
        out.i2 = max(inside) if inside else math.nan
    return out
