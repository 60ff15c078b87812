"""The overhead model of seed 001: T = T_base * (1 + sum_i C_i * x_i), fitted by NNLS.

Layers (x_i = 1 when active): ``tee`` (any memory-encryption technology), ``storage:<variant>``
(encrypted mechanisms, tmpfs) and ``transport:<variant>`` (tls, securechannel). Written as
T = T_base + sum_i a_i x_i with a_i = T_base * C_i, the model is linear with non-negative unknowns,
which scipy.optimize.nnls fits. Metrics where higher is better are modelled on their reciprocal
(time per unit of work). Intervals: percentile bootstrap, resampling samples within each
configuration. A layer that never changes within a workload cannot be estimated there and is left
out; a layer that only ever changes together with another (e.g. TEE and machine) is confounded,
which the table notes. NNLS cannot give a negative C: a layer that makes things faster (tmpfs
often does; its unconstrained least-squares coefficient is negative) is "not modelled" rather than
shown as C = 0, a cost of nothing it did not measure (``C[name] faster``); the comparison gives the
speed-up itself. The rows the verdict left out (implausible: ccbench.analysis.rows.plausibility) are
left out of the fits too (``without_left_out``), so the model never rests on a row the verdict refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ccbench.analysis.rows.reduce import measured

BOOTSTRAP = 200
#: the cell of a layer that made a case faster: no cost to model, and never a C of 0
NOT_MODELLED = "not modelled (faster: see the comparison)"


def layer_columns(frame: pd.DataFrame) -> pd.DataFrame:
    layers = pd.DataFrame(index=frame.index)
    layers["tee"] = (~frame["tee"].isin(["none"])).astype(float)
    storage = frame["storage"].fillna("disk")
    for value in sorted(set(storage.unique()) - {"disk"}):
        layers[f"storage:{value}"] = (storage == value).astype(float)
    transport = frame["transport"].fillna("plain")
    for value in sorted(set(transport.unique()) - {"plain"}):
        layers[f"transport:{value}"] = (transport == value).astype(float)
    return layers


def _fit(design: np.ndarray, y: np.ndarray) -> np.ndarray:
    """NNLS of ``y`` on ``design``: by the supports (_fit_many) for a handful of unknowns, else
    scipy.optimize.nnls (imported only then: loading it is a fifth of a report's time on seed 000)."""
    if design.shape[1] <= ENUMERATE_MAX:
        return _fit_many(design, y[None, :])[0]
    from scipy.optimize import nnls

    coefficients, _ = nnls(design, y)
    return coefficients


#: up to this many unknowns, bootstrap refits enumerate the supports instead of calling nnls per draw
ENUMERATE_MAX = 6


def _fit_many(design: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """NNLS for each row of ``targets`` against one small design, or against its own design where
    ``design`` is a stack of them (draws x observations x unknowns): an array (draws x unknowns).

    The NNLS solution is the least-squares solution on its support, so for a handful of unknowns
    every support is tried at once for all draws (one pseudo-inverse per support, or per support
    and draw), and each draw keeps the feasible solution (all >= 0) with the smallest residual, the
    smaller support on a tie, which is also the solution scipy's active-set nnls returns. Larger
    designs fall back to scipy.optimize.nnls per draw. tests/test_analysis.py checks the two agree.
    """
    unknowns = design.shape[-1]
    stacked = design.ndim == 3
    if unknowns > ENUMERATE_MAX:
        from scipy.optimize import nnls

        designs = design if stacked else [design] * len(targets)
        return np.array([nnls(d, row)[0] for d, row in zip(designs, targets)])
    draws = len(targets)
    best = np.zeros((draws, unknowns))
    best_residual = np.einsum("ij,ij->i", targets, targets)
    scale = np.abs(targets).max(axis=1) + 1e-300
    supports = sorted((tuple(i for i in range(unknowns) if mask >> i & 1) for mask in range(1, 1 << unknowns)), key=len)
    for support in supports:
        columns = design[..., support]
        if stacked:  # draws x observations x len(support): a pseudo-inverse per draw
            solution = np.einsum("dso,do->ds", np.linalg.pinv(columns), targets)
            residuals = targets - np.einsum("dos,ds->do", columns, solution)
        else:
            solution = targets @ np.linalg.pinv(columns).T  # draws x len(support)
            residuals = targets - solution @ columns.T
        residual = np.einsum("ij,ij->i", residuals, residuals)
        feasible = (solution >= -1e-12 * scale[:, None]).all(axis=1)
        better = feasible & (residual < best_residual * (1 - 1e-9) - 1e-12 * scale**2)
        if better.any():
            best[better] = 0.0
            best[np.ix_(better, support)] = np.clip(solution[better], 0.0, None)
            best_residual[better] = residual[better]
    return best


def _faster(design: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per layer (the design's columns after the first, T_base's): whether its unconstrained
    least-squares coefficient is negative, a speed-up NNLS would show as C = 0."""
    coefficients, *_ = np.linalg.lstsq(design, y, rcond=None)
    return coefficients[1:] < 0


def without_left_out(samples: pd.DataFrame, comparison: pd.DataFrame | None) -> pd.DataFrame:
    """The samples less those of the comparison rows the verdict left out (a non-empty ``implausible``
    reason): each such row's configuration, case and metric, its baseline's samples kept."""
    if comparison is None or comparison.empty or "implausible" not in comparison or samples.empty:
        return samples
    marked = comparison["implausible"].map(lambda v: isinstance(v, str) and bool(v.strip()))
    on = [k for k in ("workload", "params", "case", "metric", "config") if k in comparison and k in samples]
    if not marked.any() or not {"workload", "metric", "config"} <= set(on):
        return samples
    left = comparison.loc[marked, on].drop_duplicates()
    flagged = samples[on].merge(left[on].assign(_left=True), on=on, how="left")["_left"].fillna(False)
    return samples[~flagged.to_numpy(dtype=bool)]


def _ratios(fitted: np.ndarray) -> np.ndarray:
    """C_i = a_i / T_base per draw, for the draws with T_base > 0."""
    usable = fitted[fitted[:, 0] > 0]
    return usable[:, 1:] / usable[:, :1]


def fit_group(
    values: np.ndarray, layers: np.ndarray, configs: np.ndarray, rng: np.random.Generator, bootstrap: int = BOOTSTRAP
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """T_base, C_i, their bootstrap 2.5/97.5 percentiles, and which layers made it faster (_faster).

    The layers are constant within a configuration, so the least-squares fit over samples equals
    the fit over configuration means weighted by sqrt(n): the bootstrap resamples samples within
    each configuration and refits on the resampled means (fast: one small NNLS per resample).
    """
    names = np.unique(configs)
    groups = [np.flatnonzero(configs == name) for name in names]
    design = np.column_stack([np.ones(len(groups)), np.array([layers[g[0]] for g in groups])])
    weights = np.sqrt(np.array([len(g) for g in groups], dtype=float))
    weighted = design * weights[:, None]
    means = np.array([values[g].mean() for g in groups])
    coefficients = _fit(weighted, means * weights)
    faster = _faster(weighted, means * weights)
    base = coefficients[0]
    c = coefficients[1:] / base if base > 0 else np.full(layers.shape[1], np.nan)
    # int32 indices: half the random bits of the default int64, and the same draws' distribution
    resampled = np.column_stack(
        [values[g][rng.integers(0, len(g), size=(bootstrap, len(g)), dtype=np.int32)].mean(axis=1) for g in groups]
    )
    draws = _ratios(_fit_many(weighted, resampled * weights))
    if len(draws):
        low, high = np.percentile(draws, [2.5, 97.5], axis=0)
    else:
        low = high = np.full(layers.shape[1], np.nan)
    return float(base), c, low, high, faster


def fit_pooled(y: np.ndarray, layers: np.ndarray, rng: np.random.Generator, bootstrap: int):
    """Pooled fit over per-(workload, configuration) observations; bootstrap resamples observations;
    with which layers made them faster (_faster)."""
    design = np.column_stack([np.ones(len(y)), layers])
    coefficients = _fit(design, y)
    faster = _faster(design, y)
    base = coefficients[0]
    c = coefficients[1:] / base if base > 0 else np.full(layers.shape[1], np.nan)
    index = rng.integers(0, len(y), size=(bootstrap, len(y)))
    draws = _ratios(_fit_many(design[index], y[index]))  # every draw's own design, solved at once
    low, high = (
        np.percentile(draws, [2.5, 97.5], axis=0)
        if len(draws)
        else (np.full(layers.shape[1], np.nan), np.full(layers.shape[1], np.nan))
    )
    return float(base), c, low, high, faster


#: how per-case fits are pooled: by workload (its cases and metrics), by workload kind, or all together
POOL_BY = ("workload", "kind", "all")


@dataclass
class _Samples:
    """The samples a model is fitted to, as arrays row for row (integer codes for configurations and
    machines: the per-group unique/compare work runs on ints, not on label strings)."""

    #: the value, or its reciprocal for a higher-is-better metric (time per unit of work)
    time_like: np.ndarray
    #: one column per layer of ``layer_names``: 1.0 where the layer is active
    layers: np.ndarray
    layer_names: list[str]
    configs: np.ndarray
    machines: np.ndarray
    kinds: np.ndarray
    units: np.ndarray
    betters: np.ndarray


#: a case's contribution to its pool: (its values / its T_base, its layer rows, its configuration
#: codes, its confounding note, its label)
_Member = tuple[np.ndarray, np.ndarray, np.ndarray, str, str]


def overhead_model(
    frame: pd.DataFrame, bootstrap: int = BOOTSTRAP, seed: int = 0, pool_by: str = "workload"
) -> pd.DataFrame:
    """One row per (workload, case, metric) fit (``scope`` "case") and one pooled row per ``pool_by``
    group with two fits or more (``scope`` "pooled"), with C per layer and bootstrap intervals.

    Per-case rows: T_base in the metric's unit (``t_base_unit``; the reciprocal unit for
    higher-is-better metrics) and intervals from resampling samples within each configuration
    (measurement noise). Pooled rows: each case's per-configuration medians normalised by that
    case's T_base (so T_base is 1 by construction and not shown), intervals from resampling those
    observations (the spread between cases); their note carries every note of the cases pooled.
    """
    if pool_by not in POOL_BY:
        raise ValueError(f"pool_by must be one of {POOL_BY}, not {pool_by!r}")
    data, samples = _modelled(frame)
    if samples is None:
        return pd.DataFrame()
    # one generator for every fit, cases first and then pools, in a fixed order: the same seed gives
    # the same intervals
    rng = np.random.default_rng(seed)
    rows = []
    pools: dict[str, list[_Member]] = {}
    for key, index in data.groupby(["workload", "params", "case", "metric"], sort=False).indices.items():
        fitted = _case_row(key, index, samples, rng, bootstrap)
        if fitted is None:
            continue
        row, member = fitted
        rows.append(row)
        if member is not None:
            pool = {"workload": key[0], "kind": str(samples.kinds[index[0]]), "all": "all workloads"}[pool_by]
            pools.setdefault(pool, []).append(member)
    if not rows:
        return pd.DataFrame()
    for pool, members in pools.items():
        if len(members) < 2:
            continue  # one case: its own row says it all
        row = _pooled_row(pool, members, samples.layer_names, rng, bootstrap)
        if row is not None:
            rows.append(row)
    return pd.DataFrame(rows)


def _modelled(frame: pd.DataFrame) -> tuple[pd.DataFrame, _Samples | None]:
    """The measured samples of metrics with a direction and a finite time-like value, as a frame
    (for grouping) and as arrays; None for the arrays when there are none."""
    data = measured(frame)
    if data.empty:
        return data, None
    data = data[data["better"].isin(["lower", "higher"])]
    values = data["value"].to_numpy(dtype=float)
    with np.errstate(divide="ignore"):
        time_like = np.where(data["better"].to_numpy() == "higher", 1.0 / values, values)
    keep = np.isfinite(time_like)
    data, time_like = data[keep], time_like[keep]
    if data.empty:
        return data, None
    layers = layer_columns(data)
    return data, _Samples(
        time_like=time_like,
        layers=layers.to_numpy(),
        layer_names=list(layers.columns),
        configs=pd.factorize(data["config"], sort=False)[0],
        machines=pd.factorize(data["machine"], sort=False)[0],
        kinds=data["kind"].to_numpy() if "kind" in data else np.array([""] * len(data)),
        units=data["unit"].to_numpy(),
        betters=data["better"].to_numpy(),
    )


def _case_row(
    key: tuple, index: np.ndarray, samples: _Samples, rng: np.random.Generator, bootstrap: int
) -> tuple[dict, _Member | None] | None:
    """One case's fit over the layers that vary within it: its row and, where T_base > 0, what it
    contributes to its pool; None when no layer varies or it has one configuration."""
    group_layers = samples.layers[index]
    varying = [i for i in range(len(samples.layer_names)) if (group_layers[:, i] != group_layers[0, i]).any()]
    group_configs = samples.configs[index]
    if not varying or (group_configs == group_configs[0]).all():
        return None
    x = group_layers[:, varying]
    base, c, low, high, faster = fit_group(samples.time_like[index], x, group_configs, rng, bootstrap)
    names = [samples.layer_names[i] for i in varying]
    unit = str(samples.units[index[0]])
    note = _confounded(samples.machines[index], x, names)
    row = {
        "scope": "case",
        "workload": key[0],
        "case": key[2],
        "metric": key[3],
        "t_base": base,
        "t_base_unit": f"1/({unit})" if samples.betters[index[0]] == "higher" else unit,
        "n": len(index),
        "configs": np.unique(group_configs).size,
        "confounded": note,
    }
    _add_coefficients(row, names, c, low, high, faster)
    if not base > 0:  # (a NaN T_base as well)
        return row, None
    label = f"{key[0]} {key[2]} {key[3]}".strip()
    return row, (samples.time_like[index] / base, group_layers, group_configs, note, label)


def _pooled_row(
    pool: str, members: list[_Member], layer_names: list[str], rng: np.random.Generator, bootstrap: int
) -> dict | None:
    """The pooled fit of a pool's cases over the layers that vary across them; None when none varies."""
    # each case's per-configuration medians, normalised by its T_base, are the observations (so
    # a case with many samples does not outweigh the others)
    observations, designs = [], []
    for y, x, group_configs, _, _ in members:
        for config in np.unique(group_configs):
            mask = group_configs == config
            observations.append(float(np.median(y[mask])))
            designs.append(x[mask][0])
    design = np.array(designs)
    varying = [i for i in range(len(layer_names)) if np.unique(design[:, i]).size > 1]
    if not varying:
        return None
    y = np.array(observations)
    base, c, low, high, faster = fit_pooled(y, design[:, varying], rng, bootstrap)
    notes = list(dict.fromkeys(note for *_, note, _ in members if note))
    row = {
        "scope": "pooled",
        "workload": pool,
        "case": f"{len(members)} cases pooled",
        "metric": "",
        "t_base": base,
        "t_base_unit": "",
        "n": len(y),
        "configs": len(set(c for *_, gc, _, _ in members for c in gc)),
        "confounded": "; ".join(notes),
        "members": ", ".join(label for *_, label in members),
    }
    _add_coefficients(row, [layer_names[i] for i in varying], c, low, high, faster)
    return row


def _add_coefficients(
    row: dict, names: list[str], c: np.ndarray, low: np.ndarray, high: np.ndarray, faster: np.ndarray
) -> None:
    """C per layer with its interval, as the row's ``C[name]``, ``C[name] low`` and ``C[name] high``, and
    ``C[name] faster``: the layer made it faster, so C (held at 0 by NNLS) is not modelled."""
    for name, value, lo, hi, quicker in zip(names, c, low, high, faster):
        row[f"C[{name}]"], row[f"C[{name}] low"], row[f"C[{name}] high"] = value, lo, hi
        row[f"C[{name}] faster"] = bool(quicker)


def _confounded(machines: np.ndarray, layers: np.ndarray, names: list[str]) -> str:
    notes = []
    if "tee" in names and np.unique(machines).size > 1:
        tee = layers[:, names.index("tee")]
        if all(np.unique(tee[machines == m]).size == 1 for m in np.unique(machines)):
            notes.append("tee differs only across machines: C[tee] includes machine differences")
    for i, a in enumerate(names):
        for j in range(i + 1, len(names)):
            if (layers[:, i] == layers[:, j]).all():
                notes.append(f"{a} and {names[j]} always change together")
    return "; ".join(notes)


def model_table(model: pd.DataFrame, scope: str | None = None) -> pd.DataFrame:
    """The seed-001 style table as text cells: one C column per layer as 'value [low, high]'; per-case
    rows carry T_base with its unit, pooled rows (normalised: T_base = 1) do not. ``scope`` "case" or
    "pooled" keeps only those rows."""
    if model.empty:
        return model
    from ccbench.analysis import format as fmt

    if scope is not None and "scope" in model:
        model = model[model["scope"] == scope]
        if model.empty:
            return model
    layers = sorted({c[2:-1] for c in model.columns if c.startswith("C[") and c.endswith("]")})
    rows = []
    for _, row in model.iterrows():
        pooled = row.get("scope") == "pooled"
        out = {"workload": row["workload"], "case": row["case"]}
        if not pooled:
            out["metric"] = row["metric"]
            out["T_base"] = fmt.number(row["t_base"], row.get("t_base_unit") or None)
        for layer in layers:
            value = row.get(f"C[{layer}]")
            if value is None or pd.isna(value):
                out[f"C_{layer}"] = ""
            elif row.get(f"C[{layer}] faster") is True:
                out[f"C_{layer}"] = NOT_MODELLED
            else:
                low, high = fmt.ratio(row[f"C[{layer}] low"]), fmt.ratio(row[f"C[{layer}] high"])
                out[f"C_{layer}"] = f"{value:.3f} [{low}, {high}]"
        out["note"] = row.get("confounded", "") or ""
        rows.append(out)
    return pd.DataFrame(rows)


def params_text(params: str) -> str:
    try:
        return ", ".join(f"{k}={v}" for k, v in json.loads(params).items())
    except ValueError:
        return params
