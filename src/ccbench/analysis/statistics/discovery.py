"""The false discovery rate across a layer's cases: the e-Benjamini-Hochberg procedure (Wang and
Ramdas 2022, "False discovery rate control with e-values") on the e-values the settle rule computes.

Each settled case controls its own error (ccbench.analysis.statistics.sequential), so a layer of 40 cases with
no cost has some case called a cost or a gain in about half of its runs. e-BH calls a case only
where its e-value (the Bayes factor of "no cost", 1 / ccbench.analysis.statistics.sequential.p_value) is at
least K / (k alpha), with K the layer's cases and k the number called: the expected share of wrong
calls among the calls is at most alpha whatever the dependence between the cases, and the Bayes
factor is an e-value at whatever round a case stopped (it is a test martingale under no cost).
The p value's cap at 1 raises e-values below 1 to 1, which changes nothing: e-BH calls nothing
below 1 / alpha.

Not wired into the rows (ccbench.analysis.settling.settled): a row's ``significant`` is the run's own answer,
which the run printed as it settled; calling fewer rows than the run did would make compare disagree
with the run's closing lines (docs/analysis.md "Settling each case").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def e_bh(e_values: Sequence[float], alpha: float = 0.05) -> np.ndarray:
    """Which of the cases (their e-values, nan for a case without one: never called) e-BH calls at
    false discovery rate ``alpha``: the k largest e-values, k the largest count whose k-th largest
    e-value is at least K / (k alpha), K the number of cases."""
    if not 0 < alpha < 1:
        raise ValueError(f"a false discovery rate must be between 0 and 1 (exclusive), not {alpha:g}")
    e = np.nan_to_num(np.asarray(e_values, dtype=float), nan=0.0)
    count = len(e)
    called = np.zeros(count, dtype=bool)
    if not count:
        return called
    order = np.argsort(-e, kind="stable")
    ranks = np.arange(1, count + 1)
    passing = np.flatnonzero(e[order] >= count / (ranks * alpha))
    if len(passing):
        called[order[: passing[-1] + 1]] = True
    return called


def e_values(p_values: Sequence[float]) -> np.ndarray:
    """The e-values behind anytime-valid p values (1 / p; nan where p is)."""
    p = np.asarray(p_values, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(np.isnan(p), np.nan, np.where(p > 0, 1 / p, np.inf))
