"""Machines as replicas: the second level of the comparison's model.

Several machines behind one configuration (bundles given the same ``--label``, fleet hosts sharing a
``ccbench_label``) are replicas of it. Executions vary within a machine (run-to-run noise) and
machines vary within a configuration (two VMs of one size differ); a comparison between
configurations on different machines has to include the second spread, or a machine's lottery
reads as the layer's cost.

The model, per group (workload, params, case, metric) and configuration: each machine's mean log
value, then the mean and the sample variance of those over the machines. Two configurations on
different machines are compared with the two-sample t interval on the machine means' logs with the
pooled variance and m_a + m_b - 2 degrees of freedom: in a balanced nested design (executions
within machines, machines within configurations) this is the exact test of the configuration
effect (the nested ANOVA's F test with machines as its error term). docs/analysis.md ("Replicas")
says why this and not Welch's t or a mixed model, and the simulation behind it
(tests/test_replicas.py).

One machine against several (1 vs 3) uses the same pooled interval (df = m_a + m_b - 2): the single
machine's spread is taken to be that of the others. One machine a side leaves no spread between
machines to estimate: the per-execution interval stays, and the verdict says that it covers
run-to-run noise only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import special

from ccbench.analysis.statistics.stats import CONFIDENCE, reported_mde, resolution, resolution_variance

#: the frame's column naming the machine a sample was measured on (probe["machine_id"], else the
#: hostname, else the bundle's path); frames built without it (tests) fall back to ``bundle``
MACHINE_ID = "machine_id"

#: what a comparison row's interval covers (the table's ``interval_from``)
BETWEEN_MACHINES = "machines"
SAME_MACHINES = "same machines"
RUNS_ONLY = "runs only"

#: the interval a comparison row uses (the table's ``interval`` column; a settled case's is
#: ccbench.analysis.labels.ANYTIME, set by ccbench.analysis.settling.settled)
WELCH = "Welch t"
BETWEEN = "t between machines"


def interval_names(interval_from) -> list[str]:
    """The interval each row of compare's own uses: between machines or Welch's on the executions."""
    return [BETWEEN if kind == BETWEEN_MACHINES else WELCH for kind in interval_from]


def machine_ids(frame: pd.DataFrame) -> np.ndarray:
    """Per sample, the machine it was measured on."""
    column = MACHINE_ID if MACHINE_ID in frame else "bundle"
    return frame[column].to_numpy(dtype=object)


def interval_kinds(base: pd.DataFrame, rows: pd.DataFrame, across: np.ndarray) -> np.ndarray:
    """Per row, what its interval covers: BETWEEN_MACHINES where the sides are on different machines
    and at least one side has two or more (the spread between machines is estimated), RUNS_ONLY where
    they are on different machines with one each, SAME_MACHINES where both sides were measured on the
    same machines (each machine ran both: its offset cancels out of the difference)."""
    m_a, m_b = base["machines"].to_numpy(dtype=float), rows["machines"].to_numpy(dtype=float)
    replicated = (m_a >= 1) & (m_b >= 1) & (m_a + m_b >= 3)
    return np.where(across, np.where(replicated, BETWEEN_MACHINES, RUNS_ONLY), SAME_MACHINES)


def machine_intervals(base: pd.DataFrame, rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per row, the ratio of the machine means' geometric means with the pooled two-sample t interval
    on their logs (df = m_a + m_b - 2), its p value and its minimum detectable effect; NaN where there are fewer than 3 machines in
    all or a side has a value that is not positive."""
    m_a, m_b = base["machines"].to_numpy(dtype=float), rows["machines"].to_numpy(dtype=float)
    mean_a, mean_b = base["m_log_mean"].to_numpy(dtype=float), rows["m_log_mean"].to_numpy(dtype=float)
    var_a, var_b = base["m_log_var"].to_numpy(dtype=float), rows["m_log_var"].to_numpy(dtype=float)
    dof = m_a + m_b - 2
    nonpositive = base["nonpositive"].to_numpy(dtype=bool) | rows["nonpositive"].to_numpy(dtype=bool)
    computable = (dof >= 1) & np.isfinite(mean_a) & np.isfinite(mean_b) & ~nonpositive
    with np.errstate(divide="ignore", invalid="ignore"):
        # a side with one machine adds nothing to the pooled sum of squares (its variance is NaN)
        pooled = (np.where(m_a >= 2, (m_a - 1) * var_a, 0.0) + np.where(m_b >= 2, (m_b - 1) * var_b, 0.0)) / dof
        # never below what rounding adds (stats.resolution_variance): machines that tie give no zero-width interval
        median_a, median_b = base["median"].to_numpy(dtype=float), rows["median"].to_numpy(dtype=float)
        step = np.fmin(resolution(median_a), resolution(median_b))
        pooled = np.fmax(pooled, np.fmax(resolution_variance(median_a, step), resolution_variance(median_b, step)))
        se = np.sqrt(pooled * (1 / m_a + 1 / m_b))
        diff = mean_b - mean_a
        t = special.stdtrit(dof, 0.5 + CONFIDENCE / 2)
        spread = np.where(se > 0, t * se, 0.0)
        p_value = np.where(se > 0, 2 * special.stdtr(dof, -np.abs(diff / se)), np.where(diff != 0, 0.0, 1.0))
    return {
        "computable": computable,
        "ratio": np.where(computable, np.exp(diff), np.nan),
        "ci_low": np.where(computable, np.exp(diff - spread), np.nan),
        "ci_high": np.where(computable, np.exp(diff + spread), np.nan),
        "p_value": np.where(computable, p_value, np.nan),
        "mde": np.where(computable, reported_mde(se, np.where(computable, dof, np.nan), np.minimum(m_a, m_b)), np.nan),
        "se": np.where(computable & (se > 0), se, np.nan),
        "dof": np.where(computable & (se > 0), dof, np.nan),
    }


def across_machines(data: pd.DataFrame, base: pd.DataFrame, rows: pd.DataFrame) -> np.ndarray:
    """Per row, whether its two sides were measured on different machines (different labels)."""
    machine = data.drop_duplicates("config").set_index("config")["machine"]
    return rows["config"].map(machine).to_numpy(dtype=object) != base["config"].map(machine).to_numpy(dtype=object)
