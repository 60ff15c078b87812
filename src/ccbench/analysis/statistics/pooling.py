"""Pooling comparison rows' log effects: fixed-effect pooling with Cochran's Q and I^2 (heterogeneity),
each row's standard error of its log ratio, and the two-sided sign test; what the verdict's semantics
(ccbench.analysis.judgement.semantics) pools by."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import special

from ccbench.analysis.statistics.stats import CONFIDENCE


def heterogeneity(logs: np.ndarray, se: np.ndarray) -> tuple[float, float, float, float, float]:
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
